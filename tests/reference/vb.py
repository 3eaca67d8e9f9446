"""Slow NumPy twins of the variational Bayes kernels (topictk/inference/variational/_vb.pyx) and of
one batch variational EM iteration (docs/algorithms.md §3), written from the equations one document
at a time."""
from __future__ import annotations

import numpy as np
from scipy.special import digamma, gammaln


def expected_log_topics(lam, rows, offset, scale, psi_total, smoothed, beta):
    """(B, shift, term) for the words ``rows`` (all when None) of offset + scale * lam."""
    rows = np.arange(lam.shape[0]) if rows is None else np.asarray(rows)
    x = offset + scale * lam[rows]
    if smoothed:
        elog = digamma(x) - psi_total[None, :]
        term = ((beta - x) * elog + gammaln(x)).sum(axis=1)
    else:
        elog = np.log(x)
        term = np.zeros(rows.size)
    shift = elog.max(axis=1)
    return np.exp(elog - shift[:, None]), shift, term


def e_step_document(ids, cts, B, shift, alpha, gamma0, tol, max_iter):
    """§3.2 for one document: returns (gamma, mu (M_d, K), l_d, number of gamma updates)."""
    alpha = np.asarray(alpha, dtype=np.float64)
    cts = np.asarray(cts, dtype=np.float64)
    Bd = B[ids]                                           # (M_d, K)
    gamma = np.array(gamma0, dtype=np.float64)

    def exp_theta(g):
        elog = digamma(g) - digamma(g.sum())
        m = elog.max()
        return elog, m, np.exp(elog - m)

    elog, m, A = exp_theta(gamma)
    updates = 0
    while updates < max_iter:
        Z = Bd @ A
        gamma_new = alpha + A * ((cts / Z) @ Bd)
        delta = np.abs(gamma_new - gamma).mean()
        gamma = gamma_new
        elog, m, A = exp_theta(gamma)
        updates += 1
        if delta < tol:
            break
    Z = Bd @ A
    mu = A[None, :] * Bd / Z[:, None]
    bound = (np.dot(cts, np.log(Z) + shift[ids] + m)
             + np.dot(alpha - gamma, elog) + gammaln(alpha.sum()) - gammaln(alpha).sum()
             + gammaln(gamma).sum() - gammaln(gamma.sum()))
    return gamma, mu, bound, updates


def e_step(indptr, indices, counts, B, shift, alpha, gamma, start, tol, max_iter):
    """Every document in order: returns (gamma, sstats (V_b, K), bounds, updates).

    ``start``: "cold" (alpha + N_d/K), "warm" (the given gamma) or "best" (both; the document
    keeps the result with the higher l_d, warm on ties)."""
    D = len(indptr) - 1
    K = B.shape[1]
    gamma = np.array(gamma, dtype=np.float64, copy=True)
    sstats = np.zeros((B.shape[0], K))
    bounds = np.zeros(D)
    updates = np.zeros(D, dtype=np.int64)
    for d in range(D):
        ids = np.asarray(indices[indptr[d]:indptr[d + 1]])
        cts = np.asarray(counts[indptr[d]:indptr[d + 1]])
        cold = alpha + cts.sum() / K
        if start == "best":
            gc, mc, bc, uc = e_step_document(ids, cts, B, shift, alpha, cold, tol, max_iter)
            gw, mw, bw, uw = e_step_document(ids, cts, B, shift, alpha, gamma[d], tol, max_iter)
            gamma[d], mu, bounds[d] = (gc, mc, bc) if bc > bw else (gw, mw, bw)
            updates[d] = uc + uw
        else:
            begin = gamma[d] if start == "warm" else cold
            gamma[d], mu, bounds[d], updates[d] = e_step_document(ids, cts, B, shift, alpha,
                                                                  begin, tol, max_iter)
        for j, w in enumerate(ids):            # document order, as the kernel's reduction
            sstats[w] += cts[j] * mu[j]
    return gamma, sstats, bounds, updates


def mixture_probabilities(indptr, indices, theta, phi):
    out = np.zeros(len(indices))
    for d in range(len(indptr) - 1):
        for j in range(indptr[d], indptr[d + 1]):
            out[j] = float(np.dot(theta[d], phi[indices[j]]))
    return out


def elbo_topic_part(lam, beta):
    """Topic terms of the smoothed ELBO (§3.3) for word-major lambda (V, K)."""
    V, K = lam.shape
    totals = lam.sum(axis=0)
    elog = digamma(lam) - digamma(totals)[None, :]
    return float(K * (gammaln(V * beta) - V * gammaln(beta)) + ((beta - lam) * elog).sum()
                 + gammaln(lam).sum() - gammaln(totals).sum())


def em_iteration(indptr, indices, counts, lam, gamma, alpha, beta, tol, max_iter, start="best"):
    """One smoothed variational EM iteration (§3.5 without alpha learning):
    returns (new lambda, gamma, ELBO of the E-step)."""
    totals = lam.sum(axis=0)
    B, shift, _ = expected_log_topics(lam, None, 0.0, 1.0, digamma(totals), True, beta)
    gamma, sstats, bounds, _ = e_step(indptr, indices, counts, B, shift, alpha, gamma, start,
                                      tol, max_iter)
    elbo = bounds.sum() + elbo_topic_part(lam, beta)
    return sstats + beta, gamma, elbo


def newton_direction_dense(alpha, S, n_docs):
    """H^-1 g by a dense solve (the oracle of §3.4 b)."""
    from scipy.special import polygamma

    g = n_docs * (digamma(alpha.sum()) - digamma(alpha)) + S
    H = np.diag(-n_docs * polygamma(1, alpha)) + n_docs * polygamma(1, alpha.sum())
    return np.linalg.solve(H, g)
