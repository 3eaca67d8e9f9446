"""Held-out splits (docs/algorithms.md §11.1, §11 oracle (f)): which documents are test documents,
which of their tokens are observed, determinism, and imported splits."""
from __future__ import annotations

import json
import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from topictk.corpus.prepare import PrepareOptions, prepare
from topictk.corpus.splits import choose_test_documents, observed_count, split_tokens
from topictk.corpus.store import ARRAYS, CorpusStore
from topictk.errors import CorpusError, UsageError

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "python_reference.txt"


# ------------------------------------------------------------------------ n_obs
@pytest.mark.parametrize("n,heldout,expected", [
    (10, 0.2, 8), (10, 0.1, 9), (5, 0.2, 4), (1, 0.2, 1), (3, 0.5, 2), (7, 0.3, 5), (0, 0.2, 0),
    # (1 - 0.7) * 10 = 3.0000000000000004 in floating point: the guard keeps n_obs = 3
    (10, 0.7, 3),
    # (1 - 0.9) * 20 = 2.0000000000000004
    (20, 0.9, 2),
])
def test_observed_count_is_ceil_of_the_observed_share(n, heldout, expected):
    assert observed_count(n, heldout) == expected


def test_observed_count_equals_exact_rational_ceiling():
    """n_obs = ceil((1 - f) N) computed in exact arithmetic, for every f with two decimals and
    N up to 200 (the cases where the floating-point product lands just above an integer are
    exactly the ones the rounding guard exists for)."""
    guarded = 0
    for hundredths in range(1, 100):
        f = hundredths / 100
        exact_share = 1 - Fraction(hundredths, 100)
        for n in range(0, 201):
            want = math.ceil(exact_share * n)
            assert observed_count(n, f) == want, (n, f)
            guarded += math.ceil((1.0 - f) * n) != want
    assert guarded > 0          # the plain float ceiling would have been wrong somewhere


# ------------------------------------------------------------------- token split
def test_split_tokens_follows_the_protocol(seed):
    """One default_rng(split_seed); documents in index order; permutation(N_d) each; the first
    n_obs permuted positions are observed (in that order), the rest held out."""
    rng = np.random.default_rng(seed + 50)
    docs = [rng.integers(0, 30, rng.integers(1, 25)).astype(np.int32) for _ in range(12)]
    observed, heldout = split_tokens(docs, 0.2, seed)
    check = np.random.default_rng(seed)
    for d, tokens in enumerate(docs):
        perm = check.permutation(tokens.size)
        n_obs = math.ceil(0.8 * tokens.size - 1e-9)
        np.testing.assert_array_equal(observed[d], tokens[perm[:n_obs]])
        np.testing.assert_array_equal(heldout[d], tokens[perm[n_obs:]])
        # a multiset partition of the document
        np.testing.assert_array_equal(np.sort(np.concatenate([observed[d], heldout[d]])),
                                      np.sort(tokens))


def test_choose_test_documents_share_and_count(seed):
    mask = choose_test_documents(341, 0.1, seed)
    assert mask.dtype == bool and mask.sum() == 34
    assert choose_test_documents(341, 5, seed).sum() == 5
    assert choose_test_documents(341, 0, seed).sum() == 0
    assert choose_test_documents(3, 10, seed).sum() == 3
    np.testing.assert_array_equal(mask, choose_test_documents(341, 0.1, seed))
    assert not np.array_equal(mask, choose_test_documents(341, 0.1, seed + 1))


# ------------------------------------------------------- determinism of whole stores
def _store_bytes(path: Path) -> dict[str, bytes]:
    return {name: (path / f"{name}.npy").read_bytes() for name in ARRAYS}


def test_same_seed_gives_byte_identical_store_arrays(tmp_path):
    for name in ("a", "b"):
        prepare([str(EXAMPLE)], tmp_path / name, PrepareOptions(seed=11))
    assert _store_bytes(tmp_path / "a") == _store_bytes(tmp_path / "b")
    for extra in ("vocab.txt", "train_ids.txt", "test_ids.txt"):
        assert (tmp_path / "a" / extra).read_bytes() == (tmp_path / "b" / extra).read_bytes()
    ma = json.loads((tmp_path / "a" / "manifest.json").read_text())
    mb = json.loads((tmp_path / "b" / "manifest.json").read_text())
    assert ma["corpus_id"] == mb["corpus_id"]
    assert ma["split"] == {"protocol": "document-completion", "seed": 11, "test_docs": 0.1,
                           "heldout_fraction": 0.2}


def test_different_seed_gives_a_different_split(tmp_path):
    prepare([str(EXAMPLE)], tmp_path / "a", PrepareOptions(seed=11))
    prepare([str(EXAMPLE)], tmp_path / "b", PrepareOptions(seed=12))
    a, b = _store_bytes(tmp_path / "a"), _store_bytes(tmp_path / "b")
    assert a["test_obs_words"] != b["test_obs_words"]
    assert a["train_words"] != b["train_words"]
    ids_a = (tmp_path / "a" / "test_ids.txt").read_text().split()
    ids_b = (tmp_path / "b" / "test_ids.txt").read_text().split()
    assert ids_a != ids_b and len(ids_a) == len(ids_b) == 34


