"""One held-out number everywhere: ``report``, ``compare``, ``plot`` and the Python API show a
run's ``evaluate`` score, computed once per model, store and protocol and cached in the run's
``scores.json``; the in-training curves are estimates on documents the store fixes."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

import topictk
from tests.integration._cli import ok, write_config
from topictk.evaluation import run as run_module
from topictk.rundir.guard import is_legacy_run
from topictk.rundir.layout import RUN_TOP_FILES, SCORES_FILE

# one chain (the same seed and settings) stopped after 30 and after 300 sweeps
CHAIN = {"model": {"topics": 8, "alpha": 0.1, "beta": 0.01},
         "training": {"seed": 4, "eval_every": "auto", "checkpoint_every": 0},
         "evaluation": {"fold_in_sweeps": 20, "fold_in_burn_in": 10}}


def _train(folder: Path, store: Path, sweeps: int, name: str | None = None, **changes) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    name = name or f"s{sweeps}"
    sections = {**CHAIN, "inference": {"algorithm": "gibbs", "iterations": sweeps,
                                       "burn_in": sweeps // 2, "thin": max(1, sweeps // 4)}}
    for section, values in changes.items():
        sections[section] = {**sections.get(section, {}), **values}
    config = write_config(folder, store, f"{name}.yaml", output=str(folder / name), **sections)
    ok("train", "--config", config, "--quiet")
    return folder / name


@pytest.fixture(scope="module")
def chain(tmp_path_factory, example_store) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("chain")
    return {"short": _train(folder, example_store, 30), "long": _train(folder, example_store, 300)}


@pytest.fixture
def counted(monkeypatch) -> list[str]:
    """The runs scored (calls of the one scoring function) while the test runs."""
    calls: list[str] = []
    real = run_module.score_loaded

    def counting(run, left_to_right=None):
        calls.append(run.run_dir.name)
        return real(run, left_to_right)

    monkeypatch.setattr(run_module, "score_loaded", counting)
    return calls


def _page_data(page: str) -> dict:
    match = re.search(r'<script type="application/json" id="report-data">(.*?)</script>', page,
                      re.DOTALL)
    return json.loads(match.group(1))


def _evaluated(run: Path) -> dict:
    return json.loads(ok("evaluate", run, "--json", "--recompute").stdout)


def test_report_and_compare_show_and_rank_by_the_evaluate_numbers(chain, tmp_path):
    truth = {name: _evaluated(run)["perplexity"] for name, run in chain.items()}
    by_evaluate = sorted(chain, key=truth.get)
    rows = json.loads(ok("compare", chain["short"], chain["long"], "--format", "json").stdout)
    assert [r["path"] for r in rows["runs"]] == [str(chain[n]) for n in by_evaluate]
    for row in rows["runs"]:
        name = next(n for n, p in chain.items() if str(p) == row["path"])
        assert row["perplexity"] == truth[name]
    assert rows["protocol"].startswith("evaluate: document completion on all 34 test documents")
    assert rows["protocol_differences"] == []

    out = tmp_path / "page.html"
    ok("report", chain["short"], chain["long"], "--out", out)
    page = out.read_text(encoding="utf-8")
    scores = _page_data(page)["scores"]
    assert [s["perplexity"] for s in scores] == [truth[n] for n in by_evaluate]
    assert [s["rank"] for s in scores] == [1, 2]
    assert all(s["protocol"] == rows["protocol"] for s in scores)
    # the numbers shown are evaluate's, not the in-training estimates the page used to show
    for name, run in chain.items():
        last = json.loads((run / "metrics.jsonl").read_text().splitlines()[-1])
        assert last["perplexity_point"] != truth[name]
    first_row = re.search(r'<tbody><tr data-run="\d">(.*?)</tr>', page, re.DOTALL).group(1)
    assert re.findall(r"<td>(.*?)</td>", first_row, re.DOTALL)[6] == \
        f"{truth[by_evaluate[0]]:.5g}"
    assert "held-out perplexity<br>" in page and "evaluate: document completion" in page
    assert "in-training estimate on 34 of 34 test documents" in page
    # the API gives the same number
    assert topictk.load_run(chain["long"]).evaluate()["perplexity"] == truth["long"]


def test_a_second_compare_or_report_reads_the_cache(example_store, tmp_path, counted):
    runs = [_train(tmp_path, example_store, n) for n in (8, 16)]
    first = ok("compare", *runs, "--format", "json").stdout
    assert sorted(counted) == ["s16", "s8"]
    assert all((run / SCORES_FILE).is_file() for run in runs)
    counted.clear()
    assert ok("compare", *runs, "--format", "json").stdout == first
    ok("report", *runs, "--out", tmp_path / "page.html")
    ok("evaluate", runs[0])
    assert counted == []
    ok("evaluate", runs[0], "--recompute")
    assert counted == ["s8"]
    counted.clear()
    ok("compare", *runs, "--recompute", "-q")
    assert sorted(counted) == ["s16", "s8"]


def test_the_cache_follows_the_model_and_the_protocol(example_store, tmp_path, counted):
    run = _train(tmp_path, example_store, 10)
    before = json.loads(ok("evaluate", run, "--json").stdout)["perplexity"]
    assert counted == ["s10"]
    # extending the run rewrites its model: scored again
    ok("train", "--config", run / "config.yaml", "--resume", "--set", "inference.iterations=20",
       "-q")
    after = json.loads(ok("compare", run, "--format", "json").stdout)["runs"][0]
    assert counted == ["s10", "s10"] and after["iterations"] == 20
    assert after["perplexity"] != before
    # another evaluation protocol: scored again, and both are kept
    config = yaml.safe_load((run / "config.yaml").read_text())
    config["evaluation"]["fold_in_sweeps"] = 30
    (run / "config.yaml").write_text(yaml.safe_dump(config))
    ok("evaluate", run)
    assert len(counted) == 3
    # the in-training curve's settings are not part of the protocol
    config["evaluation"]["curve_docs"] = 7
    (run / "config.yaml").write_text(yaml.safe_dump(config))
    ok("evaluate", run)
    assert len(counted) == 3
    # a checkpoint is scored on its own
    entries = json.loads((run / SCORES_FILE).read_text())["entries"]
    assert {e["key"]["protocol"]["fold_in_sweeps"] for e in entries} == {20, 30}


def test_a_run_that_cannot_be_written_is_scored_and_shown_every_time(example_store, tmp_path,
                                                                     counted, monkeypatch):
    run = _train(tmp_path, example_store, 8)

    def read_only(path, text):
        raise OSError(30, "Read-only file system", str(path))

    monkeypatch.setattr("topictk.evaluation.scores.atomic_write_text", read_only)
    rows = [json.loads(ok("compare", run, "--format", "json").stdout) for _ in range(2)]
    assert rows[0]["runs"][0]["perplexity"] == rows[1]["runs"][0]["perplexity"] > 1
    ok("report", run, "--out", tmp_path / "page.html")
    assert counted == ["s8", "s8", "s8"] and not (run / SCORES_FILE).exists()


def test_a_damaged_cache_is_scored_again_and_replaced(example_store, tmp_path, counted):
    run = _train(tmp_path, example_store, 8)
    (run / SCORES_FILE).write_text("{not json")
    ok("compare", run)
    assert counted == ["s8"]
    assert json.loads((run / SCORES_FILE).read_text())["format"] == 1


def test_the_cache_is_a_run_file(example_store, tmp_path):
    run = _train(tmp_path, example_store, 8)
    ok("evaluate", run)
    assert SCORES_FILE in RUN_TOP_FILES
    # a run of an earlier release (no marker) holding one is still recognised as a run
    marker = run / "topictk-run.json"
    saved = marker.read_bytes()
    marker.unlink()
    assert is_legacy_run(run)
    marker.write_bytes(saved)
    # train --force replaces it with the rest of the run
    ok("train", "--config", run / "config.yaml", "--force", "-q")
    assert not (run / SCORES_FILE).exists()
    assert not list(run.glob(".replaced-*"))


def test_runs_scored_differently_are_flagged(example_store, tmp_path):
    a = _train(tmp_path, example_store, 8, "a")
    b = _train(tmp_path, example_store, 8, "b", evaluation={"fold_in_sweeps": 12})
    done = ok("compare", a, b)
    assert "evaluation.fold_in_sweeps: 20 (a); 12 (b)" in done.stderr
    assert "scored differently" in done.stdout and "perplexity*" in done.stdout
    out = tmp_path / "page.html"
    report = ok("report", a, b, "--out", out)
    assert "evaluation.fold_in_sweeps" in report.stderr
    page = out.read_text(encoding="utf-8")
    assert "These runs are scored differently" in page
    assert _page_data(page)["protocol_differences"] == [
        "evaluation.fold_in_sweeps: 20 (" + _name(a) + "); 12 (" + _name(b) + ")"]
    pytest.importorskip("matplotlib")
    svg = tmp_path / "c.svg"
    plotted = ok("plot", a, b, "--out", svg)
    assert "evaluation.fold_in_sweeps" in plotted.stderr


def _name(run: Path) -> str:
    return f"{run.resolve().parent.name}/{run.name}"


def test_the_curve_documents_depend_on_the_store_alone(example_store, tmp_path):
    short = _train(tmp_path, example_store, 6, "short")
    long = _train(tmp_path, example_store, 60, "long", training={"eval_every": 30})
    docs = [yaml.safe_load((r / "config.yaml").read_text())["evaluation"]["curve_docs"]
            for r in (short, long)]
    assert docs[0] == docs[1] == 34          # 2 % of 307 is below 50: every test document
    pytest.importorskip("matplotlib")
    svg = tmp_path / "c.svg"
    ok("plot", short, long, "--out", svg)
    assert "in-training estimate on 34 of 34 test documents" in svg.read_text()


def test_scoring_shows_a_bar_on_a_terminal_only_and_not_with_quiet(example_store, tmp_path,
                                                                   monkeypatch):
    from topictk import progress

    runs = [_train(tmp_path, example_store, n) for n in (6, 7)]
    monkeypatch.setattr(progress, "is_terminal", lambda stream: True)
    first = ok("compare", *runs).stderr
    assert "scoring runs:" in first and "/2 [" in first and "fold-in:" in first
    # scored already: no bar
    assert "scoring runs" not in ok("compare", *runs).stderr
    assert "scoring runs" not in ok("compare", *runs, "--recompute", "-q").stderr
    assert "scoring runs" in ok("report", *runs, "--out", tmp_path / "p.html",
                                "--recompute").stderr
    monkeypatch.setattr(progress, "is_terminal", lambda stream: False)
    assert "scoring runs" not in ok("compare", *runs, "--recompute").stderr
