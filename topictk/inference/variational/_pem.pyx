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
At T = 1 this is the E-step of :func:`topictk.inference.variational._vb.e_step`; particle EM calls that kernel
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

:func:`weighted_statistics` is the M-step's statistics pass of every particle at once,
SS_wk += sum_p sum_d omega_dp n_dw mu_pdwk with mu from the particles' final gamma and the Z
each E-step leaves per entry (``pair_z``): SS = W * R with R_wk = sum omega n_dw A_k / Z, K
multiply-adds per entry. The terms reach every (w, k) particle by particle, documents in order.
Equivalent to ``tests/reference/pem.py::weighted_statistics``.
"""
cimport cython
from cython.parallel cimport prange
from libc.math cimport exp, fabs, log
from libc.stdint cimport int32_t, int64_t
from libc.stdlib cimport free, malloc

from topictk._cy.alloc cimport checked_alloc
from topictk._cy.estep cimport (WAVE_DOUBLES, DocRow, EStepRun, alpha_term, bind_block,
                                expelog_theta, run_e_step, set_outputs)
from topictk._cy.special cimport lngamma
from topictk._cy.views cimport bind_matrix

# below this Z a pair is recomputed in log space (see the module docstring)
cdef double TINY = 1e-250


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
    """The particle's objective term l_d of the document (module docstring); ``doc.zout``
    (unless NULL) receives each entry's Z = sum_k A_k W_wk, or 0 where the entry is done in log
    space or T = 0 (Z not usable)."""
    cdef Py_ssize_t j, k, kk, K = pm.K
    cdef double z, l = 0.0, total = 0.0
    cdef bint fast
    cdef int32_t w
    for j in range(doc.n_pairs):
        w = doc.ids[j]
        if pm.temperature <= 0.0:
            kk = _hard_topic(elog, pm.LW + w * K, K)
            l += doc.cts[j] * (elog[kk] + pm.LW[w * K + kk] + pm.shift[w])
            if doc.zout != NULL:
                doc.zout[j] = 0.0
        else:
            z, fast = _pair(A, pm.W + w * K, elog, m, pm.LW + w * K, pm.temperature, K, mu)
            if doc.zout != NULL:
                doc.zout[j] = z if fast else 0.0
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
    :data:`topictk._cy.estep.DocEStep`; returns the number of gamma updates. ``bound`` (l_d),
    ``stage`` (Elogtheta, K, for :func:`_doc_stats`), ``doc.zout`` (see :func:`_doc_bound`) and
    ``doc.aout`` (A; 0 at T = 0) are for the final gamma; any of them may be NULL."""
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
    m = expelog_theta(gamma, K, pm.temperature, elog, A)
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
        m = expelog_theta(gamma, K, pm.temperature, elog, A)
        it += 1
        done = delta < pm.tol or it >= max_iter
    if bound != NULL:
        bound[0] = _doc_bound(pm, doc, gamma, elog, A, m, mu)
    elif doc.zout != NULL:
        _doc_bound(pm, doc, gamma, elog, A, m, mu)
    if doc.aout != NULL:
        for k in range(K):
            doc.aout[k] = A[k] if pm.temperature > 0.0 else 0.0
    if stage != NULL:
        for k in range(K):
            stage[k] = elog[k]
    return it


