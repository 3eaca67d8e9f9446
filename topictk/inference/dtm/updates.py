"""The dynamic topic model's updates of the documents' and the slices' parameters
(docs/algorithms.md §14.2), in NumPy: eta (D, K) the documents' topic parameters, alpha (T, K)
the slices' means. The topics' step is the kernel :func:`topictk.inference.dtm._dtm.phi_step`
(its NumPy twin is ``tests/reference/dtm.py``). A Langevin step is preconditioned, per
coordinate, by the inverse of a stand-in for the curvature of its conditional's negative log
density (:func:`langevin`).
"""
from __future__ import annotations

import numpy as np


def softmax_topics(eta: np.ndarray) -> np.ndarray:
    """eta (D, K) -> theta (D, K), every row on the simplex."""
    top = eta.max(axis=1, keepdims=True)
    theta = np.exp(eta - top)
    theta /= theta.sum(axis=1, keepdims=True)
    return theta


def langevin(x: np.ndarray, gradient: np.ndarray, curvature: np.ndarray, eps: float,
             noise: np.ndarray | None) -> None:
    """One preconditioned Langevin step in place: x += eps M gradient + sqrt(2 eps M) noise,
    M = 1 / curvature (the convention of §7: eps times the drift, 2 eps the noise's
    variance). ``noise`` (standard normals, consumed) None switches the noise off."""
    step = eps / curvature
    x += step * gradient
    if noise is not None:
        np.sqrt(2.0 * step, out=step)
        step *= noise
        x += step


def eta_step(eta: np.ndarray, doc_topic: np.ndarray, lengths: np.ndarray, mean: np.ndarray,
             variance: float, eps: float, noise: np.ndarray | None,
             theta: np.ndarray | None = None) -> None:
    """One Langevin step of the documents' topic parameters in place (§14.2): eta_d ~
    N(mean_d, variance I), its tokens' topics n_dk ~ Mult(N_d, softmax(eta_d)); ``mean``
    (D, K) is alpha of each document's slice; ``theta``, when the caller has it, is
    softmax(eta) (not changed)."""
    expected = softmax_topics(eta) if theta is None else theta * lengths[:, None]
    if theta is None:
        expected *= lengths[:, None]
    grad = (mean - eta) / variance
    grad += doc_topic
    grad -= expected
    curvature = np.maximum(doc_topic, expected, out=expected)
    curvature += 1.0 / variance
    langevin(eta, grad, curvature, eps, noise)


def alpha_draw(alpha: np.ndarray, eta: np.ndarray, doc_slice: np.ndarray, variance: float,
               first_variance: float, eta_variance: float, normals: np.ndarray) -> None:
    """Draw alpha (T, K) in place from its Gaussian conditional, slice by slice in time order
    (§14.2): alpha_t given its neighbours (the random walk of ``variance``, the first slice's
    prior of ``first_variance``) and the documents of slice t (eta_d ~ N(alpha_t,
    eta_variance I)). ``normals`` (T, K) standard normals."""
    T, K = alpha.shape
    sums = np.zeros((T, K))
    np.add.at(sums, doc_slice, eta)
    n = np.bincount(doc_slice, minlength=T).astype(np.float64)
    for t in range(T):
        prec = n[t] / eta_variance
        mean = sums[t] / eta_variance
        if t == 0:
            prec += 1.0 / first_variance
        else:
            prec += 1.0 / variance
            mean = mean + alpha[t - 1] / variance
        if t + 1 < T:
            prec += 1.0 / variance
            mean = mean + alpha[t + 1] / variance
        alpha[t] = mean / prec + normals[t] / np.sqrt(prec)
