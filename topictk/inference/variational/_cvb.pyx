# cython: language_level=3
"""Collapsed variational Bayes kernels for LDA: CVB with the Gaussian (second-order)
correction (Teh, Newman & Welling 2007) and CVB0 (Asuncion et al. 2009); docs/algorithms.md §4.

* :func:`init_mu` -- mu_dw ~ Dir(1, ..., 1) for every distinct pair, in pair order.
  Equivalent to ``tests/reference/cvb.py::init_mu``.
* :func:`compute_fields` -- the mean (and variance) fields of §4.2 from scratch.
  Equivalent to ``tests/reference/cvb.py::compute_fields``.
* :func:`add_fields`, :func:`topic_fields` -- the CVB0 fields block by block (documents in
  order), as :func:`compute_fields` computes them (a Dask cluster's shards).
* :func:`sweep` -- one CVB / CVB0 iteration with the exclusion rule of §4.4 (one token copy
  per pair update), sequential in place for one chunk, chunk-private word fields merged in
  chunk order for C > 1. Equivalent to ``tests/reference/cvb.py::sweep``.
* :func:`fold_in` -- CVB0 fold-in of test documents with phi-hat frozen (§4.7).
  Equivalent to ``tests/reference/cvb.py::fold_in``.
* :func:`pair_entropy` -- n_dw sum_k mu ln mu of every pair (the entropy term of §4.6).

Storage is one K-vector mu per distinct (document, word) pair in CSR order (representation C).
Fields are float64 throughout (§4.7: m_k - mu is lost in float32).
"""
cimport cython
from cython.parallel cimport parallel, prange, threadid
from libc.math cimport exp, fabs, log, log1p
from libc.stdint cimport int32_t, int64_t
from libc.stdlib cimport free, malloc
from libc.string cimport memcpy, memset

from numpy.random cimport bitgen_t

from topictk._cy.alloc cimport longest_row
from topictk._cy.wordprior cimport attach_overlay, beta_bar
from topictk._cy.rng cimport bitgen_of, next_uniform


def init_mu(double[:, ::1] mu,   # OUT (M, K)
            object stream):      # IN  the init stream (0,)
    """mu_dw ~ Dir(1, ..., 1): K draws -ln(1 - U) (Exp(1); 1 - U avoids ln 0) per pair, pair
    order, k inner, normalised."""
    cdef Py_ssize_t M = mu.shape[0], K = mu.shape[1]
    cdef bitgen_t* gen = bitgen_of(stream)
    cdef Py_ssize_t e, k
    cdef double s, x
    with nogil:
        for e in range(M):
            s = 0.0
            for k in range(K):
                x = -log1p(-next_uniform(gen))
                mu[e, k] = x
                s += x
            for k in range(K):
                mu[e, k] = mu[e, k] / s


cdef inline double _pos(double x) noexcept nogil:
    return x if x > 0.0 else 0.0


cdef inline void _add_pair(double* m, double* v, const double* mu, double c,
                           Py_ssize_t K) noexcept nogil:
    """One pair's terms added to a row of a field: m += c mu and (unless ``v`` is NULL)
    v += c mu (1 - mu), c = n_dw."""
    cdef Py_ssize_t k
    cdef double g
    for k in range(K):
        g = mu[k]
        m[k] += c * g
        if v != NULL:
            v[k] += c * g * (1.0 - g)


cdef void _block_fields(const int64_t* indptr, Py_ssize_t D, const int32_t* indices,
                        int64_t M, const int32_t* counts, const double* mu, Py_ssize_t K,
                        double* m_dk, double* v_dk, double* m_kw, double* v_kw,
                        int threads) noexcept nogil:
    """m_dk (and v_dk unless NULL) of a block of D documents from scratch, and the block's
    pairs added to m_kw (and v_kw) in pair order, the words split between threads by w mod P
    (§4.2): m = sum n_dw mu, v = sum n_dw mu (1 - mu)."""
    cdef Py_ssize_t d, k, w, p, P = threads
    cdef int64_t e
    cdef bint var = v_dk != NULL
    for d in prange(D, schedule="static", num_threads=threads):
        for k in range(K):
            m_dk[d * K + k] = 0.0
            if var:
                v_dk[d * K + k] = 0.0
        for e in range(indptr[d], indptr[d + 1]):
            _add_pair(m_dk + d * K, (v_dk + d * K) if var else NULL, mu + e * K, counts[e], K)
    for p in prange(P, schedule="static", chunksize=1, num_threads=threads):
        for e in range(M):
            w = indices[e]
            if w % P != p:
                continue
            _add_pair(m_kw + w * K, (v_kw + w * K) if var else NULL, mu + e * K, counts[e], K)


