# cython: language_level=3
"""WarpLDA-order Metropolis-Hastings kernels for collapsed Gibbs LDA (docs/algorithms.md §2.9).

* :func:`warp_sweep` -- one sweep: a word phase (word by word: for each token, ``M`` MH steps
  whose proposals are the current topics of random other tokens of its document, accepted
  against the word's counts) and a document phase (document by document: proposals the
  current topics of random other tokens of its word, accepted against the document's
  counts). Equivalent to ``tests/reference/warp.py::sweep``.

A proposal is the topic, read when it is used, of a token drawn uniformly from the other tokens
of the document (word), or a topic from the prior: it is a draw from the current counts
without the token, so the factor of the counts it comes from cancels from the acceptance
ratio exactly and the step needs only the counts of the word (document) it is in -- one dense
K row in cache -- and n_k. There are no D x K or V x K counts. The C chunks of a phase work in C
rounds; in round r, chunk c takes word block c and document block (c + r) mod C (word phase) or
document block c and word block (c + r) mod C (document phase), so no two chunks touch one
document or one word at a time and every proposal reads topics no other thread writes. Each
chunk works on its own copy of n_k from the start of the round, the copies' changes added in
chunk order after it: the result depends on the chunks only, never on the threads. A round
draws its uniforms from xoshiro256+ seeded from the chunk's stream at its start
(``topictk/_cy/rng.pxd``), inlined, instead of calling the bit generator per uniform. The
positions a token's proposals read are drawn ``AHEAD`` tokens before it is sampled and the
cache is asked for them (their topics are read when used). Every buffer is allocated and
checked before the sampling and freed after it on every path.

Two optional word terms (docs/algorithms.md §2.11): a sparse overlay o of extra word prior, so
that the word factor is (n_kw + beta + o_wk) / (n_k + beta-bar_k) and the document phase's
proposal holds o too, and a given topic-word matrix ``phi`` (K x V) whose entry phi_kw is the
word factor itself, its columns' alias tables the document phase's proposal. Without them
(None) a sweep takes the code of the symmetric beta, with the same numbers.
"""
from cython.parallel cimport parallel, prange, threadid
from libc.math cimport NAN
from libc.stdint cimport int32_t, int64_t
from libc.stdlib cimport free, qsort
from libc.string cimport memcpy

import numpy as np
from numpy.random cimport bitgen_t

from topictk._cy.alias cimport alias_build, alias_draw
from topictk._cy.alloc cimport checked_alloc as _alloc, free_rows
from topictk._cy.rng cimport Xoshiro, bitgen_of, xoshiro_seed, xoshiro_uniform
from topictk._cy.wordprior cimport (attach_overlay, beta_bar, check_terms, given_term,
                                    overlay_term, phi_tables, plain_term, term_t)


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


# tokens between the draw of a token's proposals and their use (a power of two, so that a
# token's slot is its offset masked, without a division); the document phase looks up the
# drawn entries of the word order AHEAD tokens before that. Counted in the tokens a round
# samples: the draws are a function of the stream and the corpus alone (a proposal's topic is
# read when it is used), so the distances change the speed, never the chain.
cdef enum:
    AHEAD = 8
    RING = 16                   # 2 * AHEAD slots


cdef struct Warp:
    # what a sweep reads and writes: the tokens in both orders, the chain and the prior
    const int64_t* doc_ptr      # (D + 1)
    const int32_t* words        # (N) word of every token
    const int64_t* word_ptr     # (V + 1) offsets into word_tokens
    const void* word_tokens     # (N) token positions grouped by word, int32 or int64
    bint narrow                 # word_tokens holds int32
    const int32_t* word_docs    # (N) the document of every entry of word_tokens
    const int64_t* word_cuts    # (V, C + 1) entries of word w in document block b:
                                # word_cuts[w (C + 1) + b] to word_cuts[w (C + 1) + b + 1]
    const int32_t* word_list    # (V) the words of block c: word_list[wbounds[c]:...]
    const int64_t* wbounds      # (C + 1)
    const int32_t* word_block   # (V) the block of every word
    const int64_t* dbounds      # (C + 1) document boundaries of the blocks
    int32_t* z                  # (N)
    const double* alpha         # (K)
    double alpha_sum
    bint symmetric              # every alpha_k equal: a prior draw is a uniform topic
    double* alpha_prob          # (K) alias table of alpha (asymmetric alpha)
    int32_t* alpha_alias        # (K)
    double beta
    double vbeta
    Py_ssize_t K
    Py_ssize_t V
    Py_ssize_t C
    int M
    # the word terms: an overlay o (o_ptr NULL: none) with beta-bar_k and per word the alias
    # table of o_w. and its mass O_w; a given phi (NULL: none) with its columns' tables
    const double* bbar          # (K)
    const int64_t* o_ptr        # (V + 1)
    const int32_t* o_topic
    const double* o_extra
    double* o_prob              # (nnz)
    int32_t* o_alias            # (nnz) positions within the word's entries
    double* o_mass              # (V)
    const double* phi           # (K, V)
    double* phi_prob            # (V, K)
    int32_t* phi_alias          # (V, K)


