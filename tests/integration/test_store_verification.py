"""Verified stores and runs: every command that opens a store checks it against its manifest
(array headers and sizes, counts, the vocabulary hash); ``train`` and ``prepare --verify`` also
check every array's sha256; a run refuses a store whose vocabulary is not the one it was
trained on; killed atomic writes leave nothing behind for long."""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import time
from pathlib import Path

import numpy as np
import pytest

from tests.integration._cli import fails, ok, snapshot, write_config
from topictk._fileio import atomic_write_text, remove_stale_temps


@pytest.fixture(scope="module")
def trained(tmp_path_factory, example_store) -> tuple[Path, Path]:
    """(a run, its config) trained on a copy of the example store, which tests damage in
    their own copies."""
    base = tmp_path_factory.mktemp("verified")
    cfg = write_config(base, example_store, inference={"iterations": 10, "burn_in": 4, "thin": 2},
                       training={"checkpoint_every": 5})
    ok("train", "--config", cfg, "-q")
    return base / "run", cfg


@pytest.fixture
def copy(tmp_path, trained, example_store):
    """A copy of the store and of the run pointing at it: (store, run, config)."""
    run, _ = trained
    store = tmp_path / "store"
    shutil.copytree(example_store, store)
    new_run = tmp_path / "run"
    shutil.copytree(run, new_run)
    cfg = write_config(tmp_path, store, inference={"iterations": 10, "burn_in": 4, "thin": 2},
                       training={"checkpoint_every": 5})
    text = (new_run / "config.yaml").read_text().replace(str(run), str(new_run))
    (new_run / "config.yaml").write_text(text.replace(str(example_store), str(store)))
    return store, new_run, cfg


def _every_command_refuses(store: Path, run: Path, cfg: Path, expected: str) -> None:
    docs = run.parent / "docs.txt"
    docs.write_text("python class object method\n")
    commands = [("train", "--config", cfg, "-q", "--force"), ("evaluate", run),
                ("topics", run), ("infer", run, docs), ("prepare", "--verify", store)]
    before = snapshot(run)
    for args in commands:
        message = fails(1, *args)
        assert message.startswith(expected), (args, message)
    assert snapshot(run) == before


def test_one_flipped_byte_is_refused_by_train_naming_the_file_and_verify(copy):
    store, run, cfg = copy
    path = store / "train_words.npy"
    data = bytearray(path.read_bytes())
    data[-7] ^= 0x01                                 # a word id, shapes unchanged
    path.write_bytes(bytes(data))
    before = snapshot(run)
    message = fails(1, "train", "--config", cfg, "-q", "--force")
    assert message == (f"{path}: content differs from manifest.json (sha256); the store is "
                       f"damaged: 'topictk prepare --verify {store}' lists every damaged file; "
                       f"prepare the corpus again with --force")
    message = fails(1, "train", "--config", run / "config.yaml", "-q", "--resume")
    assert message.startswith(f"{path}: content differs from manifest.json (sha256)")
    assert snapshot(run) == before
    message = fails(1, "prepare", "--verify", store)
    assert message == (f"{store}: 1 array(s) differ from their sha256 in manifest.json: "
                       f"train_words.npy; the store is damaged, prepare the corpus again with "
                       f"--force")


def test_a_shuffled_vocabulary_is_refused_by_every_command(copy):
    store, run, cfg = copy
    words = (store / "vocab.txt").read_text().splitlines()
    rng = np.random.default_rng(0)
    (store / "vocab.txt").write_text("\n".join(rng.permutation(words)) + "\n")
    _every_command_refuses(store, run, cfg, f"{store / 'vocab.txt'}: differs from the vocabulary "
                                            f"the store was prepared with (vocab_sha256 in "
                                            f"manifest.json); the word ids would name wrong words")


def test_a_truncated_vocabulary_is_refused_by_every_command(copy):
    store, run, cfg = copy
    words = (store / "vocab.txt").read_text().splitlines()
    (store / "vocab.txt").write_text("\n".join(words[:-40]) + "\n")
    _every_command_refuses(store, run, cfg,
                           f"{store / 'vocab.txt'}: differs from the vocabulary the store was "
                           f"prepared with (vocab_sha256 in manifest.json) (it has "
                           f"{len(words) - 40} lines, the store {len(words)} words)")


