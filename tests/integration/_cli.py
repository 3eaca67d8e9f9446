"""Helpers for the command-line tests: a CliRunner wrapper that checks the error contract,
config files written on the fly, and readers of run directories."""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml
from click.testing import CliRunner

from tests.fixtures import cut_back_run
from topictk.cli import cli

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "python_reference.txt"


@dataclass
class Outcome:
    exit_code: int
    stdout: str
    stderr: str
    exception: BaseException | None


def run(*args: str) -> Outcome:
    """``topictk ARGS`` in this process; stdout and stderr kept apart."""
    result = CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=True)
    return Outcome(result.exit_code, result.stdout, result.stderr, result.exception)


def ok(*args: str) -> Outcome:
    outcome = run(*args)
    assert outcome.exit_code == 0, (outcome.stdout, outcome.stderr, outcome.exception)
    return outcome


def fails(code: int, *args: str) -> str:
    """Run a command that must fail with ``code`` and one ``topictk: error:`` line, and no
    traceback; returns the message after ``topictk: error: ``."""
    outcome = run(*args)
    assert outcome.exit_code == code, (outcome.exit_code, outcome.stdout, outcome.stderr,
                                       outcome.exception)
    assert isinstance(outcome.exception, SystemExit), repr(outcome.exception)
    assert "Traceback" not in outcome.stderr + outcome.stdout
    lines = [line for line in outcome.stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("topictk: error: ")]
    assert len(errors) == 1, outcome.stderr
    assert errors[0] == lines[-1]
    return errors[0][len("topictk: error: "):]


def snapshot(directory: Path) -> dict[str, str]:
    """sha256 of every file under ``directory`` (relative path -> digest)."""
    return {str(p.relative_to(directory)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(directory.rglob("*")) if p.is_file()}


def write_config(directory: Path, store: Path, name: str = "exp.yaml", **sections) -> Path:
    """A small collapsed-Gibbs experiment on ``store``; ``sections`` update the defaults."""
    data = {
        "corpus": str(store),
        "output": str(directory / "run"),
        "model": {"topics": 6, "alpha": 0.1, "beta": 0.01},
        "inference": {"algorithm": "gibbs", "iterations": 40, "burn_in": 20, "thin": 10},
        "training": {"seed": 5, "eval_every": 10, "checkpoint_every": 20, "keep_checkpoints": 5},
        "evaluation": {"fold_in_sweeps": 10, "fold_in_burn_in": 5},
    }
    for section, values in sections.items():
        if isinstance(values, dict):
            data[section] = {**data.get(section, {}), **values}
        else:
            data[section] = values
    path = directory / name
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def model_arrays(run_dir: Path, name: str = "model.npz") -> tuple[dict, dict[str, np.ndarray]]:
    from topictk.rundir.checkpoint import load_arrays
    return load_arrays(run_dir / name)


def metrics(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def comparable_metrics(run_dir: Path) -> list[tuple]:
    """What must not depend on timing: step, counters, perplexity, log joint."""
    return [(m["step"], m["tokens_seen"], m["documents_seen"], m.get("perplexity_point"),
             m.get("log_joint_per_token")) for m in metrics(run_dir)]


def samples(run_dir: Path) -> dict[str, dict[str, np.ndarray]]:
    from topictk.rundir.checkpoint import load_arrays
    return {p.name: load_arrays(p)[1] for p in sorted((run_dir / "samples").glob("*.npz"))}


def assert_same_arrays(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> None:
    assert set(a) == set(b)
    for name in a:
        assert a[name].dtype == b[name].dtype, name
        assert np.array_equal(a[name], b[name]), f"{name} differs"


def assert_same_run(a: Path, b: Path, *, extra_evaluations: bool = False,
                    same_samples: bool = False) -> None:
    """Runs ``a`` and ``b`` ended in the same place: model arrays, state header (step, sample
    steps, beta), every random stream, and the metrics (with ``extra_evaluations``, ``b`` may
    also hold evaluations at steps ``a`` has none, e.g. where it was stopped); with
    ``same_samples`` also the same saved samples, at least one."""
    ha, arrays_a = model_arrays(a)
    hb, arrays_b = model_arrays(b)
    assert_same_arrays(arrays_a, arrays_b)
    assert ha["state"] == hb["state"]
    assert ha["streams"] == hb["streams"]
    ours, theirs = comparable_metrics(a), comparable_metrics(b)
    if extra_evaluations:
        steps = {m[0] for m in ours}
        theirs = [m for m in theirs if m[0] in steps]
    assert ours == theirs
    if same_samples:
        sa, sb = samples(a), samples(b)
        assert list(sa) == list(sb) and sa
        for name in sa:
            assert_same_arrays(sa[name], sb[name])


def assert_resumed_and_threaded_runs_equal(config_of, folder: Path, step: int = 20) -> None:
    """Two AD-LDA chunks: the run cut back to its checkpoint at ``step`` and resumed ends
    where the whole run ends (every array, stream, metric and sample), and two threads give
    the run of one. ``config_of(name, **sections)`` writes the config of the run ``name`` in
    ``folder`` and returns its path."""
    sections = {"inference": {"chunks": 2}, "training": {"threads": 1}}
    ok("train", "--config", config_of("one", **sections), "-q")
    cut_back_run(folder / "one", folder / "cut", step)
    ok("train", "--config", config_of("cut", **sections), "--resume", "-q")
    assert_same_run(folder / "one", folder / "cut", same_samples=True)
    sections["training"] = {"threads": 2}
    ok("train", "--config", config_of("two", **sections), "-q")
    assert_same_run(folder / "one", folder / "two", same_samples=True)


def lose_a_worker(monkeypatch, method: str, failing_call: int | tuple[int, ...]) -> dict:
    """Make the ``failing_call``-th call (or each of several) of ``ShardedGibbs.<method>``
    (``sweep``, or ``gather`` while the shards hold stale counts) report a lost Dask worker;
    returns the call counter (``["n"]``), so a test can check the loss happened."""
    from topictk.inference import cluster
    from topictk.inference.gibbs import shards as gibbs_shards

    original = getattr(gibbs_shards.ShardedGibbs, method)
    calls = {"n": 0}

    def flaky(self, *args, **kwargs):
        if method == "sweep" or self.stale:
            calls["n"] += 1
            if calls["n"] in (failing_call if isinstance(failing_call, tuple)
                              else (failing_call,)):
                raise cluster.WorkerLost("a Dask worker was lost (simulated)")
        return original(self, *args, **kwargs)

    monkeypatch.setattr(gibbs_shards.ShardedGibbs, method, flaky)
    return calls