cdef struct Workspace:
    # everything one call allocates, all of it before the sampling starts
    int threads
    bitgen_t** gens             # (2 C) the document chunks' streams, then the word chunks'
    int64_t* start_nk           # (K) n_k at the start of the round
    int64_t** own_nk            # (C) each chunk's n_k (C > 1)
    int32_t** count             # (threads) a zeroed K scratch row
    int32_t** seen              # (threads) the topics of the longest word's tokens
    int64_t** inblock           # (threads) the positions of a document's tokens a round samples
    int64_t** ring_at           # (threads) RING x M drawn proposals: >= 0 a position (an
                                # entry of the word order in the document phase until looked
                                # up), < 0 the prior's topic -1 - value
    double** ring_u             # (threads) RING x M acceptance uniforms
    double* alpha_prob          # (K)
    int32_t* alpha_alias        # (K)
    int32_t* alpha_scratch      # (2 K)
    double** word_prior         # (threads) with an overlay: a K row of beta + o_wk, filled
                                # for the word a thread samples, else beta
    double* terms               # bbar (K), o_mass (V), o_prob (nnz) of an overlay
    int32_t* o_alias            # (nnz)
    double* phi_prob            # (V K) of a given phi
    int32_t* phi_alias          # (V K)


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


cdef inline int32_t _proposal(const int32_t* z, int64_t at) noexcept nogil:
    """The topic a drawn proposal stands for: z[at] now, or the prior's topic -1 - at. Without
    a branch (which kind a proposal is, is a coin a branch predictor cannot learn): a prior
    topic reads z[0] and drops it."""
    cdef int32_t low = <int32_t> (at >> 63)           # -1 for a prior topic, else 0
    cdef int32_t read = z[at & ~(at >> 63)]
    return (read & ~low) | ((<int32_t> (-1 - at)) & low)


cdef inline int64_t _floor_below(double x, int64_t n) noexcept nogil:
    """min(floor(x), n - 1) for x >= 0 (rounding may put x * n at n)."""
    cdef int64_t j = <int64_t> x
    return n - 1 if j > n - 1 else j


cdef inline int64_t _entry(double x, int64_t n) noexcept nogil:
    """min(floor(x), n - 1) for 0 <= x < n, and an index in [0, n) (or 0) for any other
    x >= 0: what a proposal that is not a token reads and drops."""
    cdef int64_t j = _floor_below(x, n)
    return 0 if j < 0 else j


# The draws below and _resample are written without a branch on what a uniform decides (a
# token or the prior, accept or not): those are coins no branch predictor learns (§2.9). Both
# sides are computed and one is selected; the numbers are those of the branching form.

cdef inline int64_t _pick(bint first, int64_t a, int64_t b) noexcept nogil:
    """a if first else b, by a mask instead of a branch."""
    cdef int64_t mask = -(<int64_t> first)
    return (a & mask) | (b & ~mask)


cdef inline void _word_draw(const Warp* wp, int64_t i, int32_t d, int64_t* at, double* u,
                            Xoshiro* gen) noexcept nogil:
    """The M proposals of token i of document d for the word phase (§2.9), two uniforms each:
    x of [0, L_d - 1 + alpha_sum): x < L_d - 1 the other token floor(x) of the document (the
    token itself standing for the last), else a topic from alpha with r = (x - L_d + 1) /
    alpha_sum; then the acceptance uniform."""
    cdef int64_t begin = wp.doc_ptr[d], others = wp.doc_ptr[d + 1] - begin - 1, j, k
    cdef double x, r, total = others + wp.alpha_sum
    cdef int m
    for m in range(wp.M):
        x = xoshiro_uniform(gen) * total
        j = begin + _entry(x, others)
        if j == i:
            j = begin + others
        r = (x - others) / wp.alpha_sum
        if wp.symmetric or r >= 0:        # an asymmetric alpha's alias draw only when used
            k = _prior_draw(wp, r * (r > 0))      # r, or 0 (dropped)
        else:
            k = 0
        at[m] = _pick(x < others, j, -1 - k)       # the token j, or the prior's topic
        prefetch(wp.z + j)
        u[m] = xoshiro_uniform(gen)


