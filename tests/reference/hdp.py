"""NumPy twin of the hierarchical Dirichlet process's table draw (docs/algorithms.md §2.15):
the plain loop over documents, topics and customers, one uniform each from the same stream in
the same order as :func:`topictk.inference.gibbs.hdp.crt_tables`."""
from __future__ import annotations

import numpy as np


def crt_tables(ndk: np.ndarray, weight: np.ndarray, generator: np.random.Generator
               ) -> np.ndarray:
    """m_.k: customer i (0-based) of topic k in a document opens a table with probability
    a_k / (a_k + i)."""
    D, K = ndk.shape
    tables = np.zeros(K, dtype=np.int64)
    for d in range(D):
        for k in range(K):
            for i in range(int(ndk[d, k])):
                if generator.random() < weight[k] / (weight[k] + i):
                    tables[k] += 1
    return tables


def sequential_allocation(tokens, doc_of, words, anchor_a, anchor_b, u, forced, a, beta,
                          vbeta, n_docs, n_words):
    """The split-merge move's deal, token by token in Python floats: (side (n,) int8, ln q).
    ``forced`` None draws each side from ``u``, else takes it."""
    nd = np.zeros((2, n_docs))
    nw = np.zeros((2, n_words))
    total = [1, 1]
    nd[0, doc_of[anchor_a]] += 1
    nw[0, words[anchor_a]] += 1
    nd[1, doc_of[anchor_b]] += 1
    nw[1, words[anchor_b]] += 1
    side = np.zeros(len(tokens), dtype=np.int8)
    logq = 0.0
    for t, pos in enumerate(tokens):
        d, w = doc_of[pos], words[pos]
        p0 = (nd[0, d] + a) * (nw[0, w] + beta) / (total[0] + vbeta)
        p1 = (nd[1, d] + a) * (nw[1, w] + beta) / (total[1] + vbeta)
        s = int(forced[t]) if forced is not None else int(u[t] * (p0 + p1) >= p0)
        logq += np.log((p1 if s else p0) / (p0 + p1))
        side[t] = s
        nd[s, d] += 1
        nw[s, w] += 1
        total[s] += 1
    return side, logq
