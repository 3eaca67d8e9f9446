# cython: language_level=3
"""Collapsed Gibbs sampling kernels for LDA (docs/algorithms.md §2, §11.2).

Kernels of one call per sweep or per evaluation, whole loops under ``nogil``:

* :func:`gibbs_sweep` -- one AD-LDA iteration over all chunks (dense exact sampler of §2.2,
  its uniform mapped by blocks of four topics, or SparseLDA of §2.3 inside each chunk).
  Equivalent to ``tests/reference/gibbs.py::sweep``.
* :func:`gibbs_block_sweep` -- one iteration of the partitioned schedule of §2.8 (B document
  blocks sample disjoint word blocks in B epochs), with either sampler.
  Equivalent to ``tests/reference/gibbs.py::block_sweep``.
* :func:`build_word_topic_lists` -- the SparseLDA per-word topic lists from counts.
  Equivalent to ``tests/reference/gibbs.py::word_topic_lists``.
* :func:`mean_list_length` -- the mean length of a token's word list (the choice of sampler
  of ``sparse: auto``). Equivalent to ``tests/reference/gibbs.py::mean_list_length``.

SparseLDA keeps, for every word w, the topics with n_kw > 0 as int64 entries
``(n_kw << bits) | k`` sorted in descending order (count descending, then topic descending).
The order is therefore a pure function of the counts: a list rebuilt from counts equals the
list maintained incrementally, which is what makes a resumed chain identical to an
uninterrupted one.

Randomness: one bit generator per chunk or block (never per thread), so the result depends
on the chunking only, not on the number of threads.

Inside :func:`gibbs_sweep`: a ``Sweep`` (the tokens, priors and sizes), the ``Counts`` a chunk
samples against (the shared ones or a private copy), a ``Scratch`` per thread and a ``Walk``
(the sampler's place in its chunk and the bucket sums). A token is taken out of every count,
its new topic drawn and the token put back (``_sparse_remove`` / ``_sparse_draw`` /
``_sparse_add`` and their dense twins). Every buffer of a sweep lives in a ``Workspace``,
allocated and checked before the sampling and freed after it on every path.
"""
cimport cython
from cython.parallel cimport parallel, prange, threadid
from libc.stdint cimport int32_t, int64_t
from libc.stdlib cimport calloc, free, malloc, qsort
from libc.string cimport memcmp, memcpy, memset

from numpy.random cimport bitgen_t

from topictk._cy.alloc cimport checked_alloc as _alloc

cdef extern from *:
    """
    #if defined(__GNUC__)
    #define TOPICTK_PREFETCH(p) __builtin_prefetch((p))
    #else
    #define TOPICTK_PREFETCH(p) ((void)0)
    #endif
    """
    void TOPICTK_PREFETCH(const void* p) noexcept nogil

cdef extern from *:
    """
    #include <stdint.h>
    #include <time.h>
    #if defined(__linux__)
    #include <sched.h>
    #endif
    /* the flowing partitioned schedule: each doc block's progress and claim, published with
       release and read with acquire, so that a block's writes (n_dk, the word block's counts
       and list lengths) are seen by the task that waited for it */
    static inline int32_t topictk_read(const int32_t* p) {
        return __atomic_load_n(p, __ATOMIC_ACQUIRE);
    }
    static inline void topictk_publish(int32_t* p, int32_t value) {
        __atomic_store_n(p, value, __ATOMIC_RELEASE);
    }
    static inline int topictk_claim(int32_t* flag) {
        int32_t expected = 0;
        return __atomic_compare_exchange_n(flag, &expected, 1, 0, __ATOMIC_ACQ_REL,
                                           __ATOMIC_ACQUIRE);
    }
    static inline void topictk_add(long long* total, long long value) {
        __atomic_fetch_add(total, value, __ATOMIC_RELAXED);
    }
    /* a wait: a short spin while the other thread is about to finish, then 20 us sleeps that
       leave the core to the thread being waited for when another process competes for it */
    /* the calling thread held on the tid-th CPU it may run on (tid modulo their number) for a
       parallel region, so that the operating system never stacks two of the region's threads
       on one core while another process has a core to itself; returns whether it did, with
       the thread's own CPU set in *saved for topictk_unpin. Where this is not Linux, or the
       thread may run on one CPU only, nothing is done. */
    #if defined(__linux__)
    typedef cpu_set_t topictk_cpus;
    static inline int topictk_pin(int tid, topictk_cpus* saved) {
        int n, want, seen = 0, c;
        cpu_set_t one;
        if (sched_getaffinity(0, sizeof(cpu_set_t), saved) != 0) return 0;
        n = CPU_COUNT(saved);
        if (n < 2) return 0;
        want = tid % n;
        for (c = 0; c < CPU_SETSIZE; c++) {
            if (CPU_ISSET(c, saved) && seen++ == want) {
                CPU_ZERO(&one);
                CPU_SET(c, &one);
                return sched_setaffinity(0, sizeof(cpu_set_t), &one) == 0;
            }
        }
        return 0;
    }
    static inline void topictk_unpin(int pinned, const topictk_cpus* saved) {
        if (pinned) sched_setaffinity(0, sizeof(cpu_set_t), saved);
    }
    #else
    typedef int topictk_cpus;
    static inline int topictk_pin(int tid, topictk_cpus* saved) { return 0; }
    static inline void topictk_unpin(int pinned, const topictk_cpus* saved) { }
    #endif
    static inline void topictk_wait(long long round) {
        if (round < 256) {
    #if defined(__x86_64__) || defined(__i386__)
            __builtin_ia32_pause();
    #endif
        } else {
            struct timespec ts = {0, 20000};
            nanosleep(&ts, NULL);
        }
    }
    """
    int32_t topictk_read(const int32_t* p) noexcept nogil
    void topictk_publish(int32_t* p, int32_t value) noexcept nogil
    void topictk_add(long long* total, long long value) noexcept nogil
    int topictk_claim(int32_t* flag) noexcept nogil
    void topictk_wait(long long round) noexcept nogil
    ctypedef struct topictk_cpus:
        pass
    int topictk_pin(int tid, topictk_cpus* saved) noexcept nogil
    void topictk_unpin(int pinned, const topictk_cpus* saved) noexcept nogil
from topictk._cy.rng cimport bitgen_of, next_uniform, uniform_topic
from topictk._cy.wordprior cimport attach_overlay, beta_bar, check_phi, check_terms

# topics per block of the dense sampler's draw (its block sums are written for four)
cdef enum:
    DENSE_BLOCK = 4


cdef int _cmp_desc(const void* a, const void* b) noexcept nogil:
    cdef int64_t x = (<const int64_t*> a)[0]
    cdef int64_t y = (<const int64_t*> b)[0]
    return (x < y) - (x > y)


cdef inline Py_ssize_t _find_topic(const int64_t* lst, Py_ssize_t n, int64_t k,
                                   int64_t mask) noexcept nogil:
    """Position of topic ``k`` in a list, or -1. Lists are sorted by count, so the topics of a
    word's frequent assignments are found after a few steps."""
    cdef Py_ssize_t j
    for j in range(n):
        if (lst[j] & mask) == k:
            return j
    return -1


cdef inline void _wt_decrement_at(int64_t* lst, int32_t* length, Py_ssize_t j,
                                  int64_t one) noexcept nogil:
    """Lower the count of entry ``j`` by one; remove it when the count reaches zero."""
    cdef Py_ssize_t n = length[0]
    cdef int64_t new_value = lst[j] - one
    if new_value < one:
        while j + 1 < n:
            lst[j] = lst[j + 1]
            j += 1
        length[0] = <int32_t> (n - 1)
        return
    while j + 1 < n and lst[j + 1] > new_value:
        lst[j] = lst[j + 1]
        j += 1
    lst[j] = new_value


cdef inline void _wt_increment_at(int64_t* lst, int32_t* length, Py_ssize_t j, int64_t k,
                                  int64_t one) noexcept nogil:
    """Raise the count of entry ``j`` by one (``j`` = -1: append topic ``k`` with count one)."""
    cdef int64_t new_value
    if j < 0:
        j = length[0]
        length[0] += 1
        new_value = one | k
    else:
        new_value = lst[j] + one
    while j > 0 and lst[j - 1] < new_value:
        lst[j] = lst[j - 1]
        j -= 1
    lst[j] = new_value


cdef void _lists_to_counts(const int64_t* wt_entries, const int64_t* wt_ptr,
                           const int32_t* wt_len, int32_t* nkw, Py_ssize_t K, int bits,
                           Py_ssize_t w_begin, Py_ssize_t w_end) noexcept nogil:
    """Dense counts of words [w_begin, w_end) from the SparseLDA lists."""
    cdef Py_ssize_t w, j
    cdef int64_t e
    cdef int64_t mask = ((<int64_t> 1) << bits) - 1
    for w in range(w_begin * K, w_end * K):
        nkw[w] = 0
    for w in range(w_begin, w_end):
        for j in range(wt_len[w]):
            e = wt_entries[wt_ptr[w] + j]
            nkw[w * K + (e & mask)] = <int32_t> (e >> bits)


cdef void _refresh_counts(const int64_t* old_entries, const int32_t* old_len,
                          const int64_t* new_entries, const int64_t* wt_ptr,
                          const int32_t* new_len, int32_t* nkw, Py_ssize_t K, int bits,
                          Py_ssize_t w_begin, Py_ssize_t w_end) noexcept nogil:
    """Bring the dense counts of words [w_begin, w_end) from the old lists to the new ones:
    clear the old entries, write the new ones (O(list entries) instead of O(V K))."""
    cdef Py_ssize_t w, j
    cdef int64_t e
    cdef int64_t mask = ((<int64_t> 1) << bits) - 1
    cdef int32_t* row
    for w in range(w_begin, w_end):
        row = nkw + w * K
        for j in range(old_len[w]):
            row[old_entries[wt_ptr[w] + j] & mask] = 0
        for j in range(new_len[w]):
            e = new_entries[wt_ptr[w] + j]
            row[e & mask] = <int32_t> (e >> bits)




