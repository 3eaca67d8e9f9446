# cython: language_level=3
"""Collapsed Gibbs sampling kernels for LDA (ALGORITHMS.md §2, §11.2).

Kernels of one call per sweep or per evaluation, whole loops under ``nogil``:

* :func:`gibbs_sweep` -- one AD-LDA iteration over all chunks (dense exact sampler of §2.2,
  its uniform mapped by blocks of four topics, or SparseLDA of §2.3 inside each chunk).
  Equivalent to ``tests/reference/gibbs.py::sweep``.
* :func:`build_word_topic_lists` -- the SparseLDA per-word topic lists from counts.
  Equivalent to ``tests/reference/gibbs.py::word_topic_lists``.
* :func:`mean_list_length` -- the mean length of a token's word list (the choice of sampler
  of ``sparse: auto``). Equivalent to ``tests/reference/gibbs.py::mean_list_length``.
* :func:`fold_in_heldout` -- Gibbs fold-in of test documents with fixed topics and the
  predictive probability of each held-out (document, word) entry.
  Equivalent to ``tests/reference/gibbs.py::fold_in_heldout``.

SparseLDA keeps, for every word w, the topics with n_kw > 0 as int64 entries
``(n_kw << bits) | k`` sorted in descending order (count descending, then topic descending).
The order is therefore a pure function of the counts: a list rebuilt from counts equals the
list maintained incrementally, which is what makes a resumed chain identical to an
uninterrupted one.

Randomness: one bit generator per chunk (never per thread), so the result depends on the
chunking only, not on the number of threads.
"""
cimport cython
from cython.parallel cimport parallel, prange, threadid
from libc.stdint cimport int32_t, int64_t
from libc.stdlib cimport calloc, free, malloc, qsort
from libc.string cimport memcmp, memcpy

from numpy.random cimport bitgen_t

from topictk._cy.docsampler cimport alpha_buckets, sample_document

cdef extern from *:
    """
    #if defined(__GNUC__)
    #define TOPICTK_PREFETCH(p) __builtin_prefetch((p))
    #else
    #define TOPICTK_PREFETCH(p) ((void)0)
    #endif
    """
    void TOPICTK_PREFETCH(const void* p) noexcept nogil
from topictk._cy.rng cimport bitgen_of, next_uniform, uniform_topic

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
                           const int32_t* wt_len, int32_t* nkw, Py_ssize_t V, Py_ssize_t K,
                           int bits) noexcept nogil:
    """Dense (V, K) counts from the SparseLDA lists."""
    cdef Py_ssize_t w, j
    cdef int64_t e
    cdef int64_t mask = ((<int64_t> 1) << bits) - 1
    for w in range(V * K):
        nkw[w] = 0
    for w in range(V):
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


cdef void _merge_word(Py_ssize_t w, int64_t* g_entries, int32_t* g_len,
                      const int64_t* snap_entries, const int32_t* snap_len,
                      int64_t** loc_entries, int32_t** loc_len, Py_ssize_t n_loc,
                      const int64_t* wt_ptr, int32_t* nkw, Py_ssize_t K, int bits,
                      int64_t* row, int64_t* tmp, char* changed) noexcept nogil:
    """AD-LDA merge of one word's list: shared (snapshot + chunk 0's changes) plus, for every
    chunk c >= 1, its list minus the snapshot; then the word's dense row follows the lists.

    ``row`` is a zeroed (K) scratch row and is left zeroed; ``tmp`` holds K entries."""
    cdef int64_t mask = ((<int64_t> 1) << bits) - 1
    cdef int64_t base = wt_ptr[w]
    cdef int64_t* gl = g_entries + base
    cdef const int64_t* sl = snap_entries + base
    cdef const int64_t* ll
    cdef int32_t* dense = nkw + w * K
    cdef Py_ssize_t n_s = snap_len[w], n_g = g_len[w], n_l, n, j, a, c
    cdef int64_t e, x
    cdef bint any_change = False
    for c in range(n_loc):
        ll = loc_entries[c] + base
        n_l = loc_len[c][w]
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
        n = 0
        for j in range(n_g):
            e = gl[j] & mask
            if row[e] > 0:
                tmp[n] = (row[e] << bits) | e
                n += 1
            row[e] = 0
        for c in range(n_loc):
            if changed[c]:
                ll = loc_entries[c] + base
                for j in range(loc_len[c][w]):
                    e = ll[j] & mask
                    if row[e] > 0:
                        tmp[n] = (row[e] << bits) | e
                        n += 1
                    row[e] = 0
        for j in range(n_s):
            e = sl[j] & mask
            if row[e] > 0:
                tmp[n] = (row[e] << bits) | e
                n += 1
            row[e] = 0
        for a in range(1, n):
            x = tmp[a]
            j = a
            while j > 0 and tmp[j - 1] < x:
                tmp[j] = tmp[j - 1]
                j -= 1
            tmp[j] = x
        memcpy(gl, tmp, n * sizeof(int64_t))
        g_len[w] = <int32_t> n
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


