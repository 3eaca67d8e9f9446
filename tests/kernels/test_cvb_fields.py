"""The CVB0 fields computed block by block (a cluster's shards, documents in order) are those
of compute_fields, bit for bit."""
from __future__ import annotations

import numpy as np
import pytest

from topictk.inference.variational import _cvb


@pytest.mark.parametrize("threads", [1, 3])
def test_fields_block_by_block_are_those_from_scratch(seed, threads):
    rng = np.random.default_rng(seed)
    D, V, K = 30, 40, 5
    lengths = rng.integers(1, 8, D)
    indptr = np.zeros(D + 1, dtype=np.int64)
    indptr[1:] = np.cumsum(lengths)
    indices = np.concatenate([np.sort(rng.choice(V, n, replace=False))
                              for n in lengths]).astype(np.int32)
    counts = rng.integers(1, 5, indptr[-1]).astype(np.int32)
    mu = rng.random((indptr[-1], K))
    mu /= mu.sum(axis=1, keepdims=True)
    m_dk, m_kw, m_k = np.zeros((D, K)), np.zeros((V, K)), np.zeros(K)
    _cvb.compute_fields(indptr, indices, counts, mu, m_dk, m_kw, m_k, None, None, None, 2)
    blocks_dk, blocks_kw, blocks_k = np.full((D, K), np.nan), np.zeros((V, K)), np.empty(K)
    for a, b in [(0, 11), (11, 12), (12, D)]:
        p0, p1 = indptr[a], indptr[b]
        _cvb.add_fields(indptr[a:b + 1] - p0, indices[p0:p1], counts[p0:p1], mu[p0:p1],
                        blocks_dk[a:b], blocks_kw, threads)
    _cvb.topic_fields(blocks_kw, blocks_k)
    assert np.array_equal(blocks_dk, m_dk)
    assert np.array_equal(blocks_kw, m_kw)
    assert np.array_equal(blocks_k, m_k)
