"""Slow NumPy twins of the collapsed Gibbs kernels (topictk/inference/gibbs/_gibbs.pyx).

Each function follows docs/algorithms.md §2 and the draw contracts of §12.3 literally, one token at
a
time, drawing from ``numpy.random.Generator`` objects built on the same PCG64 streams as the
kernels, so the two can be compared exactly.
"""
from __future__ import annotations

import numpy as np


def topic_bits(n_topics: int) -> int:
    bits = 1
    while (1 << bits) < n_topics:
        bits += 1
    return bits


def word_topic_lists(nkw: np.ndarray, bits: int) -> list[list[int]]:
    """SparseLDA lists: for each word, entries (n_kw << bits) | k in descending order."""
    return [sorted(((int(c) << bits) | k for k, c in enumerate(row) if c > 0), reverse=True)
            for row in nkw]


def mean_list_length(nkw: np.ndarray, word_freq: np.ndarray) -> float:
    """Token-weighted mean number of topics with n_kw > 0 of a token's word."""
    lengths = (nkw != 0).sum(axis=1)
    total = int(word_freq.sum())
    return float((word_freq * lengths).sum()) / total if total else 0.0


def init_topics(doc_ptr, words, n_topics, n_words, rng: np.random.Generator):
    """Uniform initial topics: k = min(floor(u K), K - 1), one uniform per token."""
    n_docs = len(doc_ptr) - 1
    z = np.empty(len(words), dtype=np.int32)
    ndk = np.zeros((n_docs, n_topics), dtype=np.int32)
    nkw = np.zeros((n_words, n_topics), dtype=np.int32)
    nk = np.zeros(n_topics, dtype=np.int64)
    for d in range(n_docs):
        for i in range(doc_ptr[d], doc_ptr[d + 1]):
            k = min(int(rng.random() * n_topics), n_topics - 1)
            z[i] = k
            ndk[d, k] += 1
            nkw[words[i], k] += 1
            nk[k] += 1
    return z, ndk, nkw, nk


def _draw(u_total: float, cum: list[float]) -> int:
    for k, c in enumerate(cum):
        if u_total < c:
            return k
    return len(cum) - 1


DENSE_BLOCK = 4


def _draw_blocked(u: float, p: list[float]) -> int:
    """The dense sampler's draw: block sums of four weights (pairwise), u scaled by their
    sum, the first block with u < S_b (subtracting the blocks passed), then the first topic
    in it with u < p_k."""
    K = len(p)
    sums = []
    for b in range(0, K, DENSE_BLOCK):
        block = p[b:b + DENSE_BLOCK]
        if len(block) == DENSE_BLOCK:
            sums.append((block[0] + block[1]) + (block[2] + block[3]))
        else:
            t = 0.0
            for x in block:
                t = t + x
            sums.append(t)
    total = 0.0
    for x in sums:
        total = total + x
    u = u * total
    b = 0
    while b < len(sums) - 1 and u >= sums[b]:
        u = u - sums[b]
        b += 1
    k = b * DENSE_BLOCK
    last = min(k + DENSE_BLOCK, K) - 1
    while k < last and u >= p[k]:
        u = u - p[k]
        k += 1
    return k


def _canonical(doc_ptr):
    return lambda d: range(doc_ptr[d], doc_ptr[d + 1])


class WordTerm:
    """The word term of the conditional (§2.10): (n_kw + beta + o[w, k]) / (n_k + beta-bar_k)
    with the sparse overlay o of ``prior_ptr``, ``prior_topic``, ``prior_extra`` (CSR by word;
    None: o = 0), beta-bar_k = V beta plus o[w, k] added in CSR order; or phi[k, w] of a given
    (K, V) matrix ``phi``."""

    def __init__(self, beta, n_words, n_topics, prior_ptr=None, prior_topic=None,
                 prior_extra=None, phi=None):
        self.beta = beta
        self.phi = phi
        self.extra = [[] for _ in range(n_words)]       # (k, o[w, k]) of every word
        self.bbar = [n_words * beta] * n_topics
        if prior_ptr is not None:
            for w in range(n_words):
                for j in range(prior_ptr[w], prior_ptr[w + 1]):
                    k, o = int(prior_topic[j]), float(prior_extra[j])
                    self.extra[w].append((k, o))
                    self.bbar[k] += o

    def matrix(self, nkw, nk):
        """The word term of every (w, k), word-major (V, K), as the dense path forms phi-hat
        from the counts ``nkw`` (V, K) and ``nk``: ((n_kw + beta) + o[w, k]) / (n_k +
        beta-bar_k), or phi[k, w] of a given phi (the counts unread)."""
        if self.phi is not None:
            return np.ascontiguousarray(np.asarray(self.phi, dtype=np.float64).T)
        out = np.asarray(nkw).astype(np.float64)
        out += self.beta
        for w, entries in enumerate(self.extra):
            for k, o in entries:
                out[w, k] += o
        out /= np.asarray(nk) + np.asarray(self.bbar)
        return out