cdef inline int64_t _overlay_draw(const Warp* wp, int32_t w, double x,
                                  double below) noexcept nogil:
    """The topic of word w's overlay part for x in [below, below + O_w): the alias draw of
    o_w. with r = (x - below) / O_w."""
    cdef int64_t ob = wp.o_ptr[w]
    return wp.o_topic[ob + alias_draw((x - below) / wp.o_mass[w], wp.o_prob + ob,
                                      wp.o_alias + ob, wp.o_ptr[w + 1] - ob)]


cdef inline void _doc_draw(const Warp* wp, int64_t i, int64_t* at, double* u, Xoshiro* gen,
                           term_t mode) noexcept nogil:
    """The M proposals of token i for the document phase (§2.9), two uniforms each: x of
    [0, n_w - 1 + K beta + O_w): x < n_w - 1 the entry floor(x) of the word's other tokens
    (looked up by :func:`_doc_lookup`), below n_w - 1 + K beta the topic
    min(floor((x - n_w + 1) / beta), K - 1), else a topic of the word's overlay (O_w = 0
    without one); with a given phi the alias draw of its column with x in [0, 1). Then the
    acceptance uniform. ``mode`` says which word term there is, at compile time."""
    cdef int32_t w = wp.words[i]
    cdef int64_t b = wp.word_ptr[w], others = wp.word_ptr[w + 1] - b - 1, j, k
    cdef double x, below = others + wp.K * wp.beta, total = below
    cdef int m
    if term_t is overlay_term:
        total = total + wp.o_mass[w]
    for m in range(wp.M):
        if term_t is given_term:
            at[m] = -1 - alias_draw(xoshiro_uniform(gen), wp.phi_prob + w * wp.K,
                                    wp.phi_alias + w * wp.K, wp.K)
            u[m] = xoshiro_uniform(gen)
            continue
        x = xoshiro_uniform(gen) * total
        j = b + _entry(x, others)
        k = _floor_below((x - others) / wp.beta, wp.K)
        if term_t is overlay_term:
            if x >= below and wp.o_mass[w] > 0.0:
                k = _overlay_draw(wp, w, x, below)
        at[m] = _pick(x < others, j, -1 - k)
        prefetch((<const char*> wp.word_tokens) + j * (4 if wp.narrow else 8))
        u[m] = xoshiro_uniform(gen)


cdef inline void _doc_lookup(const Warp* wp, const position_t* word_tokens, int64_t i,
                             int64_t* at) noexcept nogil:
    """The drawn entries of token i's word order made positions (the token itself standing for
    the word's last token), and the cache asked for their topics; a prior topic (< 0) reads
    entry 0 and keeps its value."""
    cdef int64_t e, pos
    cdef int m
    for m in range(wp.M):
        e = at[m]
        pos = word_tokens[e & ~(e >> 63)]
        if pos == i:
            pos = word_tokens[wp.word_ptr[wp.words[i] + 1] - 1]
        at[m] = _pick(e >= 0, pos, e)
        prefetch(wp.z + pos)


cdef inline int32_t _resample(int32_t s, const int32_t* z, int32_t* row, int64_t* nk,
                              const int64_t* at, const double* u, int M, const double* prior,
                              double prior_one, double vbeta,
                              const double* bbar) noexcept nogil:
    """The topic after M MH steps (§2.9) of a token of topic s against ``row``, the counts of
    its word (word phase) or its document (document phase): taken out of row and n_k,
    proposal t accepted when u (row[s] + a_s)(n_t + b_t) < (row[t] + a_t)(n_s + b_s),
    a_k = prior[k] (or ``prior_one`` when prior is NULL), b_k = beta-bar_k (``vbeta`` when
    bbar is NULL), then put back; the caller writes it to z. A proposal t = s is tested too:
    accepted or not, s stays."""
    cdef int32_t t, accept
    cdef int m
    cdef double a_s, a_t, b_s, b_t
    row[s] -= 1
    nk[s] -= 1
    for m in range(M):
        t = _proposal(z, at[m])
        a_s = prior_one if prior == NULL else prior[s]
        a_t = prior_one if prior == NULL else prior[t]
        b_s = vbeta if bbar == NULL else bbar[s]
        b_t = vbeta if bbar == NULL else bbar[t]
        accept = u[m] * (row[s] + a_s) * (nk[t] + b_t) < (row[t] + a_t) * (nk[s] + b_s)
        s ^= (s ^ t) & -accept
    row[s] += 1
    nk[s] += 1
    return s


