# cython: language_level=3
"""Scoring of a sample kept as non-zero counts (docs/algorithms.md §2.9, §11.2).

A WarpLDA chain's samples hold n_kw as sorted (topic, count) rows, one per word. These kernels
score such a sample without ever forming the (V, K) phi-hat: a weight
phi-hat_kw = (n_kw + beta) / (n_k + V beta) is computed when it is read, with the very
operations NumPy uses to form phi-hat (an int count made float, beta added, divided by
n_k + V beta), so every number is the one the dense path gives, bit for bit:

* :func:`fold_in_probabilities` -- the Gibbs fold-in of ``_heldout.fold_in_theta`` (the document
  sampler of ``topictk/_cy/docsampler.pxd``, its bucket path: same draws, same walk order),
  then p-hat = sum_k theta-hat_dk phi-hat_kw of the document's held-out entries in ascending
  k, as ``_heldout.mixture_probabilities`` sums it; theta-hat is one K row per thread, never (D, K),
  unless the caller asks for it (``theta_out``: the proportions ``topictk infer`` reports).
* :func:`mixture_probabilities` -- p-hat of entries with theta-hat_dk = (n_dk + alpha_k) /
  (N_d + alpha_sum) from a sample's non-zero n_dk (Protocol B).

Memory: the sample's rows, O(K) per thread and O(V) for the alpha-bucket totals. Every buffer
is allocated and checked before the sampling and freed after it on every path.
"""
from cython.parallel cimport parallel, prange, threadid
from libc.math cimport INFINITY, NAN
from libc.stdint cimport int32_t, int64_t, uint8_t
from libc.stdlib cimport free
from numpy.random cimport bitgen_t

from topictk._cy.alloc cimport checked_alloc as _alloc, free_rows
from topictk._cy.docsampler cimport DocScratch, doc_scratch, doc_scratch_free
from topictk._cy.rng cimport bitgen_of, next_uniform, uniform_topic


cdef struct Rows:
    # a sample's word-topic counts: row w holds topic[ptr[w]:ptr[w + 1]] ascending, with counts
    const int64_t* ptr          # (V + 1)
    const int32_t* topic
    const int32_t* count
    const double* den           # (K) n_k + V beta
    const double* zero          # (K) beta / (n_k + V beta): the weight of a zero count
    double beta
    Py_ssize_t K


cdef inline double _weight(const Rows* r, int32_t w, int32_t k) noexcept nogil:
    """phi-hat_kw, the count found by bisection in word w's row."""
    cdef int64_t lo = r.ptr[w], hi = r.ptr[w + 1], end = hi, mid
    while lo < hi:
        mid = (lo + hi) >> 1
        if r.topic[mid] < k:
            lo = mid + 1
        else:
            hi = mid
    if lo < end and r.topic[lo] == k:
        return (r.count[lo] + r.beta) / r.den[k]
    return r.zero[k]


cdef inline double _nonzero_weight(const Rows* r, int64_t j) noexcept nogil:
    """phi-hat of entry j of the rows."""
    return (r.count[j] + r.beta) / r.den[r.topic[j]]


cdef inline double _mix(const Rows* r, int32_t w, const double* theta) noexcept nogil:
    """sum_k theta_k phi-hat_kw in ascending k, the topics without a count of word w taken a
    stretch at a time."""
    cdef int64_t j = r.ptr[w], end = r.ptr[w + 1]
    cdef Py_ssize_t k = 0, stop
    cdef double s = 0.0
    while True:
        stop = r.topic[j] if j < end else r.K
        while k < stop:
            s = s + theta[k] * r.zero[k]
            k += 1
        if j >= end:
            return s
        s = s + theta[k] * _nonzero_weight(r, j)
        k += 1
        j += 1


