# cython: language_level=3
"""Scoring of a sample kept as non-zero counts (docs/algorithms.md §2.9, §2.11, §11.2).

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

Both take the two optional word terms of the other Gibbs kernels (§2.10, §2.11; shared checks
in ``topictk/_cy/wordprior.pxd``): a sparse overlay o of extra word prior, phi-hat_kw then
being ((n_kw + beta) + o_wk) / (n_k + beta-bar_k), o read beside the count as a walk passes
word w's topics, or from word w's overlay row spread into a K row while a token's document
bucket is formed; or a given topic-word matrix ``phi`` (K x V) whose entry phi_kw is the
weight itself, read in place (a column is strided by V). The term is picked once per call,
before the sampling, by a fused argument (always NULL): without either (None) the code of the
symmetric beta runs, testing no term, with the same numbers as before.

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
from topictk._cy.wordprior cimport (attach_overlay, beta_bar, check_phi, check_terms,
                                    find_topic, given_term, overlay_term, plain_term,
                                    term_t)


cdef struct Rows:
    # a sample's word-topic counts: row w holds topic[ptr[w]:ptr[w + 1]] ascending, with counts
    const int64_t* ptr          # (V + 1)
    const int32_t* topic
    const int32_t* count
    const double* den           # (K) n_k + V beta (n_k + beta-bar_k with an overlay)
    const double* zero          # (K) beta / den: the weight of a zero count without overlay
    double beta
    Py_ssize_t K
    Py_ssize_t V
    # the word term beside the counts: an overlay o, CSR by word like the rows (o_ptr NULL:
    # none), or a given phi (K x V, NULL: none) that replaces the counts in every weight
    const int64_t* o_ptr
    const int32_t* o_topic
    const double* o_extra
    const double* phi


cdef struct Walk:
    # a walk of word w's topics in ascending k: where it is in the count row and the overlay row
    int64_t j
    int64_t end
    int64_t m
    int64_t m_end


cdef inline double _weight(const Rows* r, int32_t w, int32_t k, const double* o_row,
                           term_t mode) noexcept nogil:
    """phi-hat_kw (the document bucket's weight): the count found by bisection in word w's
    row; with an overlay, o_wk added from ``o_row`` (word w's overlay row spread over K by
    :func:`_spread`); a given phi's entry."""
    cdef Py_ssize_t at
    cdef int32_t n = 0
    if term_t is given_term:
        return r.phi[k * r.V + w]
    at = find_topic(r.topic + r.ptr[w], r.ptr[w + 1] - r.ptr[w], k)
    if term_t is overlay_term:
        if at >= 0:
            n = r.count[r.ptr[w] + at]
        return ((n + r.beta) + o_row[k]) / r.den[k]
    if at >= 0:
        return (r.count[r.ptr[w] + at] + r.beta) / r.den[k]
    return r.zero[k]


cdef inline void _spread(const Rows* r, int32_t w, double* o_row, bint put) noexcept nogil:
    """Put word w's overlay entries o_wk into the K row ``o_row`` (zero elsewhere), or back to
    zero: one read per entry instead of a bisection per weight."""
    cdef int64_t m
    for m in range(r.o_ptr[w], r.o_ptr[w + 1]):
        o_row[r.o_topic[m]] = r.o_extra[m] if put else 0.0


cdef inline void _walk_start(const Rows* r, int32_t w, Walk* c, term_t mode) noexcept nogil:
    """A walk at the first topic of word w's rows."""
    c.j = r.ptr[w]
    c.end = r.ptr[w + 1]
    if term_t is overlay_term:
        c.m = r.o_ptr[w]
        c.m_end = r.o_ptr[w + 1]


cdef inline Py_ssize_t _walk_next(const Rows* r, const Walk* c, term_t mode) noexcept nogil:
    """The next topic of the walk's word with a count (or, with an overlay, an extra prior):
    the topics before it take the weight of a zero count; K when there is none left."""
    cdef Py_ssize_t stop = r.topic[c.j] if c.j < c.end else r.K
    if term_t is overlay_term:
        if c.m < c.m_end and r.o_topic[c.m] < stop:
            stop = r.o_topic[c.m]
    return stop


cdef inline double _walk_take(const Rows* r, Walk* c, Py_ssize_t k, term_t mode) noexcept nogil:
    """phi-hat_kw of topic k = :func:`_walk_next`'s, the walk moved past it."""
    cdef int32_t n = 0
    cdef double o = 0.0
    if term_t is overlay_term:
        if c.j < c.end and r.topic[c.j] == k:
            n = r.count[c.j]
            c.j += 1
        if c.m < c.m_end and r.o_topic[c.m] == k:
            o = r.o_extra[c.m]
            c.m += 1
        return ((n + r.beta) + o) / r.den[k]
    c.j += 1
    return (r.count[c.j - 1] + r.beta) / r.den[k]


cdef inline Py_ssize_t _given_walk(const Rows* r, const double* coef, int32_t w, double u,
                                   double* total) noexcept nogil:
    """With a given phi: the first k with u < sum_{k' <= k} coef_k' phi[k', w], summed in
    ascending k, or K - 1 when there is none (u = inf: the whole sum, left in ``total``)."""
    cdef Py_ssize_t k
    cdef double acc = 0.0
    for k in range(r.K):
        acc = acc + coef[k] * r.phi[k * r.V + w]
        if u < acc:
            return k
    total[0] = acc
    return r.K - 1


cdef inline double _mix(const Rows* r, int32_t w, const double* theta,
                        term_t mode) noexcept nogil:
    """sum_k theta_k phi-hat_kw in ascending k, the topics without a count of word w (nor an
    extra prior) taken a stretch at a time."""
    cdef Walk c
    cdef Py_ssize_t k = 0, stop
    cdef double s = 0.0
    if term_t is given_term:
        _given_walk(r, theta, w, INFINITY, &s)
        return s
    _walk_start(r, w, &c, mode)
    while True:
        stop = _walk_next(r, &c, mode)
        while k < stop:
            s = s + theta[k] * r.zero[k]
            k += 1
        if stop == r.K:
            return s
        s = s + theta[k] * _walk_take(r, &c, k, mode)
        k += 1


cdef inline Py_ssize_t _alpha_walk(const Rows* r, const double* alpha, const double* az,
                                   int32_t w, double u, double* total,
                                   term_t mode) noexcept nogil:
    """The first k with u < sum_{k' <= k} alpha_k' phi-hat_k'w, summed in ascending k (``az``
    = alpha_k times the zero-count weight, the same product), or K - 1 when there is none
    (u = inf: the whole sum, left in ``total``)."""
    cdef Walk c
    cdef Py_ssize_t k = 0, stop
    cdef double acc = 0.0
    if term_t is given_term:
        return _given_walk(r, alpha, w, u, total)
    _walk_start(r, w, &c, mode)
    while True:
        stop = _walk_next(r, &c, mode)
        while k < stop:
            acc = acc + az[k]
            if u < acc:
                return k
            k += 1
        if stop == r.K:
            total[0] = acc
            return r.K - 1
        acc = acc + alpha[k] * _walk_take(r, &c, k, mode)
        if u < acc:
            return k
        k += 1


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


cdef struct FoldBuffers:
    # what fold_in_probabilities allocates (freed by _fold_buffers_free)
    bitgen_t** gens             # (C) the chunks' bit generators
    DocScratch* sc              # one per thread
    double** rows               # one 2 K row per thread: theta-hat, then the overlay row of
                                # the token sampled (zero but while a token is sampled)
    double* block               # den, zero, az (K each), then acum (V)
    double* den                 # (K) in block
    double* zero                # (K) in block
    double* az                  # (K) in block
    double* acum                # (V) in block
    uint8_t* used               # (V) 1 = the word is observed in an active document
    int threads


cdef void _sample_doc(const Fold* f, DocScratch* s, double* theta, double* o_row,
                      Py_ssize_t d, bitgen_t* gen, term_t mode) noexcept nogil:
    """Document d on its observed tokens: the bucket path of ``sample_document`` with the
    weights read from the rows (and the overlay, spread into ``o_row`` per token); then its held-out entries' p-hat (``theta`` a K row), and its
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
            if term_t is overlay_term:
                _spread(r, w, o_row, True)
            for j in range(n_dt):
                rr = rr + s.nd[s.dt[j]] * _weight(r, w, s.dt[j], o_row, mode)
                s.buf[j] = rr
            if term_t is overlay_term:
                _spread(r, w, o_row, False)
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
                k = _alpha_walk(r, f.alpha, f.az, w, u - rr, &unused, mode)
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
        f.out[i] = _mix(r, f.held_words[i], theta, mode)


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
    NumPy adds an int64 count and the float V beta, and beta / that. The word terms are
    :func:`_terms_init`'s."""
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
    r.V = V
    return 0


cdef int _terms_init(Rows* r, const int64_t[::1] nk, const int64_t[::1] prior_ptr,
                     const int32_t[::1] prior_topic, const double[::1] prior_extra,
                     const double[:, ::1] phi, double* den, double* zero) except -1:
    """Check the word terms and attach them (or none) to rows :func:`_rows_init` made: a given
    phi (K x V); or an overlay, whose beta-bar_k = V beta + sum_w o_wk (CSR order, as the
    samplers form it) replaces V beta in ``den`` (n_k + beta-bar_k) and ``zero``."""
    cdef Py_ssize_t K = r.K, V = r.V, k
    check_terms(prior_ptr, prior_topic, prior_extra, phi)
    r.phi = NULL
    if phi is not None:
        check_phi(phi, K, V)
        r.phi = &phi[0, 0] if K > 0 and V > 0 else NULL
    if attach_overlay(prior_ptr, prior_topic, prior_extra, V, K, &r.o_ptr, &r.o_topic,
                      &r.o_extra):
        beta_bar(V, K, r.beta, r.o_ptr, r.o_topic, r.o_extra, den)
        for k in range(K):
            den[k] = nk[k] + den[k]
            zero[k] = r.beta / den[k]
    return 0


cdef Py_ssize_t _check_fold(const int64_t[::1] obs_ptr, const int32_t[::1] obs_words,
                            const int64_t[::1] held_ptr, const int32_t[::1] held_words,
                            Py_ssize_t V, Py_ssize_t K, const double[::1] alpha, int n_sweeps,
                            int n_burn, const int64_t[::1] chunk_bounds, list streams,
                            const uint8_t[::1] active, const double[::1] out,
                            double[:, ::1] theta_out) except -1:
    """Refuse documents, entries and outputs that do not fit together; the length of the
    longest observed document (at least 1), for the scratch buffers."""
    cdef Py_ssize_t D = obs_ptr.shape[0] - 1, C = chunk_bounds.shape[0] - 1, d, max_len = 1
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
    return max_len


cdef int _fold_buffers_alloc(FoldBuffers* b, list streams, Py_ssize_t V, Py_ssize_t K,
                             Py_ssize_t max_len) except -1:
    """Allocate every buffer of the fold-in (``b`` zeroed before: what was allocated when
    this raises is freed by :func:`_fold_buffers_free`) and take the chunks' bit generators."""
    cdef Py_ssize_t c, C = len(streams)
    b.block = <double*> _alloc(3 * K + V, sizeof(double))
    b.den = b.block
    b.zero = b.block + K
    b.az = b.block + 2 * K
    b.acum = b.block + 3 * K
    b.used = <uint8_t*> _alloc(V, sizeof(uint8_t), True)
    b.gens = <bitgen_t**> _alloc(C, sizeof(bitgen_t*))
    for c in range(C):
        b.gens[c] = bitgen_of(streams[c])
    b.sc = doc_scratch(b.threads, max_len, K)
    b.rows = <double**> _alloc(b.threads, sizeof(double*), True)
    for c in range(b.threads):
        b.rows[c] = <double*> _alloc(2 * K, sizeof(double), True)
    return 0


cdef void _fold_buffers_free(FoldBuffers* b) noexcept:
    """Free what :func:`_fold_buffers_alloc` allocated, also when it did not finish."""
    doc_scratch_free(b.sc, b.threads)
    free_rows(<void**> b.rows, b.threads)
    free(b.block)
    free(b.used)
    free(b.gens)


cdef void _fold_docs(Fold* f, FoldBuffers* b, const int64_t* chunk_bounds, Py_ssize_t D,
                     Py_ssize_t C, term_t mode) noexcept nogil:
    """The alpha-bucket totals of the words observed in active documents, NaN for the
    skipped documents' outputs, then every active document folded in, chunk by chunk."""
    cdef Py_ssize_t K = f.rows.K, V = f.rows.V, c, d, k
    cdef int64_t j
    cdef int tid, threads = b.threads
    # the alpha-bucket total of every word observed, in ascending k (alpha_buckets)
    for d in range(D):
        if f.active[d]:
            for j in range(f.obs_ptr[d], f.obs_ptr[d + 1]):
                b.used[f.obs_words[j]] = 1
    for c in prange(V, schedule="static", num_threads=threads):
        if b.used[c]:
            _alpha_walk(&f.rows, f.alpha, f.az, <int32_t> c, INFINITY, &b.acum[c], mode)
    for d in range(D):
        if not f.active[d]:
            for j in range(f.held_ptr[d], f.held_ptr[d + 1]):
                f.out[j] = NAN
            if f.theta_out != NULL:
                for k in range(K):
                    f.theta_out[d * K + k] = NAN
    with parallel(num_threads=threads):
        tid = threadid()
        for c in prange(C, schedule="dynamic", chunksize=1):
            for d in range(chunk_bounds[c], chunk_bounds[c + 1]):
                if f.active[d]:
                    _sample_doc(f, &b.sc[tid], b.rows[tid], b.rows[tid] + K, d, b.gens[c],
                                mode)


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
                          double[:, ::1] theta_out=None,  # OUT (D, K) theta-hat, if given
                          const int64_t[::1] prior_ptr=None,    # IN  (V + 1) overlay, or None
                          const int32_t[::1] prior_topic=None,  # IN  its topics, ascending
                          const double[::1] prior_extra=None,   # IN  its extra prior o_wk >= 0
                          const double[:, ::1] phi=None):       # IN  (K, V) given phi, or None
    """p-hat of the held-out entries of the documents: the Gibbs fold-in of
    ``_heldout.fold_in_theta`` with the weights phi-hat of the rows and one prior for every
    document, then sum_k theta-hat_dk phi-hat_kw. Equal, bit for bit, to ``fold_in_theta``
    with the dense phi-hat followed by ``_heldout.mixture_probabilities``; the entries of skipped
    documents are NaN (their theta-hat is). With ``theta_out``, also theta-hat itself (NaN
    rows for skipped documents), equal to ``fold_in_theta``'s. One stream per chunk, so the
    result does not depend on ``threads``. With an overlay o the weights are ((n_kw + beta) +
    o_wk) / (n_k + beta-bar_k), with a given ``phi`` they are phi[k, w] (the counts unread):
    the dense path's numbers with that phi-hat (the twin's ``WordTerm.matrix``)."""
    cdef Py_ssize_t D = obs_ptr.shape[0] - 1, K = nk.shape[0], V = ptr.shape[0] - 1
    cdef Py_ssize_t C = chunk_bounds.shape[0] - 1, max_len, k
    cdef Fold f
    cdef FoldBuffers b = FoldBuffers(gens=NULL, sc=NULL, rows=NULL, block=NULL, den=NULL,
                                     zero=NULL, az=NULL, acum=NULL, used=NULL,
                                     threads=max(threads, 1))
    max_len = _check_fold(obs_ptr, obs_words, held_ptr, held_words, V, K, alpha, n_sweeps,
                          n_burn, chunk_bounds, streams, active, out, theta_out)
    try:
        _fold_buffers_alloc(&b, streams, V, K, max_len)
        _rows_init(&f.rows, ptr, topic, count, nk, beta, b.den, b.zero)
        _terms_init(&f.rows, nk, prior_ptr, prior_topic, prior_extra, phi, b.den, b.zero)
        for k in range(K):
            b.az[k] = alpha[k] * b.zero[k]
        f.obs_ptr = &obs_ptr[0]
        f.obs_words = &obs_words[0] if obs_words.shape[0] > 0 else NULL
        f.held_ptr = &held_ptr[0]
        f.held_words = &held_words[0] if held_words.shape[0] > 0 else NULL
        f.active = &active[0] if D > 0 else NULL
        f.alpha = &alpha[0]
        f.acum = b.acum
        f.az = b.az
        f.n_sweeps = n_sweeps
        f.n_burn = n_burn
        f.out = &out[0] if out.shape[0] > 0 else NULL
        f.theta_out = &theta_out[0, 0] if theta_out is not None and D > 0 and K > 0 else NULL
        with nogil:
            if f.rows.phi != NULL:
                _fold_docs(&f, &b, &chunk_bounds[0], D, C, <given_term> NULL)
            elif f.rows.o_ptr != NULL:
                _fold_docs(&f, &b, &chunk_bounds[0], D, C, <overlay_term> NULL)
            else:
                _fold_docs(&f, &b, &chunk_bounds[0], D, C, <plain_term> NULL)
    finally:
        _fold_buffers_free(&b)