# ---------------------------------------------------------------- what a sweep works on

cdef struct Sweep:
    # what one sweep reads: the tokens, the priors and the sizes (z and n_dk change in place)
    const int64_t* doc_ptr      # (D + 1) token offsets
    const int32_t* words        # (N) word ids, canonical order
    int32_t* z                  # (N) topic of every token
    int32_t* ndk                # (D, K)
    Py_ssize_t n_tokens         # N
    Py_ssize_t n_docs           # D
    const double* alpha         # (1, K), or (D, K) with per_doc_alpha
    bint per_doc_alpha
    double beta
    const double* bbar          # (K) the topics' total prior beta-bar_k (V beta: no overlay)
    const int64_t* ov_ptr       # (V + 1) the word prior's overlay o[w, k] by word, or NULL
    const int32_t* ov_topic     # its topics, ascending within a word
    const double* ov_extra      # its extra prior o[w, k] >= 0
    const double* phi           # (K, V) a given word term, or NULL: the counts'
    Py_ssize_t K
    Py_ssize_t V
    bint sparse                 # SparseLDA (§2.3) rather than the dense sampler (§2.2)
    const int64_t* wt_ptr       # (V + 1) SparseLDA pool offsets
    Py_ssize_t pool             # SparseLDA pool size (entries)
    int bits                    # low bits of a list entry that hold the topic
    int64_t one                 # 1 << bits: a count of one in a list entry
    int64_t mask                # one - 1: selects the topic of a list entry


cdef struct Counts:
    # the topic-word counts a chunk samples against: the shared ones or a private copy
    int32_t* nkw                # (V, K) dense counts (dense sampler)
    int64_t* nk                 # (K)
    int64_t* wt_entries         # SparseLDA pool of (count << bits) | k (sparse sampler)
    int32_t* wt_len             # (V) SparseLDA list lengths


cdef struct Order:
    # the tokens a sampler visits in each document, in the order it visits them: those of
    # document d are pos[j] for j in [ptr[d * stride], ptr[d * stride + 1]), and those of
    # consecutive documents follow each other; pos NULL = the positions j themselves (the
    # canonical order, ptr = doc_ptr and stride 1)
    const int64_t* ptr
    Py_ssize_t stride
    const int64_t* pos
    int32_t* dt_saved           # SparseLDA, or NULL: a document's topic list as its last visit
                                # in this sweep left it, at doc_ptr[d] (see _sparse_doc_start)
    int32_t* dt_saved_n         # (D) its length; -1 = not visited yet in this sweep


cdef struct Scratch:
    # the buffers of one thread
    int32_t* dt                 # (K) topics present in the current document (SparseLDA)
    int32_t* dt_pos             # (K) position of a topic in dt
    double* coef                # (K) (n_dk + alpha_k) / (n_k + V beta)
    double* work                # (2 K + 1) SparseLDA q prefix sums; dense weights + block sums
    double* rden                # (K) 1 / (n_k + V beta)
    Counts own                  # private counts for the chunks >= 1 this thread samples
    int64_t* row                # (K) zeroed merge row (AD-LDA list merge)
    int64_t* tmp                # (K) a word's merged list
    char* changed               # (C) chunks whose list of the word changed


cdef struct Walk:
    # the sampler's position inside a chunk: the current document and its bucket sums
    int32_t* nd                 # (K) n_dk of the document
    const double* a             # (K) its prior
    Py_ssize_t n_dt             # topics present in the document (SparseLDA)
    double s                    # alpha bucket sum_k alpha_k beta / (n_k + V beta)
    double r                    # document bucket sum_k n_dk beta / (n_k + V beta)
    int64_t fallbacks           # draws that rounding pushed past the last weight


cdef struct Workspace:
    # everything one sweep allocates, all of it before the sampling starts
    Py_ssize_t C                # chunks
    int threads                 # at most C
    const int64_t* bounds       # (C + 1) document boundaries of the chunks
    bitgen_t** gens             # (C) one stream per chunk
    Scratch* scratch            # (threads)
    bint per_chunk              # SparseLDA with at most one chunk >= 1 per thread: each
                                # chunk >= 1 keeps its lists and they are merged word by word
    bint private                # dense, C > 2: chunks >= 1 sample on private copies
    Counts snap                 # AD-LDA: the counts at the start of the iteration
    Counts* chunk               # (C) per_chunk: the counts of chunk c >= 1 (entry 0 unused)
    int32_t* z_old              # topics of the tokens of chunks >= 1 at the start (replay)
    int64_t* nk_delta           # (threads K) replay: changes of n_k per worker
    bint blocks                 # the partitioned schedule (§2.8): C doc blocks, C word blocks
    int64_t* nk_blocks          # ((C + 1) K) blocks: each block's n_k, then the epoch start's
    int32_t* dt_saved           # (N) blocks: documents' topic lists between visits (Order)
    int32_t* dt_saved_n         # (D) blocks: their lengths
    int32_t* len_blocks         # (C V) blocks: each block's copy of the list lengths of its
                                # epoch's words (the threads write no shared cache line)
    const int32_t* word_block   # (V) blocks: the word block of every word
    int32_t* progress           # (C) flowing blocks: epochs each doc block has finished
    int32_t* claimed            # (C) flowing blocks: 1 while a thread samples the doc block
    topictk_cpus* cpus          # (threads) flowing blocks: each thread's own CPU set
    double* bbar                # (K) the topics' total prior of this sweep (Sweep.bbar)


cdef inline Py_ssize_t _collect_positive(const int64_t* lst, Py_ssize_t n_lst, int64_t* row,
                                         int64_t* out, Py_ssize_t n, int bits,
                                         int64_t mask) noexcept nogil:
    """Append to ``out`` (holding n entries) the topics of ``lst`` whose merged count in ``row``
    is positive, as list entries, zeroing their ``row`` cells; returns the new n."""
    cdef Py_ssize_t j
    cdef int64_t e
    for j in range(n_lst):
        e = lst[j] & mask
        if row[e] > 0:
            out[n] = (row[e] << bits) | e
            n += 1
        row[e] = 0
    return n


cdef inline void _sort_desc(int64_t* a, Py_ssize_t n) noexcept nogil:
    """Insertion sort, descending (the merged lists are nearly sorted already)."""
    cdef Py_ssize_t i, j
    cdef int64_t x
    for i in range(1, n):
        x = a[i]
        j = i
        while j > 0 and a[j - 1] < x:
            a[j] = a[j - 1]
            j -= 1
        a[j] = x


cdef void _merge_word(Py_ssize_t w, const Sweep* sw, Counts* shared, const Counts* snap,
                      const Counts* loc, Py_ssize_t n_loc, Scratch* sc) noexcept nogil:
    """AD-LDA merge of one word's list: shared (snapshot + chunk 0's changes) plus, for every
    chunk c >= 1 (``loc[c - 1]``), its list minus the snapshot; then the word's dense row
    follows the lists.

    ``sc.row`` is a zeroed (K) scratch row and is left zeroed; ``sc.tmp`` holds K entries."""
    cdef int bits = sw.bits
    cdef int64_t mask = sw.mask
    cdef int64_t base = sw.wt_ptr[w]
    cdef int64_t* gl = shared.wt_entries + base
    cdef const int64_t* sl = snap.wt_entries + base
    cdef const int64_t* ll
    cdef int32_t* dense = shared.nkw + w * sw.K
    cdef int64_t* row = sc.row
    cdef char* changed = sc.changed
    cdef Py_ssize_t n_s = snap.wt_len[w], n_g = shared.wt_len[w], n_l, n, j, c
    cdef bint any_change = False
    for c in range(n_loc):
        ll = loc[c].wt_entries + base
        n_l = loc[c].wt_len[w]
        changed[c] = not (n_l == n_s and memcmp(ll, sl, n_s * sizeof(int64_t)) == 0)
        if not changed[c]:
            continue
        if not any_change:
            for j in range(n_g):
                row[gl[j] & mask] += gl[j] >> bits
            any_change = True
        for j in range(n_l):
            row[ll[j] & mask] += ll[j] >> bits
        for j in range(n_s):
            row[sl[j] & mask] -= sl[j] >> bits
    for j in range(n_s):
        dense[sl[j] & mask] = 0
    if any_change:
        # collect the topics with a positive count, the shared list's first (nearly sorted
        # already), zeroing the scratch row on the way; then restore the descending order
        n = _collect_positive(gl, n_g, row, sc.tmp, 0, bits, mask)
        for c in range(n_loc):
            if changed[c]:
                n = _collect_positive(loc[c].wt_entries + base, loc[c].wt_len[w], row, sc.tmp,
                                      n, bits, mask)
        n = _collect_positive(sl, n_s, row, sc.tmp, n, bits, mask)
        _sort_desc(sc.tmp, n)
        memcpy(gl, sc.tmp, n * sizeof(int64_t))
        shared.wt_len[w] = <int32_t> n
        n_g = n
    for j in range(n_g):
        dense[gl[j] & mask] = <int32_t> (gl[j] >> bits)

def topic_bits(int n_topics):
    """Number of low bits that hold the topic id in a SparseLDA list entry."""
    cdef int bits = 1
    while (1 << bits) < n_topics:
        bits += 1
    return bits


def mean_list_length(const int32_t[:, ::1] nkw,      # IN  (V, K) word-major counts
                     const int64_t[::1] word_freq,     # IN  (V) tokens of each word
                     const int32_t[::1] lengths=None): # IN  (V) |list of w|, if current
    """sum_w freq_w |{k : n_kw > 0}| / sum_w freq_w: the length of the topic list a token's
    word has on average, the SparseLDA topic-word bucket's cost per token (0 for no tokens).
    With ``lengths`` (the SparseLDA list lengths, current for ``nkw``) O(V) instead of O(VK).
    Equivalent to ``tests/reference/gibbs.py::mean_list_length``."""
    cdef Py_ssize_t V = nkw.shape[0], K = nkw.shape[1], w, k
    cdef int64_t n, tokens = 0
    cdef double weighted = 0.0
    cdef bint have_lengths = lengths is not None
    if word_freq.shape[0] != V or (have_lengths and lengths.shape[0] != V):
        raise ValueError(f"word_freq (and lengths) need one entry per word ({V})")
    with nogil:
        for w in range(V):
            if word_freq[w] == 0:
                continue
            if have_lengths:
                n = lengths[w]
            else:
                n = 0
                for k in range(K):
                    if nkw[w, k] != 0:
                        n = n + 1
            weighted = weighted + <double> (word_freq[w] * n)
            tokens = tokens + word_freq[w]
    return weighted / tokens if tokens > 0 else 0.0