cdef void _topic_sums(const double* m_kw, Py_ssize_t V, Py_ssize_t K,
                      double* m_k) noexcept nogil:
    """m_k = sum_w m_kw, the words added in order."""
    cdef Py_ssize_t w, k
    for k in range(K):
        m_k[k] = 0.0
    for w in range(V):
        for k in range(K):
            m_k[k] += m_kw[w * K + k]


def compute_fields(const int64_t[::1] indptr,    # IN  (D + 1)
                   const int32_t[::1] indices,   # IN  (M)
                   const int32_t[::1] counts,    # IN  (M)
                   const double[:, ::1] mu,      # IN  (M, K)
                   double[:, ::1] m_dk,          # OUT (D, K)
                   double[:, ::1] m_kw,          # OUT (V, K)
                   double[::1] m_k,              # OUT (K)
                   object v_dk,                  # OUT (D, K) or None (CVB0)
                   object v_kw,                  # OUT (V, K) or None
                   object v_k,                   # OUT (K) or None
                   int threads):
    """Fields from scratch (§4.2): m = sum n_dw mu, v = sum n_dw mu (1 - mu). Word fields are
    summed in pair order (words split between threads by w mod P), so the result does not
    depend on the thread count. Equivalent to ``tests/reference/cvb.py::compute_fields``."""
    cdef Py_ssize_t D = indptr.shape[0] - 1, K = mu.shape[1], V = m_kw.shape[0], i
    cdef double[:, ::1] vd_v, vw_v
    cdef double[::1] vk_v
    cdef double* vd = NULL
    cdef double* vw = NULL
    cdef double* mkw = &m_kw[0, 0] if V > 0 else NULL
    if v_dk is not None:
        vd_v = v_dk
        vw_v = v_kw
        vk_v = v_k
        vd = &vd_v[0, 0] if D > 0 else NULL
        vw = &vw_v[0, 0] if V > 0 else NULL
    if threads < 1:
        threads = 1
    if K == 0:
        return
    with nogil:
        for i in range(V * K):
            mkw[i] = 0.0
            if vw != NULL:
                vw[i] = 0.0
        if D > 0:
            _block_fields(&indptr[0], D, &indices[0] if indices.shape[0] > 0 else NULL,
                          indices.shape[0], &counts[0] if counts.shape[0] > 0 else NULL,
                          &mu[0, 0] if mu.shape[0] > 0 else NULL, K, &m_dk[0, 0], vd, mkw,
                          vw, threads)
        _topic_sums(mkw, V, K, &m_k[0])
    if v_dk is not None:
        with nogil:
            _topic_sums(vw, V, K, &vk_v[0])