cdef void _mix_docs(const Rows* rows, const int64_t[::1] held_ptr,
                    const int32_t[::1] held_words, const int64_t[::1] doc_ptr,
                    const int32_t[::1] doc_topic, const int32_t[::1] doc_count,
                    const double[::1] alpha, double alpha_sum, double** theta, double[::1] out,
                    int threads, term_t mode) noexcept nogil:
    """p-hat of every entry, document by document: theta-hat from the document's non-zero
    counts into its thread's K row, then the entries' mixtures."""
    cdef Py_ssize_t D = held_ptr.shape[0] - 1, K = rows.K, d, k
    cdef int64_t j, n_d
    cdef double denom
    cdef int tid
    with parallel(num_threads=threads):
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
                out[j] = _mix(rows, held_words[j], theta[tid], mode)


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
                          int threads,
                          const int64_t[::1] prior_ptr=None,    # IN  (V + 1) overlay, or None
                          const int32_t[::1] prior_topic=None,  # IN  its topics, ascending
                          const double[::1] prior_extra=None,   # IN  its extra prior o_wk >= 0
                          const double[:, ::1] phi=None):       # IN  (K, V) given phi, or None
    """p-hat = sum_k theta-hat_dk phi-hat_kw of every entry, theta-hat_dk = (n_dk + alpha_k) /
    (N_d + alpha_sum) from document d's non-zero counts (N_d their sum), in ascending k:
    equal, bit for bit, to forming the dense theta-hat and phi-hat and calling
    ``_heldout.mixture_probabilities``. The word terms as in :func:`fold_in_probabilities`."""
    cdef Py_ssize_t D = held_ptr.shape[0] - 1, K = nk.shape[0], V = ptr.shape[0] - 1
    cdef Rows rows
    cdef double* den = NULL
    cdef double* zero = NULL
    cdef double** theta = NULL
    cdef int t
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
        _terms_init(&rows, nk, prior_ptr, prior_topic, prior_extra, phi, den, zero)
        with nogil:
            if rows.phi != NULL:
                _mix_docs(&rows, held_ptr, held_words, doc_ptr, doc_topic, doc_count, alpha,
                          alpha_sum, theta, out, threads, <given_term> NULL)
            elif rows.o_ptr != NULL:
                _mix_docs(&rows, held_ptr, held_words, doc_ptr, doc_topic, doc_count, alpha,
                          alpha_sum, theta, out, threads, <overlay_term> NULL)
            else:
                _mix_docs(&rows, held_ptr, held_words, doc_ptr, doc_topic, doc_count, alpha,
                          alpha_sum, theta, out, threads, <plain_term> NULL)
    finally:
        free_rows(<void**> theta, threads)
        free(den)
        free(zero)