cdef void _doc_stats(const void* model, const DocRow* doc, const double* elog, Py_ssize_t p,
                     Py_ssize_t P, double* sstats, double* work) noexcept nogil:
    """The :data:`topictk._cy.estep.DocStats` of the tempered E-step: n_dw mu_dwk of the
    entries with w mod P = p, recomputed from the document's final Elogtheta (``elog``)."""
    cdef const PEMModel* pm = <const PEMModel*> model
    cdef Py_ssize_t j, k, kk, K = pm.K
    cdef double* A = work
    cdef double* mu = work + K
    cdef double m = -1e308, z, f, c
    cdef bint fast
    cdef int32_t w
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
                    object pair_z=None,              # OUT (M_b) every entry's Z, or None
                    object doc_a=None):              # OUT (D_b, K) every document's A, or None
    """The tempered E-step of §10.3 for every row of a CSR block (one particle).

    ``start``: 0 = cold (gamma_k = alpha_k + N_d/K), 1 = warm (from the given gamma), 2 = best:
    both are run and the document keeps the one with the higher l_d (warm on ties), as
    :func:`topictk.inference.variational._vb.e_step` does; the statistics are reduced as there too
    (``topictk/_cy/estep.pxd``). ``pair_z`` receives every entry's Z = sum_k A_dk W_wk for its
    document's final gamma, 0 where Z is not usable (the entry done in log space, or T = 0);
    ``doc_a`` every document's A_k = exp((Elogtheta_k - max) / T) (0 at T = 0).
    Equivalent to ``tests/reference/pem.py::e_step_tempered``.
    """
    cdef Py_ssize_t D = indptr.shape[0] - 1, K = gamma.shape[1]
    cdef Py_ssize_t V_b = logweights.shape[0], i
    cdef EStepRun run
    cdef PEMModel model
    cdef double* W = NULL
    cdef const double* LW
    if not temperature >= 0.0:
        raise ValueError(f"temperature must be >= 0; got {temperature}")
    bind_block(&run, indptr, indices, counts, gamma, start, max_iter, threads)
    if logweights.shape[1] != K or alpha.shape[0] != K or shift.shape[0] != V_b:
        raise ValueError("logweights, shift, alpha and gamma disagree on K or the word count")
    run.wave_doubles = 0
    run.work_doubles = 5 * K
    run.stage_per_entry = 0
    run.stage_per_doc = K
    set_outputs(&run, sstats, doc_bound, iterations, V_b, pair_z, indices.shape[0],
                doc_a)
    if D == 0 or V_b == 0:
        return
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


# ------------------------------------------------------------------ the weighted statistics
cdef enum:
    AHEAD = 8                   # entries ahead whose rows of R are prefetched

cdef extern from *:
    void __builtin_prefetch(const void* addr) nogil


cdef inline void _prefetch_row(const double* row, Py_ssize_t K) noexcept nogil:
    """Ask for the cache lines of one row of K doubles (a hint: no effect on any number)."""
    cdef Py_ssize_t k = 0
    while k < K:
        __builtin_prefetch(row + k)
        k += 8
    __builtin_prefetch(row + K - 1)


cdef struct WeightedPass:
    # the omega-weighted statistics pass of every particle over a CSR block (§10.3)
    const int64_t* indptr       # (D + 1)
    const int32_t* indices      # (M)
    const int32_t* counts       # (M)
    const double* gamma         # (P, D, K) every particle's final gamma
    const double* omega         # (D, P) every document's particle weights
    const double* pair_z        # (P, M) every particle's Z of every entry (0: not usable)
    const double* doc_a         # (P, D, K) every particle's A of every document, or NULL
    const double* W             # (V_b, K) the weights Z was summed with (unused at T = 0)
    const double* LW            # (V_b, K) as in PEMModel
    double* R                   # (V_b, K) sum of omega n_dw A_k / Z over the fast entries
    double* sstats              # (V_b, K) OUT
    Py_ssize_t P
    Py_ssize_t D
    Py_ssize_t M
    Py_ssize_t K
    double temperature
    Py_ssize_t stage_doubles    # per item i = p D + d: Elogtheta (K), A (K), M


cdef inline void _slow_pair(const WeightedPass* wp, const double* stage, int32_t w, double c,
                            double* mu) noexcept nogil:
    """SS_w += c mu_w of an entry whose Z the E-step could not use: recomputed from the item's
    ``stage`` (Elogtheta, A, M) as :func:`_pair` does (in log space when Z underflows)."""
    cdef Py_ssize_t k, K = wp.K
    cdef const double* A = stage + K
    cdef const double* wrow = wp.W + w * K
    cdef double* out = wp.sstats + w * K
    cdef double z, f
    cdef bint fast
    z, fast = _pair(A, wrow, stage, stage[2 * K], wp.LW + w * K, wp.temperature, K, mu)
    if fast:
        f = c / z
        for k in range(K):
            out[k] += f * A[k] * wrow[k]
    else:
        for k in range(K):
            out[k] += c * mu[k]


