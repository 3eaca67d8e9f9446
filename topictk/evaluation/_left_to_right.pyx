# cython: language_level=3
"""The left-to-right estimator of held-out likelihood (Wallach et al. 2009; docs/algorithms.md
§11.3).

:func:`left_to_right` estimates, for every test document, ln p(held-out tokens | observed
tokens, phi, alpha) with R particles. A document's sequence is its observed tokens in split
order followed by its held-out tokens (the CSR entries in order, each repeated ``count``
times). Before position n is predicted, every particle resamples the topics of positions
0..n-1 in order; the particle's predictive probability of the word at n is
sum_k phi[w_n, k] (alpha_k + c_k) / (n + alpha_sum); then the particle draws z_n and keeps it.
The estimate adds ln(mean over particles) at held-out positions only.

Draws follow the dense draw contract: one uniform u per draw, the first k whose running sum
(ascending k) of the weights exceeds u times their total, K - 1 if rounding leaves none.
For each position the particles run in order 0..R-1. One bit generator per chunk of
documents, so the result depends on the chunking only, not on the number of threads.
Equivalent to ``tests/reference/left_to_right.py::left_to_right``.

Cost O(R len^2 K) per document: use it where that is affordable.
"""
cimport cython
from cython.parallel cimport parallel, prange, threadid
from libc.math cimport log
from libc.stdint cimport int32_t, int64_t
from libc.stdlib cimport free, malloc

from numpy.random cimport bitgen_t

from topictk._cy.rng cimport bitgen_of, next_uniform, search_cumulative

cdef double FLOOR = 1e-300


cdef inline double _cumulate(const double* phi_w, const double* alpha, const int32_t* c,
                             Py_ssize_t K, double* cum) noexcept nogil:
    """cum[k] = running sum of the weights (alpha_k + c_k) phi_w[k] in ascending k; returns
    the total, which is also the unnormalised predictive probability of the word."""
    cdef Py_ssize_t k
    cdef double total = 0.0
    for k in range(K):
        total += (alpha[k] + c[k]) * phi_w[k]
        cum[k] = total
    return total


cdef inline Py_ssize_t _draw(const double* phi_w, const double* alpha, const int32_t* c,
                             Py_ssize_t K, double* cum, bitgen_t* gen) noexcept nogil:
    """One topic with weights (alpha_k + c_k) phi_w[k], by the dense draw contract."""
    cdef double total = _cumulate(phi_w, alpha, c, K, cum)
    return search_cumulative(cum, K, next_uniform(gen) * total)


cdef double _document(int64_t ob, int64_t oe, const int32_t* obs_words, int64_t hb, int64_t he,
                      const int32_t* held_words, const int32_t* held_counts, const double* phi,
                      const double* alpha, Py_ssize_t K, int R, int64_t stride, int32_t* seq,
                      int32_t* z, int32_t* c, double* cum, bitgen_t* gen) noexcept nogil:
    """ln p-hat(held | observed) of one document; ``stride`` >= its sequence length."""
    cdef int64_t L = 0, n_obs = oe - ob, i, j, m, n, n2
    cdef Py_ssize_t k, kk
    cdef int r
    cdef int32_t* zr
    cdef int32_t* cr
    cdef double alpha_sum = 0.0, ll = 0.0, pn, p
    for i in range(ob, oe):
        seq[L] = obs_words[i]
        L += 1
    for j in range(hb, he):
        for m in range(held_counts[j]):
            seq[L] = held_words[j]
            L += 1
    for k in range(K):
        alpha_sum += alpha[k]
    for i in range(R * K):
        c[i] = 0
    for n in range(L):
        pn = 0.0
        for r in range(R):
            zr = z + r * stride
            cr = c + r * K
            for n2 in range(n):
                cr[zr[n2]] -= 1
                kk = _draw(phi + seq[n2] * K, alpha, cr, K, cum, gen)
                zr[n2] = <int32_t> kk
                cr[kk] += 1
            # one pass over the topics gives both the prediction and the draw of z_n
            p = _cumulate(phi + seq[n] * K, alpha, cr, K, cum)
            if n >= n_obs:
                pn += p / (n + alpha_sum)
            kk = search_cumulative(cum, K, next_uniform(gen) * p)
            zr[n] = <int32_t> kk
            cr[kk] += 1
        if n >= n_obs:
            pn = pn / R
            ll += log(pn if pn > FLOOR else FLOOR)
    return ll


