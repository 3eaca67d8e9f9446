# cython: language_level=3
"""Metropolis-Hastings kernels for collapsed Gibbs LDA (docs/algorithms.md §2.7).

* :func:`build_tables` -- the word proposal's alias tables (one per word over the topics the
  word holds, one shared over all K topics) from a vector of topic assignments.
  Equivalent to ``tests/reference/mh.py::build_tables``.
* :func:`mh_sweep` -- one AD-LDA iteration in which every token takes ``steps`` cycles of a
  word proposal and a document proposal, each accepted or refused by its MH ratio; one prior
  for every document or a prior per document (DMR). Equivalent to
  ``tests/reference/mh.py::sweep``.
* :func:`count_nonzeros`, :func:`build_count_tables` -- the same word proposal's tables from
  a model's counts (n_kw, n_k) for the words of documents to fold in.
  Equivalent to ``tests/reference/mh.py::count_tables``.
* :func:`mh_fold_in` -- theta-hat of documents with the topics fixed by MH cycles against
  those tables (the fold-in of §11.2). Equivalent to ``tests/reference/mh.py::fold_in_theta``.

Every kernel takes two optional word terms (docs/algorithms.md §2.11): a sparse overlay o of
extra word prior (``prior_ptr``, ``prior_topic``, ``prior_extra``), so that the word factor is
(n_kw + beta + o_wk) / (n_k + beta-bar_k), and a given topic-word matrix ``phi`` (K x V) whose
entry phi_kw is the word factor itself. Without them (None) the kernels take the code of the
symmetric beta, with the same numbers.

A token costs O(steps) draws and count look-ups whatever K is (the look-up of a word's stale
count is a binary search in its table, O(log min(n_w, K))). Tables are read-only during a
sweep, so chunks share them; randomness is one bit generator per chunk (never per thread),
so the result depends on the chunking only, not on the number of threads. Every buffer of a
sweep lives in an ``MHWorkspace`` allocated and checked before the sampling and freed after
it on every path.
"""
cimport cython
from cython.parallel cimport parallel, prange, threadid
from libc.stdint cimport int32_t, int64_t, uint8_t
from libc.stdlib cimport calloc, free, malloc, qsort
from libc.string cimport memcpy, memset

from numpy.random cimport bitgen_t

from topictk._cy.alias cimport alias_build as _alias_build, alias_draw as _alias_draw
from topictk._cy.alloc cimport alloc_rows, checked_alloc as _alloc, free_rows, longest_row
from topictk._cy.rng cimport bitgen_of, next_uniform, uniform_topic
from topictk._cy.wordprior cimport (attach_overlay, beta_bar, check_terms, find_topic,
                                    given_term, overlay_term, overlay_value, phi_tables,
                                    plain_term, term_t)


# the low half of a table key (topic << 32) | count
cdef int64_t LOW32 = 0xFFFFFFFF


cdef int _cmp_asc(const void* a, const void* b) noexcept nogil:
    cdef int64_t x = (<const int64_t*> a)[0]
    cdef int64_t y = (<const int64_t*> b)[0]
    return (x > y) - (x < y)


# ---------------------------------------------------------------- alias tables

cdef inline int32_t _stale_count(const int32_t* topic, const int32_t* count, Py_ssize_t n,
                                 int32_t k) noexcept nogil:
    """The count topic k had in a word's table (topics ascending), 0 when absent."""
    cdef Py_ssize_t j = find_topic(topic, n, k)
    return count[j] if j >= 0 else 0


cdef struct Tables:
    # the word proposal of §2.7: per word w, the topics it held when the tables were built
    # (ascending) with their counts and alias table; one shared alias table over all K
    const int64_t* ptr          # (V + 1) offsets of each word's entries
    int32_t* topic              # (pool) topics, ascending within a word
    int32_t* count              # (pool) stale n_kw
    double* prob                # (pool) alias probabilities
    int32_t* alias              # (pool) alias entries (positions within the word)
    int32_t* length             # (V) entries of each word
    double* mass                # (V) S_w = sum_k stale n_kw / (stale n_k + V beta)
    int64_t* nk                 # (K) stale n_k
    double* rden                # (K) 1 / (stale n_k + V beta)
    double* dense_prob          # (K) alias table of beta / (stale n_k + V beta)
    int32_t* dense_alias        # (K)
    double dense_mass           # Q = sum_k beta / (stale n_k + V beta)
    # the word prior's overlay o (o_ptr NULL: none), rows as the tables', with beta-bar_k
    # (NULL: V beta; the denominators of rden hold it) and per row the alias table of
    # o_wk / (stale n_k + beta-bar_k) with its mass O_w
    const double* bbar          # (K)
    const int64_t* o_ptr        # (rows + 1)
    const int32_t* o_topic
    const double* o_extra
    double* o_prob              # (nnz)
    int32_t* o_alias            # (nnz) positions within the row
    double* o_mass              # (rows)
    # a given topic-word matrix (phi NULL: none), K x phi_words, and its columns' alias
    # tables, which replace every table above
    const double* phi
    Py_ssize_t phi_words
    double* phi_prob            # (phi_words, K)
    int32_t* phi_alias          # (phi_words, K)


cdef int _bind_tables(Tables* tb, const int64_t[::1] ptr, int32_t[::1] topic,
                      int32_t[::1] count, double[::1] prob, int32_t[::1] alias,
                      int32_t[::1] length, double[::1] mass, double[::1] rden,
                      double[::1] dense_prob, int32_t[::1] dense_alias) except -1:
    """Point ``tb``, zeroed first (no stale n_k, no word terms), at the caller's tables: the
    pool, every row's length and mass (NULL without rows) and the shared table."""
    memset(tb, 0, sizeof(Tables))
    tb.ptr = &ptr[0]
    tb.topic = &topic[0]
    tb.count = &count[0]
    tb.prob = &prob[0]
    tb.alias = &alias[0]
    if length.shape[0] > 0:
        tb.length = &length[0]
        tb.mass = &mass[0]
    tb.rden = &rden[0]
    tb.dense_prob = &dense_prob[0]
    tb.dense_alias = &dense_alias[0]
    return 0


cdef struct WordTerm:
    # what a call allocates for the word terms of its Tables (NULL: not used)
    double* bbar
    double* o_prob
    int32_t* o_alias
    double* o_mass
    double* phi_prob
    int32_t* phi_alias


cdef inline double _extra(const Tables* tb, Py_ssize_t w, Py_ssize_t k,
                          term_t mode) noexcept nogil:
    """o_wk of row w, 0 without an overlay (``mode``, the word term, is known at compile
    time, as in every function that takes it)."""
    if term_t is overlay_term:
        return overlay_value(tb.o_ptr, tb.o_topic, tb.o_extra, w, k)
    return 0.0


cdef inline double _bbar(const Tables* tb, double vbeta, Py_ssize_t k,
                         term_t mode) noexcept nogil:
    """beta-bar_k: V beta without an overlay."""
    if term_t is overlay_term:
        return vbeta if tb.bbar == NULL else tb.bbar[k]
    return vbeta


cdef double _shared_table(const Tables* tb, const int64_t* nk, Py_ssize_t K, double beta,
                          double vbeta, double* weight, int32_t* small,
                          int32_t* large) noexcept nogil:
    """rden_k = 1 / (n_k + beta-bar_k) and the alias table of beta rden_k over all K;
    returns its mass Q."""
    cdef Py_ssize_t k
    cdef double q = 0.0
    for k in range(K):
        tb.rden[k] = 1.0 / (nk[k] + _bbar(tb, vbeta, k, <overlay_term> NULL))
        weight[k] = beta * tb.rden[k]
        q = q + weight[k]
    _alias_build(weight, K, q, tb.dense_prob, tb.dense_alias, small, large)
    return q


