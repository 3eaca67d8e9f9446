# cython: language_level=3
"""Upward-downward Gibbs sampling of the local variables of deep LDA / the Poisson gamma belief
network (ALGORITHMS.md §8.3, §8.4, §8.11).

Documents are given in representation C (CSR rows of (word, count)); the globals Phi^(1..L)
and r are fixed during a call. The layers are passed flattened:

* ``sizes`` (L + 1,) int64: K_0 = V' (rows of Phi^(1), i.e. the word ids used by ``indices``),
  K_1, ..., K_L;
* ``phi`` float64: Phi^(1), ..., Phi^(L) one after the other, each K_{l-1} x K_l row-major
  (row = lower unit v, column = topic k; columns on the simplex);
* ``theta`` (J, K_1 + ... + K_L): the gamma units theta_j^(1..L) of each document, layer after
  layer; ``c`` (J, L): c_j^(2), ..., c_j^(L+1) (p_j^(2) lives in c_j^(2) = (1 - p)/p);
* statistics (OUT, int64, caller-zeroed): X^(1), ..., X^(L) in the layout of ``phi`` followed
  by the top counts X^(L+1) (K_L).

One iteration of one document (§8.4), in the order in which it draws from its chunk's stream:
U1 for every CSR entry (v, x): cumulative weights phi_vk theta_k (ascending k) and x categorical
draws (one uniform each, smallest k with u * total < cum_k); U2 for l = 2..L and every lower unit
v with m_v > 0 (ascending v): the same cumulative weights, whose total is a_v, a CRT(m_v, a_v)
draw (one uniform per customer; the first always opens a table, even when a_v underflowed to
0, so that 1 <= x_v <= m_v holds) and the partition of its tables;
U3 (collected iterations only, since nothing else uses x^(L+1)): CRT(m_k^(L), r_k) for every k
with m_k > 0; then, when p/c sampling is on, D1 random_beta(a0 + N_j, b0 + s_j) clamped to
[1e-15, 1 - 1e-15], D2 random_standard_gamma for c^(3..L+1); D3 q by log1p; D4 theta^(L..1)
by random_standard_gamma(shape) / rate, ascending k. Every gamma draw below 1e-300 (or NaN) is
set to 1e-300 and counted; a partition whose total weight is 0 or not finite draws uniform topics
(k = min(floor(u K), K - 1)) and is counted. Sums run sequentially in ascending index order.

Streams: one numpy bit generator per chunk of consecutive documents (never per thread); a thread
processes whole chunks, statistics go to thread-private integer buffers that are summed
afterwards, so 1 thread and N threads give identical results. The whole loop runs without the
GIL; OpenMP ``prange`` over chunks, taken largest first (:func:`chunk_order`).

Equivalent to ``tests/reference/dlda.py`` (``local_chains``, ``gibbs_upward``,
``gibbs_downward``).
"""
cimport cython
from cython.parallel cimport parallel, prange, threadid
from libc.math cimport INFINITY, log1p
from libc.stdint cimport int32_t, int64_t
from libc.stdlib cimport free, malloc

from numpy.random cimport bitgen_t
from numpy.random.c_distributions cimport random_beta, random_standard_gamma

from topictk._cy.rng cimport bitgen_of, next_uniform, search_cumulative, uniform_topic

import numpy as np

cdef double FLOOR = 1e-300
cdef double P_LOW = 1e-15


cdef struct Net:
    # the fixed globals and sizes of one call
    int L
    const int64_t* K          # (L + 1)
    const int64_t* phi_off    # (L + 1) offset of Phi^(l) at index l - 1; [L] = total size
    const int64_t* th_off     # (L + 1) offset of theta^(l) in a row at index l - 1; [L] = width
    const double* phi
    const double* phiT        # Phi^(2..L) transposed (K_l x K_{l-1}), at phi_off - phi_off[1]
    const double* r
    double r_sum
    double a0, b0, e0, f0


cdef inline bint _cumulate(const double* phi_row, const double* theta, Py_ssize_t K,
                           double* cum) noexcept nogil:
    """cum[k] = sum_{j <= k} phi_row[j] theta[j]; True when the total is positive and finite."""
    cdef double s = 0.0
    cdef Py_ssize_t k
    for k in range(K):
        s = s + phi_row[k] * theta[k]
        cum[k] = s
    return s > 0.0 and s < INFINITY


