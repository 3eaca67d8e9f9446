# cython: language_level=3
"""Upward-downward Gibbs sampling of the local variables of deep LDA / the Poisson gamma belief
network (docs/algorithms.md §8.3, §8.4, §8.11).

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

Entry points, one per use of the chains, sharing one document loop: :func:`train_chains` (the
mini-batch local step: statistics X and q sums), :func:`evaluate_chains` (test chains with the
held-out rate sums), :func:`infer_chains` (nothing collected), and the two halves of a batch
Gibbs iteration, :func:`gibbs_upward` and :func:`gibbs_downward`.

Equivalent to ``tests/reference/dlda.py`` (``local_chains``, ``gibbs_upward``,
``gibbs_downward``).
"""
cimport cython
from cython.parallel cimport parallel, prange, threadid
from libc.math cimport INFINITY, log1p
from libc.stdint cimport int32_t, int64_t
from libc.stdlib cimport calloc, free, malloc
from libc.string cimport memset

from numpy.random cimport bitgen_t
from numpy.random.c_distributions cimport random_beta, random_standard_gamma

from topictk._cy.alloc cimport checked_alloc as _alloc
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


cdef void _net_free(Net* net) noexcept:
    free(<void*> net.phi_off)
    free(<void*> net.th_off)
    free(<void*> net.phiT)
    net.phi_off = NULL
    net.th_off = NULL
    net.phiT = NULL


cdef int _net_init(Net* net, const double[::1] phi, const int64_t[::1] sizes,
                   const double[::1] r, const double[::1] hyper) except -1:
    """Fill ``net`` from the flattened globals and check the sizes. Its offsets and the
    transposed copy of Phi^(2..L) are allocated here; :func:`_net_free` frees them, also when
    this raises."""
    cdef int L = sizes.shape[0] - 1
    cdef int l
    cdef int64_t v, k, base
    cdef int64_t* phi_off
    cdef int64_t* th_off
    cdef double* phiT
    net.phi_off = NULL
    net.th_off = NULL
    net.phiT = NULL
    if L < 1:
        raise ValueError("sizes must hold V' and at least one layer width")
    phi_off = <int64_t*> malloc((L + 1) * sizeof(int64_t))
    net.phi_off = phi_off
    th_off = <int64_t*> malloc((L + 1) * sizeof(int64_t))
    net.th_off = th_off
    if phi_off == NULL or th_off == NULL:
        raise MemoryError()
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
    phiT = <double*> malloc((phi_off[L] - phi_off[1] + 1) * sizeof(double))
    net.phiT = phiT
    if phiT == NULL:
        raise MemoryError()
    for l in range(2, L + 1):
        base = phi_off[l - 1]
        for v in range(sizes[l - 1]):
            for k in range(sizes[l]):
                phiT[base - phi_off[1] + k * sizes[l - 1] + v] = phi[base + v * sizes[l] + k]
    net.L = L
    net.K = &sizes[0]
    net.phi = &phi[0]
    net.r = &r[0]
    net.r_sum = 0.0
    for l in range(sizes[L]):
        net.r_sum = net.r_sum + r[l]
    if hyper is not None:
        if hyper.shape[0] != 4:
            raise ValueError("hyper must be (a0, b0, e0, f0)")
        net.a0, net.b0, net.e0, net.f0 = hyper[0], hyper[1], hyper[2], hyper[3]
    return 0


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



cdef inline int _threads(int threads, Py_ssize_t C) noexcept:
    cdef int T = threads if threads >= 1 else 1
    if T > C:
        T = <int> C if C > 0 else 1
    return T


# ---------------------------------------------------------------- one call over all chunks

cdef enum Pass:
    CHAINS = 0                  # n_iter upward-downward iterations of every document
    UPWARD = 1                  # batch Gibbs, first half: U1-U3, the counts m kept
    DOWNWARD = 2                # batch Gibbs, second half: D1-D4 from the kept counts


