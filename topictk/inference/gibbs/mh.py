"""The Metropolis-Hastings sampler of collapsed Gibbs LDA (LightLDA, Yuan et al. 2015, with
the alias-table word proposal of AliasLDA, Li et al. 2014): docs/algorithms.md §2.7.

The kernel is :mod:`topictk.inference.gibbs._mh`; its NumPy twin is ``tests/reference/mh.py``. This
module holds the word proposal's tables and their rebuild schedule, the Gibbs drivers' count
representation they sweep (:class:`MHCounts`, ``inference.sampler: mh``, with one prior or a
prior per document as in dmr-sem), and the MH fold-in of documents with the topics fixed
(:func:`mh_fold_in`) that runs trained with it are evaluated and inferred with.
"""
from __future__ import annotations

import numpy as np

from topictk.inference.gibbs import _mh
from topictk.inference.base import FoldInPlan, tokens_by_word
from topictk.inference.gibbs.counts import (
    DenseCounts,
    SweepLayout,
    overlay_kwargs,
    overlay_rows,
    warn_empty_topics,
)

#: defaults of ``inference.mh_steps`` and ``inference.mh_rebuild``
MH_STEPS = 2
MH_REBUILD = 1

#: longest allowed interval, in sweeps, between two rebuilds of the word proposal's tables
#: (``inference.mh_rebuild``): staler tables propose topics the chain has left, so more
#: proposals are refused (docs/algorithms.md §2.7).
MAX_REBUILD = 8

#: ``inference.sampler: auto`` of dmr-sem uses MH from this many topics on, else what
#: ``inference.sparse`` says (gibbs picks the WarpLDA-order sampler instead,
#: gibbs.WARP_FROM_K). Measured on KOS (benchmarks/results/mh_lightlda.md), MH passes SparseLDA
#: in tokens/s between K = 1,000 and 5,000; its perplexity curves there scored different test
#: documents per run (evaluation.curve_docs auto), so the switch is kept above the measured
#: range until they are measured again.
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
        self.word_ptr, self.word_tokens = tokens_by_word(words, n_words)
        # pool: min(n_w, K) entries for word w
        self.ptr = np.zeros(n_words + 1, dtype=np.int64)
        np.cumsum(np.minimum(np.diff(self.word_ptr), n_topics), out=self.ptr[1:])
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
        self._bar: tuple[np.ndarray, np.ndarray] | None = None   # (prior, its alpha-bar)

    def build(self, z: np.ndarray, beta: float, threads: int,
              word_prior: dict | None = None) -> None:
        """The tables from the topics ``z`` (with the overlay of ``word_prior``, §2.11)."""
        self.dense_mass = _mh.build_tables(
            self.word_ptr, self.word_tokens, z, beta, self.ptr, self.topic, self.count,
            self.prob, self.alias, self.length, self.mass, self.nk, self.rden,
            self.dense_prob, self.dense_alias, threads, **(word_prior or {}))
        self._built = True

    def sweep(self, state, alpha: np.ndarray, bounds: np.ndarray, streams: list,
              doc_ptr: np.ndarray, words: np.ndarray, threads: int,
              word_prior: dict | None = None) -> None:
        """Sweep ``state.step + 1`` on ``state``'s counts with the (K,), (1, K) or (D, K)
        prior ``alpha``, rebuilding the tables first when the schedule says so (or from
        ``state.table_z`` when this sampler has none yet, after a resume)."""
        word_prior = word_prior or {}
        if state.step % self.rebuild == 0:
            self.build(state.z, state.beta, threads, word_prior)
            state.table_z = state.z.copy() if self.rebuild > 1 else None
        elif not self._built:
            self.build(state.table_z, state.beta, threads, word_prior)
        alpha = np.ascontiguousarray(np.atleast_2d(alpha), dtype=np.float64)
        _mh.mh_sweep(doc_ptr, words, state.z, state.ndk, state.nkw, state.nk, alpha,
                     self.proposal_prior(alpha), state.beta, bounds, streams, self.steps,
                     self.ptr, self.topic, self.count, self.prob, self.alias, self.length,
                     self.mass, self.nk, self.rden, self.dense_prob, self.dense_alias,
                     self.dense_mass, state.table_z if self.rebuild > 1 else None, threads,
                     **word_prior)

    def proposal_prior(self, alpha: np.ndarray) -> np.ndarray:
        """alpha-bar of a (1 or D, K) prior, kept while the caller passes the same array (a
        (D, K) prior changes only when DMR's nu does)."""
        if self._bar is None or self._bar[0] is not alpha:
            self._bar = (alpha, proposal_prior(alpha))
        return self._bar[1]


