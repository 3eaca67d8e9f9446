# cython: language_level=3
"""Variational Bayes kernels for LDA (docs/algorithms.md §3, §5, §11.2).

* :func:`expected_log_topics` -- E_q[ln phi] for a set of words in the shifted-exponential form
  of §3.2 (B = exp(Elogphi - m_w), m_w = max_k Elogphi_kw) and the per-word topic terms of the
  ELBO (§3.3). Equivalent to ``tests/reference/vb.py::expected_log_topics``.
* :func:`e_step` -- the per-document E-step of §3.2 for every document of a CSR block (batch VB,
  an online mini-batch, or test documents), whole documents under ``nogil`` with OpenMP over
  documents; sufficient statistics reduced in document order so the result does not depend on
  the number of threads. Equivalent to ``tests/reference/vb.py::e_step``.

The E-step has no randomness: documents are conditionally independent given the topics, so
threads only change who computes a document, never the numbers.
"""
cimport cython
from cython.parallel cimport parallel, prange
from libc.math cimport exp, fabs, log
from libc.stdint cimport int32_t, int64_t

from topictk._cy.alloc cimport longest_row
from topictk._cy.estep cimport (DocRow, EStepRun, alpha_term, bind_block, expelog_theta,
                                run_e_step, set_outputs)
from topictk._cy.special cimport digamma, lngamma


def expected_log_topics(const double[:, ::1] lam,      # IN  (V, K) lambda (or lam_tilde)
                        object rows,                   # IN  (V_b,) int32 words, None = all
                        double offset, double scale,   # lambda_wk = offset + scale * lam[w, k]
                        const double[::1] psi_total,   # IN  (K) psi(lambda_k.) (smoothed only)
                        bint smoothed,
                        double beta,
                        double[:, ::1] expelog,        # OUT (V_b, K) exp(Elogphi - shift)
                        double[::1] shift,             # OUT (V_b) max_k Elogphi
                        object term,                   # OUT (V_b) topic terms of the ELBO, or None
                        int threads):
    """Elogphi_wk = psi(lambda_wk) - psi(lambda_k.) (smoothed) or ln phi_wk (unsmoothed) for the
    requested words, stored as B = exp(Elogphi - m_w) and m_w; with ``term`` also
    sum_k (beta - lambda_wk) Elogphi_wk + lnGamma(lambda_wk) per word (§3.3).
    Equivalent to ``tests/reference/vb.py::expected_log_topics``.
    """
    cdef Py_ssize_t K = lam.shape[1]
    cdef Py_ssize_t n_rows = expelog.shape[0]
    cdef const int32_t[::1] row_ids
    cdef double[::1] term_v
    cdef const int32_t* row_ptr = NULL
    cdef double* term_ptr = NULL
    cdef Py_ssize_t j, k, w
    cdef double x, e, m, t
    if rows is not None:
        row_ids = rows
        if row_ids.shape[0] != n_rows:
            raise ValueError("rows and expelog disagree on the number of words")
        if n_rows > 0:
            row_ptr = &row_ids[0]
    elif n_rows != lam.shape[0]:
        raise ValueError("expelog must have one row per word of lam")
    if term is not None:
        term_v = term
        if n_rows > 0:
            term_ptr = &term_v[0]
    if threads < 1:
        threads = 1
    with nogil:
        for j in prange(n_rows, schedule="static", num_threads=threads):
            w = row_ptr[j] if row_ptr != NULL else j
            m = -1e308
            t = 0.0
            for k in range(K):
                x = offset + scale * lam[w, k]
                if smoothed:
                    e = digamma(x) - psi_total[k]
                    if term_ptr != NULL:   # the topic term of the ELBO, only when asked for
                        t = t + (beta - x) * e + lngamma(x)
                else:
                    e = log(x)
                expelog[j, k] = e
                if e > m:
                    m = e
            for k in range(K):
                expelog[j, k] = exp(expelog[j, k] - m)
            shift[j] = m
            if term_ptr != NULL:
                term_ptr[j] = t


cdef inline double _dot(const double* a, const double* b, Py_ssize_t K) noexcept nogil:
    """sum_k a_k b_k with four interleaved partial sums (fixed order: the result depends on K
    only, never on threads), which lets the compiler keep four multiply-add chains in flight."""
    cdef double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0
    cdef Py_ssize_t k = 0
    while k + 4 <= K:
        s0 = s0 + a[k] * b[k]
        s1 = s1 + a[k + 1] * b[k + 1]
        s2 = s2 + a[k + 2] * b[k + 2]
        s3 = s3 + a[k + 3] * b[k + 3]
        k += 4
    while k < K:
        s0 = s0 + a[k] * b[k]
        k += 1
    return (s0 + s1) + (s2 + s3)


