"""``topictk report``: the page of real runs of every kind on the example corpus, what it holds
and what it refuses."""
from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from tests.integration._cli import fails, ok
from topictk.evaluation.report import RunReport, topic_data
from topictk.evaluation.report_html import render


def _data(page: str) -> dict:
    match = re.search(r'<script type="application/json" id="report-data">(.*?)</script>', page,
                      re.DOTALL)
    return json.loads(match.group(1))


def _report(tmp_path: Path, *args) -> str:
    out = tmp_path / "report.html"
    ok("report", *args, "--out", out)
    return out.read_text(encoding="utf-8")


def test_report_of_runs_of_one_store(tmp_path, report_runs):
    page = _report(tmp_path, report_runs["gibbs"], report_runs["gibbs8"], report_runs["dlda"])
    # self-contained: nothing is loaded from elsewhere (the SVG namespace is a name, not a
    # location), and the page may not ask
    bare = page.replace("http://www.w3.org/2000/svg", "")
    assert not re.search(r"<link|<img|\bsrc=|url\(|https?://", bare)
    assert "default-src 'none'" in page
    assert page.count('<section class="run"') == 3
    curves = re.findall(r'<svg class="chart curve".*?</svg>', page, re.DOTALL)
    assert len(curves) == 2 and [c.count("<polyline") for c in curves] == [3, 3]
    # gibbs and gibbs8 differ in K only: a sweep of two values, so the page has a K panel
    assert page.count('id="k-panel-data"') == 1
    maps = re.findall(r'<svg class="map".*?</svg>', page, re.DOTALL)
    assert [m.count('<circle class="topic"') for m in maps] == [6, 8, 16]
    data = _data(page)["runs"]
    assert [len(r["share"]) for r in data] == [6, 8, 16]
    for run in data:
        assert sum(run["share"]) == pytest.approx(1.0)
        assert len(run["default"]) == 30 and len(run["npmi"]) == len(run["share"])
        for topic in run["topic"]:
            assert len(topic["terms"]) >= 30
            assert all(f <= run["total"][w] + 0.1 for w, f in zip(topic["terms"], topic["freq"]))
    assert "Topic tree" in page and "L3 #" in page          # the deep model's hierarchy


def test_summary_numbers_are_those_of_evaluate(tmp_path, report_runs):
    import topictk

    page = _report(tmp_path, report_runs["gibbs"])
    scored = topictk.load_run(report_runs["gibbs"]).evaluate()
    row = re.search(r'<tbody><tr data-run="0">(.*?)</tr>', page, re.DOTALL).group(1)
    cells = re.findall(r"<td>(.*?)</td>", row, re.DOTALL)
    assert cells[7:10] == [f"{scored['umass']:.4g}", f"{scored['npmi']:.4g}",
                           f"{scored['diversity']:.4g}"]
    # the run's score is evaluate's held-out perplexity, not the curve's last in-training
    # estimate
    assert cells[6] == f"{scored['perplexity']:.5g}"
    assert _data(page)["scores"][0]["perplexity"] == scored["perplexity"]
    # the estimator of theta the score used is named by the page's data and the legend
    assert _data(page)["scores"][0]["estimator"] == scored["estimator"] == "gibbs"
    assert f"held-out perplexity {scored['perplexity']:.5g} (theta: gibbs)" in page
    assert "gibbs fold-in" in re.search(r'<span class="dim protocol"[^>]*>(.*?)</span>',
                                        page).group(1)
    last = json.loads((report_runs["gibbs"] / "metrics.jsonl").read_text().splitlines()[-1])
    assert last["perplexity_point"] != scored["perplexity"]
    assert cells[4] == "40 of 40" and cells[3] == "K = 6"


def test_dmr_runs_show_the_metadata_weights(tmp_path, report_runs):
    data = _data(_report(tmp_path, report_runs["dmr"]))["runs"][0]
    assert len(data["features"]) == len(data["share"])
    names = {f["feature"] for topic in data["features"] for f in topic}
    assert names <= {"group=a", "group=b", "group=c", "score"} and names


def test_runs_of_different_stores_are_refused_or_marked(tmp_path, report_runs):
    out = tmp_path / "r.html"
    message = fails(2, "report", report_runs["gibbs"], report_runs["dmr"], "--out", out)
    assert "trained on another corpus store" in message
    assert "--allow-different-corpora" in message and not out.exists()
    page = _report(tmp_path, report_runs["gibbs"], report_runs["dmr"],
                   "--allow-different-corpora")
    assert "not comparable" in page and "stroke-dasharray" in page and " †" in page


