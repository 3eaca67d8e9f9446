# Gibbs sampling of one document with the topics fixed (ALGORITHMS.md §6, §7.4, §11.2).
#
# p(z_i = k) is proportional to (alpha_k + n_dk^-i) W[w_i, k] with W fixed (phi, phi-hat or
# exp(E log phi)). Shared by the mini-batch local step and by fold-in evaluation.
#
# Two draw paths, each mirrored by tests/reference/minibatch.py:
# * sparse (one alpha for every document): the weight splits into an alpha bucket
#   alpha_k W[w, k], whose cumulative sums per word are precomputed once per call
#   (``acum``, (V, K)), and a document bucket n_dk W[w, k] over the topics present in the
#   document (``dt``). One uniform u times the total picks the bucket: u < r walks the document
#   bucket in ``dt`` order; otherwise u - r is located in acum[w] by binary search. Cost per
#   token O(topics in the document + log K).
# * dense (a prior per document, as in DMR): the §12.3 categorical contract over all K.
from libc.stdint cimport int32_t, int64_t
from numpy.random cimport bitgen_t

from topictk._cy.rng cimport next_uniform, uniform_topic


cdef inline void alpha_buckets(const double* weights, const double* alpha, Py_ssize_t n_words,
                               Py_ssize_t K, double* acum) noexcept nogil:
    """acum[w, k] = sum_{j <= k} alpha_j weights[w, j] (ascending j, float64)."""
    cdef Py_ssize_t w, k
    cdef double c
    for w in range(n_words):
        c = 0.0
        for k in range(K):
            c = c + alpha[k] * weights[w * K + k]
            acum[w * K + k] = c


cdef inline Py_ssize_t _search(const double* cum, Py_ssize_t K, double u) noexcept nogil:
    """Smallest k with u < cum[k] (K - 1 if none)."""
    cdef Py_ssize_t lo = 0, hi = K - 1, mid
    while lo < hi:
        mid = (lo + hi) >> 1
        if u < cum[mid]:
            hi = mid
        else:
            lo = mid + 1
    return lo


cdef inline int64_t sample_document(int64_t begin, int64_t end, const int32_t* words,
                                    const double* weights, const double* acum,
                                    const double* alpha, Py_ssize_t K, int n_sweeps, int n_burn,
                                    int32_t* zbuf, int32_t* nd, int32_t* dt, int32_t* dt_pos,
                                    double* buf, int64_t* word_topic, int64_t* doc_topic,
                                    bitgen_t* gen) noexcept nogil:
    """Sample one document; add kept-sweep counts to word_topic (may be NULL) and doc_topic.

    ``acum`` NULL selects the dense path. Returns the number of rounding fallbacks.
    """
    cdef int64_t n = end - begin, i
    cdef Py_ssize_t k, kk, j, n_dt = 0
    cdef int sweep
    cdef double c, u, r
    cdef const double* wrow
    cdef int64_t fallbacks = 0
    cdef bint found
    for k in range(K):
        nd[k] = 0
    for i in range(n):
        k = uniform_topic(gen, <int> K)
        zbuf[i] = <int32_t> k
        nd[k] += 1
    for k in range(K):
        if nd[k] > 0:
            dt_pos[k] = <int32_t> n_dt
            dt[n_dt] = <int32_t> k
            n_dt += 1
    for sweep in range(n_sweeps):
        for i in range(n):
            wrow = weights + words[begin + i] * K
            k = zbuf[i]
            nd[k] -= 1
            if acum == NULL:
                c = 0.0
                for kk in range(K):
                    c = c + (nd[kk] + alpha[kk]) * wrow[kk]
                    buf[kk] = c
                u = next_uniform(gen) * c
                k = K - 1
                for kk in range(K):
                    if u < buf[kk]:
                        k = kk
                        break
                else:
                    fallbacks += 1
            else:
                if nd[k] == 0:
                    j = dt_pos[k]
                    n_dt -= 1
                    dt[j] = dt[n_dt]
                    dt_pos[dt[j]] = <int32_t> j
                r = 0.0
                for j in range(n_dt):
                    r = r + nd[dt[j]] * wrow[dt[j]]
                    buf[j] = r
                u = next_uniform(gen) * (r + acum[words[begin + i] * K + K - 1])
                found = False
                if u < r:
                    for j in range(n_dt):
                        if u < buf[j]:
                            k = dt[j]
                            found = True
                            break
                    if not found:
                        k = dt[n_dt - 1]
                        fallbacks += 1
                else:
                    k = _search(acum + words[begin + i] * K, K, u - r)
                if nd[k] == 0:
                    dt_pos[k] = <int32_t> n_dt
                    dt[n_dt] = <int32_t> k
                    n_dt += 1
            zbuf[i] = <int32_t> k
            nd[k] += 1
        if sweep >= n_burn:
            if word_topic != NULL:
                for i in range(n):
                    word_topic[words[begin + i] * K + zbuf[i]] += 1
            for k in range(K):
                doc_topic[k] += nd[k]
    return fallbacks
