"""The Metropolis-Hastings sampler of collapsed Gibbs LDA (LightLDA, Yuan et al. 2015, with
the alias-table word proposal of AliasLDA, Li et al. 2014): docs/algorithms.md §2.7.

The kernel is :mod:`topictk.inference._mh`; its NumPy twin is ``tests/reference/mh.py``. This
module holds the word proposal's tables and their rebuild schedule for
:class:`topictk.inference.gibbs.GibbsDriver` (``inference.sampler: mh``).
"""
from __future__ import annotations

import numpy as np

from topictk.inference import _mh
from topictk.inference.base import word_frequencies

#: defaults of ``inference.mh_steps`` and ``inference.mh_rebuild``
MH_STEPS = 2
MH_REBUILD = 1

#: longest allowed interval, in sweeps, between two rebuilds of the word proposal's tables
#: (``inference.mh_rebuild``): staler tables propose topics the chain has left, so more
#: proposals are refused (docs/algorithms.md §2.7).
MAX_REBUILD = 8

#: ``inference.sampler: auto`` uses MH from this many topics on, else what
#: ``inference.sparse`` says. Measured on KOS (benchmarks/results/mh.md), MH passes SparseLDA
#: in tokens/s between K = 1,000 and 5,000 but not in perplexity at equal training time up to
#: K = 10,000 (the gap narrowing from 190 to 36), so the switch lies above the measured range.
MH_FROM_K = 20_000


class MHSampler:
    """The word proposal's tables and one MH sweep (§2.7) for the Gibbs driver.

    The tables are rebuilt from z before every sweep whose 0-based index is a multiple of
    ``rebuild``; with ``rebuild`` > 1 the state keeps the z they were built from
    (``table_z``, saved in checkpoints), so a resumed chain rebuilds the same tables and
    continues bit for bit.
    """

    def __init__(self, steps: int, rebuild: int, words: np.ndarray, n_words: int,
                 n_topics: int):
        self.steps = int(steps)
        self.rebuild = int(rebuild)
        freq = word_frequencies(words, n_words)
        # tokens grouped by word (a stable sort keeps them in corpus order within a word)
        self.word_ptr = np.zeros(n_words + 1, dtype=np.int64)
        np.cumsum(freq, out=self.word_ptr[1:])
        self.word_tokens = np.argsort(words, kind="stable").astype(np.int64)
        # pool: min(n_w, K) entries for word w
        self.ptr = np.zeros(n_words + 1, dtype=np.int64)
        np.cumsum(np.minimum(freq, n_topics), out=self.ptr[1:])
        pool = max(1, int(self.ptr[-1]))
        self.topic = np.zeros(pool, dtype=np.int32)
        self.count = np.zeros(pool, dtype=np.int32)
        self.prob = np.zeros(pool, dtype=np.float64)
        self.alias = np.zeros(pool, dtype=np.int32)
        self.length = np.zeros(n_words, dtype=np.int32)
        self.mass = np.zeros(n_words, dtype=np.float64)
        self.nk = np.zeros(n_topics, dtype=np.int64)
        self.rden = np.zeros(n_topics, dtype=np.float64)
        self.dense_prob = np.zeros(n_topics, dtype=np.float64)
        self.dense_alias = np.zeros(n_topics, dtype=np.int32)
        self.dense_mass = 0.0
        self._built = False

    def build(self, z: np.ndarray, beta: float, threads: int) -> None:
        """The tables from the topics ``z``."""
        self.dense_mass = _mh.build_tables(
            self.word_ptr, self.word_tokens, z, beta, self.ptr, self.topic, self.count,
            self.prob, self.alias, self.length, self.mass, self.nk, self.rden,
            self.dense_prob, self.dense_alias, threads)
        self._built = True

    def sweep(self, state, alpha: np.ndarray, bounds: np.ndarray, streams: list,
              doc_ptr: np.ndarray, words: np.ndarray, threads: int) -> None:
        """Sweep ``state.step + 1`` on ``state``'s counts with the (K,) prior ``alpha``,
        rebuilding the tables first when the schedule says so (or from ``state.table_z``
        when this sampler has none yet, after a resume)."""
        if state.step % self.rebuild == 0:
            self.build(state.z, state.beta, threads)
            state.table_z = state.z.copy() if self.rebuild > 1 else None
        elif not self._built:
            self.build(state.table_z, state.beta, threads)
        _mh.mh_sweep(doc_ptr, words, state.z, state.ndk, state.nkw, state.nk,
                     np.ascontiguousarray(alpha.reshape(-1), dtype=np.float64), state.beta,
                     bounds, streams, self.steps, self.ptr, self.topic, self.count, self.prob,
                     self.alias, self.length, self.mass, self.nk, self.rden,
                     self.dense_prob, self.dense_alias, self.dense_mass,
                     state.table_z if self.rebuild > 1 else None, threads)
