"""Slow NumPy twin of the Metropolis-Hastings kernels (topictk/inference/_mh.pyx).

docs/algorithms.md §2.7 written literally, one token at a time, with the same draw contracts
(alias draw, document token draw) and the same uniforms from ``numpy.random.Generator``
objects built on the same PCG64 streams, so kernel and twin can be compared exactly: the
training sweep with one prior or a prior per document, and the fold-in with fixed topics.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def alias_table(weights: list[float], total: float) -> tuple[list[float], list[int]]:
    """Vose's alias table: stacks filled in index order, popped from the top."""
    n = len(weights)
    prob = [w * n / total for w in weights]
    alias = list(range(n))
    small = [j for j in range(n) if prob[j] < 1.0]
    large = [j for j in range(n) if prob[j] >= 1.0]
    while small and large:
        s, big = small.pop(), large.pop()
        alias[s] = big
        prob[big] = (prob[big] + prob[s]) - 1.0
        (small if prob[big] < 1.0 else large).append(big)
    for j in small + large:
        prob[j] = 1.0
    return prob, alias


def alias_draw(u: float, prob: list[float], alias: list[int]) -> int:
    n = len(prob)
    x = u * n
    j = min(int(x), n - 1)
    return j if x - j < prob[j] else alias[j]


@dataclass
class Tables:
    """Per word: topics ascending, their stale counts, alias table and mass S_w; the shared
    table of beta / (stale n_k + V beta) and its mass Q."""

    topics: list[list[int]]
    counts: list[list[int]]
    prob: list[list[float]]
    alias: list[list[int]]
    mass: list[float]
    nk: list[int]
    rden: list[float]
    dense_prob: list[float]
    dense_alias: list[int]
    dense_mass: float

    def stale(self, w: int, k: int) -> int:
        topics = self.topics[w]
        return self.counts[w][topics.index(k)] if k in topics else 0

    def proposal(self, w: int, k: int, r: int, beta: float, vbeta: float) -> float:
        """q_i(k) unnormalised: the table's weight without the token's own entry (topic r)."""
        c = self.stale(w, k)
        if k == r:
            return (c - 1 + beta) / (self.nk[k] - 1 + vbeta)
        return (c + beta) * self.rden[k]


def build_tables(words: np.ndarray, z: np.ndarray, n_topics: int, n_words: int,
                 beta: float) -> Tables:
    nk = np.bincount(z, minlength=n_topics)
    rden = [1.0 / (int(nk[k]) + n_words * beta) for k in range(n_topics)]
    weights = [beta * r for r in rden]
    q = 0.0
    for x in weights:
        q = q + x
    dense_prob, dense_alias = alias_table(weights, q)
    topics, counts, probs, aliases, masses = [], [], [], [], []
    for w in range(n_words):
        found = np.bincount(z[words == w], minlength=n_topics)
        ks = [k for k in range(n_topics) if found[k] > 0]
        cs = [int(found[k]) for k in ks]
        ws = [c * rden[k] for k, c in zip(ks, cs)]
        total = 0.0
        for x in ws:
            total = total + x
        prob, alias = alias_table(ws, total) if ks else ([], [])
        topics.append(ks)
        counts.append(cs)
        probs.append(prob)
        aliases.append(alias)
        masses.append(total)
    return Tables(topics, counts, probs, aliases, masses, [int(n) for n in nk], rden,
                  dense_prob, dense_alias, q)


def _target(nd, a, nw, nk, k, beta, vbeta) -> float:
    return (int(nd[k]) + a[k]) * (int(nw[k]) + beta) / (int(nk[k]) + vbeta)


def word_draw(tb: Tables, w, r, beta, vbeta, rng) -> int:
    """A topic from the tables; the token's own table topic r is kept with probability
    q_i(r) / q(r), else the draw is repeated."""
    while True:
        u = rng.random() * (tb.mass[w] + tb.dense_mass)
        x = rng.random()
        if u < tb.mass[w]:
            t = tb.topics[w][alias_draw(x, tb.prob[w], tb.alias[w])]
        else:
            t = alias_draw(x, tb.dense_prob, tb.dense_alias)
        if t != r:
            return t
        if rng.random() * ((tb.stale(w, r) + beta) * tb.rden[r]) < tb.proposal(w, r, r, beta,
                                                                               vbeta):
            return t


def word_step(tb: Tables, s, r, w, nd, nw, nk, alpha, beta, vbeta, rng) -> int:
    t = word_draw(tb, w, r, beta, vbeta, rng)
    u = rng.random()
    if t == s:
        return s
    qs = tb.proposal(w, s, r, beta, vbeta)
    qt = tb.proposal(w, t, r, beta, vbeta)
    pt = _target(nd, alpha, nw, nk, t, beta, vbeta)
    ps = _target(nd, alpha, nw, nk, s, beta, vbeta)
    return t if u * (ps * qt) < pt * qs else s


