"""Slow NumPy twin of the WarpLDA-order kernel (topictk/inference/gibbs/_warp.pyx).

docs/algorithms.md §2.9 written literally, one token at a time, with the same draw contracts
and the same uniforms: every round seeds xoshiro256+ (:class:`Xoshiro`) from the next four
64-bit outputs of the chunk's PCG64 stream (the ``numpy.random.Generator`` objects given) and
draws the round's uniforms from it, so kernel and twin can be compared exactly. A token's
proposals are drawn (two uniforms per MH step: the proposal, then the acceptance) just before
it is sampled; the kernel draws them a few tokens ahead, which draws the same uniforms in the
same order, because a draw reads no topic. The word terms: an overlay of extra word prior
(:class:`tests.reference.mh.Overlay`) or a given topic-word matrix ``phi`` (K x V).
"""
from __future__ import annotations

import numpy as np

from tests.reference.mh import Overlay, alias_draw, alias_table, ordered_sum


MASK = (1 << 64) - 1


class Xoshiro:
    """xoshiro256+ as ``topictk/_cy/rng.pxd`` has it, seeded from ``gen``'s stream."""

    def __init__(self, gen: np.random.Generator):
        self.s = [int(v) for v in gen.bit_generator.random_raw(4)]
        if not any(self.s):
            self.s[0] = 1

    def next(self) -> int:
        """The next 64-bit output, s0 + s3, then the state advanced."""
        s0, s1, s2, s3 = self.s
        out = (s0 + s3) & MASK
        t = (s1 << 17) & MASK
        s2 ^= s0
        s3 ^= s1
        s1 ^= s2
        s0 ^= s3
        s2 ^= t
        s3 = ((s3 << 45) | (s3 >> 19)) & MASK
        self.s = [s0, s1, s2, s3]
        return out

    def random(self) -> float:
        return (self.next() >> 11) * 2.0 ** -53


def _prior(alpha: np.ndarray):
    """r -> a topic from alpha (uniform when symmetric, else the alias draw)."""
    K = alpha.size
    if np.all(alpha == alpha[0]):
        return lambda r: min(int(r * K), K - 1)
    prob, alias = alias_table([float(a) for a in alpha], float(np.sum(alpha)))
    return lambda r: alias_draw(r, prob, alias)


def _alpha_sum(alpha: np.ndarray) -> float:
    total = 0.0
    for a in alpha:
        total += float(a)
    return total


class Terms:
    """What a sweep reads of the word terms: beta-bar_k and per word the alias table of o_w.
    with its mass O_w (an overlay), or the alias tables of phi's columns."""

    def __init__(self, K: int, beta: float, overlay: Overlay | None, phi):
        self.overlay, self.phi = overlay, phi
        self.bbar = None if overlay is None else overlay.beta_bar(K, beta)
        if overlay is not None:
            self.o_mass = [ordered_sum(xs) for xs in overlay.extra]
            self.o_tables = [alias_table(xs, m) if m > 0.0 else None
                             for xs, m in zip(overlay.extra, self.o_mass)]
        if phi is not None:
            cols = [[float(x) for x in phi[:, w]] for w in range(phi.shape[1])]
            self.phi_tables = [alias_table(c, ordered_sum(c)) for c in cols]

    def total_of(self, vbeta: float):
        """k -> beta-bar_k (V beta without an overlay)."""
        return (lambda k: vbeta) if self.bbar is None else (lambda k: self.bbar[k])

    def word_prior(self, w: int, beta: float):
        """k -> beta + o_wk, as the kernel's row of the word holds it."""
        if self.overlay is None:
            return lambda k: beta
        return lambda k: beta + self.overlay.value(w, k)

    def doc_topic(self, w: int, x: float, others: int, K: int, beta: float) -> int:
        """The topic of the document phase's proposal x past the word's other tokens."""
        below = others + K * beta
        if self.overlay is not None and x >= below and self.o_mass[w] > 0.0:
            return self.overlay.topics[w][alias_draw((x - below) / self.o_mass[w],
                                                     *self.o_tables[w])]
        return min(int((x - others) / beta), K - 1)


def _steps(s, draws, z, row, prior_of, nk, total_of):
    """M MH steps from s; draws are (position or None, prior topic, acceptance uniform)."""
    for at, topic, u in draws:
        t = int(z[at]) if at is not None else topic
        if t != s and (u * (int(row[s]) + prior_of(s)) * (int(nk[t]) + total_of(t))
                       < (int(row[t]) + prior_of(t)) * (int(nk[s]) + total_of(s))):
            s = t
    return s


def _steps_given(s, draws, z, weight_of):
    """M MH steps from s for a given phi: t accepted when u weight(s) < weight(t)."""
    for at, topic, u in draws:
        t = int(z[at]) if at is not None else topic
        if t != s and u * weight_of(s) < weight_of(t):
            s = t
    return s


