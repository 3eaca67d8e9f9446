"""Slow NumPy twin of online variational Bayes (topictk/inference/variational/ovb.py,
docs/algorithms.md §5): dense lambda, the epoch permutation in plain Python integers, the E-step of
``tests/reference/vb.py``."""
from __future__ import annotations

import numpy as np
from scipy.special import digamma

from tests.reference import vb as vb_ref

_MASK64 = (1 << 64) - 1


def _mix64(x: int) -> int:
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK64
    return x ^ (x >> 31)


def permute(position: int, n: int, round_keys) -> int:
    """The epoch permutation: 4 Feistel rounds on 2h-bit numbers, cycle-walking into [0, n)."""
    half = max(1, ((max(n - 1, 1)).bit_length() + 1) // 2)
    mask = (1 << half) - 1

    def feistel(x: int) -> int:
        left, right = x >> half, x & mask
        for key in round_keys:
            left, right = right, left ^ (_mix64(right ^ int(key)) & mask)
        return (left << half) | right

    x = feistel(position)
    while x >= n:
        x = feistel(x)
    return x


def step_size(t, tau0, kappa):
    return 1.0 if tau0 + t <= 1 else min(1.0, (tau0 + t) ** (-kappa))


def svi_step(indptr, indices, counts, docs, lam, alpha, eta, rho, n_docs, tol, max_iter):
    """One dense update (§5): cold E-step of ``docs`` with lambda, then
    lambda <- (1 - rho) lambda + rho (eta + R_B SS). Returns (new lambda, batch gamma)."""
    sub_ptr = [0]
    sub_idx, sub_cnt = [], []
    for d in docs:
        sub_idx.extend(indices[indptr[d]:indptr[d + 1]])
        sub_cnt.extend(counts[indptr[d]:indptr[d + 1]])
        sub_ptr.append(len(sub_idx))
    totals = lam.sum(axis=0)
    B, shift, _ = vb_ref.expected_log_topics(lam, None, 0.0, 1.0, digamma(totals), True, eta)
    gamma0 = np.zeros((len(docs), lam.shape[1]))
    gamma, sstats, _, _ = vb_ref.e_step(np.array(sub_ptr), np.array(sub_idx, np.int64),
                                        np.array(sub_cnt), B, shift, alpha, gamma0, "cold",
                                        tol, max_iter)
    ratio = n_docs / len(docs)
    return (1.0 - rho) * lam + rho * (eta + ratio * sstats), gamma


def run(indptr, indices, counts, lam0, alpha, eta, steps, batch_size, tau0, kappa, main_rng,
        tol=1e-3, max_iter=100):
    """``steps`` updates from lambda0 with fresh epoch keys from ``main_rng`` (a PCG64)."""
    n_docs = len(indptr) - 1
    per_epoch = n_docs // batch_size
    lam = lam0.copy()
    round_keys = None
    for t in range(steps):
        epoch, position = divmod(t, per_epoch)
        if position == 0:
            round_keys = main_rng.random_raw(4)
        docs = [permute(position * batch_size + j, n_docs, round_keys) for j in range(batch_size)]
        lam, _ = svi_step(indptr, indices, counts, docs, lam, alpha, eta,
                          step_size(t, tau0, kappa), n_docs, tol, max_iter)
    return lam
