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
    return _minka(hist, ndk.sum(axis=1), alpha, max_iter, tol)


def minka_alpha_of_rows(ptr: np.ndarray, topic: np.ndarray, count: np.ndarray,
                        alpha: np.ndarray, max_iter: int = 200,
                        tol: float = 1e-6) -> np.ndarray:
    """:func:`minka_alpha` from the non-zero n_dk as compressed rows (row d: ``topic`` and
    ``count`` from ``ptr[d]`` to ``ptr[d + 1]``, a WarpLDA chain's form, §2.9): the same
    histograms, so the same alpha bit for bit, in memory O(non-zeros + K * longest count)."""
    K = np.asarray(alpha).size
    count = np.asarray(count, dtype=np.int64)
    topic = np.asarray(topic, dtype=np.int64)
    n_max = int(count.max(initial=0))
    hist = np.bincount(count * K + topic, minlength=(n_max + 1) * K).reshape(n_max + 1, K)
    hist = hist.astype(np.float64)          # row 0 (n_dk = 0) does not enter the update
    total = np.concatenate(([0], np.cumsum(count)))
    lengths = total[ptr[1:]] - total[ptr[:-1]]
    return _minka(hist, lengths, alpha, max_iter, tol)


def _minka(hist: np.ndarray, lengths: np.ndarray, alpha: np.ndarray, max_iter: int,
           tol: float) -> np.ndarray:
    """The fixed point of :func:`minka_alpha` from ``hist`` (n_max + 1, K), the number of
    documents with n_dk = n, and the document lengths."""
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


#: the start of a learnt alpha (``model.alpha: auto``)
DEFAULT_ALPHA = 0.1


def resolve_alpha(value, n_topics: int) -> np.ndarray:
    """model.alpha -> (K,) float64, the prior every family starts from; ``auto`` starts from
    DEFAULT_ALPHA and is learnt."""
    start = DEFAULT_ALPHA if value == "auto" else float(value)
    return np.full(n_topics, start, dtype=np.float64)