cdef inline Py_ssize_t _alpha_walk(const Rows* r, const double* alpha, const double* az,
                                   int32_t w, double u, double* total) noexcept nogil:
    """The first k with u < sum_{k' <= k} alpha_k' phi-hat_k'w, summed in ascending k (``az``
    = alpha_k times the zero-count weight, the same product), or K - 1 when there is none
    (u = inf: the whole sum, left in ``total``)."""
    cdef int64_t j = r.ptr[w], end = r.ptr[w + 1]
    cdef Py_ssize_t k = 0, stop
    cdef double c = 0.0
    while True:
        stop = r.topic[j] if j < end else r.K
        while k < stop:
            c = c + az[k]
            if u < c:
                return k
            k += 1
        if j >= end:
            total[0] = c
            return r.K - 1
        c = c + alpha[k] * _nonzero_weight(r, j)
        if u < c:
            return k
        k += 1
        j += 1


cdef struct Fold:
    # what the fold-in of every document reads
    const int64_t* obs_ptr
    const int32_t* obs_words
    const int64_t* held_ptr
    const int32_t* held_words
    const uint8_t* active
    const double* alpha         # (K)
    const double* acum          # (V) alpha-bucket totals of the words observed
    const double* az            # (K) alpha_k times the weight of a zero count
    Rows rows
    int n_sweeps
    int n_burn
    double* out
    double* theta_out           # (D, K) theta-hat of every document, or NULL


cdef void _sample_doc(const Fold* f, DocScratch* s, double* theta, Py_ssize_t d,
                     bitgen_t* gen) noexcept nogil:
    """Document d on its observed tokens: the bucket path of ``sample_document`` with the
    weights read from the rows; then its held-out entries' p-hat (``theta`` a K row), and its
    theta-hat copied to row d of ``theta_out`` when there is one."""
    cdef const Rows* r = &f.rows
    cdef Py_ssize_t K = r.K, k, j, n_dt = 0
    cdef int64_t begin = f.obs_ptr[d], n = f.obs_ptr[d + 1] - begin, i
    cdef const int32_t* words = f.obs_words + begin
    cdef int32_t w
    cdef int sweep, n_kept = f.n_sweeps - f.n_burn
    cdef double u, rr, alpha_sum = 0.0, denom, unused
    cdef bint found
    for k in range(K):
        s.nd[k] = 0
        s.kept[k] = 0
        alpha_sum += f.alpha[k]
    for i in range(n):
        k = uniform_topic(gen, <int> K)
        s.zbuf[i] = <int32_t> k
        s.nd[k] += 1
    for k in range(K):
        if s.nd[k] > 0:
            s.dt_pos[k] = <int32_t> n_dt
            s.dt[n_dt] = <int32_t> k
            n_dt += 1
    for sweep in range(f.n_sweeps):
        for i in range(n):
            w = words[i]
            k = s.zbuf[i]
            s.nd[k] -= 1
            if s.nd[k] == 0:
                j = s.dt_pos[k]
                n_dt -= 1
                s.dt[j] = s.dt[n_dt]
                s.dt_pos[s.dt[j]] = <int32_t> j
            rr = 0.0
            for j in range(n_dt):
                rr = rr + s.nd[s.dt[j]] * _weight(r, w, s.dt[j])
                s.buf[j] = rr
            u = next_uniform(gen) * (rr + f.acum[w])
            found = False
            if u < rr:
                for j in range(n_dt):
                    if u < s.buf[j]:
                        k = s.dt[j]
                        found = True
                        break
                if not found:
                    k = s.dt[n_dt - 1]
            else:
                k = _alpha_walk(r, f.alpha, f.az, w, u - rr, &unused)
            if s.nd[k] == 0:
                s.dt_pos[k] = <int32_t> n_dt
                s.dt[n_dt] = <int32_t> k
                n_dt += 1
            s.zbuf[i] = <int32_t> k
            s.nd[k] += 1
        if sweep >= f.n_burn:
            for k in range(K):
                s.kept[k] += s.nd[k]
    # theta-hat as _heldout.fold_in_theta forms it, then the mixture as _heldout sums it
    denom = n + alpha_sum
    for k in range(K):
        if n_kept > 0:
            theta[k] = (s.kept[k] / <double> n_kept + f.alpha[k]) / denom
        else:
            theta[k] = (s.nd[k] + f.alpha[k]) / denom
    if f.theta_out != NULL:
        for k in range(K):
            f.theta_out[d * K + k] = theta[k]
    for i in range(f.held_ptr[d], f.held_ptr[d + 1]):
        f.out[i] = _mix(r, f.held_words[i], theta)


