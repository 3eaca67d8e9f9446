"""The Scores against K panel of ``report`` and ``plot --k-panel`` on a sweep of the example
corpus (K = 3, 5, 8 and seeds 1, 2, 3): how the runs are grouped, that its numbers are
evaluate's and compare's, that runs of different stores are refused, and the panel as a
browser shows it."""
from __future__ import annotations

import json

import numpy as np
import pytest

from tests.integration._cli import EXAMPLE, fails, ok, write_config
from topictk.errors import CorpusUsageError
from topictk.evaluation.coherence import top_words
from topictk.evaluation.kpanel import k_panel, rbo
from topictk.evaluation.run import LoadedRun
from topictk.evaluation.runs import discover_runs

SHORT = {"inference": {"algorithm": "gibbs", "iterations": 20, "burn_in": 10, "thin": 5},
         "training": {"seed": 1, "eval_every": 10, "checkpoint_every": 20},
         "evaluation": {"fold_in_sweeps": 6, "fold_in_burn_in": 3}}


@pytest.fixture(scope="module")
def sweep(tmp_path_factory, example_store):
    """``train --sweep model.topics=3,5,8 --sweep training.seed=1,2,3`` (20 sweeps each)."""
    folder = tmp_path_factory.mktemp("kpanel")
    config = write_config(folder, example_store, **SHORT)
    ok("train", "--config", config, "--sweep", "model.topics=3,5,8", "--sweep",
       "training.seed=1,2,3", "--out", folder / "sweep", "-q")
    return folder / "sweep"


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The example text as a reference store: every document, none held out, the words in
    more than a fifth of them left out (so that some top words are missing)."""
    out = tmp_path_factory.mktemp("kpanel-ref") / "reference"
    ok("prepare", EXAMPLE, "--out", out, "--test-docs", "0", "--max-df", "0.2")
    return out


def test_runs_are_grouped_by_k_with_the_seeds_as_replicates(sweep):
    panel = k_panel(discover_runs([sweep]), quiet=True)
    assert panel.x_key == "model.topics" and panel.x_values == [3, 5, 8]
    assert panel.seeds == [1, 2, 3] and panel.series == [""]
    assert sorted((r.x, r.seed) for r in panel.runs) == [(k, s) for k in (3, 5, 8)
                                                          for s in (1, 2, 3)]
    assert [(s["x"], len(s["pairs"])) for s in panel.stability] == [(3, 3), (5, 3), (8, 3)]
    perplexity = panel.summary("perplexity")
    assert [(g["x"], g["n"]) for g in perplexity] == [(3, 3), (5, 3), (8, 3)]
    assert all(g["low"] <= g["mean"] <= g["high"] for g in perplexity)
    assert panel.band_text("perplexity") == "band: min–max over 3 seeds"
    assert panel.band_text("stability") == "band: min–max over 3 seed pairs"
    assert "reference_npmi" not in panel.measures
    # one K only (the seeds of K = 5): no sweep to draw
    assert k_panel(discover_runs(sorted(sweep.glob("model.topics=5,*"))), quiet=True) is None


def test_the_panel_numbers_are_those_of_evaluate_and_compare(sweep, reference):
    panel = k_panel(discover_runs([sweep]), reference=reference, quiet=True)
    assert panel.reference["present"] < panel.reference["words"]   # --max-df drops some
    for run in panel.runs:
        scores = json.loads(ok("evaluate", run.path, "--json", "-q").stdout)
        for key in ("perplexity", "npmi", "umass", "diversity"):
            assert run.scores[key] == pytest.approx(scores[key], rel=1e-12), key
        if run.seed == 1:
            on_reference = json.loads(ok("evaluate", run.path, "--json", "-q", "--coherence",
                                         "c_npmi", "--reference", reference).stdout)
            assert run.scores["reference_npmi"] == pytest.approx(on_reference["c_npmi"],
                                                                 rel=1e-12)
        loaded = LoadedRun(run.path)
        top = top_words(np.asarray(loaded.topic_word()), 10)
        pairs = [rbo(list(top[a]), list(top[b])) for a in range(len(top))
                 for b in range(a + 1, len(top))]
        assert run.scores["inverted_rbo"] == pytest.approx(1 - np.mean(pairs), rel=1e-12)
    at_five = next(s for s in panel.stability if s["x"] == 5)
    for a, b, value in at_five["pairs"]:
        aligned = json.loads(ok("compare", sweep / a, sweep / b, "--align", "--format",
                                "json").stdout)["alignments"][0]["pairs"]
        assert value == pytest.approx(np.mean([1 - p["distance"] for p in aligned]))


def test_runs_of_different_stores_are_refused_or_warned_about(tmp_path, sweep, other_store):
    other = tmp_path / "other"
    config = write_config(tmp_path, other_store, output=str(other), model={"topics": 4},
                          **SHORT)
    ok("train", "--config", config, "-q")
    runs = discover_runs([sweep / "model.topics=3,training.seed=1", other])
    # each store a series of its own: a single run of each is no line to draw
    assert k_panel(runs, allow_different_corpora=True, quiet=True) is None
    runs = discover_runs([sweep / "model.topics=3,training.seed=1",
                          sweep / "model.topics=5,training.seed=1", other])
    with pytest.raises(CorpusUsageError, match="different corpus stores"):
        k_panel(runs, quiet=True)
    panel = k_panel(runs, allow_different_corpora=True, quiet=True)
    assert len(panel.series) == 2 and "different corpus stores" in panel.warnings[0]
    message = fails(2, "plot", sweep / "model.topics=3,training.seed=1", other, "--k-panel",
                    "--out", tmp_path / "k.png")
    assert "different corpus stores" in message


def test_plot_draws_the_panel_and_refuses_runs_that_are_no_sweep(tmp_path, sweep, reference):
    out = tmp_path / "k.png"
    outcome = ok("plot", sweep, "--k-panel", "--reference", reference, "--out", out, "-q")
    assert "scores against K (topics) of 9 run(s)" in outcome.stdout
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    message = fails(2, "plot", sweep / "model.topics=3,training.seed=1", "--k-panel",
                    "--out", tmp_path / "one.png")
    assert message.startswith("--k-panel: the runs are not a sweep")


def test_the_report_draws_the_panel_with_bands_and_its_protocol(browser, tmp_path, sweep,
                                                                 reference):
    out = tmp_path / "report.html"
    ok("report", sweep, "--reference", reference, "--out", out, "-q")
    page = browser.new_page(viewport={"width": 1200, "height": 900})
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: m.type == "error" and errors.append(m.text))
    page.goto(out.as_uri())
    panel = page.locator("#k-panel")
    assert panel.locator("h2").inner_text() == "Scores against K"
    charts = panel.locator("svg.kpanel-chart")
    measures = [charts.nth(i).get_attribute("data-measure") for i in range(charts.count())]
    assert measures == ["perplexity", "npmi", "umass", "reference_npmi", "diversity",
                        "inverted_rbo", "stability"]
    for i in range(charts.count()):
        chart = charts.nth(i)
        box = chart.bounding_box()
        assert box["width"] > 200 and box["height"] > 150
        xs = chart.locator("circle.run-point").evaluate_all(
            "els => els.map(e => e.getAttribute('data-x'))")
        assert sorted(set(xs)) == ["3", "5", "8"] and len(xs) == 9      # 9 runs, 9 pairs
        band = chart.locator("polygon.band")
        assert band.count() == 1 and band.bounding_box()["height"] > 0
        assert len(chart.locator("polyline.mean-line").get_attribute("points").split()) == 3
        direction = chart.locator("text.direction").text_content()
        better = "lower" if measures[i] == "perplexity" else "higher"
        assert direction.startswith(f"{better} is better")
        assert "band: min–max over 3 " in direction
    line = panel.locator(".kpanel-protocol").inner_text()
    assert ("held-out perplexity: evaluate: document completion on all 34 test documents, "
            "gibbs fold-in 6 sweeps (3 burn-in)") in line
    assert "top 10 words, document co-occurrence in the 307 training documents" in line
    assert "sliding window of 10 tokens over the 341 documents of reference" in line
    assert "vocabulary: 1,737 words" in line and line.endswith("seeds: 1, 2, 3")
    data = json.loads(page.locator("#k-panel-data").text_content())
    assert data["x_values"] == [3, 5, 8] and len(data["runs"]) == 9
    assert [g["n"] for g in data["summary"]["stability"]] == [3, 3, 3]
    page.close()
    assert errors == []


def test_a_report_of_runs_that_are_no_sweep_has_no_panel(tmp_path, sweep):
    out = tmp_path / "report.html"
    ok("report", *sorted(sweep.glob("model.topics=3,*")), "--out", out, "-q")
    assert 'id="k-panel"' not in out.read_text()
