"""Slow NumPy twin of the Metropolis-Hastings kernels (topictk/inference/_mh.pyx).

docs/algorithms.md §2.7 written literally, one token at a time, with the same draw contracts
(alias draw, document token draw) and the same uniforms from ``numpy.random.Generator``
objects built on the same PCG64 streams, so kernel and twin can be compared exactly.
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


def doc_step(s, i, begin, end, z, nw, nk, alpha_table, alpha_sum, beta, vbeta, rng) -> int:
    length = float(end - begin)
    u = rng.random() * (length + alpha_sum)
    if u < length:
        j = min(begin + int(u), end - 1)
        t = s if j == i else int(z[j])
    else:
        t = alias_draw(rng.random(), *alpha_table)
    u = rng.random()
    if t == s:
        return s
    pt = (int(nw[t]) + beta) / (int(nk[t]) + vbeta)
    ps = (int(nw[s]) + beta) / (int(nk[s]) + vbeta)
    return t if u * ps < pt else s


def sweep_chunk(doc_ptr, words, z, ndk, nkw, nk, alpha, beta, d_begin, d_end, rng, steps,
                tb: Tables, alpha_table, alpha_sum, table_z) -> None:
    vbeta = nkw.shape[0] * beta
    for d in range(d_begin, d_end):
        begin, end = int(doc_ptr[d]), int(doc_ptr[d + 1])
        for i in range(begin, end):
            w, s = int(words[i]), int(z[i])
            r = s if table_z is None else int(table_z[i])
            ndk[d, s] -= 1
            nkw[w, s] -= 1
            nk[s] -= 1
            for _ in range(steps):
                s = word_step(tb, s, r, w, ndk[d], nkw[w], nk, alpha, beta, vbeta, rng)
                s = doc_step(s, i, begin, end, z, nkw[w], nk, alpha_table, alpha_sum, beta,
                             vbeta, rng)
            z[i] = s
            ndk[d, s] += 1
            nkw[w, s] += 1
            nk[s] += 1


def sweep(doc_ptr, words, z, ndk, nkw, nk, alpha, beta, bounds, rngs, steps, tb: Tables,
          table_z=None) -> None:
    """``table_z``: the topics the tables were built from when they are not z itself. AD-LDA: every chunk on a private copy of the counts of the start of the iteration, the
    changes summed afterwards (chunk 0 may as well work in place)."""
    alpha = [float(a) for a in alpha]
    alpha_sum = 0.0
    for a in alpha:
        alpha_sum = alpha_sum + a
    alpha_table = alias_table(alpha, alpha_sum)
    start_nkw, start_nk = nkw.copy(), nk.copy()
    for c in range(len(bounds) - 1):
        own_nkw, own_nk = start_nkw.copy(), start_nk.copy()
        sweep_chunk(doc_ptr, words, z, ndk, own_nkw, own_nk, alpha, beta, bounds[c],
                    bounds[c + 1], rngs[c], steps, tb, alpha_table, alpha_sum, table_z)
        nkw += own_nkw - start_nkw
        nk += own_nk - start_nk