def build_word_topic_lists(const int32_t[:, ::1] nkw,   # IN  (V, K) word-major counts
                           const int64_t[::1] wt_ptr,  # IN  (V + 1) offsets into the pool
                           int64_t[::1] wt_entries,    # OUT pool of (count << bits) | k
                           int32_t[::1] wt_len,        # OUT (V) list lengths
                           int bits, int threads=1):
    """Fill the SparseLDA per-word lists from dense counts (descending entries)."""
    cdef Py_ssize_t V = nkw.shape[0], K = nkw.shape[1]
    cdef Py_ssize_t w, k, n
    cdef int64_t base
    if threads < 1:
        threads = 1
    with nogil:
        for w in prange(V, schedule="static", num_threads=threads):
            base = wt_ptr[w]
            n = 0
            for k in range(K):
                if nkw[w, k] > 0:
                    wt_entries[base + n] = ((<int64_t> nkw[w, k]) << bits) | k
                    n = n + 1
            qsort(&wt_entries[base], n, sizeof(int64_t), _cmp_desc)
            wt_len[w] = <int32_t> n



# ---------------------------------------------------------------- the dense sampler (§2.2)

cdef inline void _dense_refresh(const Walk* wk, Scratch* sc, const int64_t* nk, Py_ssize_t k,
                                const double* bbar) noexcept nogil:
    """Caches of topic k after one of its counts changed."""
    sc.rden[k] = 1.0 / (nk[k] + bbar[k])
    sc.coef[k] = (wk.nd[k] + wk.a[k]) * sc.rden[k]


cdef inline void _dense_remove(const Walk* wk, Scratch* sc, int32_t* nw, int64_t* nk,
                               Py_ssize_t k, const double* bbar) noexcept nogil:
    """Take a token of topic k (word row ``nw``) out of every count."""
    wk.nd[k] -= 1
    nw[k] -= 1
    nk[k] -= 1
    _dense_refresh(wk, sc, nk, k, bbar)


cdef inline void _dense_add(const Walk* wk, Scratch* sc, int32_t* nw, int64_t* nk,
                            Py_ssize_t k, const double* bbar) noexcept nogil:
    """Put a token of topic k (word row ``nw``) into every count."""
    wk.nd[k] += 1
    nw[k] += 1
    nk[k] += 1
    _dense_refresh(wk, sc, nk, k, bbar)


cdef inline void _count_weights(const Sweep* sw, const double* coef, const int32_t* nw,
                                int32_t w, double* p) noexcept nogil:
    """p_k = coef[k] (n_kw + beta_wk) of word w: beta for every topic, then beta + o[w, k] for
    the overlay's topics of w (none without an overlay)."""
    cdef Py_ssize_t kk
    cdef int64_t j
    cdef double beta = sw.beta
    for kk in range(sw.K):
        p[kk] = coef[kk] * (nw[kk] + beta)
    if sw.ov_ptr != NULL:
        for j in range(sw.ov_ptr[w], sw.ov_ptr[w + 1]):
            kk = sw.ov_topic[j]
            p[kk] = coef[kk] * (nw[kk] + (beta + sw.ov_extra[j]))


cdef inline void _phi_weights(const Sweep* sw, const Walk* wk, int32_t w,
                              double* p) noexcept nogil:
    """p_k = (n_dk + alpha_k) phi[k, w] of a given word term."""
    cdef Py_ssize_t kk
    cdef const double* col = sw.phi + w
    for kk in range(sw.K):
        p[kk] = (wk.nd[kk] + wk.a[kk]) * col[kk * sw.V]


cdef inline Py_ssize_t _block_draw(Walk* wk, const double* p, Py_ssize_t K, double* bs,
                                   bitgen_t* gen) noexcept nogil:
    """One topic from the weights p (K), the uniform mapped by blocks of ``DENSE_BLOCK``
    topics (see :func:`_sweep_chunk_dense`); ``bs`` receives the block sums."""
    cdef Py_ssize_t n_full = K // DENSE_BLOCK
    cdef Py_ssize_t nb = (K + DENSE_BLOCK - 1) // DENSE_BLOCK
    cdef Py_ssize_t k, kk, b, k_last
    cdef double u, total, t
    total = 0.0
    for b in range(n_full):
        kk = b * DENSE_BLOCK
        bs[b] = (p[kk] + p[kk + 1]) + (p[kk + 2] + p[kk + 3])
        total = total + bs[b]
    if nb > n_full:
        t = 0.0
        for kk in range(n_full * DENSE_BLOCK, K):
            t = t + p[kk]
        bs[n_full] = t
        total = total + t
    u = next_uniform(gen) * total
    b = 0
    while b < nb - 1 and u >= bs[b]:
        u = u - bs[b]
        b = b + 1
    k = b * DENSE_BLOCK
    k_last = k + DENSE_BLOCK - 1
    if k_last > K - 1:
        k_last = K - 1
    while k < k_last and u >= p[k]:
        u = u - p[k]
        k = k + 1
    if u >= p[k]:
        wk.fallbacks += 1
    return k


cdef int64_t _sweep_chunk_dense(const Sweep* sw, const Counts* cn, Scratch* scratch,
                                int64_t d_begin, int64_t d_end, bitgen_t* gen,
                                const Order* od) noexcept nogil:
    """Dense exact sampler (§2.2) over documents [d_begin, d_end) against the counts ``cn``,
    visiting the tokens of ``od`` (NULL: every token, in canonical order); returns the number
    of rounding fallbacks. A document with no token to visit is skipped (entering it would
    change no count and draw nothing).

    ``alpha`` is one prior (K,) or, with ``per_doc_alpha``, a (D, K) prior per document
    (DMR, §9.2). Caches, refreshed whenever a count of topic k changes: ``rden[k]`` =
    1 / (n_k + beta-bar_k) and, within a document, ``coef[k]`` = (n_dk + alpha_k) rden[k].
    The weights are coef[k] (n_kw + beta_wk) (§2.10: the overlay's topics of the word take
    their own prior), or (n_dk + alpha_k) phi[k, w] with a given word term (the counts are
    still kept, for the state).

    The draw maps one uniform onto the K weights p_k by blocks of ``DENSE_BLOCK`` topics:
    block sums S_b (pairwise within a block), u = U sum_b S_b, then
    the first block with u < S_b (subtracting the blocks passed) and within it the first
    topic with u < p_k. Same conditional as one cumulative sum over k (the mapping of the
    uniform differs), but the weights are independent of each other (vectorised) and the
    dependent chain is nb + DENSE_BLOCK steps instead of K. ``work`` holds the weights (K)
    and the block sums (K / DENSE_BLOCK + 1).
    """
    # local copies: the compiler keeps the pointers in registers through the token loop
    cdef Scratch sc = scratch[0]
    cdef Walk wk
    cdef Py_ssize_t K = sw.K, k
    cdef const double* bbar = sw.bbar
    cdef bint given = sw.phi != NULL
    cdef const int64_t* doc_ptr = sw.doc_ptr
    cdef const int32_t* words = sw.words
    cdef int32_t* z = sw.z
    cdef int32_t* nkw = cn.nkw
    cdef int64_t* nk = cn.nk
    cdef int32_t* nw
    cdef int64_t d, i, j
    cdef const int64_t* optr = doc_ptr if od == NULL else od.ptr
    cdef Py_ssize_t stride = 1 if od == NULL else od.stride
    cdef const int64_t* pos = NULL if od == NULL else od.pos
    wk.fallbacks = 0
    wk.a = sw.alpha
    for k in range(K):
        sc.rden[k] = 1.0 / (nk[k] + bbar[k])
    for d in range(d_begin, d_end):
        if optr[d * stride] == optr[d * stride + 1]:
            continue
        wk.nd = sw.ndk + d * K
        if sw.per_doc_alpha:
            wk.a = sw.alpha + d * K
        for k in range(K):
            sc.coef[k] = (wk.nd[k] + wk.a[k]) * sc.rden[k]
        for j in range(optr[d * stride], optr[d * stride + 1]):
            i = j if pos == NULL else pos[j]
            nw = nkw + words[i] * K
            _dense_remove(&wk, &sc, nw, nk, z[i], bbar)
            if given:
                _phi_weights(sw, &wk, words[i], sc.work)
            else:
                _count_weights(sw, sc.coef, nw, words[i], sc.work)
            k = _block_draw(&wk, sc.work, K, sc.work + K, gen)
            z[i] = <int32_t> k
            _dense_add(&wk, &sc, nw, nk, k, bbar)
    return wk.fallbacks


# ---------------------------------------------------------------- SparseLDA (§2.3)

cdef inline void _dt_push(Walk* wk, Scratch* sc, Py_ssize_t k) noexcept nogil:
    """Topic k joins the document's topics."""
    sc.dt_pos[k] = <int32_t> wk.n_dt
    sc.dt[wk.n_dt] = <int32_t> k
    wk.n_dt += 1


cdef inline void _dt_drop(Walk* wk, Scratch* sc, Py_ssize_t k) noexcept nogil:
    """Topic k leaves the document's topics (the last one takes its place)."""
    cdef Py_ssize_t j = sc.dt_pos[k]
    wk.n_dt -= 1
    sc.dt[j] = sc.dt[wk.n_dt]
    sc.dt_pos[sc.dt[j]] = <int32_t> j