def add_fields(const int64_t[::1] indptr,    # IN  (D_b + 1) a block of documents
               const int32_t[::1] indices,   # IN  (M_b)
               const int32_t[::1] counts,    # IN  (M_b)
               const double[:, ::1] mu,      # IN  (M_b, K)
               double[:, ::1] m_dk,          # OUT (D_b, K)
               double[:, ::1] m_kw,          # IN/OUT (V, K) the word fields so far
               int threads,
               object v_dk=None,             # OUT (D_b, K) or None (CVB0)
               object v_kw=None):            # IN/OUT (V, K) or None
    """Fields of a block of documents (§4.2): m_dk (and v_dk) from scratch, and the block's
    pairs added to ``m_kw`` (and ``v_kw``) in pair order (words split between threads by
    w mod P). Blocks taken in document order, each continuing the previous block's word fields
    from zeros, give those of :func:`compute_fields` bit for bit; :func:`topic_fields` then
    gives m_k (and v_k)."""
    cdef Py_ssize_t D = indptr.shape[0] - 1, K = mu.shape[1], V = m_kw.shape[0]
    cdef double[:, ::1] vd_v, vw_v
    cdef double* vd = NULL
    cdef double* vw = NULL
    if (v_dk is None) != (v_kw is None):
        raise ValueError("the variance fields need both v_dk and v_kw")
    if v_dk is not None:
        vd_v = v_dk
        vw_v = v_kw
        if vd_v.shape[0] != D or vd_v.shape[1] != K or vw_v.shape[0] != V \
                or vw_v.shape[1] != K:
            raise ValueError("v_dk and v_kw must have the shapes of m_dk and m_kw")
        vd = &vd_v[0, 0] if D > 0 and K > 0 else NULL
        vw = &vw_v[0, 0] if V > 0 and K > 0 else NULL
    if threads < 1:
        threads = 1
    if D == 0 or K == 0:
        return
    with nogil:
        _block_fields(&indptr[0], D, &indices[0] if indices.shape[0] > 0 else NULL,
                      indices.shape[0], &counts[0] if counts.shape[0] > 0 else NULL,
                      &mu[0, 0] if mu.shape[0] > 0 else NULL, K, &m_dk[0, 0], vd,
                      &m_kw[0, 0], vw, threads)


def topic_fields(const double[:, ::1] m_kw,   # IN  (V, K)
                 double[::1] m_k):            # OUT (K)
    """m_k = sum_w m_kw, the words added in order, as :func:`compute_fields` does."""
    cdef Py_ssize_t V = m_kw.shape[0], K = m_kw.shape[1]
    if K == 0:
        return
    with nogil:
        _topic_sums(&m_kw[0, 0] if V > 0 else NULL, V, K, &m_k[0])


cdef void _sweep_docs(int64_t d_begin, int64_t d_end, const int64_t* indptr,
                      const int32_t* indices, const int32_t* counts, double* mu,
                      Py_ssize_t K, double* m_dk, double* v_dk, double* m_kw, double* v_kw,
                      double* m_k, double* v_k, const double* alpha, double beta,
                      double vbeta, bint gaussian, double* buf, const int64_t* pptr,
                      const int32_t* ptopic, const double* pextra,
                      const double* bbar) noexcept nogil:
    """Update every pair of documents [d_begin, d_end) in order (§4.3-4.5); with an overlay
    (``pptr`` not NULL) the word prior is beta + o[w, k] and V beta becomes ``bbar[k]``
    (§2.14)."""
    cdef int64_t d, e, j = 0, j_end = 0
    cdef double bk, zk
    cdef Py_ssize_t k
    cdef int32_t w
    cdef double c, g, gv, a, b, z, u, total, new, dm, dv
    cdef double* md
    cdef double* vd = NULL
    cdef double* mw
    cdef double* vw = NULL
    cdef double* mu_e
    for d in range(d_begin, d_end):
        md = m_dk + d * K
        if gaussian:
            vd = v_dk + d * K
        for e in range(indptr[d], indptr[d + 1]):
            w = indices[e]
            c = counts[e]
            mu_e = mu + e * K
            mw = m_kw + w * K
            if gaussian:
                vw = v_kw + w * K
            total = 0.0
            if pptr != NULL:
                j = pptr[w]
                j_end = pptr[w + 1]
            for k in range(K):
                g = mu_e[k]
                bk = beta
                zk = vbeta
                if pptr != NULL:
                    zk = bbar[k]
                    if j < j_end and ptopic[j] == k:
                        bk = beta + pextra[j]
                        j += 1
                a = alpha[k] + _pos(md[k] - g)
                b = bk + _pos(mw[k] - g)
                z = zk + _pos(m_k[k] - g)
                u = a * b / z
                if gaussian:
                    gv = g * (1.0 - g)
                    u = u * exp(-_pos(vd[k] - gv) / (2.0 * a * a)
                                - _pos(vw[k] - gv) / (2.0 * b * b)
                                + _pos(v_k[k] - gv) / (2.0 * z * z))
                buf[k] = u
                total += u
            for k in range(K):
                new = buf[k] / total
                g = mu_e[k]
                dm = c * (new - g)
                md[k] += dm
                mw[k] += dm
                m_k[k] += dm
                if gaussian:
                    dv = c * (new * (1.0 - new) - g * (1.0 - g))
                    vd[k] += dv
                    vw[k] += dv
                    v_k[k] += dv
                mu_e[k] = new


