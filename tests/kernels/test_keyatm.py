"""The keyword topic model's sweep (docs/algorithms.md §2.13) equals its NumPy twin
(tests/reference/keyatm.py): the same z, s and counts after every sweep, with one document
prior or one per document, and on AD-LDA chunks each sampling its own range."""
from __future__ import annotations

import numpy as np
import pytest

from tests.kernels._kernel import random_corpus, stream
from tests.reference import keyatm as ref
from topictk.inference.gibbs import _keyatm
from topictk.inference.gibbs.keyatm import initial_chain, keyatm_counts, seed_lists
from topictk.state.keyatm import KeyATMState

D, V, K = 12, 15, 5
ROWS = [("a", [0, 1, 2]), ("b", [2, 3, 4, 5]), ("c", [6])]   # word 2 seeds two topics


def _chain(seed: int):
    rng = np.random.default_rng(seed)
    doc_ptr, words = random_corpus(rng, D, V, 14)
    seeds = seed_lists(ROWS, V)
    z, s = initial_chain(doc_ptr, words, K, seeds, stream(seed, 0))
    counts = keyatm_counts(doc_ptr, words, z, s, K, len(ROWS), V)
    return doc_ptr, words, seeds, [z, s, *counts]


def _check(doc_ptr, words, arrays):
    z, s, ndk, nkw, nk, nkey, nkey_k = arrays
    KeyATMState(z=z, s=s, ndk=ndk, nkw=nkw, nk=nk, nkey=nkey, nkey_k=nkey_k,
                alpha=np.full(K, 0.1), beta=0.05).check_invariants(doc_ptr, words)


@pytest.mark.parametrize("per_doc", [False, True])
@pytest.mark.parametrize("seed", [0, 3])
def test_sweep_equals_twin(seed, per_doc):
    doc_ptr, words, seeds, arrays = _chain(seed)
    twin = [a.copy() for a in arrays]
    alpha = (np.random.default_rng(seed).uniform(0.05, 1.5, (D, K)) if per_doc
             else np.array([[0.1, 0.5, 0.2, 1.0, 0.05]]))
    hyper = (0.05, 0.2, 1.0, 2.0)
    kernel_stream, twin_stream = stream(seed, 1), stream(seed, 1)
    moved = False
    for _ in range(4):
        _keyatm.keyatm_sweep(doc_ptr, words, 0, D, *arrays, alpha, *hyper, *seeds,
                             kernel_stream)
        ref.sweep(doc_ptr, words, 0, D, *twin, alpha, *hyper, *seeds, twin_stream)
        for name, got, want in zip(("z", "s", "ndk", "nkw", "nk", "nkey", "nkey_k"),
                                   arrays, twin):
            assert np.array_equal(got, want), f"{name} differs from the twin"
        _check(doc_ptr, words, arrays)
        moved |= bool(arrays[1].any()) and bool((~arrays[1].astype(bool)).any())
    assert moved
    # a keyword token is only ever in one of its word's keyword topics
    z, s = arrays[0], arrays[1].astype(bool)
    ptr, topic, _ = seeds
    for i in np.nonzero(s)[0]:
        assert z[i] in topic[ptr[words[i]]:ptr[words[i] + 1]]


def test_chunks_each_their_range():
    """Two chunks sampled one after the other on shared counts equal the twin doing the same:
    the kernel reads only its documents' tokens."""
    doc_ptr, words, seeds, arrays = _chain(5)
    twin = [a.copy() for a in arrays]
    alpha = np.full((1, K), 0.3)
    for c, (begin, end) in enumerate(((0, 5), (5, D))):
        _keyatm.keyatm_sweep(doc_ptr, words, begin, end, *arrays, alpha, 0.05, 0.1, 1.0, 1.0,
                             *seeds, stream(5, 2, c))
        ref.sweep(doc_ptr, words, begin, end, *twin, alpha, 0.05, 0.1, 1.0, 1.0, *seeds,
                  stream(5, 2, c))
    for got, want in zip(arrays, twin):
        assert np.array_equal(got, want)
    _check(doc_ptr, words, arrays)
