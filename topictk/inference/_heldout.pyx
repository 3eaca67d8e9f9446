# cython: language_level=3
"""Held-out kernels every family shares (docs/algorithms.md §11.2).

* :func:`fold_in_theta` -- Gibbs fold-in of documents with fixed topics: theta-hat of each
  document (what ``evaluate`` mixes with the topics and ``infer`` reports); the default
  fold-in of every driver (:func:`topictk.inference.base.gibbs_fold_in`).
  Equivalent to ``tests/reference/gibbs.py::fold_in_theta``.
* :func:`mixture_probabilities` -- sum_k theta_dk phi_wk for every entry of a CSR block (the
  document completion of :mod:`topictk.inference.perplexity`).
  Equivalent to ``tests/reference/vb.py::mixture_probabilities``.

They sit apart from the families' kernels because the core of ``topictk.inference`` calls
them and imports no family. Randomness of the fold-in: one bit generator per chunk (never per
thread), so theta-hat depends on the chunking only, not on the number of threads.
"""
cimport cython
from cython.parallel cimport parallel, prange, threadid
from libc.stdint cimport int32_t, int64_t, uint8_t
from libc.stdlib cimport free

from numpy.random cimport bitgen_t

from topictk._cy.alloc cimport checked_alloc as _alloc, longest_row
from topictk._cy.docsampler cimport (
    DocScratch,
    alpha_buckets,
    doc_scratch,
    doc_scratch_free,
    sample_document,
)
from topictk._cy.rng cimport bitgen_of


# ---------------------------------------------------------------- fold-in of test documents

cdef struct FoldIn:
    # what the fold-in of every document reads, and where it writes
    const int64_t* obs_ptr      # (D + 1) observed-token offsets
    const int32_t* obs_words    # observed tokens
    const uint8_t* active       # (D) 1 = fold the document in, 0 = skip it (no draws)
    const double* weights       # (V, K) sampling weights
    const double* acum          # (V) alpha-bucket totals, or NULL (a prior per document)
    const double* alpha         # (1 or D, K)
    bint per_doc_alpha
    Py_ssize_t K
    int n_sweeps
    int n_burn
    double* theta               # (D, K) theta-hat of every folded-in document


cdef void _fold_in_doc(const FoldIn* f, DocScratch* s, Py_ssize_t d,
                       bitgen_t* gen) noexcept nogil:
    """Sample document d on its observed tokens; write its theta-hat."""
    cdef Py_ssize_t k, K = f.K
    cdef int64_t tok_begin = f.obs_ptr[d], tok_end = f.obs_ptr[d + 1]
    cdef const double* alpha = f.alpha + (d * K if f.per_doc_alpha else 0)
    cdef double* theta = f.theta + d * K
    cdef double alpha_sum = 0.0, denom
    cdef int n_kept = f.n_sweeps - f.n_burn
    for k in range(K):
        s.kept[k] = 0
        alpha_sum += alpha[k]
    sample_document(tok_begin, tok_end, f.obs_words, f.weights, f.acum, alpha, K, f.n_sweeps,
                    f.n_burn, s.zbuf, s.nd, s.dt, s.dt_pos, s.buf, NULL, s.kept, gen)
    denom = (tok_end - tok_begin) + alpha_sum
    for k in range(K):
        # theta-hat: mean over kept sweeps of (n_dk + alpha_k) / (N_obs + alpha_sum); the
        # final state when no sweep is kept
        if n_kept > 0:
            theta[k] = (s.kept[k] / <double> n_kept + alpha[k]) / denom
        else:
            theta[k] = (s.nd[k] + alpha[k]) / denom