cdef void _overlay_tables(const Tables* tb, Py_ssize_t rows, double* weight, int32_t* small,
                          int32_t* large) noexcept nogil:
    """Per row w of the overlay the alias table of o_wk rden_k over its entries and the
    mass O_w (a row whose mass is 0 gets no table and is never drawn); ``weight``, ``small``
    and ``large`` hold a row's entries (at most K)."""
    cdef Py_ssize_t w, n, j
    cdef int64_t base
    cdef double total
    for w in range(rows):
        base = tb.o_ptr[w]
        n = tb.o_ptr[w + 1] - base
        total = 0.0
        for j in range(n):
            weight[j] = tb.o_extra[base + j] * tb.rden[tb.o_topic[base + j]]
            total = total + weight[j]
        tb.o_mass[w] = total
        if total > 0.0:
            _alias_build(weight, n, total, tb.o_prob + base, tb.o_alias + base, small, large)


cdef void _word_term_free(WordTerm* buf) noexcept nogil:
    """Free what :func:`_word_term_init` allocated, whether it finished or not."""
    free(buf.bbar)
    free(buf.o_prob)
    free(buf.o_alias)
    free(buf.o_mass)
    free(buf.phi_prob)
    free(buf.phi_alias)


cdef int _attach_overlay(Tables* tb, WordTerm* buf, Py_ssize_t rows, Py_ssize_t K,
                         double beta, const int64_t[::1] prior_ptr,
                         const int32_t[::1] prior_topic, const double[::1] prior_extra,
                         bint totals) except -1:
    """Check the overlay of ``rows`` rows (none: None) and point ``tb`` at it; with ``totals``
    (its rows are every word's) also beta-bar_k, which rden and the target read."""
    tb.bbar = NULL
    if not attach_overlay(prior_ptr, prior_topic, prior_extra, rows, K, &tb.o_ptr, &tb.o_topic,
                          &tb.o_extra):
        return 0
    if totals:
        buf.bbar = <double*> _alloc(K, sizeof(double))
        beta_bar(rows, K, beta, tb.o_ptr, tb.o_topic, tb.o_extra, buf.bbar)
        tb.bbar = buf.bbar
    return 0


cdef int _overlay_init(Tables* tb, WordTerm* buf, Py_ssize_t rows, Py_ssize_t K) except -1:
    """The overlay's alias tables from ``tb.rden``, O(nnz); nothing without an overlay."""
    cdef double* weight = NULL
    cdef int32_t* stacks = NULL
    if tb.o_ptr == NULL:
        return 0
    buf.o_prob = <double*> _alloc(tb.o_ptr[rows], sizeof(double))
    buf.o_alias = <int32_t*> _alloc(tb.o_ptr[rows], sizeof(int32_t))
    buf.o_mass = <double*> _alloc(rows, sizeof(double))
    tb.o_prob = buf.o_prob
    tb.o_alias = buf.o_alias
    tb.o_mass = buf.o_mass
    try:
        weight = <double*> _alloc(K, sizeof(double))
        stacks = <int32_t*> _alloc(2 * K, sizeof(int32_t))
        _overlay_tables(tb, rows, weight, stacks, stacks + K)
    finally:
        free(weight)
        free(stacks)
    return 0


cdef int _word_term_init(Tables* tb, WordTerm* buf, Py_ssize_t rows, Py_ssize_t K,
                         double beta, const int64_t[::1] prior_ptr,
                         const int32_t[::1] prior_topic, const double[::1] prior_extra,
                         const double[:, ::1] phi, bint totals, int threads) except -1:
    """The word terms of a sweep or a fold-in over ``rows`` table rows: the overlay (with
    beta-bar when ``totals``) and its tables from ``tb.rden``, phi's columns' tables (O(rows
    K)). ``buf`` zeroed by the caller, freed by :func:`_word_term_free` also when this
    raises."""
    tb.phi = NULL
    check_terms(prior_ptr, prior_topic, prior_extra, phi)
    _attach_overlay(tb, buf, rows, K, beta, prior_ptr, prior_topic, prior_extra, totals)
    _overlay_init(tb, buf, rows, K)
    if phi is None:
        return 0
    phi_tables(phi, K, rows, threads, &buf.phi_prob, &buf.phi_alias)
    tb.phi = &phi[0, 0]
    tb.phi_words = rows
    tb.phi_prob = buf.phi_prob
    tb.phi_alias = buf.phi_alias
    return 0


cdef struct AliasScratch:
    # every thread's buffers for building alias tables of at most ``longest`` entries: the
    # weights and the two stacks
    double** weight             # (threads, longest)
    int32_t** small             # (threads, K)
    int32_t** large             # (threads, K)


cdef int _alias_scratch_init(AliasScratch* sc, int threads, Py_ssize_t longest,
                             Py_ssize_t K) except -1:
    """Allocate ``sc`` (zeroed by the caller, freed by :func:`_alias_scratch_free` also when
    this raises)."""
    alloc_rows(<void***> &sc.weight, threads, longest, sizeof(double))
    alloc_rows(<void***> &sc.small, threads, K, sizeof(int32_t))
    alloc_rows(<void***> &sc.large, threads, K, sizeof(int32_t))
    return 0


cdef void _alias_scratch_free(AliasScratch* sc, int threads) noexcept nogil:
    """Free what :func:`_alias_scratch_init` allocated, whether it finished or not."""
    free_rows(<void**> sc.weight, threads)
    free_rows(<void**> sc.small, threads)
    free_rows(<void**> sc.large, threads)


cdef void _build_word(const Tables* tb, Py_ssize_t w, const int64_t* word_ptr,
                      const int64_t* word_tokens, const int32_t* z, int32_t* row,
                      int64_t* keys, double* weight, int32_t* small,
                      int32_t* large) noexcept nogil:
    """Word w's table from the topics of its tokens; ``row`` is a zeroed (K) scratch row and
    is left zeroed."""
    cdef int64_t t, base = tb.ptr[w]
    cdef Py_ssize_t n = 0, j
    cdef int32_t k
    cdef double total = 0.0
    for t in range(word_ptr[w], word_ptr[w + 1]):
        row[z[word_tokens[t]]] += 1
    for t in range(word_ptr[w], word_ptr[w + 1]):
        k = z[word_tokens[t]]
        if row[k] > 0:
            keys[n] = ((<int64_t> k) << 32) | row[k]
            row[k] = 0
            n += 1
    qsort(keys, n, sizeof(int64_t), _cmp_asc)
    for j in range(n):
        k = <int32_t> (keys[j] >> 32)
        tb.topic[base + j] = k
        tb.count[base + j] = <int32_t> (keys[j] & LOW32)
        weight[j] = tb.count[base + j] * tb.rden[k]
        total = total + weight[j]
    tb.length[w] = <int32_t> n
    tb.mass[w] = total
    if n > 0:
        _alias_build(weight, n, total, tb.prob + base, tb.alias + base, small, large)


cdef Py_ssize_t _longest_word(const int64_t[::1] word_ptr, const int64_t[::1] ptr,
                              Py_ssize_t K) except -1:
    """min(K, the most tokens of a word), at least 1; refuses a pool without min(n_w, K)
    entries for every word."""
    cdef Py_ssize_t w, n, longest = 1
    for w in range(word_ptr.shape[0] - 1):
        n = word_ptr[w + 1] - word_ptr[w]
        if n > longest:
            longest = n
        if ptr[w + 1] - ptr[w] < min(n, K):
            raise ValueError(f"word {w} has fewer table entries than min(n_w, K)")
    return K if longest > K else longest