cdef struct Docs:
    # the documents of one call, what each of their iterations does and what it collects
    Pass kind
    const int64_t* indptr       # (J + 1) CSR rows
    const int32_t* idx          # word ids
    const int32_t* cnt          # counts
    double* theta               # (J, width) theta^(1..L) of every document
    double* c                   # (J, L) c^(2..L+1)
    Py_ssize_t width            # sum K_l
    int n_iter
    int pc_start                # p/c sampled (D1, D2) from this iteration on
    int n_burn                  # statistics and q sums from iteration n_burn + 1 on
    double* qsum                # (J) sum of q^(L+1) over the collected iterations, or NULL
    bint accumulate             # held-out rate sums (§8.11)
    const int64_t* held_ptr     # (J + 1) held-out CSR rows
    const int32_t* held_idx     # held-out word ids
    double* racc                # (held nnz) rate sums
    double* tacc                # (J) theta^(1) total sums
    int acc_burn                # rates after iterations i > acc_burn ...
    int acc_thin                # ... with (i - acc_burn) divisible by acc_thin
    int32_t* doc_m              # (J, width) UPWARD: m of every document (DOWNWARD reads it)
    double* qcur                # (J) UPWARD: q^(L+1) of the current c


cdef struct Pool:
    # what one call allocates: streams, per-thread buffers, counters per chunk
    Py_ssize_t C
    int T                       # threads, at most C
    bitgen_t** gens             # (C) one stream per chunk
    int64_t S                   # size of the statistics (0: none collected)
    int64_t* buffers            # ((T - 1) S) statistics of threads 1..T-1 (thread 0 adds
                                # into the output)
    Py_ssize_t m_len            # width + 1
    int64_t* m                  # (T m_len) counts m^(1..L) of a thread's document
    Py_ssize_t cum_len          # 2 max K_l
    double* cum                 # (T cum_len) cumulative weights, or the shapes of D4
    double* q                   # (T (L + 2)) q^(1..L+1)
    int64_t* chunk_fb           # (C) uniform fallbacks of every chunk
    int64_t* chunk_fl           # (C) floored gamma draws of every chunk


cdef void _pool_free(Pool* p) noexcept:
    free(p.gens)
    free(p.buffers)
    free(p.m)
    free(p.cum)
    free(p.q)
    free(p.chunk_fb)
    free(p.chunk_fl)


cdef int _pool_init(Pool* p, const Net* net, Py_ssize_t C, list streams, int threads,
                    int64_t S) except -1:
    """Streams and buffers of one call (``p`` zeroed by the caller, freed by
    :func:`_pool_free` also when this raises)."""
    cdef Py_ssize_t i
    cdef int l
    cdef int64_t max_K = 1
    if len(streams) != C:
        raise ValueError(f"{C} chunks need {C} streams, got {len(streams)}")
    for l in range(1, net.L + 1):
        if net.K[l] > max_K:
            max_K = net.K[l]
    p.C = C
    p.T = _threads(threads, C)
    p.S = S
    p.gens = <bitgen_t**> _alloc(C, sizeof(bitgen_t*))
    for i in range(C):
        p.gens[i] = bitgen_of(streams[i])
    p.buffers = <int64_t*> _alloc((p.T - 1) * S, sizeof(int64_t), True)
    p.m_len = net.th_off[net.L] + 1
    p.m = <int64_t*> _alloc(p.T * p.m_len, sizeof(int64_t))
    p.cum_len = 2 * max_K
    p.cum = <double*> _alloc(p.T * p.cum_len, sizeof(double))
    p.q = <double*> _alloc(p.T * (net.L + 2), sizeof(double))
    p.chunk_fb = <int64_t*> _alloc(C, sizeof(int64_t), True)
    p.chunk_fl = <int64_t*> _alloc(C, sizeof(int64_t), True)
    return 0