cdef int64_t _sweep_chunk_dense(int64_t d_begin, int64_t d_end, const int64_t* doc_ptr,
                                const int32_t* words, int32_t* z, int32_t* ndk, int32_t* nkw,
                                int64_t* nk, const double* alpha, bint per_doc_alpha,
                                double beta, double vbeta, Py_ssize_t K, double* coef,
                                double* work, double* rden, bitgen_t* gen) noexcept nogil:
    """Dense exact sampler (§2.2) over documents [d_begin, d_end).

    ``alpha`` is one prior (K,) or, with ``per_doc_alpha``, a (D, K) prior per document
    (DMR, §9.2). Caches, refreshed whenever a count of topic k changes: ``rden[k]`` =
    1 / (n_k + V beta) and, within a document, ``coef[k]`` = (n_dk + alpha_k) rden[k].

    The draw maps one uniform onto the K weights p_k = coef[k] (n_kw + beta) by blocks of
    ``DENSE_BLOCK`` topics: block sums S_b (pairwise within a block), u = U sum_b S_b, then
    the first block with u < S_b (subtracting the blocks passed) and within it the first
    topic with u < p_k. Same conditional as one cumulative sum over k (the mapping of the
    uniform differs), but the weights are independent of each other (vectorised) and the
    dependent chain is nb + DENSE_BLOCK steps instead of K. ``work`` holds the weights (K)
    and the block sums (K / DENSE_BLOCK + 1).
    """
    cdef int64_t d, i
    cdef Py_ssize_t k, kk, b, k_last
    cdef Py_ssize_t n_full = K // DENSE_BLOCK
    cdef Py_ssize_t nb = (K + DENSE_BLOCK - 1) // DENSE_BLOCK
    cdef int32_t w
    cdef int32_t* nd
    cdef int32_t* nw
    cdef const double* a = alpha
    cdef double* p = work
    cdef double* bs = work + K
    cdef double u, total, t
    cdef int64_t fallbacks = 0
    for k in range(K):
        rden[k] = 1.0 / (nk[k] + vbeta)
    for d in range(d_begin, d_end):
        nd = ndk + d * K
        if per_doc_alpha:
            a = alpha + d * K
        for k in range(K):
            coef[k] = (nd[k] + a[k]) * rden[k]
        for i in range(doc_ptr[d], doc_ptr[d + 1]):
            w = words[i]
            nw = nkw + w * K
            k = z[i]
            nd[k] -= 1
            nw[k] -= 1
            nk[k] -= 1
            rden[k] = 1.0 / (nk[k] + vbeta)
            coef[k] = (nd[k] + a[k]) * rden[k]
            for kk in range(K):
                p[kk] = coef[kk] * (nw[kk] + beta)
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
                fallbacks += 1
            z[i] = <int32_t> k
            nd[k] += 1
            nw[k] += 1
            nk[k] += 1
            rden[k] = 1.0 / (nk[k] + vbeta)
            coef[k] = (nd[k] + a[k]) * rden[k]
    return fallbacks