def build_tables(const int64_t[::1] word_ptr,     # IN  (V + 1) offsets into word_tokens
                 const int64_t[::1] word_tokens,  # IN  (N) token positions grouped by word
                 const int32_t[::1] z,            # IN  (N) the topics the tables are built from
                 double beta,
                 const int64_t[::1] ptr,          # IN  (V + 1) offsets of each word's entries
                 int32_t[::1] topic,              # OUT (pool)
                 int32_t[::1] count,              # OUT (pool)
                 double[::1] prob,                # OUT (pool)
                 int32_t[::1] alias,              # OUT (pool)
                 int32_t[::1] length,             # OUT (V)
                 double[::1] mass,                # OUT (V)
                 int64_t[::1] nk,                 # OUT (K) the n_k of z
                 double[::1] rden,                # OUT (K)
                 double[::1] dense_prob,          # OUT (K)
                 int32_t[::1] dense_alias,        # OUT (K)
                 int threads=1,
                 const int64_t[::1] prior_ptr=None,     # IN  (V + 1) overlay rows, or None
                 const int32_t[::1] prior_topic=None,   # IN  (nnz) their topics, ascending
                 const double[::1] prior_extra=None):   # IN  (nnz) their extra prior o_wk
    """The word proposal's tables from the topics ``z`` (§2.7); returns Q, the mass of the
    shared part. A word's pool holds min(n_w, K) entries. O(N log + K), never O(V K). With an
    overlay of the word prior the denominators are stale n_k + beta-bar_k (its own tables
    are the sweep's). Equivalent to ``tests/reference/mh.py::build_tables``."""
    cdef Py_ssize_t V = word_ptr.shape[0] - 1, K = rden.shape[0], N = z.shape[0]
    cdef Py_ssize_t w, k, longest
    cdef int64_t i
    cdef int tid
    cdef Tables tb
    cdef WordTerm buf = WordTerm(NULL, NULL, NULL, NULL, NULL, NULL)
    cdef double* weight = NULL
    cdef int32_t** rows = NULL
    cdef int64_t** keys = NULL
    cdef AliasScratch sc = AliasScratch(NULL, NULL, NULL)
    cdef double vbeta = V * beta, q = 0.0
    cdef const int64_t* tokens = &word_tokens[0] if N > 0 else NULL
    cdef const int32_t* zp = &z[0] if N > 0 else NULL
    if word_tokens.shape[0] != N:
        raise ValueError("word_tokens needs one entry per token")
    if threads < 1:
        threads = 1
    if ptr.shape[0] != V + 1 or length.shape[0] != V or mass.shape[0] != V:
        raise ValueError("ptr, length and mass need one entry per word")
    if ptr[V] > topic.shape[0] or ptr[V] > prob.shape[0]:
        raise ValueError("the table pool is smaller than ptr says")
    longest = _longest_word(word_ptr, ptr, K)
    _bind_tables(&tb, ptr, topic, count, prob, alias, length, mass, rden, dense_prob,
                 dense_alias)
    tb.nk = &nk[0]
    if nk.shape[0] != K:
        raise ValueError("nk needs one entry per topic")
    try:
        check_terms(prior_ptr, prior_topic, prior_extra, None)
        _attach_overlay(&tb, &buf, V, K, beta, prior_ptr, prior_topic, prior_extra, True)
        weight = <double*> _alloc(K, sizeof(double))
        alloc_rows(<void***> &rows, threads, K, sizeof(int32_t), True)
        alloc_rows(<void***> &keys, threads, longest, sizeof(int64_t))
        _alias_scratch_init(&sc, threads, longest, K)
        with nogil:
            for k in range(K):
                nk[k] = 0
            for i in range(N):
                nk[zp[i]] += 1
            q = _shared_table(&tb, tb.nk, K, beta, vbeta, weight, sc.small[0], sc.large[0])
            with parallel(num_threads=threads):
                tid = threadid()
                for w in prange(V, schedule="guided"):
                    _build_word(&tb, w, &word_ptr[0], tokens, zp, rows[tid], keys[tid],
                                sc.weight[tid], sc.small[tid], sc.large[tid])
    finally:
        free_rows(<void**> rows, threads)
        free_rows(<void**> keys, threads)
        _alias_scratch_free(&sc, threads)
        free(weight)
        _word_term_free(&buf)
    return q


# ---------------------------------------------------------------- one sweep

cdef struct MHSweep:
    # what one sweep reads: the tokens, the prior, the tables and the sizes
    const int64_t* doc_ptr      # (D + 1)
    const int32_t* words        # (N)
    int32_t* z                  # (N)
    int32_t* ndk                # (D, K)
    Py_ssize_t n_tokens
    const double* alpha         # (1 or D, K) the prior of theta
    bint per_doc                # alpha has a row per document
    const double* alpha_bar     # (K) the document proposal's prior part (alpha itself when
                                # shared; with a prior per document a vector shared by all)
    double alpha_sum            # sum of alpha_bar
    double beta
    double vbeta
    Py_ssize_t K
    Py_ssize_t V
    int steps                   # MH cycles (word proposal + document proposal) per token
    const int32_t* table_z      # (N) the topics the tables were built from; NULL: z itself
    Tables tb
    double* alpha_prob          # (K) alias table of alpha_bar
    int32_t* alpha_alias        # (K)


cdef struct MHWorkspace:
    # everything one sweep allocates, all of it before the sampling starts
    Py_ssize_t C
    int threads
    const int64_t* bounds       # (C + 1)
    bitgen_t** gens             # (C)
    int32_t* snap_nkw           # (V, K) AD-LDA: the counts at the start of the iteration
    int64_t* snap_nk            # (K)
    int32_t** own_nkw           # (threads) a chunk >= 1's private copy of the counts
    int64_t** own_nk            # (threads)
    int32_t* z_old              # topics of the tokens of chunks >= 1 at the start (merge)
    double* alpha_prob          # (K)
    int32_t* alpha_alias        # (K)
    int32_t* alpha_scratch      # (2 K) the stacks of its alias build
    WordTerm term               # the word terms' tables (an overlay, a given phi)


cdef inline double _target(const MHSweep* sw, const int32_t* nd, const double* a,
                           const int32_t* nw, const int64_t* nk, int32_t w, Py_ssize_t k,
                           term_t mode) noexcept nogil:
    """pi(k), unnormalised: (n_dk + alpha_k)(n_kw + beta + o_wk) / (n_k + beta-bar_k) (§2.1;
    o = 0 and beta-bar = V beta without an overlay)."""
    return ((nd[k] + a[k]) * (nw[k] + sw.beta + _extra(&sw.tb, w, k, mode))
            / (nk[k] + _bbar(&sw.tb, sw.vbeta, k, mode)))


cdef inline double _word_factor(const MHSweep* sw, const int32_t* nw, const int64_t* nk,
                                int32_t w, Py_ssize_t k, term_t mode) noexcept nogil:
    """The word factor of pi(k): (n_kw + beta + o_wk) / (n_k + beta-bar_k), or phi_t[k, w]
    when a topic-word matrix is given."""
    if term_t is given_term:
        return sw.tb.phi[k * sw.tb.phi_words + w]
    return ((nw[k] + sw.beta + _extra(&sw.tb, w, k, mode))
            / (nk[k] + _bbar(&sw.tb, sw.vbeta, k, mode)))


cdef inline double _proposal(const Tables* tb, int64_t base, Py_ssize_t n, int32_t w,
                             Py_ssize_t k, Py_ssize_t r, double beta, double vbeta,
                             term_t mode) noexcept nogil:
    """q_i(k), unnormalised: the tables' weight (stale n_kw + beta + o_wk) / (stale n_k +
    beta-bar_k) with the token's own table entry (topic r) taken out."""
    cdef int32_t c = _stale_count(tb.topic + base, tb.count + base, n, <int32_t> k)
    if k == r:
        return ((c - 1 + beta + _extra(tb, w, k, mode))
                / (tb.nk[k] - 1 + _bbar(tb, vbeta, k, mode)))
    return (c + beta + _extra(tb, w, k, mode)) * tb.rden[k]


