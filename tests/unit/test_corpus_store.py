"""The two corpus representations and the on-disk store (ALGORITHMS.md §1.5, §1 oracle)."""
from __future__ import annotations

import json
import os
import stat

import numpy as np
import pytest

from tests.fixtures import write_token_store
from topictk.corpus.store import (
    ARRAYS,
    CorpusStore,
    csr_to_tokens,
    ptr_to_csr,
    tokens_to_ptr,
    write_store,
)
from topictk.errors import CorpusError, CorpusUsageError


def _random_csr(rng, n_docs, n_words):
    rows, indptr = [], [0]
    for d in range(n_docs):
        n = int(rng.integers(0, min(6, n_words) + 1)) if d else 0     # document 0 is empty
        words = np.sort(rng.choice(n_words, n, replace=False))
        rows.append((words, rng.integers(1, 5, n)))
        indptr.append(indptr[-1] + n)
    indices = np.concatenate([r[0] for r in rows]).astype(np.int32)
    counts = np.concatenate([r[1] for r in rows]).astype(np.int32)
    return np.array(indptr, np.int64), indices, counts


def test_c_to_t_to_c_is_the_identity(seed):
    rng = np.random.default_rng(seed)
    indptr, indices, counts = _random_csr(rng, 30, 12)
    docs = csr_to_tokens(indptr, indices, counts)
    assert len(docs) == 30 and docs[0].size == 0
    # C -> T expands (w, c) into c consecutive tokens, words ascending
    for d, tokens in enumerate(docs):
        row = slice(indptr[d], indptr[d + 1])
        np.testing.assert_array_equal(tokens, np.repeat(indices[row], counts[row]))
    ptr, words = tokens_to_ptr(docs)
    assert ptr.dtype == np.int64 and words.dtype == np.int32
    assert ptr[-1] == counts.sum()                       # sum of counts = N
    indptr2, indices2, counts2 = ptr_to_csr(ptr, words, 12)
    np.testing.assert_array_equal(indptr2, indptr)
    np.testing.assert_array_equal(indices2, indices)
    np.testing.assert_array_equal(counts2, counts)
    assert (indptr2.dtype, indices2.dtype, counts2.dtype) == (np.int64, np.int32, np.int32)


def test_t_to_c_to_t_is_the_identity_in_canonical_order(seed):
    """T -> C -> T returns the canonical (C -> T) order: words ascending within a document."""
    rng = np.random.default_rng(seed)
    docs = [np.sort(rng.integers(0, 9, rng.integers(0, 15))).astype(np.int32) for _ in range(25)]
    ptr, words = tokens_to_ptr(docs)
    back = csr_to_tokens(*ptr_to_csr(ptr, words, 9))
    assert len(back) == len(docs)
    for a, b in zip(back, docs):
        np.testing.assert_array_equal(a, b)
    # an unsorted document aggregates to the same C rows (its load order is not kept by C)
    shuffled = [rng.permutation(d) for d in docs]
    for x, y in zip(ptr_to_csr(*tokens_to_ptr(shuffled), 9), ptr_to_csr(ptr, words, 9)):
        np.testing.assert_array_equal(x, y)


def test_ptr_to_csr_indices_strictly_ascending_and_counts_positive(seed):
    rng = np.random.default_rng(seed)
    docs = [rng.integers(0, 20, rng.integers(1, 40)).astype(np.int32) for _ in range(15)]
    indptr, indices, counts = ptr_to_csr(*tokens_to_ptr(docs), 20)
    for d in range(15):
        row = indices[indptr[d]:indptr[d + 1]]
        assert np.all(np.diff(row) > 0)
        np.testing.assert_array_equal(
            np.bincount(docs[d], minlength=20)[row], counts[indptr[d]:indptr[d + 1]])
    assert counts.min() >= 1


