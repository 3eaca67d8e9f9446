"""One line and the right exit code, always: every OSError names its path and exits 1 (a full
disk, a read-only folder, standard output closed or full), Ctrl-C exits 130 on every command,
thread counts are capped instead of crashing OpenMP, NumPy's warnings stay out of the message,
and a defect is one line too (the traceback only with --debug)."""
from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from tests.integration._cli import EXAMPLE, REPO, fails, ok, run, write_config
from topictk import limits


@pytest.fixture(scope="module")
def trained(tmp_path_factory, example_store) -> Path:
    directory = tmp_path_factory.mktemp("failures")
    config = write_config(directory, example_store, inference={"iterations": 20, "burn_in": 10,
                                                                "thin": 5})
    ok("train", "--config", config, "-q")
    return directory / "run"


def _no_space(*args, **kwargs):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def _one_line(outcome) -> str:
    lines = [line for line in outcome.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, outcome.stderr
    assert "Traceback" not in outcome.stderr
    return lines[0]


# ---------------------------------------------------------------- OSError

def test_disk_full_while_training_names_the_checkpoint(tmp_path, example_store, monkeypatch):
    import topictk.rundir.checkpoint as ckpt

    monkeypatch.setattr(ckpt, "_write_npz", _no_space)
    config = write_config(tmp_path, example_store)
    message = fails(1, "train", "--config", config, "-q")
    assert message == (f"{tmp_path / 'run' / 'checkpoints' / 'step-00000020.npz'}: No space "
                       f"left on device; free some space on that device, or write somewhere "
                       f"else")


def test_disk_full_while_logging_metrics_names_the_log(tmp_path, example_store, monkeypatch):
    from topictk.rundir import metrics

    monkeypatch.setattr(metrics, "os", SimpleNamespace(fsync=_no_space))
    config = write_config(tmp_path, example_store)
    message = fails(1, "train", "--config", config, "-q")
    assert message.startswith(f"{tmp_path / 'run' / 'metrics.jsonl'}: No space left on device")


def test_disk_full_while_preparing_names_the_store(tmp_path, monkeypatch):
    from topictk.corpus import store

    monkeypatch.setattr(store.np, "save", _no_space)
    message = fails(1, "prepare", EXAMPLE, "--out", tmp_path / "store")
    assert message.startswith(f"{tmp_path / 'store'}: No space left on device")
    assert not list(tmp_path.iterdir()), "the temporary store is removed"


def test_an_unwritable_output_names_the_path(tmp_path, example_store):
    message = fails(1, "prepare", EXAMPLE, "--out", "/proc/topictk-store")
    assert message.startswith("/proc/topictk-store: ")
    config = write_config(tmp_path, example_store)
    message = fails(1, "train", "--config", config, "--out", "/proc/topictk-run", "-q")
    assert message.startswith("/proc/topictk-run")


def test_disk_full_writing_infer_output_names_the_file(trained, tmp_path, monkeypatch):
    import topictk._fileio as fileio

    monkeypatch.setattr(fileio.os, "fsync", _no_space)
    out = tmp_path / "theta.jsonl"
    message = fails(1, "infer", trained, EXAMPLE, "--out", out, "--sweeps", "4", "--burn-in", "2")
    assert message.startswith(f"{out}: No space left on device")
    assert not out.exists() and not list(tmp_path.iterdir())


def _topictk(*args, **popen) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen([sys.executable, "-m", "topictk", *map(str, args)], env=env,
                            stderr=subprocess.PIPE, **popen)


def test_a_closed_pipe_on_stdout_is_one_line(trained):
    proc = _topictk("topics", trained, "--top", "50", stdout=subprocess.PIPE)
    proc.stdout.close()                 # like `| head -0`: the reader is gone at once
    stderr = proc.communicate(timeout=120)[1].decode()
    assert proc.returncode == 1, stderr
    assert stderr == "topictk: error: <stdout>: Broken pipe; the reader of the output stopped " \
                     "early\n"


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_stdout_on_a_full_device_is_one_line(trained):
    with open("/dev/full", "wb") as full:
        proc = _topictk("evaluate", trained, "--json", stdout=full)
        stderr = proc.communicate(timeout=120)[1].decode()
    assert proc.returncode == 1, stderr
    assert stderr == ("topictk: error: <stdout>: No space left on device; free some space on "
                      "that device, or write somewhere else\n")


# ---------------------------------------------------------------- Ctrl-C

def test_ctrl_c_exits_130_with_one_line(trained, monkeypatch):
    import topictk.evaluation.run as evaluation

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(evaluation, "quality_of_top_words", interrupted)
    outcome = run("evaluate", trained, "--recompute")      # not the cached score
    assert outcome.exit_code == 130
    assert _one_line(outcome) == "topictk: interrupted"


@pytest.mark.parametrize("delay", [0.15, 0.6, 1.5])
def test_ctrl_c_at_any_moment_of_a_command(trained, delay):
    """SIGINT while the modules load, while the run is read, while the command runs (the
    first few hundredths of a second belong to Python's own start-up, before any topictk
    code can catch it)."""
    proc = _topictk("evaluate", trained, "--left-to-right", "--particles", "5000",
                    stdout=subprocess.DEVNULL)
    time.sleep(delay)
    proc.send_signal(signal.SIGINT)
    stderr = proc.communicate(timeout=120)[1].decode()
    assert proc.returncode == 130, stderr
    assert stderr.strip() == "topictk: interrupted"


def test_ctrl_c_while_preparing(tmp_path):
    big = tmp_path / "big.txt"
    big.write_text(EXAMPLE.read_text(encoding="utf-8") * 200, encoding="utf-8")
    proc = _topictk("prepare", big, "--out", tmp_path / "store", stdout=subprocess.DEVNULL)
    time.sleep(2.0)
    proc.send_signal(signal.SIGINT)
    stderr = proc.communicate(timeout=120)[1].decode()
    assert proc.returncode == 130, stderr
    assert stderr.strip() == "topictk: interrupted"
    assert not (tmp_path / "store").exists()


# ---------------------------------------------------------------- threads

def test_evaluate_and_infer_threads_are_capped(trained, caplog):
    cap = limits.max_threads()
    outcome = ok("evaluate", trained, "--threads", "100000", "--json")
    assert (f"--threads = 100000 is more than this machine can use ({limits.cores()} cores "
            f"x 4); using {cap} threads") in outcome.stderr
    ok("infer", trained, EXAMPLE, "--threads", "1000000000", "--sweeps", "4", "--burn-in", "2")


def test_training_with_absurd_threads_does_not_crash(tmp_path, example_store):
    config = write_config(tmp_path, example_store, inference={"iterations": 4, "burn_in": 2,
                                                               "thin": 1, "chunks": 8})
    outcome = ok("train", "--config", config, "--set", "training.threads=100000", "-q")
    assert "using" in outcome.stderr
    outcome = ok("train", "--config", config, "--set", "training.threads=1e9", "-q", "--force")
    assert "training.threads = 1000000000 is more than this machine can use" in outcome.stderr


# ---------------------------------------------------------------- warnings and defects

def test_numpy_warnings_do_not_precede_the_message(tmp_path, example_store):
    config = write_config(tmp_path, example_store, inference={
        "algorithm": "sgrld", "iterations": 20, "burn_in": 10, "thin": 5, "batch_size": 32,
        "sweeps": 4, "step": {"a": 1e300, "b": 1000, "c": 0.55}})
    proc = _topictk("train", "--config", config, "-q", stdout=subprocess.DEVNULL)
    stderr = proc.communicate(timeout=300)[1].decode()
    assert proc.returncode == 1, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and "became NaN or infinite" in lines[0], stderr


def test_a_defect_is_one_line_and_the_traceback_is_kept_for_debug(trained, monkeypatch):
    import topictk.evaluation.run as evaluation

    def broken(*args, **kwargs):
        raise IndexError("index 7 is out of bounds")

    monkeypatch.setattr(evaluation, "quality_of_top_words", broken)
    outcome = run("evaluate", trained, "--recompute")      # not the cached score
    assert outcome.exit_code == 1
    assert _one_line(outcome) == ("topictk: error: internal error (IndexError: index 7 is out "
                                  "of bounds); rerun with --debug for the traceback and report "
                                  "it")
    outcome = run("--debug", "evaluate", trained, "--recompute")
    assert isinstance(outcome.exception, IndexError)


def test_numpy_error_state_is_restored_after_a_command(trained):
    before = np.geterr()
    ok("topics", trained)
    assert np.geterr() == before


# ---------------------------------------------------------------- JSON nesting

def _deep_jsonl(path: Path) -> Path:
    path.write_text('{"text": "python lists and tuples"}\n'
                    '{"text": "a b c", "m": ' + "[" * 100_000 + "]" * 100_000 + "}\n",
                    encoding="utf-8")
    return path


def test_deeply_nested_jsonl_is_one_line_in_prepare_and_infer(trained, tmp_path):
    deep = _deep_jsonl(tmp_path / "deep.jsonl")
    message = fails(1, "prepare", deep, "--out", tmp_path / "store")
    assert message == (f"{deep}:2: not valid JSON (nested more than 64 levels deep); each line "
                       f"must be one JSON object")
    message = fails(1, "infer", trained, deep, "--sweeps", "4", "--burn-in", "2")
    assert message.startswith(f"{deep}:2: not valid JSON (nested more than 64 levels deep)")


# ---------------------------------------------------------------- encodings and line endings

def test_a_utf16_file_is_named_utf16_not_binary(tmp_path):
    utf16 = tmp_path / "notes.txt"
    utf16.write_bytes("python lists\nand tuples\n".encode("utf-16"))
    message = fails(1, "prepare", utf16, "--out", tmp_path / "store")
    assert message == (f"{utf16}:1: looks like UTF-16 text (a byte-order mark or NUL bytes "
                       f"between the letters); convert the file to UTF-8, e.g. with 'iconv -f "
                       f"UTF-16 -t UTF-8'")
    no_bom = tmp_path / "no_bom.txt"
    no_bom.write_bytes("python lists and tuples\n".encode("utf-16-le"))
    assert "looks like UTF-16 text" in fails(1, "prepare", no_bom, "--out", tmp_path / "s2")


def test_carriage_returns_alone_end_lines(tmp_path):
    lines = EXAMPLE.read_text(encoding="utf-8").splitlines()
    mac = tmp_path / "mac.txt"
    mac.write_bytes("\r".join(lines).encode("utf-8") + b"\r")
    unix = tmp_path / "unix.txt"
    unix.write_bytes("\n".join(lines).encode("utf-8") + b"\n")
    summaries = [ok("prepare", path, "--out", tmp_path / f"store-{path.stem}").stdout
                 for path in (mac, unix)]
    assert "documents:    307 train, 34 test (341 read" in summaries[0]
    assert summaries[0].splitlines()[1:] == summaries[1].splitlines()[1:]


def test_a_corpus_that_is_a_text_file_gets_a_fix_that_reads_it(tmp_path):
    config = write_config(tmp_path, EXAMPLE)
    message = fails(2, "train", "--config", config, "-q")
    assert message == (f"{EXAMPLE}: is a file, not a corpus store; prepare it with 'topictk "
                       f"prepare {EXAMPLE} --out STORE' and point corpus at STORE")
