"""Checkpoints (topictk/training/checkpoint.py): atomic, versioned, loud on damage."""
from __future__ import annotations

import json
import os
import stat
import zipfile
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from topictk import _fileio as fileio
from topictk.errors import CheckpointError, CorpusUsageError, UsageError
from topictk.rundir import checkpoint as ckpt
from topictk.rundir.layout import check_compatible
from topictk.streams import Streams


def _arrays(seed=0):
    rng = np.random.default_rng(seed)
    return {"z": rng.integers(0, 5, 100).astype(np.int32),
            "nkw": rng.integers(0, 9, (7, 5)).astype(np.int32),
            "alpha": rng.random(5)}


def test_save_and_load_round_trip(tmp_path):
    arrays = _arrays()
    header = {"algorithm": "gibbs", "state": {"step": 12}, "note": "ünïcode"}
    path = tmp_path / "ck" / "step-00000012.npz"
    ckpt.save_arrays(path, header, arrays)
    got_header, got = ckpt.load_arrays(path)
    assert got_header["format"] == "topictk-checkpoint" and got_header["format_version"] == 1
    assert {k: got_header[k] for k in header} == header
    assert set(got) == set(arrays)
    for name, value in arrays.items():
        assert got[name].dtype == value.dtype
        np.testing.assert_array_equal(got[name], value)


def test_atomic_write_leaves_no_temporary_files(tmp_path):
    path = tmp_path / "step-00000001.npz"
    ckpt.save_arrays(path, {}, _arrays())
    ckpt.save_arrays(path, {"again": True}, _arrays(1))           # replace in place
    fileio.atomic_write_text(tmp_path / "config.yaml", "a: 1\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.yaml", "step-00000001.npz"]
    assert ckpt.load_arrays(path)[0]["again"] is True


def test_failed_write_keeps_the_old_file_and_removes_the_temporary(tmp_path):
    path = tmp_path / "model.npz"
    ckpt.save_arrays(path, {"version": "old"}, _arrays())
    before = path.read_bytes()

    def broken_writer(f):
        f.write(b"partial bytes")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        fileio.atomic_write_bytes(path, broken_writer)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["model.npz"]


@pytest.mark.parametrize("mask, mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_new_files_follow_the_umask(tmp_path, set_umask, mask, mode):
    """mkstemp alone would leave 0600 whatever the umask: new files get 0o666 & ~umask."""
    set_umask(mask)
    ckpt.save_arrays(tmp_path / "ck" / "step-00000001.npz", {}, _arrays())
    fileio.atomic_write_text(tmp_path / "config.yaml", "a: 1\n")
    fileio.atomic_write_bytes(tmp_path / "out.jsonl", lambda f: f.write(b"{}\n"))
    for path in (tmp_path / "ck" / "step-00000001.npz", tmp_path / "config.yaml",
                 tmp_path / "out.jsonl"):
        assert stat.S_IMODE(path.stat().st_mode) == mode, path


def test_a_replaced_file_keeps_its_mode(tmp_path, set_umask):
    set_umask(0o022)
    path = tmp_path / "model.npz"
    ckpt.save_arrays(path, {}, _arrays())
    os.chmod(path, 0o640)
    ckpt.save_arrays(path, {"again": True}, _arrays(1))
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert ckpt.load_arrays(path)[0]["again"] is True


@pytest.mark.parametrize("keep_fraction", [0.0, 0.3, 0.6, 0.95])
def test_truncated_checkpoint_raises_checkpoint_error_naming_the_file(tmp_path, keep_fraction):
    path = tmp_path / "step-00000050.npz"
    ckpt.save_arrays(path, {"state": {"step": 50}}, _arrays())
    data = path.read_bytes()
    path.write_bytes(data[:int(len(data) * keep_fraction)])
    with pytest.raises(CheckpointError) as info:
        ckpt.load_arrays(path)
    message = str(info.value)
    assert message.startswith(f"{path}: truncated or corrupt")
    assert "delete it to fall back to an earlier checkpoint" in message


def test_corrupt_bytes_inside_a_checkpoint_are_detected(tmp_path):
    path = tmp_path / "step-00000050.npz"
    ckpt.save_arrays(path, {"state": {"step": 50}}, _arrays())
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    data[middle:middle + 64] = bytes(64)                        # zip member CRC no longer matches
    path.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match=f"{path}: truncated or corrupt"):
        ckpt.load_arrays(path)