cdef struct VBModel:
    # what the E-step of a document reads besides the document
    const double* B             # (V_b, K) exp(Elogphi - shift)
    const double* shift         # (V_b) max_k Elogphi
    const double* alpha         # (K)
    double alpha_term           # lnGamma(alpha.) - sum_k lnGamma(alpha_k)
    Py_ssize_t K
    double tol
    # per-thread work: elog, A, acc (K each), then Z (longest document)


cdef inline void _gamma_pass(const double* A, const double* B, const int32_t* ids,
                             const int32_t* cts, Py_ssize_t n_pairs, Py_ssize_t K,
                             double* acc, double* Z) noexcept nogil:
    """Z_j = sum_k A_k B_wjk and acc_k = sum_j n_dwj B_wjk / Z_j, four words at a time (one
    pass over A and acc for four words), the rest one by one."""
    cdef Py_ssize_t j = 0, k
    cdef double z, z1, z2, z3, f, f1, f2, f3
    cdef const double* b
    cdef const double* b1
    cdef const double* b2
    cdef const double* b3
    for k in range(K):
        acc[k] = 0.0
    while j + 4 <= n_pairs:
        b = B + ids[j] * K
        b1 = B + ids[j + 1] * K
        b2 = B + ids[j + 2] * K
        b3 = B + ids[j + 3] * K
        z = 0.0
        z1 = 0.0
        z2 = 0.0
        z3 = 0.0
        for k in range(K):
            z = z + A[k] * b[k]
            z1 = z1 + A[k] * b1[k]
            z2 = z2 + A[k] * b2[k]
            z3 = z3 + A[k] * b3[k]
        Z[j] = z
        Z[j + 1] = z1
        Z[j + 2] = z2
        Z[j + 3] = z3
        f = cts[j] / z
        f1 = cts[j + 1] / z1
        f2 = cts[j + 2] / z2
        f3 = cts[j + 3] / z3
        for k in range(K):
            acc[k] = acc[k] + ((f * b[k] + f1 * b1[k]) + (f2 * b2[k] + f3 * b3[k]))
        j += 4
    while j < n_pairs:
        b = B + ids[j] * K
        z = _dot(A, b, K)
        Z[j] = z
        f = cts[j] / z
        for k in range(K):
            acc[k] = acc[k] + f * b[k]
        j += 1


cdef inline void _doc_outputs(const VBModel* m, const DocRow* doc, const double* gamma,
                              const double* elog, const double* A, double shift_theta,
                              const double* Z, double* out_ss, double* bound) noexcept nogil:
    """n_dw mu_dwk of every entry (``out_ss``), the document's ELBO term l_d (``bound``), the
    entries' Z = sum_k A_k B_wk (``doc.zout``) and A (``doc.aout``), any of them may be NULL;
    ``shift_theta`` = max_k Elogtheta_k."""
    cdef Py_ssize_t j, k, K = m.K
    cdef double f, l, total
    cdef const double* b
    if doc.zout != NULL:
        for j in range(doc.n_pairs):
            doc.zout[j] = Z[j]
    if doc.aout != NULL:
        for k in range(K):
            doc.aout[k] = A[k]
    if out_ss != NULL:
        for j in range(doc.n_pairs):
            b = m.B + doc.ids[j] * K
            f = doc.cts[j] / Z[j]
            for k in range(K):
                out_ss[j * K + k] = f * A[k] * b[k]
    if bound != NULL:
        l = 0.0
        for j in range(doc.n_pairs):
            l += doc.cts[j] * (log(Z[j]) + m.shift[doc.ids[j]] + shift_theta)
        total = 0.0
        for k in range(K):
            l += (m.alpha[k] - gamma[k]) * elog[k] + lngamma(gamma[k])
            total += gamma[k]
        bound[0] = l + m.alpha_term - lngamma(total)


cdef int _doc_estep(const void* model, const DocRow* doc, double* gamma, bint warm,
                    int max_iter, double* work, double* stage, double* bound) noexcept nogil:
    """E-step of one document (§3.2), a :data:`topictk._cy.estep.DocEStep`; returns the number
    of gamma updates made. ``stage`` (n_pairs x K: n_dw mu_dwk of every entry) and ``bound``
    (l_d) are for the final gamma; either may be NULL."""
    cdef const VBModel* m = <const VBModel*> model
    cdef Py_ssize_t j, k, K = m.K, n_pairs = doc.n_pairs
    cdef double* elog = work
    cdef double* A = work + K
    cdef double* acc = work + 2 * K
    cdef double* Z = work + 3 * K
    cdef double n_d = 0.0, g, delta, shift_theta
    cdef int it = 0
    cdef bint done = max_iter <= 0
    for j in range(n_pairs):
        n_d += doc.cts[j]
    if not warm:
        for k in range(K):
            gamma[k] = m.alpha[k] + n_d / K
    shift_theta = expelog_theta(gamma, K, 1.0, elog, A)
    while True:
        if done:
            for j in range(n_pairs):
                Z[j] = _dot(A, m.B + doc.ids[j] * K, K)
            break
        _gamma_pass(A, m.B, doc.ids, doc.cts, n_pairs, K, acc, Z)
        delta = 0.0
        for k in range(K):
            g = m.alpha[k] + A[k] * acc[k]
            delta += fabs(g - gamma[k])
            gamma[k] = g
        delta /= K
        shift_theta = expelog_theta(gamma, K, 1.0, elog, A)
        it += 1
        done = delta < m.tol or it >= max_iter
    _doc_outputs(m, doc, gamma, elog, A, shift_theta, Z, stage, bound)
    return it


