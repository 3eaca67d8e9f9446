"""The CVB and CVB0 fields computed block by block (a cluster's shards, documents in order) are
those of compute_fields, bit for bit, and those of the NumPy twin."""
from __future__ import annotations

import numpy as np
import pytest

from tests.reference.cvb import compute_fields
from topictk.inference.variational import _cvb


@pytest.mark.parametrize("gaussian", [False, True])
@pytest.mark.parametrize("threads", [1, 3])
def test_fields_block_by_block_are_those_from_scratch(seed, threads, gaussian):
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
    var = (np.zeros((D, K)), np.zeros((V, K)), np.zeros(K)) if gaussian else (None,) * 3
    _cvb.compute_fields(indptr, indices, counts, mu, m_dk, m_kw, m_k, *var, 2)
    blocks_dk, blocks_kw, blocks_k = np.full((D, K), np.nan), np.zeros((V, K)), np.empty(K)
    blocks_var = ((np.full((D, K), np.nan), np.zeros((V, K)), np.empty(K)) if gaussian
                  else (None,) * 3)
    for a, b in [(0, 11), (11, 12), (12, D)]:
        p0, p1 = indptr[a], indptr[b]
        _cvb.add_fields(indptr[a:b + 1] - p0, indices[p0:p1], counts[p0:p1], mu[p0:p1],
                        blocks_dk[a:b], blocks_kw, threads,
                        v_dk=None if not gaussian else blocks_var[0][a:b],
                        v_kw=blocks_var[1])
    _cvb.topic_fields(blocks_kw, blocks_k)
    assert np.array_equal(blocks_dk, m_dk)
    assert np.array_equal(blocks_kw, m_kw)
    assert np.array_equal(blocks_k, m_k)
    twin = compute_fields(indptr, indices, counts, mu, V, gaussian)
    np.testing.assert_allclose(blocks_kw, twin["m_kw"], rtol=1e-12)
    np.testing.assert_allclose(blocks_dk, twin["m_dk"], rtol=1e-12)
    if gaussian:
        _cvb.topic_fields(blocks_var[1], blocks_var[2])
        for got, want in zip(blocks_var, var):
            assert np.array_equal(got, want)
        for got, name in zip(blocks_var, ("v_dk", "v_kw", "v_k")):
            np.testing.assert_allclose(got, twin[name], rtol=1e-12)


def test_one_variance_field_alone_is_refused():
    one = np.zeros((1, 1))
    with pytest.raises(ValueError, match="both v_dk and v_kw"):
        _cvb.add_fields(np.array([0, 1]), np.zeros(1, np.int32), np.ones(1, np.int32),
                        np.ones((1, 1)), one, one.copy(), 1, v_dk=one.copy())
