# cython: language_level=3
"""Kernels of DMR stochastic EM (docs/algorithms.md §9).

:func:`polya_objective` evaluates the Polya log likelihood of every document and its gradient in
nu (§9.1) in one pass over the documents, from the features in sparse rows (L-BFGS calls it once
per function evaluation). :func:`polya_objective_grouped` gives the same sums when documents share
feature rows (categorical metadata), from histograms of the counts of each row's documents.

The sweeps themselves are :func:`topictk.inference.gibbs._gibbs.gibbs_sweep` with a (D, K) alpha:
SparseLDA with alpha_k replaced by alpha_dk (the default) or the dense sampler of §9.2
(``inference.sparse: false``), AD-LDA chunks for threads in both.
"""
cimport cython
from cython.parallel cimport prange
from libc.stdint cimport int32_t, int64_t

from libc.math cimport exp, log

from topictk._cy.special cimport digamma, lngamma


cdef inline (double, double) _polya_terms(double a, int32_t n) noexcept nogil:
    """(lnG(a + n) - lnG(a), psi(a + n) - psi(a)) for a count n >= 0: as sums of ln(a + j)
    and 1/(a + j) over j < n for small n (no cancellation, no special function), else from
    lnGamma and psi. (A returned pair, not pointers: variables a prange body assigns through
    pointers would be shared between threads.)"""
    cdef int32_t j
    cdef double s = 0.0, t = 0.0
    if n <= 16:
        for j in range(n):
            s = s + log(a + j)
            t = t + 1.0 / (a + j)
        return s, t
    return lngamma(a + n) - lngamma(a), digamma(a + n) - digamma(a)


cdef inline double _row_alpha(const int64_t[::1] x_ptr, const int32_t[::1] x_idx,
                              const double[::1] x_val, const double[:, ::1] nu_t, Py_ssize_t row,
                              double eta_min, double eta_max, double* a) noexcept nogil:
    """a[k] = exp(clip(x_row^T nu_k, eta_min, eta_max)) for the sparse feature row ``row``;
    returns sum_k a[k]."""
    cdef Py_ssize_t K = nu_t.shape[1], j, k, f
    cdef double x, total = 0.0
    for k in range(K):
        a[k] = 0.0
    for j in range(x_ptr[row], x_ptr[row + 1]):
        x = x_val[j]
        f = x_idx[j]
        for k in range(K):
            a[k] = a[k] + x * nu_t[f, k]
    for k in range(K):
        if a[k] < eta_min:
            a[k] = eta_min
        elif a[k] > eta_max:
            a[k] = eta_max
        a[k] = exp(a[k])
        total = total + a[k]
    return total


def polya_objective(const int64_t[::1] x_ptr,     # IN  (D + 1) CSR rows of the features
                    const int32_t[::1] x_idx,     # IN  (nnz) feature index f
                    const double[::1] x_val,      # IN  (nnz) x_df
                    const double[:, ::1] nu_t,    # IN  (F, K) nu transposed
                    const int32_t[:, ::1] ndk,    # IN  (D, K) topic counts
                    const int64_t[::1] lengths,   # IN  (D) N_d
                    double eta_min, double eta_max,
                    double[::1] value,            # OUT (D) ln p(z_d | nu)
                    double[:, :, ::1] grad_t,     # OUT (B, F, K) per-block sum_d x_df g_dk
                    double[:, ::1] scratch,       # TMP (B, 2K)
                    int64_t block_docs,           # documents per block of grad_t
                    int threads):
    """The Polya log likelihood of every document and, per block of ``block_docs`` documents,
    the gradient sum_d x_df g_dk (transposed, (F, K)), with

    eta_dk = clip(x_d^T nu_k, eta_min, eta_max),  alpha_dk = exp(eta_dk),
    ln p(z_d | nu) = lnG(alpha_d.) - lnG(alpha_d. + N_d)
                     + sum_k [lnG(alpha_dk + n_dk) - lnG(alpha_dk)]
    g_dk = alpha_dk [psi(alpha_d.) - psi(alpha_d. + N_d) + psi(alpha_dk + n_dk) - psi(alpha_dk)]

    O(K nnz(x_d)) per document for eta and the gradient, special functions only where
    n_dk > 0. Blocks are fixed by ``block_docs`` and summed by the caller in block order, so
    the result does not depend on ``threads``. Equivalent to ``tests/reference/dmr.py::
    log_likelihood`` / ``gradient``.
    """
    cdef Py_ssize_t D = ndk.shape[0], K = ndk.shape[1], F = nu_t.shape[0]
    cdef Py_ssize_t B = grad_t.shape[0], b, d, k, j, f, d_end
    cdef double total, v, lg, dg, c, x
    cdef double* a
    cdef double* g
    if (nu_t.shape[1] != K or lengths.shape[0] != D or value.shape[0] != D
            or x_ptr.shape[0] != D + 1 or grad_t.shape[1] != F or grad_t.shape[2] != K):
        raise ValueError("features, nu, ndk, lengths, value and grad disagree on D, F or K")
    if block_docs < 1 or B != (D + block_docs - 1) // block_docs:
        raise ValueError("grad_t must have one block per block_docs documents")
    if scratch.shape[0] != B or scratch.shape[1] != 2 * K:
        raise ValueError("scratch must be (B, 2K)")
    if B == 0 or K == 0:
        return
    if threads < 1:
        threads = 1
    with nogil:
        for b in prange(B, schedule="dynamic", num_threads=threads):
            a = &scratch[b, 0]
            g = &scratch[b, K]
            for f in range(F):
                for k in range(K):
                    grad_t[b, f, k] = 0.0
            d_end = (b + 1) * block_docs
            if d_end > D:
                d_end = D
            for d in range(b * block_docs, d_end):
                total = _row_alpha(x_ptr, x_idx, x_val, nu_t, d, eta_min, eta_max, a)
                v = lngamma(total) - lngamma(total + lengths[d])
                c = digamma(total) - digamma(total + lengths[d])
                for k in range(K):
                    lg, dg = _polya_terms(a[k], ndk[d, k])
                    v = v + lg
                    g[k] = a[k] * (c + dg)
                value[d] = v
                for j in range(x_ptr[d], x_ptr[d + 1]):
                    x = x_val[j]
                    f = x_idx[j]
                    for k in range(K):
                        grad_t[b, f, k] = grad_t[b, f, k] + x * g[k]


