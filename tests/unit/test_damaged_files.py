"""Damage found by the property tests (tests/properties), each kept as a plain test: a
checkpoint or store file damaged in one of these ways is refused with topictk's own error,
naming the file, instead of a SyntaxError, TokenError, UnicodeDecodeError or
FileNotFoundError from deep inside NumPy or pathlib."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from tests.fixtures import write_token_store
from topictk.corpus.store import CorpusStore
from topictk.errors import CheckpointError, CorpusError
from topictk.rundir import checkpoint as ckpt


def _checkpoint(tmp_path: Path, step: int = 3) -> Path:
    # large enough that reading an array's header does not reach the end of its zip member,
    # where the CRC check would report the damage first
    path = ckpt.checkpoint_path(tmp_path, step)
    ckpt.save_arrays(path, {"state": {"step": step}},
                     {"nkw": np.arange(120_000, dtype=np.int64).reshape(3, 40_000)})
    return path


def test_a_damaged_array_header_in_a_checkpoint_is_a_checkpoint_error(tmp_path):
    path = _checkpoint(tmp_path)
    data = bytearray(path.read_bytes())
    close = data.index(b"), }")             # the shape tuple of the first array's header
    data[close] = ord(" ")                  # was a TokenError from NumPy's header parser
    path.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match=r"step-00000003\.npz: truncated or corrupt"):
        ckpt.load_arrays(path)


def test_a_checkpoint_copied_over_another_step_is_refused(tmp_path):
    later = _checkpoint(tmp_path, 6)
    earlier = ckpt.checkpoint_path(tmp_path, 3)
    shutil.copyfile(later, earlier)         # was loaded as step 3 and scored or resumed
    with pytest.raises(CheckpointError, match=r"holds step 6, not the step 3 its name says"):
        ckpt.load_arrays(earlier)
    assert ckpt.load_arrays(later)[0]["state"]["step"] == 6


def test_a_sample_copied_over_another_step_is_refused(tmp_path):
    sample = tmp_path / "step-00000004.npz"
    ckpt.save_arrays(sample, {"step": 8}, {"phi": np.ones(3)})
    with pytest.raises(CheckpointError, match="holds step 8, not the step 4"):
        ckpt.load_arrays(sample)


def test_a_checkpoint_header_that_is_not_an_object_is_refused(tmp_path):
    path = tmp_path / "model.npz"
    np.savez(path, header=np.frombuffer(b"[1, 2]", np.uint8))
    with pytest.raises(CheckpointError, match="truncated or corrupt"):
        ckpt.load_arrays(path)


@pytest.fixture
def store(tmp_path) -> Path:
    rng = np.random.default_rng(0)
    docs = [rng.integers(0, 20, 15) for _ in range(8)]
    return write_token_store(tmp_path / "store", docs, 20, test_observed=docs[:2],
                             test_heldout=docs[2:4])


def test_a_missing_vocabulary_is_a_corpus_error(store):
    (store / "vocab.txt").unlink()          # was FileNotFoundError
    with pytest.raises(CorpusError, match=r"vocab\.txt: cannot be read"):
        _ = CorpusStore.open(store).vocab


def test_an_undecodable_vocabulary_is_a_corpus_error(store):
    data = bytearray((store / "vocab.txt").read_bytes())
    data[0] ^= 0x80                         # was UnicodeDecodeError
    (store / "vocab.txt").write_bytes(bytes(data))
    # refused when the store is opened (its vocabulary hash), or when the words are read
    with pytest.raises(CorpusError, match=r"vocab\.txt: (cannot be read|differs)"):
        _ = CorpusStore.open(store).vocab


def test_a_damaged_npy_header_in_a_store_is_a_corpus_error(store):
    path = store / "train_words.npy"
    data = bytearray(path.read_bytes())
    data[data.index(b",), }") + 1] = ord(" ")     # was a TokenError
    path.write_bytes(bytes(data))
    with pytest.raises(CorpusError, match=r"train_words\.npy: cannot be read"):
        CorpusStore.open(store).train()


@pytest.mark.parametrize("manifest", [[1, 2], {"format": "topictk-corpus", "format_version": 1,
                                               "arrays": [], "counts": {}}])
def test_a_manifest_of_the_wrong_shape_is_a_corpus_error(store, manifest):
    (store / "manifest.json").write_text(json.dumps(manifest))   # was AttributeError
    with pytest.raises(CorpusError, match="manifest"):
        CorpusStore.open(store)


def test_a_manifest_without_its_arrays_is_a_corpus_error(store):
    # found by tests/properties: one flipped bit in the key "arrays" gave a KeyError later
    manifest = json.loads((store / "manifest.json").read_text())
    manifest["brrays"] = manifest.pop("arrays")
    (store / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(CorpusError, match="damaged manifest"):
        CorpusStore.open(store).train()


def test_undecodable_metadata_is_a_corpus_error(store):
    (store / "train_meta.jsonl").write_bytes(b'{"year": 1}\n\xff\n')
    with pytest.raises(CorpusError, match=r"train_meta\.jsonl: cannot be read"):
        CorpusStore.open(store).metadata("train")
