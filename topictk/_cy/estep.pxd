# What the per-document E-steps of variational Bayes (docs/algorithms.md §3.2, kernel
# topictk/inference/variational/_vb.pyx) and of particle EM (§10.3,
# topictk/inference/variational/_pem.pyx) share: the checks of their outputs, the start policy
# (cold, warm, or the better of both), and the statistics reduction that makes every number
# independent of the thread count.
#
# A kernel supplies two functions and a pointer to its own model view; :func:`run_e_step` runs
# them over every row of a CSR block:
#
# * ``DocEStep``: the E-step of one document. Documents run in parallel (OpenMP, dynamic
#   schedule), in waves of consecutive documents whose stages fit a fixed buffer. For its final
#   gamma a document leaves a *stage*: what its statistics are computed from (VB: the terms
#   n_dw mu_dwk themselves, K per entry; PEM: Elogtheta, K per document, from which the terms
#   are recomputed, cheaper than writing and reading them back).
# * ``DocStats``: adds the statistics of one document's entries whose word w has w mod P = p,
#   in entry order, from its stage. Thread p of P takes the documents of a wave in order, so
#   every (w, k) receives its terms in CSR entry order whatever the number of threads.
from cython.parallel cimport parallel, prange, threadid
from libc.stdint cimport int32_t, int64_t
from libc.stdlib cimport free, malloc

from libc.math cimport exp

from topictk._cy.alloc cimport longest_row
from topictk._cy.special cimport digamma, lngamma
from topictk._cy.views cimport bind_matrix, bind_vector

# A wave of documents stages at most this many doubles (or one document, when that is larger).
cdef enum:
    WAVE_DOUBLES = 1 << 21


cdef struct DocRow:
    # one document: its index in the block and its CSR entries
    Py_ssize_t d
    Py_ssize_t n_pairs
    const int32_t* ids          # (n_pairs) rows of the kernel's word table
    const int32_t* cts          # (n_pairs) n_dw >= 1
    double* zout                # (n_pairs) OUT the entries' normalisers Z for the final gamma,
                                # or NULL (what the kernel writes: its own docstring)
    double* aout                # (K) OUT A_k = exp((Elogtheta_k - max) / T) of the final gamma,
                                # or NULL


# The E-step of one document, gamma in place (cold start when not ``warm``); returns the number
# of gamma updates made. ``work`` holds the kernel's ``work_doubles`` per-thread doubles;
# ``stage`` (may be NULL) receives the document's stage and ``bound`` (may be NULL) its
# objective term, both for the final gamma.
ctypedef int (*DocEStep)(const void* model, const DocRow* doc, double* gamma, bint warm,
                         int max_iter, double* work, double* stage,
                         double* bound) noexcept nogil

# sstats[w] += n_dw mu_dw. for the entries of ``doc`` with w mod P = p, in entry order, from the
# document's ``stage``; ``work`` holds the kernel's ``work_doubles`` per-thread doubles.
ctypedef void (*DocStats)(const void* model, const DocRow* doc, const double* stage,
                          Py_ssize_t p, Py_ssize_t P, double* sstats,
                          double* work) noexcept nogil


cdef struct EStepRun:
    # one E-step call over a CSR block
    const int64_t* indptr       # (D + 1) CSR row offsets
    const int32_t* indices      # (M) rows of the kernel's word table
    const int32_t* counts       # (M) n_dw >= 1
    Py_ssize_t D
    Py_ssize_t K
    double* gamma               # (D, K) IN/OUT; read unless the start is cold
    int start                   # 0 cold, 1 warm, 2 best of both
    int max_iter
    double* sstats              # OUT (V_b, K) += sum_d n_dw mu_dwk, or NULL
    double* doc_bound           # OUT (D) objective term of every document, or NULL
    int32_t* iterations         # OUT (D) gamma updates made, or NULL
    double* pair_z              # OUT (M) every entry's Z for its document's final gamma, or NULL
    double* doc_a               # OUT (D, K) every document's A for its final gamma, or NULL
    int threads
    Py_ssize_t wave_doubles     # staging budget (0 = WAVE_DOUBLES)
    Py_ssize_t work_doubles     # per-thread work of the kernel's functions
    Py_ssize_t stage_per_entry  # a document's stage: stage_per_entry doubles per entry ...
    Py_ssize_t stage_per_doc    # ... plus stage_per_doc