cdef void _chain(const Net* net, const Docs* docs, Py_ssize_t j, int64_t* acc, int64_t* m,
                 double* cum, double* q, bitgen_t* gen, int64_t* fb,
                 int64_t* fl) noexcept nogil:
    """CHAINS: ``n_iter`` upward-downward iterations (§8.4) of document j's chain; statistics
    into ``acc`` (NULL: none) and the q sums after ``n_burn``, the held-out rate sums when
    the call accumulates them."""
    cdef int64_t b = docs.indptr[j], n = docs.indptr[j + 1] - b, N = 0, i
    cdef double* theta = docs.theta + j * docs.width
    cdef double* c = docs.c + j * net.L
    cdef int it
    cdef bint collect
    for i in range(b, b + n):
        N = N + docs.cnt[i]
    for it in range(1, docs.n_iter + 1):
        collect = it > docs.n_burn
        fb[0] += _upward(net, docs.idx + b, docs.cnt + b, n, theta, m,
                         acc if collect else NULL, collect, cum, gen)
        fl[0] += _downward(net, theta, c, m, N, it >= docs.pc_start, q, cum, gen)
        if collect and docs.qsum != NULL:
            docs.qsum[j] += q[net.L + 1]
        if docs.accumulate and it > docs.acc_burn \
                and (it - docs.acc_burn) % docs.acc_thin == 0:
            _accumulate(net, theta, docs.held_ptr, docs.held_idx, j, docs.racc, docs.tacc)


cdef void _document(const Net* net, const Docs* docs, Py_ssize_t j, int64_t* acc, int64_t* m,
                    double* cum, double* q, bitgen_t* gen, int64_t* fb,
                    int64_t* fl) noexcept nogil:
    """Document j of the call's pass."""
    cdef int64_t b = docs.indptr[j] if docs.kind != DOWNWARD else 0, i, N = 0
    cdef Py_ssize_t width = docs.width
    if docs.kind == CHAINS:
        _chain(net, docs, j, acc, m, cum, q, gen, fb, fl)
    elif docs.kind == UPWARD:
        docs.qcur[j] = _q_top(net, docs.c + j * net.L, q)
        fb[0] += _upward(net, docs.idx + b, docs.cnt + b, docs.indptr[j + 1] - b,
                         docs.theta + j * width, m, acc, True, cum, gen)
        for i in range(width):
            docs.doc_m[j * width + i] = <int32_t> m[i]
    else:
        for i in range(width):
            m[i] = docs.doc_m[j * width + i]
        for i in range(net.K[1]):
            N = N + m[i]
        fl[0] += _downward(net, docs.theta + j * width, docs.c + j * net.L, m, N, True, q,
                           cum, gen)


cdef void _run(const Net* net, const Docs* docs, Pool* p, const int64_t* bounds,
               const int64_t* order, int64_t* stats) noexcept nogil:
    """Every chunk, largest first, one thread per chunk; statistics (``stats`` not NULL) into
    thread-private buffers, then summed into ``stats``."""
    cdef int t
    cdef Py_ssize_t i_ch, ch, j
    cdef int64_t i
    cdef int64_t* acc
    with parallel(num_threads=p.T):
        t = threadid()
        if stats == NULL:
            acc = NULL
        elif t == 0:
            acc = stats
        else:
            acc = p.buffers + (t - 1) * p.S
        for i_ch in prange(p.C, schedule="dynamic", chunksize=1):
            ch = order[i_ch]
            for j in range(bounds[ch], bounds[ch + 1]):
                _document(net, docs, j, acc, p.m + t * p.m_len, p.cum + t * p.cum_len,
                          p.q + t * (net.L + 2), p.gens[ch], &p.chunk_fb[ch], &p.chunk_fl[ch])
    if stats != NULL:
        for t in range(p.T - 1):
            for i in range(p.S):
                stats[i] += p.buffers[t * p.S + i]