cdef inline Py_ssize_t _table_draw(const Tables* tb, Py_ssize_t K, int32_t w, double u,
                                   double x, term_t mode) noexcept nogil:
    """The part u of [0, S_w + Q + O_w) picks (the word's table, the shared one, the word's
    overlay table: O_w = 0 without an overlay), x the entry."""
    cdef int64_t base = tb.ptr[w], ob
    if u < tb.mass[w]:
        return tb.topic[base + _alias_draw(x, tb.prob + base, tb.alias + base, tb.length[w])]
    if term_t is overlay_term:
        if tb.o_mass[w] > 0.0 and u >= tb.mass[w] + tb.dense_mass:
            ob = tb.o_ptr[w]
            return tb.o_topic[ob + _alias_draw(x, tb.o_prob + ob, tb.o_alias + ob,
                                               tb.o_ptr[w + 1] - ob)]
    return _alias_draw(x, tb.dense_prob, tb.dense_alias, K)


cdef inline Py_ssize_t _word_draw(const Tables* tb, Py_ssize_t K, double beta, double vbeta,
                                  int32_t w, Py_ssize_t r, bitgen_t* gen,
                                  term_t mode) noexcept nogil:
    """A topic from q_i: from the tables (two uniforms), the token's own table topic r kept
    with probability q_i(r) / q(r) (one more uniform) and drawn again otherwise; r < 0: the
    token is in no table (fold-in), so the first draw is kept."""
    cdef int64_t base = tb.ptr[w]
    cdef Py_ssize_t n = tb.length[w], t
    cdef double u, x
    cdef double total = tb.mass[w] + tb.dense_mass
    if term_t is overlay_term:
        total = total + tb.o_mass[w]
    while True:
        u = next_uniform(gen) * total
        x = next_uniform(gen)
        t = _table_draw(tb, K, w, u, x, mode)
        if t != r:
            return t
        if (next_uniform(gen) * ((_stale_count(tb.topic + base, tb.count + base, n,
                                               <int32_t> r) + beta + _extra(tb, w, r, mode))
                                 * tb.rden[r])
                < _proposal(tb, base, n, w, r, r, beta, vbeta, mode)):
            return t


cdef inline Py_ssize_t _fixed_word_step(const Tables* tb, Py_ssize_t K, double beta, int32_t w,
                                        Py_ssize_t s, const int32_t* nd, const double* a,
                                        bitgen_t* gen, term_t mode) noexcept nogil:
    """A word proposal whose draw is the target's word factor exactly (the tables of a
    fold-in, two uniforms; the alias table of a given phi's column, one), so that t is
    accepted with (n_dt + alpha_t) / (n_ds + alpha_s) (one more uniform)."""
    cdef Py_ssize_t t
    cdef double u
    if term_t is given_term:
        t = _alias_draw(next_uniform(gen), tb.phi_prob + w * K, tb.phi_alias + w * K, K)
    else:
        t = _word_draw(tb, K, beta, 0.0, w, -1, gen, mode)
    u = next_uniform(gen)
    if t != s and u * (nd[s] + a[s]) < nd[t] + a[t]:
        return t
    return s


cdef inline Py_ssize_t _word_step(const MHSweep* sw, Py_ssize_t s, Py_ssize_t r, int32_t w,
                                  const int32_t* nd, const double* a, const int32_t* nw,
                                  const int64_t* nk, bitgen_t* gen, term_t mode) noexcept nogil:
    """One word proposal (§2.7) from the tables, accepted with the ratio of the proposal
    probabilities the tables give (``a``: the document's prior); returns the new topic. With
    a given phi, a draw from its column's table."""
    cdef const Tables* tb = &sw.tb
    cdef int64_t base = tb.ptr[w]
    cdef Py_ssize_t n = tb.length[w], t
    cdef double u, qs, qt, ps, pt
    if term_t is given_term:
        return _fixed_word_step(tb, sw.K, sw.beta, w, s, nd, a, gen, mode)
    t = _word_draw(tb, sw.K, sw.beta, sw.vbeta, w, r, gen, mode)
    u = next_uniform(gen)
    if t == s:
        return s
    qs = _proposal(tb, base, n, w, s, r, sw.beta, sw.vbeta, mode)
    qt = _proposal(tb, base, n, w, t, r, sw.beta, sw.vbeta, mode)
    pt = _target(sw, nd, a, nw, nk, w, t, mode)
    ps = _target(sw, nd, a, nw, nk, w, s, mode)
    if u * (ps * qt) < pt * qs:
        return t
    return s


cdef inline Py_ssize_t _doc_draw(const int32_t* z, int64_t n, int64_t i, Py_ssize_t s,
                                 double alpha_sum, const double* alpha_prob,
                                 const int32_t* alpha_alias, Py_ssize_t K,
                                 bitgen_t* gen) noexcept nogil:
    """A topic from q(k | s) proportional to n_dk + [k = s] + alpha-bar_k (§2.7): a random
    token of the document's ``n`` tokens ``z`` (token i counting as its current topic s), or
    a topic from the alias table of alpha-bar (sum ``alpha_sum``)."""
    cdef double u = next_uniform(gen) * (<double> n + alpha_sum)
    cdef int64_t j
    if u < n:
        j = <int64_t> u
        if j > n - 1:
            j = n - 1
        return s if j == i else z[j]
    return _alias_draw(next_uniform(gen), alpha_prob, alpha_alias, K)


cdef inline double _doc_factor(const int32_t* nd, const double* a, const double* bar,
                               Py_ssize_t k, Py_ssize_t other) noexcept nogil:
    """The document part of the document proposal's ratio for a prior per document:
    (n_dk + alpha_dk)(n_d,other + alpha-bar_other); the ratio of moving s -> t is
    factor(t, s) / factor(s, t) (§2.7)."""
    return (nd[k] + a[k]) * (nd[other] + bar[other])


cdef inline Py_ssize_t _doc_step(const MHSweep* sw, Py_ssize_t s, int64_t i, int64_t begin,
                                 int64_t end, int32_t w, const int32_t* nd, const double* a,
                                 const int32_t* nw, const int64_t* nk, bitgen_t* gen,
                                 term_t mode) noexcept nogil:
    """One document proposal (§2.7), accepted with the ratio of the word factors, times the
    document factors that no longer cancel when the document's prior ``a`` is not
    alpha-bar."""
    cdef Py_ssize_t t = _doc_draw(sw.z + begin, end - begin, i - begin, s, sw.alpha_sum,
                                  sw.alpha_prob, sw.alpha_alias, sw.K, gen)
    cdef double u = next_uniform(gen)
    cdef double ps, pt
    if t == s:
        return s
    pt = _word_factor(sw, nw, nk, w, t, mode)
    ps = _word_factor(sw, nw, nk, w, s, mode)
    if sw.per_doc:
        pt = pt * _doc_factor(nd, a, sw.alpha_bar, t, s)
        ps = ps * _doc_factor(nd, a, sw.alpha_bar, s, t)
    if u * ps < pt:
        return t
    return s


