# cython: language_level=3
"""WarpLDA kernels for collapsed Gibbs LDA (docs/algorithms.md §2.9).

* :func:`warp_start` -- the generation-only document pass that gives every token its first
  ``steps`` document proposals. Equivalent to ``tests/reference/warp.py::start``.
* :func:`warp_sweep` -- one sweep: a word phase (word by word: the document proposals
  accepted or refused against the word's counts, then new word proposals) and a document
  phase (document by document: the word proposals accepted or refused against the
  document's counts, then new document proposals). Equivalent to
  ``tests/reference/warp.py::sweep``.

Every MH step reads the counts of one word or one document, built in a dense K scratch row
that stays in cache, and the topic totals n_k; there are no D x K or V x K counts. Each chunk
of a phase works on its own copy of n_k from the start of the phase and draws from its own
stream; the chunks' changes are added at the end of the phase, so the result depends on the
chunking only, never on the number of threads. Every buffer is allocated and checked before
the sampling and freed after it on every path.
"""
from cython.parallel cimport parallel, prange, threadid
from libc.stdint cimport int32_t, int64_t
from libc.stdlib cimport free, qsort
from libc.string cimport memcpy

import numpy as np
from numpy.random cimport bitgen_t

from topictk._cy.alias cimport alias_build, alias_draw
from topictk._cy.alloc cimport checked_alloc as _alloc
from topictk._cy.rng cimport bitgen_of, next_uniform


cdef extern from *:
    """
    #if defined(__GNUC__)
    #define TOPICTK_PREFETCH(p) __builtin_prefetch((const void*) (p))
    #else
    #define TOPICTK_PREFETCH(p) ((void) 0)
    #endif
    """
    void prefetch "TOPICTK_PREFETCH"(const void* p) noexcept nogil


# a token's position in the corpus: int32 when the corpus has fewer than 2^31 tokens (half the
# memory of the word order), else int64
ctypedef fused position_t:
    int32_t
    int64_t


# tokens ahead whose topic and proposals the word phase asks the cache for
cdef Py_ssize_t AHEAD = 8


cdef struct Warp:
    # what a sweep reads and writes: the tokens in both orders, the chain and the prior
    const int64_t* doc_ptr      # (D + 1)
    const int64_t* word_ptr     # (V + 1) offsets into word_tokens
    const void* word_tokens     # (N) token positions grouped by word, int32 or int64
    bint narrow                 # word_tokens holds int32
    const int32_t* word_list    # (V) the words of word chunk c: word_list[wbounds[c]:...]
    const int64_t* wbounds      # (C + 1)
    const int64_t* dbounds      # (C + 1) document boundaries of the chunks
    int32_t* z                  # (N)
    int32_t* prop               # (N, M) pending proposals, document order
    const double* alpha         # (K)
    double alpha_sum
    bint symmetric              # every alpha_k equal: a prior draw is a uniform topic
    double* alpha_prob          # (K) alias table of alpha (asymmetric alpha)
    int32_t* alpha_alias        # (K)
    double beta
    double vbeta
    Py_ssize_t K
    int M


cdef struct Workspace:
    # everything one call allocates, all of it before the sampling starts
    Py_ssize_t C
    int threads
    bitgen_t** gens             # (C) the streams of the phase's chunks
    int64_t* start_nk           # (K) n_k at the start of the phase
    int64_t** own_nk            # (C) each chunk's n_k (C > 1)
    int32_t** count             # (threads) a zeroed K scratch row
    int32_t** local             # (threads) the topics of one word's tokens
    double* alpha_prob          # (K)
    int32_t* alpha_alias        # (K)
    int32_t* alpha_scratch      # (2 K)


cdef inline int32_t _prior_draw(const Warp* wp, double r) noexcept nogil:
    """A topic from alpha for r uniform in [0, 1): min(floor(r K), K - 1) when alpha is
    symmetric, else the alias draw of alpha with r."""
    cdef Py_ssize_t k
    if wp.symmetric:
        k = <Py_ssize_t> (r * wp.K)
        if k > wp.K - 1:
            k = wp.K - 1
        return <int32_t> k
    return <int32_t> alias_draw(r, wp.alpha_prob, wp.alpha_alias, wp.K)


