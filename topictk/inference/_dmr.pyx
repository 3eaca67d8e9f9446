# cython: language_level=3
"""Kernels of DMR stochastic EM (ALGORITHMS.md §9).

:func:`polya_terms` evaluates the Polya log likelihood of every document and the gradient
factors g_dk of §9.1 for the nu update (L-BFGS calls it once per function evaluation).

The sweeps themselves are :func:`topictk.inference._gibbs.gibbs_sweep` with a (D, K) alpha: the
dense sampler of §9.2 (the default) or SparseLDA with alpha_k replaced by alpha_dk
(``inference.sparse: true``), AD-LDA chunks for threads in both.
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


def polya_terms(const double[:, ::1] eta,      # IN  (D, K) x_d^T nu_k
                const int32_t[:, ::1] ndk,     # IN  (D, K) topic counts
                const int64_t[::1] lengths,    # IN  (D) N_d
                double[::1] value,             # OUT (D) ln p(z_d | nu)
                object g,                      # OUT (D, K) g_dk, or None
                int threads):
    """The Polya log likelihood of every document and the gradient factors of §9.1:

    ln p(z_d | nu) = lnG(alpha_d.) - lnG(alpha_d. + N_d)
                     + sum_k [lnG(alpha_dk + n_dk) - lnG(alpha_dk)]
    g_dk = alpha_dk [psi(alpha_d.) - psi(alpha_d. + N_d) + psi(alpha_dk + n_dk) - psi(alpha_dk)]

    with alpha_dk = exp(eta_dk) (eta clipped to [-300, 300] by the caller). Documents are
    independent, so OpenMP over documents changes no number. Equivalent to
    ``tests/reference/dmr.py::log_likelihood`` / ``gradient`` (per document).
    """
    cdef Py_ssize_t D = eta.shape[0], K = eta.shape[1], d, k
    cdef double[:, ::1] g_v
    cdef double* g_ptr = NULL
    cdef double total, v, lg, dg, c, a
    if ndk.shape[0] != D or ndk.shape[1] != K or lengths.shape[0] != D or value.shape[0] != D:
        raise ValueError("eta, ndk, lengths and value disagree on D or K")
    if g is not None:
        g_v = g
        if g_v.shape[0] != D or g_v.shape[1] != K:
            raise ValueError("g must be (D, K)")
        if D > 0 and K > 0:
            g_ptr = &g_v[0, 0]
    if threads < 1:
        threads = 1
    with nogil:
        for d in prange(D, schedule="static", num_threads=threads):
            total = 0.0
            for k in range(K):
                total = total + exp(eta[d, k])
            v = lngamma(total) - lngamma(total + lengths[d])
            c = digamma(total) - digamma(total + lengths[d])
            for k in range(K):
                a = exp(eta[d, k])
                lg, dg = _polya_terms(a, ndk[d, k])
                v = v + lg
                if g_ptr != NULL:
                    g_ptr[d * K + k] = a * (c + dg)
            value[d] = v