def test_prepared_split_is_consistent_with_the_documents(tmp_path):
    """Each test document's observed + held-out tokens are its in-vocabulary tokens, and the
    observed part is ceil(0.8 N_d) of them."""
    lines = EXAMPLE.read_text(encoding="utf-8").splitlines()
    prepare([str(EXAMPLE)], tmp_path / "s", PrepareOptions(seed=3))
    store = CorpusStore.open(tmp_path / "s")
    index = {w: i for i, w in enumerate(store.vocab)}
    from topictk.corpus.stopwords import ENGLISH_STOPWORDS
    from topictk.corpus.text import tokenize
    obs, held = store.test_observed(), store.test_heldout()
    test_ids = (tmp_path / "s" / "test_ids.txt").read_text().split()
    assert len(test_ids) == obs.n_docs == held.n_docs == 34
    for d, doc_id in enumerate(test_ids):
        line_no = int(doc_id.rsplit(":", 1)[1])
        tokens = [index[t] for t in tokenize(lines[line_no - 1], 3)
                  if t not in ENGLISH_STOPWORDS and t in index]
        o = obs.words[obs.doc_ptr[d]:obs.doc_ptr[d + 1]]
        h = np.repeat(held.indices[held.indptr[d]:held.indptr[d + 1]],
                      held.counts[held.indptr[d]:held.indptr[d + 1]])
        assert o.size == observed_count(len(tokens), 0.2)
        np.testing.assert_array_equal(np.sort(np.concatenate([o, h])), np.sort(tokens))
    c = store.manifest["counts"]
    assert c["test_observed_tokens"] == obs.n_tokens
    assert c["test_heldout_tokens"] == held.n_tokens > 0


# --------------------------------------------------------------------- imported split
def _write_uci(path: Path, rows: list[dict[int, int]], n_words: int) -> None:
    body = [f"{d + 1} {w + 1} {c}" for d, row in enumerate(rows) for w, c in sorted(row.items())]
    path.write_text(f"{len(rows)}\n{n_words}\n{len(body)}\n" + "\n".join(body) + "\n")


def test_imported_split_is_used_verbatim(tmp_path):
    vocab = ["ant", "bee", "cat", "dog", "eel"]
    (tmp_path / "vocab.toy.txt").write_text("\n".join(vocab) + "\n")
    _write_uci(tmp_path / "docword.toy.txt", [{0: 3, 1: 1}, {1: 2, 2: 2}, {0: 1, 3: 1}], 5)
    # test documents: "eel" (word 4) never occurs in training, so it is out of vocabulary
    _write_uci(tmp_path / "obs.txt", [{0: 1, 2: 1}, {4: 2}], 5)
    _write_uci(tmp_path / "held.txt", [{1: 2, 4: 1}, {3: 1}], 5)
    manifest = prepare([str(tmp_path / "docword.toy.txt")], tmp_path / "store", PrepareOptions(
        test_observed=str(tmp_path / "obs.txt"), test_heldout=str(tmp_path / "held.txt")))
    assert manifest["split"] == {"protocol": "imported", "observed": str(tmp_path / "obs.txt"),
                                 "heldout": str(tmp_path / "held.txt")}
    store = CorpusStore.open(tmp_path / "store")
    # training vocabulary by corpus frequency: ant 4, bee 3, cat 2, dog 1
    assert store.vocab == ["ant", "bee", "cat", "dog"]
    assert store.manifest["counts"]["train_documents"] == 3
    obs, held = store.test_observed(), store.test_heldout()

    def rows(docs, d):
        part = slice(docs.indptr[d], docs.indptr[d + 1])
        return {store.vocab[w]: int(c) for w, c in zip(docs.indices[part], docs.counts[part])}

    assert obs.n_docs == held.n_docs == 2
    assert rows(obs, 0) == {"ant": 1, "cat": 1} and rows(held, 0) == {"bee": 2}
    assert rows(obs, 1) == {} and rows(held, 1) == {"dog": 1}
    assert store.manifest["counts"]["test_oov_tokens_dropped"] == 3        # 2 + 1 "eel"


def test_imported_split_parts_must_list_the_same_documents(tmp_path):
    (tmp_path / "vocab.toy.txt").write_text("ant\nbee\n")
    _write_uci(tmp_path / "docword.toy.txt", [{0: 1, 1: 1}], 2)
    _write_uci(tmp_path / "obs.txt", [{0: 1}, {1: 1}], 2)
    _write_uci(tmp_path / "held.txt", [{0: 1}], 2)
    with pytest.raises(CorpusError, match="held.txt: has 1 documents but .*obs.txt has 2"):
        prepare([str(tmp_path / "docword.toy.txt")], tmp_path / "store", PrepareOptions(
            test_observed=str(tmp_path / "obs.txt"), test_heldout=str(tmp_path / "held.txt")))
    with pytest.raises(UsageError, match="--test-observed and --test-heldout go together"):
        PrepareOptions(test_observed=str(tmp_path / "obs.txt")).check()
    assert not (tmp_path / "store").exists()
