# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The dynamic topic model's token kernels (docs/algorithms.md §14).

Given every document's topic proportions theta_d and every slice's topics, the topic of each
token is drawn on its own: p(z_di = k) is proportional to theta_dk phi_{t_d, k, w_di}
(nothing is collapsed, so no count changes while a document is sampled and the documents are
independent). ``sample_topics`` draws them exactly, O(K) per token (once for a run of tokens of
one word, as bag-of-words input stores them), in chunks of consecutive
documents, each chunk from its own stream, so the draws do not depend on the threads;
``slice_word_counts`` adds the tokens up per slice, word and topic (integer sums, the same in
any order). NumPy twins: ``tests/reference/dtm.py``.
"""
from cython.parallel cimport parallel, prange, threadid
from libc.stdint cimport int32_t, int64_t, uint32_t, uint64_t
from libc.math cimport exp, log, sqrt
from libc.stdlib cimport free

from numpy.random cimport bitgen_t

from topictk._cy.alloc cimport checked_alloc as _alloc
from topictk._cy.rng cimport (Xoshiro, bitgen_of, search_cumulative, xoshiro_next, xoshiro_seed,
                              xoshiro_uniform)


def sample_topics(const int64_t[::1] doc_ptr,          # IN  (D + 1) token offsets
                  const int32_t[::1] words,            # IN  (N) word ids
                  const int32_t[::1] doc_slice,        # IN  (D) the slice of every document
                  const double[:, ::1] theta,          # IN  (D, K) topic proportions
                  const double[:, :, ::1] word_topic,  # IN  (T, V, K) phi_{t,k,w}, word-major
                  const int64_t[::1] chunk_bounds,     # IN  (C + 1) document bounds of chunks
                  list streams,                        # IN  C bit generators, one per chunk
                  int32_t[::1] z,                      # OUT (N) topics
                  int32_t[:, ::1] doc_topic,           # OUT (D, K) n_dk
                  int threads,
                  const unsigned char[::1] active=None):  # IN (D) documents to draw; None: all
    """Draw every token's topic from theta_dk phi_{t_d, k, w} (each chunk seeds a xoshiro256+
    generator from its stream, then u < cumulative / total picks the topic, as
    :func:`topictk._cy.rng.search_cumulative` does) and write n_dk of the documents drawn."""
    cdef Py_ssize_t D = doc_ptr.shape[0] - 1, K = theta.shape[1], C = chunk_bounds.shape[0] - 1
    cdef Py_ssize_t T = word_topic.shape[0], V = word_topic.shape[1]
    cdef Py_ssize_t c, d, i, k, n_threads, tid
    cdef int32_t w, s, last
    cdef double total
    cdef const double* row
    cdef const double* th
    cdef double* cum
    cdef double* scratch = NULL
    cdef bitgen_t** gens = NULL
    cdef Xoshiro* xs = NULL
    cdef Xoshiro* x
    cdef int64_t errors = 0
    if len(streams) != C:
        raise ValueError(f"{C} chunks need {C} streams, got {len(streams)}")
    if (theta.shape[0] != D or doc_slice.shape[0] != D or doc_topic.shape[0] != D
            or doc_topic.shape[1] != K or word_topic.shape[2] != K or z.shape[0] != words.shape[0]
            or (active is not None and active.shape[0] != D)):
        raise ValueError("the documents, theta, topics and outputs do not fit together")
    if C > 0 and (chunk_bounds[0] != 0 or chunk_bounds[C] != D):
        raise ValueError("the chunks must cover the documents")
    n_threads = threads if threads >= 1 else 1
    if n_threads > C:
        n_threads = C if C > 0 else 1
    try:
        gens = <bitgen_t**> _alloc(C if C > 0 else 1, sizeof(bitgen_t*))
        for c in range(C):
            gens[c] = bitgen_of(streams[c])
        scratch = <double*> _alloc(n_threads * K, sizeof(double))
        xs = <Xoshiro*> _alloc(n_threads, sizeof(Xoshiro))
        with nogil, parallel(num_threads=n_threads):
            tid = threadid()
            cum = scratch + tid * K
            x = xs + tid
            for c in prange(C, schedule="dynamic", chunksize=1):
                xoshiro_seed(x, gens[c])
                for d in range(chunk_bounds[c], chunk_bounds[c + 1]):
                    if active is not None and not active[d]:
                        continue
                    s = doc_slice[d]
                    if s < 0 or s >= T:
                        errors += 1
                        continue
                    th = &theta[d, 0]
                    for k in range(K):
                        doc_topic[d, k] = 0
                    last = -1
                    for i in range(doc_ptr[d], doc_ptr[d + 1]):
                        w = words[i]
                        if w < 0 or w >= V:
                            errors += 1
                            continue
                        if w != last:       # a word's tokens in a row share their weights
                            row = &word_topic[s, w, 0]
                            total = 0.0
                            for k in range(K):
                                total = total + th[k] * row[k]
                                cum[k] = total
                            last = w
                        k = search_cumulative(cum, K, xoshiro_uniform(x) * total)
                        z[i] = <int32_t> k
                        doc_topic[d, k] += 1
    finally:
        free(xs)
        free(scratch)
        free(gens)
    if errors:
        raise ValueError("a document's slice or a word id is outside the topics' arrays")


def slice_word_counts(const int64_t[::1] doc_ptr, const int32_t[::1] words,
                      const int32_t[::1] doc_slice, const int32_t[::1] z,
                      int32_t[:, :, ::1] counts):
    """n_{t,w,k} (T, V, K), zeroed here: the tokens of slice t, word w and topic k."""
    cdef Py_ssize_t D = doc_ptr.shape[0] - 1, T = counts.shape[0], V = counts.shape[1]
    cdef Py_ssize_t K = counts.shape[2], d, i
    cdef int32_t s, w, k
    cdef bint bad = False
    if doc_slice.shape[0] != D or z.shape[0] != words.shape[0]:
        raise ValueError("the documents, their slices and z do not fit together")
    with nogil:
        for i in range(T * V * K):
            (&counts[0, 0, 0])[i] = 0
        for d in range(D):
            s = doc_slice[d]
            if s < 0 or s >= T:
                bad = True
                break
            for i in range(doc_ptr[d], doc_ptr[d + 1]):
                w = words[i]
                k = z[i]
                if w < 0 or w >= V or k < 0 or k >= K:
                    bad = True
                    break
                counts[s, w, k] += 1
            if bad:
                break
    if bad:
        raise ValueError("a slice, word or topic is outside the counts")


# ------------------------------------------------------------------ normal draws
# Marsaglia & Tsang's ziggurat (2000) with 128 boxes, fed by xoshiro256+: the upper 32 bits of
# an output are the signed draw, its lowest 7 bits the box (independent bits, which the
# 32-bit original shares). The tables are made once, when the module is loaded.
cdef double _ZIG_R = 3.442619855899
cdef uint32_t _kn[128]
cdef double _wn[128]
cdef double _fn[128]


cdef void _ziggurat_tables():
    cdef double m1 = 2147483648.0, vn = 9.91256303526217e-3
    cdef double dn = _ZIG_R, tn = _ZIG_R, q
    cdef int i
    q = vn / exp(-0.5 * dn * dn)
    _kn[0] = <uint32_t> ((dn / q) * m1)
    _kn[1] = 0
    _wn[0] = q / m1
    _wn[127] = dn / m1
    _fn[0] = 1.0
    _fn[127] = exp(-0.5 * dn * dn)
    for i in range(126, 0, -1):
        dn = sqrt(-2.0 * log(vn / dn + exp(-0.5 * dn * dn)))
        _kn[i + 1] = <uint32_t> ((dn / tn) * m1)
        tn = dn
        _fn[i] = exp(-0.5 * dn * dn)
        _wn[i] = dn / m1


_ziggurat_tables()


def ziggurat_tables():
    """(kn, wn, fn): the ziggurat's tables, for the NumPy twin."""
    return ([int(_kn[i]) for i in range(128)], [_wn[i] for i in range(128)],
            [_fn[i] for i in range(128)])


