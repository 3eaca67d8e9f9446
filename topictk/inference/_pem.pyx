# cython: language_level=3
"""Tempered E-step of particle EM for LDA (ALGORITHMS.md §10.3).

:func:`e_step_tempered` runs, for every document of a CSR block and one particle, the §3.2
coordinate ascent with the tempered responsibilities

    mu_dwk proportional to exp((Elogtheta_dk + ln phi_kw) / T),
    gamma_dk = alpha_k + sum_w n_dw mu_dwk.

The caller passes the per-word log weights LW_wk = (ln phi_wk - m_w) / T with
m_w = max_k ln phi_wk (T = 0: LW_wk = ln phi_wk - m_w). Shifted exponentials as in §3.2:
W = exp(LW) (computed once per call), A_k = exp((Elogtheta_k - M) / T) with M = max_j Elogtheta_j,
mu = A W / Z with Z_w = sum_k A_k W_wk. At small T both factors can underflow at different
topics (Z = 0); a pair whose Z falls below 1e-250 is then done in log space,
mu_k = exp(s_k - max s) / sum, s_k = (Elogtheta_k - M) / T + LW_wk (terms dropped by the fast path
are below 1e-58 relative). T = 0 is hard assignment to the arg-max topic (ties to the smallest k).
At T = 1 this is the E-step of :func:`topictk.inference._vb.e_step`; particle EM calls that kernel
at T = 1 (so one particle reproduces unsmoothed VB-EM exactly) and this one otherwise.

Per document it returns the particle's objective term (§10.3, at mu optimal for the final gamma)

    l_d = sum_w n_dw T logsumexp_k((Elogtheta_dk + ln phi_kw) / T)      (T > 0)
        = sum_w n_dw max_k (Elogtheta_dk + ln phi_kw)                     (T = 0)
        + sum_k (alpha_k - gamma_dk) Elogtheta_dk + lnG(alpha.) - sum_k lnG(alpha_k)
        + sum_k lnG(gamma_dk) - lnG(gamma_d.)

and, optionally, the sufficient statistics SS_wk += n_dw mu_dwk. Documents are processed in
parallel (no randomness); the statistics are added in CSR entry order with the words split
between threads by w mod P, so every number is independent of the thread count.
Equivalent to ``tests/reference/pem.py::e_step_tempered``.
"""
cimport cython
from cython.parallel cimport parallel, prange
from libc.math cimport exp, fabs, log
from libc.stdint cimport int32_t, int64_t
from libc.stdlib cimport free, malloc

from topictk._cy.special cimport digamma, lngamma

# below this Z a pair is recomputed in log space (see the module docstring)
cdef double TINY = 1e-250


cdef inline double _theta(const double* gamma, Py_ssize_t K, double temperature, double* elog,
                          double* A) noexcept nogil:
    """Elogtheta_k = psi(gamma_k) - psi(gamma.); A_k = exp((Elogtheta_k - M) / T) when T > 0;
    returns M = max_k Elogtheta_k."""
    cdef Py_ssize_t k
    cdef double total = 0.0, m = -1e308, p
    for k in range(K):
        total += gamma[k]
    p = digamma(total)
    for k in range(K):
        elog[k] = digamma(gamma[k]) - p
        if elog[k] > m:
            m = elog[k]
    if temperature > 0.0:
        for k in range(K):
            A[k] = exp((elog[k] - m) / temperature)
    return m


cdef inline Py_ssize_t _hard_topic(const double* elog, const double* lw,
                                   Py_ssize_t K) noexcept nogil:
    """arg max_k (Elogtheta_k + ln phi_kw - m_w), the smallest k on ties."""
    cdef Py_ssize_t k, best = 0
    cdef double v, top = elog[0] + lw[0]
    for k in range(1, K):
        v = elog[k] + lw[k]
        if v > top:
            top = v
            best = k
    return best