cdef inline int32_t _resample_given(int32_t s, const int32_t* z, int32_t* row, int64_t* nk,
                                    const int64_t* at, const double* u, int M,
                                    const double* weight, Py_ssize_t stride,
                                    const double* prior) noexcept nogil:
    """:func:`_resample` for a given phi, whose target (n_dk + alpha_k) phi[k, w] has no n_k
    factor: the word phase (``weight`` phi's column of the word, entries ``stride`` apart)
    accepts t when u phi_s < phi_t, the document phase (``weight`` NULL) when
    u (row[s] + prior[s]) < row[t] + prior[t]. Row and n_k are kept as in :func:`_resample`."""
    cdef int32_t t, accept
    cdef int m
    row[s] -= 1
    nk[s] -= 1
    for m in range(M):
        t = _proposal(z, at[m])
        if weight != NULL:
            accept = u[m] * weight[s * stride] < weight[t * stride]
        else:
            accept = u[m] * (row[s] + prior[s]) < row[t] + prior[t]
        s ^= (s ^ t) & -accept
    row[s] += 1
    nk[s] += 1
    return s


cdef void _doc_round(const Warp* wp, const position_t* word_tokens, int64_t* nk,
                     int32_t* cd, int64_t* inblock, int64_t* ring_at, double* ring_u,
                     Py_ssize_t c, int32_t block, bitgen_t* gen, term_t mode) noexcept nogil:
    """Round of the document phase for chunk c: every token of document block c whose word
    is in word block ``block`` (every token when C = 1), document by document, in corpus
    order. ``cd`` is a zeroed K row, left zeroed; ``inblock`` has room for the longest
    document, and receives the positions of a document's tokens of the round (without a
    branch per token: which word block a token's word is in is no pattern a branch
    predictor learns)."""
    cdef int64_t d, i, begin, end, n, q, slot
    cdef int M = wp.M
    cdef bint every = wp.C == 1
    cdef int32_t* z = wp.z
    cdef Xoshiro draws
    xoshiro_seed(&draws, gen)
    for d in range(wp.dbounds[c], wp.dbounds[c + 1]):
        begin = wp.doc_ptr[d]
        end = wp.doc_ptr[d + 1]
        n = 0
        for i in range(begin, end):
            cd[z[i]] += 1
            inblock[n] = i
            n += every or wp.word_block[wp.words[i]] == block
        # the round's q-th token is drawn RING of them ahead of its use, looked up AHEAD ahead
        for q in range(min(RING, n)):
            slot = q & (RING - 1)
            _doc_draw(wp, inblock[q], ring_at + slot * M, ring_u + slot * M, &draws, mode)
            if q < AHEAD:
                _doc_lookup(wp, word_tokens, inblock[q], ring_at + slot * M)
        for q in range(n):
            i = inblock[q]
            slot = q & (RING - 1)
            if term_t is given_term:
                z[i] = _resample_given(z[i], z, cd, nk, ring_at + slot * M,
                                       ring_u + slot * M, M, NULL, 0, wp.alpha)
            elif term_t is overlay_term:
                z[i] = _resample(z[i], z, cd, nk, ring_at + slot * M, ring_u + slot * M, M,
                                 wp.alpha, 0.0, wp.vbeta, wp.bbar)
            else:
                z[i] = _resample(z[i], z, cd, nk, ring_at + slot * M, ring_u + slot * M, M,
                                 wp.alpha, 0.0, wp.vbeta, NULL)
            if q + RING < n:
                _doc_draw(wp, inblock[q + RING], ring_at + slot * M, ring_u + slot * M, &draws,
                          mode)
            if q + AHEAD < n:
                _doc_lookup(wp, word_tokens, inblock[q + AHEAD],
                            ring_at + ((q + AHEAD) & (RING - 1)) * M)
        for i in range(begin, end):
            cd[z[i]] = 0


cdef inline const double* _word_prior(const Warp* wp, double* bw, int32_t w,
                                     double value) noexcept nogil:
    """With an overlay: row ``bw`` (beta everywhere) given beta + o_wk at word w's entries
    (``value`` NaN) or beta again (``value`` beta), and returned; without one NULL."""
    cdef int64_t j
    if wp.o_ptr == NULL:
        return NULL
    for j in range(wp.o_ptr[w], wp.o_ptr[w + 1]):
        bw[wp.o_topic[j]] = value if value == value else wp.beta + wp.o_extra[j]
    return bw