def _word_round(words_of_chunk, word_tokens_of, block_of_doc, doc_of, doc_ptr, block, z, nk,
                M, K, beta, vbeta, prior, alpha_sum, gen, terms: Terms) -> None:
    gen = Xoshiro(gen)
    for w in words_of_chunk:
        tokens = word_tokens_of[w]
        mine = [i for i in tokens if block_of_doc[doc_of[i]] == block]
        if not mine:
            continue
        cw = np.bincount(z[tokens], minlength=K).astype(np.int64)
        for i in mine:
            begin = int(doc_ptr[doc_of[i]])
            others = int(doc_ptr[doc_of[i] + 1]) - begin - 1
            draws = []
            for _ in range(M):
                x = gen.random() * (others + alpha_sum)
                if x < others:
                    j = begin + min(int(x), others - 1)
                    at, topic = (begin + others if j == i else j), None
                else:
                    at, topic = None, prior((x - others) / alpha_sum)
                draws.append((at, topic, gen.random()))
            s = int(z[i])
            cw[s] -= 1
            nk[s] -= 1
            if terms.phi is not None:
                s = _steps_given(s, draws, z, lambda k: float(terms.phi[k, w]))
            else:
                s = _steps(s, draws, z, cw, terms.word_prior(w, beta), nk,
                           terms.total_of(vbeta))
            cw[s] += 1
            nk[s] += 1
            z[i] = s


def _doc_round(docs, doc_ptr, words, word_tokens_of, word_block, block, every, z, nk, alpha,
               M, K, beta, vbeta, gen, terms: Terms) -> None:
    gen = Xoshiro(gen)
    for d in docs:
        begin, end = int(doc_ptr[d]), int(doc_ptr[d + 1])
        cd = np.bincount(z[begin:end], minlength=K).astype(np.int64)
        for i in range(begin, end):
            w = int(words[i])
            if not every and word_block[w] != block:
                continue
            tokens = word_tokens_of[w]
            others = len(tokens) - 1
            total = others + K * beta
            if terms.overlay is not None:
                total = total + terms.o_mass[w]
            draws = []
            for _ in range(M):
                if terms.phi is not None:
                    draws.append((None, alias_draw(gen.random(), *terms.phi_tables[w]),
                                  gen.random()))
                    continue
                x = gen.random() * total
                if x < others:
                    pos = tokens[min(int(x), others - 1)]
                    at, topic = (tokens[-1] if pos == i else pos), None
                else:
                    at, topic = None, terms.doc_topic(w, x, others, K, beta)
                draws.append((at, topic, gen.random()))
            s = int(z[i])
            cd[s] -= 1
            nk[s] -= 1
            if terms.phi is not None:
                s = _steps_given(s, draws, z, lambda k: int(cd[k]) + float(alpha[k]))
            else:
                s = _steps(s, draws, z, cd, lambda k: float(alpha[k]), nk,
                           terms.total_of(vbeta))
            cd[s] += 1
            nk[s] += 1
            z[i] = s


def _rounds(nk, run_chunk, C) -> None:
    """C rounds; in round r chunk c on its own copy of n_k from the round's start, the
    changes added after the round in chunk order."""
    if C == 1:
        run_chunk(0, 0, nk)
        return
    for r in range(C):
        begin = nk.copy()
        change = np.zeros_like(nk)
        for c in range(C):
            own = begin.copy()
            run_chunk(c, (c + r) % C, own)
            change += own - begin
        nk += change


def sweep(doc_ptr, words, z, nk, alpha, beta, steps, bounds, word_block, doc_gens,
          word_gens, overlay: Overlay | None = None, phi=None) -> None:
    """One sweep: the word phase (round r: word chunk c = the words of block c, ascending,
    their tokens in document block (c + r) mod C), then the document phase (round r:
    document chunk c = documents bounds[c]..bounds[c + 1], their tokens of word block
    (c + r) mod C). ``overlay`` or ``phi`` (K, V): the word terms."""
    V, K, C = word_block.size, alpha.size, len(doc_gens)
    vbeta = V * beta
    terms = Terms(K, beta, overlay, phi)
    word_tokens_of = [np.flatnonzero(words == w).tolist() for w in range(V)]
    doc_of = np.repeat(np.arange(doc_ptr.size - 1), np.diff(doc_ptr))
    block_of_doc = np.repeat(np.arange(C), np.diff(bounds))
    prior, alpha_sum = _prior(alpha), _alpha_sum(alpha)
    _rounds(nk, lambda c, block, own: _word_round(
        np.flatnonzero(word_block == c).tolist(), word_tokens_of, block_of_doc, doc_of,
        doc_ptr, block, z, own, steps, K, beta, vbeta, prior, alpha_sum, word_gens[c], terms), C)
    _rounds(nk, lambda c, block, own: _doc_round(
        range(bounds[c], bounds[c + 1]), doc_ptr, words, word_tokens_of, word_block, block,
        C == 1, z, own, alpha, steps, K, beta, vbeta, doc_gens[c], terms), C)
