"""Folders topictk did not write are never replaced or deleted, whatever their files are
called; runs and stores keep working when they are copied or moved.

Each case sets up a folder as a user (or another tool) would have it, runs the command that
used to replace or delete it, and checks that the command fails with one line and that every
file is still there, byte for byte."""
from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

from tests.integration._cli import (EXAMPLE, assert_same_run, fails, model_arrays, ok, snapshot,
                                    write_config)
from topictk.markers import write_partial_marker

NOT_A_STORE = ("exists and is not a topictk corpus store; --force replaces corpus stores only: "
               "choose another --out, or remove it yourself")
NOT_A_RUN = ("holds files that are not a topictk run; choose another output, or empty the "
             "folder yourself (--force replaces runs only)")


def _small(tmp_path: Path, store: Path, **sections) -> Path:
    sections.setdefault("inference", {"iterations": 10, "burn_in": 4, "thin": 2})
    sections.setdefault("training", {"checkpoint_every": 5})
    return write_config(tmp_path, store, **sections)


def _aged(path: Path, seconds: float = 600) -> None:
    """As if left long ago (clean-up spares folders younger than a second)."""
    then = time.time() - seconds
    os.utime(path, (then, then))


# --------------------------------------------------------------------------- prepare --force
def _browser_extension(folder: Path) -> None:
    folder.mkdir()
    (folder / "manifest.json").write_text(json.dumps(
        {"manifest_version": 3, "name": "tab saver", "version": "1.0"}))
    (folder / "background.js").write_text("chrome.tabs.query({}, () => {});\n")


def _manifest_only(folder: Path) -> None:
    folder.mkdir()
    (folder / "manifest.json").write_text('{"name": "my web app", "icons": []}\n')


def _damaged_store_with_a_user_file(folder: Path, store: Path) -> None:
    shutil.copytree(store, folder)
    (folder / "manifest.json").write_text("{ damaged")
    (folder / "notes.md").write_text("my notes about this corpus\n")


def _store_files_named_by_someone_else(folder: Path) -> None:
    """Every file name of a store, none of them a store's content, and a manifest of
    another format."""
    folder.mkdir()
    (folder / "manifest.json").write_text('{"format": "my-dataset", "files": 13}\n')
    (folder / "vocab.txt").write_text("alpha\nbeta\n")
    (folder / "train_words.npy").write_bytes(b"not an array")


@pytest.mark.parametrize("make", [_browser_extension, _manifest_only,
                                  _store_files_named_by_someone_else])
def test_prepare_force_never_replaces_a_folder_that_is_not_a_store(tmp_path, make):
    folder = tmp_path / "out"
    make(folder)
    before = snapshot(folder)
    assert fails(2, "prepare", EXAMPLE, "--out", folder, "--force") == f"{folder}: {NOT_A_STORE}"
    assert snapshot(folder) == before


def test_prepare_force_keeps_a_damaged_store_that_holds_a_user_file(tmp_path, example_store):
    folder = tmp_path / "out"
    _damaged_store_with_a_user_file(folder, example_store)
    before = snapshot(folder)
    assert fails(2, "prepare", EXAMPLE, "--out", folder, "--force") == f"{folder}: {NOT_A_STORE}"
    assert snapshot(folder) == before


def test_prepare_force_replaces_a_store_and_a_damaged_store(tmp_path, example_store):
    good = tmp_path / "good"
    shutil.copytree(example_store, good)
    ok("prepare", EXAMPLE, "--out", good, "--force", "--seed", "3")
    assert json.loads((good / "manifest.json").read_text())["format"] == "topictk-corpus"
    damaged = tmp_path / "damaged"
    shutil.copytree(example_store, damaged)
    (damaged / "manifest.json").write_text("{ damaged")     # only a store's files: still a store
    ok("prepare", EXAMPLE, "--out", damaged, "--force")
    ok("prepare", "--verify", damaged)


# --------------------------------------------------------------------------- prepare clean-up
@pytest.mark.parametrize("force", [False, True])
def test_prepare_leaves_dot_folders_it_did_not_make(tmp_path, example_store, force):
    """Folders named as topictk's temporary and replaced stores, but not marked as such, stay
    (with and without --force, and whatever is in them)."""
    out = tmp_path / "X"
    if force:
        shutil.copytree(example_store, out)
    mine = []
    for name in (".X.old-2024", ".X.tmp-backup", ".X.old-abc123", ".X.tmp-"):
        folder = tmp_path / name
        folder.mkdir()
        (folder / "thesis.tex").write_text("\\chapter{One}\n")
        _aged(folder)
        mine.append(folder)
    # one that carries the marker of another operation, and one of another store's write
    other_op = tmp_path / ".X.tmp-other"
    other_op.mkdir()
    write_partial_marker(other_op, "replace-store", "X")
    other_store = tmp_path / ".X.old-other"
    other_store.mkdir()
    write_partial_marker(other_store, "replace-store", "Y")
    for folder in (other_op, other_store):
        _aged(folder)
        mine.append(folder)
    before = {str(p): snapshot(p) for p in mine}
    ok("prepare", EXAMPLE, "--out", out, *(["--force"] if force else []))
    assert {str(p): snapshot(p) for p in mine} == before


