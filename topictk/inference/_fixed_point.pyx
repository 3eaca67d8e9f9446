# cython: language_level=3
"""Fixed-point fold-in of documents with the topics frozen (docs/algorithms.md §11.2).

theta-hat of each document is the fixed point of

    r_wk     = theta_k phi_wk / sum_j theta_j phi_wj          (every observed word w)
    theta_k <- (sum_w c_w r_wk + alpha_k) / (N_d + alpha_sum)

started from the uniform theta and repeated until max_k |theta_new - theta| < tol or
``max_iterations`` updates. It draws no random numbers and every document is folded in on its
own (no sum runs across documents), so theta-hat is the same at any thread count.
Equivalent to ``tests/reference/fixed_point.py::fold_in_theta``.
"""
cimport cython
from cython.parallel cimport parallel, prange, threadid
from libc.math cimport fabs
from libc.stdint cimport int32_t, int64_t, uint8_t
from libc.stdlib cimport free

from topictk._cy.alloc cimport checked_alloc as _alloc


cdef int _fold_in_doc(const int64_t* indptr, const int32_t* indices, const int32_t* counts,
                      const double* phi, const double* alpha, Py_ssize_t K, Py_ssize_t d,
                      double tol, int max_iterations, double* theta,
                      double* acc) noexcept nogil:
    """theta-hat of document d into ``theta`` (K); the number of updates made."""
    cdef Py_ssize_t k
    cdef int64_t j
    cdef const double* row
    cdef double alpha_sum = 0.0, n_tokens = 0.0, denom, mix, scale, new, delta
    cdef int it = 0
    for k in range(K):
        alpha_sum = alpha_sum + alpha[k]
        theta[k] = 1.0 / K
    for j in range(indptr[d], indptr[d + 1]):
        n_tokens = n_tokens + counts[j]
    denom = n_tokens + alpha_sum
    while it < max_iterations:
        it = it + 1
        for k in range(K):
            acc[k] = 0.0
        for j in range(indptr[d], indptr[d + 1]):
            row = phi + indices[j] * K
            mix = 0.0
            for k in range(K):
                mix = mix + theta[k] * row[k]
            if mix <= 0.0:
                continue            # a word no topic can emit adds nothing
            scale = counts[j] / mix
            for k in range(K):
                acc[k] = acc[k] + scale * theta[k] * row[k]
        delta = 0.0
        for k in range(K):
            new = (acc[k] + alpha[k]) / denom
            if fabs(new - theta[k]) > delta:
                delta = fabs(new - theta[k])
            theta[k] = new
        if delta < tol:
            break
    return it


def fold_in_theta(const int64_t[::1] indptr,     # IN  (D + 1) CSR offsets of observed words
                  const int32_t[::1] indices,    # IN  (M) word ids
                  const int32_t[::1] counts,     # IN  (M) their counts
                  const double[:, ::1] phi,      # IN  (V, K) word-major topics
                  const double[:, ::1] alpha,    # IN  (1 or D, K) document prior
                  const uint8_t[::1] active,     # IN  (D) 0 = skip the document
                  double tol, int max_iterations,
                  double[:, ::1] theta,          # OUT (D, K) theta-hat; skipped rows untouched
                  int32_t[::1] iterations,       # OUT (D) updates made; 0 for skipped rows
                  int threads):
    """Fixed-point fold-in of every active document (see the module docstring)."""
    cdef Py_ssize_t D = indptr.shape[0] - 1, K = phi.shape[1]
    cdef Py_ssize_t d
    cdef bint per_doc = alpha.shape[0] > 1
    cdef double* scratch = NULL
    cdef const int32_t* idx
    cdef const int32_t* cnt
    cdef int tid
    if (active.shape[0] != D or theta.shape[0] != D or theta.shape[1] != K
            or iterations.shape[0] != D or alpha.shape[1] != K
            or (alpha.shape[0] != 1 and alpha.shape[0] != D)
            or counts.shape[0] != indices.shape[0]):
        raise ValueError("documents, active, alpha, theta and iterations do not fit together")
    if max_iterations < 1:
        raise ValueError("max_iterations must be at least 1")
    if threads < 1:
        threads = 1
    if D == 0:
        return
    idx = &indices[0] if indices.shape[0] > 0 else NULL
    cnt = &counts[0] if counts.shape[0] > 0 else NULL
    try:
        scratch = <double*> _alloc(threads * K, sizeof(double))
        with nogil, parallel(num_threads=threads):
            tid = threadid()
            for d in prange(D, schedule="dynamic", chunksize=8):
                if active[d]:
                    iterations[d] = _fold_in_doc(
                        &indptr[0], idx, cnt, &phi[0, 0],
                        &alpha[d if per_doc else 0, 0], K, d, tol, max_iterations,
                        &theta[d, 0], scratch + tid * K)
                else:
                    iterations[d] = 0
    finally:
        free(scratch)