cdef inline void _cumulate2(const double* row_a, const double* row_b, const double* theta,
                            Py_ssize_t K, double* cum_a, double* cum_b, bint* valid_a,
                            bint* valid_b) noexcept nogil:
    """:func:`_cumulate` of two rows at once: the same sums in the same order, but two
    independent addition chains, so the CPU overlaps their latencies."""
    cdef double sa = 0.0, sb = 0.0, t
    cdef Py_ssize_t k
    for k in range(K):
        t = theta[k]
        sa = sa + row_a[k] * t
        cum_a[k] = sa
        sb = sb + row_b[k] * t
        cum_b[k] = sb
    valid_a[0] = sa > 0.0 and sa < INFINITY
    valid_b[0] = sb > 0.0 and sb < INFINITY


cdef inline void _partition(int64_t x, const double* cum, Py_ssize_t K, bint valid,
                            int64_t* m_out, int64_t* stat_row, bitgen_t* gen) noexcept nogil:
    """x categorical draws over K topics; adds them to m_out (and stat_row unless NULL)."""
    cdef int64_t i
    cdef Py_ssize_t k
    cdef double total = cum[K - 1]
    for i in range(x):
        if valid:
            k = search_cumulative(cum, K, next_uniform(gen) * total)
        else:
            k = uniform_topic(gen, <int> K)
        m_out[k] += 1
        if stat_row != NULL:
            stat_row[k] += 1


cdef inline int64_t _crt(int64_t m, double a, bitgen_t* gen) noexcept nogil:
    """CRT(m, a): customer i (1-based) opens a table iff u < a / (a + i - 1); m uniforms."""
    cdef int64_t i, n = 0
    if m <= 0:
        return 0
    next_uniform(gen)       # the first customer always opens a table
    n = 1
    for i in range(1, m):
        if next_uniform(gen) < a / (a + <double> i):
            n += 1
    return n


cdef inline double _sum(const double* x, Py_ssize_t n) noexcept nogil:
    cdef double s = 0.0
    cdef Py_ssize_t i
    for i in range(n):
        s = s + x[i]
    return s


cdef int64_t _upward(const Net* net, const int32_t* idx, const int32_t* cnt, int64_t n_entries,
                     const double* theta, int64_t* m, int64_t* stats, bint top, double* cum,
                     bitgen_t* gen) noexcept nogil:
    """U1-U3 for one document: m (sum K_l) gets m^(1..L); stats (NULL: not collected) gets
    X^(1..L) and, when ``top``, X^(L+1); ``cum`` is a work buffer of 2 max K_l doubles.
    Returns the number of uniform fallbacks."""
    cdef int L = net.L
    cdef int l
    cdef int64_t e, v, x, fallbacks = 0
    cdef Py_ssize_t k, Kl, Kp, i
    cdef bint valid, valid_b
    cdef const double* th
    cdef const double* ph
    cdef int64_t* mp
    cdef int64_t* ml
    for k in range(net.th_off[L]):
        m[k] = 0
    # U1: partition the word counts over the first-layer topics, two entries at a time
    # (their weights are summed together; their draws stay in entry order)
    Kl = net.K[1]
    ml = m
    e = 0
    while e + 1 < n_entries:
        _cumulate2(net.phi + <int64_t> idx[e] * Kl, net.phi + <int64_t> idx[e + 1] * Kl, theta,
                   Kl, cum, cum + Kl, &valid, &valid_b)
        fallbacks += (not valid) + (not valid_b)
        for i in range(2):
            v = idx[e + i]
            _partition(cnt[e + i], cum + i * Kl, Kl, valid if i == 0 else valid_b, ml,
                       (stats + v * Kl) if stats != NULL else NULL, gen)
        e += 2
    if e < n_entries:
        v = idx[e]
        valid = _cumulate(net.phi + v * Kl, theta, Kl, cum)
        if not valid:
            fallbacks += 1
        _partition(cnt[e], cum, Kl, valid, ml, (stats + v * Kl) if stats != NULL else NULL, gen)
    # U2: enlarge (CRT) and partition layer by layer
    for l in range(2, L + 1):
        Kp = net.K[l - 1]
        Kl = net.K[l]
        mp = m + net.th_off[l - 2]
        ml = m + net.th_off[l - 1]
        th = theta + net.th_off[l - 1]
        ph = net.phi + net.phi_off[l - 1]
        for v in range(Kp):
            if mp[v] > 0:
                valid = _cumulate(ph + v * Kl, th, Kl, cum)
                x = _crt(mp[v], cum[Kl - 1], gen)
                if not valid:
                    fallbacks += 1
                _partition(x, cum, Kl, valid, ml,
                           (stats + net.phi_off[l - 1] + v * Kl) if stats != NULL else NULL, gen)
    # U3: top-layer tables
    if top and stats != NULL:
        Kl = net.K[L]
        ml = m + net.th_off[L - 1]
        for k in range(Kl):
            if ml[k] > 0:
                stats[net.phi_off[L] + k] += _crt(ml[k], net.r[k], gen)
    return fallbacks


