"""Slow NumPy twin of the Metropolis-Hastings kernels (topictk/inference/gibbs/_mh.pyx).

docs/algorithms.md §2.7 written literally, one token at a time, with the same draw contracts
(alias draw, document token draw) and the same uniforms from ``numpy.random.Generator``
objects built on the same PCG64 streams, so kernel and twin can be compared exactly: the
training sweep with one prior or a prior per document, and the fold-in with fixed topics;
each with the symmetric beta, with an overlay of extra word prior (:class:`Overlay`) or with a
given topic-word matrix ``phi`` in place of the word factor.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

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
class Overlay:
    """The word prior's overlay o: per row (word) its topics, ascending, and extra prior."""

    topics: list[list[int]]
    extra: list[list[float]]

    @classmethod
    def of_csr(cls, ptr, topic, extra) -> "Overlay":
        rows = range(len(ptr) - 1)
        return cls([[int(k) for k in topic[ptr[w]:ptr[w + 1]]] for w in rows],
                   [[float(x) for x in extra[ptr[w]:ptr[w + 1]]] for w in rows])

    def value(self, w: int, k: int) -> float:
        return self.extra[w][self.topics[w].index(k)] if k in self.topics[w] else 0.0

    def beta_bar(self, n_topics: int, beta: float) -> list[float]:
        """V beta + sum_w o[w, k], summed row after row."""
        out = [len(self.topics) * beta] * n_topics
        for ks, xs in zip(self.topics, self.extra):
            for k, x in zip(ks, xs):
                out[k] = out[k] + x
        return out

    def rows(self, words) -> "Overlay":
        return Overlay([self.topics[w] for w in words], [self.extra[w] for w in words])


@dataclass
class Tables:
    """Per word: topics ascending, their stale counts, alias table and mass S_w; the shared
    table of beta / (stale n_k + beta-bar_k) and its mass Q. With an overlay of the word prior
    (``overlay``, rows as the tables') beta-bar_k (``bbar``, None: V beta) and per row the
    alias table of o_wk / (stale n_k + beta-bar_k) with its mass O_w; with a given ``phi`` (K x
    rows) the alias table of every column."""

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
    bbar: list[float] | None = None
    overlay: Overlay | None = None
    o_tables: list | None = None
    o_mass: list[float] | None = None
    phi: np.ndarray | None = None
    phi_tables: list | None = None

    def stale(self, w: int, k: int) -> int:
        topics = self.topics[w]
        return self.counts[w][topics.index(k)] if k in topics else 0

    def extra(self, w: int, k: int) -> float:
        return 0.0 if self.overlay is None else self.overlay.value(w, k)

    def total(self, k: int, vbeta: float) -> float:
        return vbeta if self.bbar is None else self.bbar[k]

    def proposal(self, w: int, k: int, r: int, beta: float, vbeta: float) -> float:
        """q_i(k) unnormalised: the tables' weight without the token's own entry (topic r)."""
        c = self.stale(w, k)
        if k == r:
            return (c - 1 + beta + self.extra(w, k)) / (self.nk[k] - 1 + self.total(k, vbeta))
        return (c + beta + self.extra(w, k)) * self.rden[k]

    def fixed(self, w: int, k: int, beta: float) -> float:
        """The fold-in's word factor: phi-hat_kw from the tables, or the given phi[k, w]."""
        if self.phi is not None:
            return float(self.phi[k, w])
        return (self.stale(w, k) + beta + self.extra(w, k)) * self.rden[k]

    def word_factor(self, w, k, nw, nk, beta, vbeta) -> float:
        """(n_kw + beta + o_wk) / (n_k + beta-bar_k) of the current counts, or phi[k, w]."""
        if self.phi is not None:
            return float(self.phi[k, w])
        return (int(nw[k]) + beta + self.extra(w, k)) / (int(nk[k]) + self.total(k, vbeta))