def sweep(const int64_t[::1] indptr,       # IN  (D + 1)
          const int32_t[::1] indices,      # IN  (M)
          const int32_t[::1] counts,       # IN  (M)
          double[:, ::1] mu,               # IN/OUT (M, K)
          double[:, ::1] m_dk,             # IN/OUT (D, K)
          double[:, ::1] m_kw,             # IN/OUT (V, K)
          double[::1] m_k,                 # IN/OUT (K)
          object v_dk,                     # IN/OUT (D, K) (CVB) or None (CVB0)
          object v_kw,                     # IN/OUT (V, K) or None
          object v_k,                      # IN/OUT (K) or None
          const double[::1] alpha,         # IN  (K)
          double beta,
          const int64_t[::1] chunk_bounds, # IN  (C + 1) document boundaries
          int threads,
          const int64_t[::1] prior_ptr=None,   # IN  (V + 1) seed overlay, CSR by word, or None
          const int32_t[::1] prior_topic=None, # IN  topics of the overlay's entries
          const double[::1] prior_extra=None): # IN  their extra prior o[w, k]
    """One CVB (v fields given) or CVB0 (v fields None) iteration over every pair.

    With the overlay (docs/algorithms.md §2.14) the word prior is beta + o[w, k] and the
    topics' total prior beta-bar_k = V beta + sum_w o[w, k]; without it, the symmetric beta.

    One chunk: the sequential in-place schedule (documents in order, pairs in ascending word
    id). C chunks: each chunk updates private copies of the word and topic fields taken at the
    start of the iteration; the changes are added back in chunk order (the result depends on
    C, never on the thread count). Equivalent to ``tests/reference/cvb.py::sweep``.
    """
    cdef Py_ssize_t D = indptr.shape[0] - 1, K = mu.shape[1], V = m_kw.shape[0]
    cdef Py_ssize_t C = chunk_bounds.shape[0] - 1
    cdef Py_ssize_t VK = V * K
    cdef bint gaussian = v_dk is not None
    cdef double vbeta = V * beta
    cdef double[:, ::1] vd_v, vw_v
    cdef double[::1] vk_v
    cdef double* vd = NULL
    cdef double* vw = NULL
    cdef double* vk = NULL
    cdef const int64_t* pptr = NULL
    cdef const int32_t* ptopic = NULL
    cdef const double* pextra = NULL
    cdef double* bbar = NULL
    if alpha.shape[0] != K or m_dk.shape[0] != D or m_k.shape[0] != K:
        raise ValueError("mu, fields and alpha disagree on K or D")
    if (prior_ptr is None) != (prior_topic is None) or (prior_ptr is None) != (prior_extra is None):
        raise ValueError("the word prior's overlay needs prior_ptr, prior_topic and prior_extra")
    attach_overlay(prior_ptr, prior_topic, prior_extra, V, K, &pptr, &ptopic, &pextra)
    if gaussian:
        vd_v = v_dk
        vw_v = v_kw
        vk_v = v_k
        vd = &vd_v[0, 0]
        vw = &vw_v[0, 0]
        vk = &vk_v[0]
    if D == 0 or C < 1:
        return
    if threads < 1:
        threads = 1
    if pptr != NULL:
        bbar = <double*> malloc(K * sizeof(double))
        if bbar == NULL:
            raise MemoryError()
        beta_bar(V, K, beta, pptr, ptopic, pextra, bbar)
    try:
        _sweep(D, K, V, C, VK, gaussian, indptr, indices, counts, mu, m_dk, m_kw, m_k, vd, vw,
               vk, alpha, beta, vbeta, chunk_bounds, threads, pptr, ptopic, pextra, bbar)
    finally:
        free(bbar)