cdef inline double _q_top(const Net* net, const double* c, double* q) noexcept nogil:
    """D3: q^(1) = 1, q^(l+1) = log1p(q^(l) / c^(l+1)); q[l] holds q^(l); returns q^(L+1)."""
    cdef int l
    q[1] = 1.0
    for l in range(1, net.L + 1):
        q[l + 1] = log1p(q[l] / c[l - 1])
    return q[net.L + 1]


cdef int64_t _downward(const Net* net, double* theta, double* c, const int64_t* m, int64_t N,
                       bint pc, double* q, double* shp, bitgen_t* gen) noexcept nogil:
    """D1-D4 for one document; returns the number of gamma draws floored at 1e-300.
    ``q`` (L + 2, thread-private) receives q^(1..L+1) (q[L + 1] = q^(L+1)); ``shp`` is a work
    buffer of max K_l doubles."""
    cdef int L = net.L
    cdef int l
    cdef int64_t floored = 0
    cdef Py_ssize_t k, j, Kl, Ku
    cdef double s, p, shape, rate, g, tj
    cdef double* th
    cdef const double* thu
    cdef const double* row
    cdef const int64_t* ml
    if pc:
        # D1: p^(2) with theta^(1) integrated out
        if L >= 2:
            s = _sum(theta + net.th_off[1], net.K[2])
        else:
            s = net.r_sum
        p = random_beta(gen, net.a0 + <double> N, net.b0 + s)
        if p < P_LOW:
            p = P_LOW
        elif p > 1.0 - P_LOW:
            p = 1.0 - P_LOW
        c[0] = (1.0 - p) / p
        # D2: c^(3..L+1)
        for l in range(3, L + 2):
            if l <= L:
                shape = net.e0 + _sum(theta + net.th_off[l - 1], net.K[l])
            else:
                shape = net.e0 + net.r_sum
            rate = net.f0 + _sum(theta + net.th_off[l - 2], net.K[l - 1])
            g = random_standard_gamma(gen, shape) / rate
            if not (g >= FLOOR):
                g = FLOOR
                floored += 1
            c[l - 2] = g
    # D3
    _q_top(net, c, q)
    # D4: top-down
    for l in range(L, 0, -1):
        Kl = net.K[l]
        th = theta + net.th_off[l - 1]
        ml = m + net.th_off[l - 1]
        rate = c[l - 1] + q[l]
        if l == L:
            for k in range(Kl):
                shp[k] = net.r[k]
        else:
            # (Phi^(l+1) theta^(l+1))_k summed over ascending j for every k; the transposed
            # copy makes the k loop contiguous (independent sums, same order per k)
            Ku = net.K[l + 1]
            thu = theta + net.th_off[l]
            for k in range(Kl):
                shp[k] = 0.0
            for j in range(Ku):
                tj = thu[j]
                row = net.phiT + (net.phi_off[l] - net.phi_off[1]) + j * Kl
                for k in range(Kl):
                    shp[k] = shp[k] + row[k] * tj
        for k in range(Kl):
            shape = shp[k] + <double> ml[k]
            g = random_standard_gamma(gen, shape) / rate
            if not (g >= FLOOR):
                g = FLOOR
                floored += 1
            th[k] = g
    return floored


