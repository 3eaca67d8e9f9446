# What the per-document E-steps of variational Bayes (ALGORITHMS.md §3.2, kernel
# topictk/inference/_vb.pyx) and of particle EM (§10.3, topictk/inference/_pem.pyx) share: the
# checks of their outputs, the start policy (cold, warm, or the better of both), and the
# statistics reduction that makes every number independent of the thread count.
#
# A kernel supplies one function for one document (``DocEStep``) and a pointer to its own model
# view; :func:`run_e_step` runs it over every row of a CSR block:
#
# * documents in parallel (OpenMP, dynamic schedule), in waves of consecutive documents whose
#   staged statistics fit a fixed buffer;
# * a document's statistics n_dw mu_dwk are staged per CSR entry (the document function writes
#   them for its final gamma), then added into ``sstats`` in CSR entry order, i.e. document
#   order, with the words split between threads by w mod P: every (w, k) receives its terms in
#   the same order whatever the number of threads.
from cython.parallel cimport parallel, prange, threadid
from libc.stdint cimport int32_t, int64_t
from libc.stdlib cimport free, malloc

from topictk._cy.special cimport lngamma

# Statistics are staged per document (M_d x K doubles) before the ordered reduction; a wave of
# documents uses at most this many doubles (or one document, when that is larger).
cdef enum:
    WAVE_DOUBLES = 1 << 21


cdef struct DocRow:
    # one document: its CSR entries
    Py_ssize_t n_pairs
    const int32_t* ids          # (n_pairs) rows of the kernel's word table
    const int32_t* cts          # (n_pairs) n_dw >= 1


# The E-step of one document, gamma in place (cold start when not ``warm``); returns the number
# of gamma updates made. ``work`` holds the kernel's ``work_doubles`` per-thread doubles;
# ``out_ss`` (n_pairs x K, may be NULL) receives n_dw mu_dwk and ``bound`` (may be NULL) the
# document's objective term, both for the final gamma.
ctypedef int (*DocEStep)(const void* model, const DocRow* doc, double* gamma, bint warm,
                         int max_iter, double* work, double* out_ss,
                         double* bound) noexcept nogil


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
    int threads
    Py_ssize_t wave_doubles     # staging budget (0 = WAVE_DOUBLES)
    Py_ssize_t work_doubles     # per-thread work of the document function


cdef inline int set_outputs(EStepRun* run, object sstats, object doc_bound, object iterations,
                            Py_ssize_t V_b) except -1:
    """Check the optional outputs against the block (D, K, V_b) and point ``run`` at them."""
    cdef double[:, ::1] ss_v
    cdef double[::1] bound_v
    cdef int32_t[::1] iter_v
    run.sstats = NULL
    run.doc_bound = NULL
    run.iterations = NULL
    if sstats is not None:
        ss_v = sstats
        if ss_v.shape[0] != V_b or ss_v.shape[1] != run.K:
            raise ValueError("sstats must be (V_b, K)")
        if V_b > 0:
            run.sstats = &ss_v[0, 0]
    if doc_bound is not None:
        bound_v = doc_bound
        if bound_v.shape[0] != run.D:
            raise ValueError("doc_bound must have one entry per document")
        if run.D > 0:
            run.doc_bound = &bound_v[0]
    if iterations is not None:
        iter_v = iterations
        if iter_v.shape[0] != run.D:
            raise ValueError("iterations must have one entry per document")
        if run.D > 0:
            run.iterations = &iter_v[0]
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


cdef inline int start_policy(DocEStep estep, const void* model, const DocRow* doc,
                             double* gamma, double* g2, int start, int max_iter, Py_ssize_t K,
                             double* work, double* out_ss, double* bound) noexcept nogil:
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
        return estep(model, doc, gamma, start == 1, max_iter, work, out_ss, bound)
    it = estep(model, doc, g2, False, max_iter, work, NULL, &l_cold)
    it = it + estep(model, doc, gamma, True, max_iter, work, NULL, &l_warm)
    if l_cold > l_warm:
        for k in range(K):
            gamma[k] = g2[k]
    estep(model, doc, gamma, True, 0, work, out_ss, bound)
    return it


