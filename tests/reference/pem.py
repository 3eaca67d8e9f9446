"""Slow NumPy twins of particle EM (topictk/inference/_pem.pyx and topictk/inference/pem.py,
docs/algorithms.md §10), written from the equations in log space one document at a time."""
from __future__ import annotations

import numpy as np
from scipy.special import digamma, gammaln, logsumexp


def e_step_document(ids, cts, logphi, alpha, gamma0, temperature, tol, max_iter):
    """§10.3 for one document and one particle: (gamma, mu (M_d, K), l_d, gamma updates).

    mu_wk = softmax_k((Elogtheta_k + ln phi_wk) / T) (T = 0: one-hot on the arg max, smallest k
    on ties); gamma = alpha + sum_w n_w mu_w, iterated until the mean |change| < tol.
    """
    alpha = np.asarray(alpha, dtype=np.float64)
    cts = np.asarray(cts, dtype=np.float64)
    L = logphi[ids]                                       # (M_d, K)
    gamma = np.array(gamma0, dtype=np.float64)

    def responsibilities(g):
        elog = digamma(g) - digamma(g.sum())
        a = elog[None, :] + L
        if temperature > 0:
            mu = np.exp(a / temperature - logsumexp(a / temperature, axis=1, keepdims=True))
        else:
            mu = np.zeros_like(a)
            mu[np.arange(a.shape[0]), np.argmax(a, axis=1)] = 1.0
        return elog, a, mu

    elog, a, mu = responsibilities(gamma)
    updates = 0
    while updates < max_iter:
        new = alpha + cts @ mu
        delta = np.abs(new - gamma).mean()
        gamma = new
        elog, a, mu = responsibilities(gamma)
        updates += 1
        if delta < tol:
            break
    if temperature > 0:
        token = temperature * logsumexp(a / temperature, axis=1)
    else:
        token = a.max(axis=1)
    bound = (np.dot(cts, token) + np.dot(alpha - gamma, elog) + gammaln(alpha.sum())
             - gammaln(alpha).sum() + gammaln(gamma).sum() - gammaln(gamma.sum()))
    return gamma, mu, float(bound), updates


def e_step_tempered(indptr, indices, counts, logphi, alpha, gamma, temperature, start, tol,
                    max_iter):
    """Every document in order: (gamma, sstats (V, K), bounds, updates); ``start`` is cold,
    warm or best (the higher l_d, warm on ties)."""
    D = len(indptr) - 1
    K = logphi.shape[1]
    gamma = np.array(gamma, dtype=np.float64, copy=True)
    sstats = np.zeros(logphi.shape)
    bounds = np.zeros(D)
    updates = np.zeros(D, dtype=np.int64)
    for d in range(D):
        ids = np.asarray(indices[indptr[d]:indptr[d + 1]])
        cts = np.asarray(counts[indptr[d]:indptr[d + 1]])
        cold = alpha + cts.sum() / K
        args = (ids, cts, logphi, alpha)
        if start == "best":
            gc, mc, bc, uc = e_step_document(*args, cold, temperature, tol, max_iter)
            gw, mw, bw, uw = e_step_document(*args, gamma[d], temperature, tol, max_iter)
            gamma[d], mu, bounds[d] = (gc, mc, bc) if bc > bw else (gw, mw, bw)
            updates[d] = uc + uw
        else:
            begin = gamma[d] if start == "warm" else cold
            gamma[d], mu, bounds[d], updates[d] = e_step_document(*args, begin, temperature,
                                                                  tol, max_iter)
        for j, w in enumerate(ids):
            sstats[w] += cts[j] * mu[j]
    return gamma, sstats, bounds, updates


def particle_weights(bounds, temperature):
    """omega_p proportional to exp(L_p / T); T = 0: one-hot on the first best particle."""
    bounds = np.asarray(bounds, dtype=np.float64)
    if temperature == 0:
        omega = np.zeros(bounds.size)
        omega[np.argmax(bounds)] = 1.0
        return omega
    return np.exp(bounds / temperature - logsumexp(bounds / temperature))


def em_iteration(indptr, indices, counts, phi, gammas, alpha, temperature, start, tol,
                 max_iter):
    """One particle-EM iteration with alpha fixed (§10.3): returns (phi, gammas, omega, L_T).
    ``phi`` word-major (V, K); ``gammas`` (P, D, K)."""
    logphi = np.log(phi)
    new_gammas, stats, bounds = [], [], []
    for g in gammas:
        g, ss, b, _ = e_step_tempered(indptr, indices, counts, logphi, alpha, g, temperature,
                                      start, tol, max_iter)
        new_gammas.append(g)
        stats.append(ss)
        bounds.append(b.sum())
    omega = particle_weights(bounds, temperature)
    nz = omega[omega > 0]
    value = float(np.dot(omega, bounds)) + temperature * float(-np.sum(nz * np.log(nz)))
    total = sum(o * s for o, s in zip(omega, stats))
    new_phi = np.maximum(total, 1e-100)
    return new_phi / new_phi.sum(axis=0), np.array(new_gammas), omega, value
