"""The WarpLDA sampler of collapsed Gibbs LDA (Chen et al. 2016): docs/algorithms.md §2.9.

The kernel is :mod:`topictk.inference._warp`; its NumPy twin is ``tests/reference/warp.py``.
This module holds the word order of the word phase and the word chunks for
:class:`topictk.inference.gibbs.GibbsDriver` (``inference.sampler: warp``).
"""
from __future__ import annotations

import numpy as np

from topictk.inference import _warp
from topictk.inference.base import tokens_by_word


class WarpSampler:
    """The word order and word chunks of the word phase, and one sweep (§2.9).

    The tokens are grouped by word by a stable sort of the words (corpus order within a
    word); the words are cut into as many chunks as the documents, the words of chunk c being
    those of word block c (:func:`topictk.inference.gibbs.word_blocks`), ascending. Both are
    functions of the corpus alone, built once.
    """

    def __init__(self, steps: int, words: np.ndarray, n_words: int, word_block: np.ndarray):
        self.steps = int(steps)
        # int32 positions below 2^31 tokens: half the memory of the word order
        self.word_ptr, self.word_tokens = tokens_by_word(
            words, n_words, np.int32 if words.size < 2**31 else np.int64)
        self.word_list = np.argsort(word_block, kind="stable").astype(np.int32)
        n_chunks = int(word_block.max(initial=0)) + 1
        self.word_bounds = np.zeros(n_chunks + 1, dtype=np.int64)
        np.cumsum(np.bincount(word_block, minlength=n_chunks), out=self.word_bounds[1:])

    def start(self, state, alpha: np.ndarray, bounds: np.ndarray, doc_streams: list,
              doc_ptr: np.ndarray, threads: int) -> None:
        """The chain's first document proposals (``state.prop``) from ``state.z``."""
        state.prop = np.zeros((state.z.size, self.steps), dtype=np.int32)
        _warp.warp_start(doc_ptr, state.z, state.prop, _flat(alpha), bounds, doc_streams,
                         threads)

    def sweep(self, state, alpha: np.ndarray, bounds: np.ndarray, doc_streams: list,
              word_streams: list, doc_ptr: np.ndarray, threads: int) -> None:
        """One sweep on ``state``'s z, prop and nk with the (K,) prior ``alpha``; the first
        sweep of a chain starts with :meth:`start`."""
        if state.prop is None:
            self.start(state, alpha, bounds, doc_streams, doc_ptr, threads)
        _warp.warp_sweep(doc_ptr, self.word_ptr, self.word_tokens, self.word_list,
                         self.word_bounds, state.z, state.prop, state.nk, _flat(alpha),
                         float(state.beta), bounds, doc_streams, word_streams, threads)


def initial_topics(n_tokens: int, n_topics: int, stream: np.random.PCG64,
                   block: int = 1 << 20) -> np.ndarray:
    """The initial topics of §2.2 (one uniform per token in canonical order,
    k = min(floor(u K), K - 1)): the z of ``_gibbs.init_topics`` without its dense counts."""
    generator = np.random.Generator(stream)
    z = np.empty(n_tokens, dtype=np.int32)
    for begin in range(0, n_tokens, block):       # the same uniforms, a block at a time
        u = generator.random(min(block, n_tokens - begin))
        u *= n_topics
        np.minimum(u, n_topics - 1, out=u)
        z[begin:begin + u.size] = u
    return z


def _flat(alpha: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(np.reshape(alpha, -1), dtype=np.float64)


def sparse_counts(row_ptr: np.ndarray, order: np.ndarray | None, z: np.ndarray,
                  n_topics: int, name: str) -> dict[str, np.ndarray]:
    """The non-zero (row, topic) counts of ``z`` as CSR arrays named after ``name`` (what a
    WarpLDA sample keeps, §2.9): ``{name}_ptr`` (R + 1) int64 offsets, ``{name}_topic`` and
    ``{name}_count`` int32, topics ascending in a row. Row r holds the tokens
    ``order[row_ptr[r]:row_ptr[r + 1]]`` (without ``order``: the tokens ``row_ptr[r]`` to
    ``row_ptr[r + 1]``, e.g. a document). Memory: the output and one K row."""
    ptr = np.zeros(row_ptr.size, dtype=np.int64)
    empty = np.zeros(0, dtype=np.int32)
    topic, count = _warp.row_topic_counts(row_ptr, empty if order is None else order, z,
                                          n_topics, ptr)
    return {f"{name}_ptr": ptr, f"{name}_topic": topic, f"{name}_count": count}