def _term(term, nkw, beta):
    return term if term is not None else WordTerm(beta, nkw.shape[0], nkw.shape[1])


def _dense_weights(term, coef, nd, a, nkw, w):
    """The dense sampler's K weights of word w: coef[k] (n_kw + beta), then for the overlay's
    topics of w coef[k] (n_kw + (beta + o)); or (n_dk + alpha_k) phi[k, w]."""
    K = len(coef)
    if term.phi is not None:
        return [(float(nd[k]) + a[k]) * float(term.phi[k, w]) for k in range(K)]
    p = [coef[k] * (float(nkw[w, k]) + term.beta) for k in range(K)]
    for k, o in term.extra[w]:
        p[k] = coef[k] * (float(nkw[w, k]) + (term.beta + o))
    return p


def _sweep_dense(docs, doc_ptr, words, z, ndk, nkw, nk, alpha, beta, rng, tokens=None,
                 term=None):
    """Dense sampler; ``alpha`` is (K,) or (D, K), one prior per document. ``tokens(d)``: the
    positions of document d to visit, in order (None: all of them, canonical order); ``term``
    a :class:`WordTerm` (None: the symmetric beta)."""
    K = ndk.shape[1]
    alpha = np.atleast_2d(alpha)
    term = _term(term, nkw, beta)
    bbar = term.bbar
    tokens = tokens or _canonical(doc_ptr)
    rden = [1.0 / (float(nk[k]) + bbar[k]) for k in range(K)]
    for d in docs:
        if len(tokens(d)) == 0:
            continue
        a = alpha[d] if alpha.shape[0] > 1 else alpha[0]
        coef = [(float(ndk[d, k]) + a[k]) * rden[k] for k in range(K)]
        for i in tokens(d):
            w, k = words[i], z[i]
            ndk[d, k] -= 1
            nkw[w, k] -= 1
            nk[k] -= 1
            rden[k] = 1.0 / (float(nk[k]) + bbar[k])
            coef[k] = (float(ndk[d, k]) + a[k]) * rden[k]
            p = _dense_weights(term, coef, ndk[d], a, nkw, w)
            k = _draw_blocked(rng.random(), p)
            z[i] = k
            ndk[d, k] += 1
            nkw[w, k] += 1
            nk[k] += 1
            rden[k] = 1.0 / (float(nk[k]) + bbar[k])
            coef[k] = (float(ndk[d, k]) + a[k]) * rden[k]


def _sparse_pick(u, lst, extra, coef, rden, nd, dt, a, s, r, beta, bits):
    """SparseLDA's draw for a token of a word with list ``lst`` and overlay entries ``extra``
    ((k, o) pairs): q (the list's c_k n_kw, then the overlay's c_k o), r, s, one uniform u."""
    mask = (1 << bits) - 1
    q, qcum = 0.0, []
    topics = [e & mask for e in lst] + [k for k, _ in extra]
    for e in lst:
        q = q + coef[e & mask] * float(e >> bits)
        qcum.append(q)
    for k, o in extra:
        q = q + coef[k] * o
        qcum.append(q)
    u = u * (s + r + q)
    if u < q:
        return topics[_draw(u, qcum)]
    if u < q + r and dt:
        u = u - q
        acc, cum = 0.0, []
        for kk in dt:
            acc = acc + float(nd[kk]) * beta * rden[kk]
            cum.append(acc)
        return dt[_draw(u, cum)]
    u = u - q - r
    acc, cum = 0.0, []
    for kk in range(len(coef)):
        acc = acc + a[kk] * beta * rden[kk]
        cum.append(acc)
    return _draw(u, cum)


