# cython: language_level=3
"""The collapsed Gibbs sweep of the keyword topic model (keyATM's base model, Eshima, Imai &
Sasaki 2024; docs/algorithms.md §2.12).

:func:`keyatm_sweep` -- one sweep of the documents [doc_begin, doc_end) over every token's
(z, s), drawn jointly from the full conditional of §2.12, the counts updated in place.
Equivalent to ``tests/reference/keyatm.py::sweep``.

Keyword topics are topics 0..S-1. The seed words come CSR by word: the keyword topics of word
w are ``seed_topic[seed_ptr[w]:seed_ptr[w + 1]]`` (ascending). ``nkey`` (V, S) holds the
keyword counts n~_kw, ``nkey_k`` (S,) their totals n~_k; ``nkw``/``nk`` count the regular
(s = 0) tokens only; ``ndk`` counts every token of a document whatever its switch.

One uniform per token from the chunk's stream (``next_uniform``, numpy's ``random()`` on the
same stream), scaled by the total weight and found in the cumulative weights in this order:
the K regular entries (k = 0..K-1), then the keyword entries of w's keyword topics in
``seed_topic`` order. The caller runs the chunks of a sweep (each with its stream and, for more
than one chunk, its own copy of the topic counts), so the result does not depend on threads.
"""
cimport cython
from libc.stdint cimport int8_t, int32_t, int64_t
from libc.stdlib cimport free

from numpy.random cimport bitgen_t

from topictk._cy.alloc cimport checked_alloc
from topictk._cy.rng cimport bitgen_of, next_uniform


@cython.boundscheck(False)
@cython.wraparound(False)
def keyatm_sweep(const int64_t[::1] doc_ptr,          # IN  (D + 1,) token offsets
                 const int32_t[::1] words,            # IN  (N,) word of every token
                 Py_ssize_t doc_begin, Py_ssize_t doc_end,
                 int32_t[::1] z,                      # OUT (N,) topic
                 int8_t[::1] s,                       # OUT (N,) switch: 1 = keyword
                 int32_t[:, ::1] ndk,                 # OUT (D, K) all tokens
                 int32_t[:, ::1] nkw,                 # OUT (V, K) regular tokens
                 int64_t[::1] nk,                     # OUT (K,) regular totals
                 int32_t[:, ::1] nkey,                # OUT (V, S) keyword tokens
                 int64_t[::1] nkey_k,                 # OUT (S,) keyword totals
                 const double[:, ::1] alpha,          # IN  (1 or D, K)
                 double beta, double beta_key, double gamma1, double gamma2,
                 const int64_t[::1] seed_ptr,         # IN  (V + 1,)
                 const int32_t[::1] seed_topic,       # IN  keyword topics of each word
                 const int64_t[::1] seed_len,         # IN  (S,) L_k seeds of topic k
                 object stream):
    """One sweep of documents [doc_begin, doc_end); returns the number of draws whose
    uniform fell past the cumulative total by rounding (the last entry taken)."""
    cdef Py_ssize_t K = nk.shape[0], S = nkey_k.shape[0], V = nkw.shape[0]
    cdef Py_ssize_t d, i, k, j, a, n_entries, pick
    cdef int32_t w, old
    cdef int8_t sw
    cdef double total, u, vbeta = V * beta, pi0, pi1, r
    cdef bint per_doc = alpha.shape[0] > 1
    cdef Py_ssize_t fallbacks = 0
    cdef double* cum = NULL
    cdef bitgen_t* gen = bitgen_of(stream)
    if seed_ptr.shape[0] != V + 1 or seed_len.shape[0] != S or nkey.shape[1] != S:
        raise ValueError("the seed lists need V + 1 offsets and S keyword topics")
    if S > K:
        raise ValueError("more keyword topics than topics")
    cum = <double*> checked_alloc(K + S, sizeof(double))
    try:
        with nogil:
            for d in range(doc_begin, doc_end):
                a = d if per_doc else 0
                for i in range(doc_ptr[d], doc_ptr[d + 1]):
                    w = words[i]
                    old = z[i]
                    sw = s[i]
                    ndk[d, old] -= 1
                    if sw:
                        nkey[w, old] -= 1
                        nkey_k[old] -= 1
                    else:
                        nkw[w, old] -= 1
                        nk[old] -= 1
                    # the regular entries: (n_dk + a_k) (n_kw + b) / (n_k + V b), times
                    # (n_k + g2) / (n_k + n~_k + g1 + g2) for a keyword topic
                    total = 0.0
                    for k in range(K):
                        r = (ndk[d, k] + alpha[a, k]) * (nkw[w, k] + beta) / (nk[k] + vbeta)
                        if k < S:
                            r = r * (nk[k] + gamma2) / (nk[k] + nkey_k[k] + gamma1 + gamma2)
                        total = total + r
                        cum[k] = total
                    # the keyword entries of w's keyword topics
                    n_entries = seed_ptr[w + 1] - seed_ptr[w]
                    for j in range(n_entries):
                        k = seed_topic[seed_ptr[w] + j]
                        r = ((ndk[d, k] + alpha[a, k]) * (nkey[w, k] + beta_key)
                             / (nkey_k[k] + seed_len[k] * beta_key)
                             * (nkey_k[k] + gamma1) / (nk[k] + nkey_k[k] + gamma1 + gamma2))
                        total = total + r
                        cum[K + j] = total
                    u = next_uniform(gen) * total
                    pick = K + n_entries - 1
                    for j in range(K + n_entries):
                        if u < cum[j]:
                            pick = j
                            break
                    else:
                        fallbacks += 1
                    if pick < K:
                        k = pick
                        z[i] = <int32_t> k
                        s[i] = 0
                        nkw[w, k] += 1
                        nk[k] += 1
                    else:
                        k = seed_topic[seed_ptr[w] + pick - K]
                        z[i] = <int32_t> k
                        s[i] = 1
                        nkey[w, k] += 1
                        nkey_k[k] += 1
                    ndk[d, k] += 1
    finally:
        free(cum)
    return fallbacks
