"""Slow NumPy twin of topictk/inference/_fixed_point.pyx (docs/algorithms.md §11.2).

Written from the update rule, one document and one observed word at a time, in the kernel's
order of summation, so the two agree to the last bit on ordinary inputs.
"""
from __future__ import annotations

import numpy as np


def document(words, counts, phi, alpha, tol: float, max_iterations: int):
    """(theta-hat (K,), updates made) of one document with observed ``words`` x ``counts``."""
    K = phi.shape[1]
    theta = np.full(K, 1.0 / K)
    denom = float(sum(int(c) for c in counts)) + float(sum(alpha))
    iterations = 0
    while iterations < max_iterations:
        iterations += 1
        acc = np.zeros(K)
        for w, c in zip(words, counts):
            mix = 0.0
            for k in range(K):
                mix += theta[k] * phi[w, k]
            if mix <= 0.0:
                continue
            scale = c / mix
            for k in range(K):
                acc[k] += scale * theta[k] * phi[w, k]
        new = (acc + alpha) / denom
        delta = float(np.max(np.abs(new - theta)))
        theta = new
        if delta < tol:
            break
    return theta, iterations


def fold_in_theta(indptr, indices, counts, phi, alpha, active, tol, max_iterations):
    """(theta (D, K), iterations (D,)); rows of inactive documents NaN and 0 updates."""
    D, K = len(indptr) - 1, phi.shape[1]
    alpha = np.atleast_2d(alpha)
    theta = np.full((D, K), np.nan)
    iterations = np.zeros(D, dtype=np.int32)
    for d in range(D):
        if not active[d]:
            continue
        lo, hi = indptr[d], indptr[d + 1]
        theta[d], iterations[d] = document(indices[lo:hi], counts[lo:hi], phi,
                                           alpha[d if alpha.shape[0] > 1 else 0],
                                           tol, max_iterations)
    return theta, iterations