cdef int _check_ids(const int32_t[::1] ids, Py_ssize_t limit, str message) except -1:
    """ValueError(message) unless every id is in 0..limit-1."""
    cdef Py_ssize_t j
    for j in range(ids.shape[0]):
        if ids[j] < 0 or ids[j] >= limit:
            raise ValueError(message)
    return 0


cdef int _rows_init(Rows* r, const int64_t[::1] ptr, const int32_t[::1] topic,
                    const int32_t[::1] count, const int64_t[::1] nk, double beta,
                    double* den, double* zero) except -1:
    """Point ``r`` at a sample's rows and fill ``den`` and ``zero`` (K each): n_k + V beta as
    NumPy adds an int64 count and the float V beta, and beta / that."""
    cdef Py_ssize_t V = ptr.shape[0] - 1, K = nk.shape[0], k
    cdef double vbeta = V * beta
    if topic.shape[0] != count.shape[0] or ptr[V] != topic.shape[0] or ptr[0] != 0:
        raise ValueError("the rows' offsets, topics and counts do not fit together")
    _check_ids(topic, K, "a row holds a topic outside 0..K-1")
    r.ptr = &ptr[0]
    r.topic = &topic[0] if topic.shape[0] > 0 else NULL
    r.count = &count[0] if count.shape[0] > 0 else NULL
    for k in range(K):
        den[k] = nk[k] + vbeta
        zero[k] = beta / den[k]
    r.den = den
    r.zero = zero
    r.beta = beta
    r.K = K
    return 0


