# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The sequential allocation of the HDP's split-merge move (docs/algorithms.md §2.15): the
tokens of one topic (or of two) dealt between two sides, one after the other in the given
order, each with the probability of its predictive under the counts dealt so far. Its NumPy
twin is ``tests/reference/hdp.py``."""
import numpy as np

from libc.math cimport log
from libc.stdint cimport int8_t, int32_t, int64_t


def sequential_allocation(const int64_t[::1] tokens, const int32_t[::1] doc_of,
                          const int32_t[::1] words, int64_t anchor_a, int64_t anchor_b,
                          const double[::1] u, const int8_t[::1] forced, bint force,
                          double a, double beta, double vbeta, int n_docs, int n_words,
                          int8_t[::1] side):
    """Deal ``tokens`` (positions, in this order) between side 0 (with the token
    ``anchor_a``) and side 1 (with ``anchor_b``): token t of document d and word w goes to
    side s with probability p_s / (p_0 + p_1), p_s = (n_sd + a)(n_sw + beta) / (n_s + vbeta),
    the counts of the tokens dealt before it (the anchors first). Without ``force``, t goes
    to side 1 when ``u[t] >= p_0 / (p_0 + p_1)``; with it, to ``forced[t]`` (the probability
    of dealing an existing split). Writes ``side`` and returns ln q, the log probability of
    the deal."""
    cdef Py_ssize_t n = tokens.shape[0], t
    if u.shape[0] < (0 if force else n) or side.shape[0] < n or (force and forced.shape[0] < n):
        raise ValueError("u, forced and side need one entry per token")
    cdef int32_t[:, ::1] nd = np.zeros((2, n_docs), dtype=np.int32)
    cdef int32_t[:, ::1] nw = np.zeros((2, n_words), dtype=np.int32)
    cdef int64_t total[2]
    cdef double p0, p1, logq = 0.0
    cdef int64_t pos
    cdef int s, d, w
    nd[0, doc_of[anchor_a]] += 1
    nw[0, words[anchor_a]] += 1
    nd[1, doc_of[anchor_b]] += 1
    nw[1, words[anchor_b]] += 1
    total[0] = 1
    total[1] = 1
    with nogil:
        for t in range(n):
            pos = tokens[t]
            d = doc_of[pos]
            w = words[pos]
            p0 = (nd[0, d] + a) * (nw[0, w] + beta) / (total[0] + vbeta)
            p1 = (nd[1, d] + a) * (nw[1, w] + beta) / (total[1] + vbeta)
            if force:
                s = forced[t]
            else:
                s = 1 if u[t] * (p0 + p1) >= p0 else 0
            logq += log((p1 if s else p0) / (p0 + p1))
            side[t] = s
            nd[s, d] += 1
            nw[s, w] += 1
            total[s] += 1
    return logq
