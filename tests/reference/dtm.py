"""NumPy twins of the dynamic topic model's kernels (``topictk/inference/dtm/_dtm.pyx``,
docs/algorithms.md §14.2): the same uniforms in the same order, so the same topics."""
from __future__ import annotations

import numpy as np

from tests.reference.warp import Xoshiro
from topictk.inference.dtm.updates import langevin


def sample_topics(doc_ptr, words, doc_slice, theta, word_topic, bounds, gens, z, ndk,
                  active=None) -> None:
    """Every token of chunk c from ``gens[c]``'s xoshiro256+: k the first topic whose running
    sum of theta_dk p_{t,w,k} exceeds u times the total; n_dk of the documents drawn."""
    K = theta.shape[1]
    for c in range(len(bounds) - 1):
        x = Xoshiro(np.random.Generator(gens[c]))
        for d in range(bounds[c], bounds[c + 1]):
            if active is not None and not active[d]:
                continue
            ndk[d] = 0
            for i in range(doc_ptr[d], doc_ptr[d + 1]):
                cum = np.cumsum(theta[d] * word_topic[doc_slice[d], words[i]])
                k = min(int(np.searchsorted(cum, x.random() * cum[-1], side="right")), K - 1)
                z[i] = k
                ndk[d, k] += 1


def ziggurat_normals(gen, n: int, tables) -> np.ndarray:
    """n standard normals as ``_dtm`` draws them: Marsaglia & Tsang's ziggurat with 128 boxes,
    the upper 32 bits of a xoshiro256+ output the signed draw, its lowest 7 the box."""
    kn, wn, fn = tables
    r_edge = 3.442619855899
    x = Xoshiro(np.random.Generator(gen))

    def signed(r):
        hz = r >> 32
        return hz - (1 << 32) if hz >= 1 << 31 else hz

    out = np.empty(n)
    for i in range(n):
        r = x.next()
        hz, iz = signed(r), r & 127
        if abs(hz) < kn[iz]:
            out[i] = hz * wn[iz]
            continue
        while True:
            u = hz * wn[iz]
            if iz == 0:
                while True:
                    u = -np.log(1.0 - x.random()) / r_edge
                    y = -np.log(1.0 - x.random())
                    if y + y >= u * u:
                        break
                out[i] = r_edge + u if hz > 0 else -r_edge - u
                break
            if fn[iz] + x.random() * (fn[iz - 1] - fn[iz]) < np.exp(-0.5 * u * u):
                out[i] = u
                break
            r = x.next()
            hz, iz = signed(r), r & 127
            if abs(hz) < kn[iz]:
                out[i] = hz * wn[iz]
                break
    return out


def slice_word_counts(doc_ptr, words, doc_slice, z, T, V, K) -> np.ndarray:
    counts = np.zeros((T, V, K), dtype=np.int32)
    doc_of = np.repeat(np.arange(len(doc_ptr) - 1), np.diff(doc_ptr))
    np.add.at(counts, (doc_slice[doc_of], words, z), 1)
    return counts


def log_phi_density(phi, counts, variance, first_variance, first_mean) -> float:
    """ln p(phi | z) up to a constant, phi and counts word-major (T, V, K): the walk and every
    token's log probability."""
    logp = -0.5 * np.sum((phi[0] - first_mean) ** 2) / first_variance
    logp -= 0.5 * np.sum((phi[1:] - phi[:-1]) ** 2) / variance
    lse = np.log(np.exp(phi).sum(axis=1, keepdims=True))
    return logp + float(np.sum(counts * (phi - lse)))


def log_eta_density(eta, ndk, mean, variance) -> float:
    lse = np.log(np.exp(eta).sum(axis=1, keepdims=True))
    return float(-0.5 * np.sum((eta - mean) ** 2) / variance + np.sum(ndk * (eta - lse)))


def softmax_words(phi: np.ndarray) -> np.ndarray:
    """phi (T, V, K) -> the topics' word probabilities, normalised over the words (axis 1)."""
    top = phi.max(axis=1, keepdims=True)
    p = np.exp(phi - top)
    p /= p.sum(axis=1, keepdims=True)
    return p


def walk_neighbours(series: np.ndarray, variance: float, first_variance: float,
                    first_mean: np.ndarray | float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """The Gaussian random walk's pull on each slice of ``series`` (T, ...): series_1 ~
    N(first_mean, first_variance), series_t ~ N(series_{t-1}, variance). Returns (gradient of
    the log prior, its curvature per slice (T, 1, ...))."""
    T = series.shape[0]
    grad = np.zeros_like(series)
    grad[0] -= (series[0] - first_mean) / first_variance
    if T > 1:
        diff = (series[1:] - series[:-1]) / variance
        grad[1:] -= diff
        grad[:-1] += diff
    prec = np.full((T,) + (1,) * (series.ndim - 1), 2.0 / variance)
    prec[0] = 1.0 / first_variance + (1.0 / variance if T > 1 else 0.0)
    if T > 1:
        prec[-1] = 1.0 / variance
    return grad, prec


def phi_step(phi: np.ndarray, counts: np.ndarray, eps: float, variance: float,
             first_variance: float, noise: np.ndarray | None,
             first_mean: np.ndarray | float = 0.0) -> None:
    """One Langevin step of every topic's natural parameters in place (§14.2): the gradient
    of ln p(phi | z) = n_{t,w,k} - n_{t,k} softmax(phi_{t,k})_w plus the random walk's pull;
    the curvature max(n_{t,w,k}, n_{t,k} p_{t,w,k}) + the walk's precision."""
    p = softmax_words(phi)
    totals = counts.sum(axis=1, keepdims=True, dtype=np.float64)        # n_{t,k} (T, 1, K)
    expected = p * totals
    grad, prec = walk_neighbours(phi, variance, first_variance, first_mean)
    grad += counts
    grad -= expected
    curvature = np.maximum(counts, expected, out=expected)
    curvature += prec
    langevin(phi, grad, curvature, eps, noise)