cdef void _accumulate(const Net* net, const double* theta, const int64_t* held_ptr,
                      const int32_t* held_idx, int64_t j, double* racc,
                      double* tacc) noexcept nogil:
    """Racc_vj += (Phi^(1) theta_j^(1))_v for the held-out entries of document j;
    Tacc_j += theta_.j^(1) (§8.11)."""
    cdef Py_ssize_t K1 = net.K[1], k
    cdef int64_t e
    cdef double s
    cdef const double* row
    for e in range(held_ptr[j], held_ptr[j + 1]):
        row = net.phi + <int64_t> held_idx[e] * K1
        s = 0.0
        for k in range(K1):
            s = s + row[k] * theta[k]
        racc[e] += s
    tacc[j] += _sum(theta, K1)


cdef object _net(Net* net, const double[::1] phi, const int64_t[::1] sizes,
                 const double[::1] r, const double[::1] hyper, int64_t* phi_off,
                 int64_t* th_off, double** phiT):
    """Fill ``net`` (offsets in caller-owned arrays of length L + 1) and check the sizes;
    ``phiT`` receives a malloc'ed transposed copy of Phi^(2..L) (the caller frees it)."""
    cdef int L = sizes.shape[0] - 1
    cdef int l
    cdef int64_t v, k, base
    if L < 1:
        raise ValueError("sizes must hold V' and at least one layer width")
    phi_off[0] = 0
    th_off[0] = 0
    for l in range(1, L + 1):
        if sizes[l] < 1 or sizes[l - 1] < 1:
            raise ValueError("layer widths must be >= 1")
        phi_off[l] = phi_off[l - 1] + sizes[l - 1] * sizes[l]
        th_off[l] = th_off[l - 1] + sizes[l]
    if phi.shape[0] != phi_off[L]:
        raise ValueError(f"phi has {phi.shape[0]} entries, the sizes need {phi_off[L]}")
    if r.shape[0] != sizes[L]:
        raise ValueError("r must have K_L entries")
    phiT[0] = <double*> malloc((phi_off[L] - phi_off[1] + 1) * sizeof(double))
    for l in range(2, L + 1):
        base = phi_off[l - 1]
        for v in range(sizes[l - 1]):
            for k in range(sizes[l]):
                phiT[0][base - phi_off[1] + k * sizes[l - 1] + v] = phi[base + v * sizes[l] + k]
    net.L = L
    net.K = &sizes[0]
    net.phi_off = phi_off
    net.th_off = th_off
    net.phi = &phi[0]
    net.phiT = phiT[0]
    net.r = &r[0]
    net.r_sum = 0.0
    for l in range(sizes[L]):
        net.r_sum = net.r_sum + r[l]
    if hyper is not None:
        if hyper.shape[0] != 4:
            raise ValueError("hyper must be (a0, b0, e0, f0)")
        net.a0, net.b0, net.e0, net.f0 = hyper[0], hyper[1], hyper[2], hyper[3]
    return None


def chunk_order(const int64_t[::1] chunk_bounds, const int64_t[::1] indptr,
                const int64_t[::1] sizes):
    """Chunks by estimated cost, largest first (int64): threads take chunks in this order, so
    the long ones do not end up last. The cost model is rough (U1 ~ nnz K_1, D4 ~ per
    document); since streams belong to chunks, the order never changes a number."""
    bounds = np.asarray(chunk_bounds)
    sz = np.asarray(sizes)
    per_doc = float(np.sum(sz[1:-1] * sz[2:]) + 50 * np.sum(sz[1:]))
    if indptr.shape[0] > 0:
        nnz = np.asarray(indptr)[bounds[1:]] - np.asarray(indptr)[bounds[:-1]]
    else:
        nnz = np.zeros(bounds.size - 1, dtype=np.int64)
    cost = nnz * float(sz[1]) + np.diff(bounds) * per_doc
    return np.ascontiguousarray(np.argsort(-cost, kind="stable"), dtype=np.int64)