def test_prepare_removes_the_folders_a_killed_prepare_marked(tmp_path, example_store):
    out = tmp_path / "X"
    shutil.copytree(example_store, out)
    tmp = tmp_path / ".X.tmp-k1ll3d"       # a write killed while filling its folder
    tmp.mkdir()
    write_partial_marker(tmp, "prepare", "X")
    (tmp / "train_words.npy").write_bytes(b"partial")
    old = tmp_path / ".X.old-k1ll3d"       # a replacement killed while deleting the old store
    old.mkdir()
    write_partial_marker(old, "replace-store", "X")
    shutil.copytree(example_store, old / "store")
    for folder in (tmp, old):
        _aged(folder)
    ok("prepare", EXAMPLE, "--out", tmp_path / "Y")      # another store's write: not these
    assert tmp.exists() and old.exists()
    ok("prepare", EXAMPLE, "--out", out, "--force")
    assert not tmp.exists() and not old.exists()


def test_a_replacement_killed_before_the_new_store_took_its_place_is_kept(tmp_path,
                                                                          example_store):
    """The old store sits in the marked folder and the new one never arrived: that folder is
    all there is of the store, so clean-up keeps it."""
    old = tmp_path / ".X.old-k1ll3d"
    old.mkdir()
    write_partial_marker(old, "replace-store", "X")
    shutil.copytree(example_store, old / "store")
    _aged(old)
    ok("prepare", EXAMPLE, "--out", tmp_path / "X")
    assert (old / "store" / "manifest.json").exists()


def test_a_store_written_carries_no_partial_marker(tmp_path):
    out = tmp_path / "store"
    ok("prepare", EXAMPLE, "--out", out)
    assert not (out / "topictk-partial.json").exists()
    assert not list(tmp_path.glob(".store.*"))


# --------------------------------------------------------------------------- train --force
def _ml_project(folder: Path) -> None:
    """A machine-learning project: config.yaml beside checkpoints/ and a log."""
    folder.mkdir()
    (folder / "config.yaml").write_text("model: resnet50\nlr: 0.1\n")
    (folder / "checkpoints").mkdir()
    (folder / "checkpoints" / "epoch-3.pt").write_bytes(b"\x80\x02weights")
    (folder / "metrics.jsonl").write_text('{"epoch": 3, "loss": 0.4}\n')


def _ml_project_with_step_files(folder: Path) -> None:
    """The same with NumPy checkpoints named as topictk names them, and a model.npz."""
    folder.mkdir()
    (folder / "config.yaml").write_text("model: mlp\n")
    (folder / "checkpoints").mkdir()
    np.savez(folder / "checkpoints" / "step-00000010.npz", w=np.ones(3))
    np.savez(folder / "model.npz", w=np.ones(3))


def _topictk_run_with_a_user_file(folder: Path, run: Path) -> None:
    """A run of an earlier release (no marker) with a file the user put in it."""
    shutil.copytree(run, folder)
    (folder / "topictk-run.json").unlink()
    (folder / "analysis.ipynb").write_text("{}\n")


@pytest.mark.parametrize("make", [_ml_project, _ml_project_with_step_files])
@pytest.mark.parametrize("force", [False, True])
def test_train_never_replaces_a_project_that_looks_like_a_run(tmp_path, example_store, make,
                                                              force):
    folder = tmp_path / "project"
    make(folder)
    cfg = _small(tmp_path, example_store)
    before = snapshot(folder)
    message = fails(2, "train", "--config", cfg, "--out", folder, "-q",
                    *(["--force"] if force else []))
    assert message == f"{folder}: {NOT_A_RUN}"
    assert snapshot(folder) == before
    assert sorted(p.name for p in folder.iterdir()) == sorted(before_names(before))


def before_names(snap: dict[str, str]) -> set[str]:
    return {name.split("/")[0] for name in snap}