def fold_in_theta(const int64_t[::1] obs_ptr,     # IN  (D + 1) observed-token offsets
                  const int32_t[::1] obs_words,   # IN  observed tokens
                  const double[:, ::1] weights,   # IN  (V, K) sampling weights (phi for Gibbs)
                  const double[:, ::1] alpha,     # IN  (1 or D, K) document prior
                  int n_sweeps, int n_burn,
                  const int64_t[::1] chunk_bounds,  # IN (C + 1) document boundaries
                  list streams,                   # IN  C bit generators, one per chunk
                  const uint8_t[::1] active,      # IN  (D) 0 = skip the document
                  double[:, ::1] theta,           # OUT (D, K) theta-hat; skipped rows untouched
                  int threads):
    """Gibbs fold-in of documents with the topics fixed (§11.2).

    Each active document is sampled on its observed tokens with p(z = k) proportional to
    (n_dk + alpha_k) weights[w, k] (the document sampler of ``topictk/_cy/docsampler.pxd``),
    and theta-hat = mean over the sweeps after burn-in of (n_dk + alpha_k) / (N_obs +
    alpha_sum), alpha_sum added in ascending k. A skipped document draws nothing, so the
    documents after it in its chunk see the stream they would see without it. Equivalent to
    ``tests/reference/gibbs.py::fold_in_theta``.
    """
    cdef Py_ssize_t D = obs_ptr.shape[0] - 1, K = weights.shape[1], V = weights.shape[0]
    cdef Py_ssize_t C = chunk_bounds.shape[0] - 1
    cdef Py_ssize_t c, d
    cdef FoldIn f
    cdef bitgen_t** gens = NULL
    cdef DocScratch* scratch = NULL
    cdef double* acum = NULL
    cdef int tid
    if len(streams) != C:
        raise ValueError(f"{C} chunks need {C} streams, got {len(streams)}")
    if (active.shape[0] != D or theta.shape[0] != D or theta.shape[1] != K
            or alpha.shape[1] != K or (alpha.shape[0] != 1 and alpha.shape[0] != D)):
        raise ValueError("documents, active, alpha and theta do not fit together")
    if threads < 1:
        threads = 1
    if D == 0:
        return
    f.obs_ptr = &obs_ptr[0]
    f.obs_words = &obs_words[0] if obs_words.shape[0] > 0 else NULL
    f.active = &active[0]
    f.weights = &weights[0, 0]
    f.alpha = &alpha[0, 0]
    f.per_doc_alpha = alpha.shape[0] > 1
    f.K = K
    f.n_sweeps = n_sweeps
    f.n_burn = n_burn
    f.theta = &theta[0, 0]
    try:
        gens = <bitgen_t**> _alloc(C, sizeof(bitgen_t*))
        for c in range(C):
            gens[c] = bitgen_of(streams[c])
        if not f.per_doc_alpha:
            acum = <double*> _alloc(V + 1, sizeof(double))
        f.acum = acum
        scratch = doc_scratch(threads, longest_row(&obs_ptr[0], D), K)
        with nogil:
            if acum != NULL:
                alpha_buckets(f.weights, f.alpha, V, K, acum)
            with parallel(num_threads=threads):
                tid = threadid()
                for c in prange(C, schedule="dynamic", chunksize=1):
                    for d in range(chunk_bounds[c], chunk_bounds[c + 1]):
                        if f.active[d]:
                            _fold_in_doc(&f, &scratch[tid], d, gens[c])
    finally:
        doc_scratch_free(scratch, threads)
        free(acum)
        free(gens)


# ---------------------------------------------------------------- document completion

def mixture_probabilities(const int64_t[::1] indptr,    # IN  (D + 1) CSR offsets
                          const int32_t[::1] indices,   # IN  (M) word ids
                          const double[:, ::1] theta,   # IN  (D, K) document proportions
                          const double[:, ::1] phi,     # IN  (V, K) word-major topics
                          double[::1] out,              # OUT (M) sum_k theta_dk phi_wk
                          int threads):
    """p-hat(w | d) = sum_k theta_dk phi_wk of every CSR entry (§11.2).
    Equivalent to ``tests/reference/vb.py::mixture_probabilities``."""
    cdef Py_ssize_t D = indptr.shape[0] - 1, K = theta.shape[1]
    cdef Py_ssize_t d, k
    cdef int64_t j
    cdef double s
    if theta.shape[0] != D or phi.shape[1] != K or out.shape[0] != indices.shape[0]:
        raise ValueError("theta, phi, indices and out do not fit together")
    if threads < 1:
        threads = 1
    with nogil:
        for d in prange(D, schedule="dynamic", chunksize=16, num_threads=threads):
            for j in range(indptr[d], indptr[d + 1]):
                s = 0.0
                for k in range(K):
                    s = s + theta[d, k] * phi[indices[j], k]
                out[j] = s