cdef int _sweep(Py_ssize_t D, Py_ssize_t K, Py_ssize_t V, Py_ssize_t C, Py_ssize_t VK,
                bint gaussian, const int64_t[::1] indptr, const int32_t[::1] indices,
                const int32_t[::1] counts, double[:, ::1] mu, double[:, ::1] m_dk,
                double[:, ::1] m_kw, double[::1] m_k, double* vd, double* vw, double* vk,
                const double[::1] alpha, double beta, double vbeta,
                const int64_t[::1] chunk_bounds, int threads, const int64_t* pptr,
                const int32_t* ptopic, const double* pextra, const double* bbar) except -1:
    """The iteration of :func:`sweep` once its arguments are checked."""
    cdef Py_ssize_t c, w, k, i
    cdef double* buf
    cdef double* bufs = NULL
    cdef double* local
    cdef double* base
    cdef double acc
    cdef Py_ssize_t stride
    if C == 1:
        buf = <double*> malloc(K * sizeof(double))
        if buf == NULL:
            raise MemoryError()
        with nogil:
            _sweep_docs(chunk_bounds[0], chunk_bounds[1], &indptr[0], &indices[0], &counts[0],
                        &mu[0, 0], K, &m_dk[0, 0], vd, &m_kw[0, 0], vw, &m_k[0], vk,
                        &alpha[0], beta, vbeta, gaussian, buf, pptr, ptopic, pextra, bbar)
        free(buf)
        return 0

    # chunk-private word/topic fields: [m_kw (VK) | m_k (K) | v_kw (VK) | v_k (K)] per chunk
    stride = (2 * VK + 2 * K) if gaussian else (VK + K)
    local = <double*> malloc(C * stride * sizeof(double))
    bufs = <double*> malloc(threads * K * sizeof(double))     # one (K) buffer per thread
    if local == NULL or bufs == NULL:
        free(local)
        free(bufs)
        raise MemoryError()
    with nogil:
        with parallel(num_threads=threads):
            buf = bufs + threadid() * K
            for c in prange(C, schedule="dynamic", chunksize=1):
                base = local + c * stride
                memcpy(base, &m_kw[0, 0], VK * sizeof(double))
                memcpy(base + VK, &m_k[0], K * sizeof(double))
                if gaussian:
                    memcpy(base + VK + K, vw, VK * sizeof(double))
                    memcpy(base + 2 * VK + K, vk, K * sizeof(double))
                _sweep_docs(chunk_bounds[c], chunk_bounds[c + 1], &indptr[0], &indices[0],
                            &counts[0], &mu[0, 0], K, &m_dk[0, 0], vd, base,
                            (base + VK + K) if gaussian else NULL, base + VK,
                            (base + 2 * VK + K) if gaussian else NULL, &alpha[0], beta, vbeta,
                            gaussian, buf, pptr, ptopic, pextra, bbar)
        # merge: start + sum over chunks in chunk order of (local - start)
        for i in prange(VK, schedule="static", num_threads=threads):
            acc = m_kw[i // K, i % K]
            for c in range(C):
                acc = acc + (local[c * stride + i] - m_kw[i // K, i % K])
            m_kw[i // K, i % K] = acc
            if gaussian:
                acc = vw[i]
                for c in range(C):
                    acc = acc + (local[c * stride + VK + K + i] - vw[i])
                vw[i] = acc
        for k in range(K):
            acc = m_k[k]
            for c in range(C):
                acc = acc + (local[c * stride + VK + k] - m_k[k])
            m_k[k] = acc
            if gaussian:
                acc = vk[k]
                for c in range(C):
                    acc = acc + (local[c * stride + 2 * VK + K + k] - vk[k])
                vk[k] = acc
    free(bufs)
    free(local)
    return 0


cdef void _fold_in_doc(int64_t n_pairs, const int32_t* ids, const int32_t* cts,
                       const double* phi, const double* alpha, Py_ssize_t K, double tol,
                       int max_passes, double* mu, double* md, double* theta) noexcept nogil:
    cdef int64_t j
    cdef Py_ssize_t k
    cdef int it
    cdef double s, c, g, new, diff, n_d = 0.0, alpha_sum = 0.0
    cdef const double* f
    for k in range(K):
        md[k] = 0.0
        alpha_sum += alpha[k]
    for j in range(n_pairs):
        f = phi + ids[j] * K
        c = cts[j]
        n_d += c
        s = 0.0
        for k in range(K):
            mu[j * K + k] = alpha[k] * f[k]
            s += mu[j * K + k]
        for k in range(K):
            mu[j * K + k] /= s
            md[k] += c * mu[j * K + k]
    if n_pairs > 0:
        for it in range(max_passes):
            diff = 0.0
            for j in range(n_pairs):
                f = phi + ids[j] * K
                c = cts[j]
                s = 0.0
                for k in range(K):
                    theta[k] = (alpha[k] + _pos(md[k] - mu[j * K + k])) * f[k]
                    s += theta[k]
                for k in range(K):
                    new = theta[k] / s
                    g = mu[j * K + k]
                    md[k] += c * (new - g)
                    diff += fabs(new - g)
                    mu[j * K + k] = new
            if diff / (n_pairs * K) < tol:
                break
    for k in range(K):
        theta[k] = (alpha[k] + md[k]) / (alpha_sum + n_d)


def fold_in(const int64_t[::1] indptr,     # IN  (D + 1) observed part of each test document
            const int32_t[::1] indices,    # IN  (M)
            const int32_t[::1] counts,     # IN  (M)
            const double[:, ::1] phi,      # IN  (V, K) phi-hat, frozen
            const double[::1] alpha,       # IN  (K)
            double tol, int max_passes,
            double[:, ::1] theta,          # OUT (D, K) (alpha + m_dk) / (alpha_sum + N_obs)
            int threads):
    """CVB0 fold-in of each document with the training fields frozen (§4.7): mu_dwk
    proportional to (alpha_k + m_dk^-) phi_wk, pairs updated in place with the exclusion rule,
    until mean |delta mu| < tol (at most ``max_passes`` passes). Start: mu_dw proportional to
    alpha_k phi_wk (deterministic). Equivalent to ``tests/reference/cvb.py::fold_in``."""
    cdef Py_ssize_t D = indptr.shape[0] - 1, K = phi.shape[1]
    cdef Py_ssize_t d, max_pairs
    cdef double* mu
    cdef double* md
    cdef double* mus
    cdef double* mds
    if theta.shape[0] != D or theta.shape[1] != K or alpha.shape[0] != K:
        raise ValueError("theta, phi and alpha do not fit together")
    if threads < 1:
        threads = 1
    if D == 0:
        return
    # every thread's buffers (mu of its longest document, m_d.), allocated before the loop
    max_pairs = longest_row(&indptr[0], D)
    mus = <double*> malloc(threads * max_pairs * K * sizeof(double))
    mds = <double*> malloc(threads * K * sizeof(double))
    if mus == NULL or mds == NULL:
        free(mus)
        free(mds)
        raise MemoryError()
    with nogil, parallel(num_threads=threads):
        mu = mus + threadid() * max_pairs * K
        md = mds + threadid() * K
        for d in prange(D, schedule="dynamic", chunksize=4):
            _fold_in_doc(indptr[d + 1] - indptr[d], &indices[indptr[d]], &counts[indptr[d]],
                         &phi[0, 0], &alpha[0], K, tol, max_passes, mu, md, &theta[d, 0])
    free(mus)
    free(mds)


def pair_entropy(const int32_t[::1] counts,   # IN  (M)
                 const double[:, ::1] mu,     # IN  (M, K)
                 double[::1] out,             # OUT (M) n_dw sum_k mu ln mu (0 ln 0 = 0)
                 int threads):
    """Per-pair n_dw sum_k mu_dwk ln mu_dwk (minus the entropy term of §4.6)."""
    cdef Py_ssize_t M = mu.shape[0], K = mu.shape[1], e, k
    cdef double s, g
    if threads < 1:
        threads = 1
    with nogil:
        for e in prange(M, schedule="static", num_threads=threads):
            s = 0.0
            for k in range(K):
                g = mu[e, k]
                if g > 0.0:
                    s = s + g * log(g)
            out[e] = counts[e] * s