cdef void _sweep_chunk(const MHSweep* sw, int32_t* nkw, int64_t* nk, int64_t d_begin,
                       int64_t d_end, bitgen_t* gen, term_t mode) noexcept nogil:
    """Documents [d_begin, d_end) against the counts ``nkw``, ``nk``: every token out of the
    counts, ``steps`` cycles of a word and a document proposal, back in."""
    cdef Py_ssize_t K = sw.K, s, r
    cdef int64_t d, i, begin, end
    cdef int32_t* nd
    cdef int32_t* nw
    cdef const double* a
    cdef int32_t w
    cdef int step
    for d in range(d_begin, d_end):
        nd = sw.ndk + d * K
        a = sw.alpha + (d * K if sw.per_doc else 0)
        begin = sw.doc_ptr[d]
        end = sw.doc_ptr[d + 1]
        for i in range(begin, end):
            w = sw.words[i]
            nw = nkw + w * K
            s = sw.z[i]
            r = s if sw.table_z == NULL else sw.table_z[i]
            nd[s] -= 1
            nw[s] -= 1
            nk[s] -= 1
            for step in range(sw.steps):
                s = _word_step(sw, s, r, w, nd, a, nw, nk, gen, mode)
                s = _doc_step(sw, s, i, begin, end, w, nd, a, nw, nk, gen, mode)
            sw.z[i] = <int32_t> s
            nd[s] += 1
            nw[s] += 1
            nk[s] += 1


cdef void _mh_workspace_free(MHWorkspace* ws) noexcept nogil:
    """Free everything :func:`_mh_workspace_init` allocated, whether it finished or not."""
    free_rows(<void**> ws.own_nkw, ws.threads)
    free_rows(<void**> ws.own_nk, ws.threads)
    free(ws.gens)
    free(ws.snap_nkw)
    free(ws.snap_nk)
    free(ws.z_old)
    free(ws.alpha_prob)
    free(ws.alpha_alias)
    free(ws.alpha_scratch)
    _word_term_free(&ws.term)


cdef int _mh_workspace_init(MHWorkspace* ws, const MHSweep* sw,
                            const int64_t[::1] chunk_bounds, list streams,
                            int threads) except -1:
    """Streams and every buffer of one sweep (``ws`` zeroed by the caller, freed by
    :func:`_mh_workspace_free` also when this raises)."""
    cdef Py_ssize_t C = chunk_bounds.shape[0] - 1, c
    if C < 1:
        raise ValueError("a sweep needs at least one chunk")
    if len(streams) != C:
        raise ValueError(f"{C} chunks need {C} streams, got {len(streams)}")
    ws.C = C
    ws.threads = 1 if threads < 1 else (<int> C if threads > C else threads)
    ws.bounds = &chunk_bounds[0]
    ws.gens = <bitgen_t**> _alloc(C, sizeof(bitgen_t*))
    for c in range(C):
        ws.gens[c] = bitgen_of(streams[c])
    ws.alpha_prob = <double*> _alloc(sw.K, sizeof(double))
    ws.alpha_alias = <int32_t*> _alloc(sw.K, sizeof(int32_t))
    ws.alpha_scratch = <int32_t*> _alloc(2 * sw.K, sizeof(int32_t))
    if C == 1:
        return 0
    ws.snap_nkw = <int32_t*> _alloc(sw.V * sw.K, sizeof(int32_t))
    ws.snap_nk = <int64_t*> _alloc(sw.K, sizeof(int64_t))
    alloc_rows(<void***> &ws.own_nkw, ws.threads, sw.V * sw.K, sizeof(int32_t))
    alloc_rows(<void***> &ws.own_nk, ws.threads, sw.K, sizeof(int64_t))
    ws.z_old = <int32_t*> _alloc(sw.n_tokens - sw.doc_ptr[chunk_bounds[1]], sizeof(int32_t))
    return 0


cdef void _sample_chunk(const MHSweep* sw, MHWorkspace* ws, int32_t* nkw, int64_t* nk,
                        Py_ssize_t c, int tid, term_t mode) noexcept nogil:
    """Chunk c by thread ``tid``: chunk 0 in place on the shared counts, a chunk c >= 1 on its
    thread's fresh copy of the counts of the start of the iteration."""
    if c == 0:
        _sweep_chunk(sw, nkw, nk, ws.bounds[0], ws.bounds[1], ws.gens[0], mode)
        return
    memcpy(ws.own_nkw[tid], ws.snap_nkw, sw.V * sw.K * sizeof(int32_t))
    memcpy(ws.own_nk[tid], ws.snap_nk, sw.K * sizeof(int64_t))
    _sweep_chunk(sw, ws.own_nkw[tid], ws.own_nk[tid], ws.bounds[c], ws.bounds[c + 1],
                 ws.gens[c], mode)


cdef void _sweep_chunks(const MHSweep* sw, MHWorkspace* ws, int32_t* nkw, int64_t* nk,
                        term_t mode) noexcept nogil:
    """All chunks of one AD-LDA iteration (§2.4), then the changes of chunks >= 1 replayed on
    the shared counts (integer sums: the order does not matter)."""
    cdef Py_ssize_t c, K = sw.K
    cdef int tid
    cdef int64_t start1, i
    cdef int32_t w, k_old, k_new
    if ws.C == 1:
        _sweep_chunk(sw, nkw, nk, ws.bounds[0], ws.bounds[1], ws.gens[0], mode)
        return
    start1 = sw.doc_ptr[ws.bounds[1]]
    memcpy(ws.snap_nkw, nkw, sw.V * K * sizeof(int32_t))
    memcpy(ws.snap_nk, nk, K * sizeof(int64_t))
    memcpy(ws.z_old, sw.z + start1, (sw.n_tokens - start1) * sizeof(int32_t))
    with parallel(num_threads=ws.threads):
        tid = threadid()
        for c in prange(ws.C, schedule="dynamic", chunksize=1):
            _sample_chunk(sw, ws, nkw, nk, c, tid, mode)
    for i in range(sw.n_tokens - start1):
        k_old = ws.z_old[i]
        k_new = sw.z[start1 + i]
        if k_old != k_new:
            w = sw.words[start1 + i]
            nkw[w * K + k_old] -= 1
            nkw[w * K + k_new] += 1
            nk[k_old] -= 1
            nk[k_new] += 1