def _phi_pick(u, phi_w, nd, dt, a):
    """The draw with a given word term phi_w = phi[:, w]: the document's topics (``dt`` order)
    with n_dk phi_kw, then every topic with alpha_k phi_kw, one uniform u."""
    r, rcum = 0.0, []
    for kk in dt:
        r = r + float(nd[kk]) * float(phi_w[kk])
        rcum.append(r)
    s = 0.0
    for kk in range(len(a)):
        s = s + a[kk] * float(phi_w[kk])
    u = u * (r + s)
    if u < r:
        return dt[_draw(u, rcum)]
    u = u - r
    acc, cum = 0.0, []
    for kk in range(len(a)):
        acc = acc + a[kk] * float(phi_w[kk])
        cum.append(acc)
    return _draw(u, cum)


def _sweep_sparse(docs, doc_ptr, words, z, ndk, nkw, nk, alpha, beta, rng, lists, bits,
                  tokens=None, saved=None, term=None):
    """SparseLDA with the s, r, q buckets maintained incrementally as the kernel does:
    rden[k] = 1 / (V beta + n_k) and coef[k] = (alpha_k + n_dk) rden[k] are cached. With a
    (D, K) alpha (DMR) s_d and every coefficient are computed afresh at each document start.
    ``tokens(d)`` as in :func:`_sweep_dense`; ``saved`` (one prior; a dict kept through a
    partitioned sweep): a document's topic list as its last visit left it, which its next visit
    starts from, in that order, instead of ascending k. ``term`` a :class:`WordTerm` (None: the
    symmetric beta): rden[k] = 1 / (beta-bar_k + n_k) and the draw of :func:`_sparse_pick`, or
    of :func:`_phi_pick` with a given word term."""
    K = ndk.shape[1]
    tokens = tokens or _canonical(doc_ptr)
    term = _term(term, nkw, beta)
    bbar = term.bbar
    per_doc = np.ndim(alpha) == 2 and np.shape(alpha)[0] > 1
    alpha_rows = alpha
    a = None if per_doc else [float(x) for x in np.ravel(alpha)]
    s = 0.0
    rden = [0.0] * K
    coef = [0.0] * K
    for k in range(K):
        rden[k] = 1.0 / (bbar[k] + float(nk[k]))
        if not per_doc:
            s += a[k] * beta * rden[k]
            coef[k] = a[k] * rden[k]
    for d in docs:
        if len(tokens(d)) == 0:
            continue
        nd = ndk[d]
        dt: list[int] = []
        r = 0.0
        if not per_doc and saved is not None and d in saved:
            for k in saved[d]:
                dt.append(k)
                r += float(nd[k]) * beta * rden[k]
                coef[k] = (a[k] + float(nd[k])) * rden[k]
        elif per_doc:
            a = [float(x) for x in alpha_rows[d]]
            s = 0.0
            for k in range(K):
                s += a[k] * beta * rden[k]
                coef[k] = (a[k] + float(nd[k])) * rden[k]
                if nd[k] > 0:
                    dt.append(k)
                    r += float(nd[k]) * beta * rden[k]
        else:
            for k in range(K):
                if nd[k] > 0:
                    dt.append(k)
                    r += float(nd[k]) * beta * rden[k]
                    coef[k] = (a[k] + float(nd[k])) * rden[k]
        for i in tokens(d):
            w, k = int(words[i]), int(z[i])
            lst = lists[w]
            inv = rden[k]
            s -= a[k] * beta * inv
            r -= float(nd[k]) * beta * inv
            lst.remove((int(nkw[w, k]) << bits) | k)
            if nkw[w, k] > 1:
                lst.append(((int(nkw[w, k]) - 1) << bits) | k)
                lst.sort(reverse=True)
            nd[k] -= 1
            nkw[w, k] -= 1
            nk[k] -= 1
            if nd[k] == 0:  # swap-remove, as the kernel does
                j = dt.index(k)
                last = dt.pop()
                if j < len(dt):
                    dt[j] = last
            inv = 1.0 / (bbar[k] + float(nk[k]))
            rden[k] = inv
            s += a[k] * beta * inv
            r += float(nd[k]) * beta * inv
            coef[k] = (a[k] + float(nd[k])) * inv

            if term.phi is not None:
                k = _phi_pick(rng.random(), term.phi[:, w], nd, dt, a)
            else:
                k = _sparse_pick(rng.random(), lst, term.extra[w], coef, rden, nd, dt, a, s, r,
                                 beta, bits)

            z[i] = k
            inv = rden[k]
            s -= a[k] * beta * inv
            r -= float(nd[k]) * beta * inv
            if nkw[w, k] > 0:
                lst.remove((int(nkw[w, k]) << bits) | k)
            lst.append(((int(nkw[w, k]) + 1) << bits) | k)
            lst.sort(reverse=True)
            if nd[k] == 0:
                dt.append(k)
            nd[k] += 1
            nkw[w, k] += 1
            nk[k] += 1
            inv = 1.0 / (bbar[k] + float(nk[k]))
            rden[k] = inv
            s += a[k] * beta * inv
            r += float(nd[k]) * beta * inv
            coef[k] = (a[k] + float(nd[k])) * inv
        if not per_doc:
            for k in dt:
                coef[k] = a[k] * rden[k]
            if saved is not None:
                saved[d] = list(dt)


