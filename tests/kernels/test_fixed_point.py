"""The fixed-point fold-in (docs/algorithms.md §11.2): the kernel against its NumPy twin, its
convergence, and the same bits at any thread count."""
from __future__ import annotations

import numpy as np
import pytest

from tests.reference import fixed_point as ref
from topictk.corpus.store import Documents, ptr_to_csr, tokens_to_ptr
from topictk.inference import _fixed_point
from topictk.inference.base import fixed_point_fold_in


def documents(rng, n_docs: int, V: int) -> Documents:
    docs = [rng.integers(0, V, size=rng.integers(0, 30)).astype(np.int32) for _ in range(n_docs)]
    docs[1] = np.zeros(0, dtype=np.int32)          # nothing observed: theta = alpha / alpha.
    ptr, words = tokens_to_ptr(docs)
    indptr, indices, counts = ptr_to_csr(ptr, words, V)
    return Documents(ptr, words, indptr, indices, counts)


def topics(rng, V: int, K: int) -> np.ndarray:
    phi = rng.gamma(0.1, size=(K, V)) + 1e-12
    return (phi / phi.sum(axis=1, keepdims=True)).T.copy()      # word-major (V, K)


def kernel(docs, phi, alpha, active, tol, max_iterations, threads):
    D, K = docs.indptr.size - 1, phi.shape[1]
    theta = np.full((D, K), np.nan)
    iterations = np.zeros(D, dtype=np.int32)
    _fixed_point.fold_in_theta(docs.indptr.astype(np.int64), docs.indices.astype(np.int32),
                               docs.counts.astype(np.int32), phi,
                               np.ascontiguousarray(np.atleast_2d(alpha)),
                               active.astype(np.uint8), tol, max_iterations, theta,
                               iterations, threads)
    return theta, iterations


@pytest.mark.parametrize("per_doc_alpha", [False, True])
def test_kernel_matches_numpy_twin(per_doc_alpha):
    rng = np.random.default_rng(3)
    V, K, D = 40, 7, 25
    docs, phi = documents(rng, D, V), topics(rng, V, K)
    alpha = rng.uniform(0.05, 0.5, size=(D, K) if per_doc_alpha else (1, K))
    active = rng.random(D) < 0.8
    active[1] = True
    got, got_it = kernel(docs, phi, alpha, active, 1e-9, 300, 1)
    want, want_it = ref.fold_in_theta(docs.indptr, docs.indices, docs.counts, phi, alpha,
                                      active, 1e-9, 300)
    np.testing.assert_array_equal(got_it, want_it)
    np.testing.assert_allclose(got[active], want[active], rtol=1e-13, atol=0)
    assert np.isnan(got[~active]).all()
    a1 = alpha[1] if per_doc_alpha else alpha[0]
    np.testing.assert_allclose(got[1], a1 / a1.sum(), rtol=1e-15)
    np.testing.assert_allclose(got[active].sum(axis=1), 1.0, rtol=1e-12)


def test_converges_below_tol_and_stops_at_max_iterations():
    rng = np.random.default_rng(5)
    V, K, D = 60, 12, 30
    docs, phi = documents(rng, D, V), topics(rng, V, K)
    alpha = np.full((1, K), 0.1)
    active = np.ones(D, dtype=bool)
    tol = 1e-8
    theta, iterations = kernel(docs, phi, alpha, active, tol, 10_000, 1)
    assert (iterations < 10_000).all() and (iterations > 1).any()
    # one more update from the answer changes no theta_k by tol or more
    for d in range(D):
        lo, hi = docs.indptr[d], docs.indptr[d + 1]
        r = theta[d] * phi[docs.indices[lo:hi]]
        r /= r.sum(axis=1, keepdims=True)
        n = docs.counts[lo:hi].sum()
        step = (docs.counts[lo:hi] @ r + alpha[0]) / (n + alpha.sum())
        assert np.max(np.abs(step - theta[d])) < tol
    capped, capped_it = kernel(docs, phi, alpha, active, tol, 2, 1)
    assert capped_it.max() == 2
    assert not np.array_equal(capped, theta)


def test_same_bits_at_one_and_two_threads():
    rng = np.random.default_rng(8)
    V, K, D = 200, 50, 300
    docs, phi = documents(rng, D, V), topics(rng, V, K)
    alpha = np.full((1, K), 0.05)
    active = rng.random(D) < 0.9
    one = fixed_point_fold_in(phi, alpha, docs, active, tol=1e-6, max_iterations=500,
                              threads=1)
    two = fixed_point_fold_in(phi, alpha, docs, active, tol=1e-6, max_iterations=500,
                              threads=2)
    assert one.tobytes() == two.tobytes()


def test_wrapper_takes_token_documents_and_matches_csr():
    rng = np.random.default_rng(9)
    V, K, D = 30, 6, 12
    docs, phi = documents(rng, D, V), topics(rng, V, K)
    alpha = np.full((1, K), 0.2)
    tokens_only = Documents(docs.doc_ptr, docs.words, None, None, None)
    a = fixed_point_fold_in(phi, alpha, docs, None, tol=1e-9, max_iterations=500)
    b = fixed_point_fold_in(phi, alpha, tokens_only, None, tol=1e-9, max_iterations=500)
    want, _ = ref.fold_in_theta(docs.indptr, docs.indices, docs.counts, phi, alpha,
                                np.ones(D, bool), 1e-9, 500)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_allclose(a, want, rtol=1e-13)