def test_store_round_trip(tmp_path):
    train = [np.array([2, 0, 2, 1]), np.array([3]), np.array([1, 1])]
    obs = [np.array([0, 3])]
    held = [np.array([2, 2, 1])]
    path = write_token_store(tmp_path / "store", train, 4, test_observed=obs, test_heldout=held,
                             vocab=["a", "b", "c", "d"])
    store = CorpusStore.open(path)
    store.verify()
    assert store.n_words == 4 and store.vocab == ["a", "b", "c", "d"]
    tr = store.train()
    np.testing.assert_array_equal(tr.doc_ptr, [0, 4, 5, 7])
    np.testing.assert_array_equal(tr.words, [2, 0, 2, 1, 3, 1, 1])   # load order kept in T
    np.testing.assert_array_equal(tr.indices, [0, 1, 2, 3, 1])
    np.testing.assert_array_equal(tr.counts, [1, 1, 2, 1, 2])
    assert tr.n_docs == 3 and tr.n_tokens == 7
    held_docs = store.test_heldout()
    assert held_docs.doc_ptr is None
    np.testing.assert_array_equal(held_docs.indices, [1, 2])
    np.testing.assert_array_equal(held_docs.counts, [1, 2])
    manifest = json.loads((path / "manifest.json").read_text())
    assert manifest["format"] == "topictk-corpus" and manifest["format_version"] == 1
    assert set(manifest["arrays"]) == set(ARRAYS)
    assert len(store.corpus_id) == 64
    # arrays are memory-mapped, not loaded whole
    assert isinstance(tr.words, np.memmap)


def test_store_refuses_an_existing_directory_and_replaces_it_with_force(tmp_path):
    path = write_token_store(tmp_path / "store", [np.array([0, 1])], 2)
    before = {p.name: p.read_bytes() for p in path.iterdir()}
    with pytest.raises(CorpusUsageError, match="output directory exists.*--force"):
        write_token_store(path, [np.array([1, 1, 1])], 2)
    assert {p.name: p.read_bytes() for p in path.iterdir()} == before
    assert [p.name for p in tmp_path.iterdir()] == ["store"]          # no temporary left over


@pytest.mark.parametrize("mask", [0o022, 0o077])
def test_store_directory_and_files_follow_the_umask(tmp_path, set_umask, mask):
    """mkdtemp alone would leave the store directory 0700 whatever the umask; with --force the
    replaced store's mode is kept."""
    set_umask(mask)
    path = write_token_store(tmp_path / "store", [np.array([0, 1])], 2)
    assert stat.S_IMODE(path.stat().st_mode) == 0o777 & ~mask
    for file in path.iterdir():
        assert stat.S_IMODE(file.stat().st_mode) == 0o666 & ~mask, file.name
    os.chmod(path, 0o750)
    write_token_store(path, [np.array([1, 1, 1])], 2, force=True)
    assert stat.S_IMODE(path.stat().st_mode) == 0o750
    assert CorpusStore.open(path).train().n_tokens == 3


def test_damaged_store_is_reported_with_the_file(tmp_path):
    path = write_token_store(tmp_path / "store", [np.array([0, 1, 1])], 2)
    target = path / "train_words.npy"
    data = bytearray(target.read_bytes())
    data[-1] ^= 0xFF
    target.write_bytes(bytes(data))
    store = CorpusStore.open(path)
    with pytest.raises(CorpusError, match=f"{target}.*sha256"):
        store.verify()
    os.unlink(path / "train_counts.npy")
    with pytest.raises(CorpusError, match="train_counts.npy: missing"):
        CorpusStore.open(path)


def test_opening_something_that_is_not_a_store(tmp_path):
    with pytest.raises(CorpusUsageError,
                       match="no corpus store here; create it with 'topictk prepare"):
        CorpusStore.open(tmp_path / "nothing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(CorpusUsageError, match="not a corpus store \\(no manifest.json\\)"):
        CorpusStore.open(tmp_path / "empty")
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "manifest.json").write_text("{not json")
    with pytest.raises(CorpusError, match="manifest.json: unreadable manifest"):
        CorpusStore.open(bad)


def test_write_store_failure_leaves_nothing_behind(tmp_path):
    with pytest.raises(KeyError):
        write_store(tmp_path / "out", {}, ["a"], {"vocab_sha256": "x"}, train_ids=[],
                    test_ids=[], train_meta=None, test_meta=None)
    assert list(tmp_path.iterdir()) == []