cdef inline double _open_uniform(Xoshiro* x) noexcept nogil:
    """U(0, 1]: 1 - U[0, 1)."""
    return 1.0 - xoshiro_uniform(x)


cdef double _normal_tail(Xoshiro* x, int32_t hz, int iz) noexcept nogil:
    """The ziggurat's slow path: the base strip's tail, or a wedge test, else a new draw."""
    cdef double u, v, y
    cdef uint64_t r
    cdef int64_t a
    while True:
        u = hz * _wn[iz]
        if iz == 0:
            while True:
                u = -log(_open_uniform(x)) / _ZIG_R
                y = -log(_open_uniform(x))
                if y + y >= u * u:
                    break
            return _ZIG_R + u if hz > 0 else -_ZIG_R - u
        if _fn[iz] + xoshiro_uniform(x) * (_fn[iz - 1] - _fn[iz]) < exp(-0.5 * u * u):
            return u
        r = xoshiro_next(x)
        hz = <int32_t> <uint32_t> (r >> 32)
        iz = <int> (r & 127)
        a = hz
        if (a if a >= 0 else -a) < _kn[iz]:
            return hz * _wn[iz]


cdef inline double _normal(Xoshiro* x) noexcept nogil:
    """A standard normal draw."""
    cdef uint64_t r = xoshiro_next(x)
    cdef int32_t hz = <int32_t> <uint32_t> (r >> 32)
    cdef int iz = <int> (r & 127)
    cdef int64_t a = hz
    if (a if a >= 0 else -a) < _kn[iz]:
        return hz * _wn[iz]
    return _normal_tail(x, hz, iz)