cdef void _doc_proposals(const Warp* wp, int64_t begin, int64_t end,
                         bitgen_t* gen) noexcept nogil:
    """``M`` new document proposals for every token of [begin, end) (§2.9): one uniform x of
    [0, L_d + alpha_sum) each; x < L_d: the topic of token begin + floor(x), else a topic from
    alpha with r = (x - L_d) / alpha_sum."""
    # the fields in locals: with -fno-strict-aliasing every store would reload them
    cdef double length = end - begin, alpha_sum = wp.alpha_sum
    cdef double total = length + alpha_sum, x
    cdef int64_t i, j, last = end - begin - 1
    cdef int m, M = wp.M
    cdef const int32_t* z = wp.z + begin
    cdef int32_t* prop = wp.prop
    for i in range(begin, end):
        for m in range(M):
            x = next_uniform(gen) * total
            if x < length:
                j = <int64_t> x
                if j > last:
                    j = last
                prop[i * M + m] = z[j]
            else:
                prop[i * M + m] = _prior_draw(wp, (x - length) / alpha_sum)


cdef void _doc_chunk(const Warp* wp, int64_t* nk, int32_t* cd, Py_ssize_t c,
                     bitgen_t* gen) noexcept nogil:
    """The document phase of chunk c on ``nk``; ``cd`` is a zeroed K row, left zeroed."""
    cdef int64_t d, i, begin, end
    cdef int32_t s, t
    cdef int m, M = wp.M
    cdef double u, vbeta = wp.vbeta
    cdef const double* a = wp.alpha
    cdef int32_t* z = wp.z
    cdef const int32_t* prop = wp.prop
    for d in range(wp.dbounds[c], wp.dbounds[c + 1]):
        begin = wp.doc_ptr[d]
        end = wp.doc_ptr[d + 1]
        for i in range(begin, end):
            cd[z[i]] += 1
        for i in range(begin, end):
            s = z[i]
            cd[s] -= 1
            nk[s] -= 1
            for m in range(M):
                t = prop[i * M + m]
                u = next_uniform(gen)
                if t != s and (u * (cd[s] + a[s]) * (nk[t] + vbeta)
                               < (cd[t] + a[t]) * (nk[s] + vbeta)):
                    s = t
            cd[s] += 1
            nk[s] += 1
            z[i] = s
        _doc_proposals(wp, begin, end, gen)
        for i in range(begin, end):
            cd[z[i]] = 0


cdef void _word_chunk(const Warp* wp, int64_t* nk, int32_t* cw, int32_t* zl, Py_ssize_t c,
                      bitgen_t* gen) noexcept nogil:
    """The word phase of word chunk c on ``nk``; ``cw`` is a zeroed K row, left zeroed, and
    ``zl`` holds the topics of the longest word's tokens."""
    if wp.narrow:
        _word_chunk_of(wp, nk, cw, zl, c, gen, <const int32_t*> wp.word_tokens)
    else:
        _word_chunk_of(wp, nk, cw, zl, c, gen, <const int64_t*> wp.word_tokens)


cdef void _word_chunk_of(const Warp* wp, int64_t* nk, int32_t* cw, int32_t* zl, Py_ssize_t c,
                         bitgen_t* gen, const position_t* word_tokens) noexcept nogil:
    """:func:`_word_chunk` with the word order's positions of type position_t."""
    cdef Py_ssize_t q, K = wp.K
    cdef int64_t b, n, j, i, jj
    cdef int32_t w, s, t
    cdef int m, M = wp.M
    cdef double u, x, total, beta = wp.beta, vbeta = wp.vbeta
    cdef const position_t* tok
    cdef int32_t* z = wp.z
    cdef int32_t* prop = wp.prop
    for q in range(wp.wbounds[c], wp.wbounds[c + 1]):
        w = wp.word_list[q]
        b = wp.word_ptr[w]
        n = wp.word_ptr[w + 1] - b
        tok = word_tokens + b
        for j in range(n):
            if j + AHEAD < n:
                prefetch(z + tok[j + AHEAD])
            s = z[tok[j]]
            zl[j] = s
            cw[s] += 1
        for j in range(n):
            i = tok[j]
            if j + AHEAD < n:
                prefetch(prop + tok[j + AHEAD] * M)
            s = zl[j]
            cw[s] -= 1
            nk[s] -= 1
            for m in range(M):
                t = prop[i * M + m]
                u = next_uniform(gen)
                if t != s and (u * (cw[s] + beta) * (nk[t] + vbeta)
                               < (cw[t] + beta) * (nk[s] + vbeta)):
                    s = t
            cw[s] += 1
            nk[s] += 1
            zl[j] = s
        total = n + K * beta
        for j in range(n):
            i = tok[j]
            z[i] = zl[j]
            for m in range(M):
                x = next_uniform(gen) * total
                if x < n:
                    jj = <int64_t> x
                    if jj > n - 1:
                        jj = n - 1
                    prop[i * M + m] = zl[jj]
                else:
                    jj = <int64_t> ((x - n) / beta)
                    if jj > K - 1:
                        jj = K - 1
                    prop[i * M + m] = <int32_t> jj
        for j in range(n):
            cw[zl[j]] = 0


