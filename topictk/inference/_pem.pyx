# cython: language_level=3
"""Tempered E-step of particle EM for LDA (docs/algorithms.md §10.3).

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
parallel (no randomness); the statistics are then recomputed from every document's final
Elogtheta and added in CSR entry order with the words split between threads by w mod P
(``topictk/_cy/estep.pxd``, shared with VB), so every number is independent of the thread count.
Equivalent to ``tests/reference/pem.py::e_step_tempered``.
"""
cimport cython
from cython.parallel cimport prange
from libc.math cimport exp, fabs, log
from libc.stdint cimport int32_t, int64_t
from libc.stdlib cimport free, malloc

from topictk._cy.estep cimport DocRow, EStepRun, alpha_term, run_e_step, set_outputs
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


cdef struct PEMModel:
    # what the tempered E-step of a document reads besides the document
    const double* W             # (V_b, K) exp(LW) (unused at T = 0)
    const double* LW            # (V_b, K) (ln phi - m_w) / T (T = 0: ln phi - m_w)
    const double* shift         # (V_b) m_w
    const double* alpha         # (K)
    const double* doc_weight    # (D_b) or NULL: the statistics of document d are scaled by it
    double alpha_term           # lnGamma(alpha.) - sum_k lnGamma(alpha_k)
    Py_ssize_t K
    double temperature
    double tol
    # per-thread work: elog, A, acc, direct, mu (K each)


cdef inline void _responsibility_pass(const PEMModel* pm, const DocRow* doc, const double* elog,
                                      const double* A, double m, double* acc, double* direct,
                                      double* mu) noexcept nogil:
    """sum_w n_dw mu_dwk for the current Elogtheta, split into acc (fast pairs: mu = A W / Z,
    so the sum is A_k acc_k) and direct (hard assignment and pairs done in log space)."""
    cdef Py_ssize_t j, k, kk, K = pm.K
    cdef double z, f
    cdef const double* w
    cdef bint fast
    for k in range(K):
        acc[k] = 0.0
        direct[k] = 0.0
    for j in range(doc.n_pairs):
        if pm.temperature <= 0.0:
            kk = _hard_topic(elog, pm.LW + doc.ids[j] * K, K)
            direct[kk] = direct[kk] + doc.cts[j]
            continue
        w = pm.W + doc.ids[j] * K
        z, fast = _pair(A, w, elog, m, pm.LW + doc.ids[j] * K, pm.temperature, K, mu)
        if fast:
            f = doc.cts[j] / z
            for k in range(K):
                acc[k] = acc[k] + f * w[k]
        else:
            for k in range(K):
                direct[k] = direct[k] + doc.cts[j] * mu[k]


cdef inline double _doc_bound(const PEMModel* pm, const DocRow* doc, const double* gamma,
                              const double* elog, const double* A, double m,
                              double* mu) noexcept nogil:
    """The particle's objective term l_d of the document (module docstring)."""
    cdef Py_ssize_t j, k, kk, K = pm.K
    cdef double z, l = 0.0, total = 0.0
    cdef bint fast
    cdef int32_t w
    for j in range(doc.n_pairs):
        w = doc.ids[j]
        if pm.temperature <= 0.0:
            kk = _hard_topic(elog, pm.LW + w * K, K)
            l += doc.cts[j] * (elog[kk] + pm.LW[w * K + kk] + pm.shift[w])
        else:
            z, fast = _pair(A, pm.W + w * K, elog, m, pm.LW + w * K, pm.temperature, K, mu)
            if fast:
                z = log(z)
            l += doc.cts[j] * (pm.temperature * z + pm.shift[w] + m)
    for k in range(K):
        l += (pm.alpha[k] - gamma[k]) * elog[k] + lngamma(gamma[k])
        total += gamma[k]
    return l + pm.alpha_term - lngamma(total)


cdef int _doc_estep(const void* model, const DocRow* doc, double* gamma, bint warm,
                    int max_iter, double* work, double* stage, double* bound) noexcept nogil:
    """Tempered E-step of one document (gamma in place), a
    :data:`topictk._cy.estep.DocEStep`; returns the number of gamma updates. ``bound`` (l_d)
    and ``stage`` (Elogtheta, K, for :func:`_doc_stats`) are for the final gamma; either may
    be NULL."""
    cdef const PEMModel* pm = <const PEMModel*> model
    cdef Py_ssize_t j, k, K = pm.K
    cdef double* elog = work
    cdef double* A = work + K
    cdef double* acc = work + 2 * K
    cdef double* direct = work + 3 * K
    cdef double* mu = work + 4 * K
    cdef double n_d = 0.0, g, delta, m
    cdef int it = 0
    cdef bint done = max_iter <= 0
    for j in range(doc.n_pairs):
        n_d += doc.cts[j]
    if not warm:
        for k in range(K):
            gamma[k] = pm.alpha[k] + n_d / K
    m = _theta(gamma, K, pm.temperature, elog, A)
    while not done:
        _responsibility_pass(pm, doc, elog, A, m, acc, direct, mu)
        delta = 0.0
        for k in range(K):
            if pm.temperature <= 0.0:
                g = pm.alpha[k] + direct[k]
            else:
                g = pm.alpha[k] + A[k] * acc[k] + direct[k]
            delta += fabs(g - gamma[k])
            gamma[k] = g
        delta /= K
        m = _theta(gamma, K, pm.temperature, elog, A)
        it += 1
        done = delta < pm.tol or it >= max_iter
    if bound != NULL:
        bound[0] = _doc_bound(pm, doc, gamma, elog, A, m, mu)
    if stage != NULL:
        for k in range(K):
            stage[k] = elog[k]
    return it