def test_an_earlier_release_run_with_a_user_file_is_not_replaced(tmp_path, example_store):
    cfg = _small(tmp_path, example_store)
    ok("train", "--config", cfg, "-q")
    folder = tmp_path / "old"
    _topictk_run_with_a_user_file(folder, tmp_path / "run")
    before = snapshot(folder)
    assert fails(2, "train", "--config", cfg, "--out", folder, "-q", "--force") == \
        f"{folder}: {NOT_A_RUN}"
    assert snapshot(folder) == before


def test_an_earlier_release_run_is_still_a_run(tmp_path, example_store):
    """Without the marker but with nothing but a run's files and a checkpoint topictk opens,
    a folder stays a run: --force replaces it and --resume continues it."""
    cfg = _small(tmp_path, example_store)
    ok("train", "--config", cfg, "-q")
    old = tmp_path / "old"
    shutil.copytree(tmp_path / "run", old)
    (old / "topictk-run.json").unlink()
    ok("train", "--config", cfg, "--out", old, "-q", "--resume",
       "--set", "inference.iterations=15")
    ok("train", "--config", cfg, "--out", old, "-q", "--force")
    assert_same_run(tmp_path / "run", old)


# --------------------------------------------------------------------------- copies and moves
@pytest.fixture
def trained(tmp_path, example_store) -> Path:
    cfg = _small(tmp_path, example_store)
    ok("train", "--config", cfg, "-q")
    return tmp_path / "run"


def test_a_saved_config_names_no_output_path(trained):
    saved = yaml.safe_load((trained / "config.yaml").read_text())
    assert saved["output"] == "."


