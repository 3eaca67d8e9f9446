# The word term of the Metropolis-Hastings kernels (docs/algorithms.md §2.11), shared by the
# kernels that cimport it:
#
# * the word prior beta + o[w, k]: the symmetric beta plus a sparse overlay of extra prior
#   (seed words), CSR by word -- ``ptr`` (rows + 1) int64, ``topic`` int32 strictly ascending
#   within a row, ``extra`` float64 >= 0 -- with the topic totals beta-bar_k = V beta +
#   sum_w o[w, k] in place of V beta;
# * a given topic-word matrix phi_t (K x V float64) whose column of word w replaces the word
#   factor, and whose columns get alias tables for the word proposals.
from cython.parallel cimport parallel, prange, threadid
from libc.math cimport isfinite
from libc.stdint cimport int32_t, int64_t
from libc.stdlib cimport free

from topictk._cy.alias cimport alias_build
from topictk._cy.alloc cimport checked_alloc


# The word term a kernel's functions are compiled for (a fused argument, always NULL): the
# symmetric beta, an overlay, a given phi. A sweep picks one before its loops, so the code of
# the symmetric beta tests no term.
cdef struct PlainTerm:
    char unused
cdef struct OverlayTerm:
    char unused
cdef struct GivenTerm:
    char unused
ctypedef PlainTerm* plain_term
ctypedef OverlayTerm* overlay_term
ctypedef GivenTerm* given_term
ctypedef fused term_t:
    plain_term
    overlay_term
    given_term


cdef inline Py_ssize_t find_topic(const int32_t* topic, Py_ssize_t n,
                                  Py_ssize_t k) noexcept nogil:
    """The position of topic k among the ``n`` ascending ``topic`` (a binary search), -1 when
    it is not there."""
    cdef Py_ssize_t lo = 0, hi = n, mid
    while lo < hi:
        mid = (lo + hi) >> 1
        if topic[mid] < k:
            lo = mid + 1
        else:
            hi = mid
    return lo if lo < n and topic[lo] == k else -1


cdef inline double overlay_value(const int64_t* ptr, const int32_t* topic, const double* extra,
                                 Py_ssize_t w, Py_ssize_t k) noexcept nogil:
    """o[w, k]: the extra prior of topic k in row w, 0 when the row has no entry for k or
    there is no overlay (``ptr`` NULL)."""
    cdef Py_ssize_t j
    if ptr == NULL:
        return 0.0
    j = find_topic(topic + ptr[w], ptr[w + 1] - ptr[w], k)
    return extra[ptr[w] + j] if j >= 0 else 0.0


cdef inline int check_terms(object prior_ptr, object prior_topic, object prior_extra,
                            object phi) except -1:
    """The overlay comes whole, and not with a given phi (which replaces it)."""
    if (prior_ptr is None) != (prior_topic is None) or (prior_ptr is None) != (prior_extra is None):
        raise ValueError("the word prior's overlay needs prior_ptr, prior_topic and prior_extra")
    if prior_ptr is not None and phi is not None:
        raise ValueError("a given phi replaces the word prior: pass one of them")
    return 0


cdef inline int check_overlay(const int64_t[::1] ptr, const int32_t[::1] topic,
                              const double[::1] extra, Py_ssize_t rows,
                              Py_ssize_t K) except -1:
    """Refuse an overlay that is not ``rows`` CSR rows of strictly ascending topics in
    [0, K) with finite extra prior >= 0."""
    cdef Py_ssize_t w
    cdef int64_t j
    if ptr.shape[0] != rows + 1 or ptr[0] != 0:
        raise ValueError(f"the word prior's overlay needs {rows + 1} row offsets from 0")
    if topic.shape[0] != ptr[rows] or extra.shape[0] != ptr[rows]:
        raise ValueError("the overlay's topics and extra prior need one entry per offset")
    for w in range(rows):
        if ptr[w + 1] < ptr[w]:
            raise ValueError("the overlay's row offsets must not decrease")
        for j in range(ptr[w], ptr[w + 1]):
            if topic[j] < 0 or topic[j] >= K or (j > ptr[w] and topic[j] <= topic[j - 1]):
                raise ValueError(f"row {w} of the overlay needs ascending topics in [0, {K})")
            if not (isfinite(extra[j]) and extra[j] >= 0.0):
                raise ValueError(f"row {w} of the overlay has an extra prior not >= 0")
    return 0