cdef void _workspace_free(Workspace* ws) noexcept nogil:
    """Free everything :func:`_workspace_init` allocated, whether it finished or not."""
    cdef Py_ssize_t t
    if ws.own_nk != NULL:
        for t in range(ws.C):
            free(ws.own_nk[t])
    if ws.count != NULL:
        for t in range(ws.threads):
            free(ws.count[t])
    if ws.local != NULL:
        for t in range(ws.threads):
            free(ws.local[t])
    free(ws.own_nk)
    free(ws.count)
    free(ws.local)
    free(ws.gens)
    free(ws.start_nk)
    free(ws.alpha_prob)
    free(ws.alpha_alias)
    free(ws.alpha_scratch)


cdef int _workspace_init(Workspace* ws, Warp* wp, Py_ssize_t C, list doc_streams,
                         list word_streams, int threads, Py_ssize_t longest) except -1:
    """Streams (both phases': ``gens`` holds the document chunks' then the word chunks') and
    every buffer (``ws`` zeroed by the caller, freed by :func:`_workspace_free` also when this
    raises); the alias table of alpha when it is asymmetric."""
    cdef Py_ssize_t c, K = wp.K, k
    if C < 1:
        raise ValueError("a sweep needs at least one chunk")
    if len(doc_streams) != C or (word_streams is not None and len(word_streams) != C):
        raise ValueError(f"{C} chunks need {C} streams per phase")
    ws.C = C
    ws.threads = 1 if threads < 1 else (<int> C if threads > C else threads)
    ws.gens = <bitgen_t**> _alloc(2 * C, sizeof(bitgen_t*))
    for c in range(C):
        ws.gens[c] = bitgen_of(doc_streams[c])
        ws.gens[C + c] = bitgen_of(word_streams[c] if word_streams is not None
                                   else doc_streams[c])
    ws.start_nk = <int64_t*> _alloc(K, sizeof(int64_t))
    ws.own_nk = <int64_t**> _alloc(C, sizeof(int64_t*), True)
    for c in range(C):
        ws.own_nk[c] = <int64_t*> _alloc(K, sizeof(int64_t))
    ws.count = <int32_t**> _alloc(ws.threads, sizeof(int32_t*), True)
    ws.local = <int32_t**> _alloc(ws.threads, sizeof(int32_t*), True)
    for c in range(ws.threads):
        ws.count[c] = <int32_t*> _alloc(K, sizeof(int32_t), True)
        ws.local[c] = <int32_t*> _alloc(longest, sizeof(int32_t))
    wp.alpha_sum = 0.0
    wp.symmetric = True
    for k in range(K):
        wp.alpha_sum += wp.alpha[k]
        if wp.alpha[k] != wp.alpha[0]:
            wp.symmetric = False
    if not wp.symmetric:
        ws.alpha_prob = <double*> _alloc(K, sizeof(double))
        ws.alpha_alias = <int32_t*> _alloc(K, sizeof(int32_t))
        ws.alpha_scratch = <int32_t*> _alloc(2 * K, sizeof(int32_t))
        alias_build(wp.alpha, K, wp.alpha_sum, ws.alpha_prob, ws.alpha_alias,
                    ws.alpha_scratch, ws.alpha_scratch + K)
        wp.alpha_prob = ws.alpha_prob
        wp.alpha_alias = ws.alpha_alias
    return 0


