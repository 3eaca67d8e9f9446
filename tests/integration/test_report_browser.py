"""The report page as a person uses it, in a real headless Chromium (Debian's ``chromium``,
driven by Playwright): the charts and the map render, selecting a topic and moving lambda
change the bars, the console stays free of errors and the page makes no request."""
from __future__ import annotations

import shutil

import pytest

from tests.integration._cli import ok

CHROMIUM = ("chromium", "chromium-browser")


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    executable = next(filter(None, map(shutil.which, CHROMIUM)), None)
    assert executable, "no chromium on PATH: install Debian's chromium package (.ci/run does)"
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=executable, headless=True)
        yield launched
        launched.close()


@pytest.fixture
def page_of(browser, tmp_path):
    """Open the report of the given runs; returns the page and what it did: console errors,
    page errors and every request it made."""
    opened = []

    def open_report(*runs):
        out = tmp_path / "report.html"
        ok("report", *runs, "--out", out, "--allow-different-corpora")
        page = browser.new_page(viewport={"width": 1200, "height": 900})
        seen = {"errors": [], "requests": [], "url": out.as_uri()}
        page.on("console", lambda m: m.type in ("error", "warning")
                and seen["errors"].append(m.text))
        page.on("pageerror", lambda e: seen["errors"].append(str(e)))
        page.on("request", lambda r: seen["requests"].append(r.url))
        page.route("**/*", lambda route: route.continue_() if route.request.url == seen["url"]
                   else route.abort())
        page.goto(seen["url"])
        opened.append(page)
        return page, seen

    yield open_report
    for page in opened:
        page.close()


def _size(page, selector: str) -> list[tuple[float, float]]:
    return page.eval_on_selector_all(
        selector, "els => els.map(e => { const b = e.getBoundingClientRect(); "
                  "return [b.width, b.height]; })")


def _bars(section) -> list[str]:
    return section.locator("svg.bars text.term").all_text_contents()


def test_charts_and_maps_render(page_of, report_runs):
    page, seen = page_of(report_runs["gibbs"], report_runs["dlda"], report_runs["dmr"])
    curves = _size(page, "svg.chart.curve")
    assert len(curves) == 2 and all(w > 100 and h > 100 for w, h in curves)
    assert all(w > 0 and h > 0 for w, h in _size(page, "svg.chart.curve polyline"))
    circles = _size(page, "#run-0 svg.map circle.topic")
    assert len(circles) == 6 and all(w > 0 and h > 0 for w, h in circles)
    assert len(_size(page, "#run-1 svg.map circle.topic")) == 16
    assert len(_size(page, "#run-0 svg.npmi rect.npmi-bar")) == 6
    bars = _size(page, "#run-0 svg.bars rect.bar-total:not(.key)")
    assert len(bars) == 30 and all(w > 0 and h > 0 for w, h in bars)
    assert page.locator("#run-1 .tree details").count() == 4        # the top layer's topics
    # the score column says what it is: evaluate's protocol on every test document; the
    # curves say they are in-training estimates on some of them
    heading = page.locator("section.summary thead th").nth(6).inner_text()
    assert heading.startswith("held-out perplexity")
    assert "evaluate: document completion on each run's full held-out set" in heading
    notes = page.locator("section.summary p.note").all_inner_texts()
    assert any(n.endswith("held-out perplexity by evaluate: document completion on all 34 "
                          "test documents, gibbs fold-in 10 sweeps (5 burn-in)") for n in notes)
    assert any("These runs are scored differently" in n and "evaluation.fold_in_sweeps" in n
               and "corpus store" in n for n in notes)
    label = page.locator("section.curves .curve-label").inner_text()
    assert "in-training estimate on 34 of 34 test documents" in label
    assert "not the runs' scores" in label
    assert seen["errors"] == []
    assert seen["requests"] == [seen["url"]]


def test_the_score_column_of_runs_of_one_store_names_the_protocol(page_of, report_runs):
    page, seen = page_of(report_runs["gibbs"], report_runs["gibbs8"])
    heading = page.locator("section.summary thead th").nth(6).inner_text()
    lines = [line.strip() for line in heading.splitlines() if line.strip()]  # browser's spacing
    assert lines == ["held-out perplexity", "evaluate: document completion on all 34 test "
                     "documents, gibbs fold-in 10 sweeps (5 burn-in)"]
    assert page.locator("section.curves h2").inner_text() == "In-training perplexity estimates"
    assert seen["errors"] == []


def test_selecting_a_topic_and_moving_lambda_change_the_bars(page_of, report_runs):
    page, seen = page_of(report_runs["gibbs"], report_runs["dmr"])
    run = page.locator("#run-0")
    salient = _bars(run)
    assert run.locator(".bars-title").text_content().startswith("Most salient terms")
    run.locator("svg.map circle.topic[data-topic='2']").click()
    assert run.locator(".bars-title").text_content().startswith("Topic 2 ·")
    at_one = _bars(run)
    assert at_one != salient and run.locator("svg.bars rect.bar-topic:not(.key)").count() == 30
    assert "selected" in run.locator("circle.topic[data-topic='2']").get_attribute("class")
    slider = run.locator("input.lambda")
    slider.focus()
    page.keyboard.press("Home")                     # lambda = 0: ranked by lift alone
    assert run.locator(".lambda-value").text_content() == "0.00"
    at_zero = _bars(run)
    assert at_zero != at_one and set(at_zero) != set(at_one)
    run.locator("svg.npmi rect.npmi-bar[data-topic='4']").click()    # from the NPMI chart
    assert run.locator(".bars-title").text_content().startswith("Topic 4 ·")
    dmr = page.locator("#run-1")
    dmr.locator("svg.map circle.topic[data-topic='0']").click()
    assert dmr.locator(".features td").count() >= 3
    assert seen["errors"] == []
    assert seen["requests"] == [seen["url"]]