def mh_sweep(const int64_t[::1] doc_ptr,       # IN  (D + 1) token offsets
             const int32_t[::1] words,         # IN  (N) word ids, canonical order
             int32_t[::1] z,                   # IN/OUT (N)
             int32_t[:, ::1] ndk,              # IN/OUT (D, K)
             int32_t[:, ::1] nkw,              # IN/OUT (V, K) word-major
             int64_t[::1] nk,                  # IN/OUT (K)
             const double[:, ::1] alpha,       # IN  (1 or D, K) prior of theta
             const double[::1] alpha_bar,      # IN  (K) document proposal's prior part
             double beta,
             const int64_t[::1] chunk_bounds,  # IN  (C + 1) document boundaries of chunks
             list streams,                     # IN  C PCG64 bit generators, one per chunk
             int steps,
             const int64_t[::1] ptr,           # IN  tables of build_tables
             int32_t[::1] topic,
             int32_t[::1] count,
             double[::1] prob,
             int32_t[::1] alias,
             int32_t[::1] length,
             double[::1] mass,
             int64_t[::1] table_nk,
             double[::1] rden,
             double[::1] dense_prob,
             int32_t[::1] dense_alias,
             double dense_mass,
             const int32_t[::1] table_z,       # IN  (N) or None: the tables are of z itself
             int threads,
             const int64_t[::1] prior_ptr=None,    # IN  (V + 1) word prior overlay, or None
             const int32_t[::1] prior_topic=None,  # IN  (nnz) its topics, ascending per word
             const double[::1] prior_extra=None,   # IN  (nnz) its extra prior o_wk >= 0
             const double[:, ::1] phi=None):       # IN  (K, V) a given phi_t, or None
    """One MH iteration over every chunk (§2.7, AD-LDA §2.4 for C > 1 chunks).

    Every token takes ``steps`` cycles of a word proposal (from the tables, built by
    :func:`build_tables` from an earlier state) and a document proposal, each accepted with
    its Metropolis-Hastings ratio. With one prior row, ``alpha_bar`` must be that row; with a
    row per document, the document proposal draws from ``alpha_bar`` and its ratio carries the
    document factors. With an overlay o of the word prior (the one the tables were built
    with) the target is (n_dk + alpha_k)(n_kw + beta + o_wk) / (n_k + beta-bar_k); with a given
    ``phi`` it is (n_dk + alpha_k) phi[k, w] and the word proposal the alias table of phi's
    column, built at every call (O(V K)). Equivalent to ``tests/reference/mh.py::sweep``.
    """
    cdef MHSweep sw
    cdef MHWorkspace ws
    cdef Py_ssize_t K = ndk.shape[1], V = nkw.shape[0], k
    cdef double total = 0.0
    if steps < 1:
        raise ValueError(f"steps must be >= 1; got {steps}")
    if (alpha.shape[1] != K or alpha_bar.shape[0] != K or rden.shape[0] != K
            or table_nk.shape[0] != K or length.shape[0] != V):
        raise ValueError("alpha, rden and the table lengths do not match K and V")
    if alpha.shape[0] != 1 and alpha.shape[0] != ndk.shape[0]:
        raise ValueError("alpha needs one row, or one row per document")
    sw.doc_ptr = &doc_ptr[0]
    sw.words = &words[0] if words.shape[0] > 0 else NULL
    sw.z = &z[0] if z.shape[0] > 0 else NULL
    sw.ndk = &ndk[0, 0]
    sw.n_tokens = words.shape[0]
    sw.alpha = &alpha[0, 0]
    sw.per_doc = alpha.shape[0] > 1
    sw.alpha_bar = &alpha_bar[0]
    sw.beta = beta
    sw.vbeta = V * beta
    sw.K = K
    sw.V = V
    sw.steps = steps
    sw.table_z = NULL
    if table_z is not None:
        if table_z.shape[0] != words.shape[0]:
            raise ValueError("table_z needs one entry per token")
        sw.table_z = &table_z[0] if table_z.shape[0] > 0 else NULL
    _bind_tables(&sw.tb, ptr, topic, count, prob, alias, length, mass, rden, dense_prob,
                 dense_alias)
    sw.tb.nk = &table_nk[0]
    sw.tb.dense_mass = dense_mass
    ws = MHWorkspace(C=0, threads=0, bounds=NULL, gens=NULL, snap_nkw=NULL, snap_nk=NULL,
                     own_nkw=NULL, own_nk=NULL, z_old=NULL, alpha_prob=NULL, alpha_alias=NULL,
                     alpha_scratch=NULL, term=WordTerm(NULL, NULL, NULL, NULL, NULL, NULL))
    try:
        _word_term_init(&sw.tb, &ws.term, V, K, beta, prior_ptr, prior_topic, prior_extra, phi,
                        True, threads)
        _mh_workspace_init(&ws, &sw, chunk_bounds, streams, threads)
        sw.alpha_prob = ws.alpha_prob
        sw.alpha_alias = ws.alpha_alias
        with nogil:
            for k in range(K):
                total = total + alpha_bar[k]
            sw.alpha_sum = total
            _alias_build(sw.alpha_bar, K, total, ws.alpha_prob, ws.alpha_alias,
                         ws.alpha_scratch, ws.alpha_scratch + K)
            if sw.tb.phi != NULL:
                _sweep_chunks(&sw, &ws, &nkw[0, 0], &nk[0], <given_term> NULL)
            elif sw.tb.o_ptr != NULL:
                _sweep_chunks(&sw, &ws, &nkw[0, 0], &nk[0], <overlay_term> NULL)
            else:
                _sweep_chunks(&sw, &ws, &nkw[0, 0], &nk[0], <plain_term> NULL)
    finally:
        _mh_workspace_free(&ws)


# ---------------------------------------------------------------- fold-in with fixed topics

def count_nonzeros(const int32_t[:, ::1] nkw,    # IN  (V, K) a model's word-topic counts
                   const int64_t[::1] vocab,     # IN  (V_f) the words to build tables for
                   int64_t[::1] out):            # OUT (V_f) topics with n_kw > 0 of each
    """The table sizes :func:`build_count_tables` needs, O(V_f K)."""
    cdef Py_ssize_t j, k, K = nkw.shape[1]
    cdef int64_t n
    if out.shape[0] != vocab.shape[0]:
        raise ValueError("out needs one entry per word")
    with nogil:
        for j in range(vocab.shape[0]):
            n = 0
            for k in range(K):
                if nkw[vocab[j], k] > 0:
                    n += 1
            out[j] = n


cdef void _count_word(const Tables* tb, Py_ssize_t j, const int32_t* row, Py_ssize_t K,
                      double* weight, int32_t* small, int32_t* large) noexcept nogil:
    """Table j from the (K) counts ``row``: the topics with a count, ascending."""
    cdef int64_t base = tb.ptr[j]
    cdef Py_ssize_t n = 0, k
    cdef double total = 0.0
    for k in range(K):
        if row[k] > 0:
            tb.topic[base + n] = <int32_t> k
            tb.count[base + n] = row[k]
            weight[n] = row[k] * tb.rden[k]
            total = total + weight[n]
            n += 1
    tb.length[j] = <int32_t> n
    tb.mass[j] = total
    if n > 0:
        _alias_build(weight, n, total, tb.prob + base, tb.alias + base, small, large)


def build_count_tables(const int32_t[:, ::1] nkw,  # IN  (V, K) a model's word-topic counts
                       const int64_t[::1] nk,      # IN  (K) its topic totals
                       const int64_t[::1] vocab,   # IN  (V_f) the words to build tables for
                       double beta,
                       const int64_t[::1] ptr,     # IN  (V_f + 1) offsets (count_nonzeros)
                       int32_t[::1] topic,         # OUT (pool)
                       int32_t[::1] count,         # OUT (pool)
                       double[::1] prob,           # OUT (pool)
                       int32_t[::1] alias,         # OUT (pool)
                       int32_t[::1] length,        # OUT (V_f)
                       double[::1] mass,           # OUT (V_f)
                       double[::1] rden,           # OUT (K) 1 / (n_k + V beta)
                       double[::1] dense_prob,     # OUT (K)
                       int32_t[::1] dense_alias,   # OUT (K)
                       int threads=1,
                       const int64_t[::1] prior_ptr=None,    # IN  (V + 1) overlay, or None
                       const int32_t[::1] prior_topic=None,  # IN  (nnz) topics, ascending
                       const double[::1] prior_extra=None):  # IN  (nnz) extra prior o_wk
    """The word proposal's tables of §2.7 from counts rather than from topic assignments:
    table j is word vocab[j]'s, over the topics with n_kw > 0, weights n_kw / (n_k + V beta);
    the shared table beta / (n_k + V beta) over all K. Returns Q, the shared mass; with the
    word's mass S_w the proposal is phi-hat_kw = (n_kw + beta) / (n_k + V beta) exactly.
    With an overlay of the word prior (rows of every word) the denominators are
    n_k + beta-bar_k; its own tables are the fold-in's. O(V_f K). Equivalent to
    ``tests/reference/mh.py::count_tables``."""
    cdef Py_ssize_t V = nkw.shape[0], K = nkw.shape[1], F = vocab.shape[0], j
    cdef Tables tb
    cdef WordTerm buf = WordTerm(NULL, NULL, NULL, NULL, NULL, NULL)
    cdef double q = 0.0
    cdef AliasScratch sc = AliasScratch(NULL, NULL, NULL)
    cdef int tid
    if nk.shape[0] != K or rden.shape[0] != K or dense_prob.shape[0] != K:
        raise ValueError("nk, rden and the shared table need one entry per topic")
    if ptr.shape[0] != F + 1 or length.shape[0] != F or mass.shape[0] != F:
        raise ValueError("ptr, length and mass need one entry per word")
    if ptr[F] > topic.shape[0] or ptr[F] > prob.shape[0]:
        raise ValueError("the table pool is smaller than ptr says")
    for j in range(F):
        if vocab[j] < 0 or vocab[j] >= V:
            raise ValueError(f"word {vocab[j]} is outside the model's vocabulary")
    if threads < 1:
        threads = 1
    _bind_tables(&tb, ptr, topic, count, prob, alias, length, mass, rden, dense_prob,
                 dense_alias)
    try:
        check_terms(prior_ptr, prior_topic, prior_extra, None)
        _attach_overlay(&tb, &buf, V, K, beta, prior_ptr, prior_topic, prior_extra, True)
        _alias_scratch_init(&sc, threads, K, K)
        with nogil:
            q = _shared_table(&tb, &nk[0], K, beta, V * beta, sc.weight[0], sc.small[0],
                              sc.large[0])
            with parallel(num_threads=threads):
                tid = threadid()
                for j in prange(F, schedule="guided"):
                    _count_word(&tb, j, &nkw[vocab[j], 0], K, sc.weight[tid], sc.small[tid],
                                sc.large[tid])
    finally:
        _alias_scratch_free(&sc, threads)
        _word_term_free(&buf)
    return q