cdef inline int bind_block(EStepRun* run, const int64_t[::1] indptr,
                           const int32_t[::1] indices, const int32_t[::1] counts,
                           double[:, ::1] gamma, int start, int max_iter,
                           int threads) except -1:
    """Point ``run`` at a CSR block of D_b rows and its gamma (D_b, K), with the settings every
    E-step takes; gamma's rows checked against the block's."""
    run.D = indptr.shape[0] - 1
    run.K = gamma.shape[1]
    if gamma.shape[0] != run.D:
        raise ValueError(f"gamma has {gamma.shape[0]} rows for {run.D} documents")
    run.start = start
    run.max_iter = max_iter
    run.threads = threads
    run.indptr = &indptr[0]
    run.indices = &indices[0] if indices.shape[0] > 0 else NULL
    run.counts = &counts[0] if counts.shape[0] > 0 else NULL
    run.gamma = &gamma[0, 0] if run.D > 0 else NULL
    return 0


cdef inline int set_outputs(EStepRun* run, object sstats, object doc_bound, object iterations,
                            Py_ssize_t V_b, object pair_z=None, Py_ssize_t M=0,
                            object doc_a=None) except -1:
    """Check the optional outputs against the block (D, K, V_b, M entries) and point ``run``
    at them."""
    bind_matrix(&run.sstats, sstats, V_b, run.K, "sstats must be (V_b, K)")
    bind_vector[double](&run.doc_bound, doc_bound, run.D,
                        "doc_bound must have one entry per document")
    bind_vector[int32_t](&run.iterations, iterations, run.D,
                         "iterations must have one entry per document")
    bind_vector[double](&run.pair_z, pair_z, M, "pair_z must have one entry per CSR entry")
    bind_matrix(&run.doc_a, doc_a, run.D, run.K, "doc_a must be (D_b, K)")
    if run.start < 0 or run.start > 2:
        raise ValueError("start must be 0 (cold), 1 (warm) or 2 (best)")
    if run.threads < 1:
        run.threads = 1
    return 0


cdef inline double alpha_term(const double* alpha, Py_ssize_t K) noexcept nogil:
    """lnGamma(alpha.) - sum_k lnGamma(alpha_k), the prior's part of every document's bound."""
    cdef double term = 0.0, total = 0.0
    cdef Py_ssize_t k
    for k in range(K):
        term -= lngamma(alpha[k])
        total += alpha[k]
    term += lngamma(total)
    return term


cdef inline double expelog_theta(const double* gamma, Py_ssize_t K, double temperature,
                                 double* elog, double* A) noexcept nogil:
    """Elogtheta_k = psi(gamma_k) - psi(gamma.) and, when T > 0, the shifted exponentials
    A_k = exp((Elogtheta_k - M) / T) (at T = 1 without the division, which changes nothing);
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
    if temperature == 1.0:
        for k in range(K):
            A[k] = exp(elog[k] - m)
    elif temperature > 0.0:
        for k in range(K):
            A[k] = exp((elog[k] - m) / temperature)
    return m


cdef inline int start_policy(DocEStep estep, const void* model, const DocRow* doc,
                             double* gamma, double* g2, int start, int max_iter, Py_ssize_t K,
                             double* work, double* stage, double* bound) noexcept nogil:
    """One document under the start policy; returns the gamma updates made.

    0 = cold (gamma_k = alpha_k + N_d / K), 1 = warm (from the given gamma), 2 = best: both are
    run, the cold one in ``g2`` (K), and the document keeps the one with the higher bound (warm
    on ties): the objective can only increase, as with warm starts, yet a document can leave a
    poor earlier fixed point, as with cold starts. The outputs are then those of the kept
    gamma, without a further update."""
    cdef double l_cold = 0.0, l_warm = 0.0
    cdef int it
    cdef Py_ssize_t k
    if start != 2:
        return estep(model, doc, gamma, start == 1, max_iter, work, stage, bound)
    it = estep(model, doc, g2, False, max_iter, work, NULL, &l_cold)
    it = it + estep(model, doc, gamma, True, max_iter, work, NULL, &l_warm)
    if l_cold > l_warm:
        for k in range(K):
            gamma[k] = g2[k]
    estep(model, doc, gamma, True, 0, work, stage, bound)
    return it


cdef inline void _row(const EStepRun* run, Py_ssize_t d, DocRow* doc) noexcept nogil:
    cdef int64_t begin = run.indptr[d]
    doc.d = d
    doc.n_pairs = run.indptr[d + 1] - begin
    doc.ids = run.indices + begin
    doc.cts = run.counts + begin
    doc.zout = (run.pair_z + begin) if run.pair_z != NULL else NULL
    doc.aout = (run.doc_a + d * run.K) if run.doc_a != NULL else NULL


cdef inline Py_ssize_t _stage_at(const EStepRun* run, Py_ssize_t d0,
                                 Py_ssize_t d) noexcept nogil:
    """Offset of document d's stage in a wave that starts at document d0."""
    return (run.stage_per_entry * (run.indptr[d] - run.indptr[d0])
            + run.stage_per_doc * (d - d0))