cdef void _word_round(const Warp* wp, const position_t* word_tokens, int64_t* nk,
                      int32_t* cw, int32_t* seen, double* bw, int64_t* ring_at,
                      double* ring_u, Py_ssize_t c, Py_ssize_t block, bitgen_t* gen,
                      term_t mode) noexcept nogil:
    """Round of the word phase for chunk c: the tokens of document block ``block`` of every
    word of word block c, word by word. ``cw`` is a zeroed K row, left zeroed; ``seen`` has
    room for the longest word's topics, which it holds in word order while the word is
    sampled (so that neither sampling a token nor clearing the row reads z at random); ``bw``
    the word prior's row (an overlay: beta everywhere, left so)."""
    cdef Py_ssize_t q, C1 = wp.C + 1
    cdef int64_t b, n, j, lo, hi, slot
    cdef int32_t w, t
    cdef int M = wp.M
    cdef const position_t* tok
    cdef const int32_t* docs
    cdef const double* prior = NULL
    cdef int32_t* z = wp.z
    cdef Xoshiro draws
    xoshiro_seed(&draws, gen)
    for q in range(wp.wbounds[c], wp.wbounds[c + 1]):
        w = wp.word_list[q]
        lo = wp.word_cuts[w * C1 + block]
        hi = wp.word_cuts[w * C1 + block + 1]
        if lo == hi:
            continue
        b = wp.word_ptr[w]
        n = wp.word_ptr[w + 1] - b
        tok = word_tokens + b
        docs = wp.word_docs + b
        lo -= b
        hi -= b
        for j in range(n):
            if j + AHEAD < n:
                prefetch(z + tok[j + AHEAD])
            t = z[tok[j]]
            seen[j] = t
            cw[t] += 1
        for j in range(lo, min(lo + AHEAD, hi)):
            slot = (j - lo) & (AHEAD - 1)
            _word_draw(wp, tok[j], docs[j], ring_at + slot * M, ring_u + slot * M, &draws)
        if term_t is overlay_term:
            prior = _word_prior(wp, bw, w, NAN)
        for j in range(lo, hi):
            slot = (j - lo) & (AHEAD - 1)
            if term_t is given_term:
                t = _resample_given(seen[j], z, cw, nk, ring_at + slot * M, ring_u + slot * M,
                                    M, wp.phi + w, wp.V, NULL)
            elif term_t is overlay_term:
                t = _resample(seen[j], z, cw, nk, ring_at + slot * M, ring_u + slot * M, M,
                              prior, wp.beta, wp.vbeta, wp.bbar)
            else:
                t = _resample(seen[j], z, cw, nk, ring_at + slot * M, ring_u + slot * M, M,
                              NULL, wp.beta, wp.vbeta, NULL)
            seen[j] = t
            z[tok[j]] = t
            if j + AHEAD < hi:
                _word_draw(wp, tok[j + AHEAD], docs[j + AHEAD], ring_at + slot * M,
                           ring_u + slot * M, &draws)
        for j in range(n):
            cw[seen[j]] = 0
        if term_t is overlay_term:
            _word_prior(wp, bw, w, wp.beta)


cdef void _doc_round_any(const Warp* wp, int64_t* nk, int32_t* cd, int64_t* inblock,
                         int64_t* ring_at, double* ring_u, Py_ssize_t c, int32_t block,
                         bitgen_t* gen, term_t mode) noexcept nogil:
    if wp.narrow:
        _doc_round(wp, <const int32_t*> wp.word_tokens, nk, cd, inblock, ring_at, ring_u, c,
                   block, gen, mode)
    else:
        _doc_round(wp, <const int64_t*> wp.word_tokens, nk, cd, inblock, ring_at, ring_u, c,
                   block, gen, mode)


cdef void _word_round_any(const Warp* wp, int64_t* nk, int32_t* cw, int32_t* seen,
                          double* bw, int64_t* ring_at, double* ring_u, Py_ssize_t c,
                          Py_ssize_t block, bitgen_t* gen, term_t mode) noexcept nogil:
    if wp.narrow:
        _word_round(wp, <const int32_t*> wp.word_tokens, nk, cw, seen, bw, ring_at, ring_u, c,
                    block, gen, mode)
    else:
        _word_round(wp, <const int64_t*> wp.word_tokens, nk, cw, seen, bw, ring_at, ring_u, c,
                    block, gen, mode)


