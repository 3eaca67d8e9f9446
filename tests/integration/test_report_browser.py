"""The report page as a person uses it, in a real headless Chromium (Debian's ``chromium``,
driven by Playwright): the charts and the map render, selecting a topic and moving lambda
change the bars, the console stays free of errors and the page makes no request."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

from tests.integration._cli import ok
from topictk.evaluation.report import TERM_TOPIC_FLOOR



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
    run.locator("svg.map circle.topic[data-topic='2']").click()        # row 2: topic 3
    assert run.locator(".bars-title").text_content().startswith("Topic 3 ·")
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
    assert run.locator(".bars-title").text_content().startswith("Topic 5 ·")
    dmr = page.locator("#run-1")
    dmr.locator("svg.map circle.topic[data-topic='0']").click()
    assert dmr.locator(".features td").count() >= 3
    assert seen["errors"] == []
    assert seen["requests"] == [seen["url"]]


# ----------------------------------------------------------------------------- reading topics
def _radii(section) -> dict[int, float]:
    """Circle radius of every topic row of the section's map."""
    pairs = section.locator("svg.map circle.topic").evaluate_all(
        "els => els.map(e => [+e.dataset.topic, +e.getAttribute('r')])")
    return dict(pairs)


def _expected_radii(section, values) -> dict[int, float]:
    """Radii of circles whose areas stand for ``values`` at the map's scale."""
    svg = section.locator("svg.map")
    scale = float(svg.get_attribute("data-scale"))
    least = float(svg.get_attribute("data-min-radius"))
    return {k: max(math.sqrt(scale * v), least) for k, v in enumerate(values)}


def _term_posterior(run_dir, word: str):
    """P(topic | word) = phi_kw p(k) / sum_j phi_jw p(j), p(k) the topic's share of the
    training tokens (as the map sizes circles), computed here from the run."""
    from topictk.evaluation import ldavis
    from topictk.evaluation.run import LoadedRun

    loaded = LoadedRun(run_dir)
    phi = np.asarray(loaded.topic_word(), dtype=np.float64)
    train = loaded.store.train()
    freq = ldavis.term_frequencies(train.indices, train.counts, loaded.store.n_words)
    shares = ldavis.topic_shares(phi, freq)
    column = shares * phi[:, list(loaded.store.vocab).index(word)]
    posterior = column / column.sum()
    # the page leaves out the smallest, whose circles are drawn at the smallest size
    return shares, np.where(posterior >= TERM_TOPIC_FLOOR, posterior, 0.0)


def test_hovering_a_term_sizes_the_circles_by_p_topic_given_term(page_of, report_runs):
    page, seen = page_of(report_runs["gibbs"])
    run = page.locator("#run-0")
    shares, _ = _term_posterior(report_runs["gibbs"], _bars(run)[0])
    before = _radii(run)
    assert before == pytest.approx(_expected_radii(run, shares), abs=0.06)
    assert run.locator(".map-sizes").text_content() == "circle area: share of tokens"
    for nth in (0, 7):                              # two terms of the most salient
        row = run.locator("svg.bars g.term-row").nth(nth)
        word = row.locator("text.term").text_content()
        row.hover()
        _, posterior = _term_posterior(report_runs["gibbs"], word)
        assert run.locator(".map-sizes").text_content() == f"circle area: P(topic | '{word}')"
        assert _radii(run) == pytest.approx(_expected_radii(run, posterior), abs=0.06)
        assert _radii(run) != pytest.approx(before, abs=0.5)
        page.mouse.move(5, 5)                       # leaving the bar restores the shares
        assert _radii(run) == before
        assert run.locator(".map-sizes").text_content() == "circle area: share of tokens"
    # keyboard users: focusing a bar does the same, and leaving it restores
    run.locator("svg.map circle.topic[data-topic='1']").click()
    row = run.locator("svg.bars g.term-row").nth(2)
    word = row.locator("text.term").text_content()
    row.focus()
    _, posterior = _term_posterior(report_runs["gibbs"], word)
    assert _radii(run) == pytest.approx(_expected_radii(run, posterior), abs=0.06)
    page.keyboard.press("Tab")                      # the next bar: its term
    word = run.locator("svg.bars g.term-row").nth(3).locator("text.term").text_content()
    _, posterior = _term_posterior(report_runs["gibbs"], word)
    assert _radii(run) == pytest.approx(_expected_radii(run, posterior), abs=0.06)
    run.locator("input.lambda").focus()             # away from the bars: the shares
    assert _radii(run) == before
    assert seen["errors"] == []