def fold_in_probabilities(const int64_t[::1] obs_ptr,    # IN  (D + 1) observed-token offsets
                          const int32_t[::1] obs_words,  # IN  observed word ids
                          const int64_t[::1] held_ptr,   # IN  (D + 1) held-out entry offsets
                          const int32_t[::1] held_words,  # IN  held-out word ids
                          const int64_t[::1] ptr,        # IN  (V + 1) n_kw row offsets
                          const int32_t[::1] topic,      # IN  topics, ascending in a row
                          const int32_t[::1] count,      # IN  their counts
                          const int64_t[::1] nk,         # IN  (K)
                          double beta,
                          const double[::1] alpha,       # IN  (K) the documents' prior
                          int n_sweeps, int n_burn,
                          const int64_t[::1] chunk_bounds,  # IN (C + 1) document boundaries
                          list streams,                  # IN  C bit generators, one per chunk
                          const uint8_t[::1] active,     # IN  (D) 0 = skip the document
                          double[::1] out,               # OUT p-hat of every held-out entry
                          int threads,
                          double[:, ::1] theta_out=None):  # OUT (D, K) theta-hat, if given
    """p-hat of the held-out entries of the documents: the Gibbs fold-in of
    ``_heldout.fold_in_theta`` with the weights phi-hat of the rows and one prior for every
    document, then sum_k theta-hat_dk phi-hat_kw. Equal, bit for bit, to ``fold_in_theta``
    with the dense phi-hat followed by ``_heldout.mixture_probabilities``; the entries of skipped
    documents are NaN (their theta-hat is). With ``theta_out``, also theta-hat itself (NaN
    rows for skipped documents), equal to ``fold_in_theta``'s. One stream per chunk, so the
    result does not depend on ``threads``."""
    cdef Py_ssize_t D = obs_ptr.shape[0] - 1, K = nk.shape[0], V = ptr.shape[0] - 1
    cdef Py_ssize_t C = chunk_bounds.shape[0] - 1, c, d, max_len = 1, k
    cdef int64_t j
    cdef Fold f
    cdef bitgen_t** gens = NULL
    cdef DocScratch* sc = NULL
    cdef double** theta = NULL
    cdef double* den = NULL
    cdef double* zero = NULL
    cdef double* acum = NULL
    cdef double* az = NULL
    cdef uint8_t* used = NULL
    cdef int tid
    if len(streams) != C:
        raise ValueError(f"{C} chunks need {C} streams, got {len(streams)}")
    if (active.shape[0] != D or held_ptr.shape[0] != D + 1 or alpha.shape[0] != K
            or out.shape[0] != held_words.shape[0] or obs_ptr[D] != obs_words.shape[0]
            or held_ptr[D] != held_words.shape[0]):
        raise ValueError("documents, active, alpha and out do not fit together")
    if theta_out is not None and (theta_out.shape[0] != D or theta_out.shape[1] != K):
        raise ValueError(f"theta_out must be ({D}, {K})")
    if n_sweeps < 1 or n_burn < 0 or n_burn > n_sweeps:
        raise ValueError("0 <= n_burn <= n_sweeps >= 1 is needed")
    _check_ids(obs_words, V, "an observed token's word has no row")
    _check_ids(held_words, V, "a held-out entry's word has no row")
    for d in range(D):
        if obs_ptr[d + 1] - obs_ptr[d] > max_len:
            max_len = obs_ptr[d + 1] - obs_ptr[d]
    if threads < 1:
        threads = 1
    try:
        den = <double*> _alloc(K, sizeof(double))
        zero = <double*> _alloc(K, sizeof(double))
        acum = <double*> _alloc(V, sizeof(double))
        az = <double*> _alloc(K, sizeof(double))
        used = <uint8_t*> _alloc(V, sizeof(uint8_t), True)
        gens = <bitgen_t**> _alloc(C, sizeof(bitgen_t*))
        for c in range(C):
            gens[c] = bitgen_of(streams[c])
        _rows_init(&f.rows, ptr, topic, count, nk, beta, den, zero)
        for k in range(K):
            az[k] = alpha[k] * zero[k]
        sc = doc_scratch(threads, max_len, K)
        theta = <double**> _alloc(threads, sizeof(double*), True)
        for c in range(threads):
            theta[c] = <double*> _alloc(K, sizeof(double))
        f.obs_ptr = &obs_ptr[0]
        f.obs_words = &obs_words[0] if obs_words.shape[0] > 0 else NULL
        f.held_ptr = &held_ptr[0]
        f.held_words = &held_words[0] if held_words.shape[0] > 0 else NULL
        f.active = &active[0] if D > 0 else NULL
        f.alpha = &alpha[0]
        f.acum = acum
        f.az = az
        f.n_sweeps = n_sweeps
        f.n_burn = n_burn
        f.out = &out[0] if out.shape[0] > 0 else NULL
        f.theta_out = &theta_out[0, 0] if theta_out is not None and D > 0 and K > 0 else NULL
        with nogil:
            # the alpha-bucket total of every word observed, in ascending k (alpha_buckets)
            for d in range(D):
                if f.active[d]:
                    for j in range(obs_ptr[d], obs_ptr[d + 1]):
                        used[obs_words[j]] = 1
            for c in prange(V, schedule="static", num_threads=threads):
                if used[c]:
                    _alpha_walk(&f.rows, f.alpha, az, <int32_t> c, INFINITY, &acum[c])
            for d in range(D):
                if not f.active[d]:
                    for j in range(held_ptr[d], held_ptr[d + 1]):
                        f.out[j] = NAN
                    if f.theta_out != NULL:
                        for k in range(K):
                            f.theta_out[d * K + k] = NAN
            with parallel(num_threads=threads):
                tid = threadid()
                for c in prange(C, schedule="dynamic", chunksize=1):
                    for d in range(chunk_bounds[c], chunk_bounds[c + 1]):
                        if f.active[d]:
                            _sample_doc(&f, &sc[tid], theta[tid], d, gens[c])
    finally:
        doc_scratch_free(sc, threads)
        free_rows(<void**> theta, threads)
        free(den)
        free(zero)
        free(acum)
        free(az)
        free(used)
        free(gens)