cdef void _doc_stats(const void* model, const DocRow* doc, const double* elog, Py_ssize_t p,
                     Py_ssize_t P, double* sstats, double* work) noexcept nogil:
    """The :data:`topictk._cy.estep.DocStats` of the tempered E-step: n_dw mu_dwk of the
    entries with w mod P = p, recomputed from the document's final Elogtheta (``elog``), times
    the document's weight when ``doc_weight`` is given (documents of weight 0 add nothing)."""
    cdef const PEMModel* pm = <const PEMModel*> model
    cdef Py_ssize_t j, k, kk, K = pm.K
    cdef double* A = work
    cdef double* mu = work + K
    cdef double m = -1e308, z, f, c
    cdef double weight = 1.0
    cdef bint fast
    cdef int32_t w
    if pm.doc_weight != NULL:
        weight = pm.doc_weight[doc.d]
        if weight == 0.0:
            return
    for k in range(K):
        if elog[k] > m:
            m = elog[k]
    if pm.temperature > 0.0:
        for k in range(K):
            A[k] = exp((elog[k] - m) / pm.temperature)
    for j in range(doc.n_pairs):
        w = doc.ids[j]
        if w % P != p:
            continue
        c = doc.cts[j]
        if pm.doc_weight != NULL:
            c = c * weight
        if pm.temperature <= 0.0:
            kk = _hard_topic(elog, pm.LW + w * K, K)
            sstats[w * K + kk] += c
            continue
        z, fast = _pair(A, pm.W + w * K, elog, m, pm.LW + w * K, pm.temperature, K, mu)
        if fast:
            f = c / z
            for k in range(K):
                sstats[w * K + k] += f * A[k] * pm.W[w * K + k]
        else:
            for k in range(K):
                sstats[w * K + k] += c * mu[k]


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
                    int threads,
                    object doc_weight=None):         # IN  (D_b) scales each document's sstats
    """The tempered E-step of §10.3 for every row of a CSR block (one particle).

    ``start``: 0 = cold (gamma_k = alpha_k + N_d/K), 1 = warm (from the given gamma), 2 = best:
    both are run and the document keeps the one with the higher l_d (warm on ties), as
    :func:`topictk.inference._vb.e_step` does; the statistics are reduced as there too
    (``topictk/_cy/estep.pxd``). ``doc_weight`` (float64, D_b) multiplies every document's
    statistics: particle EM's per-document particle weights (docs/algorithms.md §10.3); with
    ``max_iter`` 0 and a warm start this is the weighted statistics pass, equivalent to
    ``tests/reference/pem.py::weighted_statistics``. Otherwise equivalent to
    ``tests/reference/pem.py::e_step_tempered``.
    """
    cdef Py_ssize_t D = indptr.shape[0] - 1, K = gamma.shape[1]
    cdef Py_ssize_t V_b = logweights.shape[0], i
    cdef EStepRun run
    cdef PEMModel model
    cdef double* W = NULL
    cdef const double* LW
    cdef const double[::1] weight_v
    if not temperature >= 0.0:
        raise ValueError(f"temperature must be >= 0; got {temperature}")
    if gamma.shape[0] != D:
        raise ValueError(f"gamma has {gamma.shape[0]} rows for {D} documents")
    if logweights.shape[1] != K or alpha.shape[0] != K or shift.shape[0] != V_b:
        raise ValueError("logweights, shift, alpha and gamma disagree on K or the word count")
    run.D = D
    run.K = K
    run.start = start
    run.max_iter = max_iter
    run.threads = threads
    run.wave_doubles = 0
    run.work_doubles = 5 * K
    run.stage_per_entry = 0
    run.stage_per_doc = K
    set_outputs(&run, sstats, doc_bound, iterations, V_b)
    model.doc_weight = NULL
    if doc_weight is not None:
        weight_v = doc_weight
        if weight_v.shape[0] != D:
            raise ValueError("doc_weight must have one entry per document")
        if D > 0:
            model.doc_weight = &weight_v[0]
    if D == 0 or V_b == 0:
        return
    run.indptr = &indptr[0]
    run.indices = &indices[0] if indices.shape[0] > 0 else NULL
    run.counts = &counts[0] if counts.shape[0] > 0 else NULL
    run.gamma = &gamma[0, 0]
    LW = &logweights[0, 0]
    W = <double*> malloc(V_b * K * sizeof(double))
    if W == NULL:
        raise MemoryError()
    try:
        with nogil:
            for i in prange(V_b * K, schedule="static", num_threads=run.threads):
                W[i] = exp(LW[i]) if temperature > 0.0 else 0.0
        model.W = W
        model.LW = LW
        model.shift = &shift[0]
        model.alpha = &alpha[0]
        model.alpha_term = alpha_term(model.alpha, K)
        model.K = K
        model.temperature = temperature
        model.tol = tol
        run_e_step(&run, _doc_estep, _doc_stats, &model)
    finally:
        free(W)