def doc_draw(z_doc, i, s, alpha_table, alpha_sum, rng) -> int:
    """q(k | s) proportional to n_dk + [k = s] + alpha-bar_k: a random token of the document
    (token i counting as s), or a topic from alpha-bar's alias table."""
    n = len(z_doc)
    u = rng.random() * (float(n) + alpha_sum)
    if u < n:
        j = min(int(u), n - 1)
        return s if j == i else int(z_doc[j])
    return alias_draw(rng.random(), *alpha_table)


def doc_ratio(pt, ps, t, s, nd, alpha, alpha_bar):
    """The document proposal's ratio pt / ps, times the document factors (n_dt + alpha_dt)
    (n_ds + alpha-bar_s) / ((n_ds + alpha_ds)(n_dt + alpha-bar_t)) when the document's
    prior is not alpha-bar (``alpha_bar`` None: it is)."""
    if alpha_bar is not None:
        pt = pt * ((int(nd[t]) + alpha[t]) * (int(nd[s]) + alpha_bar[s]))
        ps = ps * ((int(nd[s]) + alpha[s]) * (int(nd[t]) + alpha_bar[t]))
    return pt, ps


def doc_step(s, i, begin, end, z, nd, alpha, alpha_bar, nw, nk, alpha_table, alpha_sum,
             beta, vbeta, rng) -> int:
    t = doc_draw(z[begin:end], i - begin, s, alpha_table, alpha_sum, rng)
    u = rng.random()
    if t == s:
        return s
    pt = (int(nw[t]) + beta) / (int(nk[t]) + vbeta)
    ps = (int(nw[s]) + beta) / (int(nk[s]) + vbeta)
    pt, ps = doc_ratio(pt, ps, t, s, nd, alpha, alpha_bar)
    return t if u * ps < pt else s


def sweep_chunk(doc_ptr, words, z, ndk, nkw, nk, alpha, beta, d_begin, d_end, rng, steps,
                tb: Tables, alpha_table, alpha_sum, table_z, alpha_bar=None) -> None:
    """``alpha`` (1 or D, K) rows; ``alpha_bar`` given when there is a row per document."""
    vbeta = nkw.shape[0] * beta
    for d in range(d_begin, d_end):
        a = alpha[d] if len(alpha) > 1 else alpha[0]
        begin, end = int(doc_ptr[d]), int(doc_ptr[d + 1])
        for i in range(begin, end):
            w, s = int(words[i]), int(z[i])
            r = s if table_z is None else int(table_z[i])
            ndk[d, s] -= 1
            nkw[w, s] -= 1
            nk[s] -= 1
            for _ in range(steps):
                s = word_step(tb, s, r, w, ndk[d], nkw[w], nk, a, beta, vbeta, rng)
                s = doc_step(s, i, begin, end, z, ndk[d], a, alpha_bar, nkw[w], nk,
                             alpha_table, alpha_sum, beta, vbeta, rng)
            z[i] = s
            ndk[d, s] += 1
            nkw[w, s] += 1
            nk[s] += 1


def proposal_prior(alpha) -> np.ndarray:
    """alpha-bar: the one row of a shared prior, the mean of the rows of a prior per document
    (numpy's mean over axis 0, as the driver forms it)."""
    alpha = np.atleast_2d(np.asarray(alpha, dtype=np.float64))
    return alpha[0] if alpha.shape[0] == 1 else alpha.mean(axis=0)


def _alpha_table(alpha_bar):
    bar = [float(a) for a in alpha_bar]
    total = 0.0
    for a in bar:
        total = total + a
    return alias_table(bar, total), total


def sweep(doc_ptr, words, z, ndk, nkw, nk, alpha, beta, bounds, rngs, steps, tb: Tables,
          table_z=None) -> None:
    """``alpha``: (K,) or (1, K) for one prior, (D, K) for a prior per document.
    ``table_z``: the topics the tables were built from when they are not z itself. AD-LDA:
    every chunk on a private copy of the counts of the start of the iteration, the
    changes summed afterwards (chunk 0 may as well work in place)."""
    rows = np.atleast_2d(np.asarray(alpha, dtype=np.float64))
    bar = proposal_prior(rows)
    alpha_table, alpha_sum = _alpha_table(bar)
    rows = [[float(a) for a in row] for row in rows]
    alpha_bar = [float(a) for a in bar] if len(rows) > 1 else None
    start_nkw, start_nk = nkw.copy(), nk.copy()
    for c in range(len(bounds) - 1):
        own_nkw, own_nk = start_nkw.copy(), start_nk.copy()
        sweep_chunk(doc_ptr, words, z, ndk, own_nkw, own_nk, rows, beta, bounds[c],
                    bounds[c + 1], rngs[c], steps, tb, alpha_table, alpha_sum, table_z,
                    alpha_bar)
        nkw += own_nkw - start_nkw
        nk += own_nk - start_nk