cdef inline void ordered_reduction(double* sstats, const double* staged,
                                   const int32_t* indices, int64_t e0, int64_t e1,
                                   Py_ssize_t K, int threads) noexcept nogil:
    """sstats[w] += staged[e - e0] for the CSR entries e in [e0, e1), in entry order for every
    (w, k); thread p adds the words with w mod P = p."""
    cdef Py_ssize_t P = threads, p, k
    cdef int64_t e
    cdef int32_t w
    for p in prange(P, schedule="static", chunksize=1, num_threads=threads):
        for e in range(e0, e1):
            w = indices[e]
            if w % P != p:
                continue
            for k in range(K):
                sstats[w * K + k] += staged[(e - e0) * K + k]


cdef inline Py_ssize_t wave_end(const int64_t* indptr, Py_ssize_t d0, Py_ssize_t D,
                                Py_ssize_t budget) noexcept nogil:
    """The end of the wave starting at document d0: consecutive documents whose entries fit in
    ``budget`` (at least one document)."""
    cdef Py_ssize_t d1 = d0 + 1
    while d1 < D and indptr[d1 + 1] - indptr[d0] <= budget:
        d1 += 1
    return d1


cdef inline int _one_document(const EStepRun* run, DocEStep estep, const void* model,
                              Py_ssize_t d, double* staged, int64_t e0,
                              double* work) noexcept nogil:
    """Document d under the start policy, its statistics staged at its entries' place."""
    cdef DocRow doc
    cdef int64_t begin = run.indptr[d]
    doc.n_pairs = run.indptr[d + 1] - begin
    doc.ids = run.indices + begin
    doc.cts = run.counts + begin
    return start_policy(estep, model, &doc, run.gamma + d * run.K, work, run.start,
                        run.max_iter, run.K, work + run.K,
                        (staged + (begin - e0) * run.K) if staged != NULL else NULL,
                        (run.doc_bound + d) if run.doc_bound != NULL else NULL)


cdef inline void _run_wave(const EStepRun* run, DocEStep estep, const void* model,
                           Py_ssize_t d0, Py_ssize_t d1, double* staged,
                           double* work) noexcept nogil:
    """Documents [d0, d1) in parallel; statistics staged in ``staged`` (entries from
    indptr[d0]) unless it is NULL. ``work`` holds K + work_doubles doubles per thread."""
    cdef Py_ssize_t d
    cdef int64_t e0 = run.indptr[d0]
    cdef int tid, it
    cdef double* mine
    with parallel(num_threads=run.threads):
        tid = threadid()
        mine = work + tid * (run.K + run.work_doubles)
        for d in prange(d0, d1, schedule="dynamic", chunksize=4):
            it = _one_document(run, estep, model, d, staged, e0, mine)
            if run.iterations != NULL:
                run.iterations[d] = it


cdef inline Py_ssize_t longest_row(const int64_t* indptr, Py_ssize_t D) noexcept nogil:
    """The most entries of one row (at least 1)."""
    cdef Py_ssize_t d, n = 1
    for d in range(D):
        if indptr[d + 1] - indptr[d] > n:
            n = indptr[d + 1] - indptr[d]
    return n


cdef inline int run_e_step(const EStepRun* run, DocEStep estep, const void* model) except -1:
    """Every document of the block (see the top of this file); MemoryError when a buffer cannot
    be allocated (nothing has been computed then)."""
    cdef Py_ssize_t D = run.D, K = run.K, d0, d1, budget
    cdef Py_ssize_t max_pairs = longest_row(run.indptr, D)
    cdef double* staged = NULL
    cdef double* work = NULL
    budget = (run.wave_doubles if run.wave_doubles > 0 else WAVE_DOUBLES) // K
    if budget < max_pairs:
        budget = max_pairs
    try:
        work = <double*> malloc(run.threads * (K + run.work_doubles) * sizeof(double))
        if work == NULL:
            raise MemoryError()
        if run.sstats != NULL:
            staged = <double*> malloc(budget * K * sizeof(double))
            if staged == NULL:
                raise MemoryError()
        with nogil:
            d0 = 0
            while d0 < D:
                d1 = wave_end(run.indptr, d0, D, budget) if staged != NULL else D
                _run_wave(run, estep, model, d0, d1, staged, work)
                if staged != NULL:
                    ordered_reduction(run.sstats, staged, run.indices, run.indptr[d0],
                                      run.indptr[d1], K, run.threads)
                d0 = d1
    finally:
        free(staged)
        free(work)
    return 0