cdef inline bint attach_overlay(const int64_t[::1] prior_ptr, const int32_t[::1] prior_topic,
                                const double[::1] prior_extra, Py_ssize_t rows, Py_ssize_t K,
                                const int64_t** ptr, const int32_t** topic,
                                const double** extra) except -1:
    """Check an overlay of ``rows`` rows and point ``ptr``, ``topic``, ``extra`` at it; False
    (``ptr`` NULL) when there is none (None)."""
    ptr[0] = NULL
    if prior_ptr is None:
        return False
    check_overlay(prior_ptr, prior_topic, prior_extra, rows, K)
    ptr[0] = &prior_ptr[0]
    topic[0] = &prior_topic[0] if prior_topic.shape[0] > 0 else NULL
    extra[0] = &prior_extra[0] if prior_extra.shape[0] > 0 else NULL
    return True


cdef inline int phi_tables(const double[:, ::1] phi, Py_ssize_t K, Py_ssize_t V, int threads,
                           double** prob, int32_t** alias) except -1:
    """Check a given phi (K x V) and allocate and build its columns' alias tables into
    ``prob``, ``alias`` (V K each; the caller frees them, also when this raises)."""
    check_phi(phi, K, V)
    prob[0] = <double*> checked_alloc(V * K, sizeof(double))
    alias[0] = <int32_t*> checked_alloc(V * K, sizeof(int32_t))
    alias_columns(&phi[0, 0], V, K, prob[0], alias[0], threads)
    return 0


cdef inline void beta_bar(Py_ssize_t V, Py_ssize_t K, double beta, const int64_t* ptr,
                          const int32_t* topic, const double* extra,
                          double* out) noexcept nogil:
    """beta-bar_k = V beta + sum_w o[w, k], the sum taken row after row (CSR order)."""
    cdef Py_ssize_t k, w
    cdef int64_t j
    for k in range(K):
        out[k] = V * beta
    for w in range(V):
        for j in range(ptr[w], ptr[w + 1]):
            out[topic[j]] += extra[j]


cdef inline int check_phi(const double[:, ::1] phi, Py_ssize_t K, Py_ssize_t V) except -1:
    """Refuse a given topic-word matrix that is not K x V, finite and >= 0, with some mass
    in every word's column."""
    cdef Py_ssize_t k, w
    cdef double total
    if phi.shape[0] != K or phi.shape[1] != V:
        raise ValueError(f"phi needs {K} x {V} entries (topics x words)")
    for w in range(V):
        total = 0.0
        for k in range(K):
            if not (isfinite(phi[k, w]) and phi[k, w] >= 0.0):
                raise ValueError(f"phi[{k}, {w}] is not a probability")
            total += phi[k, w]
        if total <= 0.0:
            raise ValueError(f"word {w} has no mass in phi")
    return 0


cdef inline void alias_column(const double* phi, Py_ssize_t V, Py_ssize_t K, Py_ssize_t w,
                              double* weight, double* prob, int32_t* alias, int32_t* small,
                              int32_t* large) noexcept nogil:
    """The alias table (``prob``, ``alias``: K entries) of column w of the K x V matrix
    ``phi``, its total summed in topic order; ``weight`` is a K scratch row."""
    cdef Py_ssize_t k
    cdef double total = 0.0
    for k in range(K):
        weight[k] = phi[k * V + w]
        total = total + weight[k]
    alias_build(weight, K, total, prob, alias, small, large)


cdef inline int alias_columns(const double* phi, Py_ssize_t V, Py_ssize_t K, double* prob,
                              int32_t* alias, int threads) except -1:
    """The alias tables of every column of ``phi`` (K x V): word w's in ``prob``, ``alias``
    [w K, (w + 1) K). O(V K), the words shared among ``threads`` threads (a table is a
    function of its column alone, so the threads change nothing)."""
    cdef int tid, n = 1 if threads < 1 else threads
    cdef Py_ssize_t w
    cdef double* weight = NULL
    cdef int32_t* stacks = NULL
    try:
        weight = <double*> checked_alloc(n * K, sizeof(double))
        stacks = <int32_t*> checked_alloc(2 * n * K, sizeof(int32_t))
        with nogil, parallel(num_threads=n):
            tid = threadid()
            for w in prange(V, schedule="static"):
                alias_column(phi, V, K, w, weight + tid * K, prob + w * K, alias + w * K,
                             stacks + 2 * tid * K, stacks + (2 * tid + 1) * K)
    finally:
        free(weight)
        free(stacks)
    return 0