def standard_normals(object stream, double[::1] out):
    """Fill ``out`` with standard normals from a xoshiro256+ seeded from ``stream`` (as
    :func:`phi_step` draws a slice's noise)."""
    cdef Xoshiro x
    cdef Py_ssize_t i
    xoshiro_seed(&x, bitgen_of(stream))
    with nogil:
        for i in range(out.shape[0]):
            out[i] = _normal(&x)


def phi_step(const double[:, :, ::1] phi,          # IN  (T, V, K) natural parameters
             const int32_t[:, :, ::1] counts,      # IN  (T, V, K) n_{t,w,k}
             const double[:, :, ::1] prob,         # IN  (T, V, K) softmax of phi over w
             const double[::1] first_mean,         # IN  (V) the first slice's prior mean
             list streams,                         # IN  T bit generators, or None: no noise
             double eps, double variance, double first_variance,
             double[:, :, ::1] new_phi,            # OUT (T, V, K) phi after the step
             double[:, :, ::1] new_prob,           # OUT (T, V, K) softmax of new_phi over w
             int threads):
    """One preconditioned Langevin step of every slice's topics (docs/algorithms.md §14.2)
    from the old ``phi`` (every slice reads its neighbours' old values, so the slices are
    independent and run in parallel): gradient n_{t,w,k} - n_{t,k} p_{t,w,k} plus the
    random walk's pull, curvature max(n_{t,w,k}, n_{t,k} p_{t,w,k}) + the walk's precision,
    x += eps g / c + sqrt(2 eps / c) xi, slice t's normals xi drawn in storage order (w
    outer, k inner) by the ziggurat from a xoshiro256+ seeded from ``streams[t]``; then the
    new word probabilities."""
    cdef Py_ssize_t T = phi.shape[0], V = phi.shape[1], K = phi.shape[2]
    cdef Py_ssize_t t, w, k, n_threads, tid, base
    cdef double prec, lw, rw, xk, nk, e, c, step, y, root2eps
    cdef double* buffers = NULL
    cdef double* totals
    cdef double* top
    cdef double* sums
    cdef double* noise
    cdef double* fill
    cdef const double* left
    cdef const double* right
    cdef Xoshiro* xs = NULL
    cdef bitgen_t** gens = NULL
    cdef bint draw = streams is not None
    if (counts.shape[0] != T or counts.shape[1] != V or counts.shape[2] != K
            or prob.shape[0] != T or prob.shape[1] != V or prob.shape[2] != K
            or new_phi.shape[0] != T or new_phi.shape[1] != V or new_phi.shape[2] != K
            or new_prob.shape[0] != T or new_prob.shape[1] != V or new_prob.shape[2] != K
            or first_mean.shape[0] != V):
        raise ValueError("phi, counts, prob, the first mean and the outputs do not fit together")
    if draw and len(streams) != T:
        raise ValueError(f"{T} slices need {T} streams, got {len(streams)}")
    n_threads = threads if threads >= 1 else 1
    if n_threads > T:
        n_threads = T if T > 0 else 1
    try:
        gens = <bitgen_t**> _alloc(T if T > 0 else 1, sizeof(bitgen_t*))
        if draw:
            for t in range(T):
                gens[t] = bitgen_of(streams[t])
        xs = <Xoshiro*> _alloc(n_threads, sizeof(Xoshiro))
        # per thread: n_k, the largest new phi, scratch sums, K normals, K first means
        buffers = <double*> _alloc(n_threads * 5 * K, sizeof(double))
        with nogil, parallel(num_threads=n_threads):
            tid = threadid()
            totals = buffers + tid * 5 * K
            top = totals + K
            sums = top + K
            noise = sums + K
            fill = noise + K
            for t in prange(T, schedule="static", chunksize=1):
                if draw:
                    xoshiro_seed(&xs[tid], gens[t])
                if t == 0:
                    lw = 1.0 / first_variance
                else:
                    lw = 1.0 / variance
                rw = 1.0 / variance if t + 1 < T else 0.0
                prec = lw + rw
                for k in range(K):
                    totals[k] = 0.0
                    top[k] = -1e308
                    noise[k] = 0.0
                for w in range(V):
                    for k in range(K):
                        totals[k] = totals[k] + counts[t, w, k]
                for w in range(V):
                    base = (t * V + w) * K
                    if t == 0:
                        for k in range(K):
                            fill[k] = first_mean[w]
                        left = fill
                    else:
                        left = &phi[t - 1, w, 0]
                    right = &phi[t + 1, w, 0] if t + 1 < T else &phi[t, w, 0]
                    if draw:
                        for k in range(K):
                            noise[k] = _normal(&xs[tid])
                    root2eps = sqrt(2.0 * eps)
                    _langevin_row(&phi[t, w, 0], left, right, &counts[t, w, 0],
                                  &prob[t, w, 0], totals, noise, lw, rw, prec, eps, root2eps,
                                  &new_phi[t, w, 0], top, K)
                _softmax_slice(&new_phi[t, 0, 0], &new_prob[t, 0, 0], V, K, top, sums)
    finally:
        free(buffers)
        free(xs)
        free(gens)