cdef void _workspace_free(Workspace* ws, Py_ssize_t C) noexcept nogil:
    """Free everything :func:`_workspace_init` allocated, whether it finished or not."""
    free_rows(<void**> ws.own_nk, C)
    free_rows(<void**> ws.count, ws.threads)
    free_rows(<void**> ws.seen, ws.threads)
    free_rows(<void**> ws.inblock, ws.threads)
    free_rows(<void**> ws.ring_at, ws.threads)
    free_rows(<void**> ws.ring_u, ws.threads)
    free_rows(<void**> ws.word_prior, ws.threads)
    free(ws.terms)
    free(ws.o_alias)
    free(ws.phi_prob)
    free(ws.phi_alias)
    free(ws.gens)
    free(ws.start_nk)
    free(ws.alpha_prob)
    free(ws.alpha_alias)
    free(ws.alpha_scratch)


cdef int _workspace_init(Workspace* ws, Warp* wp, list doc_streams, list word_streams,
                         int threads) except -1:
    """Streams (``gens`` holds the document chunks' then the word chunks') and every buffer
    (``ws`` zeroed by the caller, freed by :func:`_workspace_free` also when this raises);
    the alias table of alpha when it is asymmetric."""
    cdef Py_ssize_t c, C = wp.C, K = wp.K, k, V = wp.V
    cdef int64_t longest = 1, longest_doc = 1
    if len(doc_streams) != C or len(word_streams) != C:
        raise ValueError(f"{C} chunks need {C} streams per phase")
    ws.threads = 1 if threads < 1 else (<int> C if threads > C else threads)
    ws.gens = <bitgen_t**> _alloc(2 * C, sizeof(bitgen_t*))
    for c in range(C):
        ws.gens[c] = bitgen_of(doc_streams[c])
        ws.gens[C + c] = bitgen_of(word_streams[c])
    ws.start_nk = <int64_t*> _alloc(K, sizeof(int64_t))
    ws.own_nk = <int64_t**> _alloc(C, sizeof(int64_t*), True)
    for c in range(C):
        ws.own_nk[c] = <int64_t*> _alloc(K, sizeof(int64_t))
    ws.count = <int32_t**> _alloc(ws.threads, sizeof(int32_t*), True)
    ws.ring_at = <int64_t**> _alloc(ws.threads, sizeof(int64_t*), True)
    ws.ring_u = <double**> _alloc(ws.threads, sizeof(double*), True)
    ws.seen = <int32_t**> _alloc(ws.threads, sizeof(int32_t*), True)
    ws.inblock = <int64_t**> _alloc(ws.threads, sizeof(int64_t*), True)
    ws.word_prior = <double**> _alloc(ws.threads, sizeof(double*), True)
    for k in range(V):
        if wp.word_ptr[k + 1] - wp.word_ptr[k] > longest:
            longest = wp.word_ptr[k + 1] - wp.word_ptr[k]
    for k in range(wp.dbounds[C]):
        if wp.doc_ptr[k + 1] - wp.doc_ptr[k] > longest_doc:
            longest_doc = wp.doc_ptr[k + 1] - wp.doc_ptr[k]
    for c in range(ws.threads):
        ws.count[c] = <int32_t*> _alloc(K, sizeof(int32_t), True)
        ws.seen[c] = <int32_t*> _alloc(longest, sizeof(int32_t))
        ws.inblock[c] = <int64_t*> _alloc(longest_doc, sizeof(int64_t))
        ws.ring_at[c] = <int64_t*> _alloc(RING * wp.M, sizeof(int64_t))
        ws.ring_u[c] = <double*> _alloc(RING * wp.M, sizeof(double))
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


cdef int _overlay_tables(Warp* wp) except -1:
    """Per word the alias table of o_w. over its entries and its mass O_w (summed in order;
    a word whose mass is 0 gets no table and is never drawn)."""
    cdef int32_t* stacks = <int32_t*> _alloc(2 * wp.K, sizeof(int32_t))
    cdef Py_ssize_t w
    cdef int64_t j, ob, n
    cdef double total
    for w in range(wp.V):
        ob = wp.o_ptr[w]
        n = wp.o_ptr[w + 1] - ob
        total = 0.0
        for j in range(ob, ob + n):
            total = total + wp.o_extra[j]
        wp.o_mass[w] = total
        if total > 0.0:
            alias_build(wp.o_extra + ob, n, total, wp.o_prob + ob, wp.o_alias + ob, stacks,
                        stacks + n)
    free(stacks)
    return 0