cdef inline void _sparse_chunk_start(Walk* wk, Scratch* sc, const Sweep* sw,
                                     const int64_t* nk) noexcept nogil:
    """rden = 1 / (beta-bar_k + n_k) from the chunk's n_k; with one prior also s and the
    coefficients alpha_k rden[k] (with a prior per document they are set at each document
    start)."""
    cdef Py_ssize_t k
    cdef const double* alpha = sw.alpha
    cdef double beta = sw.beta
    wk.fallbacks = 0
    wk.a = alpha
    wk.s = 0.0
    for k in range(sw.K):
        sc.rden[k] = 1.0 / (sw.bbar[k] + nk[k])
        if not sw.per_doc_alpha:
            wk.s += alpha[k] * beta * sc.rden[k]
            sc.coef[k] = alpha[k] * sc.rden[k]


cdef inline void _sparse_doc_start(Walk* wk, Scratch* sc, const Sweep* sw, int64_t d,
                                   const Order* od) noexcept nogil:
    """Enter document d: its topics, r and their coefficients from scratch (with a prior per
    document also s and every coefficient, alpha_d being new: O(K), the order of the loop that
    lists its topics). With one prior and a topic list saved by an earlier visit in this sweep
    (``od.dt_saved``, the partitioned schedule), the topics are that list, in its order:
    O(topics of d) instead of O(K) (only this visit's block changes the document's counts, so
    the list still holds exactly the topics with n_dk > 0)."""
    cdef Py_ssize_t k, K = sw.K, j, n
    cdef double beta = sw.beta
    cdef int32_t* nd = sw.ndk + d * K
    cdef const int32_t* saved
    wk.nd = nd
    wk.n_dt = 0
    wk.r = 0.0
    if sw.per_doc_alpha:
        wk.a = sw.alpha + d * K
        wk.s = 0.0
        for k in range(K):
            wk.s += wk.a[k] * beta * sc.rden[k]
            sc.coef[k] = (wk.a[k] + nd[k]) * sc.rden[k]
            if nd[k] > 0:
                _dt_push(wk, sc, k)
                wk.r += nd[k] * beta * sc.rden[k]
    elif od != NULL and od.dt_saved != NULL and od.dt_saved_n[d] >= 0:
        saved = od.dt_saved + sw.doc_ptr[d]
        n = od.dt_saved_n[d]
        for j in range(n):
            k = saved[j]
            _dt_push(wk, sc, k)
            wk.r += nd[k] * beta * sc.rden[k]
            sc.coef[k] = (wk.a[k] + nd[k]) * sc.rden[k]
    else:
        for k in range(K):
            if nd[k] > 0:
                _dt_push(wk, sc, k)
                wk.r += nd[k] * beta * sc.rden[k]
                sc.coef[k] = (wk.a[k] + nd[k]) * sc.rden[k]


cdef inline void _sparse_doc_end(Walk* wk, Scratch* sc, const Sweep* sw, int64_t d,
                                 const Order* od) noexcept nogil:
    """Leave document d: with one prior, its topics' coefficients back to alpha_k rden[k]; with
    ``od.dt_saved``, its topic list saved for its next visit."""
    cdef Py_ssize_t j, k
    if sw.per_doc_alpha:
        return
    for j in range(wk.n_dt):
        k = sc.dt[j]
        sc.coef[k] = wk.a[k] * sc.rden[k]
    if od != NULL and od.dt_saved != NULL:
        memcpy(od.dt_saved + sw.doc_ptr[d], sc.dt, wk.n_dt * sizeof(int32_t))
        od.dt_saved_n[d] = <int32_t> wk.n_dt


cdef inline void _sparse_take_terms(Walk* wk, const Scratch* sc, Py_ssize_t k,
                                    double beta) noexcept nogil:
    """Subtract topic k's terms from s and r (before one of its counts changes)."""
    cdef double inv = sc.rden[k]
    wk.s -= wk.a[k] * beta * inv
    wk.r -= wk.nd[k] * beta * inv


cdef inline void _sparse_put_terms(Walk* wk, Scratch* sc, const int64_t* nk, Py_ssize_t k,
                                   double beta, const double* bbar) noexcept nogil:
    """Topic k's caches and its terms of s and r, after one of its counts changed."""
    cdef double inv = 1.0 / (bbar[k] + nk[k])
    sc.rden[k] = inv
    wk.s += wk.a[k] * beta * inv
    wk.r += wk.nd[k] * beta * inv
    sc.coef[k] = (wk.a[k] + wk.nd[k]) * inv


cdef inline void _sparse_remove(Walk* wk, Scratch* sc, int64_t* nk, int64_t* lst,
                                int32_t* lst_len, Py_ssize_t k, double beta,
                                const double* bbar, int64_t one, int64_t mask) noexcept nogil:
    """Take a token of topic k (its word's list ``lst``) out of every count."""
    _sparse_take_terms(wk, sc, k, beta)
    _wt_decrement_at(lst, lst_len, _find_topic(lst, lst_len[0], k, mask), one)
    wk.nd[k] -= 1
    nk[k] -= 1
    if wk.nd[k] == 0:
        _dt_drop(wk, sc, k)
    _sparse_put_terms(wk, sc, nk, k, beta, bbar)


cdef inline void _sparse_add(Walk* wk, Scratch* sc, int64_t* nk, int64_t* lst,
                             int32_t* lst_len, Py_ssize_t k, Py_ssize_t pos, double beta,
                             const double* bbar, int64_t one, int64_t mask) noexcept nogil:
    """Put a token of topic k into every count; ``pos`` is k's place in ``lst`` when the draw
    found it (else -2: looked up here)."""
    _sparse_take_terms(wk, sc, k, beta)
    if pos == -2:
        pos = _find_topic(lst, lst_len[0], k, mask)
    _wt_increment_at(lst, lst_len, pos, k, one)
    if wk.nd[k] == 0:
        _dt_push(wk, sc, k)
    wk.nd[k] += 1
    nk[k] += 1
    _sparse_put_terms(wk, sc, nk, k, beta, bbar)


cdef inline Py_ssize_t _sparse_draw(Walk* wk, const Scratch* sc, const int64_t* lst,
                                    Py_ssize_t n_wt, const Sweep* sw, int32_t w, bitgen_t* gen,
                                    Py_ssize_t* pos) noexcept nogil:
    """One topic of word w from the three buckets: topic-word q (the word's list, in list
    order, then the overlay's topics of w with c_k o[w, k], §2.10), document r (the
    document's topics in ``dt`` order), alpha s (ascending k). ``pos`` receives the topic's
    place in the list when a list entry was chosen, else -2."""
    cdef double* qbuf = sc.work
    cdef double q = 0.0, u, acc, beta = sw.beta
    cdef Py_ssize_t j, k = 0, kk, n_dt = wk.n_dt, K = sw.K, n_q = n_wt
    cdef int64_t e, ov = 0
    cdef int64_t mask = sw.mask
    cdef int bits = sw.bits
    cdef bint found = False
    for j in range(n_wt):
        e = lst[j]
        q = q + sc.coef[e & mask] * (e >> bits)
        qbuf[j] = q
    if sw.ov_ptr != NULL:
        ov = sw.ov_ptr[w]
        n_q = n_wt + (sw.ov_ptr[w + 1] - ov)
        for j in range(n_wt, n_q):
            q = q + sc.coef[sw.ov_topic[ov + j - n_wt]] * sw.ov_extra[ov + j - n_wt]
            qbuf[j] = q
    u = next_uniform(gen) * (wk.s + wk.r + q)
    pos[0] = -2
    if u < q:
        j = n_q - 1
        for kk in range(n_q):
            if u < qbuf[kk]:
                j = kk
                found = True
                break
        if j < n_wt:
            pos[0] = j
            k = lst[j] & mask
        else:
            k = sw.ov_topic[ov + j - n_wt]
    elif u < q + wk.r and n_dt > 0:
        u = u - q
        acc = 0.0
        for j in range(n_dt):
            kk = sc.dt[j]
            acc = acc + wk.nd[kk] * beta * sc.rden[kk]
            if u < acc:
                k = kk
                found = True
                break
        if not found:
            k = sc.dt[n_dt - 1]
    else:
        u = u - q - wk.r
        acc = 0.0
        for kk in range(K):
            acc = acc + wk.a[kk] * beta * sc.rden[kk]
            if u < acc:
                k = kk
                found = True
                break
        if not found:
            k = K - 1
    if not found:
        wk.fallbacks += 1
    return k


cdef inline Py_ssize_t _phi_draw(Walk* wk, const Scratch* sc, const Sweep* sw, int32_t w,
                                 bitgen_t* gen) noexcept nogil:
    """One topic of word w from the buckets of a given word term (§2.10): document
    r = sum n_dk phi[k, w] over the document's topics (``dt`` order, prefix sums in ``work``)
    and smoothing s = sum_k alpha_k phi[k, w] (ascending k, dense: formed for every token)."""
    cdef const double* col = sw.phi + w
    cdef double* rbuf = sc.work
    cdef double r = 0.0, s = 0.0, u, acc
    cdef Py_ssize_t j, kk, K = sw.K, V = sw.V, n_dt = wk.n_dt
    for j in range(n_dt):
        kk = sc.dt[j]
        r = r + wk.nd[kk] * col[kk * V]
        rbuf[j] = r
    for kk in range(K):
        s = s + wk.a[kk] * col[kk * V]
    u = next_uniform(gen) * (r + s)
    if u < r:
        for j in range(n_dt):
            if u < rbuf[j]:
                return sc.dt[j]
        wk.fallbacks += 1
        return sc.dt[n_dt - 1]
    u = u - r
    acc = 0.0
    for kk in range(K):
        acc = acc + wk.a[kk] * col[kk * V]
        if u < acc:
            return kk
    wk.fallbacks += 1
    return K - 1