cdef tuple _call(const Net* net, const Docs* docs, const int64_t[::1] chunk_bounds,
                 const int64_t[::1] order, list streams, int threads, int64_t* stats,
                 int64_t S):
    """Run the pass over every chunk -> (uniform fallbacks, floored gamma draws)."""
    cdef Pool p
    cdef Py_ssize_t C = chunk_bounds.shape[0] - 1, ch
    cdef int64_t fallbacks = 0, floored = 0
    memset(&p, 0, sizeof(Pool))
    try:
        _pool_init(&p, net, C, streams, threads, S)
        with nogil:
            _run(net, docs, &p, &chunk_bounds[0], &order[0] if C > 0 else NULL, stats)
            for ch in range(C):
                fallbacks += p.chunk_fb[ch]
                floored += p.chunk_fl[ch]
    finally:
        _pool_free(&p)
    return int(fallbacks), int(floored)


cdef int _documents(Docs* docs, const Net* net, Pass kind, const int64_t[::1] indptr,
                    const int32_t[::1] indices, const int32_t[::1] counts,
                    const double[:, ::1] theta, const double[:, ::1] c,
                    const int32_t* empty) except -1:
    """Check the documents (CSR rows, theta, c) against the network and point ``docs`` at them;
    nothing is collected until the caller says so. (theta and c change in place in the passes
    whose entry points take them writable; the upward pass only reads them.)"""
    cdef Py_ssize_t J = indptr.shape[0] - 1
    cdef int L = net.L
    memset(docs, 0, sizeof(Docs))
    if theta.shape[0] != J or theta.shape[1] != net.th_off[L] or c.shape[0] != J \
            or c.shape[1] != L:
        raise ValueError("theta must be (J, sum K_l) and c (J, L)")
    if indices.shape[0] != counts.shape[0] or indptr[J] != indices.shape[0]:
        raise ValueError("indices and counts do not match indptr")
    docs.kind = kind
    docs.indptr = &indptr[0]
    docs.idx = &indices[0] if indices.shape[0] > 0 else empty
    docs.cnt = &counts[0] if counts.shape[0] > 0 else empty
    docs.theta = <double*> &theta[0, 0] if J > 0 else NULL
    docs.c = <double*> &c[0, 0] if J > 0 else NULL
    docs.width = net.th_off[L]
    return 0


cdef inline int64_t _n_stats(const Net* net) noexcept:
    """Entries of the statistics: X^(1..L) in the layout of phi, then X^(L+1)."""
    return net.phi_off[net.L] + net.K[net.L]


# ---------------------------------------------------------------- entry points

def train_chains(const int64_t[::1] indptr,        # IN  (J + 1) CSR rows of the documents
                 const int32_t[::1] indices,       # IN  (M) word ids < sizes[0]
                 const int32_t[::1] counts,        # IN  (M) counts >= 1
                 const double[::1] phi,            # IN  Phi^(1..L) flattened (see module doc)
                 const int64_t[::1] sizes,         # IN  (L + 1) V', K_1..K_L
                 const double[::1] r,              # IN  (K_L)
                 const double[::1] hyper,          # IN  (4) a0, b0, e0, f0
                 double[:, ::1] theta,             # INOUT (J, sum K_l)
                 double[:, ::1] c,                 # INOUT (J, L) c^(2..L+1)
                 *,
                 int n_iter, int n_burn, int pc_start,
                 int64_t[::1] stats,               # OUT (size of phi + K_L), zeroed
                 double[::1] qsum,                 # OUT (J) sum of q^(L+1), zeroed
                 const int64_t[::1] chunk_bounds,  # IN  (C + 1) document boundaries of chunks
                 list streams,                     # IN  C bit generators
                 int threads):
    """The local step of the mini-batch algorithms (§8.6): ``n_iter`` upward-downward
    iterations (§8.4) of every document's chain, 1-based; p/c sampling (D1, D2) from iteration
    ``pc_start`` on; the statistics X (U1-U3) and the q^(L+1) sums added in iterations
    > ``n_burn``. Returns (uniform fallbacks, floored gamma draws)."""
    cdef Net net
    cdef Docs docs
    cdef int32_t empty = 0
    cdef Py_ssize_t J = indptr.shape[0] - 1
    try:
        _net_init(&net, phi, sizes, r, hyper)
        _documents(&docs, &net, CHAINS, indptr, indices, counts, theta, c, &empty)
        if stats.shape[0] != _n_stats(&net):
            raise ValueError(f"stats must have {_n_stats(&net)} entries")
        if qsum.shape[0] != J:
            raise ValueError("qsum must have J entries")
        docs.n_iter = n_iter
        docs.n_burn = n_burn
        docs.pc_start = pc_start
        docs.qsum = &qsum[0] if J > 0 else NULL
        return _call(&net, &docs, chunk_bounds, chunk_order(chunk_bounds, indptr, sizes),
                     streams, threads, &stats[0], stats.shape[0])
    finally:
        _net_free(&net)