cdef bitgen_t** _generators(list streams, Py_ssize_t C) except NULL:
    cdef bitgen_t** gens
    cdef Py_ssize_t i
    if len(streams) != C:
        raise ValueError(f"{C} chunks need {C} streams, got {len(streams)}")
    gens = <bitgen_t**> malloc((C if C > 0 else 1) * sizeof(bitgen_t*))
    for i in range(C):
        gens[i] = bitgen_of(streams[i])
    return gens


cdef inline int _threads(int threads, Py_ssize_t C) noexcept:
    cdef int T = threads if threads >= 1 else 1
    if T > C:
        T = <int> C if C > 0 else 1
    return T


def local_chains(const int64_t[::1] indptr,        # IN  (J + 1) CSR rows of the documents
                 const int32_t[::1] indices,       # IN  (M) word ids < sizes[0]
                 const int32_t[::1] counts,        # IN  (M) counts >= 1
                 const double[::1] phi,            # IN  Phi^(1..L) flattened (see module doc)
                 const int64_t[::1] sizes,         # IN  (L + 1) V', K_1..K_L
                 const double[::1] r,              # IN  (K_L)
                 const double[::1] hyper,          # IN  (4) a0, b0, e0, f0
                 double[:, ::1] theta,             # INOUT (J, sum K_l)
                 double[:, ::1] c,                 # INOUT (J, L) c^(2..L+1)
                 int n_iter, int n_burn, int pc_start,
                 int64_t[::1] stats,               # OUT (size of phi + K_L), zeroed; or empty
                 double[::1] qsum,                 # OUT (J) sum of q^(L+1), zeroed; or empty
                 const int64_t[::1] held_indptr,   # IN  (J + 1) held-out CSR rows; or empty
                 const int32_t[::1] held_indices,  # IN  held-out word ids < sizes[0]
                 double[::1] racc,                 # OUT (held nnz) rate sums; or empty
                 double[::1] tacc,                 # OUT (J) theta^(1) total sums; or empty
                 int acc_burn, int acc_thin,
                 const int64_t[::1] chunk_bounds,  # IN  (C + 1) document boundaries of chunks
                 list streams,                     # IN  C bit generators
                 int threads):
    """Run ``n_iter`` upward-downward iterations (§8.4) of every document's chain.

    Iterations are 1-based below. p/c sampling (D1, D2) is on from iteration ``pc_start``.
    Statistics X and the q^(L+1) sums are added in iterations > ``n_burn`` (when ``stats`` /
    ``qsum`` are not empty); the held-out rate sums of §8.11 after iterations i > ``acc_burn``
    with (i - acc_burn) divisible by ``acc_thin`` (when ``racc`` is not empty).
    Returns (uniform fallbacks, floored gamma draws).
    """
    cdef Py_ssize_t J = indptr.shape[0] - 1, C = chunk_bounds.shape[0] - 1
    cdef int L = sizes.shape[0] - 1
    cdef Net net
    cdef int64_t* phi_off = <int64_t*> malloc((L + 1) * sizeof(int64_t))
    cdef int64_t* th_off = <int64_t*> malloc((L + 1) * sizeof(int64_t))
    cdef double* phiT = NULL
    cdef int64_t S = 0, i, max_K = 1
    cdef int T, t, it, l
    cdef Py_ssize_t ch, j
    cdef bint collect, do_acc, use_stats, use_q, use_acc
    cdef bitgen_t** gens = NULL
    cdef const int64_t[::1] order
    cdef Py_ssize_t i_ch
    cdef int64_t* buffers = NULL
    cdef int64_t* chunk_fb = NULL
    cdef int64_t* chunk_fl = NULL
    cdef int64_t* acc
    cdef int64_t* m
    cdef double* cum
    cdef double* q
    cdef int64_t N, fallbacks = 0, floored = 0
    cdef int32_t empty_i = 0
    cdef int64_t empty_l = 0
    cdef double empty_d = 0.0
    cdef const int32_t* idx_p = &empty_i
    cdef const int32_t* cnt_p = &empty_i
    cdef const int64_t* hptr_p = &empty_l
    cdef const int32_t* hidx_p = &empty_i
    cdef double* racc_p = &empty_d
    cdef double* tacc_p = &empty_d
    try:
        _net(&net, phi, sizes, r, hyper, phi_off, th_off, &phiT)
        if theta.shape[0] != J or theta.shape[1] != th_off[L] or c.shape[0] != J \
                or c.shape[1] != L:
            raise ValueError("theta must be (J, sum K_l) and c (J, L)")
        use_stats = stats.shape[0] > 0
        if use_stats:
            S = phi_off[L] + sizes[L]
            if stats.shape[0] != S:
                raise ValueError(f"stats must have {S} entries")
        use_q = qsum.shape[0] > 0
        if use_q and qsum.shape[0] != J:
            raise ValueError("qsum must have J entries")
        use_acc = racc.shape[0] > 0 or held_indptr.shape[0] > 0
        if use_acc:
            if held_indptr.shape[0] != J + 1 or tacc.shape[0] != J \
                    or racc.shape[0] != held_indices.shape[0]:
                raise ValueError("held-out accumulators do not match the documents")
            if acc_thin < 1:
                raise ValueError("acc_thin must be >= 1")
        if indices.shape[0] != counts.shape[0] or indptr[J] != indices.shape[0]:
            raise ValueError("indices and counts do not match indptr")
        for l in range(1, L + 1):
            if sizes[l] > max_K:
                max_K = sizes[l]
        if indices.shape[0] > 0:
            idx_p = &indices[0]
            cnt_p = &counts[0]
        if use_acc:
            hptr_p = &held_indptr[0]
            tacc_p = &tacc[0]
            if held_indices.shape[0] > 0:
                hidx_p = &held_indices[0]
                racc_p = &racc[0]
        gens = _generators(streams, C)
        order = chunk_order(chunk_bounds, indptr, sizes)
        T = _threads(threads, C)
        buffers = <int64_t*> malloc(((T - 1) * S + 1) * sizeof(int64_t))
        chunk_fb = <int64_t*> malloc((C + 1) * sizeof(int64_t))
        chunk_fl = <int64_t*> malloc((C + 1) * sizeof(int64_t))
        with nogil:
            for i in range((T - 1) * S):
                buffers[i] = 0
            for ch in range(C):
                chunk_fb[ch] = 0
                chunk_fl[ch] = 0
            with parallel(num_threads=T):
                t = threadid()
                if not use_stats:
                    acc = NULL
                elif t == 0:
                    acc = &stats[0]
                else:
                    acc = buffers + (t - 1) * S
                m = <int64_t*> malloc((th_off[L] + 1) * sizeof(int64_t))
                cum = <double*> malloc(2 * max_K * sizeof(double))
                q = <double*> malloc((L + 2) * sizeof(double))
                for i_ch in prange(C, schedule="dynamic", chunksize=1):
                    ch = order[i_ch]
                    for j in range(chunk_bounds[ch], chunk_bounds[ch + 1]):
                        N = 0
                        for i in range(indptr[j], indptr[j + 1]):
                            N = N + counts[i]
                        for it in range(1, n_iter + 1):
                            collect = it > n_burn
                            chunk_fb[ch] += _upward(
                                &net, idx_p + indptr[j], cnt_p + indptr[j],
                                indptr[j + 1] - indptr[j], &theta[j, 0], m,
                                acc if collect else NULL, collect, cum, gens[ch])
                            chunk_fl[ch] += _downward(&net, &theta[j, 0], &c[j, 0], m, N,
                                                      it >= pc_start, q, cum, gens[ch])
                            if collect and use_q:
                                qsum[j] += q[L + 1]
                            do_acc = use_acc and it > acc_burn \
                                and (it - acc_burn) % acc_thin == 0
                            if do_acc:
                                _accumulate(&net, &theta[j, 0], hptr_p, hidx_p, j, racc_p,
                                            tacc_p)
                free(m)
                free(cum)
                free(q)
            for t in range(T - 1):
                for i in range(S):
                    stats[i] += buffers[t * S + i]
            for ch in range(C):
                fallbacks += chunk_fb[ch]
                floored += chunk_fl[ch]
    finally:
        free(phi_off)
        free(th_off)
        free(phiT)
        free(gens)
        free(buffers)
        free(chunk_fb)
        free(chunk_fl)
    return int(fallbacks), int(floored)