cdef int64_t _sweep_chunk_sparse(const Sweep* sw, const Counts* cn, Scratch* scratch,
                                 int64_t d_begin, int64_t d_end, bitgen_t* gen,
                                 const Order* od) noexcept nogil:
    """SparseLDA (§2.3) over documents [d_begin, d_end), visiting the tokens of ``od`` (NULL:
    every token, in canonical order); exact draws from the §2.1 conditional. Returns the
    number of rounding fallbacks. A document with no token to visit is skipped (entering and
    leaving it would leave every cache as it was).

    Caches: ``rden[k]`` = 1 / (beta-bar_k + n_k) and ``coef[k]`` = (alpha_k + n_dk) rden[k], both
    refreshed whenever a count of topic k changes; s and r are maintained incrementally and
    recomputed from scratch at every chunk (s) and document (r) start. Topic-word counts live
    in the lists only (the caller refreshes the dense n_kw from them), so a token touches its
    word's list and no dense (V, K) row.

    With ``per_doc_alpha`` ``alpha`` is (D, K), a prior per document (DMR, §9.2 with the buckets
    of §2.3, alpha_k replaced by alpha_dk): s_d and every coefficient are then computed from
    scratch at each document start.

    The word prior's overlay adds its topics of the word to the q bucket (§2.10); with a given
    word term the draw is :func:`_phi_draw`, and the counts, lists and caches are kept as
    without it (the state stays that of z).
    """
    # local copies: the compiler keeps the pointers in registers through the token loop
    cdef Scratch sc = scratch[0]
    cdef Walk wk
    cdef Py_ssize_t K = sw.K, k, pos
    cdef double beta = sw.beta
    cdef const double* bbar = sw.bbar
    cdef bint given = sw.phi != NULL
    cdef int64_t one = sw.one, mask = sw.mask
    cdef const int64_t* doc_ptr = sw.doc_ptr
    cdef const int64_t* wt_ptr = sw.wt_ptr
    cdef const int32_t* words = sw.words
    cdef int32_t* z = sw.z
    cdef int64_t* nk = cn.nk
    cdef int64_t* pool = cn.wt_entries
    cdef int32_t* wt_len = cn.wt_len
    cdef int64_t* lst
    cdef int64_t d, i, j, j_end
    cdef Py_ssize_t line
    cdef int32_t w
    cdef const int64_t* optr = doc_ptr if od == NULL else od.ptr
    cdef Py_ssize_t stride = 1 if od == NULL else od.stride
    cdef const int64_t* order = NULL if od == NULL else od.pos
    cdef int64_t limit = optr[d_end * stride]
    _sparse_chunk_start(&wk, &sc, sw, nk)
    for d in range(d_begin, d_end):
        j_end = optr[d * stride + 1]
        if optr[d * stride] == j_end:
            continue
        _sparse_doc_start(&wk, &sc, sw, d, od)
        if order != NULL and d + 1 < d_end:
            for line in range(0, K, 16):
                TOPICTK_PREFETCH(sw.ndk + (d + 1) * K + line)
            TOPICTK_PREFETCH(od.dt_saved + doc_ptr[d + 1])
        for j in range(optr[d * stride], j_end):
            i = j if order == NULL else order[j]
            w = words[i]
            lst = pool + wt_ptr[w]
            if j + 2 < limit:
                # the next tokens' lists are random pool locations: ask for them early
                if order == NULL:
                    TOPICTK_PREFETCH(pool + wt_ptr[words[j + 2]])
                else:
                    TOPICTK_PREFETCH(pool + wt_ptr[words[order[j + 2]]])
                    TOPICTK_PREFETCH(z + order[j + 2])
            _sparse_remove(&wk, &sc, nk, lst, &wt_len[w], z[i], beta, bbar, one, mask)
            if given:
                k = _phi_draw(&wk, &sc, sw, w, gen)
                pos = -2
            else:
                k = _sparse_draw(&wk, &sc, lst, wt_len[w], sw, w, gen, &pos)
            z[i] = <int32_t> k
            _sparse_add(&wk, &sc, nk, lst, &wt_len[w], k, pos, beta, bbar, one, mask)
        _sparse_doc_end(&wk, &sc, sw, d, od)
    return wk.fallbacks


cdef inline int64_t _sweep_chunk(const Sweep* sw, const Counts* cn, Scratch* sc,
                                 int64_t d_begin, int64_t d_end, bitgen_t* gen,
                                 const Order* od) noexcept nogil:
    if sw.sparse:
        return _sweep_chunk_sparse(sw, cn, sc, d_begin, d_end, gen, od)
    return _sweep_chunk_dense(sw, cn, sc, d_begin, d_end, gen, od)


# ---------------------------------------------------------------- one AD-LDA iteration

cdef void _counts_free(Counts* cn) noexcept nogil:
    free(cn.nkw)
    free(cn.nk)
    free(cn.wt_entries)
    free(cn.wt_len)


cdef void _workspace_free(Workspace* ws) noexcept nogil:
    """Free everything :func:`_workspace_init` allocated, whether it finished or not."""
    cdef Py_ssize_t i
    if ws.scratch != NULL:
        for i in range(ws.threads):
            free(ws.scratch[i].dt)
            free(ws.scratch[i].dt_pos)
            free(ws.scratch[i].coef)
            free(ws.scratch[i].work)
            free(ws.scratch[i].rden)
            _counts_free(&ws.scratch[i].own)
            free(ws.scratch[i].row)
            free(ws.scratch[i].tmp)
            free(ws.scratch[i].changed)
    if ws.chunk != NULL:
        for i in range(ws.C):
            _counts_free(&ws.chunk[i])
    free(ws.scratch)
    free(ws.chunk)
    free(ws.gens)
    _counts_free(&ws.snap)
    free(ws.z_old)
    free(ws.nk_delta)
    free(ws.nk_blocks)
    free(ws.dt_saved)
    free(ws.dt_saved_n)
    free(ws.len_blocks)
    free(ws.progress)
    free(ws.claimed)
    free(ws.cpus)
    free(ws.bbar)


cdef int _copy_alloc(Counts* cn, const Sweep* sw) except -1:
    """The arrays of a private copy of the counts a chunk samples against: n_k, and the lists
    (SparseLDA) or the dense counts."""
    cn.nk = <int64_t*> _alloc(sw.K, sizeof(int64_t))
    if sw.sparse:
        cn.wt_entries = <int64_t*> _alloc(sw.pool, sizeof(int64_t))
        cn.wt_len = <int32_t*> _alloc(sw.V, sizeof(int32_t))
    else:
        cn.nkw = <int32_t*> _alloc(sw.V * sw.K, sizeof(int32_t))
    return 0


cdef int _scratch_init(Scratch* sc, const Sweep* sw, const Workspace* ws) except -1:
    cdef Py_ssize_t K = sw.K
    sc.dt = <int32_t*> _alloc(K, sizeof(int32_t))
    sc.dt_pos = <int32_t*> _alloc(K, sizeof(int32_t))
    sc.coef = <double*> _alloc(K, sizeof(double))
    sc.work = <double*> _alloc(2 * K + 1, sizeof(double))
    sc.rden = <double*> _alloc(K, sizeof(double))
    if ws.C == 1 or ws.blocks:
        return 0
    if ws.per_chunk:
        sc.row = <int64_t*> _alloc(K, sizeof(int64_t), True)
        sc.tmp = <int64_t*> _alloc(K, sizeof(int64_t))
        sc.changed = <char*> _alloc(ws.C, sizeof(char))
    elif sw.sparse or ws.private:
        _copy_alloc(&sc.own, sw)
    else:
        # dense with two chunks: chunk 1 samples on the snapshot itself, with its own n_k
        sc.own.nk = <int64_t*> _alloc(K, sizeof(int64_t))
    return 0


cdef int _workspace_init(Workspace* ws, const Sweep* sw, Py_ssize_t C, int64_t start1,
                         int threads, bint blocks) except -1:
    """Every buffer of a sweep of C chunks whose chunk 1 starts at token ``start1``, or with
    ``blocks`` of the partitioned schedule with C blocks (``ws`` zeroed by the caller, freed by
    :func:`_workspace_free` also when this raises); the chunk bounds and streams are bound to
    it by :func:`_workspace_bind` before each sweep."""
    cdef Py_ssize_t c
    if C < 1:
        raise ValueError("a sweep needs at least one chunk")
    ws.C = C
    ws.blocks = blocks and C > 1
    ws.threads = 1 if threads < 1 else (<int> C if threads > C else threads)
    ws.per_chunk = sw.sparse and C - 1 <= ws.threads and not ws.blocks
    ws.private = C > 2
    ws.gens = <bitgen_t**> _alloc(C, sizeof(bitgen_t*))
    ws.bbar = <double*> _alloc(sw.K, sizeof(double))
    ws.scratch = <Scratch*> _alloc(ws.threads, sizeof(Scratch), True)
    for c in range(ws.threads):
        _scratch_init(&ws.scratch[c], sw, ws)
    if ws.blocks:
        ws.nk_blocks = <int64_t*> _alloc((C + 1) * sw.K, sizeof(int64_t))
        ws.dt_saved = <int32_t*> _alloc(sw.n_tokens, sizeof(int32_t))
        ws.dt_saved_n = <int32_t*> _alloc(sw.n_docs, sizeof(int32_t))
        ws.len_blocks = <int32_t*> _alloc(C * sw.V, sizeof(int32_t))
        ws.progress = <int32_t*> _alloc(C, sizeof(int32_t))
        ws.claimed = <int32_t*> _alloc(C, sizeof(int32_t))
        ws.cpus = <topictk_cpus*> _alloc(ws.threads, sizeof(topictk_cpus))
    if C == 1 or ws.blocks:
        return 0
    _copy_alloc(&ws.snap, sw)
    if ws.per_chunk:
        ws.chunk = <Counts*> _alloc(C, sizeof(Counts), True)
        for c in range(1, C):
            _copy_alloc(&ws.chunk[c], sw)
    else:
        ws.z_old = <int32_t*> _alloc(sw.n_tokens - start1, sizeof(int32_t))
        ws.nk_delta = <int64_t*> _alloc(ws.threads * sw.K, sizeof(int64_t))
    return 0


