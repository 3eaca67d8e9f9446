"""Resume equals uninterrupted (docs/train.md, "Resume"; docs/algorithms.md §12 oracle (c)); runs
stopped by a signal or by training.time_limit leave a checkpoint that resumes exactly; threads
never change the numbers; old checkpoints are pruned."""
from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

from tests.integration._cli import (
    assert_same_run,
    REPO,
    assert_same_arrays,
    comparable_metrics,
    fails,
    metrics,
    model_arrays,
    ok,
    samples,
    write_config,
)
from topictk.rundir.checkpoint import list_checkpoints, load_arrays


@pytest.mark.parametrize("sparse", [True, False, "auto"], ids=["sparse", "dense", "auto"])
def test_fifty_plus_fifty_resumed_equals_one_hundred(tmp_path, example_store, sparse):
    common = dict(inference={"iterations": 100, "burn_in": 30, "thin": 10, "sparse": sparse},
                  training={"eval_every": 10, "checkpoint_every": 25})
    straight = write_config(tmp_path, example_store, name="straight.yaml",
                            output=str(tmp_path / "straight"), **common)
    ok("train", "--config", straight, "-q")
    halves = write_config(tmp_path, example_store, name="halves.yaml",
                          output=str(tmp_path / "halves"), **common)
    first = ok("train", "--config", halves, "-q", "--set", "inference.iterations=50")
    assert first.stdout.startswith(f"{tmp_path / 'halves'}: step 50, ")
    assert [s for s, _ in list_checkpoints(tmp_path / "halves" / "checkpoints")] == [25, 50]
    resumed = ok("train", "--config", halves, "--resume", "--set", "inference.iterations=100")
    assert (f"topictk: resuming {tmp_path / 'halves'} from step 50 (step-00000050.npz)"
            in resumed.stderr)
    assert resumed.stdout.startswith(f"{tmp_path / 'halves'}: step 100, ")
    assert "settings that differ" not in resumed.stderr      # iterations may change
    assert_same_run(tmp_path / "straight", tmp_path / "halves", same_samples=True)
    assert [m["step"] for m in metrics(tmp_path / "halves")] == list(range(10, 101, 10))
    used = {m["sampler"] for m in metrics(tmp_path / "halves")}
    if sparse != "auto":
        assert used == {"sparse" if sparse else "dense"}
    assert used and used <= {"sparse", "dense"}


def test_resume_after_losing_the_work_since_the_last_checkpoint(tmp_path, example_store):
    """A run killed after evaluating and saving samples past its last checkpoint: resuming
    from that checkpoint redoes the lost steps, and the log has each step once."""
    config = write_config(tmp_path, example_store,
                          inference={"iterations": 40, "burn_in": 10, "thin": 10},
                          training={"eval_every": 10, "checkpoint_every": 20})
    ok("train", "--config", config, "-q")
    run_dir = tmp_path / "run"
    reference = (model_arrays(run_dir)[1], comparable_metrics(run_dir), samples(run_dir))
    (run_dir / "checkpoints" / "step-00000040.npz").unlink()
    (run_dir / "model.npz").unlink()
    ok("train", "--config", config, "-q", "--resume")
    assert_same_arrays(model_arrays(run_dir)[1], reference[0])
    assert comparable_metrics(run_dir) == reference[1]
    assert [m["step"] for m in metrics(run_dir)] == [10, 20, 30, 40]
    again = samples(run_dir)
    assert list(again) == list(reference[2])
    for name in again:
        assert_same_arrays(again[name], reference[2][name])


def test_resume_of_a_finished_run_changes_nothing(tmp_path, example_store):
    config = write_config(tmp_path, example_store, inference={"iterations": 20, "burn_in": 10,
                                                             "thin": 5})
    ok("train", "--config", config, "-q")
    _, before = model_arrays(tmp_path / "run")
    records = comparable_metrics(tmp_path / "run")
    out = ok("train", "--config", config, "-q", "--resume")
    assert out.stdout.startswith(f"{tmp_path / 'run'}: step 20")
    assert_same_arrays(model_arrays(tmp_path / "run")[1], before)
    assert comparable_metrics(tmp_path / "run") == records