cdef inline void _weighted_item(const WeightedPass* wp, Py_ssize_t i, double* stage,
                                Py_ssize_t part, Py_ssize_t parts, double* mu) noexcept nogil:
    """omega_dp n_dw A_pdk / Z_pdw of item i = p D + d into R (T = 0: the arg-max topic's
    count into SS) for the words with w mod parts = part, in entry order (documents of weight
    0 add nothing). ``stage``: the item's Elogtheta, A and M, or with ``doc_a`` this thread's
    scratch for them, filled only if an entry needs them."""
    cdef Py_ssize_t p = i // wp.D, d = i - p * wp.D, K = wp.K, j, k
    cdef double weight = wp.omega[d * wp.P + p], c, z, f
    cdef bint given = wp.doc_a != NULL and wp.temperature > 0.0, staged = not given
    cdef const double* A = (wp.doc_a + i * K) if given else (stage + K)
    cdef const double* zs = wp.pair_z + p * wp.M
    cdef double* row
    cdef int32_t w
    if weight == 0.0:
        return
    for j in range(wp.indptr[d], wp.indptr[d + 1]):
        if j + AHEAD < wp.indptr[d + 1]:
            _prefetch_row(wp.R + wp.indices[j + AHEAD] * K, K)
        w = wp.indices[j]
        if parts > 1 and w % parts != part:
            continue
        c = wp.counts[j]
        c = c * weight
        if wp.temperature <= 0.0:
            wp.sstats[w * K + _hard_topic(stage, wp.LW + w * K, K)] += c
            continue
        z = zs[j]
        if z > TINY:
            f = c / z
            row = wp.R + w * K
            for k in range(K):
                row[k] += f * A[k]
        else:
            if not staged:
                stage[2 * K] = expelog_theta(wp.gamma + i * K, K, wp.temperature, stage,
                                             stage + K)
                staged = True
            _slow_pair(wp, stage, w, c, mu)


cdef void _weighted_wave(const WeightedPass* wp, Py_ssize_t i0, Py_ssize_t i1, double* stages,
                         double* mus, int threads) noexcept nogil:
    """Items [i0, i1): their Elogtheta, A and M in parallel (unless the E-steps gave A), then
    their terms, the words split between threads by w mod threads, each thread taking the
    items in order. ``mus``: 3 K + 1 doubles per thread."""
    cdef Py_ssize_t i, t, K = wp.K, S = wp.stage_doubles
    cdef double* st
    cdef bint given = wp.doc_a != NULL and wp.temperature > 0.0
    if not given:
        for i in prange(i0, i1, schedule="static", num_threads=threads):
            st = stages + (i - i0) * S
            st[2 * K] = expelog_theta(wp.gamma + i * K, K, wp.temperature, st, st + K)
    for t in prange(threads, schedule="static", chunksize=1, num_threads=threads):
        for i in range(i0, i1):
            _weighted_item(wp, i, (mus + t * (3 * K + 1) + K) if given
                           else (stages + (i - i0) * S), t, threads, mus + t * (3 * K + 1))