cdef void _phase(const Warp* wp, Workspace* ws, int64_t* nk, bint words) noexcept nogil:
    """One phase over every chunk: with C = 1 on ``nk`` itself; else chunk c on its own copy
    of n_k from the start of the phase, the copies' changes added to ``nk`` after the phase
    in chunk order."""
    cdef Py_ssize_t c, k, C = ws.C, K = wp.K
    cdef int tid
    if C == 1:
        if words:
            _word_chunk(wp, nk, ws.count[0], ws.local[0], 0, ws.gens[1])
        else:
            _doc_chunk(wp, nk, ws.count[0], 0, ws.gens[0])
        return
    memcpy(ws.start_nk, nk, K * sizeof(int64_t))
    for c in range(C):
        memcpy(ws.own_nk[c], nk, K * sizeof(int64_t))
    with parallel(num_threads=ws.threads):
        tid = threadid()
        for c in prange(C, schedule="dynamic", chunksize=1):
            if words:
                _word_chunk(wp, ws.own_nk[c], ws.count[tid], ws.local[tid], c, ws.gens[C + c])
            else:
                _doc_chunk(wp, ws.own_nk[c], ws.count[tid], c, ws.gens[c])
    for c in range(C):
        for k in range(K):
            nk[k] += ws.own_nk[c][k] - ws.start_nk[k]


cdef void _setup(Warp* wp, const int64_t[::1] doc_ptr, int32_t[::1] z, int32_t[:, ::1] prop,
                 const double[::1] alpha, const int64_t[::1] doc_bounds, double beta,
                 Py_ssize_t n_words):
    """The fields every call sets; the word-order fields are left NULL."""
    wp.doc_ptr = &doc_ptr[0]
    wp.z = &z[0] if z.shape[0] > 0 else NULL
    wp.prop = &prop[0, 0] if prop.shape[0] > 0 else NULL
    wp.alpha = &alpha[0]
    wp.dbounds = &doc_bounds[0]
    wp.beta = beta
    wp.vbeta = n_words * beta
    wp.K = alpha.shape[0]
    wp.M = <int> prop.shape[1]
    wp.word_ptr = NULL
    wp.word_tokens = NULL
    wp.narrow = False
    wp.word_list = NULL
    wp.wbounds = NULL
    wp.alpha_prob = NULL
    wp.alpha_alias = NULL


cdef void _start_chunk(const Warp* wp, Py_ssize_t c, bitgen_t* gen) noexcept nogil:
    """The generation step of the document phase for every document of chunk c."""
    cdef int64_t d
    for d in range(wp.dbounds[c], wp.dbounds[c + 1]):
        _doc_proposals(wp, wp.doc_ptr[d], wp.doc_ptr[d + 1], gen)


def warp_start(const int64_t[::1] doc_ptr,      # IN  (D + 1) token offsets
               int32_t[::1] z,                  # IN  (N) topics (not written)
               int32_t[:, ::1] prop,            # OUT (N, M) document proposals
               const double[::1] alpha,         # IN  (K)
               const int64_t[::1] doc_bounds,   # IN  (C + 1) document boundaries of chunks
               list streams,                    # IN  C PCG64 bit generators, one per chunk
               int threads=1):
    """The first document proposals of a chain (§2.9): every document's generation step of
    the document phase, from ``z``, without an MH step. Equivalent to
    ``tests/reference/warp.py::start``."""
    cdef Warp wp
    cdef Workspace ws
    cdef Py_ssize_t C = doc_bounds.shape[0] - 1, c
    if prop.shape[0] != z.shape[0] or prop.shape[1] < 1:
        raise ValueError("prop needs one row of at least one proposal per token")
    _setup(&wp, doc_ptr, z, prop, alpha, doc_bounds, 1.0, 0)
    ws = Workspace(C=0, threads=0, gens=NULL, start_nk=NULL, own_nk=NULL, count=NULL,
                   local=NULL, alpha_prob=NULL, alpha_alias=NULL, alpha_scratch=NULL)
    try:
        _workspace_init(&ws, &wp, C, streams, None, threads, 1)
        with nogil, parallel(num_threads=ws.threads):
            for c in prange(C, schedule="dynamic", chunksize=1):
                _start_chunk(&wp, c, ws.gens[c])
    finally:
        _workspace_free(&ws)