def _wait_for_checkpoint(directory: Path, proc: subprocess.Popen, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if list_checkpoints(directory):
            return
        if proc.poll() is not None:
            raise AssertionError(f"train exited early: {proc.communicate()}")
        time.sleep(0.01)
    proc.kill()
    raise AssertionError("no checkpoint appeared")


def test_sigint_stops_with_a_checkpoint_that_resumes_exactly(tmp_path, example_store):
    common = dict(inference={"burn_in": 10, "thin": 10},
                  training={"eval_every": 5, "checkpoint_every": 5, "keep_checkpoints": 3})
    config = write_config(tmp_path, example_store, output=str(tmp_path / "run"),
                          **{**common, "inference": {**common["inference"],
                                                     "iterations": 1_000_000}})
    proc = subprocess.Popen([sys.executable, "-m", "topictk", "train", "--config", str(config),
                             "-q"], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        _wait_for_checkpoint(tmp_path / "run" / "checkpoints", proc, timeout=120)
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, (stdout, stderr)
    assert "Traceback" not in stderr
    match = re.fullmatch(r"topictk: SIGINT received: stopped at step (\d+), checkpoint written; "
                         r"continue with --resume\n", stderr)
    assert match, stderr
    step = int(match.group(1))
    assert stdout == ""
    run_dir = tmp_path / "run"
    assert not (run_dir / "model.npz").exists()               # interrupted: no final model
    latest_step, latest = list_checkpoints(run_dir / "checkpoints")[-1]
    assert latest_step == step
    header, _ = load_arrays(latest)
    assert header["status"] == "interrupted" and header["state"]["step"] == step
    assert not [p for p in (run_dir / "checkpoints").iterdir() if p.name.startswith(".")]

    total = step + 25                   # samples are saved at steps 20, 30, ...: at least two
    ok("train", "--config", config, "-q", "--resume", "--set", f"inference.iterations={total}")
    straight = write_config(tmp_path, example_store, name="straight.yaml",
                            output=str(tmp_path / "straight"),
                            **{**common, "inference": {**common["inference"], "iterations": total}})
    ok("train", "--config", straight, "-q")
    assert_same_run(tmp_path / "straight", run_dir, same_samples=True)


def test_time_limit_stops_gracefully_with_checkpoint_and_model(tmp_path, example_store):
    config = write_config(tmp_path, example_store,
                          inference={"iterations": 1_000_000, "burn_in": 10, "thin": 10},
                          training={"time_limit": 0.5, "eval_every": 10, "checkpoint_every": 0})
    began = time.monotonic()
    out = ok("train", "--config", config, "-q")
    assert time.monotonic() - began < 30
    match = re.search(r"training.time_limit reached at step (\d+); checkpoint and model written; "
                      r"continue with --resume", out.stderr)
    assert match, out.stderr
    step = int(match.group(1))
    assert out.stdout.startswith(f"{tmp_path / 'run'}: step {step}")
    header, arrays = model_arrays(tmp_path / "run")
    assert header["status"] == "time_limit" and header["state"]["step"] == step
    assert [s for s, _ in list_checkpoints(tmp_path / "run" / "checkpoints")] == [step]
    assert header["clock"]["train_seconds"] > 0
    # and it continues the same chain
    ok("train", "--config", config, "-q", "--resume", "--set", "training.time_limit=null",
       "--set", f"inference.iterations={step + 5}")
    assert model_arrays(tmp_path / "run")[0]["state"]["step"] == step + 5


def test_keep_checkpoints_prunes_older_ones(tmp_path, example_store):
    config = write_config(tmp_path, example_store,
                          inference={"iterations": 60, "burn_in": 30, "thin": 10},
                          training={"checkpoint_every": 10, "keep_checkpoints": 2})
    ok("train", "--config", config, "-q")
    directory = tmp_path / "run" / "checkpoints"
    assert sorted(p.name for p in directory.iterdir()) == ["step-00000050.npz",
                                                           "step-00000060.npz"]
    header, _ = load_arrays(directory / "step-00000060.npz")
    assert header["status"] == "completed"
    assert load_arrays(directory / "step-00000050.npz")[0]["status"] == "running"


@pytest.mark.parametrize("sparse", [True, False, "auto"], ids=["sparse", "dense", "auto"])
def test_one_thread_equals_two_threads_through_train(tmp_path, example_store, sparse):
    for threads in (1, 2):
        config = write_config(tmp_path, example_store, name=f"t{threads}.yaml",
                              output=str(tmp_path / f"t{threads}"),
                              inference={"iterations": 30, "burn_in": 10, "thin": 10,
                                         "chunks": 4, "sparse": sparse},
                              training={"threads": threads})
        ok("train", "--config", config, "-q")
    assert_same_run(tmp_path / "t1", tmp_path / "t2", same_samples=True)
    one, two = (json.loads(ok("evaluate", tmp_path / f"t{n}", "--json").stdout) for n in (1, 2))
    assert one.pop("run") != two.pop("run")
    assert one == two
    # evaluation threads do not change the numbers either
    three = json.loads(ok("evaluate", tmp_path / "t1", "--json", "--threads", "2").stdout)
    three.pop("run")
    assert three == one


def test_more_threads_than_chunks_is_warned_about(tmp_path, example_store):
    config = write_config(tmp_path, example_store, inference={"iterations": 2, "burn_in": 1,
                                                             "thin": 1, "chunks": 1},
                          training={"threads": 2})
    out = ok("train", "--config", config)
    assert ("topictk: training.threads = 2 but inference.chunks = 1: only 1 thread(s) can work; "
            "set inference.chunks >= threads") in out.stderr
    assert np.isfinite(metrics(tmp_path / "run")[-1]["perplexity_point"])


def test_default_blocks_of_a_small_corpus_leave_threads_idle_quietly(tmp_path, example_store):
    """The example corpus is below the size at which the default schedule cuts it in blocks:
    the exact chain, over in moments, so the idle thread is not worth a line (threads: auto
    gives every multi-core machine one); a corpus cut in fewer blocks than threads says so."""
    config = write_config(tmp_path, example_store, inference={"iterations": 2, "burn_in": 1,
                                                             "thin": 1},
                          training={"threads": 2})
    out = ok("train", "--config", config)
    assert "threads work" not in out.stderr and "thread(s) can work" not in out.stderr
    out = ok("train", "--config", config, "--force", "--set", "training.threads=3",
             "--set", "inference.blocks=2")
    assert "training.threads = 3 but inference.blocks = 2: only 2 thread(s) can work" \
        in out.stderr


def _config(tmp_path, store, name: str, output: str, inference: dict, model: dict | None = None,
            **sections) -> Path:
    """write_config with ``inference`` (and ``model``) as whole sections, not merged into the
    collapsed-Gibbs defaults."""
    cfg = write_config(tmp_path, store, name=name, output=str(tmp_path / output), **sections)
    data = yaml.safe_load(cfg.read_text())
    data["inference"] = inference
    if model is not None:
        data["model"] = model
    cfg.write_text(yaml.safe_dump(data))
    return cfg


def _snapshot_run(run: Path) -> dict[str, bytes]:
    return {str(p.relative_to(run)): p.read_bytes() for p in sorted(run.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("algorithm, sections, change", [
    # priors and the seed live in the saved state: the new values would not even apply
    ("gibbs", {}, "model.beta=0.02"),
    ("gibbs", {}, "model.alpha=2.0"),
    ("gibbs", {}, "training.seed=9"),
    # the state's shape or meaning changes: mini-batch epochs, q(phi) smoothing
    ("ovb", {"inference": {"algorithm": "ovb", "batch_size": 16}}, "inference.batch_size=8"),
    ("vb", {"inference": {"algorithm": "vb", "tol": 0}}, "inference.smoothed=false"),
])
def test_resume_with_changed_settings_is_refused_and_leaves_the_run(tmp_path, example_store,
                                                                    algorithm, sections, change):
    inference = sections.get("inference", {"algorithm": "gibbs", "burn_in": 4, "thin": 2})
    cfg = _config(tmp_path, example_store, "exp.yaml", "run", {"iterations": 20, **inference},
                  training={"checkpoint_every": 5})
    ok("train", "--config", cfg, "-q", "--set", "inference.iterations=10")
    before = _snapshot_run(tmp_path / "run")
    key, value = change.split("=")
    message = fails(2, "train", "--config", cfg, "--resume", "--set", change, "--set",
                    "training.threads=2", "--set", "inference.iterations=20")
    assert message.startswith(f"{tmp_path / 'run' / 'config.yaml'}: --resume continues the run "
                              f"as it was configured, but these settings differ from it: {key} ")
    assert f"-> {value}" in message.replace("'", "").replace("False", "false")
    assert "training.threads" not in message.split("; resume with")[0]   # threads may change
    assert "inference.iterations 10" not in message
    assert _snapshot_run(tmp_path / "run") == before
    # with the run's settings it resumes (threads and iterations may change)
    ok("train", "--config", cfg, "--resume", "--set", "training.threads=2", "-q",
       "--set", "inference.iterations=20")


def test_sgrld_resume_that_would_move_its_samples_is_refused(tmp_path, example_store):
    cfg = _config(tmp_path, example_store, "exp.yaml", "run",
                  {"algorithm": "sgrld", "iterations": 30, "burn_in": 10, "samples": 5,
                   "batch_size": 16}, training={"checkpoint_every": 10, "eval_every": 10})
    ok("train", "--config", cfg, "-q")
    before = _snapshot_run(tmp_path / "run")
    # 60 iterations with burn-in 10 take samples at 20, 30, 40, 50, 60; the run has 14, 18, ...
    message = fails(2, "train", "--config", cfg, "--resume", "--set", "inference.iterations=60")
    assert message == (f"{tmp_path / 'run' / 'config.yaml'}: with these settings sgrld collects "
                       f"its samples up to step 30 at steps [20, 30], but the run saved them at "
                       f"[14, 18, 22, 26, 30]; the samples depend on inference.iterations and "
                       f"inference.burn_in, so resume with the run's values or train a new run "
                       f"with the new ones (a run with inference.thin instead of "
                       f"inference.samples can be extended)")
    assert _snapshot_run(tmp_path / "run") == before


@pytest.mark.parametrize("first", [30, 17])     # a completed run; one stopped between samples
def test_sgrld_with_thin_extended_equals_uninterrupted(tmp_path, example_store, first):
    """With inference.thin the samples do not depend on inference.iterations: a run trained
    to ``first`` updates and resumed to 46 keeps its samples, adds the later ones and equals
    the 46-update run bit for bit."""
    inference = {"algorithm": "sgrld", "iterations": 46, "burn_in": 10, "thin": 4,
                 "batch_size": 16}
    sections = {"training": {"checkpoint_every": 10, "eval_every": 10}}
    straight = _config(tmp_path, example_store, "straight.yaml", "straight", inference,
                       **sections)
    ok("train", "--config", straight, "-q")
    assert list(samples(tmp_path / "straight")) == [
        f"step-{s:08d}.npz" for s in (14, 18, 22, 26, 30, 34, 38, 42, 46)]
    parts = _config(tmp_path, example_store, "parts.yaml", "parts", inference, **sections)
    ok("train", "--config", parts, "-q", "--set", f"inference.iterations={first}")
    ok("train", "--config", parts, "-q", "--resume")
    if first % 10 == 0:
        assert_same_run(tmp_path / "straight", tmp_path / "parts", same_samples=True)
        return
    # the first part also ended with an evaluation at its last step, off the schedule
    ha, a = model_arrays(tmp_path / "straight")
    hb, b = model_arrays(tmp_path / "parts")
    assert_same_arrays(a, b)
    assert ha["state"] == hb["state"] and ha["streams"] == hb["streams"]
    assert comparable_metrics(tmp_path / "straight") == [
        m for m in comparable_metrics(tmp_path / "parts") if m[0] != first]
    sa, sb = samples(tmp_path / "straight"), samples(tmp_path / "parts")
    assert list(sa) == list(sb)
    for name in sa:
        assert_same_arrays(sa[name], sb[name])


def test_deep_lda_extended_with_sparse_evaluations_equals_uninterrupted(tmp_path, example_store):
    # eval_every 3: the persistent test chain advances at steps 3, 6, 9, ... only, also when
    # the first part ends at step 10 (no extra evaluation there) and when it is resumed
    common = dict(model={"family": "dlda", "layers": [6, 3]},
                  inference={"algorithm": "tlasgr", "iterations": 16, "burn_in": 4,
                             "batch_size": 32, "local_burn_in": 4, "local_samples": 4,
                             "point_perplexity": {"iterations": 6, "last": 2, "thin": 1,
                                                  "every": 0}},
                  training={"eval_every": 3, "checkpoint_every": 5})
    straight = _config(tmp_path, example_store, "straight.yaml", "straight", **common)
    ok("train", "--config", straight, "-q")
    parts = _config(tmp_path, example_store, "parts.yaml", "parts", **common)
    ok("train", "--config", parts, "-q", "--set", "inference.iterations=10")
    assert [m["step"] for m in metrics(tmp_path / "parts")] == [3, 6, 9]
    ok("train", "--config", parts, "-q", "--resume")
    ha, a = model_arrays(tmp_path / "straight")
    hb, b = model_arrays(tmp_path / "parts")
    assert_same_arrays(a, b)
    assert ha["state"] == hb["state"] and ha["streams"] == hb["streams"]
    assert comparable_metrics(tmp_path / "straight") == comparable_metrics(tmp_path / "parts")
    assert [m["step"] for m in metrics(tmp_path / "parts")] == [3, 6, 9, 12, 15]
    # the evaluation schedule is part of the chain: it may not change on resume
    message = fails(2, "train", "--config", parts, "--resume", "--set", "training.eval_every=2",
                    "--set", "inference.iterations=20")
    assert "training.eval_every 3 -> 2" in message


def test_force_keeps_the_old_run_when_the_new_config_is_refused(tmp_path, example_store):
    cfg = write_config(tmp_path, example_store, output=str(tmp_path / "run"),
                       inference={"iterations": 10, "burn_in": 4, "thin": 2})
    ok("train", "--config", cfg, "-q")
    before = sorted(p.name for p in (tmp_path / "run").iterdir())
    bad = write_config(tmp_path, example_store, name="dmr.yaml", output=str(tmp_path / "run"),
                       model={"family": "dmr", "topics": 6, "alpha": 0.1, "beta": 0.01},
                       inference={"algorithm": "dmr-sem", "iterations": 10, "burn_in": 4,
                                  "thin": 2})
    assert "--meta" in fails(2, "train", "--config", bad, "--force", "-q")
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == before
    ok("evaluate", tmp_path / "run")


def test_a_replacement_killed_midway_is_reported_and_its_old_run_kept(tmp_path, example_store):
    """A process killed during 'train --force' leaves the old run in a hidden folder: the next
    train names the folder and how to recover it, and never deletes it."""
    cfg = write_config(tmp_path, example_store, output=str(tmp_path / "run"),
                       inference={"iterations": 10, "burn_in": 4, "thin": 2})
    ok("train", "--config", cfg, "-q")
    run = tmp_path / "run"
    left = run / ".replaced-x1"                    # as the killed process left it
    left.mkdir()
    (run / "config.yaml").replace(left / "config.yaml")
    (run / "model.npz").replace(left / "model.npz")
    kept = {p.name: p.read_bytes() for p in left.iterdir()}

    message = fails(2, "train", "--config", cfg, "-q")     # the partial run is not replaced
    assert "--force" in message
    out = ok("train", "--config", cfg, "-q", "--force")
    warning = [line for line in out.stderr.splitlines() if ".replaced-x1" in line]
    assert len(warning) == 1, out.stderr
    assert "config.yaml, model.npz" in warning[0] and "move them back" in warning[0]
    assert {p.name: p.read_bytes() for p in left.iterdir()} == kept
    assert [p.name for p in run.iterdir() if p.name.startswith(".replaced-")] == [left.name]
    ok("evaluate", run)                                     # the new run is complete


def test_force_puts_the_old_run_back_when_the_new_one_fails_before_its_first_checkpoint(
        tmp_path, example_store, monkeypatch):
    from topictk.inference.gibbs.driver import GibbsDriver
    from topictk.inference.registry import load_config
    from topictk.training.run import train

    cfg = write_config(tmp_path, example_store, output=str(tmp_path / "run"),
                       inference={"iterations": 10, "burn_in": 4, "thin": 2},
                       training={"checkpoint_every": 5})
    ok("train", "--config", cfg, "-q")
    run = tmp_path / "run"

    def listing():
        return sorted(str(p.relative_to(run)) for p in run.rglob("*"))

    def digest():
        return {p: p.read_bytes() for p in run.rglob("*") if p.is_file()}

    before = listing()
    original = GibbsDriver.step

    def failing(self, state, t):
        if t == 6:
            raise FloatingPointError("diverged")
        return original(self, state, t)

    monkeypatch.setattr(GibbsDriver, "step", failing)
    config = load_config(cfg)
    with pytest.raises(FloatingPointError):
        train(config, force=True, quiet=True)
    # it failed after its first checkpoint (5): the old run is gone, the new one resumable
    assert [s for s, _ in list_checkpoints(run / "checkpoints")] == [5]
    assert not any(p.name.startswith(".replaced-") for p in run.iterdir())
    assert listing() != before

    monkeypatch.setattr(GibbsDriver, "step", original)
    ok("train", "--config", cfg, "-q", "--force")          # a complete run again
    assert not any(p.name.startswith(".replaced-") for p in run.iterdir())
    before, files = listing(), digest()
    monkeypatch.setattr(GibbsDriver, "step", lambda self, state, t: (_ for _ in ()).throw(
        FloatingPointError("diverged at once")))
    with pytest.raises(FloatingPointError):
        train(config, force=True, quiet=True)
    assert listing() == before and digest() == files     # the old run, byte for byte
