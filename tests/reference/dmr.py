"""Slow NumPy twins of the DMR computations (topictk/inference/dmr/driver.py,
docs/algorithms.md §9), written from the equations one document at a time.

The sampling kernels DMR calls have their own twins: the dense per-document-prior sweep is
``tests/reference/gibbs.py::sweep`` with a (D, K) alpha, the local step with the gradient factor
is ``tests/reference/minibatch.py::local_gibbs(..., doc_grad=...)``. This module adds the Polya
log likelihood and its gradient (§9.1), a stochastic-EM sweep (§9.2) and one SGRLD + SGLD update
(§9.3) built from those twins with the same random streams as the driver.
"""
from __future__ import annotations

import numpy as np
from scipy.special import digamma, gammaln

from tests.reference import gibbs as gibbs_ref
from tests.reference import minibatch as minibatch_ref


def doc_alpha(x: np.ndarray, nu: np.ndarray) -> np.ndarray:
    """alpha_dk = exp(x_d^T nu_k) for one document (K,)."""
    return np.array([np.exp(float(np.dot(x, nu[k]))) for k in range(nu.shape[0])])


def log_likelihood(nu, X, ndk, lengths) -> float:
    """sum_d [lnG(alpha_d.) - lnG(alpha_d. + N_d)
              + sum_k (lnG(alpha_dk + n_dk) - lnG(alpha_dk))]."""
    total = 0.0
    for d in range(X.shape[0]):
        a = doc_alpha(X[d], nu)
        total += gammaln(a.sum()) - gammaln(a.sum() + lengths[d])
        for k in range(nu.shape[0]):
            total += gammaln(a[k] + ndk[d, k]) - gammaln(a[k])
    return float(total)


def gradient(nu, X, ndk, lengths) -> np.ndarray:
    """d/d nu_kf of :func:`log_likelihood`: sum_d x_df g_dk (§9.1)."""
    K, F = nu.shape
    grad = np.zeros((K, F))
    for d in range(X.shape[0]):
        a = doc_alpha(X[d], nu)
        for k in range(K):
            g = a[k] * (digamma(a.sum()) - digamma(a.sum() + lengths[d])
                        + digamma(a[k] + ndk[d, k]) - digamma(a[k]))
            for f in range(F):
                grad[k, f] += X[d, f] * g
    return grad


def objective(nu, X, ndk, lengths, variances) -> float:
    """l(nu) of §9.2 with mu_prior = 0."""
    return log_likelihood(nu, X, ndk, lengths) - float(np.sum(nu ** 2 / (2.0 * variances)))


def sem_sweep(doc_ptr, words, z, ndk, nkw, nk, nu, X, beta, chunk_bounds, rngs) -> None:
    """One stochastic-EM sweep (§9.2) with nu fixed: alpha_d = exp(x_d^T nu) per document, then
    the dense sweep of §2.2 (AD-LDA over the chunks), in place."""
    alpha = np.array([doc_alpha(X[d], nu) for d in range(X.shape[0])])
    gibbs_ref.sweep(doc_ptr, words, z, ndk, nkw, nk, alpha, beta, chunk_bounds, rngs, False)


def sgrld_step(phi_hat, nu, batch, X_batch, n_docs, beta, eps, eps_nu, variances, sweeps,
               burn, chunk_bounds, local_rngs, main: np.random.Generator):
    """One DMR-SGRLD update (§9.3) for a gathered ``batch``: returns (phi_hat, nu).

    Local chains with alpha_d = exp(x_d^T nu) and phi fixed (minibatch twin), then
    phi_hat <- | phi_hat + eps (beta - phi_hat + R_B (nbar_kw - phi_kw nbar_k))
                 + sqrt(2 eps phi_hat) xi |
    floored at 1e-300, and nu <- nu + eps_nu G + sqrt(2 eps_nu) xi' with
    G = -nu / sigma^2 + R_B sum_d x_d g-bar_d; the normals xi then xi' from ``main``.
    ``eps_nu=None``: nu is held (its burn-in) and xi' is not drawn.
    """
    V, K = phi_hat.shape
    phi = phi_hat / phi_hat.sum(axis=0, keepdims=True)
    alpha = np.array([doc_alpha(X_batch[d], nu) for d in range(X_batch.shape[0])])
    grad_sums = np.zeros((X_batch.shape[0], K))
    word_topic, _ = minibatch_ref.local_gibbs(batch.doc_ptr, batch.words, phi[batch.vocab], alpha,
                                              sweeps, burn, chunk_bounds, local_rngs, grad_sums)
    kept = sweeps - burn
    nbar = np.zeros((V, K))
    nbar[batch.vocab] = word_topic / kept
    gbar = grad_sums / kept
    R = n_docs / X_batch.shape[0]
    xi = main.standard_normal(size=(V, K))
    new = np.empty_like(phi_hat)
    nbar_k = nbar.sum(axis=0)
    for w in range(V):
        for k in range(K):
            drift = beta - phi_hat[w, k] + R * (nbar[w, k] - phi[w, k] * nbar_k[k])
            x = abs(phi_hat[w, k] + eps * drift + np.sqrt(2.0 * eps * phi_hat[w, k]) * xi[w, k])
            new[w, k] = max(x, 1e-300)
    if eps_nu is None:
        return new, nu
    G = -nu / variances + R * sum(np.outer(gbar[d], X_batch[d]) for d in range(X_batch.shape[0]))
    xi_nu = main.standard_normal(size=nu.shape)
    return new, nu + eps_nu * G + np.sqrt(2.0 * eps_nu) * xi_nu


def sparse_sweep(doc_ptr, words, z, ndk, nkw, nk, alpha, beta, chunk_bounds, rngs) -> None:
    """Twin of ``topictk/inference/gibbs/_gibbs.pyx::gibbs_sweep`` with sparse=True and a (D, K)
    alpha (AD-LDA over the chunks, one chunk: the exact sequential sampler), in place: the
    SparseLDA twin of tests/reference/gibbs.py with the prior of each document."""
    gibbs_ref.sweep(doc_ptr, words, z, ndk, nkw, nk, alpha, beta, chunk_bounds, rngs, True)
