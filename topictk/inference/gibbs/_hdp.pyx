# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The HDP's kernels (docs/algorithms.md §2.15): the sequential allocation of its split-merge
move (the tokens of one topic, or of two, dealt between two sides, one after the other in the
given order, each with the probability of its predictive under the counts dealt so far), and
the table draw by the Chinese restaurant table distribution, one uniform per customer. Their
NumPy twins are in ``tests/reference/hdp.py``."""
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


cdef inline int64_t _tables_of(double a, int32_t n, const double* u) noexcept nogil:
    """The tables of n >= 1 customers of a topic in a document: customer i opens one when
    ``u[i] < a / (a + i)``. The first always does when a > 0 (a / a is 1 and u < 1), which
    saves its division."""
    cdef int64_t tables = 0
    cdef int32_t i = 0
    if a > 0.0:
        tables = 1
        i = 1
    while i < n:
        if u[i] < a / (a + <double>i):
            tables += 1
        i += 1
    return tables


def crt_dense_block(const int32_t[:, ::1] rows, const double[::1] weight, const double[::1] u,
                    int64_t[::1] tables):
    """The tables of one block of documents' counts ``rows`` (B, K) added to ``tables`` (K):
    customer i (0-based) of topic k in a row opens a table when ``u < a_k / (a_k + i)``,
    a_k = ``weight[k]``, one entry of ``u`` per customer in row-major (row, topic) order and
    i ascending (the Chinese restaurant table distribution, docs/algorithms.md §2.15)."""
    cdef Py_ssize_t B = rows.shape[0], K = rows.shape[1], d, k, t = 0, m = u.shape[0]
    cdef int32_t n
    cdef bint short = False
    if weight.shape[0] != K or tables.shape[0] != K:
        raise ValueError("rows, weight and tables need one entry per topic")
    with nogil:
        for d in range(B):
            for k in range(K):
                n = rows[d, k]
                if n <= 0:
                    continue
                if t + n > m:
                    short = True
                    break
                tables[k] += _tables_of(weight[k], n, &u[t])
                t += n
            if short:
                break
    if short or t != m:
        raise ValueError("u needs one entry per customer of the block")


def crt_rows_block(const int32_t[::1] topic, const int32_t[::1] count,
                   const double[::1] weight, const double[::1] u, int64_t[::1] tables):
    """:func:`crt_dense_block` of a block's non-zero counts ``count`` at topics ``topic``,
    in row-major order (CSR rows, topics ascending in a row): the same customers in the same
    order."""
    cdef Py_ssize_t n_entries = topic.shape[0], K = weight.shape[0], e, t = 0, m = u.shape[0]
    cdef int32_t n, k
    cdef bint bad = False
    if count.shape[0] != n_entries or tables.shape[0] != K:
        raise ValueError("topic and count, weight and tables do not fit together")
    with nogil:
        for e in range(n_entries):
            k = topic[e]
            n = count[e]
            if k < 0 or k >= K or t + n > m:
                bad = True
                break
            tables[k] += _tables_of(weight[k], n, &u[t]) if n > 0 else 0
            t += n
    if bad or t != m:
        raise ValueError("a topic outside the weights, or u not one entry per customer")
