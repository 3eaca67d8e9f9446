"""What training shows while it runs: a bar on a terminal, one line per evaluation in a log,
nothing with --quiet, never a NaN; and no training warning repeated by evaluate."""
from __future__ import annotations

import io
import math
import re

from click.testing import CliRunner

from tests.integration._cli import ok, write_config
from topictk.cli import cli
from topictk.training.progress import UNKNOWN, Progress


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_bar_shows_a_dash_until_a_finite_perplexity():
    stream = _Terminal()
    progress = Progress(10, 0, quiet=False, stream=stream)
    progress.step()
    progress.bar.refresh()
    assert f"perplexity={UNKNOWN}" in stream.getvalue()
    progress.evaluated(1, math.nan)             # deep LDA's burn-in: not known yet
    progress.step()
    progress.bar.refresh()
    assert "nan" not in stream.getvalue().lower()
    progress.evaluated(2, 812.345)
    progress.step()
    progress.bar.refresh()
    progress.close()
    text = stream.getvalue()
    assert "perplexity=812.3" in text and "3/10" in text and "step/s" in text


def test_no_bar_off_a_terminal_and_nothing_when_quiet():
    stream = io.StringIO()
    progress = Progress(5, 0, quiet=False, stream=stream)
    assert progress.bar is None and progress.lines
    progress.step()
    progress.evaluated(1, math.inf)
    assert re.fullmatch(rf"step 1/5, [0-9.]+ step/s, ETA \S+, perplexity {UNKNOWN}",
                        progress.line(1))
    progress.close()
    assert stream.getvalue() == ""              # the lines go to the log, not to the stream
    quiet = Progress(5, 0, quiet=True, stream=_Terminal())
    assert quiet.bar is None and not quiet.lines


def test_a_logged_run_writes_one_line_per_evaluation(tmp_path, example_store):
    config = write_config(tmp_path, example_store, training={"eval_every": 10})
    stderr = ok("train", "--config", config).stderr
    lines = [line for line in stderr.splitlines() if line.startswith("topictk: step ")]
    assert [line.split(",")[0] for line in lines] == [f"topictk: step {s}/40"
                                                      for s in (10, 20, 30, 40)]
    assert "\r" not in stderr and "nan" not in stderr.lower()
    assert re.search(r"perplexity [0-9]+\.[0-9]$", lines[-1])


def test_deep_lda_burn_in_shows_no_nan(tmp_path, example_store):
    text = ok("config", "tlasgr", "--corpus", example_store, "--topics", "3").stdout
    result = CliRunner().invoke(cli, [
        "train", "--config", "-", "--set", f"output={tmp_path / 'run'}",
        "--set", "inference.iterations=20", "--set", "training.eval_every=5",
        "--set", "inference.point_perplexity.every=10",
        "--set", "inference.point_perplexity.iterations=20",
        "--set", "inference.point_perplexity.last=10"], input=text)
    assert result.exit_code == 0, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("topictk: step ")]
    assert len(lines) == 4 and lines[0].endswith(f"perplexity {UNKNOWN}")
    assert "nan" not in (result.stderr + result.stdout).lower()


def test_quiet_training_is_silent(tmp_path, example_store):
    config = write_config(tmp_path, example_store)
    assert ok("train", "--config", config, "--quiet").stderr == ""


def test_evaluate_does_not_repeat_training_warnings(tmp_path, example_store):
    config = write_config(tmp_path, example_store, training={"threads": 2},
                          inference={"chunks": 1})
    trained = ok("train", "--config", config, "--quiet").stderr
    assert trained.count("only 1 thread(s) can work") == 1
    evaluated = ok("evaluate", tmp_path / "run").stderr
    assert "can work" not in evaluated


# ---------------------------------------------------------------- the slow commands' bars
def _fake_terminal(monkeypatch) -> None:
    """Every bar's stream (the runner's stderr) counts as a terminal."""
    import topictk.progress

    monkeypatch.setattr(topictk.progress, "is_terminal", lambda stream: True)


def _two_runs(tmp_path, example_store) -> list:
    """Two runs trained alike (the same numbers), evaluated in chunks of 2 test documents."""
    runs = []
    for name in ("a", "b"):
        folder = tmp_path / name
        folder.mkdir()
        config = write_config(folder, example_store, evaluation={
            "fold_in_sweeps": 10, "fold_in_burn_in": 5, "chunk_docs": 2})
        ok("train", "--config", config, "--quiet")
        runs.append(folder / "run")
    return runs


