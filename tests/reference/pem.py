"""Slow NumPy twins of particle EM (topictk/inference/variational/_pem.pyx and
topictk/inference/variational/pem.py, docs/algorithms.md §10), written from the equations in log
space one document at a time."""
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
    """omega_p proportional to exp(L_p / T) over the last axis; T = 0: one-hot on the first
    best particle. (D, P) bounds give every document its own weights (§10.3)."""
    bounds = np.asarray(bounds, dtype=np.float64)
    if temperature == 0:
        omega = np.zeros(bounds.shape)
        flat = omega.reshape(-1, bounds.shape[-1])
        flat[np.arange(flat.shape[0]), np.argmax(bounds.reshape(flat.shape), axis=1)] = 1.0
        return omega
    return np.exp(bounds / temperature - logsumexp(bounds / temperature, axis=-1,
                                                   keepdims=True))


def annealed_temperature(t, start, end, steps):
    """The geometric schedule of §10.3, written as interpolation of ln T."""
    if steps == 0 or t >= steps:
        return end
    return float(np.exp(np.log(start) + (np.log(end) - np.log(start)) * t / steps))


def particle_distances(gammas):
    """(P, P) mean over documents of 0.5 sum_k |theta_pdk - theta_qdk|."""
    P = len(gammas)
    dist = np.zeros((P, P))
    for p in range(P):
        for q in range(P):
            tp = gammas[p] / gammas[p].sum(axis=1, keepdims=True)
            tq = gammas[q] / gammas[q].sum(axis=1, keepdims=True)
            dist[p, q] = np.mean([0.5 * np.sum(np.abs(a - b)) for a, b in zip(tp, tq)])
    return dist


def weighted_statistics(indptr, indices, counts, logphi, gammas, omega, temperature):
    """SS_wk = sum_p sum_d omega_dp n_dw mu_pdwk with mu from each particle's gamma."""
    sstats = np.zeros(logphi.shape)
    for p, g in enumerate(gammas):
        for d in range(len(indptr) - 1):
            ids = np.asarray(indices[indptr[d]:indptr[d + 1]])
            cts = np.asarray(counts[indptr[d]:indptr[d + 1]], dtype=np.float64)
            _, mu, _, _ = e_step_document(ids, cts, logphi, np.ones(logphi.shape[1]), g[d],
                                          temperature, 0.0, 0)
            for j, w in enumerate(ids):
                sstats[w] += omega[d, p] * cts[j] * mu[j]
    return sstats


def em_iteration(indptr, indices, counts, phi, gammas, alpha, temperature, start, tol,
                 max_iter):
    """One particle-EM iteration with alpha fixed (§10.3): returns (phi, gammas, omega (D, P),
    L_T). ``phi`` word-major (V, K); ``gammas`` (P, D, K). Every document weighs the particles
    by its own bounds: omega_d = softmax_p(l_pd / T), L_T = sum_d T logsumexp_p(l_pd / T)."""
    logphi = np.log(phi)
    new_gammas, bounds = [], []
    for g in gammas:
        g, _, b, _ = e_step_tempered(indptr, indices, counts, logphi, alpha, g, temperature,
                                     start, tol, max_iter)
        new_gammas.append(g)
        bounds.append(b)
    bounds = np.array(bounds).T                             # (D, P)
    omega = particle_weights(bounds, temperature)
    if temperature > 0:
        value = float(np.sum(temperature * logsumexp(bounds / temperature, axis=1)))
    else:
        value = float(bounds.max(axis=1).sum())
    total = weighted_statistics(indptr, indices, counts, logphi, new_gammas, omega, temperature)
    new_phi = np.maximum(total, 1e-100)
    return new_phi / new_phi.sum(axis=0), np.array(new_gammas), omega, value