def weighted_statistics(const int64_t[::1] indptr,       # IN  (D_b + 1) CSR row offsets
                        const int32_t[::1] indices,      # IN  (M_b) word ids
                        const int32_t[::1] counts,       # IN  (M_b) n_dw >= 1
                        const double[:, ::1] logweights, # IN  (V_b, K) as for e_step_tempered
                        const double[:, :, ::1] gamma,   # IN  (P, D_b, K) final gammas
                        const double[:, ::1] omega,      # IN  (D_b, P) particle weights
                        const double[:, ::1] pair_z,     # IN  (P, M_b) the E-steps' pair_z
                        double temperature,              # T >= 0
                        double[:, ::1] sstats,           # OUT (V_b, K) += the statistics
                        int threads,
                        Py_ssize_t wave_items=0,         # items staged at once (0 = default)
                        object expweights=None,          # IN  (V_b, K) W of the E-steps, or None
                        object doc_a=None):              # IN  (P, D_b, K) the E-steps' doc_a
    """The omega-weighted statistics of every particle (docs/algorithms.md §10.3):
    SS_wk += sum_p sum_d omega_dp n_dw mu_pdwk, mu from each particle's final gamma, no gamma
    update.

    With mu_pdwk = A_pdk W_wk / Z_pdw and Z_pdw the E-step's own (``pair_z``, from
    :func:`e_step_tempered` or :func:`topictk.inference.variational._vb.e_step` of the same gamma), the
    pass sums R_wk = sum_p sum_d omega_dp n_dw A_pdk / Z_pdw (K multiply-adds per entry, no Z
    summed again) and adds W_wk R_wk at the end; entries whose Z the E-step marked unusable
    (0: log space) are recomputed and added to SS directly. ``expweights`` is the table the
    E-steps summed Z with (VB's B at T = 1); None: exp(LW), as :func:`e_step_tempered` forms it.
    ``doc_a`` (T > 0), the E-steps' A of every document, saves recomputing it from gamma (the
    same numbers: both come from the same final gamma by the same operations).
    Every (w, k) receives its terms particle by particle, each particle's documents in order,
    so the result does not depend on the thread count. The items (particle, document),
    particle-major, are staged in waves of ``wave_items`` (tests use small ones). Equivalent
    to ``tests/reference/pem.py::weighted_statistics``.
    """
    cdef Py_ssize_t P = gamma.shape[0], D = gamma.shape[1], K = gamma.shape[2]
    cdef Py_ssize_t V_b = logweights.shape[0], i, i0, i1, per_wave
    cdef WeightedPass wp
    cdef double* W = NULL
    cdef double* R = NULL
    cdef double* stages = NULL
    cdef double* mus = NULL
    cdef double* given = NULL
    cdef double[:, :, ::1] a_given
    cdef const double* LW
    if not temperature >= 0.0:
        raise ValueError(f"temperature must be >= 0; got {temperature}")
    if indptr.shape[0] != D + 1 or omega.shape[0] != D or omega.shape[1] != P:
        raise ValueError("gamma, omega and the CSR rows disagree on P or the document count")
    if pair_z.shape[0] != P or pair_z.shape[1] != indices.shape[0]:
        raise ValueError("pair_z must be (P, M): one row per particle, one entry per CSR entry")
    if logweights.shape[1] != K or sstats.shape[0] != V_b or sstats.shape[1] != K:
        raise ValueError("logweights, sstats and gamma disagree on K or the word count")
    bind_matrix(&given, expweights, V_b, K, "expweights must have the shape of logweights")
    if doc_a is not None:
        a_given = doc_a
        if a_given.shape[0] != P or a_given.shape[1] != D or a_given.shape[2] != K:
            raise ValueError("doc_a must have the shape of gamma")
    if threads < 1:
        threads = 1
    if P == 0 or D == 0 or V_b == 0 or K == 0:
        return
    LW = &logweights[0, 0]
    wp.indptr = &indptr[0]
    wp.indices = &indices[0] if indices.shape[0] > 0 else NULL
    wp.counts = &counts[0] if counts.shape[0] > 0 else NULL
    wp.gamma = &gamma[0, 0, 0]
    wp.omega = &omega[0, 0]
    wp.pair_z = &pair_z[0, 0] if indices.shape[0] > 0 else NULL
    wp.doc_a = &a_given[0, 0, 0] if doc_a is not None else NULL
    wp.LW = LW
    wp.sstats = &sstats[0, 0]
    wp.P = P
    wp.D = D
    wp.M = indices.shape[0]
    wp.K = K
    wp.temperature = temperature
    wp.stage_doubles = 2 * K + 1
    per_wave = wave_items if wave_items > 0 else max(1, WAVE_DOUBLES // wp.stage_doubles)
    try:
        R = <double*> checked_alloc(V_b * K, sizeof(double))
        stages = <double*> checked_alloc(min(per_wave, P * D) * wp.stage_doubles,
                                         sizeof(double))
        mus = <double*> checked_alloc(threads * (3 * K + 1), sizeof(double))
        if given == NULL:
            W = <double*> checked_alloc(V_b * K, sizeof(double))
            with nogil:
                for i in prange(V_b * K, schedule="static", num_threads=threads):
                    W[i] = exp(LW[i]) if temperature > 0.0 else 0.0
            wp.W = W
        else:
            wp.W = given
        wp.R = R
        with nogil:
            for i in prange(V_b * K, schedule="static", num_threads=threads):
                R[i] = 0.0
            i0 = 0
            while i0 < P * D:
                i1 = min(i0 + per_wave, P * D)
                _weighted_wave(&wp, i0, i1, stages, mus, threads)
                i0 = i1
            for i in prange(V_b * K, schedule="static", num_threads=threads):
                wp.sstats[i] += wp.W[i] * R[i]
    finally:
        free(W)
        free(R)
        free(stages)
        free(mus)