def gibbs_upward(const int64_t[::1] indptr,        # IN  (J + 1) CSR rows of the corpus
                 const int32_t[::1] indices,       # IN  word ids < sizes[0]
                 const int32_t[::1] counts,        # IN  counts
                 const double[::1] phi,            # IN  Phi^(1..L) flattened
                 const int64_t[::1] sizes,         # IN  (L + 1)
                 const double[::1] r,              # IN  (K_L)
                 const double[:, ::1] theta,       # IN  (J, sum K_l)
                 const double[:, ::1] c,           # IN  (J, L)
                 int32_t[:, ::1] doc_m,            # OUT (J, sum K_l) m^(1..L) per document
                 int64_t[::1] stats,               # OUT (size of phi + K_L), zeroed
                 double[::1] qcur,                 # OUT (J) q^(L+1) of the current c
                 const int64_t[::1] chunk_bounds,  # IN  (C + 1)
                 list streams,                     # IN  C bit generators
                 int threads):
    """Batch Gibbs (§8.5), first half: U1-U3 of every document with statistics collected, the
    counts m kept for :func:`gibbs_downward`; q^(L+1) from the current c (D3 formula).
    Returns the number of uniform fallbacks."""
    cdef Py_ssize_t J = indptr.shape[0] - 1, C = chunk_bounds.shape[0] - 1
    cdef int L = sizes.shape[0] - 1
    cdef Net net
    cdef int64_t* phi_off = <int64_t*> malloc((L + 1) * sizeof(int64_t))
    cdef int64_t* th_off = <int64_t*> malloc((L + 1) * sizeof(int64_t))
    cdef double* phiT = NULL
    cdef int64_t S = 0, i, max_K = 1, W
    cdef int T, t, l
    cdef Py_ssize_t ch, j
    cdef bitgen_t** gens = NULL
    cdef const int64_t[::1] order
    cdef Py_ssize_t i_ch
    cdef int64_t* buffers = NULL
    cdef int64_t* chunk_fb = NULL
    cdef int64_t* acc
    cdef int64_t* m
    cdef double* cum
    cdef double* q
    cdef int64_t fallbacks = 0
    cdef int32_t empty_i = 0
    cdef const int32_t* idx_p = &empty_i
    cdef const int32_t* cnt_p = &empty_i
    try:
        _net(&net, phi, sizes, r, None, phi_off, th_off, &phiT)
        W = th_off[L]
        S = phi_off[L] + sizes[L]
        if theta.shape[0] != J or theta.shape[1] != W or c.shape[0] != J or c.shape[1] != L \
                or doc_m.shape[0] != J or doc_m.shape[1] != W:
            raise ValueError("theta, doc_m must be (J, sum K_l) and c (J, L)")
        if stats.shape[0] != S or qcur.shape[0] != J:
            raise ValueError(f"stats must have {S} entries and qcur J")
        if indices.shape[0] != counts.shape[0] or indptr[J] != indices.shape[0]:
            raise ValueError("indices and counts do not match indptr")
        for l in range(1, L + 1):
            if sizes[l] > max_K:
                max_K = sizes[l]
        if indices.shape[0] > 0:
            idx_p = &indices[0]
            cnt_p = &counts[0]
        gens = _generators(streams, C)
        order = chunk_order(chunk_bounds, indptr, sizes)
        T = _threads(threads, C)
        buffers = <int64_t*> malloc(((T - 1) * S + 1) * sizeof(int64_t))
        chunk_fb = <int64_t*> malloc((C + 1) * sizeof(int64_t))
        with nogil:
            for i in range((T - 1) * S):
                buffers[i] = 0
            for ch in range(C):
                chunk_fb[ch] = 0
            with parallel(num_threads=T):
                t = threadid()
                acc = &stats[0] if t == 0 else buffers + (t - 1) * S
                m = <int64_t*> malloc((W + 1) * sizeof(int64_t))
                cum = <double*> malloc(2 * max_K * sizeof(double))
                q = <double*> malloc((L + 2) * sizeof(double))
                for i_ch in prange(C, schedule="dynamic", chunksize=1):
                    ch = order[i_ch]
                    for j in range(chunk_bounds[ch], chunk_bounds[ch + 1]):
                        qcur[j] = _q_top(&net, &c[j, 0], q)
                        chunk_fb[ch] += _upward(
                            &net, idx_p + indptr[j], cnt_p + indptr[j],
                            indptr[j + 1] - indptr[j], &theta[j, 0], m, acc, True, cum,
                            gens[ch])
                        for i in range(W):
                            doc_m[j, i] = <int32_t> m[i]
                free(m)
                free(cum)
                free(q)
            for t in range(T - 1):
                for i in range(S):
                    stats[i] += buffers[t * S + i]
            for ch in range(C):
                fallbacks += chunk_fb[ch]
    finally:
        free(phi_off)
        free(th_off)
        free(phiT)
        free(gens)
        free(buffers)
        free(chunk_fb)
    return int(fallbacks)