class MHCounts(DenseCounts):
    """The dense counts of :class:`topictk.inference.gibbs.counts.DenseCounts` swept by
    :class:`MHSampler` (§2.7) on AD-LDA chunks; ``inference.mh_rebuild`` sets how often the
    word proposal's tables are rebuilt."""

    name = "mh"
    ADLDA = True

    def __init__(self, layout: SweepLayout, opts, steps: int, sync=None):
        super().__init__(layout, steps, sync)
        warn_empty_topics(layout)
        rebuild = MH_REBUILD if opts.mh_rebuild is None else opts.mh_rebuild
        self.sampler = MHSampler(steps, rebuild, layout.words, layout.n_words, layout.n_topics)

    @classmethod
    def sweep_arrays(cls, inference, K, V, N, copies):
        return [("MH word order", (N,), 8),
                ("MH alias tables", (min(N, V * K),), 4 + 4 + 8 + 4)]

    def sweep(self, state, prior, chunk_streams, streams, threads):
        L = self.layout
        self.sampler.sweep(state, prior, L.bounds, chunk_streams, L.doc_ptr, L.words, threads,
                           self.word_prior)
        return 0, self.name

    def grown(self, state, old):
        """The word proposal's tables are built from the grown chain's z."""
        state.table_z = state.z.copy() if self.sampler.rebuild > 1 else None
        return state

    def check_restored(self, state) -> None:
        rebuild = self.sampler.rebuild
        if state.step % rebuild != 0 and state.table_z is None:
            raise ValueError(f"the state of step {state.step} has no table_z, which "
                             f"inference.mh_rebuild = {rebuild} needs")


def proposal_prior(alpha: np.ndarray) -> np.ndarray:
    """alpha-bar (K,), the prior part of the document proposal (docs/algorithms.md §2.7): the
    one row of a shared prior, or the mean over the documents of a prior per document."""
    if alpha.shape[0] == 1:
        return alpha[0]
    return np.ascontiguousarray(alpha.mean(axis=0))


class CountTables:
    """The word proposal's tables built from a model's counts for the words ``vocab``
    (docs/algorithms.md §2.7, fold-in): table j is word vocab[j]'s, and the proposal is
    phi-hat exactly. Memory O(non-zeros of those rows + K)."""

    def __init__(self, nkw: np.ndarray, nk: np.ndarray, vocab: np.ndarray, beta: float,
                 threads: int = 1, overlay=None):
        nkw = np.ascontiguousarray(nkw, dtype=np.int32)
        vocab = np.ascontiguousarray(vocab, dtype=np.int64)
        K = nkw.shape[1]
        sizes = np.zeros(vocab.size, dtype=np.int64)
        _mh.count_nonzeros(nkw, vocab, sizes)
        self.ptr = np.zeros(vocab.size + 1, dtype=np.int64)
        np.cumsum(sizes, out=self.ptr[1:])
        pool = max(1, int(self.ptr[-1]))
        self.topic = np.zeros(pool, dtype=np.int32)
        self.count = np.zeros(pool, dtype=np.int32)
        self.prob = np.zeros(pool, dtype=np.float64)
        self.alias = np.zeros(pool, dtype=np.int32)
        self.length = np.zeros(vocab.size, dtype=np.int32)
        self.mass = np.zeros(vocab.size, dtype=np.float64)
        self.rden = np.zeros(K, dtype=np.float64)
        self.dense_prob = np.zeros(K, dtype=np.float64)
        self.dense_alias = np.zeros(K, dtype=np.int32)
        self.beta = float(beta)
        self.dense_mass = _mh.build_count_tables(
            nkw, np.ascontiguousarray(nk, dtype=np.int64), vocab, self.beta, self.ptr,
            self.topic, self.count, self.prob, self.alias, self.length, self.mass, self.rden,
            self.dense_prob, self.dense_alias, threads, **overlay_kwargs(overlay))
        # the overlay's rows of the tables' words, as the fold-in takes them
        self.word_prior = overlay_kwargs(overlay_rows(overlay, vocab))

    def arrays(self) -> tuple:
        """The tables as :func:`topictk.inference.gibbs._mh.mh_fold_in` takes them."""
        return (self.beta, self.ptr, self.topic, self.count, self.prob, self.alias,
                self.length, self.mass, self.rden, self.dense_prob, self.dense_alias,
                self.dense_mass)


def mh_fold_in(nkw: np.ndarray, nk: np.ndarray, beta: float, alpha: np.ndarray,
               doc_ptr: np.ndarray, words: np.ndarray, plan: FoldInPlan,
               steps: int = MH_STEPS, overlay=None) -> np.ndarray:
    """theta-hat (D, K) of documents with the topics of the counts ``nkw`` (V, K), ``nk``
    fixed, by ``steps`` MH cycles per token and sweep (docs/algorithms.md §2.7): the fold-in
    of :func:`topictk.inference.base.gibbs_fold_in` (same plan, streams and theta-hat), at
    O(steps) per token instead of O(K). Rows of documents the plan skips are NaN."""
    K = nkw.shape[1]
    alpha = np.ascontiguousarray(np.atleast_2d(alpha), dtype=np.float64)
    D = doc_ptr.size - 1
    vocab, local = np.unique(np.asarray(words), return_inverse=True)
    tables = CountTables(nkw, nk, vocab, beta, plan.threads, overlay)
    active = plan.active_flags(D)
    theta = np.full((D, K), np.nan)
    _mh.mh_fold_in(np.ascontiguousarray(doc_ptr, dtype=np.int64),
                   local.reshape(-1).astype(np.int32), alpha, int(steps), plan.sweeps, plan.burn_in,
                   np.ascontiguousarray(plan.bounds, dtype=np.int64), plan.streams, active,
                   theta, *tables.arrays(), plan.threads, **tables.word_prior)
    return theta