cdef int _word_terms_init(Warp* wp, Workspace* ws, const int64_t[::1] prior_ptr,
                          const int32_t[::1] prior_topic, const double[::1] prior_extra,
                          const double[:, ::1] phi) except -1:
    """Check the word terms and build what the sweep reads of them: an overlay's beta-bar,
    the alias tables of o_w. with their masses O_w and every thread's word prior row (beta);
    a given phi's columns' alias tables. Buffers in ``ws``, freed by
    :func:`_workspace_free` also when this raises."""
    cdef Py_ssize_t K = wp.K, V = wp.V, nnz, k
    cdef int tid
    check_terms(prior_ptr, prior_topic, prior_extra, phi)
    if phi is not None:
        phi_tables(phi, K, V, ws.threads, &ws.phi_prob, &ws.phi_alias)
        wp.phi = &phi[0, 0]
        wp.phi_prob = ws.phi_prob
        wp.phi_alias = ws.phi_alias
    if not attach_overlay(prior_ptr, prior_topic, prior_extra, V, K, &wp.o_ptr, &wp.o_topic,
                          &wp.o_extra):
        return 0
    nnz = prior_topic.shape[0]
    ws.terms = <double*> _alloc(K + V + nnz, sizeof(double))
    ws.o_alias = <int32_t*> _alloc(nnz, sizeof(int32_t))
    beta_bar(V, K, wp.beta, wp.o_ptr, wp.o_topic, wp.o_extra, ws.terms)
    wp.bbar = ws.terms
    wp.o_mass = ws.terms + K
    wp.o_prob = ws.terms + K + V
    wp.o_alias = ws.o_alias
    _overlay_tables(wp)
    for tid in range(ws.threads):
        ws.word_prior[tid] = <double*> _alloc(K, sizeof(double))
        for k in range(K):
            ws.word_prior[tid][k] = wp.beta
    return 0


cdef void _phase(const Warp* wp, Workspace* ws, int64_t* nk, bint words,
                 term_t mode) noexcept nogil:
    """One phase in C rounds: with C = 1 chunk 0 on ``nk`` itself; else in round r chunk c
    takes block (c + r) mod C of the other kind on its own copy of n_k from the start of the
    round, the copies' changes added to ``nk`` after the round in chunk order."""
    cdef Py_ssize_t c, k, r, C = wp.C, K = wp.K
    cdef int tid
    if C == 1:
        if words:
            _word_round_any(wp, nk, ws.count[0], ws.seen[0], ws.word_prior[0], ws.ring_at[0],
                            ws.ring_u[0], 0, 0, ws.gens[1], mode)
        else:
            _doc_round_any(wp, nk, ws.count[0], ws.inblock[0], ws.ring_at[0], ws.ring_u[0], 0,
                           0, ws.gens[0], mode)
        return
    for r in range(C):
        memcpy(ws.start_nk, nk, K * sizeof(int64_t))
        for c in range(C):
            memcpy(ws.own_nk[c], nk, K * sizeof(int64_t))
        with parallel(num_threads=ws.threads):
            tid = threadid()
            for c in prange(C, schedule="dynamic", chunksize=1):
                if words:
                    _word_round_any(wp, ws.own_nk[c], ws.count[tid], ws.seen[tid],
                                    ws.word_prior[tid], ws.ring_at[tid], ws.ring_u[tid], c,
                                    (c + r) % C, ws.gens[C + c], mode)
                else:
                    _doc_round_any(wp, ws.own_nk[c], ws.count[tid], ws.inblock[tid],
                                   ws.ring_at[tid], ws.ring_u[tid], c, <int32_t> ((c + r) % C),
                                   ws.gens[c], mode)
        for c in range(C):
            for k in range(K):
                nk[k] += ws.own_nk[c][k] - ws.start_nk[k]


cdef void _sweep_phases(const Warp* wp, Workspace* ws, int64_t* nk,
                        term_t mode) noexcept nogil:
    """The word phase, then the document phase, compiled for the word term ``mode``: the
    symmetric beta's code has no test of the terms."""
    _phase(wp, ws, nk, True, mode)
    _phase(wp, ws, nk, False, mode)