# ---------------------------------------------------------------- fold-in with fixed topics

def count_tables(nkw: np.ndarray, nk: np.ndarray, vocab, beta: float) -> Tables:
    """The word proposal's tables from a model's counts, table j for word vocab[j]: topics
    with n_kw > 0 ascending, weights n_kw / (n_k + V beta); the shared table as in
    :func:`build_tables`."""
    V, K = nkw.shape
    rden = [1.0 / (int(nk[k]) + V * beta) for k in range(K)]
    weights = [beta * r for r in rden]
    q = 0.0
    for x in weights:
        q = q + x
    dense_prob, dense_alias = alias_table(weights, q)
    topics, counts, probs, aliases, masses = [], [], [], [], []
    for w in vocab:
        ks = [k for k in range(K) if nkw[w, k] > 0]
        cs = [int(nkw[w, k]) for k in ks]
        ws = [c * rden[k] for k, c in zip(ks, cs)]
        total = 0.0
        for x in ws:
            total = total + x
        prob, alias = alias_table(ws, total) if ks else ([], [])
        topics.append(ks)
        counts.append(cs)
        probs.append(prob)
        aliases.append(alias)
        masses.append(total)
    return Tables(topics, counts, probs, aliases, masses, [int(n) for n in nk], rden,
                  dense_prob, dense_alias, q)


def fold_step(tb: Tables, z_doc, i, s, w, nd, a, alpha_table, alpha_sum, beta, rng) -> int:
    """One cycle of a token being folded in: the word proposal phi-hat_.w accepted with
    (n_dt + alpha_dt) / (n_ds + alpha_ds), then the document proposal from the document's own
    prior ``a`` (its alias table and sum) accepted with phi-hat_tw / phi-hat_sw."""
    t = word_draw(tb, w, -1, beta, 0.0, rng)
    u = rng.random()
    if t != s and u * (int(nd[s]) + a[s]) < int(nd[t]) + a[t]:
        s = t
    t = doc_draw(z_doc, i, s, alpha_table, alpha_sum, rng)
    u = rng.random()
    if t != s and u * ((tb.stale(w, s) + beta) * tb.rden[s]) < (tb.stale(w, t) + beta) * \
            tb.rden[t]:
        return t
    return s


def fold_in_theta(nkw, nk, beta, alpha, obs_ptr, obs_words, steps, n_sweeps, n_burn,
                  chunk_bounds, rngs, active=None) -> np.ndarray:
    """theta-hat of every active document by MH cycles against tables of the counts ``nkw``,
    ``nk`` (§2.7, fold-in): uniform start, ``n_sweeps`` sweeps of ``steps`` cycles per token,
    the document proposal from each document's own prior, theta-hat from the kept sweeps as
    ``tests/reference/gibbs.py::fold_in_theta``; inactive rows stay NaN."""
    K = nkw.shape[1]
    rows = np.atleast_2d(np.asarray(alpha, dtype=np.float64))
    vocab = sorted(set(int(w) for w in obs_words))
    tb = count_tables(nkw, nk, vocab, beta)
    local = {w: j for j, w in enumerate(vocab)}
    D = len(obs_ptr) - 1
    theta = np.full((D, K), np.nan)
    for c in range(len(chunk_bounds) - 1):
        for d in range(chunk_bounds[c], chunk_bounds[c + 1]):
            if active is not None and not active[d]:
                continue
            a = [float(x) for x in (rows[d] if rows.shape[0] > 1 else rows[0])]
            alpha_table, alpha_sum = _alpha_table(a)
            toks = [local[int(w)] for w in obs_words[obs_ptr[d]:obs_ptr[d + 1]]]
            n = len(toks)
            z_doc = [min(int(rngs[c].random() * K), K - 1) for _ in range(n)]
            nd = np.bincount(np.asarray(z_doc, dtype=np.int64), minlength=K)
            kept = np.zeros(K, dtype=np.int64)
            for sweep in range(n_sweeps):
                for i in range(n):
                    s = z_doc[i]
                    nd[s] -= 1
                    for _ in range(steps):
                        s = fold_step(tb, z_doc, i, s, toks[i], nd, a, alpha_table,
                                      alpha_sum, beta, rngs[c])
                    z_doc[i] = s
                    nd[s] += 1
                if sweep >= n_burn:
                    for k in z_doc:
                        kept[k] += 1
            denom = n + alpha_sum
            for k in range(K):
                count = kept[k] / float(n_sweeps - n_burn) if n_sweeps > n_burn else nd[k]
                theta[d, k] = (count + a[k]) / denom
    return theta
