"""NumPy twin of topictk/inference/dlda/_dlda.pyx (docs/algorithms.md §8.4, §8.5, §8.11) and of one
batch-Gibbs iteration of ``topictk.inference.dlda.driver`` (§8.5).

Plain Python loops that draw from ``numpy.random.Generator`` objects in exactly the order of
the kernel: ``random()`` for every uniform, ``beta(a, b)`` for p^(2) and ``standard_gamma(shape)``
for every gamma draw (the §12.3 contracts), sums in ascending index order. Slow; for small
problems in tests only.

Layers are lists: ``phis[l - 1]`` is Phi^(l) (K_{l-1}, K_l); ``theta`` is (J, sum K_l) with the
layers side by side and ``c`` (J, L) holds c^(2..L+1), as in the kernel.
"""
from __future__ import annotations

import bisect
import math

import numpy as np

FLOOR = 1e-300
P_LOW = 1e-15


def _sum(values) -> float:
    s = 0.0
    for x in values:
        s = s + float(x)
    return s


class Net:
    """Fixed globals: Phi^(1..L), r and the hyperparameters (a0, b0, e0, f0)."""

    def __init__(self, phis, r, hyper=(0.01, 0.01, 1.0, 1.0)):
        self.phis = [np.asarray(p, dtype=np.float64) for p in phis]
        self.L = len(self.phis)
        self.K = [self.phis[0].shape[0]] + [p.shape[1] for p in self.phis]
        self.offsets = np.concatenate([[0], np.cumsum(self.K[1:])]).astype(int)
        self.r = [float(x) for x in r]
        self.r_sum = _sum(self.r)
        self.a0, self.b0, self.e0, self.f0 = (float(h) for h in hyper)

    def layer(self, row, l):
        """View of theta^(l) inside a (sum K_l,) row."""
        return row[self.offsets[l - 1]:self.offsets[l]]


def cumulate(phi_row, theta):
    cum, s = [], 0.0
    for a, b in zip(phi_row, theta):
        s = s + float(a) * float(b)
        cum.append(s)
    return cum, (s > 0.0 and s < math.inf)


def partition(x, cum, valid, rng):
    """x categorical draws (§12.3 contract; uniform topics when the weights are unusable)."""
    K = len(cum)
    out = []
    for _ in range(int(x)):
        if valid:
            k = min(bisect.bisect_right(cum, rng.random() * cum[-1]), K - 1)
        else:
            k = min(int(rng.random() * K), K - 1)
        out.append(k)
    return out


def crt(m, a, rng) -> int:
    """CRT(m, a): customer i opens a table iff u < a / (a + i - 1); the first always does."""
    if m <= 0:
        return 0
    rng.random()
    n = 1
    for i in range(1, int(m)):
        if rng.random() < a / (a + float(i)):
            n += 1
    return n


def upward(net, entries, theta_row, stats, top, rng):
    """U1-U3 of one document -> (m as a list of int arrays per layer, fallbacks).
    ``entries``: [(v, x)]; ``stats`` None or [X^(1), ..., X^(L), X^(L+1)] (int arrays)."""
    fallbacks = 0
    m = [np.zeros(k, dtype=np.int64) for k in net.K[1:]]
    th1 = net.layer(theta_row, 1)
    for v, x in entries:
        cum, valid = cumulate(net.phis[0][v], th1)
        fallbacks += not valid
        for k in partition(x, cum, valid, rng):
            m[0][k] += 1
            if stats is not None:
                stats[0][v, k] += 1
    for l in range(2, net.L + 1):
        th = net.layer(theta_row, l)
        for v in range(net.K[l - 1]):
            if m[l - 2][v] > 0:
                cum, valid = cumulate(net.phis[l - 1][v], th)
                x = crt(m[l - 2][v], cum[-1], rng)
                fallbacks += not valid
                for k in partition(x, cum, valid, rng):
                    m[l - 1][k] += 1
                    if stats is not None:
                        stats[l - 1][v, k] += 1
    if top and stats is not None:
        for k in range(net.K[net.L]):
            if m[net.L - 1][k] > 0:
                stats[net.L][k] += crt(m[net.L - 1][k], net.r[k], rng)
    return m, fallbacks


def q_values(net, c_row):
    """q[l] = q^(l) for l = 1..L+1 (index 0 unused)."""
    q = [0.0, 1.0]
    for l in range(1, net.L + 1):
        q.append(math.log1p(q[l] / float(c_row[l - 1])))
    return q


def downward(net, theta_row, c_row, m, N, pc, rng):
    """D1-D4 of one document (in place) -> (floored draws, q^(L+1))."""
    L = net.L
    floored = 0
    if pc:
        s = _sum(net.layer(theta_row, 2)) if L >= 2 else net.r_sum
        p = float(rng.beta(net.a0 + float(N), net.b0 + s))
        if p < P_LOW:
            p = P_LOW
        elif p > 1.0 - P_LOW:
            p = 1.0 - P_LOW
        c_row[0] = (1.0 - p) / p
        for l in range(3, L + 2):
            shape = net.e0 + (_sum(net.layer(theta_row, l)) if l <= L else net.r_sum)
            rate = net.f0 + _sum(net.layer(theta_row, l - 1))
            g = float(rng.standard_gamma(shape)) / rate
            if not g >= FLOOR:
                g, floored = FLOOR, floored + 1
            c_row[l - 2] = g
    q = q_values(net, c_row)
    for l in range(L, 0, -1):
        th = net.layer(theta_row, l)
        rate = float(c_row[l - 1]) + q[l]
        upper = None if l == L else [float(x) for x in net.layer(theta_row, l + 1)]
        for k in range(net.K[l]):
            if l == L:
                shape = net.r[k]
            else:
                shape = 0.0
                for a, b in zip(net.phis[l][k], upper):
                    shape = shape + float(a) * b
            shape = shape + float(m[l - 1][k])
            g = float(rng.standard_gamma(shape)) / rate
            if not g >= FLOOR:
                g, floored = FLOOR, floored + 1
            th[k] = g
    return floored, q[L + 1]