cdef inline Py_ssize_t wave_end(const EStepRun* run, Py_ssize_t d0,
                                Py_ssize_t budget) noexcept nogil:
    """The end of the wave starting at document d0: consecutive documents whose stages fit in
    ``budget`` doubles (at least one document)."""
    cdef Py_ssize_t d1 = d0 + 1
    while d1 < run.D and _stage_at(run, d0, d1 + 1) <= budget:
        d1 += 1
    return d1


cdef inline int _one_document(const EStepRun* run, DocEStep estep, const void* model,
                              Py_ssize_t d, double* stage, double* work) noexcept nogil:
    """Document d under the start policy (``stage``: its stage, or NULL)."""
    cdef DocRow doc
    _row(run, d, &doc)
    return start_policy(estep, model, &doc, run.gamma + d * run.K, work, run.start,
                        run.max_iter, run.K, work + run.K, stage,
                        (run.doc_bound + d) if run.doc_bound != NULL else NULL)


cdef inline void _estep_wave(const EStepRun* run, DocEStep estep, const void* model,
                             Py_ssize_t d0, Py_ssize_t d1, double* stages,
                             double* work) noexcept nogil:
    """Documents [d0, d1) in parallel, their stages in ``stages`` unless it is NULL. ``work``
    holds K + work_doubles doubles per thread."""
    cdef Py_ssize_t d
    cdef int tid, it
    cdef double* mine
    with parallel(num_threads=run.threads):
        tid = threadid()
        mine = work + tid * (run.K + run.work_doubles)
        for d in prange(d0, d1, schedule="dynamic", chunksize=4):
            it = _one_document(run, estep, model, d,
                               (stages + _stage_at(run, d0, d)) if stages != NULL else NULL,
                               mine)
            if run.iterations != NULL:
                run.iterations[d] = it


cdef inline void _stats_part(const EStepRun* run, DocStats stats, const void* model,
                             Py_ssize_t d0, Py_ssize_t d1, const double* stages,
                             Py_ssize_t p, double* work) noexcept nogil:
    """Thread p's part of the reduction: the words w with w mod P = p of documents [d0, d1),
    in document order."""
    cdef Py_ssize_t d
    cdef DocRow doc
    for d in range(d0, d1):
        _row(run, d, &doc)
        if doc.n_pairs > 0:
            stats(model, &doc, stages + _stage_at(run, d0, d), p, run.threads, run.sstats, work)


cdef inline void _stats_wave(const EStepRun* run, DocStats stats, const void* model,
                             Py_ssize_t d0, Py_ssize_t d1, const double* stages,
                             double* work) noexcept nogil:
    """The ordered reduction of a wave: every (w, k) receives its terms in entry order."""
    cdef Py_ssize_t p
    cdef int tid
    cdef double* mine
    with parallel(num_threads=run.threads):
        tid = threadid()
        mine = work + tid * (run.K + run.work_doubles)
        for p in prange(run.threads, schedule="static", chunksize=1):
            _stats_part(run, stats, model, d0, d1, stages, p, mine)


cdef inline int run_e_step(const EStepRun* run, DocEStep estep, DocStats stats,
                           const void* model) except -1:
    """Every document of the block (see the top of this file); MemoryError when a buffer cannot
    be allocated (nothing has been computed then)."""
    cdef Py_ssize_t D = run.D, d0, d1, budget
    cdef double* stages = NULL
    cdef double* work = NULL
    budget = run.wave_doubles if run.wave_doubles > 0 else WAVE_DOUBLES
    if budget < run.stage_per_entry * longest_row(run.indptr, D) + run.stage_per_doc:
        budget = run.stage_per_entry * longest_row(run.indptr, D) + run.stage_per_doc
    try:
        work = <double*> malloc(run.threads * (run.K + run.work_doubles) * sizeof(double))
        if work == NULL:
            raise MemoryError()
        if run.sstats != NULL:
            stages = <double*> malloc(budget * sizeof(double))
            if stages == NULL:
                raise MemoryError()
        with nogil:
            d0 = 0
            while d0 < D:
                d1 = wave_end(run, d0, budget) if stages != NULL else D
                _estep_wave(run, estep, model, d0, d1, stages, work)
                if stages != NULL:
                    _stats_wave(run, stats, model, d0, d1, stages, work)
                d0 = d1
    finally:
        free(stages)
        free(work)
    return 0