cdef inline (double, bint) _pair(const double* A, const double* w, const double* elog,
                                 double m, const double* lw, double temperature, Py_ssize_t K,
                                 double* mu) noexcept nogil:
    """Responsibilities of one pair (T > 0) -> (value, fast). Fast path: value
    Z = sum_k A_k W_k > TINY, ``mu`` untouched (mu = A W / Z). Otherwise ``mu`` is filled in log
    space and value = ln sum_k exp(s_k). (A returned pair, not a flag pointer: variables a prange
    body assigns through pointers would be shared between threads.)"""
    cdef Py_ssize_t k
    cdef double z = 0.0, smax = -1e308, total = 0.0
    for k in range(K):
        z = z + A[k] * w[k]
    if z > TINY:
        return z, True
    for k in range(K):
        mu[k] = (elog[k] - m) / temperature + lw[k]
        if mu[k] > smax:
            smax = mu[k]
    for k in range(K):
        mu[k] = exp(mu[k] - smax)
        total = total + mu[k]
    for k in range(K):
        mu[k] = mu[k] / total
    return smax + log(total), False


cdef int _doc_estep(Py_ssize_t n_pairs, const int32_t* ids, const int32_t* cts,
                    const double* W, const double* LW, const double* shift,
                    const double* alpha, double alpha_term, Py_ssize_t K, double temperature,
                    double* gamma, bint warm, double tol, int max_iter, double* elog,
                    double* A, double* acc, double* direct, double* mu,
                    double* bound) noexcept nogil:
    """Tempered E-step of one document (gamma in place); returns the number of gamma updates.
    ``bound`` (may be NULL) receives l_d; on return ``elog`` holds Elogtheta of the final
    gamma."""
    cdef Py_ssize_t j, k, kk
    cdef double n_d = 0.0, z, f, g, delta, m, l, total
    cdef const double* w
    cdef int it = 0
    cdef bint hard = temperature <= 0.0
    cdef bint done = max_iter <= 0
    cdef bint fast
    for j in range(n_pairs):
        n_d += cts[j]
    if not warm:
        for k in range(K):
            gamma[k] = alpha[k] + n_d / K
    m = _theta(gamma, K, temperature, elog, A)
    while not done:
        for k in range(K):
            acc[k] = 0.0
            direct[k] = 0.0
        for j in range(n_pairs):
            if hard:
                kk = _hard_topic(elog, LW + ids[j] * K, K)
                direct[kk] = direct[kk] + cts[j]
                continue
            w = W + ids[j] * K
            z, fast = _pair(A, w, elog, m, LW + ids[j] * K, temperature, K, mu)
            if fast:
                f = cts[j] / z
                for k in range(K):
                    acc[k] = acc[k] + f * w[k]
            else:
                for k in range(K):
                    direct[k] = direct[k] + cts[j] * mu[k]
        delta = 0.0
        for k in range(K):
            if hard:
                g = alpha[k] + direct[k]
            else:
                g = alpha[k] + A[k] * acc[k] + direct[k]
            delta += fabs(g - gamma[k])
            gamma[k] = g
        delta /= K
        m = _theta(gamma, K, temperature, elog, A)
        it += 1
        done = delta < tol or it >= max_iter
    if bound != NULL:
        l = 0.0
        for j in range(n_pairs):
            if hard:
                kk = _hard_topic(elog, LW + ids[j] * K, K)
                l += cts[j] * (elog[kk] + LW[ids[j] * K + kk] + shift[ids[j]])
            else:
                z, fast = _pair(A, W + ids[j] * K, elog, m, LW + ids[j] * K, temperature,
                                K, mu)
                if fast:
                    z = log(z)
                l += cts[j] * (temperature * z + shift[ids[j]] + m)
        total = 0.0
        for k in range(K):
            l += (alpha[k] - gamma[k]) * elog[k] + lngamma(gamma[k])
            total += gamma[k]
        bound[0] = l + alpha_term - lngamma(total)
    return it