def ordered_sum(values) -> float:
    total = 0.0
    for x in values:
        total = total + x
    return total


def shared_table(nk, beta: float, vbeta: float, bbar) -> tuple[list[float], tuple, float]:
    """rden_k = 1 / (n_k + beta-bar_k) and the alias table of beta rden_k with its mass."""
    rden = [1.0 / (int(nk[k]) + (vbeta if bbar is None else bbar[k])) for k in range(len(nk))]
    weights = [beta * r for r in rden]
    q = ordered_sum(weights)
    return rden, alias_table(weights, q), q


def with_terms(tb: Tables, overlay: Overlay | None = None, phi=None) -> Tables:
    """The tables with the word terms of a sweep or a fold-in: the overlay's alias tables of
    o_wk rden_k per row (from the tables' rden), or the alias tables of phi's columns."""
    if overlay is not None:
        tables, masses = [], []
        for ks, xs in zip(overlay.topics, overlay.extra):
            weights = [x * tb.rden[k] for k, x in zip(ks, xs)]
            masses.append(ordered_sum(weights))
            tables.append(alias_table(weights, masses[-1]) if masses[-1] > 0.0 else ([], []))
        tb = replace(tb, overlay=overlay, o_tables=tables, o_mass=masses)
    if phi is not None:
        cols = [[float(x) for x in phi[:, w]] for w in range(phi.shape[1])]
        tb = replace(tb, phi=phi, phi_tables=[alias_table(c, ordered_sum(c)) for c in cols])
    return tb


def build_tables(words: np.ndarray, z: np.ndarray, n_topics: int, n_words: int,
                 beta: float, overlay: Overlay | None = None) -> Tables:
    nk = np.bincount(z, minlength=n_topics)
    bbar = None if overlay is None else overlay.beta_bar(n_topics, beta)
    rden, (dense_prob, dense_alias), q = shared_table(nk, beta, n_words * beta, bbar)
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
                  dense_prob, dense_alias, q, bbar)


def _target(tb: Tables, w, nd, a, nw, nk, k, beta, vbeta) -> float:
    return ((int(nd[k]) + a[k]) * (int(nw[k]) + beta + tb.extra(w, k))
            / (int(nk[k]) + tb.total(k, vbeta)))


def _table_draw(tb: Tables, w, u, x) -> int:
    """The part u picks (the word's table, the shared one, the word's overlay table)."""
    if u < tb.mass[w]:
        return tb.topics[w][alias_draw(x, tb.prob[w], tb.alias[w])]
    if tb.overlay is not None and tb.o_mass[w] > 0.0 and u >= tb.mass[w] + tb.dense_mass:
        return tb.overlay.topics[w][alias_draw(x, *tb.o_tables[w])]
    return alias_draw(x, tb.dense_prob, tb.dense_alias)


def word_draw(tb: Tables, w, r, beta, vbeta, rng) -> int:
    """A topic from the tables; the token's own table topic r is kept with probability
    q_i(r) / q(r), else the draw is repeated."""
    total = tb.mass[w] + tb.dense_mass
    if tb.overlay is not None:
        total = total + tb.o_mass[w]
    while True:
        u = rng.random() * total
        x = rng.random()
        t = _table_draw(tb, w, u, x)
        if t != r:
            return t
        if (rng.random() * ((tb.stale(w, r) + beta + tb.extra(w, r)) * tb.rden[r])
                < tb.proposal(w, r, r, beta, vbeta)):
            return t


def fixed_word_step(tb: Tables, w, s, nd, a, beta, rng) -> int:
    """A word proposal that is the target's word factor exactly (a fold-in's tables, or the
    alias table of a given phi's column), accepted with (n_dt + a_t) / (n_ds + a_s)."""
    if tb.phi is not None:
        t = alias_draw(rng.random(), *tb.phi_tables[w])
    else:
        t = word_draw(tb, w, -1, beta, 0.0, rng)
    u = rng.random()
    return t if t != s and u * (int(nd[s]) + a[s]) < int(nd[t]) + a[t] else s