def gibbs_downward(const double[::1] phi,            # IN  Phi^(1..L) flattened (new globals)
                   const int64_t[::1] sizes,         # IN  (L + 1)
                   const double[::1] r,              # IN  (K_L) (new)
                   const double[::1] hyper,          # IN  (4) a0, b0, e0, f0
                   double[:, ::1] theta,             # INOUT (J, sum K_l)
                   double[:, ::1] c,                 # INOUT (J, L)
                   const int32_t[:, ::1] doc_m,      # IN  (J, sum K_l) from gibbs_upward
                   const int64_t[::1] chunk_bounds,  # IN  (C + 1)
                   list streams,                     # IN  C bit generators
                   int threads):
    """Batch Gibbs (§8.5), second half: D1-D4 of every document with p/c sampling on, using the
    counts m of :func:`gibbs_upward`. Returns the number of floored gamma draws."""
    cdef Py_ssize_t J = theta.shape[0], C = chunk_bounds.shape[0] - 1
    cdef int L = sizes.shape[0] - 1
    cdef Net net
    cdef int64_t* phi_off = <int64_t*> malloc((L + 1) * sizeof(int64_t))
    cdef int64_t* th_off = <int64_t*> malloc((L + 1) * sizeof(int64_t))
    cdef double* phiT = NULL
    cdef int64_t i, W, N, floored = 0
    cdef int T
    cdef Py_ssize_t ch, j
    cdef bitgen_t** gens = NULL
    cdef const int64_t[::1] order
    cdef Py_ssize_t i_ch
    cdef int64_t* chunk_fl = NULL
    cdef int64_t* m
    cdef double* q
    cdef double* shp
    cdef int64_t max_K = 1
    cdef int l
    try:
        _net(&net, phi, sizes, r, hyper, phi_off, th_off, &phiT)
        for l in range(1, L + 1):
            if sizes[l] > max_K:
                max_K = sizes[l]
        W = th_off[L]
        if theta.shape[1] != W or c.shape[0] != J or c.shape[1] != L \
                or doc_m.shape[0] != J or doc_m.shape[1] != W:
            raise ValueError("theta, doc_m must be (J, sum K_l) and c (J, L)")
        gens = _generators(streams, C)
        order = chunk_order(chunk_bounds, np.zeros(0, dtype=np.int64), sizes)
        T = _threads(threads, C)
        chunk_fl = <int64_t*> malloc((C + 1) * sizeof(int64_t))
        with nogil:
            for ch in range(C):
                chunk_fl[ch] = 0
            with parallel(num_threads=T):
                m = <int64_t*> malloc((W + 1) * sizeof(int64_t))
                q = <double*> malloc((L + 2) * sizeof(double))
                shp = <double*> malloc(max_K * sizeof(double))
                for i_ch in prange(C, schedule="dynamic", chunksize=1):
                    ch = order[i_ch]
                    for j in range(chunk_bounds[ch], chunk_bounds[ch + 1]):
                        N = 0
                        for i in range(W):
                            m[i] = doc_m[j, i]
                        for i in range(sizes[1]):
                            N = N + m[i]
                        chunk_fl[ch] += _downward(&net, &theta[j, 0], &c[j, 0], m, N, True, q,
                                                  shp, gens[ch])
                free(m)
                free(q)
                free(shp)
            for ch in range(C):
                floored += chunk_fl[ch]
    finally:
        free(phi_off)
        free(th_off)
        free(phiT)
        free(gens)
        free(chunk_fl)
    return int(floored)