def _sweep_part(sparse, docs, doc_ptr, words, z, ndk, nkw, nk, alpha, beta, rng, term,
                tokens=None, saved=None):
    """The documents ``docs`` by SparseLDA (its lists built from ``nkw``) or the dense sampler."""
    if sparse:
        bits = topic_bits(ndk.shape[1])
        _sweep_sparse(docs, doc_ptr, words, z, ndk, nkw, nk, alpha, beta, rng,
                      word_topic_lists(nkw, bits), bits, tokens, saved, term)
    else:
        _sweep_dense(docs, doc_ptr, words, z, ndk, nkw, nk, alpha, beta, rng, tokens, term)


def sweep(doc_ptr, words, z, ndk, nkw, nk, alpha, beta, chunk_bounds, rngs, sparse,
          **word_term):
    """One AD-LDA iteration (one chunk: the exact sampler), updating the arrays in place; the
    word term of :class:`WordTerm` (``word_term`` its keywords; none: the symmetric beta)."""
    term = WordTerm(beta, nkw.shape[0], nkw.shape[1], **word_term)
    n_chunks = len(chunk_bounds) - 1
    if n_chunks == 1:
        _sweep_part(sparse, range(chunk_bounds[0], chunk_bounds[1]), doc_ptr, words, z, ndk,
                    nkw, nk, alpha, beta, rngs[0], term)
        return
    start_nkw, start_nk = nkw.copy(), nk.copy()
    delta_nkw = np.zeros_like(nkw)
    delta_nk = np.zeros_like(nk)
    for c in range(n_chunks):
        local_nkw, local_nk = start_nkw.copy(), start_nk.copy()
        _sweep_part(sparse, range(chunk_bounds[c], chunk_bounds[c + 1]), doc_ptr, words, z,
                    ndk, local_nkw, local_nk, alpha, beta, rngs[c], term)
        delta_nkw += local_nkw - start_nkw
        delta_nk += local_nk - start_nk
    nkw[...] = start_nkw + delta_nkw
    nk[...] = start_nk + delta_nk


def word_blocks(word_freq, n_blocks):
    """The word block of every word: words by frequency descending (ties: lower id first),
    each to the block with the fewest tokens so far (ties: the lower block)."""
    load = [0] * n_blocks
    block = np.zeros(len(word_freq), dtype=np.int32)
    for w in sorted(range(len(word_freq)), key=lambda v: (-int(word_freq[v]), v)):
        b = min(range(n_blocks), key=lambda j: (load[j], j))
        block[w] = b
        load[b] += int(word_freq[w])
    return block