def polya_objective_grouped(const int64_t[::1] x_ptr,     # IN  (G + 1) CSR rows of the groups
                            const int32_t[::1] x_idx,     # IN  (nnz) feature index f
                            const double[::1] x_val,      # IN  (nnz) x_gf
                            const double[:, ::1] nu_t,    # IN  (F, K) nu transposed
                            const int64_t[::1] cell_ptr,  # IN  (G K + 1) entries per (g, k)
                            const int32_t[::1] cell_n,    # IN  distinct n_dk > 0 of the cell
                            const double[::1] cell_docs,  # IN  documents with that n_dk
                            const int64_t[::1] len_ptr,   # IN  (G + 1) entries per group
                            const int32_t[::1] len_n,     # IN  distinct N_d > 0 of the group
                            const double[::1] len_docs,   # IN  documents with that N_d
                            double eta_min, double eta_max,
                            double[:, ::1] grad_t,        # OUT (F, K) sum_d x_df g_dk
                            double[::1] scratch):         # TMP (2K)
    """The Polya log likelihood summed over documents, and its gradient, for documents that
    share their feature rows: the G distinct rows are the groups, and each group's documents
    enter only through histograms, the number of documents with each topic count n_dk > 0 per
    (group, topic) cell and with each length N_d > 0 per group. Every document of a group has
    the same alpha_g, so with c(n) documents at count n

    sum_{d in g} [lnG(alpha_gk + n_dk) - lnG(alpha_gk)]
        = sum_n c(n) [lnG(alpha_gk + n) - lnG(alpha_gk)],

    and the same for psi and for the length terms in alpha_g. (terms of n = 0 and of empty
    documents vanish). The value and gradient are those of :func:`polya_objective` summed over the
    documents, in O(cells + distinct counts) instead of O(sum_d K) per evaluation; with one-hot
    metadata G is the number of distinct metadata values. One thread, a fixed order: the result
    is a function of the histograms alone.
    """
    cdef Py_ssize_t G = x_ptr.shape[0] - 1, K = nu_t.shape[1], F = nu_t.shape[0]
    cdef Py_ssize_t g, k, j, f
    cdef double total, v = 0.0, c, m, x, lg, dg, s
    cdef double* a = &scratch[0]
    cdef double* t = &scratch[K]
    if (cell_ptr.shape[0] != G * K + 1 or len_ptr.shape[0] != G + 1
            or grad_t.shape[0] != F or grad_t.shape[1] != K or scratch.shape[0] != 2 * K):
        raise ValueError("groups, nu, histograms, grad and scratch disagree on G, F or K")
    if cell_n.shape[0] != cell_docs.shape[0] or len_n.shape[0] != len_docs.shape[0]:
        raise ValueError("histogram values and document counts differ in length")
    with nogil:
        for f in range(F):
            for k in range(K):
                grad_t[f, k] = 0.0
        for g in range(G):
            total = _row_alpha(x_ptr, x_idx, x_val, nu_t, g, eta_min, eta_max, a)
            # document terms: sum over the group's lengths
            m = 0.0
            lg = 0.0
            dg = 0.0
            for j in range(len_ptr[g], len_ptr[g + 1]):
                m = m + len_docs[j]
                lg = lg + len_docs[j] * lngamma(total + len_n[j])
                dg = dg + len_docs[j] * digamma(total + len_n[j])
            v = v + (m * lngamma(total) - lg)
            c = m * digamma(total) - dg
            # topic terms: sum over each cell's counts
            for k in range(K):
                s = 0.0
                for j in range(cell_ptr[g * K + k], cell_ptr[g * K + k + 1]):
                    lg, dg = _polya_terms(a[k], cell_n[j])
                    v = v + cell_docs[j] * lg
                    s = s + cell_docs[j] * dg
                t[k] = a[k] * (c + s)
            for j in range(x_ptr[g], x_ptr[g + 1]):
                x = x_val[j]
                f = x_idx[j]
                for k in range(K):
                    grad_t[f, k] = grad_t[f, k] + x * t[k]
    return v