def test_retraining_a_copy_replaces_the_copy_only(trained, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(trained, copy)
    original = snapshot(trained)
    ok("train", "--config", copy / "config.yaml", "-q", "--force")
    assert snapshot(trained) == original
    assert_same_run(trained, copy)
    marker = json.loads((copy / "topictk-run.json").read_text())
    assert marker["run_id"] != json.loads((trained / "topictk-run.json").read_text())["run_id"]


def test_resuming_a_copy_continues_the_copy_only(trained, tmp_path, example_store):
    copy = tmp_path / "copy"
    shutil.copytree(trained, copy)
    original = snapshot(trained)
    ok("train", "--config", copy / "config.yaml", "-q", "--resume",
       "--set", "inference.iterations=15")
    assert snapshot(trained) == original
    assert model_arrays(copy)[0]["state"]["step"] == 15
    straight = tmp_path / "straight"
    ok("train", "--config", _small(tmp_path, example_store, name="long.yaml",
                                   inference={"iterations": 15, "burn_in": 4, "thin": 2}),
       "--out", straight, "-q")
    assert_same_run(straight, copy, extra_evaluations=True)


def test_a_moved_run_is_read_resumed_and_retrained_where_it_is(trained, tmp_path):
    moved = tmp_path / "elsewhere" / "moved"
    moved.parent.mkdir()
    expected = json.loads(ok("evaluate", trained, "--json").stdout)
    shutil.move(trained, moved)
    scored = json.loads(ok("evaluate", moved, "--json").stdout)
    assert scored.pop("run") == str(moved) and expected.pop("run") == str(trained)
    assert scored == expected
    ok("topics", moved)
    ok("train", "--config", moved / "config.yaml", "-q", "--resume",
       "--set", "inference.iterations=12")
    ok("train", "--config", moved / "config.yaml", "-q", "--force")
    assert not trained.exists()


def test_the_fix_it_commands_name_the_folder_given(trained, tmp_path):
    """The command a failure prints retrains the run the user named, a copy included."""
    copy = tmp_path / "copy"
    shutil.copytree(trained, copy)
    (copy / "model.npz").write_bytes(b"damaged")
    shutil.rmtree(copy / "checkpoints")
    message = fails(1, "evaluate", copy)
    fix = f"'topictk train --config {copy / 'config.yaml'} --force'"
    assert message.endswith(fix), message
    original = snapshot(trained)
    ok(*fix.strip("'").split()[1:], "-q")
    assert snapshot(trained) == original
    ok("evaluate", copy)


def test_an_earlier_release_copy_resumes_where_it_is(tmp_path, example_store):
    """A run of an earlier release saved its absolute output path: its copy still trains in
    the copy, never in the original."""
    cfg = _small(tmp_path, example_store)
    ok("train", "--config", cfg, "-q")
    original = tmp_path / "run"
    (original / "topictk-run.json").unlink()
    saved = yaml.safe_load((original / "config.yaml").read_text())
    saved["output"] = str(original)                 # as an earlier release wrote it
    (original / "config.yaml").write_text(yaml.safe_dump(saved, sort_keys=False))
    copy = tmp_path / "copy"
    shutil.copytree(original, copy)
    before = snapshot(original)
    ok("train", "--config", copy / "config.yaml", "-q", "--resume",
       "--set", "inference.iterations=12")
    ok("train", "--config", copy / "config.yaml", "-q", "--force")
    assert snapshot(original) == before


def test_reading_a_run_writes_nothing_into_it_but_its_scores(trained, tmp_path, example_store):
    """evaluate, topics, infer, export and compare only read a run (evaluate and compare add
    its scores cache, scores.json, and nothing else), and every command only reads a store, so
    read-only copies (or runs and stores on a read-only file system) work as well as the
    originals."""
    (trained / "scores.json").unlink(missing_ok=True)
    before, store = snapshot(trained), snapshot(example_store)
    store_listing = sorted(p.name for p in example_store.iterdir())
    ok("prepare", "--verify", example_store)
    ok("train", "--config", trained / "config.yaml", "-q", "--out", tmp_path / "again")
    listing = sorted(str(p.relative_to(trained)) for p in trained.rglob("*"))
    ok("evaluate", trained)
    ok("topics", trained)
    ok("infer", trained, EXAMPLE)
    ok("export", trained, "--what", "topic-words")
    ok("compare", trained)
    after = snapshot(trained)
    assert after.pop("scores.json")
    assert after == before
    assert sorted(str(p.relative_to(trained)) for p in trained.rglob("*")
                  if p.name != "scores.json") == listing
    assert snapshot(example_store) == store
    assert sorted(p.name for p in example_store.iterdir()) == store_listing


def test_a_moved_store_names_the_run_config_and_the_fix_works(trained, tmp_path, example_store):
    store = tmp_path / "store-copy"
    shutil.copytree(example_store, store)
    saved = trained / "config.yaml"
    data = yaml.safe_load(saved.read_text())
    data["corpus"] = str(store)
    saved.write_text(yaml.safe_dump(data, sort_keys=False))
    ok("evaluate", trained)
    moved = tmp_path / "stores" / "moved"
    moved.parent.mkdir()
    shutil.move(store, moved)
    message = fails(2, "evaluate", trained)
    assert message == (f"{saved}: corpus {store}: no corpus store there (moved or deleted); "
                       f"set corpus in {saved} to the store's new place, or prepare it there "
                       f"again with 'topictk prepare INPUT --out {store}'")
    assert fails(2, "train", "--config", saved, "-q", "--resume") == message
    data["corpus"] = str(moved)                     # the fix, followed
    saved.write_text(yaml.safe_dump(data, sort_keys=False))
    ok("evaluate", trained)
    ok("train", "--config", saved, "-q", "--resume", "--set", "inference.iterations=12")


# --------------------------------------------------------------------------- killed runs
def test_a_run_killed_while_starting_is_recognised_and_restarted(tmp_path, example_store):
    """Killed after its marker and before its first checkpoint: the next train says so, and
    both fixes it names work."""
    cfg = _small(tmp_path, example_store)
    ok("train", "--config", cfg, "-q", "--out", tmp_path / "whole")
    run = tmp_path / "run"
    run.mkdir()
    shutil.copy(tmp_path / "whole" / "topictk-run.json", run)    # what a kill leaves
    message = fails(2, "train", "--config", cfg, "-q")
    assert "holds a run that stopped before its first checkpoint" in message
    ok("train", "--config", cfg, "-q", "--resume")
    assert_same_run(tmp_path / "whole", run)


def test_reading_a_run_killed_before_its_config_names_the_command_that_trains_it(
        tmp_path, example_store):
    cfg = _small(tmp_path, example_store)
    ok("train", "--config", cfg, "-q", "--out", tmp_path / "whole")
    run = tmp_path / "run"
    run.mkdir()
    shutil.copy(tmp_path / "whole" / "topictk-run.json", run)    # what a kill leaves
    for command in (("evaluate",), ("topics",), ("compare",), ("export", "--what", "doc-topics"),
                    ("infer", EXAMPLE), ("report", "--out", tmp_path / "r.html"),
                    ("plot", "--out", tmp_path / "p.svg")):
        message = fails(2, command[0], run, *command[1:])
        fix = f"'topictk train --config {cfg} --out {run} --force'"
        assert message == (f"{run}: a run stopped while starting, before it wrote config.yaml; "
                           f"it has nothing to read: train it again with {fix}")
    ok(*fix.strip("'").split()[1:], "-q")                         # the fix, followed
    ok("evaluate", run)