def word_step(tb: Tables, s, r, w, nd, nw, nk, alpha, beta, vbeta, rng) -> int:
    if tb.phi is not None:
        return fixed_word_step(tb, w, s, nd, alpha, beta, rng)
    t = word_draw(tb, w, r, beta, vbeta, rng)
    u = rng.random()
    if t == s:
        return s
    qs = tb.proposal(w, s, r, beta, vbeta)
    qt = tb.proposal(w, t, r, beta, vbeta)
    pt = _target(tb, w, nd, alpha, nw, nk, t, beta, vbeta)
    ps = _target(tb, w, nd, alpha, nw, nk, s, beta, vbeta)
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


def doc_step(tb: Tables, w, s, i, begin, end, z, nd, alpha, alpha_bar, nw, nk, alpha_table,
             alpha_sum, beta, vbeta, rng) -> int:
    t = doc_draw(z[begin:end], i - begin, s, alpha_table, alpha_sum, rng)
    u = rng.random()
    if t == s:
        return s
    pt = tb.word_factor(w, t, nw, nk, beta, vbeta)
    ps = tb.word_factor(w, s, nw, nk, beta, vbeta)
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
                s = doc_step(tb, w, s, i, begin, end, z, ndk[d], a, alpha_bar, nkw[w], nk,
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
          table_z=None, overlay: Overlay | None = None, phi=None) -> None:
    """``alpha``: (K,) or (1, K) for one prior, (D, K) for a prior per document.
    ``table_z``: the topics the tables were built from when they are not z itself. AD-LDA:
    every chunk on a private copy of the counts of the start of the iteration, the
    changes summed afterwards (chunk 0 may as well work in place). ``overlay`` (the one the
    tables were built with) or ``phi`` (K, V): the word terms."""
    tb = with_terms(tb, overlay, phi)
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

def count_tables(nkw: np.ndarray, nk: np.ndarray, vocab, beta: float,
                 overlay: Overlay | None = None) -> Tables:
    """The word proposal's tables from a model's counts, table j for word vocab[j]: topics
    with n_kw > 0 ascending, weights n_kw / (n_k + beta-bar_k); the shared table as in
    :func:`build_tables`."""
    V, K = nkw.shape
    bbar = None if overlay is None else overlay.beta_bar(K, beta)
    rden, (dense_prob, dense_alias), q = shared_table(nk, beta, V * beta, bbar)
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
    s = fixed_word_step(tb, w, s, nd, a, beta, rng)
    t = doc_draw(z_doc, i, s, alpha_table, alpha_sum, rng)
    u = rng.random()
    if t != s and u * tb.fixed(w, s, beta) < tb.fixed(w, t, beta):
        return t
    return s


def fold_in_theta(nkw, nk, beta, alpha, obs_ptr, obs_words, steps, n_sweeps, n_burn,
                  chunk_bounds, rngs, active=None, overlay: Overlay | None = None,
                  phi=None) -> np.ndarray:
    """theta-hat of every active document by MH cycles against tables of the counts ``nkw``,
    ``nk`` (§2.7, fold-in): uniform start, ``n_sweeps`` sweeps of ``steps`` cycles per token,
    the document proposal from each document's own prior, theta-hat from the kept sweeps as
    ``tests/reference/gibbs.py::fold_in_theta``; inactive rows stay NaN. ``overlay`` (rows of
    every word) or ``phi`` (K, V): the word terms."""
    K = nkw.shape[1]
    rows = np.atleast_2d(np.asarray(alpha, dtype=np.float64))
    vocab = sorted(set(int(w) for w in obs_words))
    tb = with_terms(count_tables(nkw, nk, vocab, beta, overlay),
                    None if overlay is None else overlay.rows(vocab),
                    None if phi is None else np.asarray(phi)[:, vocab])
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
