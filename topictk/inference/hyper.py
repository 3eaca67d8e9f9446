"""Hyperparameter updates from counts (docs/algorithms.md §2.5): Minka's fixed point for an
asymmetric Dirichlet alpha, evaluated through count histograms so one iteration costs
O(K * longest document) rather than O(D * K)."""
from __future__ import annotations

import numpy as np


def _digamma_increments(hist: np.ndarray, a: np.ndarray) -> np.ndarray:
    """sum_n hist[n, k] (psi(n + a_k) - psi(a_k)) for every k, using psi(n+a)-psi(a) =
    sum_{j<n} 1/(a+j). ``hist`` is (n_max + 1, K)."""
    n_max = hist.shape[0] - 1
    if n_max == 0:
        return np.zeros(hist.shape[1])
    # tail[n] = number of documents with count >= n
    tail = np.cumsum(hist[::-1], axis=0)[::-1]
    j = np.arange(n_max)[:, None]
    return np.sum(tail[1:] / (a[None, :] + j), axis=0)


def minka_alpha(ndk: np.ndarray, alpha: np.ndarray, max_iter: int = 200,
                tol: float = 1e-6) -> np.ndarray:
    """Fixed-point iteration alpha_k <- alpha_k * sum_d[psi(n_dk+a_k)-psi(a_k)] /
    sum_d[psi(N_d+a_sum)-psi(a_sum)], to relative change < tol; clamped to [1e-10, 1e5]."""
    ndk = np.asarray(ndk)
    K = ndk.shape[1]
    n_max = int(ndk.max(initial=0))
    hist = np.zeros((n_max + 1, K), dtype=np.float64)
    for k in range(K):
        hist[:, k] = np.bincount(ndk[:, k], minlength=n_max + 1)
    lengths = ndk.sum(axis=1)
    len_hist = np.bincount(lengths).astype(np.float64)[:, None]
    alpha = np.asarray(alpha, dtype=np.float64).copy()
    for _ in range(max_iter):
        numer = _digamma_increments(hist, alpha)
        denom = _digamma_increments(len_hist, np.array([alpha.sum()]))[0]
        if denom <= 0:
            break
        new = np.clip(alpha * numer / denom, 1e-10, 1e5)
        change = np.max(np.abs(new - alpha) / alpha)
        alpha = new
        if change < tol:
            break
    return alpha
