"""Slow NumPy twin of topictk/evaluation/_left_to_right.pyx (docs/algorithms.md §11.3).

Written from the pseudo-code, one draw at a time, with ``numpy.random.Generator`` objects on
the kernel's PCG64 streams, so the two can be compared exactly.
"""
from __future__ import annotations

import math

import numpy as np


def _draw(weights: list[float], rng: np.random.Generator) -> int:
    """Dense draw contract: first k whose running sum exceeds u * total, else K - 1."""
    cum, total = [], 0.0
    for w in weights:
        total += w
        cum.append(total)
    u = rng.random() * total
    for k, c in enumerate(cum):
        if u < c:
            return k
    return len(weights) - 1


def document(observed, held_words, held_counts, phi, alpha, particles,
             rng: np.random.Generator) -> float:
    """ln p-hat(held | observed) of one document."""
    seq = list(observed) + [w for w, n in zip(held_words, held_counts) for _ in range(n)]
    n_obs, K = len(observed), phi.shape[1]
    alpha_sum = sum(alpha[k] for k in range(K))
    z = [[0] * len(seq) for _ in range(particles)]
    c = [[0] * K for _ in range(particles)]
    ll = 0.0
    for n, w in enumerate(seq):
        pn = 0.0
        for r in range(particles):
            for m in range(n):
                c[r][z[r][m]] -= 1
                k = _draw([(alpha[j] + c[r][j]) * phi[seq[m], j] for j in range(K)], rng)
                z[r][m] = k
                c[r][k] += 1
            if n >= n_obs:
                p = 0.0
                for j in range(K):
                    p += phi[w, j] * (alpha[j] + c[r][j])
                pn += p / (n + alpha_sum)
            k = _draw([(alpha[j] + c[r][j]) * phi[w, j] for j in range(K)], rng)
            z[r][n] = k
            c[r][k] += 1
        if n >= n_obs:
            ll += math.log(max(pn / particles, 1e-300))
    return ll


def left_to_right(obs_ptr, obs_words, held_ptr, held_words, held_counts, phi, alpha,
                  particles, chunk_bounds, streams) -> np.ndarray:
    """Every document's estimate; documents of chunk c draw from ``streams[c]`` in order."""
    D = len(obs_ptr) - 1
    alpha = np.atleast_2d(alpha)
    out = np.zeros(D)
    for c in range(len(chunk_bounds) - 1):
        rng = np.random.Generator(streams[c])
        for d in range(chunk_bounds[c], chunk_bounds[c + 1]):
            if held_ptr[d + 1] == held_ptr[d]:
                continue
            a = alpha[d] if alpha.shape[0] > 1 else alpha[0]
            out[d] = document(obs_words[obs_ptr[d]:obs_ptr[d + 1]],
                              held_words[held_ptr[d]:held_ptr[d + 1]],
                              held_counts[held_ptr[d]:held_ptr[d + 1]], phi, a, particles, rng)
    return out