cdef void _doc_stats(const void* model, const DocRow* doc, const double* stage, Py_ssize_t p,
                     Py_ssize_t P, double* sstats, double* work) noexcept nogil:
    """The :data:`topictk._cy.estep.DocStats` of VB: the staged terms of the entries with
    w mod P = p."""
    cdef Py_ssize_t j, k, K = (<const VBModel*> model).K
    cdef int32_t w
    for j in range(doc.n_pairs):
        w = doc.ids[j]
        if w % P != p:
            continue
        for k in range(K):
            sstats[w * K + k] += stage[j * K + k]


def e_step(const int64_t[::1] indptr,      # IN  (D_b + 1) CSR row offsets
           const int32_t[::1] indices,     # IN  (M_b) rows of ``expelog`` (word or batch ids)
           const int32_t[::1] counts,      # IN  (M_b) n_dw >= 1
           const double[:, ::1] expelog,   # IN  (V_b, K) B = exp(Elogphi - shift)
           const double[::1] shift,        # IN  (V_b) m_w
           const double[::1] alpha,        # IN  (K)
           double[:, ::1] gamma,           # IN/OUT (D_b, K); read unless ``start`` is cold
           int start,                      # 0 cold, 1 warm, 2 best of both (see below)
           double tol,
           int max_iter,
           object sstats,                  # OUT (V_b, K) += sum_d n_dw mu_dwk, or None
           object doc_bound,               # OUT (D_b) l_d of every document, or None
           object iterations,              # OUT (D_b) int32 gamma updates made, or None
           int threads,
           Py_ssize_t wave_doubles=0,      # staging budget (0 = default; tests use small ones)
           object pair_z=None,             # OUT (M_b) every entry's Z, or None
           object doc_a=None):             # OUT (D_b, K) every document's A, or None
    """The E-step of §3.2 for every row of a CSR block.

    ``start``: 0 = cold (gamma_k = alpha_k + N_d/K), 1 = warm (from the given gamma), 2 = best:
    both are run and the document keeps the one with the higher document bound l_d (the ELBO
    can only increase, as with warm starts, yet a document can leave a poor earlier fixed
    point, as with cold starts).

    ``pair_z`` receives every entry's normaliser Z_dw = sum_k A_dk B_wk of its document's final
    gamma (A_dk = exp(Elogtheta_dk - max_j Elogtheta_dj)), so that mu_dwk = A_dk B_wk / Z_dw
    can be formed later without summing Z again (particle EM's weighted statistics, §10.3);
    ``doc_a`` receives every document's A_d.

    Sufficient statistics are staged per CSR entry and added into ``sstats`` in entry order
    (document order), with the words split between threads by w mod P, so the sums are
    bitwise independent of the thread count (``topictk/_cy/estep.pxd``).
    Equivalent to ``tests/reference/vb.py::e_step``.
    """
    cdef Py_ssize_t D = indptr.shape[0] - 1, K = gamma.shape[1]
    cdef Py_ssize_t V_b = expelog.shape[0]
    cdef EStepRun run
    cdef VBModel model
    bind_block(&run, indptr, indices, counts, gamma, start, max_iter, threads)
    if expelog.shape[1] != K or alpha.shape[0] != K or shift.shape[0] != V_b:
        raise ValueError("expelog, shift, alpha and gamma disagree on K or the word count")
    run.wave_doubles = wave_doubles
    set_outputs(&run, sstats, doc_bound, iterations, V_b, pair_z, indices.shape[0],
                doc_a)
    if D == 0:
        return
    run.work_doubles = 3 * K + longest_row(run.indptr, D)
    run.stage_per_entry = K
    run.stage_per_doc = 0
    model.B = &expelog[0, 0] if V_b > 0 else NULL
    model.shift = &shift[0] if V_b > 0 else NULL
    model.alpha = &alpha[0]
    model.alpha_term = alpha_term(model.alpha, K)
    model.K = K
    model.tol = tol
    run_e_step(&run, _doc_estep, _doc_stats, &model)