cdef int64_t _sweep_chunk_sparse(int64_t d_begin, int64_t d_end, const int64_t* doc_ptr,
                                 const int32_t* words, int32_t* z, int32_t* ndk,
                                 int64_t* nk, const double* alpha, bint per_doc_alpha,
                                 double beta, double vbeta,
                                 Py_ssize_t K, int64_t* wt_entries, const int64_t* wt_ptr,
                                 int32_t* wt_len, int bits, int32_t* dt, int32_t* dt_pos,
                                 double* coef, double* qbuf, double* rden,
                                 bitgen_t* gen) noexcept nogil:
    """SparseLDA (§2.3) over documents [d_begin, d_end); exact draws from the §2.1 conditional.

    Caches: ``rden[k]`` = 1 / (V beta + n_k) and ``coef[k]`` = (alpha_k + n_dk) rden[k], both
    refreshed whenever a count of topic k changes; s and r are maintained incrementally and
    recomputed from scratch at every chunk (s) and document (r) start. Topic-word counts live
    in the lists only (the caller refreshes the dense n_kw from them), so a token touches its
    word's list and no dense (V, K) row.

    With ``per_doc_alpha`` ``alpha`` is (D, K), a prior per document (DMR, §9.2 with the buckets
    of §2.3, alpha_k replaced by alpha_dk): s_d and every coefficient are then computed from
    scratch at each document start (O(K), the order of the loop that lists its topics).
    """
    cdef int64_t d, i
    cdef Py_ssize_t k, kk, j, n_dt, n_wt, pos
    cdef int32_t w
    cdef int32_t* nd
    cdef int64_t* lst
    cdef int64_t e
    cdef int64_t one = (<int64_t> 1) << bits
    cdef int64_t mask = one - 1
    cdef double s = 0.0, r, q, u, acc, inv
    cdef int64_t fallbacks = 0
    cdef bint found
    cdef const double* a = alpha

    for k in range(K):
        rden[k] = 1.0 / (vbeta + nk[k])
        if not per_doc_alpha:
            s += alpha[k] * beta * rden[k]
            coef[k] = alpha[k] * rden[k]

    for d in range(d_begin, d_end):
        nd = ndk + d * K
        n_dt = 0
        r = 0.0
        if per_doc_alpha:
            # document start: s_d, r and every coefficient from scratch (alpha_d is new)
            a = alpha + d * K
            s = 0.0
            for k in range(K):
                s += a[k] * beta * rden[k]
                coef[k] = (a[k] + nd[k]) * rden[k]
                if nd[k] > 0:
                    dt_pos[k] = <int32_t> n_dt
                    dt[n_dt] = <int32_t> k
                    n_dt += 1
                    r += nd[k] * beta * rden[k]
        else:
            for k in range(K):
                if nd[k] > 0:
                    dt_pos[k] = <int32_t> n_dt
                    dt[n_dt] = <int32_t> k
                    n_dt += 1
                    r += nd[k] * beta * rden[k]
                    coef[k] = (alpha[k] + nd[k]) * rden[k]
        for i in range(doc_ptr[d], doc_ptr[d + 1]):
            w = words[i]
            lst = wt_entries + wt_ptr[w]
            k = z[i]
            if i + 2 < doc_ptr[d_end]:
                # the next tokens' lists are random pool locations: ask for them early
                TOPICTK_PREFETCH(wt_entries + wt_ptr[words[i + 2]])

            # remove the token from every count
            inv = rden[k]
            s -= a[k] * beta * inv
            r -= nd[k] * beta * inv
            _wt_decrement_at(lst, &wt_len[w], _find_topic(lst, wt_len[w], k, mask), one)
            nd[k] -= 1
            nk[k] -= 1
            if nd[k] == 0:
                j = dt_pos[k]
                n_dt -= 1
                dt[j] = dt[n_dt]
                dt_pos[dt[j]] = <int32_t> j
            inv = 1.0 / (vbeta + nk[k])
            rden[k] = inv
            s += a[k] * beta * inv
            r += nd[k] * beta * inv
            coef[k] = (a[k] + nd[k]) * inv

            # topic-word bucket
            q = 0.0
            n_wt = wt_len[w]
            for j in range(n_wt):
                e = lst[j]
                q = q + coef[e & mask] * (e >> bits)
                qbuf[j] = q

            u = next_uniform(gen) * (s + r + q)
            found = False
            pos = -2
            if u < q:
                for j in range(n_wt):
                    if u < qbuf[j]:
                        pos = j
                        found = True
                        break
                if not found:
                    pos = n_wt - 1
                k = lst[pos] & mask
            elif u < q + r and n_dt > 0:
                u = u - q
                acc = 0.0
                for j in range(n_dt):
                    kk = dt[j]
                    acc = acc + nd[kk] * beta * rden[kk]
                    if u < acc:
                        k = kk
                        found = True
                        break
                if not found:
                    k = dt[n_dt - 1]
            else:
                u = u - q - r
                acc = 0.0
                for kk in range(K):
                    acc = acc + a[kk] * beta * rden[kk]
                    if u < acc:
                        k = kk
                        found = True
                        break
                if not found:
                    k = K - 1
            if not found:
                fallbacks += 1

            # add the token with its new topic
            z[i] = <int32_t> k
            inv = rden[k]
            s -= a[k] * beta * inv
            r -= nd[k] * beta * inv
            if pos == -2:
                pos = _find_topic(lst, wt_len[w], k, mask)
            _wt_increment_at(lst, &wt_len[w], pos, k, one)
            if nd[k] == 0:
                dt_pos[k] = <int32_t> n_dt
                dt[n_dt] = <int32_t> k
                n_dt += 1
            nd[k] += 1
            nk[k] += 1
            inv = 1.0 / (vbeta + nk[k])
            rden[k] = inv
            s += a[k] * beta * inv
            r += nd[k] * beta * inv
            coef[k] = (a[k] + nd[k]) * inv

        if not per_doc_alpha:
            for j in range(n_dt):
                k = dt[j]
                coef[k] = a[k] * rden[k]
    return fallbacks


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
                int threads):
    """One Gibbs iteration over every chunk; returns the number of rounding fallbacks.

    With one chunk this is the exact sequential sampler, in place. With C > 1 chunks it is
    AD-LDA (§2.4): each chunk samples against a private copy of the topic-word counts taken
    at the start of the iteration, and the changes are merged afterwards (integer sums, so
    the merge order does not matter). Equivalent to ``tests/reference/gibbs.py::sweep``.
    """
    cdef bint per_doc_alpha = alpha.shape[0] > 1
    if per_doc_alpha and alpha.shape[0] != ndk.shape[0]:
        raise ValueError(f"alpha has {alpha.shape[0]} rows for {ndk.shape[0]} documents")
    cdef Py_ssize_t C = chunk_bounds.shape[0] - 1
    cdef Py_ssize_t K = ndk.shape[1], V = nkw.shape[0]
    cdef Py_ssize_t N = words.shape[0]
    cdef Py_ssize_t pool = wt_entries.shape[0]
    cdef double vbeta = V * beta
    cdef int64_t fallbacks = 0
    cdef Py_ssize_t c, i, k, p, P, start1, n_rest
    cdef int32_t w, k_old, k_new
    cdef int64_t one = (<int64_t> 1) << bits
    cdef int64_t mask = one - 1
    cdef bitgen_t** gens
    cdef int64_t* l_nk
    cdef int64_t** t_wt
    cdef int32_t** t_len
    cdef int32_t** t_nkw
    cdef Py_ssize_t tid
    cdef int32_t* dt
    cdef int32_t* dt_pos
    cdef double* coef
    cdef double* qbuf
    cdef double* rden
    cdef int64_t* nk_delta
    cdef int64_t* glst
    cdef int32_t* z_old = NULL
    cdef int64_t* snap_wt = NULL
    cdef int32_t* snap_len = NULL
    cdef int32_t* snap_nkw = NULL
    cdef int64_t* snap_nk = NULL
    cdef bint private, per_chunk
    cdef int64_t** c_wt
    cdef int32_t** c_len
    cdef int64_t* c_nk
    cdef int64_t* row
    cdef int64_t* tmp
    cdef char* flags
    cdef Py_ssize_t v

    if len(streams) != C:
        raise ValueError(f"{C} chunks need {C} streams, got {len(streams)}")
    if threads < 1:
        threads = 1
    if threads > C:
        threads = <int> C
    gens = <bitgen_t**> malloc(C * sizeof(bitgen_t*))
    for c in range(C):
        gens[c] = bitgen_of(streams[c])
    if sparse and C > 1:
        # the lists at the start of the iteration: chunks >= 1 sample against them and the
        # merge takes their changes from them
        snap_wt = <int64_t*> malloc((pool if pool > 0 else 1) * sizeof(int64_t))
        snap_len = <int32_t*> malloc(V * sizeof(int32_t))
        memcpy(snap_wt, &wt_entries[0], pool * sizeof(int64_t))
        memcpy(snap_len, &wt_len[0], V * sizeof(int32_t))

    if C == 1:
        dt = <int32_t*> malloc(K * sizeof(int32_t))
        dt_pos = <int32_t*> malloc(K * sizeof(int32_t))
        coef = <double*> malloc(K * sizeof(double))
        qbuf = <double*> malloc((2 * K + 1) * sizeof(double))   # dense: weights + block sums
        rden = <double*> malloc(K * sizeof(double))
        with nogil:
            if sparse:
                fallbacks = _sweep_chunk_sparse(
                    chunk_bounds[0], chunk_bounds[1], &doc_ptr[0], &words[0], &z[0], &ndk[0, 0],
                    &nk[0], &alpha[0, 0], per_doc_alpha, beta, vbeta, K, &wt_entries[0],
                    &wt_ptr[0], &wt_len[0], bits, dt, dt_pos, coef, qbuf, rden, gens[0])
                # O(V K) writes, but no copy of the lists (the sweep itself costs O(N))
                _lists_to_counts(&wt_entries[0], &wt_ptr[0], &wt_len[0], &nkw[0, 0], V, K, bits)
            else:
                fallbacks = _sweep_chunk_dense(
                    chunk_bounds[0], chunk_bounds[1], &doc_ptr[0], &words[0], &z[0], &ndk[0, 0],
                    &nkw[0, 0], &nk[0], &alpha[0, 0], per_doc_alpha, beta, vbeta, K, coef, qbuf,
                    rden, gens[0])
        free(dt); free(dt_pos); free(coef); free(qbuf); free(rden); free(gens)
        free(snap_wt); free(snap_len)
        return fallbacks

    # AD-LDA. Chunk 0 samples in place on the shared counts; chunks 1..C-1 sample on copies of
    # the counts of the start of the iteration (the snapshot; the dense sampler with two chunks
    # uses the snapshot itself), and only their changes are merged afterwards: with SparseLDA
    # and at most one chunk >= 1 per thread, word by word from each chunk's lists; otherwise
    # by replaying the changed tokens. Either way the result is the one of a private copy for
    # every chunk.
    per_chunk = sparse and C - 1 <= threads
    start1 = doc_ptr[chunk_bounds[1]]
    n_rest = N - start1
    if not per_chunk:
        z_old = <int32_t*> malloc((n_rest if n_rest > 0 else 1) * sizeof(int32_t))
        memcpy(z_old, &z[start1], n_rest * sizeof(int32_t))
    snap_nk = <int64_t*> malloc(K * sizeof(int64_t))
    memcpy(snap_nk, &nk[0], K * sizeof(int64_t))
    if not sparse:
        snap_nkw = <int32_t*> malloc(V * K * sizeof(int32_t))
        memcpy(snap_nkw, &nkw[0, 0], V * K * sizeof(int32_t))
    private = C > 2     # dense path: with two chunks, chunk 1 samples on the snapshot itself
    # private buffers, allocated by the threads that sample a chunk >= 1 only (per_chunk: one
    # list pool per chunk >= 1, kept for the merge)
    t_wt = <int64_t**> calloc(threads, sizeof(int64_t*))
    t_len = <int32_t**> calloc(threads, sizeof(int32_t*))
    t_nkw = <int32_t**> calloc(threads, sizeof(int32_t*))
    c_wt = <int64_t**> calloc(C, sizeof(int64_t*))
    c_len = <int32_t**> calloc(C, sizeof(int32_t*))
    c_nk = <int64_t*> calloc(C * K, sizeof(int64_t))
    with nogil, parallel(num_threads=threads):
        l_nk = <int64_t*> malloc(K * sizeof(int64_t))
        dt = <int32_t*> malloc(K * sizeof(int32_t))
        dt_pos = <int32_t*> malloc(K * sizeof(int32_t))
        coef = <double*> malloc(K * sizeof(double))
        qbuf = <double*> malloc((2 * K + 1) * sizeof(double))   # dense: weights + block sums
        rden = <double*> malloc(K * sizeof(double))
        for c in prange(C, schedule="dynamic", chunksize=1):
            if c == 0:
                if sparse:
                    fallbacks += _sweep_chunk_sparse(
                        chunk_bounds[0], chunk_bounds[1], &doc_ptr[0], &words[0], &z[0],
                        &ndk[0, 0], &nk[0], &alpha[0, 0], per_doc_alpha, beta, vbeta, K,
                        &wt_entries[0], &wt_ptr[0], &wt_len[0], bits, dt, dt_pos, coef, qbuf,
                        rden, gens[0])
                else:
                    fallbacks += _sweep_chunk_dense(
                        chunk_bounds[0], chunk_bounds[1], &doc_ptr[0], &words[0], &z[0],
                        &ndk[0, 0], &nkw[0, 0], &nk[0], &alpha[0, 0], per_doc_alpha, beta,
                        vbeta, K, coef, qbuf, rden, gens[0])
            elif per_chunk:
                # the snapshot is still needed by the merge: sample on a copy kept for it
                c_wt[c - 1] = <int64_t*> malloc((pool if pool > 0 else 1) * sizeof(int64_t))
                c_len[c - 1] = <int32_t*> malloc(V * sizeof(int32_t))
                memcpy(&c_nk[(c - 1) * K], snap_nk, K * sizeof(int64_t))
                memcpy(c_wt[c - 1], snap_wt, pool * sizeof(int64_t))
                memcpy(c_len[c - 1], snap_len, V * sizeof(int32_t))
                fallbacks += _sweep_chunk_sparse(
                    chunk_bounds[c], chunk_bounds[c + 1], &doc_ptr[0], &words[0], &z[0],
                    &ndk[0, 0], &c_nk[(c - 1) * K], &alpha[0, 0], per_doc_alpha, beta, vbeta, K,
                    c_wt[c - 1], &wt_ptr[0], c_len[c - 1], bits, dt, dt_pos, coef, qbuf, rden,
                    gens[c])
            elif sparse:
                tid = threadid()
                if t_wt[tid] == NULL:
                    t_wt[tid] = <int64_t*> malloc((pool if pool > 0 else 1) * sizeof(int64_t))
                    t_len[tid] = <int32_t*> malloc(V * sizeof(int32_t))
                memcpy(l_nk, snap_nk, K * sizeof(int64_t))
                memcpy(t_wt[tid], snap_wt, pool * sizeof(int64_t))
                memcpy(t_len[tid], snap_len, V * sizeof(int32_t))
                fallbacks += _sweep_chunk_sparse(
                    chunk_bounds[c], chunk_bounds[c + 1], &doc_ptr[0], &words[0], &z[0],
                    &ndk[0, 0], l_nk, &alpha[0, 0], per_doc_alpha, beta, vbeta, K, t_wt[tid],
                    &wt_ptr[0], t_len[tid], bits, dt, dt_pos, coef, qbuf, rden, gens[c])
            else:
                memcpy(l_nk, snap_nk, K * sizeof(int64_t))
                if private:
                    tid = threadid()
                    if t_nkw[tid] == NULL:
                        t_nkw[tid] = <int32_t*> malloc(V * K * sizeof(int32_t))
                    memcpy(t_nkw[tid], snap_nkw, V * K * sizeof(int32_t))
                    fallbacks += _sweep_chunk_dense(
                        chunk_bounds[c], chunk_bounds[c + 1], &doc_ptr[0], &words[0], &z[0],
                        &ndk[0, 0], t_nkw[tid], l_nk, &alpha[0, 0], per_doc_alpha, beta, vbeta, K,
                        coef, qbuf, rden, gens[c])
                else:
                    fallbacks += _sweep_chunk_dense(
                        chunk_bounds[c], chunk_bounds[c + 1], &doc_ptr[0], &words[0], &z[0],
                        &ndk[0, 0], snap_nkw, l_nk, &alpha[0, 0], per_doc_alpha, beta, vbeta,
                        K, coef, qbuf, rden, gens[c])
        free(l_nk)
        free(dt); free(dt_pos); free(coef); free(qbuf); free(rden)
    for p in range(threads):
        free(t_wt[p]); free(t_len[p]); free(t_nkw[p])
    free(t_wt); free(t_len); free(t_nkw)

    if per_chunk:
        with nogil:
            for c in range(1, C):
                for k in range(K):
                    nk[k] += c_nk[(c - 1) * K + k] - snap_nk[k]
            with parallel(num_threads=threads):
                row = <int64_t*> calloc(K, sizeof(int64_t))
                tmp = <int64_t*> malloc(K * sizeof(int64_t))
                flags = <char*> malloc(C * sizeof(char))
                for v in prange(V, schedule="guided"):
                    _merge_word(v, &wt_entries[0], &wt_len[0], snap_wt, snap_len, c_wt, c_len,
                                C - 1, &wt_ptr[0], &nkw[0, 0], K, bits, row, tmp, flags)
                free(row); free(tmp); free(flags)
    else:
        # replay the changed tokens of chunks 1..C-1 on the shared counts (lists or dense),
        # words split between workers by w mod P
        P = threads
        nk_delta = <int64_t*> malloc(P * K * sizeof(int64_t))
        with nogil:
            for i in range(P * K):
                nk_delta[i] = 0
            for p in prange(P, schedule="static", chunksize=1, num_threads=threads):
                for i in range(n_rest):
                    w = words[start1 + i]
                    if w % P != p:
                        continue
                    k_old = z_old[i]
                    k_new = z[start1 + i]
                    if k_old == k_new:
                        continue
                    nk_delta[p * K + k_old] -= 1
                    nk_delta[p * K + k_new] += 1
                    if sparse:
                        glst = &wt_entries[0] + wt_ptr[w]
                        _wt_decrement_at(glst, &wt_len[w],
                                         _find_topic(glst, wt_len[w], k_old, mask), one)
                        _wt_increment_at(glst, &wt_len[w],
                                         _find_topic(glst, wt_len[w], k_new, mask), k_new, one)
                    else:
                        nkw[w, k_old] -= 1
                        nkw[w, k_new] += 1
            for p in range(P):
                for k in range(K):
                    nk[k] += nk_delta[p * K + k]
            if sparse:
                for p in prange(P, schedule="static", chunksize=1, num_threads=threads):
                    _refresh_counts(snap_wt, snap_len, &wt_entries[0], &wt_ptr[0], &wt_len[0],
                                    &nkw[0, 0], K, bits, p * V // P, (p + 1) * V // P)
        free(nk_delta)
    for c in range(C):
        free(c_wt[c]); free(c_len[c])
    free(c_wt); free(c_len); free(c_nk)
    free(z_old)
    free(gens)
    free(snap_wt); free(snap_len); free(snap_nk); free(snap_nkw)
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


cdef void _fold_in_doc(int64_t tok_begin, int64_t tok_end, const int32_t* words,
                       int64_t held_begin, int64_t held_end, const int32_t* held_words,
                       const double* weights, const double* acum, const double* phi,
                       const double* alpha, Py_ssize_t K, int n_sweeps, int n_burn,
                       int32_t* zbuf, int32_t* nd, int32_t* dt, int32_t* dt_pos, double* buf,
                       int64_t* kept, double* out, bitgen_t* gen) noexcept nogil:
    cdef Py_ssize_t k
    cdef int64_t j
    cdef double alpha_sum = 0.0, denom, acc
    cdef int n_kept = n_sweeps - n_burn
    for k in range(K):
        kept[k] = 0
        alpha_sum += alpha[k]
    sample_document(tok_begin, tok_end, words, weights, acum, alpha, K, n_sweeps, n_burn,
                    zbuf, nd, dt, dt_pos, buf, NULL, kept, gen)
    denom = (tok_end - tok_begin) + alpha_sum
    for k in range(K):
        # theta-hat: mean over kept sweeps of (n_dk + alpha_k) / (N_obs + alpha_sum); the
        # final state when no sweep is kept
        if n_kept > 0:
            buf[k] = (kept[k] / <double> n_kept + alpha[k]) / denom
        else:
            buf[k] = (nd[k] + alpha[k]) / denom
    for j in range(held_begin, held_end):
        acc = 0.0
        for k in range(K):
            acc = acc + buf[k] * phi[held_words[j] * K + k]
        out[j] = acc


def fold_in_heldout(const int64_t[::1] obs_ptr,     # IN  (D + 1) observed-token offsets
                    const int32_t[::1] obs_words,   # IN  observed tokens
                    const int64_t[::1] held_ptr,    # IN  (D + 1) held-out entry offsets
                    const int32_t[::1] held_words,  # IN  held-out word ids (CSR indices)
                    const double[:, ::1] weights,   # IN  (V, K) sampling weights (phi for Gibbs)
                    const double[:, ::1] phi,       # IN  (V, K) topic-word probabilities
                    const double[:, ::1] alpha,     # IN  (1 or D, K) document prior
                    int n_sweeps, int n_burn,
                    const int64_t[::1] chunk_bounds,  # IN (C + 1) document boundaries
                    list streams,                   # IN  C bit generators, one per chunk
                    double[::1] out,                # OUT (held entries) predictive p(w | doc)
                    int threads):
    """Gibbs fold-in of test documents (§11.2): theta-hat averaged over the kept sweeps.

    Each test document is sampled on its observed tokens with p(z = k) proportional to
    (n_dk + alpha_k) weights[w, k] (the document sampler of ``topictk/_cy/docsampler.pxd``),
    theta-hat = mean over sweeps after burn-in of (n_dk + alpha_k) / (N_obs + alpha_sum), and
    ``out[j] = sum_k theta_k phi[w_j, k]`` for each held-out entry j. Documents without
    held-out entries are skipped. Equivalent to ``tests/reference/gibbs.py::fold_in_heldout``.
    """
    cdef Py_ssize_t D = obs_ptr.shape[0] - 1, K = phi.shape[1], V = phi.shape[0]
    cdef Py_ssize_t C = chunk_bounds.shape[0] - 1
    cdef Py_ssize_t c, d, max_len = 1
    cdef bint per_doc_alpha = alpha.shape[0] > 1
    cdef bitgen_t** gens
    cdef int32_t* zbuf
    cdef int32_t* nd
    cdef int32_t* dt
    cdef int32_t* dt_pos
    cdef double* buf
    cdef int64_t* kept
    cdef double* acum = NULL
    if len(streams) != C:
        raise ValueError(f"{C} chunks need {C} streams, got {len(streams)}")
    for d in range(D):
        if obs_ptr[d + 1] - obs_ptr[d] > max_len:
            max_len = obs_ptr[d + 1] - obs_ptr[d]
    if threads < 1:
        threads = 1
    gens = <bitgen_t**> malloc((C if C > 0 else 1) * sizeof(bitgen_t*))
    for c in range(C):
        gens[c] = bitgen_of(streams[c])
    if not per_doc_alpha:
        acum = <double*> malloc((V + 1) * sizeof(double))
    with nogil:
        if acum != NULL:
            alpha_buckets(&weights[0, 0], &alpha[0, 0], V, K, acum)
        with parallel(num_threads=threads):
            zbuf = <int32_t*> malloc(max_len * sizeof(int32_t))
            nd = <int32_t*> malloc(K * sizeof(int32_t))
            dt = <int32_t*> malloc(K * sizeof(int32_t))
            dt_pos = <int32_t*> malloc(K * sizeof(int32_t))
            buf = <double*> malloc(K * sizeof(double))
            kept = <int64_t*> malloc(K * sizeof(int64_t))
            for c in prange(C, schedule="dynamic", chunksize=1):
                for d in range(chunk_bounds[c], chunk_bounds[c + 1]):
                    if held_ptr[d + 1] == held_ptr[d]:
                        continue
                    _fold_in_doc(obs_ptr[d], obs_ptr[d + 1], &obs_words[0], held_ptr[d],
                                 held_ptr[d + 1], &held_words[0], &weights[0, 0], acum,
                                 &phi[0, 0], &alpha[d if per_doc_alpha else 0, 0], K, n_sweeps,
                                 n_burn, zbuf, nd, dt, dt_pos, buf, kept, &out[0], gens[c])
            free(zbuf); free(nd); free(dt); free(dt_pos); free(buf); free(kept)
    free(acum)
    free(gens)
