# cython: language_level=3
"""SparseLDA sweep with a Dirichlet prior per document, for DMR stochastic EM
(ALGORITHMS.md §9.2 with the bucket decomposition of §2.3). Opt-in (``inference.sparse: true``
of ``dmr-sem``); the default is §9.2's dense sampler, :func:`topictk.inference._gibbs.gibbs_sweep`
with a (D, K) alpha.

The conditional of token (d, i) is that of §9.2, (alpha_dk + n_dk)(beta + n_kw)/(V beta + n_k),
split into the three buckets of §2.3 with alpha_k replaced by alpha_dk:

    s_d = sum_k alpha_dk beta / (V beta + n_k)       r = sum_{k in d} n_dk beta / (V beta + n_k)
    q   = sum_{k: n_kw > 0} (alpha_dk + n_dk) n_kw / (V beta + n_k)

Because alpha_d changes from document to document, s_d and the coefficients
c_k = (alpha_dk + n_dk) / (V beta + n_k) are computed from scratch at every document start
(O(K) per document, the same order as the loop that lists the document's topics); within the
document they are maintained incrementally exactly as in §2.3. It is an exact Gibbs sampler --
every draw comes from the §9.2 conditional -- but it maps the uniform to a topic in another
order than the dense draw contract, so its chain differs from the dense one draw by draw.

The per-word topic lists are those of :mod:`topictk.inference._gibbs` (entries
``(n_kw << bits) | k`` in descending order, a pure function of the counts), so they can be built
with :func:`topictk.inference._gibbs.build_word_topic_lists`. AD-LDA chunks (§2.4) work as in
``gibbs_sweep``: one bit generator per chunk, private list copies, integer merge.
Equivalent to ``tests/reference/dmr.py::sparse_sweep``.

:func:`polya_terms` evaluates the Polya log likelihood of every document and the gradient
factors g_dk of §9.1 for the nu update (L-BFGS calls it once per function evaluation).
"""
cimport cython
from cython.parallel cimport parallel, prange
from libc.stdint cimport int32_t, int64_t
from libc.stdlib cimport free, malloc
from libc.string cimport memcpy

from libc.math cimport exp, log
from numpy.random cimport bitgen_t

from topictk._cy.rng cimport bitgen_of, next_uniform
from topictk._cy.special cimport digamma, lngamma


cdef inline Py_ssize_t _find_topic(const int64_t* lst, Py_ssize_t n, int64_t k,
                                   int64_t mask) noexcept nogil:
    cdef Py_ssize_t j
    for j in range(n):
        if (lst[j] & mask) == k:
            return j
    return -1