cdef struct MHFold:
    # what the MH fold-in of every document reads, and where it writes
    const int64_t* obs_ptr      # (D + 1)
    const int32_t* obs_words    # table ids of the observed tokens
    const uint8_t* active       # (D) 0 = skip the document (no draws)
    const double* alpha         # (1 or D, K)
    bint per_doc
    double alpha_sum            # sum of the shared prior (one row)
    double* alpha_prob          # (K) alias table of the shared prior (one row)
    int32_t* alpha_alias        # (K)
    Tables tb                   # count tables (build_count_tables)
    double beta
    Py_ssize_t K
    int steps
    int n_sweeps
    int n_burn
    double* theta               # (D, K)


cdef inline double _fixed_phi(const Tables* tb, int32_t w, Py_ssize_t k, double beta,
                              term_t mode) noexcept nogil:
    """phi-hat_kw = (n_kw + beta + o_wk) / (n_k + beta-bar_k) from word w's table, or the
    given phi[k, w]."""
    cdef int64_t base = tb.ptr[w]
    if term_t is given_term:
        return tb.phi[k * tb.phi_words + w]
    return (_stale_count(tb.topic + base, tb.count + base, tb.length[w], <int32_t> k)
            + beta + _extra(tb, w, k, mode)) * tb.rden[k]


cdef inline Py_ssize_t _fold_step(const MHFold* f, const int32_t* zd, int64_t n, int64_t i,
                                  Py_ssize_t s, int32_t w, const int32_t* nd, const double* a,
                                  double alpha_sum, const double* alpha_prob,
                                  const int32_t* alpha_alias, bitgen_t* gen,
                                  term_t mode) noexcept nogil:
    """One cycle for token i of a document being folded in (counts ``nd`` without it, prior
    ``a`` with its alias table): the word proposal phi-hat_.w, accepted with
    (n_dt + alpha_dt) / (n_ds + alpha_ds); then the document proposal from the document's own
    prior, accepted with phi-hat_tw / phi-hat_sw."""
    cdef Py_ssize_t t
    cdef double u
    s = _fixed_word_step(&f.tb, f.K, f.beta, w, s, nd, a, gen, mode)
    t = _doc_draw(zd, n, i, s, alpha_sum, alpha_prob, alpha_alias, f.K, gen)
    u = next_uniform(gen)
    if (t != s and u * _fixed_phi(&f.tb, w, s, f.beta, mode)
            < _fixed_phi(&f.tb, w, t, f.beta, mode)):
        return t
    return s


cdef struct FoldScratch:
    # the buffers of one thread, carved from one allocation (``block``)
    void* block
    int32_t* zd                 # (longest document) topics
    int32_t* nd                 # (K) n_dk
    int64_t* kept               # (K) n_dk summed over the kept sweeps
    double* alpha_prob          # (K) alias table of the document's prior (a prior per document)
    int32_t* alpha_alias        # (K)
    int32_t* stacks             # (2 K) its build's stacks


cdef void _mh_fold_doc(const MHFold* f, Py_ssize_t d, FoldScratch* sc, bitgen_t* gen,
                       term_t mode) noexcept nogil:
    """Document d: uniform start (one uniform per token, as the Gibbs fold-in), ``n_sweeps``
    sweeps of ``steps`` cycles per token, theta-hat from the kept sweeps as
    ``_heldout.fold_in_theta`` forms it. A prior per document gets its alias table here: O(K)
    per document, as its theta-hat row."""
    cdef Py_ssize_t k, K = f.K, s
    cdef int64_t begin = f.obs_ptr[d], n = f.obs_ptr[d + 1] - begin, i
    cdef const int32_t* words = f.obs_words + begin
    cdef const double* a = f.alpha + (d * K if f.per_doc else 0)
    cdef double* theta = f.theta + d * K
    cdef double alpha_sum = 0.0, denom
    cdef int sweep, step, n_kept = f.n_sweeps - f.n_burn
    cdef int32_t* zd = sc.zd
    cdef int32_t* nd = sc.nd
    cdef int64_t* kept = sc.kept
    cdef const double* prob = f.alpha_prob
    cdef const int32_t* alias = f.alpha_alias
    for k in range(K):
        nd[k] = 0
        kept[k] = 0
        alpha_sum += a[k]
    if f.per_doc and n > 0:
        _alias_build(a, K, alpha_sum, sc.alpha_prob, sc.alpha_alias, sc.stacks, sc.stacks + K)
        prob = sc.alpha_prob
        alias = sc.alpha_alias
    for i in range(n):
        zd[i] = uniform_topic(gen, <int> K)
        nd[zd[i]] += 1
    for sweep in range(f.n_sweeps):
        for i in range(n):
            s = zd[i]
            nd[s] -= 1
            for step in range(f.steps):
                s = _fold_step(f, zd, n, i, s, words[i], nd, a, alpha_sum, prob, alias, gen,
                               mode)
            zd[i] = <int32_t> s
            nd[s] += 1
        if sweep >= f.n_burn:
            # the kept sweep's n_dk, added token by token: O(N_d), not O(K)
            for i in range(n):
                kept[zd[i]] += 1
    denom = n + alpha_sum
    for k in range(K):
        if n_kept > 0:
            theta[k] = (kept[k] / <double> n_kept + a[k]) / denom
        else:
            theta[k] = (nd[k] + a[k]) / denom


cdef Py_ssize_t _longest_document(const int64_t[::1] obs_ptr, const int32_t[::1] obs_words,
                                  Py_ssize_t n_tables) except -1:
    """The most observed tokens of a document (at least 1); refuses a token without a
    table."""
    cdef Py_ssize_t i
    for i in range(obs_words.shape[0]):
        if obs_words[i] < 0 or obs_words[i] >= n_tables:
            raise ValueError("an observed token has no table")
    return longest_row(&obs_ptr[0], obs_ptr.shape[0] - 1)