def warp_sweep(const int64_t[::1] doc_ptr,      # IN  (D + 1) token offsets
               const int64_t[::1] word_ptr,     # IN  (V + 1) offsets into word_tokens
               const position_t[::1] word_tokens,  # IN  (N) token positions grouped by word
               const int32_t[::1] word_list,    # IN  (V) words, word chunk after word chunk
               const int64_t[::1] word_bounds,  # IN  (C + 1) offsets of the chunks in word_list
               int32_t[::1] z,                  # IN/OUT (N)
               int32_t[:, ::1] prop,            # IN/OUT (N, M) pending document proposals
               int64_t[::1] nk,                 # IN/OUT (K)
               const double[::1] alpha,         # IN  (K)
               double beta,
               const int64_t[::1] doc_bounds,   # IN  (C + 1) document boundaries of chunks
               list doc_streams,                # IN  C PCG64 bit generators (document phase)
               list word_streams,               # IN  C PCG64 bit generators (word phase)
               int threads=1):
    """One WarpLDA sweep (§2.9): the word phase, then the document phase. ``prop`` holds the
    pending document proposals before and after. Equivalent to
    ``tests/reference/warp.py::sweep``."""
    cdef Warp wp
    cdef Workspace ws
    cdef Py_ssize_t C = doc_bounds.shape[0] - 1, V = word_ptr.shape[0] - 1, w
    cdef Py_ssize_t longest = 1, N = z.shape[0]
    if prop.shape[0] != N or prop.shape[1] < 1 or word_tokens.shape[0] != N:
        raise ValueError("prop and word_tokens need one row per token")
    if nk.shape[0] != alpha.shape[0] or word_list.shape[0] != V:
        raise ValueError("nk and alpha need one entry per topic, word_list one per word")
    if word_bounds.shape[0] != C + 1 or word_bounds[C] != V or word_ptr[V] != N:
        raise ValueError("the word chunks must cover every word, the words every token")
    for w in range(V):
        if word_ptr[w + 1] - word_ptr[w] > longest:
            longest = word_ptr[w + 1] - word_ptr[w]
    _setup(&wp, doc_ptr, z, prop, alpha, doc_bounds, beta, V)
    wp.word_ptr = &word_ptr[0]
    wp.word_tokens = <const void*> &word_tokens[0] if N > 0 else NULL
    wp.narrow = position_t is int32_t
    wp.word_list = &word_list[0] if V > 0 else NULL
    wp.wbounds = &word_bounds[0]
    ws = Workspace(C=0, threads=0, gens=NULL, start_nk=NULL, own_nk=NULL, count=NULL,
                   local=NULL, alpha_prob=NULL, alpha_alias=NULL, alpha_scratch=NULL)
    try:
        _workspace_init(&ws, &wp, C, doc_streams, word_streams, threads, longest)
        with nogil:
            _phase(&wp, &ws, &nk[0], True)
            _phase(&wp, &ws, &nk[0], False)
    finally:
        _workspace_free(&ws)


def count_topics(const int64_t[::1] doc_ptr,   # IN  (D + 1) token offsets
                 const int32_t[::1] words,     # IN  (N) word ids
                 const int32_t[::1] z,         # IN  (N) topics
                 int32_t[:, ::1] ndk,          # OUT (D, K)
                 int32_t[:, ::1] nkw):         # OUT (V, K) word-major
    """The document-topic and word-topic counts of ``z``, in place (what a WarpLDA chain,
    which keeps z and n_k only, shows to whatever reads the dense counts)."""
    cdef Py_ssize_t D = ndk.shape[0], K = ndk.shape[1], N = z.shape[0]
    cdef int64_t d, i
    if words.shape[0] != N or doc_ptr.shape[0] != D + 1 or doc_ptr[D] != N:
        raise ValueError("doc_ptr, words and z do not describe the same tokens")
    if nkw.shape[1] != K:
        raise ValueError("ndk and nkw need the same number of topics")
    with nogil:
        ndk[:, :] = 0
        nkw[:, :] = 0
        for d in range(D):
            for i in range(doc_ptr[d], doc_ptr[d + 1]):
                ndk[d, z[i]] += 1
                nkw[words[i], z[i]] += 1


