# Gibbs sampling of one document with the topics fixed (docs/algorithms.md §6, §7.4, §11.2).
#
# p(z_i = k) is proportional to (alpha_k + n_dk^-i) W[w_i, k] with W fixed (phi, phi-hat or
# exp(E log phi)). Shared by the mini-batch local step and by fold-in evaluation.
#
# Two draw paths, each mirrored by tests/reference/minibatch.py:
# * sparse (one alpha for every document): the weight splits into an alpha bucket
#   alpha_k W[w, k], whose total per word is precomputed once per call (``atot``, (V,)), and a
#   document bucket n_dk W[w, k] over the topics present in the document (``dt``). One uniform
#   u times the total picks the bucket: u < r walks the document bucket in ``dt`` order;
#   otherwise u - r is located by walking the alpha bucket's cumulative sums in ascending k
#   (formed in the same order as ``atot``). The alpha bucket is small next to the document
#   bucket once a document has a few tokens, so the cost per token follows the topics present
#   in the document, and the only O(V) extra memory is ``atot``.
# * dense (a prior per document, as in DMR): the §12.3 categorical contract over all K.
#
# ``sample_document_acc`` can also add, for every kept sweep, the DMR gradient factor of §9.1,
# g_dk = alpha_dk [psi(alpha_d.) - psi(alpha_d. + N_d) + psi(alpha_dk + n_dk) - psi(alpha_dk)],
# to ``doc_grad`` (DMR-SGRLD averages it over the kept sweeps, §9.3); ``sample_document`` is the
# same sampler without that output.
from libc.stdint cimport int32_t, int64_t
from libc.stdlib cimport free
from numpy.random cimport bitgen_t

from topictk._cy.alloc cimport checked_alloc
from topictk._cy.rng cimport next_uniform, uniform_topic
from topictk._cy.special cimport digamma


cdef inline void alpha_buckets(const double* weights, const double* alpha, Py_ssize_t n_words,
                               Py_ssize_t K, double* atot) noexcept nogil:
    """atot[w] = sum_k alpha_k weights[w, k], summed in ascending k (float64)."""
    cdef Py_ssize_t w, k
    cdef double c
    for w in range(n_words):
        c = 0.0
        for k in range(K):
            c = c + alpha[k] * weights[w * K + k]
        atot[w] = c


cdef inline int64_t sample_document_acc(int64_t begin, int64_t end, const int32_t* words,
                                        const double* weights, const double* acum,
                                        const double* alpha, Py_ssize_t K, int n_sweeps,
                                        int n_burn, int32_t* zbuf, int32_t* nd, int32_t* dt,
                                        int32_t* dt_pos, double* buf, int64_t* word_topic,
                                        int64_t* doc_topic, double* doc_grad,
                                        bitgen_t* gen) noexcept nogil:
    """:func:`sample_document`, and with ``doc_grad`` (K, may be NULL) the sum over kept sweeps
    of g_dk (§9.1) added to it. The draws do not depend on ``doc_grad``."""
    cdef int64_t n = end - begin, i
    cdef Py_ssize_t k, kk, j, n_dt = 0
    cdef int sweep
    cdef double c, u, r, alpha_sum, g_const = 0.0
    cdef const double* wrow
    cdef int64_t fallbacks = 0
    cdef bint found
    if doc_grad != NULL:
        # psi(alpha_d.) - psi(alpha_d. + N_d) is the same in every sweep
        alpha_sum = 0.0
        for k in range(K):
            alpha_sum = alpha_sum + alpha[k]
        g_const = digamma(alpha_sum) - digamma(alpha_sum + n)
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
                u = next_uniform(gen) * (r + acum[words[begin + i]])
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
                    u = u - r
                    c = 0.0
                    k = K - 1
                    for kk in range(K):
                        c = c + alpha[kk] * wrow[kk]
                        if u < c:
                            k = kk
                            break
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
            if doc_grad != NULL:
                for k in range(K):
                    doc_grad[k] += alpha[k] * (g_const + digamma(alpha[k] + nd[k])
                                               - digamma(alpha[k]))
    return fallbacks


cdef inline int64_t sample_document(int64_t begin, int64_t end, const int32_t* words,
                                    const double* weights, const double* acum,
                                    const double* alpha, Py_ssize_t K, int n_sweeps, int n_burn,
                                    int32_t* zbuf, int32_t* nd, int32_t* dt, int32_t* dt_pos,
                                    double* buf, int64_t* word_topic, int64_t* doc_topic,
                                    bitgen_t* gen) noexcept nogil:
    """Sample one document; add kept-sweep counts to word_topic (may be NULL) and doc_topic.

    ``acum`` (the per-word alpha-bucket totals ``atot``) NULL selects the dense path. Returns
    the number of rounding fallbacks.
    """
    return sample_document_acc(begin, end, words, weights, acum, alpha, K, n_sweeps, n_burn,
                               zbuf, nd, dt, dt_pos, buf, word_topic, doc_topic, NULL, gen)


cdef struct DocScratch:
    # the buffers one thread folds documents in with (the fold-in kernels)
    int32_t* zbuf               # (longest observed document) topics
    int32_t* nd                 # (K) n_dk
    int32_t* dt                 # (K) topics present
    int32_t* dt_pos             # (K)
    double* buf                 # (K) draw weights, then theta-hat
    int64_t* kept               # (K) n_dk summed over the kept sweeps


cdef inline void doc_scratch_free(DocScratch* scratch, int threads) noexcept nogil:
    """Free what :func:`doc_scratch` allocated, also when it did not finish; NULL is no-op."""
    cdef int t
    if scratch == NULL:
        return
    for t in range(threads):
        free(scratch[t].zbuf)
        free(scratch[t].nd)
        free(scratch[t].dt)
        free(scratch[t].dt_pos)
        free(scratch[t].buf)
        free(scratch[t].kept)
    free(scratch)


cdef inline DocScratch* doc_scratch(int threads, Py_ssize_t max_len,
                                    Py_ssize_t K) except NULL:
    """The buffers of every thread (all freed again when one allocation fails)."""
    cdef DocScratch* scratch = <DocScratch*> checked_alloc(threads, sizeof(DocScratch), True)
    cdef int t
    try:
        for t in range(threads):
            scratch[t].zbuf = <int32_t*> checked_alloc(max_len, sizeof(int32_t))
            scratch[t].nd = <int32_t*> checked_alloc(K, sizeof(int32_t))
            scratch[t].dt = <int32_t*> checked_alloc(K, sizeof(int32_t))
            scratch[t].dt_pos = <int32_t*> checked_alloc(K, sizeof(int32_t))
            scratch[t].buf = <double*> checked_alloc(K, sizeof(double))
            scratch[t].kept = <int64_t*> checked_alloc(K, sizeof(int64_t))
    except MemoryError:
        doc_scratch_free(scratch, threads)
        raise
    return scratch