def test_previous_next_keys_and_the_number_box_select_topics(page_of, report_runs):
    page, seen = page_of(report_runs["gibbs"])               # K = 6
    run = page.locator("#run-0")
    title, box = run.locator(".bars-title"), run.locator("input.topic-number")
    assert box.input_value() == ""
    run.locator("button.topic-next").click()
    assert title.text_content().startswith("Topic 1 ·") and box.input_value() == "1"
    run.locator("button.topic-next").click()
    run.locator("button.topic-next").click()
    assert title.text_content().startswith("Topic 3 ·") and box.input_value() == "3"
    assert "selected" in run.locator("circle.topic[data-topic='2']").get_attribute("class")
    run.locator("button.topic-prev").click()
    assert title.text_content().startswith("Topic 2 ·")
    box.fill("6")
    assert title.text_content().startswith("Topic 6 ·")
    run.locator("button.topic-next").click()                 # wraps round
    assert title.text_content().startswith("Topic 1 ·")
    run.locator("button.topic-prev").click()
    assert title.text_content().startswith("Topic 6 ·")
    box.fill("9")                                            # no such topic: said, kept
    error = run.locator(".topic-number-error")
    assert error.is_visible() and error.text_content() == \
        "no topic 9: topics are numbered 1 to 6"
    assert title.text_content().startswith("Topic 6 ·")
    box.fill("")                                             # empty: no topic
    assert title.text_content().startswith("Most salient terms") and not error.is_visible()
    # clicks on the map show in the box; the arrow keys step while the section has focus
    run.locator("svg.map circle.topic[data-topic='3']").click()
    assert box.input_value() == "4"
    page.keyboard.press("ArrowRight")
    assert title.text_content().startswith("Topic 5 ·") and box.input_value() == "5"
    run.locator("h2").click()                                # the section itself
    page.keyboard.press("ArrowLeft")
    page.keyboard.press("ArrowLeft")
    assert title.text_content().startswith("Topic 3 ·")
    assert seen["errors"] == []


def test_the_map_has_a_size_legend_to_its_scale(page_of, report_runs):
    page, seen = page_of(report_runs["gibbs"])
    run = page.locator("#run-0")
    legend = run.locator("svg.size-legend circle.legend-circle")
    assert 2 <= legend.count() <= 3
    scale = float(run.locator("svg.map").get_attribute("data-scale"))
    labels = run.locator("svg.size-legend text").all_text_contents()
    for i in range(legend.count()):
        share = float(legend.nth(i).get_attribute("data-share"))
        assert float(legend.nth(i).get_attribute("r")) == pytest.approx(
            math.sqrt(scale * share), abs=0.06)
        assert f"{100 * share:g}%" in labels
    assert seen["errors"] == []


def test_the_page_numbers_topics_as_topictk_topics_does(page_of, report_runs):
    """Topic n of the page (map label, number box, bars) is topic n of ``topictk topics``:
    at lambda = 1 its bars are its top words in the same order, ties by word id."""
    run_dir = report_runs["gibbs"]
    listed = json.loads(ok("topics", run_dir, "--top", "30", "--format", "json").stdout)
    page, seen = page_of(run_dir)
    run = page.locator("#run-0")
    labels = dict(run.locator("svg.map text.topic-label").evaluate_all(
        "els => els.map(e => [+e.dataset.topicLabel, e.textContent])"))
    assert labels and all(text == str(k + 1) for k, text in labels.items())
    for topic in listed["topics"]:
        run.locator("input.topic-number").fill(str(topic["topic"]))
        assert run.locator(".bars-title").text_content().startswith(f"Topic {topic['topic']} ·")
        assert _bars(run) == [w["word"][:17] + "…" if len(w["word"]) > 18 else w["word"]
                              for w in topic["words"]]
    assert seen["errors"] == []