def warp_sweep(const int64_t[::1] doc_ptr,      # IN  (D + 1) token offsets
               const int32_t[::1] words,        # IN  (N) word ids
               const int64_t[::1] word_ptr,     # IN  (V + 1) offsets into word_tokens
               const position_t[::1] word_tokens,  # IN  (N) token positions grouped by word
               const int32_t[::1] word_docs,    # IN  (N) document of every word_tokens entry
               const int64_t[:, ::1] word_cuts,  # IN  (V, C + 1) entries of w per doc block
               const int32_t[::1] word_list,    # IN  (V) words, word block after word block
               const int64_t[::1] word_bounds,  # IN  (C + 1) offsets of the blocks in word_list
               const int32_t[::1] word_block,   # IN  (V) block of every word
               int32_t[::1] z,                  # IN/OUT (N)
               int64_t[::1] nk,                 # IN/OUT (K)
               const double[::1] alpha,         # IN  (K)
               double beta,
               int steps,                       # MH steps per token and phase
               const int64_t[::1] doc_bounds,   # IN  (C + 1) document boundaries of blocks
               list doc_streams,                # IN  C PCG64 bit generators (document phase)
               list word_streams,               # IN  C PCG64 bit generators (word phase)
               int threads=1,
               const int64_t[::1] prior_ptr=None,    # IN  (V + 1) word prior overlay, or None
               const int32_t[::1] prior_topic=None,  # IN  (nnz) its topics, ascending per word
               const double[::1] prior_extra=None,   # IN  (nnz) its extra prior o_wk >= 0
               const double[:, ::1] phi=None):       # IN  (K, V) a given phi_t, or None
    """One sweep (§2.9): the word phase, then the document phase. With an overlay o of the
    word prior the target is (n_dk + alpha_k)(n_kw + beta + o_wk) / (n_k + beta-bar_k); with a
    given ``phi`` it is (n_dk + alpha_k) phi[k, w], the document phase proposing from the
    alias tables of phi's columns, built at every call (O(V K)). Equivalent to
    ``tests/reference/warp.py::sweep``."""
    cdef Warp wp
    cdef Workspace ws
    cdef Py_ssize_t C = doc_bounds.shape[0] - 1, V = word_ptr.shape[0] - 1
    cdef Py_ssize_t N = z.shape[0], D = doc_ptr.shape[0] - 1
    if C < 1 or steps < 1:
        raise ValueError("a sweep needs at least one chunk and one step")
    if (words.shape[0] != N or word_tokens.shape[0] != N or word_docs.shape[0] != N
            or doc_ptr[D] != N or word_ptr[V] != N):
        raise ValueError("words, word_tokens, word_docs and the offsets need one entry per token")
    if nk.shape[0] != alpha.shape[0] or word_list.shape[0] != V or word_block.shape[0] != V:
        raise ValueError("nk and alpha need one entry per topic, word_list and word_block one "
                         "per word")
    if (word_bounds.shape[0] != C + 1 or word_bounds[C] != V or word_cuts.shape[0] != V
            or word_cuts.shape[1] != C + 1 or doc_bounds[C] != D):
        raise ValueError("the blocks must cover every word and document")
    wp.doc_ptr = &doc_ptr[0]
    wp.words = &words[0] if N > 0 else NULL
    wp.word_ptr = &word_ptr[0]
    wp.word_tokens = <const void*> &word_tokens[0] if N > 0 else NULL
    wp.narrow = position_t is int32_t
    wp.word_docs = &word_docs[0] if N > 0 else NULL
    wp.word_cuts = &word_cuts[0, 0] if V > 0 else NULL
    wp.word_list = &word_list[0] if V > 0 else NULL
    wp.wbounds = &word_bounds[0]
    wp.word_block = &word_block[0] if V > 0 else NULL
    wp.dbounds = &doc_bounds[0]
    wp.z = &z[0] if N > 0 else NULL
    wp.alpha = &alpha[0]
    wp.alpha_prob = NULL
    wp.alpha_alias = NULL
    wp.beta = beta
    wp.vbeta = V * beta
    wp.K = alpha.shape[0]
    wp.V = V
    wp.C = C
    wp.M = steps
    wp.bbar = NULL
    wp.o_ptr = NULL
    wp.phi = NULL
    ws = Workspace(threads=0, gens=NULL, start_nk=NULL, own_nk=NULL, count=NULL, seen=NULL,
                   inblock=NULL, ring_at=NULL, ring_u=NULL, alpha_prob=NULL, alpha_alias=NULL,
                   alpha_scratch=NULL, word_prior=NULL, terms=NULL, o_alias=NULL,
                   phi_prob=NULL, phi_alias=NULL)
    try:
        _workspace_init(&ws, &wp, doc_streams, word_streams, threads)
        _word_terms_init(&wp, &ws, prior_ptr, prior_topic, prior_extra, phi)
        with nogil:
            if wp.phi != NULL:
                _sweep_phases(&wp, &ws, &nk[0], <given_term> NULL)
            elif wp.o_ptr != NULL:
                _sweep_phases(&wp, &ws, &nk[0], <overlay_term> NULL)
            else:
                _sweep_phases(&wp, &ws, &nk[0], <plain_term> NULL)
    finally:
        _workspace_free(&ws, C)


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