def test_foreign_and_future_files_are_refused(tmp_path):
    foreign = tmp_path / "foreign.npz"
    np.savez(foreign, header=np.frombuffer(json.dumps({"format": "other"}).encode(), np.uint8))
    with pytest.raises(CheckpointError, match="foreign.npz: not a topictk checkpoint"):
        ckpt.load_arrays(foreign)
    future = tmp_path / "future.npz"
    header = {"format": "topictk-checkpoint", "format_version": 99}
    np.savez(future, header=np.frombuffer(json.dumps(header).encode(), np.uint8))
    with pytest.raises(CheckpointError, match="future.npz: checkpoint format version 99 is not 1"):
        ckpt.load_arrays(future)
    no_header = tmp_path / "plain.npz"
    np.savez(no_header, a=np.zeros(3))
    with pytest.raises(CheckpointError, match="plain.npz: truncated or corrupt \\(KeyError\\)"):
        ckpt.load_arrays(no_header)
    with pytest.raises(CheckpointError, match="missing.npz: not found"):
        ckpt.load_arrays(tmp_path / "missing.npz")
    plain_npy = tmp_path / "array.npz"
    with open(plain_npy, "wb") as f:
        np.save(f, np.arange(4))
    with pytest.raises(CheckpointError, match="array.npz: truncated or corrupt"):
        ckpt.load_arrays(plain_npy)
    text = tmp_path / "text.npz"
    text.write_text("hello")
    with pytest.raises(CheckpointError, match="text.npz: truncated or corrupt"):
        ckpt.load_arrays(text)
    assert not zipfile.is_zipfile(text)


def test_list_and_prune_checkpoints(tmp_path):
    directory = tmp_path / "checkpoints"
    for step in (5, 100, 20, 7):
        ckpt.save_arrays(ckpt.checkpoint_path(directory, step), {}, {"x": np.zeros(1)})
    (directory / "notes.txt").write_text("not a checkpoint")
    (directory / "step-x.npz").write_text("wrong name pattern")
    assert [s for s, _ in ckpt.list_checkpoints(directory)] == [5, 7, 20, 100]
    assert ckpt.checkpoint_path(directory, 20).name == "step-00000020.npz"
    ckpt.prune_checkpoints(directory, 2)
    assert [s for s, _ in ckpt.list_checkpoints(directory)] == [20, 100]
    assert (directory / "notes.txt").exists() and (directory / "step-x.npz").exists()
    assert ckpt.list_checkpoints(tmp_path / "absent") == []


def test_stream_states_round_trip_through_json():
    streams = Streams(7)
    a = np.random.Generator(streams.persistent((3, 0)))
    a.random(13)
    streams.persistent((0,))
    data = json.loads(json.dumps(streams.state()))
    restored = Streams.from_state(data)
    b = np.random.Generator(restored.persistent((3, 0)))
    np.testing.assert_array_equal(a.random(5), b.random(5))
    assert restored.seed == 7
    # derived streams depend only on (seed, key)
    np.testing.assert_array_equal(np.random.Generator(streams.derived((4, 2, 1))).random(3),
                                  np.random.Generator(restored.derived((4, 2, 1))).random(3))


def test_check_compatible_refuses_another_algorithm_topics_or_corpus():
    config = SimpleNamespace(inference=SimpleNamespace(algorithm="gibbs"),
                             model=SimpleNamespace(topics=8))
    store = SimpleNamespace(corpus_id="abc", path=Path("/data/store"))
    path = Path("/runs/x/checkpoints/step-00000050.npz")
    good = {"algorithm": "gibbs", "topics": 8, "corpus_id": "abc"}
    check_compatible(good, config, store, path)
    with pytest.raises(UsageError) as info:
        check_compatible({**good, "algorithm": "cvb0"}, config, store, path)
    assert str(info.value) == (f"{path}: was trained with inference.algorithm = cvb0, the config "
                               f"says gibbs; use a new output directory")
    with pytest.raises(UsageError) as info:
        check_compatible({**good, "topics": 12}, config, store, path)
    assert "has model.topics = 12, the config says 8" in str(info.value)
    with pytest.raises(CorpusUsageError) as info:
        check_compatible({**good, "corpus_id": "zzz"}, config, store, path)
    assert f"was trained on another corpus than {store.path}" in str(info.value)
    assert info.value.exit_code == 2


def test_arrays_of_every_shape_and_dtype_round_trip(tmp_path):
    """The npz writer streams each array from its own memory; np.load reads it back."""
    arrays = {"z": np.arange(7, dtype=np.int32), "m": np.arange(12.0).reshape(3, 4),
              "f": np.asfortranarray(np.arange(6, dtype=np.int64).reshape(2, 3)),
              "b": np.array([True, False, True]), "s": np.array(2.5), "e": np.zeros((0, 4)),
              "u": np.frombuffer(b"abc", dtype=np.uint8)}
    ckpt.save_arrays(tmp_path / "a.npz", {"step": 3}, arrays)
    header, back = ckpt.load_arrays(tmp_path / "a.npz")
    assert header["step"] == 3
    assert back.keys() == arrays.keys()
    for key, value in arrays.items():
        assert back[key].dtype == value.dtype and back[key].shape == value.shape
        np.testing.assert_array_equal(back[key], value)
    with np.load(tmp_path / "a.npz") as plain:          # a plain npz, nothing topictk-specific
        np.testing.assert_array_equal(plain["a_m"], arrays["m"])