cdef int _workspace_bind(Workspace* ws, const int64_t[::1] chunk_bounds,
                         list streams) except -1:
    """The chunk boundaries and the chunks' streams of this sweep."""
    cdef Py_ssize_t c
    if chunk_bounds.shape[0] - 1 != ws.C:
        raise ValueError(f"{ws.C} chunks need {ws.C + 1} bounds, got {chunk_bounds.shape[0]}")
    if len(streams) != ws.C:
        raise ValueError(f"{ws.C} chunks need {ws.C} streams, got {len(streams)}")
    ws.bounds = &chunk_bounds[0]
    for c in range(ws.C):
        ws.gens[c] = bitgen_of(streams[c])
    return 0


cdef void _copy_split(void* dst, const void* src, size_t n, int threads) noexcept nogil:
    """memcpy of n bytes, cut into one piece per thread."""
    cdef Py_ssize_t p
    cdef size_t a, b
    if threads < 2:
        memcpy(dst, src, n)
        return
    for p in prange(threads, schedule="static", chunksize=1, num_threads=threads):
        a = n * p // threads
        b = n * (p + 1) // threads
        memcpy(<char*> dst + a, <const char*> src + a, b - a)


cdef void _take_snapshot(const Sweep* sw, Workspace* ws, const Counts* shared) noexcept nogil:
    """The counts at the start of the iteration (chunks >= 1 sample against them and the merge
    takes their changes from them) and, for the replay, the topics of chunks >= 1."""
    cdef int64_t start1 = sw.doc_ptr[ws.bounds[1]]
    memcpy(ws.snap.nk, shared.nk, sw.K * sizeof(int64_t))
    if sw.sparse:
        _copy_split(ws.snap.wt_entries, shared.wt_entries, sw.pool * sizeof(int64_t),
                    ws.threads)
        memcpy(ws.snap.wt_len, shared.wt_len, sw.V * sizeof(int32_t))
    else:
        _copy_split(ws.snap.nkw, shared.nkw, sw.V * sw.K * sizeof(int32_t), ws.threads)
    if not ws.per_chunk:
        memcpy(ws.z_old, sw.z + start1, (sw.n_tokens - start1) * sizeof(int32_t))


cdef int64_t _sample_chunk(const Sweep* sw, Workspace* ws, const Counts* shared, Py_ssize_t c,
                           int tid) noexcept nogil:
    """Chunk c of an AD-LDA iteration, by thread ``tid``. Chunk 0 samples in place on the
    shared counts; a chunk c >= 1 on a fresh copy of the snapshot: its own (per_chunk, kept
    for the merge) or its thread's, except the dense sampler with two chunks, whose chunk 1
    samples on the snapshot itself."""
    cdef Scratch* sc = &ws.scratch[tid]
    cdef Counts cn
    if c == 0:
        cn = shared[0]
    else:
        if ws.per_chunk:
            cn = ws.chunk[c]
        else:
            cn = sc.own
        memcpy(cn.nk, ws.snap.nk, sw.K * sizeof(int64_t))
        if sw.sparse:
            memcpy(cn.wt_entries, ws.snap.wt_entries, sw.pool * sizeof(int64_t))
            memcpy(cn.wt_len, ws.snap.wt_len, sw.V * sizeof(int32_t))
        elif ws.private:
            memcpy(cn.nkw, ws.snap.nkw, sw.V * sw.K * sizeof(int32_t))
        else:
            cn.nkw = ws.snap.nkw
    return _sweep_chunk(sw, &cn, sc, ws.bounds[c], ws.bounds[c + 1], ws.gens[c], NULL)


cdef void _merge_chunks(const Sweep* sw, Workspace* ws, Counts* shared) noexcept nogil:
    """per_chunk: n_k and every word's list (then its dense row) from the chunks' lists."""
    cdef Py_ssize_t c, k, v
    cdef int tid
    for c in range(1, ws.C):
        for k in range(sw.K):
            shared.nk[k] += ws.chunk[c].nk[k] - ws.snap.nk[k]
    with parallel(num_threads=ws.threads):
        tid = threadid()
        for v in prange(sw.V, schedule="guided"):
            _merge_word(v, sw, shared, &ws.snap, ws.chunk + 1, ws.C - 1, &ws.scratch[tid])


cdef inline void _replay_token(const Sweep* sw, Counts* shared, int32_t w, int32_t k_old,
                               int32_t k_new) noexcept nogil:
    """Move one token of word w from topic k_old to k_new in the shared word counts."""
    cdef int64_t* glst
    if sw.sparse:
        glst = shared.wt_entries + sw.wt_ptr[w]
        _wt_decrement_at(glst, &shared.wt_len[w],
                         _find_topic(glst, shared.wt_len[w], k_old, sw.mask), sw.one)
        _wt_increment_at(glst, &shared.wt_len[w],
                         _find_topic(glst, shared.wt_len[w], k_new, sw.mask), k_new, sw.one)
    else:
        shared.nkw[w * sw.K + k_old] -= 1
        shared.nkw[w * sw.K + k_new] += 1