cdef int _fold_scratch_init(FoldScratch* sc, int threads, Py_ssize_t max_len,
                            Py_ssize_t K) except -1:
    """Every thread's buffers, one allocation each, the 8-byte arrays first (``sc`` zeroed;
    freed by :func:`_fold_scratch_free` also when this raises). The alias table of a
    document's prior is used only with a prior per document."""
    cdef int tid
    cdef char* at
    for tid in range(threads):
        sc[tid].block = _alloc(32 * K + 4 * max_len, 1)
        at = <char*> sc[tid].block
        sc[tid].kept = <int64_t*> at
        sc[tid].alpha_prob = <double*> (at + 8 * K)
        sc[tid].nd = <int32_t*> (at + 16 * K)
        sc[tid].alpha_alias = <int32_t*> (at + 20 * K)
        sc[tid].stacks = <int32_t*> (at + 24 * K)
        sc[tid].zd = <int32_t*> (at + 32 * K)
    return 0


cdef void _fold_scratch_free(FoldScratch* sc, int threads) noexcept nogil:
    """Free what :func:`_fold_scratch_init` allocated; NULL is no-op."""
    cdef int tid
    if sc != NULL:
        for tid in range(threads):
            free(sc[tid].block)
    free(sc)


cdef void _fold_chunks(const MHFold* f, const int64_t* bounds, Py_ssize_t C, bitgen_t** gens,
                       FoldScratch* sc, int threads, term_t mode) noexcept nogil:
    """The active documents of every chunk, chunk c from its own stream, on ``threads``
    threads, compiled for the word term ``mode``."""
    cdef Py_ssize_t c, d
    cdef int tid
    with parallel(num_threads=threads):
        tid = threadid()
        for c in prange(C, schedule="dynamic", chunksize=1):
            for d in range(bounds[c], bounds[c + 1]):
                if f.active[d]:
                    _mh_fold_doc(f, d, &sc[tid], gens[c], mode)


def mh_fold_in(const int64_t[::1] obs_ptr,      # IN  (D + 1) observed-token offsets
               const int32_t[::1] obs_words,    # IN  observed tokens as table ids
               const double[:, ::1] alpha,      # IN  (1 or D, K) document prior
               int steps, int n_sweeps, int n_burn,
               const int64_t[::1] chunk_bounds,  # IN  (C + 1) document boundaries
               list streams,                    # IN  C bit generators, one per chunk
               const uint8_t[::1] active,       # IN  (D) 0 = skip the document
               double[:, ::1] theta,            # OUT (D, K) theta-hat; skipped rows untouched
               double beta,
               const int64_t[::1] ptr,          # IN  tables of build_count_tables
               int32_t[::1] topic,
               int32_t[::1] count,
               double[::1] prob,
               int32_t[::1] alias,
               int32_t[::1] length,
               double[::1] mass,
               double[::1] rden,
               double[::1] dense_prob,
               int32_t[::1] dense_alias,
               double dense_mass,
               int threads,
               const int64_t[::1] prior_ptr=None,    # IN  (tables + 1) overlay rows, or None
               const int32_t[::1] prior_topic=None,  # IN  (nnz) topics, ascending per row
               const double[::1] prior_extra=None,   # IN  (nnz) extra prior o_wk >= 0
               const double[:, ::1] phi=None):       # IN  (K, tables) a given phi_t, or None
    """Fold-in of documents with the topics fixed (§2.7, §11.2) by Metropolis-Hastings.

    Each active document starts from uniform topics and every token takes ``steps`` cycles
    per sweep of the word proposal (the tables, phi-hat exactly) and the document proposal
    (with the document's own prior), O(steps) per token whatever K is; the tables never
    change, so the chain is an exact MH
    chain for p(z | w, phi-hat, alpha_d). theta-hat = mean over the sweeps after burn-in of
    (n_dk + alpha_dk) / (N_obs + alpha_d.), as ``_heldout.fold_in_theta``. One stream per chunk,
    so the result does not depend on ``threads``. An overlay of the word prior (its rows
    those of the tables, built by :func:`build_count_tables` with the same overlay) makes
    phi-hat (n_kw + beta + o_wk) / (n_k + beta-bar_k); a given ``phi`` (its columns those of
    the tables) replaces phi-hat, and its columns' alias tables the word proposal.
    Equivalent to ``tests/reference/mh.py::fold_in_theta``.
    """
    cdef Py_ssize_t D = obs_ptr.shape[0] - 1, K = theta.shape[1], C = chunk_bounds.shape[0] - 1
    cdef Py_ssize_t c, d, k, max_len
    cdef MHFold f
    cdef bitgen_t** gens = NULL
    cdef FoldScratch* sc = NULL
    cdef int32_t* stacks = NULL
    cdef WordTerm term = WordTerm(NULL, NULL, NULL, NULL, NULL, NULL)
    cdef int tid
    if steps < 1 or n_sweeps < 1 or n_burn < 0 or n_burn > n_sweeps:
        raise ValueError("steps >= 1 and 0 <= n_burn <= n_sweeps >= 1 are needed")
    if len(streams) != C:
        raise ValueError(f"{C} chunks need {C} streams, got {len(streams)}")
    if (active.shape[0] != D or theta.shape[0] != D or alpha.shape[1] != K
            or rden.shape[0] != K or (alpha.shape[0] != 1 and alpha.shape[0] != D)
            or mass.shape[0] != length.shape[0]):
        raise ValueError("documents, active, alpha, theta and the tables do not fit together")
    max_len = _longest_document(obs_ptr, obs_words, length.shape[0])
    if D == 0:
        return
    threads = 1 if threads < 1 else (<int> C if threads > C else threads)
    f.obs_ptr = &obs_ptr[0]
    f.obs_words = &obs_words[0] if obs_words.shape[0] > 0 else NULL
    f.active = &active[0]
    f.alpha = &alpha[0, 0]
    f.per_doc = alpha.shape[0] > 1
    f.alpha_sum = 0.0
    for k in range(K):
        f.alpha_sum = f.alpha_sum + alpha[0, k]
    _bind_tables(&f.tb, ptr, topic, count, prob, alias, length, mass, rden, dense_prob,
                 dense_alias)
    f.tb.dense_mass = dense_mass
    f.beta = beta
    f.K = K
    f.steps = steps
    f.n_sweeps = n_sweeps
    f.n_burn = n_burn
    f.theta = &theta[0, 0]
    f.alpha_prob = NULL
    f.alpha_alias = NULL
    try:
        _word_term_init(&f.tb, &term, length.shape[0], K, beta, prior_ptr, prior_topic,
                        prior_extra, phi, False, threads)
        gens = <bitgen_t**> _alloc(C, sizeof(bitgen_t*))
        for c in range(C):
            gens[c] = bitgen_of(streams[c])
        f.alpha_prob = <double*> _alloc(K, sizeof(double))
        f.alpha_alias = <int32_t*> _alloc(K, sizeof(int32_t))
        stacks = <int32_t*> _alloc(2 * K, sizeof(int32_t))
        sc = <FoldScratch*> _alloc(threads, sizeof(FoldScratch), True)
        _fold_scratch_init(sc, threads, max_len, K)
        with nogil:
            _alias_build(f.alpha, K, f.alpha_sum, f.alpha_prob, f.alpha_alias, stacks,
                         stacks + K)
            if f.tb.phi != NULL:
                _fold_chunks(&f, &chunk_bounds[0], C, gens, sc, threads, <given_term> NULL)
            elif f.tb.o_ptr != NULL:
                _fold_chunks(&f, &chunk_bounds[0], C, gens, sc, threads, <overlay_term> NULL)
            else:
                _fold_chunks(&f, &chunk_bounds[0], C, gens, sc, threads, <plain_term> NULL)
    finally:
        _fold_scratch_free(sc, threads)
        free(stacks)
        free(f.alpha_prob)
        free(f.alpha_alias)
        free(gens)
        _word_term_free(&term)