cdef int _cmp_int32(const void* a, const void* b) noexcept nogil:
    cdef int32_t x = (<const int32_t*> a)[0]
    cdef int32_t y = (<const int32_t*> b)[0]
    return (x > y) - (x < y)


cdef Py_ssize_t _row_topics(const position_t* order, int64_t begin, int64_t end,
                            const int32_t* z, int32_t* count, int32_t* touched) noexcept nogil:
    """Count the topics of tokens [begin, end) (through ``order`` when not NULL) in ``count``;
    the distinct topics go to ``touched``, unsorted; returns how many there are."""
    cdef Py_ssize_t n = 0
    cdef int64_t j
    cdef int32_t t
    for j in range(begin, end):
        t = z[order[j] if order != NULL else j]
        if count[t] == 0:
            touched[n] = t
            n += 1
        count[t] += 1
    return n


def row_topic_counts(const int64_t[::1] row_ptr,  # IN  (R + 1) offsets of the rows' tokens
                     const position_t[::1] order,  # IN  (N) token of every offset, or empty
                     const int32_t[::1] z,        # IN  (N) topics
                     Py_ssize_t n_topics,
                     int64_t[::1] ptr):           # OUT (R + 1) offsets of the rows' entries
    """The non-zero (row, topic) counts of the tokens, row by row with topics ascending:
    returns (topic, count), two int32 arrays of ``ptr[R]`` entries, and fills ``ptr``.
    Row r holds the tokens ``order[row_ptr[r]:row_ptr[r + 1]]`` (the tokens
    ``row_ptr[r]:row_ptr[r + 1]`` themselves when ``order`` is empty). Two passes over the
    tokens with one zeroed K row and one list of a row's topics, no (R, K) array."""
    cdef Py_ssize_t R = row_ptr.shape[0] - 1, n, j
    cdef int64_t r, longest = 1, at
    cdef int32_t* count = NULL
    cdef int32_t* touched = NULL
    cdef int32_t[::1] topic_view
    cdef int32_t[::1] counts_view
    cdef const position_t* by = &order[0] if order.shape[0] > 0 else NULL
    if ptr.shape[0] != R + 1 or row_ptr[R] != z.shape[0]:
        raise ValueError("ptr needs one entry per row and one more; the rows cover z")
    if by != NULL and order.shape[0] != z.shape[0]:
        raise ValueError("order needs one entry per token")
    for r in range(R):
        if row_ptr[r + 1] - row_ptr[r] > longest:
            longest = row_ptr[r + 1] - row_ptr[r]
    if z.shape[0] == 0:
        ptr[:] = 0
        return np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.int32)
    try:
        count = <int32_t*> _alloc(n_topics, sizeof(int32_t), True)
        touched = <int32_t*> _alloc(longest, sizeof(int32_t))
        with nogil:
            ptr[0] = 0
            for r in range(R):
                n = _row_topics(by, row_ptr[r], row_ptr[r + 1], &z[0], count, touched)
                for j in range(n):
                    count[touched[j]] = 0
                ptr[r + 1] = ptr[r] + n
        topic = np.empty(ptr[R], dtype=np.int32)
        counts = np.empty(ptr[R], dtype=np.int32)
        topic_view = topic
        counts_view = counts
        _fill_rows(row_ptr, by, z, ptr, topic_view, counts_view, count, touched)
        return topic, counts
    finally:
        free(count)
        free(touched)


cdef void _fill_rows(const int64_t[::1] row_ptr, const position_t* by, const int32_t[::1] z,
                     const int64_t[::1] ptr, int32_t[::1] topic, int32_t[::1] counts,
                     int32_t* count, int32_t* touched) noexcept nogil:
    """The second pass of :func:`row_topic_counts`: every row's topics sorted, with counts."""
    cdef Py_ssize_t R = row_ptr.shape[0] - 1, n, j
    cdef int64_t r, at
    for r in range(R):
        n = _row_topics(by, row_ptr[r], row_ptr[r + 1], &z[0], count, touched)
        qsort(touched, n, sizeof(int32_t), _cmp_int32)
        at = ptr[r]
        for j in range(n):
            topic[at + j] = touched[j]
            counts[at + j] = count[touched[j]]
            count[touched[j]] = 0