def evaluate_chains(const int64_t[::1] indptr,        # IN  (J + 1) observed CSR rows
                    const int32_t[::1] indices,       # IN  (M) word ids < sizes[0]
                    const int32_t[::1] counts,        # IN  (M) counts >= 1
                    const double[::1] phi,            # IN  Phi^(1..L) flattened
                    const int64_t[::1] sizes,         # IN  (L + 1) V', K_1..K_L
                    const double[::1] r,              # IN  (K_L)
                    const double[::1] hyper,          # IN  (4) a0, b0, e0, f0
                    double[:, ::1] theta,             # INOUT (J, sum K_l)
                    double[:, ::1] c,                 # INOUT (J, L) c^(2..L+1)
                    *,
                    int n_iter, int pc_start,
                    const int64_t[::1] held_indptr,   # IN  (J + 1) held-out CSR rows
                    const int32_t[::1] held_indices,  # IN  held-out word ids < sizes[0]
                    double[::1] racc,                 # OUT (held nnz) rate sums
                    double[::1] tacc,                 # OUT (J) theta^(1) total sums
                    int acc_burn, int acc_thin,
                    const int64_t[::1] chunk_bounds,  # IN  (C + 1) document boundaries
                    list streams,                     # IN  C bit generators
                    int threads):
    """Test chains with the held-out rate sums of §8.11: ``n_iter`` iterations of every
    document's chain (p/c from iteration ``pc_start`` on), and after every iteration
    i > ``acc_burn`` with (i - acc_burn) divisible by ``acc_thin`` Racc_vj +=
    (Phi^(1) theta_j^(1))_v for the held-out entries and Tacc_j += theta_.j^(1).
    Returns (uniform fallbacks, floored gamma draws)."""
    cdef Net net
    cdef Docs docs
    cdef int32_t empty = 0
    cdef double empty_d = 0.0
    cdef Py_ssize_t J = indptr.shape[0] - 1
    try:
        _net_init(&net, phi, sizes, r, hyper)
        _documents(&docs, &net, CHAINS, indptr, indices, counts, theta, c, &empty)
        if held_indptr.shape[0] != J + 1 or tacc.shape[0] != J \
                or racc.shape[0] != held_indices.shape[0]:
            raise ValueError("held-out accumulators do not match the documents")
        if acc_thin < 1:
            raise ValueError("acc_thin must be >= 1")
        docs.n_iter = n_iter
        docs.n_burn = n_iter
        docs.pc_start = pc_start
        docs.accumulate = True
        docs.held_ptr = &held_indptr[0]
        docs.held_idx = &held_indices[0] if held_indices.shape[0] > 0 else &empty
        docs.racc = &racc[0] if racc.shape[0] > 0 else &empty_d
        docs.tacc = &tacc[0] if J > 0 else &empty_d
        docs.acc_burn = acc_burn
        docs.acc_thin = acc_thin
        return _call(&net, &docs, chunk_bounds, chunk_order(chunk_bounds, indptr, sizes),
                     streams, threads, NULL, 0)
    finally:
        _net_free(&net)