def test_a_truncated_array_is_refused_when_the_store_is_opened(copy):
    store, run, cfg = copy
    path = store / "test_held_counts.npy"
    data = path.read_bytes()
    path.write_bytes(data[:-4])
    _every_command_refuses(store, run, cfg, f"{path}: {len(data) - 4} bytes where its header "
                                            f"needs {len(data)} (truncated or extended)")


def test_counts_that_disagree_with_the_arrays_are_refused(copy):
    store, run, _ = copy
    manifest = json.loads((store / "manifest.json").read_text())
    manifest["counts"]["train_tokens"] += 1
    (store / "manifest.json").write_text(json.dumps(manifest))
    message = fails(1, "evaluate", run)
    assert message == (f"{store / 'train_words.npy'}: has {manifest['counts']['train_tokens'] - 1}"
                       f" rows, manifest.json counts train_tokens = "
                       f"{manifest['counts']['train_tokens']}; the store was modified; prepare "
                       f"the corpus again with --force")


def test_a_run_refuses_a_store_whose_vocabulary_it_was_not_trained_on(copy):
    """A store edited consistently (vocabulary and its hash) but still claiming the corpus id
    the run was trained on: the run's marker holds the vocabulary hash it was trained on."""
    store, run, _ = copy
    words = (store / "vocab.txt").read_text().splitlines()
    words[0], words[1] = words[1], words[0]
    text = "\n".join(words) + "\n"
    (store / "vocab.txt").write_text(text)
    manifest = json.loads((store / "manifest.json").read_text())
    manifest["vocab_sha256"] = hashlib.sha256(text.encode()).hexdigest()
    (store / "manifest.json").write_text(json.dumps(manifest))
    expected = (f"{store}: its vocabulary is not the one the run in {run} was trained on "
                f"(vocab_sha256 differs from topictk-run.json); point corpus at the store it "
                f"was trained on")
    assert fails(2, "evaluate", run) == expected
    assert fails(2, "topics", run) == expected
    assert fails(2, "train", "--config", run / "config.yaml", "-q", "--resume") == expected
    ok("prepare", "--verify", store)        # the store itself is consistent


def test_prepare_verify_reports_a_sound_store(example_store):
    out = ok("prepare", "--verify", example_store).stdout.strip()
    assert out.startswith(f"{example_store}: verified: 13 arrays (")
    assert "words match the vocabulary hash, the manifest's counts match (" in out
    message = fails(2, "prepare", "--verify", example_store, "--out", example_store / "x")
    assert message == "--verify STORE checks an existing store: give no INPUTS and no --out"
    assert fails(2, "prepare", "x.txt") == ("--out is required: the folder of the corpus store "
                                            "to create (or --verify STORE to check one)")


def test_stale_temporary_files_are_removed_by_the_next_writer(tmp_path):
    target = tmp_path / "model.npz"
    stale = tmp_path / ".model.npz.topictk-k2j4_x9a.tmp"       # a write killed before its rename
    stale.write_bytes(b"partial")
    busy = tmp_path / ".model.npz.topictk-q1w2e3r4.tmp"        # a write going on in another process
    busy.write_bytes(b"being written")
    other = tmp_path / ".config.yaml.topictk-a1b2c3d4.tmp"     # another target's
    other.write_bytes(b"x")
    users = tmp_path / ".model.npz.k2j4_x9a.tmp"       # the user's, or another program's
    users.write_bytes(b"keep me")
    old = time.time() - 60
    for path in (stale, busy, other, users):
        os.utime(path, (old, old))
    holder = os.open(busy, os.O_RDONLY)
    fcntl.flock(holder, fcntl.LOCK_EX)
    try:
        atomic_write_text(target, "new\n")
        assert target.read_text() == "new\n"
        assert not stale.exists() and busy.exists() and other.exists()
    finally:
        os.close(holder)
    young = tmp_path / ".model.npz.topictk-zzzzzzzz.tmp"        # just created, not yet locked
    young.write_bytes(b"")
    assert sorted(remove_stale_temps(tmp_path)) == sorted([busy, other])
    assert young.exists() and not busy.exists() and not other.exists()
    assert users.read_bytes() == b"keep me"
