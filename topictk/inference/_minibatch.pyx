# cython: language_level=3
"""Local Gibbs step of the mini-batch samplers (docs/algorithms.md §6, §7.4, §9.3).

For a mini-batch of documents with the topics fixed, every document is sampled on its own with
p(z_di = k) proportional to (alpha_dk + n_dk^-di) weights[w_di, k] -- weights = phi for SGRLD,
exp(E log phi) (shifted per word) for HSVG -- from a uniform start, for ``n_sweeps`` sweeps; the
sweeps after ``n_burn`` are kept. Outputs are integer sums over the kept sweeps, so the
reduction across threads is exact and thread-count independent:

* ``word_topic`` (V_B, K) int64: sum over kept sweeps of n_kw for the batch (the caller divides
  by the number of kept sweeps to get E[n_kw]);
* ``doc_topic`` (B, K) int64: the same for n_dk (used by DMR's gradient and by fold-in);
* ``doc_grad`` (B, K) float64, optional: the sum over kept sweeps of DMR's gradient factor
  g_dk = alpha_dk [psi(alpha_d.) - psi(alpha_d. + N_d) + psi(alpha_dk + n_dk) - psi(alpha_dk)]
  (§9.1, §9.3). Documents are independent, so it needs no reduction across threads.

With one prior for every document the draws use the sparse bucket path of
``topictk/_cy/docsampler.pxd`` (cost per token follows the topics present in the document);
with a prior per document (DMR) the dense categorical path.
Streams: one bit generator per chunk of consecutive documents (never per thread).
Equivalent to ``tests/reference/minibatch.py::local_gibbs``.
"""
cimport cython
from cython.parallel cimport parallel, prange, threadid
from libc.stdint cimport int32_t, int64_t
from libc.stdlib cimport free, malloc

from numpy.random cimport bitgen_t

from topictk._cy.alloc cimport checked_alloc as _alloc, longest_row
from topictk._cy.docsampler cimport alpha_buckets, sample_document_acc
from topictk._cy.rng cimport bitgen_of
from topictk._cy.views cimport bind_matrix


def local_gibbs(const int64_t[::1] doc_ptr,       # IN  (B + 1) token offsets of the batch
                const int32_t[::1] words,         # IN  (N_B) batch-local word ids 0..V_B-1
                const double[:, ::1] weights,     # IN  (V_B, K) sampling weights per word
                const double[:, ::1] alpha,       # IN  (1 or B, K) document prior
                int n_sweeps, int n_burn,
                const int64_t[::1] chunk_bounds,  # IN  (C + 1) document boundaries of chunks
                list streams,                     # IN  C bit generators, one per chunk
                int64_t[:, ::1] word_topic,       # OUT (V_B, K) kept-sweep sums of n_kw, zeroed
                int64_t[:, ::1] doc_topic,        # OUT (B, K) kept-sweep sums of n_dk, zeroed
                int threads,
                object doc_grad=None):            # OUT (B, K) float64 sums of g_dk, zeroed, or None
    """Run the local chains of one mini-batch; returns the number of rounding fallbacks."""
    cdef Py_ssize_t B = doc_ptr.shape[0] - 1, K = weights.shape[1], VB = weights.shape[0]
    cdef Py_ssize_t C = chunk_bounds.shape[0] - 1
    cdef Py_ssize_t c, d, i, t, T, max_len, stride
    cdef bint per_doc_alpha = alpha.shape[0] > 1
    cdef int64_t fallbacks = 0
    cdef bitgen_t** gens
    cdef int64_t* acc
    cdef int64_t* buffers
    cdef int32_t* zbuf
    cdef int32_t* nd
    cdef int32_t* dt
    cdef int32_t* dt_pos
    cdef double* buf
    cdef double* acum = NULL
    cdef int32_t* scratch
    cdef double* weights_buf
    cdef double* grad = NULL
    if len(streams) != C:
        raise ValueError(f"{C} chunks need {C} streams, got {len(streams)}")
    if word_topic.shape[0] != VB or word_topic.shape[1] != K or doc_topic.shape[0] != B:
        raise ValueError("output arrays do not match the batch")
    bind_matrix(&grad, doc_grad, B, K, "doc_grad must be (B, K)")
    max_len = longest_row(&doc_ptr[0], B)
    T = threads if threads >= 1 else 1
    if T > C:
        T = C if C > 0 else 1
    gens = NULL
    buffers = NULL
    scratch = NULL
    weights_buf = NULL
    try:
        gens = <bitgen_t**> _alloc(C if C > 0 else 1, sizeof(bitgen_t*))
        for c in range(C):
            gens[c] = bitgen_of(streams[c])
        # thread-private integer accumulators for n_kw (thread 0 writes the output directly)
        buffers = <int64_t*> _alloc((T - 1) * VB * K + 1, sizeof(int64_t))
        if not per_doc_alpha:
            acum = <double*> _alloc(VB + 1, sizeof(double))
        # every thread's document buffers, allocated here so that a failure is an error:
        # zbuf (max_len), nd, dt, dt_pos (K each) and buf (K doubles)
        stride = max_len + 3 * K
        scratch = <int32_t*> _alloc(T * stride, sizeof(int32_t))
        weights_buf = <double*> _alloc(T * K, sizeof(double))
        with nogil:
            if acum != NULL:
                alpha_buckets(&weights[0, 0], &alpha[0, 0], VB, K, acum)
            for i in range((T - 1) * VB * K):
                buffers[i] = 0
            with parallel(num_threads=T):
                t = threadid()
                acc = &word_topic[0, 0] if t == 0 else buffers + (t - 1) * VB * K
                zbuf = scratch + t * stride
                nd = zbuf + max_len
                dt = nd + K
                dt_pos = dt + K
                buf = weights_buf + t * K
                for c in prange(C, schedule="dynamic", chunksize=1):
                    for d in range(chunk_bounds[c], chunk_bounds[c + 1]):
                        fallbacks += sample_document_acc(
                            doc_ptr[d], doc_ptr[d + 1], &words[0], &weights[0, 0], acum,
                            &alpha[d if per_doc_alpha else 0, 0], K, n_sweeps, n_burn, zbuf,
                            nd, dt, dt_pos, buf, acc, &doc_topic[d, 0],
                            (grad + d * K) if grad != NULL else NULL, gens[c])
            for t in range(T - 1):
                for i in range(VB * K):
                    (&word_topic[0, 0])[i] += buffers[t * VB * K + i]
    finally:
        free(weights_buf)
        free(scratch)
        free(buffers)
        free(acum)
        free(gens)
    return fallbacks