def block_sweep(doc_ptr, words, z, ndk, nkw, nk, alpha, beta, block_bounds, word_block, rngs,
                sparse, flowing=False, **word_term):
    """One iteration of the partitioned schedule (§2.8): B epochs; in epoch e doc block i
    samples its documents' tokens of word block (i + e) mod B in canonical order with rngs[i],
    against the shared word counts and its own copy of n_k at the epoch start; the changes of
    n_k are added after the epoch. SparseLDA with one prior lists a document's topics at its
    first visit of the sweep in ascending k and at a later one as the earlier left them. One
    block: the exact sampler. ``word_term``: the word term of :func:`sweep`. ``flowing``: doc
    block i carries its own copy of n_k from the sweep start through every epoch instead, and
    the changes of n_k are added after the last epoch."""
    n_blocks = len(block_bounds) - 1
    if n_blocks == 1:
        sweep(doc_ptr, words, z, ndk, nkw, nk, alpha, beta, block_bounds, rngs, sparse,
              **word_term)
        return
    term = WordTerm(beta, nkw.shape[0], nkw.shape[1], **word_term)
    saved: dict[int, list[int]] = {}
    if flowing:
        sweep_start = nk.copy()
        carried = [sweep_start.copy() for _ in range(n_blocks)]
        for e in range(n_blocks):
            for i in range(n_blocks):
                b = (i + e) % n_blocks

                def tokens(d, b=b):
                    return [t for t in range(doc_ptr[d], doc_ptr[d + 1])
                            if word_block[words[t]] == b]

                _sweep_part(sparse, range(block_bounds[i], block_bounds[i + 1]), doc_ptr,
                            words, z, ndk, nkw, carried[i], alpha, beta, rngs[i], term, tokens,
                            saved)
        nk[...] = sweep_start + sum(c - sweep_start for c in carried)
        return
    for e in range(n_blocks):
        start_nk = nk.copy()
        delta = np.zeros_like(nk)
        for i in range(n_blocks):
            b = (i + e) % n_blocks

            def tokens(d, b=b):
                return [t for t in range(doc_ptr[d], doc_ptr[d + 1]) if word_block[words[t]] == b]

            local_nk = start_nk.copy()
            _sweep_part(sparse, range(block_bounds[i], block_bounds[i + 1]), doc_ptr, words, z,
                        ndk, nkw, local_nk, alpha, beta, rngs[i], term, tokens, saved)
            delta += local_nk - start_nk
        nk[...] = start_nk + delta


def fold_in_theta(obs_ptr, obs_words, weights, alpha, n_sweeps, n_burn, chunk_bounds, rngs,
                  active=None):
    """theta-hat of every active document by a Gibbs fold-in with fixed weights (§11.2),
    with the document sampler of tests/reference/minibatch.py; inactive rows stay NaN."""
    from tests.reference.minibatch import sample_document

    K = weights.shape[1]
    alpha = np.atleast_2d(alpha)
    sparse = alpha.shape[0] == 1
    D = len(obs_ptr) - 1
    theta = np.full((D, K), np.nan)
    for c in range(len(chunk_bounds) - 1):
        for d in range(chunk_bounds[c], chunk_bounds[c + 1]):
            if active is not None and not active[d]:
                continue
            a = alpha[d] if alpha.shape[0] > 1 else alpha[0]
            toks = obs_words[obs_ptr[d]:obs_ptr[d + 1]]
            kept, final = sample_document(toks, weights, a, n_sweeps, n_burn, rngs[c], sparse)
            alpha_sum = 0.0
            for k in range(K):
                alpha_sum += a[k]
            denom = len(toks) + alpha_sum
            for k in range(K):
                count = kept[k] / float(n_sweeps - n_burn) if n_sweeps > n_burn else final[k]
                theta[d, k] = (count + a[k]) / denom
    return theta


def fold_in_heldout(obs_ptr, obs_words, held_ptr, held_words, weights, phi, alpha, n_sweeps,
                    n_burn, chunk_bounds, rngs):
    """p(w | doc) of every held-out entry (§11.2): :func:`fold_in_theta` of the documents with
    held-out entries, mixed with ``phi`` (V, K) in ascending k."""
    active = np.diff(held_ptr) > 0
    theta = fold_in_theta(obs_ptr, obs_words, weights, alpha, n_sweeps, n_burn, chunk_bounds,
                          rngs, active)
    out = np.zeros(len(held_words))
    for d in range(len(held_ptr) - 1):
        for j in range(held_ptr[d], held_ptr[d + 1]):
            acc = 0.0
            for k in range(theta.shape[1]):
                acc = acc + theta[d, k] * phi[held_words[j], k]
            out[j] = acc
    return out