def infer_chains(const int64_t[::1] indptr,        # IN  (J + 1) CSR rows of the documents
                 const int32_t[::1] indices,       # IN  (M) word ids < sizes[0]
                 const int32_t[::1] counts,        # IN  (M) counts >= 1
                 const double[::1] phi,            # IN  Phi^(1..L) flattened
                 const int64_t[::1] sizes,         # IN  (L + 1) V', K_1..K_L
                 const double[::1] r,              # IN  (K_L)
                 const double[::1] hyper,          # IN  (4) a0, b0, e0, f0
                 double[:, ::1] theta,             # INOUT (J, sum K_l)
                 double[:, ::1] c,                 # INOUT (J, L) c^(2..L+1)
                 *,
                 int n_iter, int pc_start,
                 const int64_t[::1] chunk_bounds,  # IN  (C + 1) document boundaries of chunks
                 list streams,                     # IN  C bit generators
                 int threads):
    """``n_iter`` iterations of every document's chain (p/c from iteration ``pc_start`` on),
    nothing collected: theta and c are the result (``topictk infer``; a test chain before its
    rates are accumulated). Returns (uniform fallbacks, floored gamma draws)."""
    cdef Net net
    cdef Docs docs
    cdef int32_t empty = 0
    try:
        _net_init(&net, phi, sizes, r, hyper)
        _documents(&docs, &net, CHAINS, indptr, indices, counts, theta, c, &empty)
        docs.n_iter = n_iter
        docs.n_burn = n_iter
        docs.pc_start = pc_start
        return _call(&net, &docs, chunk_bounds, chunk_order(chunk_bounds, indptr, sizes),
                     streams, threads, NULL, 0)
    finally:
        _net_free(&net)


def gibbs_upward(const int64_t[::1] indptr,        # IN  (J + 1) CSR rows of the corpus
                 const int32_t[::1] indices,       # IN  word ids
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
    cdef Net net
    cdef Docs docs
    cdef int32_t empty = 0
    cdef Py_ssize_t J = indptr.shape[0] - 1
    try:
        _net_init(&net, phi, sizes, r, None)
        _documents(&docs, &net, UPWARD, indptr, indices, counts, theta, c, &empty)
        if doc_m.shape[0] != J or doc_m.shape[1] != docs.width:
            raise ValueError("theta, doc_m must be (J, sum K_l) and c (J, L)")
        if stats.shape[0] != _n_stats(&net) or qcur.shape[0] != J:
            raise ValueError(f"stats must have {_n_stats(&net)} entries and qcur J")
        docs.doc_m = &doc_m[0, 0] if J > 0 else NULL
        docs.qcur = &qcur[0] if J > 0 else NULL
        return _call(&net, &docs, chunk_bounds, chunk_order(chunk_bounds, indptr, sizes),
                     streams, threads, &stats[0], stats.shape[0])[0]
    finally:
        _net_free(&net)


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
    cdef Net net
    cdef Docs docs
    cdef Py_ssize_t J = theta.shape[0]
    cdef int32_t empty = 0
    # no CSR rows: every document is an empty row, the counts come from doc_m
    cdef int64_t[::1] no_rows = np.zeros(J + 1, dtype=np.int64)
    cdef int32_t[::1] no_entries = np.zeros(0, dtype=np.int32)
    try:
        _net_init(&net, phi, sizes, r, hyper)
        _documents(&docs, &net, DOWNWARD, no_rows, no_entries, no_entries, theta, c, &empty)
        if doc_m.shape[0] != J or doc_m.shape[1] != docs.width:
            raise ValueError("theta, doc_m must be (J, sum K_l) and c (J, L)")
        docs.doc_m = <int32_t*> &doc_m[0, 0] if J > 0 else NULL
        return _call(&net, &docs, chunk_bounds,
                     chunk_order(chunk_bounds, np.zeros(0, dtype=np.int64), sizes), streams,
                     threads, NULL, 0)[1]
    finally:
        _net_free(&net)