cdef inline void _decrement_at(int64_t* lst, int32_t* length, Py_ssize_t j,
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


cdef inline void _increment_at(int64_t* lst, int32_t* length, Py_ssize_t j, int64_t k,
                               int64_t one) noexcept nogil:
    """Raise the count of entry ``j`` by one (``j`` = -1: append topic k with count one)."""
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


cdef int64_t _sweep_chunk(int64_t d_begin, int64_t d_end, const int64_t* doc_ptr,
                          const int32_t* words, int32_t* z, int32_t* ndk, int64_t* nk,
                          const double* alpha, double beta, double vbeta, Py_ssize_t K,
                          int64_t* wt_entries, const int64_t* wt_ptr, int32_t* wt_len, int bits,
                          int32_t* dt, int32_t* dt_pos, double* coef, double* qbuf,
                          double* rden, bitgen_t* gen) noexcept nogil:
    """Documents [d_begin, d_end) with the per-document prior ``alpha`` (D x K)."""
    cdef int64_t d, i
    cdef Py_ssize_t k, kk, j, n_dt, n_wt, pos
    cdef int32_t w
    cdef int32_t* nd
    cdef const double* a
    cdef int64_t* lst
    cdef int64_t e
    cdef int64_t one = (<int64_t> 1) << bits
    cdef int64_t mask = one - 1
    cdef double s, r, q, u, acc, inv
    cdef int64_t fallbacks = 0
    cdef bint found

    for k in range(K):
        rden[k] = 1.0 / (vbeta + nk[k])
    for d in range(d_begin, d_end):
        nd = ndk + d * K
        a = alpha + d * K
        # document start: s_d, r and every coefficient from scratch (alpha_d is new)
        n_dt = 0
        s = 0.0
        r = 0.0
        for k in range(K):
            s += a[k] * beta * rden[k]
            coef[k] = (a[k] + nd[k]) * rden[k]
            if nd[k] > 0:
                dt_pos[k] = <int32_t> n_dt
                dt[n_dt] = <int32_t> k
                n_dt += 1
                r += nd[k] * beta * rden[k]
        for i in range(doc_ptr[d], doc_ptr[d + 1]):
            w = words[i]
            lst = wt_entries + wt_ptr[w]
            k = z[i]

            # remove the token from every count
            inv = rden[k]
            s -= a[k] * beta * inv
            r -= nd[k] * beta * inv
            _decrement_at(lst, &wt_len[w], _find_topic(lst, wt_len[w], k, mask), one)
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
            _increment_at(lst, &wt_len[w], pos, k, one)
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
    return fallbacks


def sparse_sweep(const int64_t[::1] doc_ptr,       # IN  (D + 1) token offsets
                 const int32_t[::1] words,         # IN  (N) word ids, canonical order
                 int32_t[::1] z,                   # IN/OUT (N)
                 int32_t[:, ::1] ndk,              # IN/OUT (D, K)
                 int32_t[:, ::1] nkw,              # IN/OUT (V, K) word-major
                 int64_t[::1] nk,                  # IN/OUT (K)
                 const double[:, ::1] alpha,       # IN  (D, K) alpha_d = exp(x_d^T nu)
                 double beta,
                 const int64_t[::1] chunk_bounds,  # IN  (C + 1) document boundaries of chunks
                 list streams,                     # IN  C bit generators, one per chunk
                 const int64_t[::1] wt_ptr,        # IN  (V + 1) pool offsets
                 int64_t[::1] wt_entries,          # IN/OUT pool of (n_kw << bits) | k, built
                 int32_t[::1] wt_len,              # IN/OUT (V)    from nkw by the caller
                 int bits,
                 int threads):
    """One SparseLDA iteration with a prior per document over every chunk (one chunk: the
    exact sequential sampler); returns the number of rounding fallbacks. The lists must match
    ``nkw`` on entry and do on return (``nkw`` is refreshed from them)."""
    cdef Py_ssize_t C = chunk_bounds.shape[0] - 1
    cdef Py_ssize_t D = ndk.shape[0], K = ndk.shape[1], V = nkw.shape[0]
    cdef Py_ssize_t N = words.shape[0]
    cdef Py_ssize_t pool = wt_entries.shape[0]
    cdef double vbeta = V * beta
    cdef int64_t fallbacks = 0
    cdef Py_ssize_t c, i, k, p, P, j, w2
    cdef int32_t w, k_old, k_new, cnt
    cdef int64_t e
    cdef int64_t mask = ((<int64_t> 1) << bits) - 1
    cdef bitgen_t** gens
    cdef int64_t* l_nk
    cdef int64_t* l_wt
    cdef int32_t* l_wt_len
    cdef int32_t* dt
    cdef int32_t* dt_pos
    cdef double* coef
    cdef double* qbuf
    cdef double* rden
    cdef int64_t* nk_delta
    cdef int32_t* z_old = NULL

    if alpha.shape[0] != D or alpha.shape[1] != K:
        raise ValueError(f"alpha must be (D, K) = ({D}, {K}); got ({alpha.shape[0]}, "
                         f"{alpha.shape[1]})")
    if len(streams) != C:
        raise ValueError(f"{C} chunks need {C} streams, got {len(streams)}")
    if threads < 1:
        threads = 1
    if threads > C:
        threads = <int> C
    gens = <bitgen_t**> malloc(C * sizeof(bitgen_t*))
    for c in range(C):
        gens[c] = bitgen_of(streams[c])

    if C > 1:
        z_old = <int32_t*> malloc(N * sizeof(int32_t))
        memcpy(z_old, &z[0], N * sizeof(int32_t))
    with nogil, parallel(num_threads=threads):
        l_nk = <int64_t*> malloc(K * sizeof(int64_t))
        l_wt = <int64_t*> malloc(((pool if pool > 0 else 1) if C > 1 else 1) * sizeof(int64_t))
        l_wt_len = <int32_t*> malloc((V if C > 1 else 1) * sizeof(int32_t))
        dt = <int32_t*> malloc(K * sizeof(int32_t))
        dt_pos = <int32_t*> malloc(K * sizeof(int32_t))
        coef = <double*> malloc(K * sizeof(double))
        qbuf = <double*> malloc(K * sizeof(double))
        rden = <double*> malloc(K * sizeof(double))
        for c in prange(C, schedule="dynamic", chunksize=1):
            if C == 1:
                # the exact sequential sampler works on the shared counts and lists
                fallbacks += _sweep_chunk(
                    chunk_bounds[c], chunk_bounds[c + 1], &doc_ptr[0], &words[0], &z[0],
                    &ndk[0, 0], &nk[0], &alpha[0, 0], beta, vbeta, K, &wt_entries[0],
                    &wt_ptr[0], &wt_len[0], bits, dt, dt_pos, coef, qbuf, rden, gens[c])
            else:
                memcpy(l_nk, &nk[0], K * sizeof(int64_t))
                memcpy(l_wt, &wt_entries[0], pool * sizeof(int64_t))
                memcpy(l_wt_len, &wt_len[0], V * sizeof(int32_t))
                fallbacks += _sweep_chunk(
                    chunk_bounds[c], chunk_bounds[c + 1], &doc_ptr[0], &words[0], &z[0],
                    &ndk[0, 0], l_nk, &alpha[0, 0], beta, vbeta, K, l_wt, &wt_ptr[0], l_wt_len,
                    bits, dt, dt_pos, coef, qbuf, rden, gens[c])
        free(l_nk); free(l_wt); free(l_wt_len)
        free(dt); free(dt_pos); free(coef); free(qbuf); free(rden)
    free(gens)

    if C == 1:
        # dense counts from the lists
        with nogil:
            for i in range(V * K):
                (&nkw[0, 0])[i] = 0
            for w2 in range(V):
                for j in range(wt_len[w2]):
                    e = wt_entries[wt_ptr[w2] + j]
                    nkw[w2, e & mask] = <int32_t> (e >> bits)
        return fallbacks

    # AD-LDA merge (§2.4): replay every changed token on the global counts, words split
    # between workers by w mod P; a function of the counts only.
    P = threads
    nk_delta = <int64_t*> malloc(P * K * sizeof(int64_t))
    with nogil:
        for i in range(P * K):
            nk_delta[i] = 0
        for p in prange(P, schedule="static", chunksize=1, num_threads=threads):
            for i in range(N):
                w = words[i]
                if w % P != p:
                    continue
                k_old = z_old[i]
                k_new = z[i]
                if k_old == k_new:
                    continue
                cnt = nkw[w, k_old]
                nkw[w, k_old] = cnt - 1
                nk_delta[p * K + k_old] -= 1
                cnt = nkw[w, k_new]
                nkw[w, k_new] = cnt + 1
                nk_delta[p * K + k_new] += 1
        for p in range(P):
            for k in range(K):
                nk[k] += nk_delta[p * K + k]
    free(nk_delta)
    free(z_old)
    return fallbacks


cdef inline (double, double) _polya_terms(double a, int32_t n) noexcept nogil:
    """(lnG(a + n) - lnG(a), psi(a + n) - psi(a)) for a count n >= 0: as sums of ln(a + j)
    and 1/(a + j) over j < n for small n (no cancellation, no special function), else from
    lnGamma and psi. (A returned pair, not pointers: variables a prange body assigns through
    pointers would be shared between threads.)"""
    cdef int32_t j
    cdef double s = 0.0, t = 0.0
    if n <= 16:
        for j in range(n):
            s = s + log(a + j)
            t = t + 1.0 / (a + j)
        return s, t
    return lngamma(a + n) - lngamma(a), digamma(a + n) - digamma(a)


def polya_terms(const double[:, ::1] eta,      # IN  (D, K) x_d^T nu_k
                const int32_t[:, ::1] ndk,     # IN  (D, K) topic counts
                const int64_t[::1] lengths,    # IN  (D) N_d
                double[::1] value,             # OUT (D) ln p(z_d | nu)
                object g,                      # OUT (D, K) g_dk, or None
                int threads):
    """The Polya log likelihood of every document and the gradient factors of §9.1:

    ln p(z_d | nu) = lnG(alpha_d.) - lnG(alpha_d. + N_d)
                     + sum_k [lnG(alpha_dk + n_dk) - lnG(alpha_dk)]
    g_dk = alpha_dk [psi(alpha_d.) - psi(alpha_d. + N_d) + psi(alpha_dk + n_dk) - psi(alpha_dk)]

    with alpha_dk = exp(eta_dk) (eta clipped to [-300, 300] by the caller). Documents are
    independent, so OpenMP over documents changes no number. Equivalent to
    ``tests/reference/dmr.py::log_likelihood`` / ``gradient`` (per document).
    """
    cdef Py_ssize_t D = eta.shape[0], K = eta.shape[1], d, k
    cdef double[:, ::1] g_v
    cdef double* g_ptr = NULL
    cdef double total, v, lg, dg, c, a
    if ndk.shape[0] != D or ndk.shape[1] != K or lengths.shape[0] != D or value.shape[0] != D:
        raise ValueError("eta, ndk, lengths and value disagree on D or K")
    if g is not None:
        g_v = g
        if g_v.shape[0] != D or g_v.shape[1] != K:
            raise ValueError("g must be (D, K)")
        if D > 0 and K > 0:
            g_ptr = &g_v[0, 0]
    if threads < 1:
        threads = 1
    with nogil:
        for d in prange(D, schedule="static", num_threads=threads):
            total = 0.0
            for k in range(K):
                total = total + exp(eta[d, k])
            v = lngamma(total) - lngamma(total + lengths[d])
            c = digamma(total) - digamma(total + lengths[d])
            for k in range(K):
                a = exp(eta[d, k])
                lg, dg = _polya_terms(a, ndk[d, k])
                v = v + lg
                if g_ptr != NULL:
                    g_ptr[d * K + k] = a * (c + dg)
            value[d] = v
