"""Slow NumPy twin of the WarpLDA kernels (topictk/inference/_warp.pyx).

docs/algorithms.md §2.9 written literally, one token at a time, with the same draw contracts
and the same uniforms from ``numpy.random.Generator`` objects built on the same PCG64
streams, so kernel and twin can be compared exactly.
"""
from __future__ import annotations

import numpy as np

from tests.reference.mh import alias_draw, alias_table


def _prior(alpha: np.ndarray):
    """r -> a topic from alpha (uniform when symmetric, else the alias draw)."""
    K = alpha.size
    if np.all(alpha == alpha[0]):
        return lambda r: min(int(r * K), K - 1)
    prob, alias = alias_table([float(a) for a in alpha], float(np.sum(alpha)))
    return lambda r: alias_draw(r, prob, alias)


def _doc_proposals(z, prop, begin, end, alpha_sum, prior, gen) -> None:
    length = end - begin
    total = length + alpha_sum
    for i in range(begin, end):
        for m in range(prop.shape[1]):
            x = gen.random() * total
            if x < length:
                prop[i, m] = z[begin + min(int(x), length - 1)]
            else:
                prop[i, m] = prior((x - length) / alpha_sum)


def _alpha_sum(alpha: np.ndarray) -> float:
    total = 0.0
    for a in alpha:
        total += float(a)
    return total


def start(doc_ptr, z, prop, alpha, bounds, gens) -> None:
    """The generation-only document pass: M document proposals for every token."""
    prior, alpha_sum = _prior(alpha), _alpha_sum(alpha)
    for c, gen in enumerate(gens):
        for d in range(bounds[c], bounds[c + 1]):
            _doc_proposals(z, prop, int(doc_ptr[d]), int(doc_ptr[d + 1]), alpha_sum, prior,
                           gen)


def _word_chunk(words_of_chunk, word_tokens_of, z, prop, nk, K, beta, vbeta, gen) -> None:
    M = prop.shape[1]
    for w in words_of_chunk:
        tokens = word_tokens_of[w]
        n = len(tokens)
        zl = [int(z[i]) for i in tokens]
        cw = np.bincount(zl, minlength=K).astype(np.int64)
        for j, i in enumerate(tokens):
            s = zl[j]
            cw[s] -= 1
            nk[s] -= 1
            for m in range(M):
                t = int(prop[i, m])
                u = gen.random()
                if t != s and (u * (int(cw[s]) + beta) * (int(nk[t]) + vbeta)
                               < (int(cw[t]) + beta) * (int(nk[s]) + vbeta)):
                    s = t
            cw[s] += 1
            nk[s] += 1
            zl[j] = s
        total = n + K * beta
        for j, i in enumerate(tokens):
            z[i] = zl[j]
            for m in range(M):
                x = gen.random() * total
                if x < n:
                    prop[i, m] = zl[min(int(x), n - 1)]
                else:
                    prop[i, m] = min(int((x - n) / beta), K - 1)


def _doc_chunk(doc_ptr, docs, z, prop, nk, alpha, alpha_sum, prior, vbeta, gen) -> None:
    K, M = alpha.size, prop.shape[1]
    for d in docs:
        begin, end = int(doc_ptr[d]), int(doc_ptr[d + 1])
        cd = np.bincount(z[begin:end], minlength=K).astype(np.int64)
        for i in range(begin, end):
            s = int(z[i])
            cd[s] -= 1
            nk[s] -= 1
            for m in range(M):
                t = int(prop[i, m])
                u = gen.random()
                if t != s and (u * (int(cd[s]) + float(alpha[s])) * (int(nk[t]) + vbeta)
                               < (int(cd[t]) + float(alpha[t])) * (int(nk[s]) + vbeta)):
                    s = t
            cd[s] += 1
            nk[s] += 1
            z[i] = s
        _doc_proposals(z, prop, begin, end, alpha_sum, prior, gen)


def _phase(nk, run_chunk, C) -> None:
    """Chunk c on its own copy of n_k from the phase's start; the changes added after."""
    if C == 1:
        run_chunk(0, nk)
        return
    begin = nk.copy()
    change = np.zeros_like(nk)
    for c in range(C):
        own = begin.copy()
        run_chunk(c, own)
        change += own - begin
    nk += change


def sweep(doc_ptr, words, z, prop, nk, alpha, beta, bounds, word_block, doc_gens,
          word_gens) -> None:
    """One sweep: the word phase (word chunk c = the words of block c, ascending), then the
    document phase (document chunk c = documents bounds[c]..bounds[c + 1])."""
    V, K, C = word_block.size, alpha.size, len(doc_gens)
    vbeta = V * beta
    word_tokens_of = [np.flatnonzero(words == w).tolist() for w in range(V)]
    prior, alpha_sum = _prior(alpha), _alpha_sum(alpha)
    _phase(nk, lambda c, own: _word_chunk(np.flatnonzero(word_block == c).tolist(),
                                          word_tokens_of, z, prop, own, K, beta, vbeta,
                                          word_gens[c]), C)
    _phase(nk, lambda c, own: _doc_chunk(doc_ptr, range(bounds[c], bounds[c + 1]), z, prop,
                                         own, alpha, alpha_sum, prior, vbeta, doc_gens[c]), C)