def _totals(stderr: str, desc: str) -> set[int]:
    """The totals shown by the bars named ``desc``."""
    return {int(m) for m in re.findall(rf"{desc}:[^\r\n]*?\d+/(\d+)", stderr)}


def test_evaluate_shows_its_fold_in_on_a_terminal_only(tmp_path, example_store, monkeypatch):
    from topictk.corpus.store import CorpusStore
    from topictk.evaluation.run import LoadedRun

    shown, piped = _two_runs(tmp_path, example_store)
    loaded = LoadedRun(shown)
    chunks = -(-CorpusStore.open(example_store).test_observed().n_docs // 2)
    particles_docs = CorpusStore.open(example_store).test_observed().n_docs
    samples = max(len(loaded.samples()), 1)
    args = ["--json", "--left-to-right", "--particles", "2"]
    quiet = ok("evaluate", piped, *args)                # stderr is no terminal here
    assert quiet.stderr == ""
    _fake_terminal(monkeypatch)
    bars = ok("evaluate", shown, *args)
    assert _totals(bars.stderr, "fold-in") == {samples * chunks}
    assert _totals(bars.stderr, "left-to-right") == {samples * particles_docs}
    # the chunks folded in a few at a time give the numbers of one call
    assert bars.stdout.replace(str(shown), "RUN") == quiet.stdout.replace(str(piped), "RUN")


def test_quiet_evaluate_export_and_infer_show_nothing(tmp_path, example_store, monkeypatch):
    run = _two_runs(tmp_path, example_store)[0]
    texts = tmp_path / "new.txt"
    texts.write_text("python lists and dictionaries\nfunctions return values\n",
                     encoding="utf-8")
    _fake_terminal(monkeypatch)
    for command in (["evaluate", run], ["export", run, "--what", "doc-topics"],
                    ["infer", run, texts]):
        assert ok(*command, "-q").stderr == "", command
        assert ok(*command, "--quiet").stderr == "", command


def test_export_and_infer_count_documents_and_print_the_same(tmp_path, example_store,
                                                             monkeypatch):
    from topictk.corpus.store import CorpusStore

    run = _two_runs(tmp_path, example_store)[0]
    store = CorpusStore.open(example_store)
    texts = tmp_path / "new.txt"
    texts.write_text("python lists and dictionaries\nfunctions return values\nclasses\n",
                     encoding="utf-8")
    export = ["export", run, "--what", "doc-topics", "--sweeps", "4", "--burn-in", "2"]
    infer = ["infer", run, texts, "--output-format", "tsv"]
    piped = [ok(*export), ok(*infer)]
    assert [p.stderr for p in piped] == ["", ""]
    _fake_terminal(monkeypatch)
    shown = [ok(*export), ok(*infer)]
    assert _totals(shown[0].stderr, "doc-topics") == {store.test_observed().n_docs
                                                      + store.train().n_docs}
    assert _totals(shown[1].stderr, "infer") == {3}
    assert [s.stdout for s in shown] == [p.stdout for p in piped]


def test_a_counted_fold_in_gives_the_numbers_of_one_call(tmp_path, example_store):
    """Chunks folded in a few at a time, each counted on the bar: theta-hat is bit for bit
    that of one call, and the bar counts every chunk once."""
    import numpy as np

    from topictk import progress
    from topictk.inference.base import EvaluationSet
    from topictk.inference.sampled import counted_fold_in, evaluation_plan

    from topictk.evaluation.run import LoadedRun

    run = LoadedRun(_two_runs(tmp_path, example_store)[0])
    test = EvaluationSet.from_store(run.store)
    sample = run.samples()[0]
    prior = run.driver.sample_prior(run.state, sample, "test")
    whole = run.driver.fold_in(run.state, test.observed, evaluation_plan(run.driver, test, 0),
                               prior=prior, sample=sample)
    plan = evaluation_plan(run.driver, test, 0)
    with progress.bar(plan.bounds.size - 1, desc="fold-in", unit="chunk", show=True,
                      stream=_Terminal()) as shown, progress.counting(shown):
        assert len(progress.chunk_groups(plan.bounds.size - 1, plan.threads)) > 1
        counted = counted_fold_in(run.driver, run.state, test.observed, plan, prior=prior,
                                  sample=sample)
        assert shown.n == shown.total == plan.bounds.size - 1
    assert np.array_equal(counted, whole, equal_nan=True)
    assert progress.chunk_groups(17, 1) == [(0, 17)]        # no bar counts them here