cdef inline void _langevin_row(const double* x, const double* left, const double* right,
                               const int32_t* n, const double* p, const double* totals,
                               const double* noise, double lw, double rw, double prec,
                               double eps, double root2eps, double* out, double* top,
                               Py_ssize_t K) noexcept nogil:
    """One word's row of :func:`phi_step` (branch-free, so that the compiler vectorises it):
    the walk's pull towards ``left`` (weight ``lw``) and ``right`` (``rw``)."""
    cdef Py_ssize_t k
    cdef double xk, nk, e, c, g, step, y
    for k in range(K):
        xk = x[k]
        nk = n[k]
        e = totals[k] * p[k]
        g = nk - e + (left[k] - xk) * lw + (right[k] - xk) * rw
        c = (nk if nk > e else e) + prec
        step = eps / c
        y = xk + step * g + root2eps * sqrt(1.0 / c) * noise[k]
        out[k] = y
        top[k] = y if y > top[k] else top[k]


cdef inline void _softmax_slice(const double* phi, double* prob, Py_ssize_t V, Py_ssize_t K,
                                const double* top, double* sums) noexcept nogil:
    """prob = exp(phi - top) / its sum over the words, per topic, of one slice (V, K);
    ``top`` the topics' largest phi, ``sums`` K doubles of scratch."""
    cdef Py_ssize_t w, k
    cdef double e
    for k in range(K):
        sums[k] = 0.0
    for w in range(V):
        for k in range(K):
            e = exp(phi[w * K + k] - top[k])
            prob[w * K + k] = e
            sums[k] = sums[k] + e
    for k in range(K):
        sums[k] = 1.0 / sums[k]
    for w in range(V):
        for k in range(K):
            prob[w * K + k] = prob[w * K + k] * sums[k]


def word_probabilities(const double[:, :, ::1] phi, double[:, :, ::1] prob, int threads):
    """prob (T, V, K) = softmax of phi over the words, per slice and topic: the numbers
    :func:`phi_step` writes as ``new_prob`` for the phi it writes."""
    cdef Py_ssize_t T = phi.shape[0], V = phi.shape[1], K = phi.shape[2]
    cdef Py_ssize_t t, w, k, n_threads, tid
    cdef double* buffers = NULL
    cdef double* top
    cdef double* sums
    if prob.shape[0] != T or prob.shape[1] != V or prob.shape[2] != K:
        raise ValueError("phi and prob differ in shape")
    n_threads = threads if threads >= 1 else 1
    if n_threads > T:
        n_threads = T if T > 0 else 1
    try:
        buffers = <double*> _alloc(n_threads * 2 * K, sizeof(double))
        with nogil, parallel(num_threads=n_threads):
            tid = threadid()
            top = buffers + tid * 2 * K
            sums = top + K
            for t in prange(T, schedule="static", chunksize=1):
                for k in range(K):
                    top[k] = -1e308
                for w in range(V):
                    for k in range(K):
                        if phi[t, w, k] > top[k]:
                            top[k] = phi[t, w, k]
                _softmax_slice(&phi[t, 0, 0], &prob[t, 0, 0], V, K, top, sums)
    finally:
        free(buffers)