def test_an_unfinished_run_shows_its_checkpoint_or_what_is_missing(tmp_path, report_runs):
    run = tmp_path / "unfinished"
    shutil.copytree(report_runs["gibbs"], run)
    (run / "model.npz").unlink()
    page = _report(tmp_path, run)
    assert "model.npz is missing" in page and "checkpoint at step 40" in page
    assert page.count('<circle class="topic"') == 6
    shutil.rmtree(run / "checkpoints")
    (tmp_path / "report.html").unlink()
    page = _report(tmp_path, run)
    assert "no topics to show" in page and "--resume" in page
    assert '<circle class="topic"' not in page
    assert page.count("<polyline") == 2          # its curve in both charts
    assert _data(page)["runs"] == [None]


def test_out_must_be_a_new_file_or_forced(tmp_path, report_runs):
    message = fails(2, "report", report_runs["gibbs"], "--out", tmp_path)
    assert message == f"{tmp_path}: is a folder; --out takes a file name"
    mine = tmp_path / "notes.html"
    mine.write_text("mine")
    assert "exists; add --force" in fails(2, "report", report_runs["gibbs"], "--out", mine)
    assert mine.read_text() == "mine"
    ok("report", report_runs["gibbs"], "--out", mine, "--force")
    assert mine.read_text().startswith("<!DOCTYPE html>")
    assert "is inside the input" in fails(2, "report", report_runs["gibbs"], "--out",
                                          report_runs["gibbs"] / "report.html")
    assert "is inside the run" in fails(2, "report", report_runs["gibbs"], "--out",
                                        report_runs["gibbs8"] / "report.html")


def test_a_folder_that_is_not_a_run_is_refused(tmp_path, report_runs):
    message = fails(2, "report", report_runs["gibbs"], tmp_path, "--out", tmp_path / "r.html")
    assert message.startswith(f"{tmp_path}: neither a run directory nor a folder of runs")


def test_a_folder_of_runs_stands_for_its_runs(tmp_path, report_runs):
    """A folder of runs (what train --sweep writes) is its runs in the natural order of their
    names; the DMR run is on another store, so the folder needs --allow-different-corpora."""
    folder = report_runs["gibbs"].parent
    assert "--allow-different-corpora" in fails(2, "report", folder, "--out",
                                                tmp_path / "r.html")
    page = _report(tmp_path, folder, "--allow-different-corpora")
    names = re.search(r"<title>topictk report: (.*?)</title>", page).group(1).split(", ")
    assert [name.rsplit("/", 1)[-1] for name in names] == ["dlda", "dmr", "gibbs", "gibbs8",
                                                           "ovb"]
    assert len(_data(page)["runs"]) == 5


def test_a_variational_run_beside_a_sampled_one(tmp_path, report_runs):
    """Every family draws its map and bars: online VB beside Gibbs on one page."""
    runs = _data(_report(tmp_path, report_runs["gibbs"], report_runs["ovb"]))["runs"]
    assert [len(run["share"]) for run in runs] == [6, 10]


def test_page_stays_small_for_100_topics_and_20000_words():
    rng = np.random.default_rng(0)
    phi = rng.dirichlet(np.full(20_000, 0.02), size=100)
    freq = rng.zipf(1.6, size=20_000).clip(max=50_000).astype(float)
    topics = topic_data(phi, freq, rng.uniform(-0.2, 0.3, size=100), 30)
    topics["vocab"] = [f"word{w}" for w in topics["words"]]
    report = RunReport(path=Path("run"), name="run", algorithm="gibbs", corpus="store",
                       corpus_id="x", corpus_counts={}, shape="K = 100", iterations="1 of 1",
                       summary={}, curve=[], topics=topics)
    page = render([report], "test")
    assert len(page.encode("utf-8")) <= 2_000_000
    assert page.count('<circle class="topic"') == 100


def test_terms_sets_the_bars_per_topic(tmp_path, report_runs):
    data = _data(_report(tmp_path, report_runs["gibbs"], "--terms", "10"))["runs"][0]
    assert data["n_terms"] == 10 and len(data["default"]) == 10
    assert all(len(topic["terms"]) >= 10 for topic in data["topic"])
