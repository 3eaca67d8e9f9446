"""What a run directory is and who may write it: the run marker, what ``train --force`` replaces
(and never), one writer per run (real processes, one of them killed), and where ``--out FILE``
may write."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.integration._cli import EXAMPLE, fails, metrics, ok, snapshot, write_config
from topictk.markers import write_partial_marker
from topictk.rundir.metrics import append_metrics, read_metrics, truncate_metrics

OLD_RUN = Path(__file__).resolve().parents[1] / "golden" / "runs_v1" / "gibbs"


def _small(tmp_path: Path, store: Path, **sections) -> Path:
    sections.setdefault("inference", {"iterations": 10, "burn_in": 4, "thin": 2})
    sections.setdefault("training", {"checkpoint_every": 5})
    return write_config(tmp_path, store, **sections)


# --------------------------------------------------------------------------- the marker
def test_a_new_run_is_marked(tmp_path, example_store):
    cfg = _small(tmp_path, example_store)
    ok("train", "--config", cfg, "-q")
    marker = json.loads((tmp_path / "run" / "topictk-run.json").read_text())
    manifest = json.loads((example_store / "manifest.json").read_text())
    assert marker["format"] == "topictk-run" and marker["format_version"] == 1
    assert len(marker["run_id"]) == 32 and marker["created"].endswith("+00:00")
    assert marker["vocab_sha256"] == manifest["vocab_sha256"]
    assert marker["corpus_id"] == manifest["corpus_id"]
    first = marker["run_id"]
    ok("train", "--config", cfg, "-q", "--force")
    assert json.loads((tmp_path / "run" / "topictk-run.json").read_text())["run_id"] != first


# --------------------------------------------------------------------------- --force
def test_force_replaces_only_the_files_training_wrote(tmp_path, example_store):
    cfg = _small(tmp_path, example_store)
    ok("train", "--config", cfg, "-q")
    run = tmp_path / "run"
    (run / "checkpoints" / "keep.txt").write_text("mine\n")
    (run / "notes.md").write_text("my notes\n")
    ok("train", "--config", cfg, "-q", "--force", "--set", "training.seed=6")
    assert (run / "checkpoints" / "keep.txt").read_text() == "mine\n"
    assert (run / "notes.md").read_text() == "my notes\n"
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == [
        "keep.txt", "step-00000005.npz", "step-00000010.npz"]
    assert not any(p.name.startswith(".replaced-") for p in run.iterdir())
    ok("evaluate", run)


def test_force_refuses_a_folder_that_is_not_a_run(tmp_path, example_store):
    folder = tmp_path / "mine"
    (folder / "checkpoints").mkdir(parents=True)
    (folder / "checkpoints" / "keep.txt").write_text("mine\n")
    cfg = _small(tmp_path, example_store, output=str(folder))
    before = snapshot(folder)
    for extra in ((), ("--force",)):
        message = fails(2, "train", "--config", cfg, "-q", *extra)
        assert message.startswith(f"{folder}: holds files that are not a topictk run; choose "
                                  f"another output")
        assert snapshot(folder) == before
    assert sorted(p.name for p in folder.iterdir()) == ["checkpoints"]    # no lock file left
    # a file where the run directory should be
    a_file = tmp_path / "afile"
    a_file.write_text("x\n")
    cfg = _small(tmp_path, example_store, output=str(a_file))
    message = fails(2, "train", "--config", cfg, "-q", "--force")
    assert message == f"{a_file}: exists and is not a folder; choose another output"
    assert a_file.read_text() == "x\n"


def test_force_never_replaces_the_root_home_or_working_folder(tmp_path, example_store,
                                                              monkeypatch):
    cfg = _small(tmp_path, example_store)
    message = fails(2, "train", "--config", cfg, "-q", "--out", "/", "--force")
    assert message == "/: is the root folder; --force never replaces it: choose another output"
    assert not Path("/.topictk.lock").exists()
    home = tmp_path / "home"
    ok("train", "--config", cfg, "-q", "--out", home)        # an empty folder may hold a run
    monkeypatch.setenv("HOME", str(home))
    message = fails(2, "train", "--config", cfg, "-q", "--out", home, "--force")
    assert message == (f"{home}: is your home folder; --force never replaces it: choose "
                       f"another output")
    run = tmp_path / "run"
    ok("train", "--config", cfg, "-q")
    monkeypatch.chdir(run / "checkpoints")
    message = fails(2, "train", "--config", cfg, "-q", "--force")
    assert message == (f"{run}: is the working directory or contains it; --force never "
                       f"replaces it: choose another output")
    monkeypatch.chdir(run)
    relative = write_config(tmp_path, example_store, name="here.yaml", output=".",
                            inference={"iterations": 10, "burn_in": 4, "thin": 2})
    data = yaml.safe_load(relative.read_text())
    data["output"] = "."
    (run / "here.yaml").write_text(yaml.safe_dump(data))
    message = fails(2, "train", "--config", run / "here.yaml", "-q", "--force")
    assert "is the working directory or contains it" in message
    # resuming in the working directory is fine: nothing is replaced
    ok("train", "--config", "config.yaml", "-q", "--resume", "--set", "inference.iterations=12")


def test_force_refuses_a_folder_holding_an_input(tmp_path, example_store):
    cfg = _small(tmp_path, example_store)
    ok("train", "--config", cfg, "-q")
    run = tmp_path / "run"
    inside = run / "exp.yaml"
    shutil.copy(cfg, inside)
    before = snapshot(run)
    message = fails(2, "train", "--config", inside, "-q", "--force")
    assert message == (f"{run}: holds the input {inside}; --force never replaces a folder "
                       f"holding an input: choose another output")
    assert snapshot(run) == before
    inside.unlink()
    # the run's own config.yaml is what the fix-it messages suggest retraining with
    ok("train", "--config", run / "config.yaml", "-q", "--force")
    # a run is never written inside a corpus store
    message = fails(2, "train", "--config", cfg, "-q", "--out", example_store / "run")
    assert message == (f"{example_store / 'run'}: is inside the corpus store {example_store}; "
                       f"write runs outside corpus stores")
    assert not (example_store / "run").exists()


def test_a_run_of_the_previous_release_is_recognised(tmp_path, example_store):
    """Runs written before the marker existed (config.yaml + checkpoints/) are runs: refused
    without --force, replaced with it."""
    run = tmp_path / "old"
    shutil.copytree(OLD_RUN, run, ignore=shutil.ignore_patterns("expected.json"))
    assert not (run / "topictk-run.json").exists()
    cfg = _small(tmp_path, example_store, output=str(run))
    message = fails(2, "train", "--config", cfg, "-q")
    assert message.startswith(f"{run}: output directory already holds a run; add --resume")
    ok("train", "--config", cfg, "-q", "--force")
    assert (run / "topictk-run.json").exists() and not (run / "expected.json").exists()
    ok("evaluate", run)


def test_a_run_that_stopped_before_its_first_checkpoint_says_so(tmp_path, example_store):
    cfg = _small(tmp_path, example_store)
    run = tmp_path / "run"
    ok("train", "--config", cfg, "-q")
    for name in ("model.npz", "metrics.jsonl"):
        (run / name).unlink()
    shutil.rmtree(run / "checkpoints")
    message = fails(2, "train", "--config", cfg, "-q")
    assert message == (f"{run}: holds a run that stopped before its first checkpoint; add "
                       f"--resume to start it again from step 0, --force to replace it, or "
                       f"choose another output")
    # both fixes work, and --resume gives the chain of an uninterrupted run
    ok("train", "--config", cfg, "-q", "--resume")
    resumed = json.loads(ok("evaluate", run, "--json").stdout)
    ok("train", "--config", cfg, "-q", "--force")
    assert json.loads(ok("evaluate", run, "--json").stdout) == resumed


# --------------------------------------------------------------------------- one writer
def _topictk(*args, **kwargs) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "topictk", *map(str, args)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kwargs)


def _wait_for_holder(run: Path, process: subprocess.Popen, timeout: float = 60) -> dict:
    deadline = time.monotonic() + timeout
    lock = run / ".topictk.lock"
    while time.monotonic() < deadline:
        assert process.poll() is None, process.communicate()
        text = lock.read_text() if lock.exists() else ""
        if text and (run / "config.yaml").exists():
            return json.loads(text)
        time.sleep(0.02)
    raise AssertionError("the first writer never took the lock")


def _long_config(tmp_path: Path, store: Path, seconds: float) -> Path:
    return write_config(tmp_path, store, inference={"iterations": 10 ** 6, "burn_in": 10,
                                                    "thin": 10 ** 5},
                        training={"eval_every": 200, "checkpoint_every": 200,
                                  "keep_checkpoints": 2, "time_limit": seconds})


def test_a_second_writer_is_refused_at_once_naming_the_first(tmp_path, example_store):
    cfg = _long_config(tmp_path, example_store, 20.0)
    run = tmp_path / "run"
    first = _topictk("train", "--config", cfg, "-q")
    holder = _wait_for_holder(run, first)
    assert holder["pid"] == first.pid and holder["host"]
    other = write_config(tmp_path, example_store, name="other.yaml",
                         model={"topics": 9, "alpha": 0.1, "beta": 0.01})
    for args in (("--config", other, "--force"), ("--config", cfg, "--resume")):
        began = time.monotonic()
        second = _topictk("train", *args, "-q")
        out, err = second.communicate(timeout=60)
        assert time.monotonic() - began < 30 and first.poll() is None
        assert second.returncode == 1 and out == ""
        lines = err.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in err
        assert lines[0].startswith(f"topictk: error: {run}: another topictk process is writing "
                                   f"this run (process {first.pid} on host ")
    out, err = first.communicate(timeout=120)
    assert first.returncode == 0, err
    assert yaml.safe_load((run / "config.yaml").read_text())["model"]["topics"] == 6
    steps = [m["step"] for m in metrics(run)]
    assert steps == sorted(set(steps)) and len(steps) >= 2
    assert (run / ".topictk.lock").read_text() == ""
    ok("evaluate", run)


def test_a_writer_killed_by_sigkill_leaves_no_lock_behind(tmp_path, example_store):
    cfg = _long_config(tmp_path, example_store, 60.0)
    run = tmp_path / "run"
    first = _topictk("train", "--config", cfg, "-q")
    holder = _wait_for_holder(run, first)
    deadline = time.monotonic() + 60
    while not list((run / "checkpoints").glob("step-*.npz")):
        assert time.monotonic() < deadline and first.poll() is None
        time.sleep(0.02)
    os.kill(first.pid, signal.SIGKILL)
    first.communicate(timeout=60)
    assert json.loads((run / ".topictk.lock").read_text())["pid"] == holder["pid"]   # stale note
    # a temporary file of a write the kill cut short, as the atomic writer leaves it
    stale = run / "checkpoints" / ".step-00099999.npz.topictk-abcd_123.tmp"
    stale.write_bytes(b"partial")
    out = ok("train", "--config", cfg, "-q", "--resume", "--set", "training.time_limit=0.5")
    assert "step" in out.stdout
    assert not stale.exists()
    steps = [m["step"] for m in metrics(run)]
    assert steps == sorted(set(steps))
    assert (run / ".topictk.lock").read_text() == ""


def test_metrics_readers_ignore_a_partial_last_line(tmp_path):
    path = tmp_path / "metrics.jsonl"
    append_metrics(path, {"step": 1, "perplexity_point": 9.5})
    append_metrics(path, {"step": 2, "perplexity_point": 9.0})
    with open(path, "a") as f:
        f.write('{"step": 3, "perplexity_po')      # a writer caught mid-line
    assert [r["step"] for r in read_metrics(path)] == [1, 2]
    truncate_metrics(path, 5)
    assert path.read_text().splitlines() == [json.dumps({"perplexity_point": 9.5, "step": 1}),
                                             json.dumps({"perplexity_point": 9.0, "step": 2})]


# --------------------------------------------------------------------------- --out FILE
@pytest.fixture
def trained_run(tmp_path, example_store) -> Path:
    ok("train", "--config", _small(tmp_path, example_store), "-q")
    return tmp_path / "run"


def test_infer_out_is_never_an_input_or_inside_a_run_or_store(tmp_path, trained_run,
                                                               example_store):
    docs = tmp_path / "docs.txt"
    docs.write_text("python class object method\nlist dictionary tuple\n")
    model = (trained_run / "model.npz").read_bytes()
    cases = [
        (docs, f"{docs}: is an input {docs}; choose another --out"),
        (trained_run / "model.npz", (f"{trained_run / 'model.npz'}: is inside the input "
                                     f"{trained_run}; choose another --out")),
        (example_store / "theta.jsonl", (f"{example_store / 'theta.jsonl'}: is inside the "
                                         f"corpus store {example_store}; --out never writes "
                                         f"into a corpus store: choose another --out")),
    ]
    for out, expected in cases:
        assert fails(2, "infer", trained_run, docs, "--out", out, "--force") == expected
    assert (trained_run / "model.npz").read_bytes() == model
    assert docs.read_text().startswith("python class")
    assert not (example_store / "theta.jsonl").exists()
    # another run, not the one inferred with, is protected too
    other = tmp_path / "other"
    shutil.copytree(trained_run, other)
    message = fails(2, "infer", trained_run, docs, "--out", other / "checkpoints" / "t.jsonl")
    assert message == (f"{other / 'checkpoints' / 't.jsonl'}: is inside the run {other}; --out "
                       f"never writes into a run: choose another --out")


def test_infer_out_replaces_a_regular_file_only_with_force(tmp_path, trained_run):
    docs = tmp_path / "docs.txt"
    docs.write_text("python class object method\n")
    out = tmp_path / "theta.jsonl"
    out.write_text("keep\n")
    assert fails(2, "infer", trained_run, docs, "--out", out) == (
        f"{out}: exists; add --force to replace it, or choose another --out")
    assert out.read_text() == "keep\n"
    ok("infer", trained_run, docs, "--out", out, "--force")
    assert json.loads(out.read_text().splitlines()[0])["tokens"] == 4
    message = fails(2, "infer", trained_run, docs, "--out", "/dev/null", "--force")
    assert message == ("/dev/null: is not a regular file; --out writes regular files only: "
                       "leave out --out to write to standard output and redirect it")
    assert Path("/dev/null").is_char_device()
    link = tmp_path / "link.jsonl"
    link.symlink_to(out)
    assert "is a symbolic link" in fails(2, "infer", trained_run, docs, "--out", link, "--force")
    assert link.is_symlink()


def test_prepare_out_is_never_inside_an_input_folder(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    for i in range(6):
        (docs / f"{i}.txt").write_text(f"python class object method number {i}\n")
    message = fails(2, "prepare", docs, "--out", docs / "store")
    assert message == (f"{docs / 'store'}: is inside the input folder {docs}, whose files the "
                       f"next prepare would read as documents; choose another --out")
    assert sorted(p.name for p in docs.iterdir()) == [f"{i}.txt" for i in range(6)]


def test_prepare_out_is_never_inside_a_run_or_a_store(tmp_path, trained_run, example_store):
    run_message = ("is inside the run directory {}, whose files training writes and "
                   "replaces; choose an --out outside it")
    for inside, expected in (
            (trained_run / "corpus", run_message.format(trained_run)),
            (trained_run / "checkpoints" / "corpus", run_message.format(trained_run)),
            (example_store / "nested",
             f"is inside the corpus store {example_store}; choose an --out outside it")):
        before = snapshot(inside.parent)
        assert fails(2, "prepare", EXAMPLE, "--out", inside) == f"{inside}: {expected}"
        assert snapshot(inside.parent) == before


def test_prepare_removes_what_a_killed_prepare_left(tmp_path):
    out = tmp_path / "store"
    left = tmp_path / ".store.tmp-abc123"           # as a prepare killed mid-write leaves it
    left.mkdir()
    write_partial_marker(left, "prepare", "store")
    (left / "train_words.npy").write_bytes(b"partial")
    old = time.time() - 60
    os.utime(left, (old, old))
    unrelated = tmp_path / ".other.tmp-abc123"
    unrelated.mkdir()
    ok("prepare", EXAMPLE, "--out", out)
    assert not left.exists() and unrelated.exists()


def test_readers_see_a_consistent_run_while_it_is_extended(tmp_path, example_store):
    """While ``train --resume`` extends a finished run, ``evaluate`` and ``topics`` keep reading
    the finished model and the samples it names, and give what they gave before."""
    cfg = _long_config(tmp_path, example_store, 1.0)
    run = tmp_path / "run"
    ok("train", "--config", cfg, "-q")
    before = json.loads(ok("evaluate", run, "--json").stdout)
    topics = ok("topics", run).stdout
    writer = _topictk("train", "--config", cfg, "-q", "--resume", "--set",
                      "training.time_limit=4")
    _wait_for_holder(run, writer)
    model = (run / "model.npz").stat().st_ino
    readings = 0
    while writer.poll() is None:
        during = json.loads(ok("evaluate", run, "--json").stdout)
        listed = ok("topics", run).stdout
        if (run / "model.npz").stat().st_ino == model:  # read before the writer's new model
            assert during["perplexity"] == before["perplexity"]
            assert during["step"] == before["step"]
            assert listed == topics
            readings += 1
    writer.communicate(timeout=60)
    assert writer.returncode == 0, writer.communicate()
    assert readings >= 1
    steps = [m["step"] for m in metrics(run)]
    assert steps == sorted(set(steps))
