# cython: language_level=3
"""Boolean window counts of the top words of topics, for the coherence measures of gensim's
``CoherenceModel`` (docs/evaluate.md, "Coherence as gensim computes it").

:func:`count_windows` reads texts (token sequences, representation T) and counts, for every
relevant word a (the top words of the topics, numbered 0..U-1 by ``local``), the windows that
contain it, and for every pair (a, b) of relevant words that share a topic, the windows that
contain both. A text of L tokens gives L - w + 1 windows of ``window`` = w consecutive tokens
when L >= w, and one window (the whole text, also an empty one) otherwise; ``window`` <= 0
makes every text one window (boolean document co-occurrence).

Which words a window contains is the state gensim's ``WordOccurrenceAccumulator`` keeps: the
first window of a text holds its distinct words; moving to the next window, the token that
left at the left edge is marked absent and the token that entered at the right edge present
(``gensim_edge``). That marks a word absent while a second occurrence of it is still inside
the window. Without ``gensim_edge`` a word is present while it occurs in the window at least
once (the plain definition of a boolean sliding window).

Counting is by intervals, not per window: a word's presence starts at window s and ends at
window t (t - s windows); when word a's presence ends, every present partner b of a adds
t - max(s_a, s_b) to the pair's count. No Python object is touched per token.
Equivalent to ``tests/reference/coherence.py::count_windows``.
"""
cimport cython
from libc.stdint cimport int32_t, int64_t, uint8_t
from libc.stdlib cimport calloc, free


cdef inline void _open(int32_t a, int64_t t, uint8_t* present, int64_t* start) noexcept nogil:
    present[a] = 1
    start[a] = t


cdef inline void _close(int32_t a, int64_t t, uint8_t* present, int64_t* start,
                        const int64_t[::1] adj_ptr, const int32_t[::1] adj,
                        int64_t[::1] occurrences, int64_t[::1] co) noexcept nogil:
    """End the presence of ``a`` before window ``t``: its windows, and those it shared with
    every partner still present."""
    cdef int64_t j, s_a = start[a], s
    cdef int32_t b
    occurrences[a] += t - s_a
    present[a] = 0
    for j in range(adj_ptr[a], adj_ptr[a + 1]):
        b = adj[j]
        if present[b]:
            s = start[b] if start[b] > s_a else s_a
            co[j] += t - s


@cython.boundscheck(False)
@cython.wraparound(False)
def count_windows(const int64_t[::1] doc_ptr, const int32_t[::1] words,
                  const int32_t[::1] local, int64_t window, bint gensim_edge,
                  const int64_t[::1] adj_ptr, const int32_t[::1] adj,
                  int64_t[::1] occurrences, int64_t[::1] co,
                  int64_t doc_begin, int64_t doc_end):
    """Add the window counts of texts ``doc_begin``..``doc_end`` - 1 to ``occurrences`` (U,)
    and ``co`` (one entry per entry of ``adj``); return how many windows they have.

    ``local`` (V,): a word id's relevant index, -1 for the others. ``adj_ptr`` (U + 1,),
    ``adj``: the partners of each relevant word, as CSR (each pair listed under both words;
    the count of pair {a, b} is the sum of its two entries in ``co``).
    """
    cdef Py_ssize_t U = occurrences.shape[0], V = local.shape[0]
    cdef int64_t d, b0, e0, L, W, t, i, n_windows = 0
    cdef int32_t a, w
    cdef uint8_t* present
    cdef int64_t* start
    cdef int32_t* count
    if adj_ptr.shape[0] != U + 1 or co.shape[0] != adj.shape[0]:
        raise ValueError("adj_ptr must have U + 1 entries and co one per entry of adj")
    if doc_begin < 0 or doc_end < doc_begin or doc_end >= doc_ptr.shape[0]:
        raise ValueError("documents out of range")
    if doc_end > doc_begin and (doc_ptr[doc_begin] < 0 or doc_ptr[doc_end] > words.shape[0]):
        raise ValueError("doc_ptr points outside words")
    for i in range(adj.shape[0]):
        if adj[i] < 0 or adj[i] >= U:
            raise ValueError("adj names a word outside 0..U-1")
    present = <uint8_t*> calloc(U + 1, sizeof(uint8_t))
    start = <int64_t*> calloc(U + 1, sizeof(int64_t))
    count = <int32_t*> calloc(U + 1, sizeof(int32_t))
    if present == NULL or start == NULL or count == NULL:
        free(present)
        free(start)
        free(count)
        raise MemoryError()
    with nogil:
        for d in range(doc_begin, doc_end):
            b0 = doc_ptr[d]
            e0 = doc_ptr[d + 1]
            L = e0 - b0
            if window <= 0 or L <= window:
                W = 1
                for i in range(b0, e0):
                    w = words[i]
                    a = local[w] if 0 <= w < V else -1
                    if a >= 0 and not present[a]:
                        _open(a, 0, present, start)
            else:
                W = L - window + 1
                for i in range(b0, b0 + window):
                    w = words[i]
                    a = local[w] if 0 <= w < V else -1
                    if a >= 0:
                        count[a] += 1
                        if not present[a]:
                            _open(a, 0, present, start)
                for t in range(1, W):
                    # the token at the left edge leaves, the one at the right edge enters
                    w = words[b0 + t - 1]
                    a = local[w] if 0 <= w < V else -1
                    if a >= 0:
                        count[a] -= 1
                        if present[a] and (gensim_edge or count[a] == 0):
                            _close(a, t, present, start, adj_ptr, adj, occurrences, co)
                    w = words[b0 + t + window - 1]
                    a = local[w] if 0 <= w < V else -1
                    if a >= 0:
                        count[a] += 1
                        if not present[a]:
                            _open(a, t, present, start)
            # the words present in the last window end with the text
            for i in range(b0, e0):
                w = words[i]
                a = local[w] if 0 <= w < V else -1
                if a >= 0:
                    count[a] = 0
                    if present[a]:
                        _close(a, W, present, start, adj_ptr, adj, occurrences, co)
            n_windows += W
    free(present)
    free(start)
    free(count)
    return n_windows
