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