def mixture_probabilities(const int64_t[::1] held_ptr,   # IN  (D + 1) entry offsets
                          const int32_t[::1] held_words,  # IN  entry word ids
                          const int64_t[::1] doc_ptr,    # IN  (D + 1) n_dk row offsets
                          const int32_t[::1] doc_topic,  # IN  topics of the rows
                          const int32_t[::1] doc_count,  # IN  their counts
                          const double[::1] alpha,       # IN  (K)
                          double alpha_sum,              # the sum NumPy forms of alpha
                          const int64_t[::1] ptr,        # IN  (V + 1) n_kw row offsets
                          const int32_t[::1] topic,      # IN  topics, ascending in a row
                          const int32_t[::1] count,      # IN  their counts
                          const int64_t[::1] nk,         # IN  (K)
                          double beta,
                          double[::1] out,               # OUT p-hat of every entry
                          int threads):
    """p-hat = sum_k theta-hat_dk phi-hat_kw of every entry, theta-hat_dk = (n_dk + alpha_k) /
    (N_d + alpha_sum) from document d's non-zero counts (N_d their sum), in ascending k:
    equal, bit for bit, to forming the dense theta-hat and phi-hat and calling
    ``_heldout.mixture_probabilities``."""
    cdef Py_ssize_t D = held_ptr.shape[0] - 1, K = nk.shape[0], V = ptr.shape[0] - 1
    cdef Py_ssize_t d, k, t
    cdef int64_t j, n_d
    cdef Rows rows
    cdef double* den = NULL
    cdef double* zero = NULL
    cdef double** theta = NULL
    cdef double denom
    cdef int tid
    if (doc_ptr.shape[0] != D + 1 or alpha.shape[0] != K or out.shape[0] != held_words.shape[0]
            or held_ptr[D] != held_words.shape[0] or doc_ptr[D] != doc_topic.shape[0]
            or doc_count.shape[0] != doc_topic.shape[0]):
        raise ValueError("entries, document rows, alpha and out do not fit together")
    _check_ids(held_words, V, "an entry's word has no row")
    _check_ids(doc_topic, K, "a document row holds a topic outside 0..K-1")
    if threads < 1:
        threads = 1
    try:
        den = <double*> _alloc(K, sizeof(double))
        zero = <double*> _alloc(K, sizeof(double))
        theta = <double**> _alloc(threads, sizeof(double*), True)
        for t in range(threads):
            theta[t] = <double*> _alloc(K, sizeof(double))
        _rows_init(&rows, ptr, topic, count, nk, beta, den, zero)
        with nogil, parallel(num_threads=threads):
            tid = threadid()
            for d in prange(D, schedule="dynamic", chunksize=16):
                if held_ptr[d + 1] == held_ptr[d]:
                    continue
                n_d = 0
                for j in range(doc_ptr[d], doc_ptr[d + 1]):
                    n_d = n_d + doc_count[j]
                denom = n_d + alpha_sum
                for k in range(K):
                    theta[tid][k] = alpha[k] / denom
                for j in range(doc_ptr[d], doc_ptr[d + 1]):
                    theta[tid][doc_topic[j]] = (doc_count[j] + alpha[doc_topic[j]]) / denom
                for j in range(held_ptr[d], held_ptr[d + 1]):
                    out[j] = _mix(&rows, held_words[j], theta[tid])
    finally:
        free_rows(<void**> theta, threads)
        free(den)
        free(zero)