cdef void _replay_chunks(const Sweep* sw, Workspace* ws, Counts* shared) noexcept nogil:
    """Not per_chunk: replay the changed tokens of chunks 1..C-1 on the shared counts (lists
    or dense), words split between workers by w mod P; then, with lists, the dense counts."""
    cdef Py_ssize_t P = ws.threads, K = sw.K, V = sw.V, p, k
    cdef int64_t start1 = sw.doc_ptr[ws.bounds[1]], i
    cdef int64_t n_rest = sw.n_tokens - start1
    cdef int64_t* delta = ws.nk_delta
    cdef int32_t w, k_old, k_new
    for i in range(P * K):
        delta[i] = 0
    for p in prange(P, schedule="static", chunksize=1, num_threads=P):
        for i in range(n_rest):
            w = sw.words[start1 + i]
            if w % P != p:
                continue
            k_old = ws.z_old[i]
            k_new = sw.z[start1 + i]
            if k_old == k_new:
                continue
            delta[p * K + k_old] -= 1
            delta[p * K + k_new] += 1
            _replay_token(sw, shared, w, k_old, k_new)
    for p in range(P):
        for k in range(K):
            shared.nk[k] += delta[p * K + k]
    if sw.sparse:
        for p in prange(P, schedule="static", chunksize=1, num_threads=P):
            _refresh_counts(ws.snap.wt_entries, ws.snap.wt_len, shared.wt_entries, sw.wt_ptr,
                            shared.wt_len, shared.nkw, K, sw.bits, p * V // P, (p + 1) * V // P)


cdef int64_t _sweep_chunks(const Sweep* sw, Workspace* ws, Counts* shared) noexcept nogil:
    """All chunks of one iteration, then the merge of their changes into ``shared``."""
    cdef Py_ssize_t c
    cdef int tid
    cdef int64_t fallbacks = 0
    if ws.C == 1:
        fallbacks = _sweep_chunk(sw, shared, &ws.scratch[0], ws.bounds[0], ws.bounds[1],
                                 ws.gens[0], NULL)
        if sw.sparse:
            # O(V K) writes, but no copy of the lists (the sweep itself costs O(N))
            _lists_to_counts(shared.wt_entries, sw.wt_ptr, shared.wt_len, shared.nkw, sw.K,
                             sw.bits, 0, sw.V)
        return fallbacks
    # AD-LDA. Chunk 0 samples in place on the shared counts; chunks 1..C-1 sample on copies of
    # the counts of the start of the iteration (the snapshot; the dense sampler with two chunks
    # uses the snapshot itself), and only their changes are merged afterwards: with SparseLDA
    # and at most one chunk >= 1 per thread, word by word from each chunk's lists; otherwise
    # by replaying the changed tokens. Either way the result is the one of a private copy for
    # every chunk.
    _take_snapshot(sw, ws, shared)
    if ws.C == ws.threads:
        # chunk c on thread c in every sweep, so that its documents stay in that core's cache
        with parallel(num_threads=ws.threads):
            tid = threadid()
            for c in prange(ws.C, schedule="static", chunksize=1):
                fallbacks += _sample_chunk(sw, ws, shared, c, tid)
    else:
        with parallel(num_threads=ws.threads):
            tid = threadid()
            for c in prange(ws.C, schedule="dynamic", chunksize=1):
                fallbacks += _sample_chunk(sw, ws, shared, c, tid)
    if ws.per_chunk:
        _merge_chunks(sw, ws, shared)
    else:
        _replay_chunks(sw, ws, shared)
    return fallbacks


cdef class SweepBuffers:
    """The buffers of AD-LDA sweeps (per-thread scratch, the snapshot and the chunks' private
    counts) or of partitioned sweeps, kept from one :func:`gibbs_sweep` (or
    :func:`gibbs_block_sweep`) to the next instead of allocated and freed in
    each: a sweep of the same sizes, chunks, sampler and threads reuses them; any other
    allocates new ones. What a sweep leaves in them is never read by the next one (the merge
    scratch rows are left zeroed, as a fresh allocation has them)."""

    cdef Workspace ws
    cdef object key

    def __cinit__(self):
        memset(&self.ws, 0, sizeof(Workspace))
        self.key = None

    def __dealloc__(self):
        _workspace_free(&self.ws)

    cdef Workspace* ready(self, const Sweep* sw, const int64_t[::1] chunk_bounds,
                          int threads, bint blocks) except NULL:
        cdef Py_ssize_t C = chunk_bounds.shape[0] - 1
        cdef int64_t start1 = sw.doc_ptr[chunk_bounds[1]] if C > 1 else 0
        key = (C, start1, threads, sw.sparse, sw.K, sw.V, sw.pool, sw.n_tokens, blocks)
        if key != self.key:
            _workspace_free(&self.ws)
            memset(&self.ws, 0, sizeof(Workspace))
            self.key = None
            _workspace_init(&self.ws, sw, C, start1, threads, blocks)
            self.key = key
        return &self.ws


cdef int _fill_sweep(Sweep* sw, Counts* shared, const int64_t[::1] doc_ptr,
                     const int32_t[::1] words, int32_t[::1] z, int32_t[:, ::1] ndk,
                     int32_t[:, ::1] nkw, int64_t[::1] nk, const double[:, ::1] alpha,
                     double beta, Py_ssize_t C, bint sparse, const int64_t[::1] wt_ptr,
                     int64_t[::1] wt_entries, int32_t[::1] wt_len, int bits,
                     const int64_t[::1] prior_ptr, const int32_t[::1] prior_topic,
                     const double[::1] prior_extra, const double[:, ::1] phi) except -1:
    """What a sweep reads and the shared counts it changes, from the caller's arrays; the
    word prior's overlay or the given word term (§2.10), checked (their beta-bar is filled in
    by :func:`_sweep_workspace`)."""
    cdef Py_ssize_t K = ndk.shape[1], V = nkw.shape[0]
    if alpha.shape[0] > 1 and alpha.shape[0] != ndk.shape[0]:
        raise ValueError(f"alpha has {alpha.shape[0]} rows for {ndk.shape[0]} documents")
    if C < 1:
        raise ValueError("a sweep needs at least one chunk")
    sw.doc_ptr = &doc_ptr[0]
    sw.words = &words[0] if words.shape[0] > 0 else NULL
    sw.z = &z[0] if z.shape[0] > 0 else NULL
    sw.ndk = &ndk[0, 0]
    sw.n_tokens = words.shape[0]
    sw.n_docs = ndk.shape[0]
    sw.alpha = &alpha[0, 0]
    sw.per_doc_alpha = alpha.shape[0] > 1
    sw.beta = beta
    sw.K = K
    sw.V = V
    sw.sparse = sparse
    sw.wt_ptr = &wt_ptr[0]
    sw.pool = wt_entries.shape[0]
    sw.bits = bits
    sw.one = (<int64_t> 1) << bits
    sw.mask = sw.one - 1
    shared.nkw = &nkw[0, 0]
    shared.nk = &nk[0]
    shared.wt_entries = &wt_entries[0] if sw.pool > 0 else NULL
    shared.wt_len = &wt_len[0]
    _word_term(sw, prior_ptr, prior_topic, prior_extra, phi)
    return 0


cdef int _word_term(Sweep* sw, const int64_t[::1] prior_ptr, const int32_t[::1] prior_topic,
                    const double[::1] prior_extra, const double[:, ::1] phi) except -1:
    """Point the sweep at the word prior's overlay (all three arrays, or none) or at a given
    word term phi (K, V), never both (phi replaces the prior); checked."""
    check_terms(prior_ptr, prior_topic, prior_extra, phi)
    attach_overlay(prior_ptr, prior_topic, prior_extra, sw.V, sw.K, &sw.ov_ptr, &sw.ov_topic,
                   &sw.ov_extra)
    sw.phi = NULL
    if phi is not None:
        check_phi(phi, sw.K, sw.V)
        sw.phi = &phi[0, 0]
    return 0


cdef Workspace* _sweep_workspace(Workspace* own, SweepBuffers buffers, Sweep* sw,
                                 const int64_t[::1] bounds, list streams, int threads,
                                 bint blocks) except NULL:
    """The workspace of one sweep over ``bounds`` (chunks, or the doc blocks of the partitioned
    schedule): ``own`` (zeroed by the caller, freed by it afterwards) when ``buffers`` is None,
    else the buffers kept between sweeps; bound to the sweep's streams, and holding the
    sweep's beta-bar (``sw.bbar``)."""
    cdef Workspace* ws
    cdef Py_ssize_t C = bounds.shape[0] - 1, k
    if buffers is None:
        ws = own
        _workspace_init(ws, sw, C, sw.doc_ptr[bounds[1]] if C > 1 and not blocks else 0,
                        threads, blocks)
    else:
        ws = buffers.ready(sw, bounds, threads, blocks)
    _workspace_bind(ws, bounds, streams)
    if sw.ov_ptr != NULL:
        beta_bar(sw.V, sw.K, sw.beta, sw.ov_ptr, sw.ov_topic, sw.ov_extra, ws.bbar)
    else:
        for k in range(sw.K):
            ws.bbar[k] = sw.V * sw.beta
    sw.bbar = ws.bbar
    return ws


def gibbs_sweep(const int64_t[::1] doc_ptr,      # IN  (D + 1) token offsets
                const int32_t[::1] words,        # IN  (N) word ids, canonical order
                int32_t[::1] z,                  # IN/OUT (N) topic of every token
                int32_t[:, ::1] ndk,             # IN/OUT (D, K)
                int32_t[:, ::1] nkw,             # IN/OUT (V, K) word-major
                int64_t[::1] nk,                 # IN/OUT (K)
                const double[:, ::1] alpha,      # IN  (1, K), or (D, K) per document (DMR)
                double beta,
                const int64_t[::1] chunk_bounds, # IN  (C + 1) document boundaries of chunks
                list streams,                    # IN  C PCG64 bit generators, one per chunk
                bint sparse,
                const int64_t[::1] wt_ptr,       # IN  (V + 1) SparseLDA pool offsets
                int64_t[::1] wt_entries,         # IN/OUT SparseLDA pool
                int32_t[::1] wt_len,             # IN/OUT (V)
                int bits,
                int threads,
                SweepBuffers buffers=None,       # kept between sweeps (None: this sweep's own)
                const int64_t[::1] prior_ptr=None,    # IN  (V + 1) word prior's overlay, by word
                const int32_t[::1] prior_topic=None,  # IN  its topics, ascending in a word
                const double[::1] prior_extra=None,   # IN  its extra prior o[w, k] >= 0
                const double[:, ::1] phi=None):       # IN  (K, V) a given word term instead
    """One Gibbs iteration over every chunk; returns the number of rounding fallbacks.

    With one chunk this is the exact sequential sampler, in place. With C > 1 chunks it is
    AD-LDA (§2.4): each chunk samples against a private copy of the topic-word counts taken
    at the start of the iteration, and the changes are merged afterwards (integer sums, so
    the merge order does not matter). Equivalent to ``tests/reference/gibbs.py::sweep``.
    ``buffers`` changes where the sweep's buffers live, never its result.

    The word term (§2.10) is (n_kw + beta + o[w, k]) / (n_k + beta-bar_k) with the overlay o
    of ``prior_ptr``, ``prior_topic``, ``prior_extra`` (CSR by word), or ``phi[k, w]`` of a
    given (K, V) matrix; neither (the default) is the symmetric beta, bit for bit the chain
    without these inputs.
    """
    cdef Sweep sw
    cdef Counts shared
    cdef Workspace own
    cdef Workspace* ws
    cdef int64_t fallbacks = 0
    cdef Py_ssize_t C = chunk_bounds.shape[0] - 1
    _fill_sweep(&sw, &shared, doc_ptr, words, z, ndk, nkw, nk, alpha, beta, C, sparse, wt_ptr,
                wt_entries, wt_len, bits, prior_ptr, prior_topic, prior_extra, phi)
    memset(&own, 0, sizeof(Workspace))
    try:
        ws = _sweep_workspace(&own, buffers, &sw, chunk_bounds, streams, threads, False)
        with nogil:
            fallbacks = _sweep_chunks(&sw, ws, &shared)
    finally:
        _workspace_free(&own)
    return fallbacks


# ---------------------------------------------------------------- the partitioned schedule

cdef int64_t _sample_block(const Sweep* sw, Workspace* ws, const Counts* shared,
                           const int64_t* order, const int64_t* order_ptr, Py_ssize_t i,
                           Py_ssize_t b, int tid, bint epoch_nk) noexcept nogil:
    """Doc block i on the tokens of its documents in word block b, by thread ``tid``: on the
    shared lists (or dense rows) of b's words, which no other block of the epoch touches, on
    its own copy of n_k (``epoch_nk``: taken afresh from the epoch start; else the copy it
    has carried since the sweep began), and (SparseLDA) on its own copy of the list
    lengths of b's words, written back afterwards (the lengths of the two blocks' words share
    cache lines)."""
    cdef Py_ssize_t K = sw.K, w
    cdef Counts cn = shared[0]
    cdef Order od
    cdef int64_t fallbacks
    cn.nk = ws.nk_blocks + i * K
    if epoch_nk:
        memcpy(cn.nk, ws.nk_blocks + ws.C * K, K * sizeof(int64_t))
    if sw.sparse:
        cn.wt_len = ws.len_blocks + i * sw.V
        for w in range(sw.V):
            if ws.word_block[w] == b:
                cn.wt_len[w] = shared.wt_len[w]
    od.ptr = order_ptr + b * (sw.n_docs + 1)
    od.stride = 1
    od.pos = order
    od.dt_saved = ws.dt_saved
    od.dt_saved_n = ws.dt_saved_n
    fallbacks = _sweep_chunk(sw, &cn, &ws.scratch[tid], ws.bounds[i], ws.bounds[i + 1],
                             ws.gens[i], &od)
    if sw.sparse:
        for w in range(sw.V):
            if ws.word_block[w] == b:
                shared.wt_len[w] = cn.wt_len[w]
    return fallbacks


cdef void _add_block_changes(const Sweep* sw, const Workspace* ws, Counts* shared,
                             const int64_t* start) noexcept nogil:
    """n_k += every block's change of its copy from ``start`` (integer sums, order-free)."""
    cdef Py_ssize_t i, k, K = sw.K
    for i in range(ws.C):
        for k in range(K):
            shared.nk[k] += ws.nk_blocks[i * K + k] - start[k]


cdef void _refresh_dense(const Sweep* sw, const Workspace* ws, Counts* shared) noexcept nogil:
    """SparseLDA: the dense n_kw follow the lists after a partitioned sweep, cut by words
    between the threads."""
    cdef Py_ssize_t p, P = ws.threads
    if not sw.sparse:
        return
    for p in prange(P, schedule="static", chunksize=1, num_threads=P):
        _lists_to_counts(shared.wt_entries, sw.wt_ptr, shared.wt_len, shared.nkw, sw.K,
                         sw.bits, p * sw.V // P, (p + 1) * sw.V // P)


cdef int64_t _sweep_blocks(const Sweep* sw, Workspace* ws, Counts* shared,
                           const int64_t* order, const int64_t* order_ptr) noexcept nogil:
    """The B epochs of a partitioned sweep (§2.8): in epoch e, doc block i samples its tokens
    of word block (i + e) mod B, the B blocks in parallel; after the epoch every block's
    change of n_k is added to the shared n_k (integer sums, in any order the same); then, with
    SparseLDA, the dense counts follow the lists."""
    cdef Py_ssize_t B = ws.C, K = sw.K, e, i
    cdef Py_ssize_t P = ws.threads
    cdef int64_t* start = ws.nk_blocks + B * K
    cdef int64_t fallbacks = 0
    cdef int tid
    memset(ws.dt_saved_n, 0xFF, sw.n_docs * sizeof(int32_t))     # -1: no visit yet
    for e in range(B):
        memcpy(start, shared.nk, K * sizeof(int64_t))
        if P == B:
            # doc block i on thread i in every epoch: its documents stay in that core's cache
            with parallel(num_threads=P):
                tid = threadid()
                for i in prange(B, schedule="static", chunksize=1):
                    fallbacks += _sample_block(sw, ws, shared, order, order_ptr, i,
                                               (i + e) % B, tid, True)
        else:
            with parallel(num_threads=P):
                tid = threadid()
                for i in prange(B, schedule="dynamic", chunksize=1):
                    fallbacks += _sample_block(sw, ws, shared, order, order_ptr, i,
                                               (i + e) % B, tid, True)
        _add_block_changes(sw, ws, shared, start)
    _refresh_dense(sw, ws, shared)
    return fallbacks


cdef int64_t _sweep_blocks_flowing(const Sweep* sw, Workspace* ws, Counts* shared,
                                   const int64_t* order,
                                   const int64_t* order_ptr) noexcept nogil:
    """The B epochs of a partitioned sweep without a wait for whole epochs (§2.8, flowing
    n_k): doc block i carries its own copy of n_k through the sweep, so the task (i, e) -- doc
    block i on word block (i + e) mod B -- needs only the two tasks before it on the same
    blocks: (i, e - 1) on its documents and (i + 1, e - 1) on its words. Each doc block's next
    task is (i, progress[i]); a free thread claims the ready one of the lowest epoch (ties: the
    lowest i), so it never waits while another task could run. The result is fixed by the
    blocks, never by which thread takes which task or when. After the last epoch every block's
    change of n_k is added to the shared n_k."""
    cdef Py_ssize_t B = ws.C, K = sw.K, i, j
    cdef Py_ssize_t P = ws.threads
    cdef int64_t* start = ws.nk_blocks + B * K
    cdef long long total = 0, rounds
    cdef Py_ssize_t e, best, best_e, left
    cdef int tid, pinned
    cdef topictk_cpus* saved = NULL
    memset(ws.dt_saved_n, 0xFF, sw.n_docs * sizeof(int32_t))     # -1: no visit yet
    memset(ws.progress, 0, B * sizeof(int32_t))
    memset(ws.claimed, 0, B * sizeof(int32_t))
    memcpy(start, shared.nk, K * sizeof(int64_t))
    for i in range(B):
        memcpy(ws.nk_blocks + i * K, start, K * sizeof(int64_t))
    with parallel(num_threads=P):
        tid = threadid()
        # each thread on a core of its own for the sweep (topictk_pin), its CPU set kept in
        # the workspace and given back at the end
        saved = &ws.cpus[tid]
        pinned = topictk_pin(tid, saved) if P > 1 else 0
        rounds = 0
        while True:
            best = -1
            best_e = B
            left = 0
            for j in range(B):
                e = topictk_read(&ws.progress[j])
                if e >= B:
                    continue
                left = left + 1
                if (e < best_e and topictk_read(&ws.claimed[j]) == 0
                        and (e == 0 or topictk_read(&ws.progress[(j + 1) % B]) >= e)):
                    best = j
                    best_e = e
            if left == 0:
                break
            if best < 0 or not topictk_claim(&ws.claimed[best]):
                topictk_wait(rounds)
                rounds = rounds + 1
                continue
            rounds = 0
            # claimed: only this thread advances the block now, so its epoch is settled
            e = topictk_read(&ws.progress[best])
            if e < B and (e == 0 or topictk_read(&ws.progress[(best + 1) % B]) >= e):
                topictk_add(&total, _sample_block(sw, ws, shared, order, order_ptr, best,
                                                  (best + e) % B, tid, False))
                topictk_publish(&ws.progress[best], <int32_t> (e + 1))
            topictk_publish(&ws.claimed[best], 0)
        topictk_unpin(pinned, saved)
    _add_block_changes(sw, ws, shared, start)
    _refresh_dense(sw, ws, shared)
    return total


def gibbs_block_sweep(const int64_t[::1] doc_ptr,      # IN  (D + 1) token offsets
                      const int32_t[::1] words,        # IN  (N) word ids, canonical order
                      int32_t[::1] z,                  # IN/OUT (N) topic of every token
                      int32_t[:, ::1] ndk,             # IN/OUT (D, K)
                      int32_t[:, ::1] nkw,             # IN/OUT (V, K) word-major
                      int64_t[::1] nk,                 # IN/OUT (K)
                      const double[:, ::1] alpha,      # IN  (1, K), or (D, K) per document
                      double beta,
                      const int64_t[::1] block_bounds, # IN  (B + 1) doc block boundaries
                      const int64_t[::1] order,        # IN  (N) token positions by word block
                      const int64_t[::1] order_ptr,    # IN  (B (D + 1)) offsets into order
                      const int32_t[::1] word_block,   # IN  (V) word block of every word
                      list streams,                    # IN  B PCG64 bit generators, one per
                                                       #     doc block
                      bint sparse,
                      const int64_t[::1] wt_ptr,       # IN  (V + 1) SparseLDA pool offsets
                      int64_t[::1] wt_entries,         # IN/OUT SparseLDA pool
                      int32_t[::1] wt_len,             # IN/OUT (V)
                      int bits,
                      int threads,
                      SweepBuffers buffers=None,
                      const int64_t[::1] prior_ptr=None,    # IN  the word prior's overlay and
                      const int32_t[::1] prior_topic=None,  #     a given word term, as
                      const double[::1] prior_extra=None,   #     gibbs_sweep takes them
                      const double[:, ::1] phi=None,
                      bint flowing=False):
    """One Gibbs iteration by the partitioned schedule of B blocks (§2.8); returns the number
    of rounding fallbacks.

    The tokens of document d in word block b are ``order[order_ptr[b, d]:order_ptr[b, d + 1]]``
    (positions in canonical order; word block b's tokens of consecutive documents follow each
    other, as ``topictk.inference.gibbs.driver.block_order`` builds them). A sweep is B epochs; in epoch e doc
    block i samples its tokens of word block (i + e) mod B with stream i, the blocks of an
    epoch in parallel: they share no document and no word, so only n_k is stale (each block's
    copy of the epoch start). With one block this is the exact sequential sampler of
    :func:`gibbs_sweep` with one chunk, bit for bit. Equivalent to
    ``tests/reference/gibbs.py::block_sweep``. ``prior_*`` and ``phi``: the word term of
    :func:`gibbs_sweep` (§2.10).

    ``flowing``: each doc block keeps its own copy of n_k for the whole sweep (the other
    blocks' changes are added at its end) instead of taking the epoch start's at every epoch,
    so no task waits for a whole epoch, only for the two tasks before it on its documents and
    its words (:func:`_sweep_blocks_flowing`): a thread slowed by another process holds up
    the others for one task, not for every epoch. Another chain than ``flowing=False``.
    """
    cdef Sweep sw
    cdef Counts shared
    cdef Workspace own
    cdef Workspace* ws
    cdef int64_t fallbacks = 0
    cdef Py_ssize_t B = block_bounds.shape[0] - 1
    cdef Py_ssize_t D = doc_ptr.shape[0] - 1
    _fill_sweep(&sw, &shared, doc_ptr, words, z, ndk, nkw, nk, alpha, beta, B, sparse, wt_ptr,
                wt_entries, wt_len, bits, prior_ptr, prior_topic, prior_extra, phi)
    if (order.shape[0] != words.shape[0] or order_ptr.shape[0] != B * (D + 1)
            or word_block.shape[0] != nkw.shape[0]):
        raise ValueError(f"order needs {words.shape[0]} positions, order_ptr {B * (D + 1)} "
                         f"offsets for {B} blocks and word_block {nkw.shape[0]} entries")
    memset(&own, 0, sizeof(Workspace))
    try:
        ws = _sweep_workspace(&own, buffers, &sw, block_bounds, streams, threads, True)
        ws.word_block = &word_block[0] if word_block.shape[0] > 0 else NULL
        with nogil:
            if B == 1:
                fallbacks = _sweep_chunks(&sw, ws, &shared)
            elif flowing:
                fallbacks = _sweep_blocks_flowing(&sw, ws, &shared,
                                                  &order[0] if D > 0 else NULL,
                                                  &order_ptr[0] if D > 0 else NULL)
            else:
                fallbacks = _sweep_blocks(&sw, ws, &shared, &order[0] if D > 0 else NULL,
                                          &order_ptr[0] if D > 0 else NULL)
    finally:
        _workspace_free(&own)
    return fallbacks


def init_topics(const int64_t[::1] doc_ptr,   # IN  (D + 1)
                const int32_t[::1] words,     # IN  (N)
                int32_t[::1] z,               # OUT (N)
                int32_t[:, ::1] ndk,          # OUT (D, K), zeroed by the caller
                int32_t[:, ::1] nkw,          # OUT (V, K), zeroed by the caller
                int64_t[::1] nk,              # OUT (K), zeroed by the caller
                object stream):
    """Uniform initial topics, one uniform per token in canonical order (§2.2 init)."""
    cdef Py_ssize_t D = doc_ptr.shape[0] - 1, K = ndk.shape[1]
    cdef bitgen_t* gen = bitgen_of(stream)
    cdef Py_ssize_t d, i
    cdef int k
    with nogil:
        for d in range(D):
            for i in range(doc_ptr[d], doc_ptr[d + 1]):
                k = uniform_topic(gen, <int> K)
                z[i] = k
                ndk[d, k] += 1
                nkw[words[i], k] += 1
                nk[k] += 1