def new_stats(net):
    return [np.zeros((net.K[l - 1], net.K[l]), dtype=np.int64) for l in range(1, net.L + 1)] + \
        [np.zeros(net.K[net.L], dtype=np.int64)]


def flatten_stats(stats) -> np.ndarray:
    """The kernel's layout: X^(1), ..., X^(L) row-major, then X^(L+1)."""
    return np.concatenate([s.ravel() for s in stats])


def local_chains(indptr, indices, counts, net, theta, c, n_iter, n_burn, pc_start, rngs,
                 chunk_bounds, collect=True, held_indptr=None, held_indices=None,
                 acc_burn=0, acc_thin=1):
    """Twin of ``_dlda.train_chains`` (``collect``), ``_dlda.evaluate_chains`` (``held_*``)
    and ``_dlda.infer_chains`` (neither); theta and c change in place.
    Returns dict(stats, qsum, racc, tacc, fallbacks, floored)."""
    J = len(indptr) - 1
    stats = new_stats(net) if collect else None
    qsum = np.zeros(J)
    use_acc = held_indptr is not None
    racc = np.zeros(len(held_indices)) if use_acc else None
    tacc = np.zeros(J) if use_acc else None
    fallbacks = floored = 0
    for ch in range(len(chunk_bounds) - 1):
        rng = rngs[ch]
        for j in range(chunk_bounds[ch], chunk_bounds[ch + 1]):
            entries = [(int(indices[e]), int(counts[e])) for e in range(indptr[j], indptr[j + 1])]
            N = sum(x for _, x in entries)
            for it in range(1, n_iter + 1):
                coll = it > n_burn
                m, fb = upward(net, entries, theta[j], stats if coll else None, coll, rng)
                fl, qtop = downward(net, theta[j], c[j], m, N, it >= pc_start, rng)
                fallbacks += fb
                floored += fl
                if coll:
                    qsum[j] += qtop
                if use_acc and it > acc_burn and (it - acc_burn) % acc_thin == 0:
                    th1 = [float(x) for x in net.layer(theta[j], 1)]
                    for e in range(held_indptr[j], held_indptr[j + 1]):
                        s = 0.0
                        for a, b in zip(net.phis[0][held_indices[e]], th1):
                            s = s + float(a) * b
                        racc[e] += s
                    tacc[j] += _sum(th1)
    return {"stats": stats, "qsum": qsum, "racc": racc, "tacc": tacc,
            "fallbacks": fallbacks, "floored": floored}


def gibbs_upward(indptr, indices, counts, net, theta, c, rngs, chunk_bounds):
    """Twin of ``_dlda.gibbs_upward`` -> (stats, m per document, qcur, fallbacks)."""
    J = len(indptr) - 1
    stats = new_stats(net)
    ms = [None] * J
    qcur = np.zeros(J)
    fallbacks = 0
    for ch in range(len(chunk_bounds) - 1):
        for j in range(chunk_bounds[ch], chunk_bounds[ch + 1]):
            qcur[j] = q_values(net, c[j])[net.L + 1]
            entries = [(int(indices[e]), int(counts[e])) for e in range(indptr[j], indptr[j + 1])]
            ms[j], fb = upward(net, entries, theta[j], stats, True, rngs[ch])
            fallbacks += fb
    return stats, ms, qcur, fallbacks


def gibbs_downward(net, theta, c, ms, rngs, chunk_bounds):
    """Twin of ``_dlda.gibbs_downward`` (in place) -> floored draws."""
    floored = 0
    for ch in range(len(chunk_bounds) - 1):
        for j in range(chunk_bounds[ch], chunk_bounds[ch + 1]):
            N = int(ms[j][0].sum())
            floored += downward(net, theta[j], c[j], ms[j], N, True, rngs[ch])[0]
    return floored


def dirichlet_columns(shape, main):
    """Columns ~ Dir(shape[:, k]): gammas in storage order, floor, normalise, floor, renormalise."""
    g = main.standard_gamma(shape)
    g = np.maximum(g, FLOOR)
    phi = g / g.sum(axis=0)
    phi = np.maximum(phi, FLOOR)
    return phi / phi.sum(axis=0)


def gibbs_iteration(indptr, indices, counts, phis, r, theta, c, *, eta, gamma0, c0,
                    hyper, main, rngs, chunk_bounds):
    """One batch-Gibbs iteration (§8.5): upward pass, Phi^(l) ~ Dir(eta_l + X^(l)) layer by
    layer and r ~ Gam(gamma0/K_L + X^(L+1), rate c0 + Q) from ``main``, downward pass.
    theta and c change in place; returns (new phis, new r)."""
    net = Net(phis, r, hyper)
    stats, ms, qcur, _ = gibbs_upward(indptr, indices, counts, net, theta, c, rngs,
                                      chunk_bounds)
    Q = float(np.sum(qcur))
    new_phis = [dirichlet_columns(eta[l] + stats[l], main) for l in range(net.L)]
    KL = net.K[net.L]
    new_r = main.standard_gamma(gamma0 / KL + stats[net.L]) / (c0 + Q)
    new_r = np.maximum(new_r, FLOOR)
    net2 = Net(new_phis, new_r, hyper)
    gibbs_downward(net2, theta, c, ms, rngs, chunk_bounds)
    return new_phis, new_r