@cython.boundscheck(False)
@cython.wraparound(False)
def left_to_right(const int64_t[::1] obs_ptr,     # IN  (D + 1) observed-token offsets
                  const int32_t[::1] obs_words,   # IN  observed tokens
                  const int64_t[::1] held_ptr,    # IN  (D + 1) held-out entry offsets (CSR)
                  const int32_t[::1] held_words,  # IN  held-out word ids (CSR indices)
                  const int32_t[::1] held_counts,  # IN  held-out counts (CSR data), >= 1
                  const double[:, ::1] phi,       # IN  (V, K) topic-word probabilities
                  const double[:, ::1] alpha,     # IN  (1 or D, K) document prior
                  int particles,
                  const int64_t[::1] chunk_bounds,  # IN (C + 1) document boundaries
                  list streams,                   # IN  C bit generators, one per chunk
                  double[::1] out,                # OUT (D) ln p-hat(held | observed)
                  int threads):
    """Left-to-right estimate of every test document's held-out log likelihood (§11.3).
    Documents without held-out tokens get 0 and draw nothing."""
    cdef Py_ssize_t D = obs_ptr.shape[0] - 1, K = phi.shape[1]
    cdef Py_ssize_t C = chunk_bounds.shape[0] - 1
    cdef Py_ssize_t c, d
    cdef int64_t length, max_len = 1, n_held
    cdef bint per_doc_alpha = alpha.shape[0] > 1
    cdef bitgen_t** gens
    cdef int32_t* seq
    cdef int32_t* z
    cdef int32_t* counts
    cdef double* cum
    cdef int32_t* ints
    cdef double* cums
    cdef Py_ssize_t stride
    cdef int64_t j
    if len(streams) != C:
        raise ValueError(f"{C} chunks need {C} streams, got {len(streams)}")
    if particles < 1:
        raise ValueError("particles must be >= 1")
    if out.shape[0] != D or held_ptr.shape[0] != D + 1:
        raise ValueError("out and held_ptr must match the observed documents")
    if per_doc_alpha and alpha.shape[0] != D:
        raise ValueError("alpha must have one row or one row per document")
    for d in range(D):
        n_held = 0
        for j in range(held_ptr[d], held_ptr[d + 1]):
            if held_counts[j] < 1:
                raise ValueError("held-out counts must be >= 1")
            n_held += held_counts[j]
        length = obs_ptr[d + 1] - obs_ptr[d] + n_held
        if length > max_len:
            max_len = length
    if threads < 1:
        threads = 1
    out[:] = 0.0
    gens = <bitgen_t**> malloc((C if C > 0 else 1) * sizeof(bitgen_t*))
    if gens == NULL:
        raise MemoryError()
    for c in range(C):
        gens[c] = bitgen_of(streams[c])
    # every thread's buffers (seq, z, counts as int32, cum as double), allocated before the loop
    stride = max_len + particles * max_len + particles * K
    ints = <int32_t*> malloc(threads * stride * sizeof(int32_t))
    cums = <double*> malloc(threads * K * sizeof(double))
    if ints == NULL or cums == NULL:
        free(ints)
        free(cums)
        free(gens)
        raise MemoryError()
    with nogil, parallel(num_threads=threads):
        seq = ints + threadid() * stride
        z = seq + max_len
        counts = z + particles * max_len
        cum = cums + threadid() * K
        for c in prange(C, schedule="dynamic", chunksize=1):
            for d in range(chunk_bounds[c], chunk_bounds[c + 1]):
                if held_ptr[d + 1] == held_ptr[d]:
                    continue
                out[d] = _document(obs_ptr[d], obs_ptr[d + 1], &obs_words[0], held_ptr[d],
                                   held_ptr[d + 1], &held_words[0], &held_counts[0], &phi[0, 0],
                                   &alpha[d if per_doc_alpha else 0, 0], K, particles, max_len,
                                   seq, z, counts, cum, gens[c])
    free(ints)
    free(cums)
    free(gens)