def e_step_tempered(const int64_t[::1] indptr,       # IN  (D_b + 1) CSR row offsets
                    const int32_t[::1] indices,      # IN  (M_b) word ids (rows of ``logweights``)
                    const int32_t[::1] counts,       # IN  (M_b) n_dw >= 1
                    const double[:, ::1] logweights, # IN  (V_b, K) (ln phi - m_w)/T (T = 0: no /T)
                    const double[::1] shift,         # IN  (V_b) m_w = max_k ln phi_wk
                    const double[::1] alpha,         # IN  (K)
                    double[:, ::1] gamma,            # IN/OUT (D_b, K); read unless start is cold
                    double temperature,              # T >= 0
                    int start,                       # 0 cold, 1 warm, 2 best of both
                    double tol,
                    int max_iter,
                    object sstats,                   # OUT (V_b, K) += sum_d n_dw mu_dwk, or None
                    object doc_bound,                # OUT (D_b) l_d of every document, or None
                    object iterations,               # OUT (D_b) int32 gamma updates made, or None
                    int threads):
    """The tempered E-step of §10.3 for every row of a CSR block (one particle).

    ``start``: 0 = cold (gamma_k = alpha_k + N_d/K), 1 = warm (from the given gamma), 2 = best:
    both are run and the document keeps the one with the higher l_d (warm on ties), as
    :func:`topictk.inference._vb.e_step` does. Equivalent to
    ``tests/reference/pem.py::e_step_tempered``.
    """
    cdef Py_ssize_t D = indptr.shape[0] - 1, K = gamma.shape[1]
    cdef Py_ssize_t V_b = logweights.shape[0]
    cdef Py_ssize_t d, i, k, kk, p, P
    cdef int64_t e
    cdef int32_t w
    cdef double alpha_term = 0.0, alpha_sum = 0.0, z, f, m
    cdef bint hard = temperature <= 0.0
    cdef double[:, ::1] ss_v
    cdef double[::1] bound_v
    cdef int32_t[::1] iter_v
    cdef double* ss_ptr = NULL
    cdef double* bound_ptr = NULL
    cdef int32_t* iter_ptr = NULL
    cdef double* e_buf = NULL
    cdef double* W = NULL
    cdef const double* LW
    cdef double* elog
    cdef double* A
    cdef double* acc
    cdef double* direct
    cdef double* mu
    cdef double* g2
    cdef double l_warm, l_cold
    cdef int it
    cdef bint fast

    if not temperature >= 0.0:
        raise ValueError(f"temperature must be >= 0; got {temperature}")
    if gamma.shape[0] != D:
        raise ValueError(f"gamma has {gamma.shape[0]} rows for {D} documents")
    if logweights.shape[1] != K or alpha.shape[0] != K or shift.shape[0] != V_b:
        raise ValueError("logweights, shift, alpha and gamma disagree on K or the word count")
    if start < 0 or start > 2:
        raise ValueError("start must be 0 (cold), 1 (warm) or 2 (best)")
    if sstats is not None:
        ss_v = sstats
        if ss_v.shape[0] != V_b or ss_v.shape[1] != K:
            raise ValueError("sstats must be (V_b, K)")
        if V_b > 0:
            ss_ptr = &ss_v[0, 0]
    if doc_bound is not None:
        bound_v = doc_bound
        if bound_v.shape[0] != D:
            raise ValueError("doc_bound must have one entry per document")
        if D > 0:
            bound_ptr = &bound_v[0]
    if iterations is not None:
        iter_v = iterations
        if iter_v.shape[0] != D:
            raise ValueError("iterations must have one entry per document")
        if D > 0:
            iter_ptr = &iter_v[0]
    if D == 0 or V_b == 0:
        return
    for k in range(K):
        alpha_term -= lngamma(alpha[k])
        alpha_sum += alpha[k]
    alpha_term += lngamma(alpha_sum)
    if threads < 1:
        threads = 1
    P = threads
    LW = &logweights[0, 0]
    W = <double*> malloc(V_b * K * sizeof(double))
    if W == NULL:
        raise MemoryError()
    if ss_ptr != NULL:
        # Elogtheta of the final gamma of every document, for the statistics pass
        e_buf = <double*> malloc(D * K * sizeof(double))
        if e_buf == NULL:
            free(W)
            raise MemoryError()

    with nogil:
        for i in prange(V_b * K, schedule="static", num_threads=threads):
            W[i] = exp(LW[i]) if not hard else 0.0
        with parallel(num_threads=threads):
            elog = <double*> malloc(K * sizeof(double))
            A = <double*> malloc(K * sizeof(double))
            acc = <double*> malloc(K * sizeof(double))
            direct = <double*> malloc(K * sizeof(double))
            mu = <double*> malloc(K * sizeof(double))
            g2 = <double*> malloc(K * sizeof(double))
            for d in prange(D, schedule="dynamic", chunksize=4):
                if start == 2:
                    l_cold = 0.0
                    l_warm = 0.0
                    it = _doc_estep(indptr[d + 1] - indptr[d], &indices[indptr[d]],
                                    &counts[indptr[d]], W, LW, &shift[0], &alpha[0], alpha_term,
                                    K, temperature, g2, False, tol, max_iter, elog, A, acc,
                                    direct, mu, &l_cold)
                    it = it + _doc_estep(indptr[d + 1] - indptr[d], &indices[indptr[d]],
                                         &counts[indptr[d]], W, LW, &shift[0], &alpha[0],
                                         alpha_term, K, temperature, &gamma[d, 0], True, tol,
                                         max_iter, elog, A, acc, direct, mu, &l_warm)
                    if l_cold > l_warm:
                        for k in range(K):
                            gamma[d, k] = g2[k]
                    # no update: the final quantities of the kept gamma
                    _doc_estep(indptr[d + 1] - indptr[d], &indices[indptr[d]],
                               &counts[indptr[d]], W, LW, &shift[0], &alpha[0], alpha_term, K,
                               temperature, &gamma[d, 0], True, tol, 0, elog, A, acc, direct,
                               mu, (bound_ptr + d) if bound_ptr != NULL else NULL)
                else:
                    it = _doc_estep(indptr[d + 1] - indptr[d], &indices[indptr[d]],
                                    &counts[indptr[d]], W, LW, &shift[0], &alpha[0], alpha_term,
                                    K, temperature, &gamma[d, 0], start == 1, tol, max_iter,
                                    elog, A, acc, direct, mu,
                                    (bound_ptr + d) if bound_ptr != NULL else NULL)
                if e_buf != NULL:
                    for k in range(K):
                        e_buf[d * K + k] = elog[k]
                if iter_ptr != NULL:
                    iter_ptr[d] = it
            free(elog); free(A); free(acc); free(direct); free(mu); free(g2)
        if ss_ptr != NULL:
            # ordered reduction: every (w, k) receives its terms in entry (document) order
            with parallel(num_threads=threads):
                A = <double*> malloc(K * sizeof(double))
                mu = <double*> malloc(K * sizeof(double))
                for p in prange(P, schedule="static", chunksize=1):
                    for d in range(D):
                        if indptr[d + 1] == indptr[d]:
                            continue
                        m = -1e308
                        for k in range(K):
                            if e_buf[d * K + k] > m:
                                m = e_buf[d * K + k]
                        if not hard:
                            for k in range(K):
                                A[k] = exp((e_buf[d * K + k] - m) / temperature)
                        for e in range(indptr[d], indptr[d + 1]):
                            w = indices[e]
                            if w % P != p:
                                continue
                            if hard:
                                kk = _hard_topic(e_buf + d * K, LW + w * K, K)
                                ss_ptr[w * K + kk] += counts[e]
                                continue
                            z, fast = _pair(A, W + w * K, e_buf + d * K, m, LW + w * K,
                                            temperature, K, mu)
                            if fast:
                                f = counts[e] / z
                                for k in range(K):
                                    ss_ptr[w * K + k] += f * A[k] * W[w * K + k]
                            else:
                                for k in range(K):
                                    ss_ptr[w * K + k] += counts[e] * mu[k]
                free(A); free(mu)
    free(W)
    if e_buf != NULL:
        free(e_buf)
