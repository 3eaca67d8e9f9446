"""Collapsed Gibbs sampling for LDA (Griffiths & Steyvers 2004), with SparseLDA (Yao, Mimno &
McCallum 2009) as the fast path and, for threads, the partitioned schedule (document and word
blocks; by default) or AD-LDA chunking (Newman et al. 2009).

docs/algorithms.md §2. The kernel is :mod:`topictk.inference._gibbs`; its NumPy twin is
``tests/reference/gibbs.py``.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

from topictk import streams as keys
from topictk._cy.special import gammaln
from topictk.config.schema import Option
from topictk.errors import ConfigError, NumericalError, UsageError
from topictk.inference import _gibbs, _warp
from topictk.inference.base import (
    StepInfo,
    chunk_bounds_by_tokens,
    resolve_blocks,
    resolve_chunks,
    warn_idle_threads,
    word_frequencies,
)
from topictk.inference.hyper import minka_alpha, minka_alpha_of_rows
from topictk.inference.mh import MAX_REBUILD, MH_FROM_K, MH_REBUILD, MH_STEPS, MHSampler
from topictk.inference.mh import mh_fold_in
from topictk.inference.perplexity import mixture_probabilities
from topictk.inference.registry import register
from topictk.inference.sampled import (
    SampledDriver,
    evaluation_plan,
    resolve_alpha,
    resolve_sample_schedule,
)
from topictk.inference.warp import (
    WarpSampler,
    initial_topics,
    sparse_counts,
    sparse_fold_in,
    sparse_fold_in_theta,
    sparse_mixture,
    top_words_of_rows,
)
from topictk.state.counts import (
    CountState,
    WarpState,
    dense_counts,
    phi_hat,
)
from topictk.streams import Streams

log = logging.getLogger("topictk")

#: ``sparse: auto`` runs a sweep with SparseLDA when the topic list of a token's word holds on
#: average fewer than this share of the K topics, else with the dense sampler: the share at
#: which the two cost the same per sweep on the poliblog corpus at K = 20 and 50.
SPARSE_SHARE = 0.35


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


#: ``inference.sampler: auto`` runs the WarpLDA-order sampler (§2.9) from this many topics on
#: in ``gibbs``. Measured side by side, one thread (benchmarks/results/mh.md): at K = 1,000
#: SparseLDA is ahead on KOS, NIPS and 20 Newsgroups; from K = 5,000 the warp chain reaches
#: SparseLDA's 200-sweep perplexity in a fraction of its time and ends at or below it.
WARP_FROM_K = 5_000


def resolved_sampler(inference, n_topics: int, warp: bool = True) -> str | None:
    """``inference.sampler`` with ``auto`` resolved for K topics: ``warp`` from WARP_FROM_K
    (when the driver has it, ``warp``), ``mh`` from MH_FROM_K, else None (as
    ``inference.sparse`` says); any other setting as it is."""
    choice = inference.get("sampler")
    if choice != "auto":
        return choice
    if warp and n_topics >= WARP_FROM_K:
        return "warp"
    return "mh" if n_topics >= MH_FROM_K else None


def uses_mh(inference, n_topics: int, warp: bool = True) -> bool:
    """Whether ``inference.sampler`` picks the Metropolis-Hastings sampler for K topics."""
    return resolved_sampler(inference, n_topics, warp) == "mh"


def uses_warp(inference, n_topics: int, warp: bool = True) -> bool:
    """Whether ``inference.sampler`` picks the WarpLDA sampler (§2.9) for K topics."""
    return resolved_sampler(inference, n_topics, warp) == "warp"


def check_schedule(data: dict, where: str, warp: bool = True) -> None:
    """``inference.chunks`` (AD-LDA) and ``inference.blocks`` (the partitioned schedule) are
    two schedules: give at most one of them; the MH sampler runs AD-LDA chunks only. A Dask
    cluster runs AD-LDA chunks only, so a cluster run names its chunks rather than silently
    running another chain than the same config on one machine."""
    inference, training = data["inference"], data.get("training", {})
    if inference.get("chunks") is not None and inference.get("blocks") is not None:
        raise ConfigError(f"inference.chunks = {inference['chunks']} and inference.blocks = "
                          f"{inference['blocks']} choose two different parallel schedules; "
                          f"set one of them and leave the other out ({where})")
    if inference.get("blocks") is not None and resolved_sampler(
            inference, data["model"]["topics"], warp) in ("mh", "warp"):
        raise ConfigError(f"inference.blocks does not apply to the Metropolis-Hastings sampler "
                          f"(inference.sampler), which runs AD-LDA chunks; set "
                          f"inference.chunks instead ({where})")
    cluster = ("training.scheduler" if training.get("scheduler") is not None
               else "training.dask_workers" if training.get("dask_workers") is not None
               else None)
    if cluster is not None and inference.get("chunks") is None:
        raise ConfigError(f"{cluster}: a Dask cluster runs AD-LDA chunks, not the default "
                          f"partitioned schedule (inference.blocks); set inference.chunks "
                          f"(e.g. 2, the same chain on one machine) to train on a cluster "
                          f"({where})")


#: entries (of 8 bytes) left free between the SparseLDA lists of two word blocks: one cache line,
#: so that the threads of a partitioned sweep never write to the same line
BLOCK_GAP = 8


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


class SweepSampler:
    """The sampler of each sweep and the SparseLDA word lists it needs, for the Gibbs drivers
    (gibbs, dmr-sem): ``inference.sparse`` true, false or auto (:func:`sparse_sweep`); with
    ``word_block`` (the partitioned schedule) each block's lists lie together
    (:func:`list_offsets`)."""

    def __init__(self, setting, words: np.ndarray, n_words: int, n_topics: int,
                 word_block: np.ndarray | None = None):
        self.setting = setting
        self.word_freq = word_frequencies(words, n_words)
        self.bits = _gibbs.topic_bits(n_topics)
        # pool capacity: min(frequency of w, K) entries for word w (no pool for dense only)
        self.ptr = list_offsets(np.minimum(self.word_freq, n_topics), word_block)
        self.word_block = word_block
        size = max(1, int(self.ptr[-1])) if setting is not False else 1
        self.entries = np.zeros(size, dtype=np.int64)
        self.lengths = np.zeros(n_words, dtype=np.int32)
        self._lists_for = None
        self.buffers = _gibbs.SweepBuffers()    # the sweeps' buffers, allocated once

    def sweep(self, state, alpha: np.ndarray, bounds: np.ndarray, streams: list,
              doc_ptr: np.ndarray, words: np.ndarray, threads: int,
              order: tuple[np.ndarray, np.ndarray] | None = None) -> tuple[int, bool]:
        """One Gibbs iteration on ``state``'s counts with the (1, K) or (D, K) prior ``alpha``;
        returns (rounding fallbacks, whether SparseLDA ran). ``bounds`` are AD-LDA chunks, or
        with ``order`` (:func:`block_order`) the doc blocks of the partitioned schedule. The
        lists are rebuilt from the counts when they are not those the last sparse sweep left
        (a pure function of the counts, so the chain does not depend on when that happens)."""
        current = self.lengths if self._lists_for is state.nkw else None
        sparse = sparse_sweep(self.setting, state.nkw, self.word_freq, current)
        if sparse and self._lists_for is not state.nkw:
            _gibbs.build_word_topic_lists(state.nkw, self.ptr, self.entries, self.lengths,
                                          self.bits, threads)
        self._lists_for = state.nkw if sparse else None
        if order is not None:
            return int(_gibbs.gibbs_block_sweep(
                doc_ptr, words, state.z, state.ndk, state.nkw, state.nk, alpha, state.beta,
                bounds, order[0], order[1], self.word_block, streams, sparse, self.ptr,
                self.entries, self.lengths, self.bits, threads, self.buffers)), sparse
        fallbacks = _gibbs.gibbs_sweep(doc_ptr, words, state.z, state.ndk, state.nkw, state.nk,
                                       alpha, state.beta, bounds, streams, sparse, self.ptr,
                                       self.entries, self.lengths, self.bits, threads,
                                       self.buffers)
        return int(fallbacks), sparse


@dataclass
class RestartPoint:
    """What a Gibbs chain on a cluster goes back to when a worker is lost: the step, and the
    counts, alpha and chunk-stream states of that step (z and ndk are the driver's copies,
    which are not touched until the next gather, after which a newer point is taken)."""

    step: int
    nkw: np.ndarray
    nk: np.ndarray
    alpha: np.ndarray
    streams: list

    @classmethod
    def of(cls, state: CountState, chunk_streams: list) -> RestartPoint:
        return cls(state.step, state.nkw.copy(), state.nk.copy(), state.alpha.copy(),
                   [bg.state for bg in chunk_streams])

    def restore(self, state: CountState, chunk_streams: list) -> None:
        state.nkw[...] = self.nkw
        state.nk[...] = self.nk
        state.alpha = self.alpha.copy()
        state.step = self.step
        for bg, saved in zip(chunk_streams, self.streams):
            bg.state = saved


#: ``inference.chunks`` and ``inference.blocks`` of the Gibbs drivers (gibbs, dmr-sem)
CHUNKS_OPTION = Option("int", None, low=1, auto=True, nullable=True,
                       help="AD-LDA chunks instead of the partitioned schedule: 1 = exact "
                            "sequential sampler; C = AD-LDA with C chunks (what a Dask cluster "
                            "runs); auto = 2 chunks (1 below 65,536 tokens), the default of "
                            "runs trained before inference.blocks; null = inference.blocks")
BLOCKS_OPTION = Option("int", None, low=1, auto=True, nullable=True,
                       help="blocks of the partitioned schedule (no stale counts but n_k), "
                            "which threads work on in parallel, used when inference.chunks is "
                            "null: 1 = exact sequential sampler; null or auto = 2 (1 below "
                            "65,536 tokens), fixed by the corpus, never by the thread count")


@register
class GibbsDriver(SampledDriver):
    """Collapsed Gibbs sampling; one step is one sweep over the training corpus.

    The template of the sweep-based samplers: a subclass with another document prior (DMR)
    gives the prior of a sweep (:meth:`sweep_prior`), what happens before and after it
    (:meth:`before_sweep`, :meth:`after_sweep`: prior updates) and the state it starts from
    (:meth:`new_state`)."""

    name = "gibbs"
    kind = "sampled"
    paper = "Griffiths & Steyvers 2004; Yao, Mimno & McCallum 2009; Newman et al. 2009"
    STATE = CountState
    WARP = True                 # inference.sampler: auto may pick WarpLDA (one prior only)
    cluster_support = True
    cluster_fold_in = True
    sweep_steps = True
    objective_name = "log_joint_per_token"
    OPTIONS = {
        "burn_in": Option("int", None, low=0, nullable=True,
                          help="sweeps before samples are saved (default: half the iterations)"),
        "thin": Option("int", None, low=1, nullable=True,
                       help="sweeps between saved samples (default: 10 samples after burn-in)"),
        "sparse": Option("bool", True, auto=True,
                         help="SparseLDA sampler (exact); false = dense O(K); auto = chosen "
                              "before every sweep from the counts (see sparse_sweep)"),
        "sampler": Option("choice", None, choices=("sparse", "dense", "mh", "warp", "auto"),
                          nullable=True,
                          help="sparse = SparseLDA, dense = dense O(K), mh = Metropolis-Hastings "
                               "O(1) per token (approximate per sweep), warp = Metropolis-"
                               "Hastings in WarpLDA's order: O(1) per token reading one word's "
                               "or one document's counts at a time, exact (docs/algorithms.md "
                               "§2.9); auto = warp "
                               f"from K = {WARP_FROM_K} (dmr-sem: mh from K = {MH_FROM_K}), "
                               "else as inference.sparse; null = as inference.sparse"),
        # null defaults, so that runs saved before these keys existed resume unchanged
        "mh_steps": Option("int", None, low=1, nullable=True,
                           help="mh, warp: cycles of a word and a document proposal per "
                                f"token (null: {MH_STEPS})"),
        "mh_rebuild": Option("int", None, low=1, high=MAX_REBUILD, nullable=True,
                             help="mh: sweeps between rebuilds of the word proposal's tables "
                                  f"(null: {MH_REBUILD})"),
        "chunks": CHUNKS_OPTION,
        "blocks": BLOCKS_OPTION,
        "optimize_interval": Option("int", 20, low=1,
                                    help="sweeps between alpha updates when model.alpha is auto"),
        "optimize_burn_in": Option("int", 50, low=0,
                                   help="sweeps before the first alpha update"),
    }

    @classmethod
    def check_config(cls, data: dict, where: str) -> None:
        resolve_sample_schedule(data["inference"], where)
        check_schedule(data, where, cls.WARP)

    MEMORY_FIX = ("choose inference.sampler: warp (no K x V or D x K arrays), set "
                  "training.eval_every: 0 (no phi-hat during training)")

    @classmethod
    def memory_arrays(cls, data: dict, counts: dict) -> list[tuple[str, tuple[int, ...], int]]:
        """The chain's arrays as the sampler the config picks allocates them: z, and either
        WarpLDA's word order (§2.9) or the int32 counts n_kw and n_dk with SparseLDA's word
        lists or MH's alias tables; and what an in-training evaluation adds at its peak:
        phi-hat (V, K) float64 (WarpLDA scores from its non-zero counts instead), the rows of
        phi-hat of the curve documents' words the fold-in copies, and their theta-hat.
        Checkpoints and samples are written from the arrays themselves, without a copy."""
        inference, model, evaluation = data["inference"], data["model"], data["evaluation"]
        K, V = int(model["topics"]), counts["vocabulary"]
        D, N = counts["train_documents"], counts["train_tokens"]
        arrays = [("topic of every token", (N,), 4)]
        sampler = resolved_sampler(inference, K, cls.WARP)
        if sampler == "warp":
            chunks = inference.get("chunks")
            blocks = (resolve_chunks(chunks, N) if chunks is not None
                      else resolve_blocks(inference.get("blocks"), N))
            arrays += [("WarpLDA word order", (N,), 4), ("WarpLDA entry documents", (N,), 4),
                       ("WarpLDA word cuts", (V, blocks + 1), 8),
                       ("sample non-zero counts", (N,), 8)]
        else:
            arrays += [("topic-word counts", (V, K), 4), ("document-topic counts", (D, K), 4)]
            # AD-LDA (inference.chunks, and always MH): with C chunks, chunk 1 samples on a
            # snapshot of the counts of the start of the sweep, chunks 2.. on a copy of it
            # that each thread (or chunk) has of its own
            chunks = inference.get("chunks")
            C = 1 if chunks is None and sampler != "mh" else resolve_chunks(chunks or "auto", N)
            copies = 0 if C < 2 else 1 + min(C - 2, int(data["training"]["threads"]))
            if sampler == "mh":
                arrays += [("MH word order", (N,), 8),
                           ("MH alias tables", (min(N, V * K),), 4 + 4 + 8 + 4)]
            elif sampler == "sparse" or (sampler is None and inference.get("sparse") is not False):
                arrays.append(("SparseLDA word-topic lists", (1 + copies, min(N, V * K)), 8))
            elif copies:
                arrays.append(("AD-LDA copies of the topic-word counts", (copies, V, K), 4))
        test_docs = counts["test_documents"]
        if data["training"].get("eval_every") and test_docs:
            curve = evaluation.get("curve_docs")
            docs = test_docs if curve is None else min(int(curve), test_docs)
            tokens = counts["test_observed_tokens"] * docs // test_docs
            if sampler != "warp":       # one the fold-in samples with, one mixed with theta
                arrays.append(("phi-hat", (2, V, K), 8))
                arrays.append(("phi-hat of the curve's words", (min(V, tokens), K), 8))
            arrays.append(("theta-hat of the curve", (docs, K), 8))
        return arrays

    @classmethod
    def resume_config(cls, config, arrays: dict):
        """A run trained with ``sampler: auto`` before auto could pick WarpLDA (its checkpoint
        holds dense counts) continues with the sampler auto picked then (§2.9)."""
        inference = config.inference
        if not (uses_warp(inference, config.model.topics, cls.WARP) and "ndk" in arrays):
            return config
        data = config.to_dict()
        data["inference"]["sampler"] = resolved_sampler(inference, config.model.topics, False)
        log.info("the run was trained with inference.sampler: auto = %s; it continues so",
                 data["inference"]["sampler"] or "as inference.sparse")
        return type(config)(data, config.source)

    def __init__(self, config, store, threads: int = 1, *,
                 streams: Streams | None = None):
        super().__init__(config, store, threads, streams=streams)
        self.doc_ptr, self.words = self.token_view
        opts = config.inference
        choice = getattr(opts, "sampler", None)
        use_mh = uses_mh(opts, self.K, self.WARP)
        use_warp = uses_warp(opts, self.K, self.WARP)
        self._schedule(opts, use_mh or use_warp)
        self.mh = self.warp = None
        steps = MH_STEPS if getattr(opts, "mh_steps", None) is None else opts.mh_steps
        if (use_mh or use_warp) and self.K > self.n_tokens:
            log.warning("model.n_topics = %d is more than the %d training tokens: most "
                        "topics stay empty", self.K, self.n_tokens)
        if use_mh:
            rebuild = MH_REBUILD if opts.mh_rebuild is None else opts.mh_rebuild
            self.mh = MHSampler(steps, rebuild, self.words, self.V, self.K)
        if use_warp:
            self.warp = WarpSampler(steps, self.doc_ptr, self.words, self.V, word_blocks(
                word_frequencies(self.words, self.V), self.n_chunks), self.bounds)
            self.STATE = WarpState
        self.mh_steps = steps
        sparse = {"sparse": True, "dense": False}.get(choice, opts.sparse)
        self.sampler = SweepSampler(False if use_mh or use_warp else sparse, self.words, self.V,
                                    self.K, self.word_block)
        self.cluster = None         # the Dask cluster the shards sweep on (use_cluster)
        self.remote = None
        self._restart: RestartPoint | None = None
        self._updating = False      # inside after_sweep's alpha update

    def _schedule(self, opts, use_mh: bool) -> None:
        """The documents' chunks (AD-LDA: ``inference.chunks`` given, or the MH sampler, which
        has no partitioned sweep) or blocks (the partitioned schedule, §2.8, and the token
        order it visits), each with its own stream."""
        blocks = getattr(opts, "blocks", None)
        self.order = self.word_block = None
        if opts.chunks is not None or use_mh:
            setting = "auto" if opts.chunks is None else opts.chunks
            self.bounds = chunk_bounds_by_tokens(self.doc_ptr,
                                                 resolve_chunks(setting, self.n_tokens))
            self.n_chunks = self.bounds.size - 1
            warn_idle_threads(setting, self.threads, self.n_chunks)
            return
        self.bounds = chunk_bounds_by_tokens(self.doc_ptr, resolve_blocks(blocks, self.n_tokens))
        self.n_chunks = self.bounds.size - 1
        warn_idle_threads(blocks, self.threads, self.n_chunks, "inference.blocks", "more blocks")
        if self.n_chunks > 1:
            self.word_block = word_blocks(word_frequencies(self.words, self.V), self.n_chunks)
            self.order = block_order(self.doc_ptr, self.words, self.word_block, self.n_chunks)

    def use_cluster(self, cluster) -> None:
        """Sweep the shards on ``cluster``: z and ndk live on its workers between sweeps, and
        the driver's copies are brought up to date when something reads them (checkpoints,
        samples, alpha updates, the log joint)."""
        if type(self).cluster_support is not True:
            raise NotImplementedError(f"{self.name} does not run on a cluster")
        if self.mh is not None or self.warp is not None:
            name = "mh" if self.mh is not None else "warp"
            raise UsageError(f"inference.sampler: {name} does not run on a Dask cluster; train "
                             f"it on one machine or choose inference.sampler: sparse")
        from topictk.inference.cluster import ShardedGibbs
        self.cluster = cluster
        self.remote = ShardedGibbs(cluster, self.store, self.doc_ptr, self.bounds)

    # ------------------------------------------------------------------ state
    def init_state(self) -> CountState:
        """Every token's topic uniform from the init stream (§2.2), counts to match (for
        WarpLDA n_k only, §2.9)."""
        if self.warp is not None:
            z = initial_topics(self.n_tokens, self.K, self.streams.persistent(keys.INIT))
            return self.new_state(z, None, None,
                                  word_frequencies(z, self.K))
        z = np.zeros(self.n_tokens, dtype=np.int32)
        ndk = np.zeros((self.n_docs, self.K), dtype=np.int32)
        nkw = np.zeros((self.V, self.K), dtype=np.int32)
        nk = np.zeros(self.K, dtype=np.int64)
        _gibbs.init_topics(self.doc_ptr, self.words, z, ndk, nkw, nk,
                           self.streams.persistent(keys.INIT))
        return self.new_state(z, ndk, nkw, nk)

    def new_state(self, z, ndk, nkw, nk) -> CountState:
        alpha = resolve_alpha(self.config.model.alpha, self.K)
        return self.STATE(z=z, ndk=ndk, nkw=nkw, nk=nk, alpha=alpha,
                          beta=float(self.config.model.beta))

    # ------------------------------------------------------------------- step
    def sweep_prior(self, state: CountState) -> np.ndarray:
        """The (1, K) or (D, K) Dirichlet prior of theta the sweep samples with."""
        return np.ascontiguousarray(state.alpha.reshape(1, -1))

    def before_sweep(self, state: CountState, sweep: int) -> dict:
        """Updates due before sweep ``sweep`` (1-based); returns what to log."""
        return {}

    def after_sweep(self, state: CountState) -> None:
        """alpha's fixed-point update (§2.5) every optimize_interval sweeps after
        optimize_burn_in, when model.alpha is auto."""
        opts = self.config.inference
        if (self.config.model.alpha == "auto" and state.step > opts.optimize_burn_in
                and state.step % opts.optimize_interval == 0):
            if self.warp is not None:        # from the non-zero n_dk of z (§2.9)
                rows = sparse_counts(self.doc_ptr, None, state.z, self.K, "ndk")
                state.alpha = minka_alpha_of_rows(rows["ndk_ptr"], rows["ndk_topic"],
                                                  rows["ndk_count"], state.alpha)
                return
            # a worker lost while ndk is brought back: the sweeps redone stop short of this
            # update, which is made here (see _recover)
            previous, self._updating = self._updating, True
            try:
                ndk = self.synced(state).ndk
            finally:
                self._updating = previous
            state.alpha = minka_alpha(ndk, state.alpha)

    def step(self, state: CountState, t: int) -> StepInfo:
        """Sweep t + 1: every shard (doc block, or AD-LDA chunk) samples its documents with
        its own stream (§2.8, §2.4)."""
        extra = self.before_sweep(state, t + 1)
        chunk_streams = self.streams.chunk_streams((3,), self.n_chunks, persistent=True)
        if self.mh is not None:
            self.mh.sweep(state, self.sweep_prior(state), self.bounds, chunk_streams,
                          self.doc_ptr, self.words, self.threads)
            fallbacks, sparse = 0, None
        elif self.warp is not None:
            word_streams = self.streams.chunk_streams(keys.WARP_WORDS, self.n_chunks,
                                                      persistent=True)
            state.ndk = state.nkw = None    # the chain is z and nk (§2.9)
            self.warp.sweep(state, self.sweep_prior(state), self.bounds, chunk_streams,
                            word_streams, self.doc_ptr, self.words, self.threads)
            fallbacks, sparse = 0, None
        elif self.remote is not None:
            fallbacks, sparse = self._remote_sweep(state, chunk_streams)
        else:
            fallbacks, sparse = self.sampler.sweep(state, self.sweep_prior(state), self.bounds,
                                                   chunk_streams, self.doc_ptr, self.words,
                                                   self.threads, self.order)
        state.step = t + 1
        self.after_sweep(state)
        opts = self.config.inference
        collect = (state.step > opts.burn_in and (state.step - opts.burn_in) % opts.thin == 0)
        extra["fallbacks"] = fallbacks
        extra["sampler"] = (("warp" if self.warp is not None else "mh") if sparse is None
                            else ("sparse" if sparse else "dense"))
        return StepInfo(tokens=self.n_tokens, documents=self.n_docs, collect_sample=collect,
                        extra=extra)

    def _remote_sweep(self, state: CountState, chunk_streams: list) -> tuple[int, bool]:
        """The sweep of :meth:`step` on the cluster: the same sampler choice, made here from
        the global counts, and the same chunks with the same streams. A worker lost on the way
        is recovered from (:meth:`_recover`) and the sweep done again."""
        from topictk.inference.cluster import with_recovery
        sparse = sparse_sweep(self.sampler.setting, state.nkw, self.sampler.word_freq)

        def attempt() -> tuple[int, bool]:
            if self.remote.shards is None:
                self.remote.distribute(state.z, state.ndk)
            if not self.remote.stale:           # the driver holds the whole state: keep it
                self._restart = RestartPoint.of(state, chunk_streams)
            fallbacks = self.remote.sweep(state.nkw, state.nk, self.sweep_prior(state),
                                          state.beta, sparse, chunk_streams)
            return fallbacks, sparse

        return with_recovery(self.cluster, lambda exc: self._recover(state, chunk_streams, exc),
                             attempt)

    def _recover(self, state: CountState, chunk_streams: list, exc: Exception) -> None:
        """After a worker was lost: go back to the last step at which the driver held the whole
        state (its z and ndk as last gathered, with the counts, alpha and chunk streams kept
        then), send the shards out again and redo the sweeps since then. The chain is a
        function of that state, so the sweeps redone are the ones lost, bit for bit."""
        from topictk.inference.cluster import warn_redo
        self.cluster.check_connected()
        upto, back = state.step, self._restart
        # lost in the middle of after_sweep of step upto: that update is the caller's to make
        partial = self._updating
        warn_redo(exc, back.step, upto, "sweeps")
        self.remote.release()
        back.restore(state, chunk_streams)
        self.remote.stale = False       # state.z and state.ndk are those of back.step
        for t in range(back.step, upto):
            self._remote_sweep(state, chunk_streams)
            state.step = t + 1
            if not (partial and t + 1 == upto):
                self.after_sweep(state)

    def synced(self, state: CountState) -> CountState:
        """``state`` with z and ndk brought back from the cluster when they are behind, or
        with ndk and nkw counted when a WarpLDA state has none (:meth:`counted`)."""
        self.counted(state)
        if self.remote is None or not self.remote.stale:
            return state
        from topictk.inference.cluster import with_recovery
        chunk_streams = self.streams.chunk_streams((3,), self.n_chunks, persistent=True)
        with_recovery(self.cluster, lambda exc: self._recover(state, chunk_streams, exc),
                      lambda: self.remote.gather(state.z, state.ndk))
        return state

    def counted(self, state: CountState) -> CountState:
        """``state`` with ndk and nkw counted from z when it has none (a WarpLDA-order state
        keeps z and nk only, §2.9)."""
        if state.ndk is None:
            state.ndk = np.zeros((self.n_docs, self.K), dtype=np.int32)
            state.nkw = np.zeros((self.V, self.K), dtype=np.int32)
            _warp.count_topics(self.doc_ptr, self.words, state.z, state.ndk, state.nkw)
        return state

    def mark_step(self, state: CountState) -> None:
        """Nothing to copy: the restart point of the sweeps on the cluster is the mark."""

    def roll_back(self, state: CountState) -> int:
        """After the cluster was lost: the state as the driver last held it whole (the step
        before the sweep under way, or an earlier one when z and ndk were last gathered then);
        the shards are gone with the cluster."""
        if self.remote.stale:
            chunk_streams = self.streams.chunk_streams((3,), self.n_chunks, persistent=True)
            self._restart.restore(state, chunk_streams)
        self.remote.shards, self.remote.stale = None, False
        return state.step

    def state_to_arrays(self, state: CountState) -> tuple[dict, dict[str, np.ndarray]]:
        return super().state_to_arrays(state if self.warp is not None else self.synced(state))

    def topic_word(self, state: CountState) -> np.ndarray:
        return self.counted(state).topic_word()

    def fold_in(self, state: CountState, documents, plan, *, prior=None,
                sample: dict | None = None) -> np.ndarray:
        """With ``evaluation.fold_in: mh``, by MH (§2.7): the word proposal's tables from the
        counts of ``sample`` (or of the state), O(mh_steps) per token; else by the Gibbs
        fold-in, for a WarpLDA chain from its non-zero counts (§2.9): the dense path's numbers
        without the (V, K) phi-hat."""
        mh = getattr(self.config.evaluation, "fold_in", "gibbs") == "mh"
        rows = None if mh else self._fold_in_rows(state, sample, prior)
        if not mh and rows is None:
            return super().fold_in(state, documents, plan, prior=prior, sample=sample)
        if prior is None:
            if sample is not None:
                raise ValueError("a fold-in with a saved sample needs the documents' prior")
            prior = self.document_prior(state, None)
        nk = state.nk if sample is None else sample["nk"]
        if rows is not None:
            return sparse_fold_in_theta(rows, nk, state.beta, prior, documents, plan)
        nkw = self.counted(state).nkw if sample is None else dense_counts(sample, "nkw", self.K)
        return mh_fold_in(nkw, nk, state.beta, prior, documents.doc_ptr, documents.words,
                          plan, self.mh_steps)

    def _fold_in_rows(self, state: CountState, sample: dict | None,
                      prior) -> dict[str, np.ndarray] | None:
        """The non-zero n_kw a WarpLDA chain's Gibbs fold-in reads (of ``sample``, or of the
        state); None when the dense path folds in: another sampler, a sample with dense
        counts, or a prior per document."""
        if self.warp is None or (prior is not None and np.ndim(prior) > 1
                                 and np.shape(prior)[0] != 1):
            return None
        if sample is None:
            return self._word_rows(state)
        return sample if "nkw_ptr" in sample else None

    def objective(self, state: CountState) -> float:
        """Collapsed log joint ln p(w, z | alpha, beta) per token (§1.3), summed in blocks of
        rows so that no (D, K) or (V, K) float temporary is made; a WarpLDA chain's from its
        non-zero counts (:meth:`_sparse_objective`)."""
        if self.warp is not None:
            return self._sparse_objective(state)
        alpha, beta = state.alpha, state.beta
        self.synced(state)
        V = self.V
        lengths = np.diff(self.doc_ptr)
        doc_part = self.n_docs * (gammaln(alpha.sum()) - gammaln(alpha).sum())
        doc_part -= gammaln(alpha.sum() + lengths).sum()
        for begin in range(0, self.n_docs, 1024):
            doc_part += gammaln(state.ndk[begin:begin + 1024] + alpha).sum()
        topic_part = self.K * gammaln(V * beta) - gammaln(V * beta + state.nk).sum()
        for begin in range(0, V, 1024):
            rows = state.nkw[begin:begin + 1024]
            nz = rows[rows > 0]
            topic_part += (gammaln(nz + beta) - gammaln(beta)).sum()
        return float((doc_part + topic_part) / max(self.n_tokens, 1))

    def ranked_words(self, state: CountState,
                     n: int) -> tuple[np.ndarray, np.ndarray] | None:
        """A WarpLDA chain's from the non-zero n_kw of z (phi-hat_kw grows with n_kw within a
        topic), with phi-hat_kw = (n_kw + beta) / (n_k + V beta) of each, without the (V, K)
        counts; None for the other samplers."""
        if self.warp is None:
            return None
        top, counts = top_words_of_rows(self._word_rows(state), self.K, n)
        probabilities = counts.astype(np.float64)
        probabilities += state.beta
        probabilities /= (state.nk + self.V * state.beta)[:, None]
        return top, probabilities

    def _word_rows(self, state: CountState) -> dict[str, np.ndarray]:
        """A WarpLDA chain's non-zero n_kw (``nkw_*``, §2.9), counted from z once per sweep
        (kept in ``state.word_rows``, which a sweep clears)."""
        if state.word_rows is None:
            state.word_rows = sparse_counts(self.warp.word_ptr, self.warp.word_tokens, state.z,
                                            self.K, "nkw")
        return state.word_rows

    def _sparse_objective(self, state: CountState, block: int = 1 << 20) -> float:
        """:meth:`objective` from the non-zero counts of z (§2.9): sum_dk ln Gamma(n_dk +
        alpha_k) is D sum_k ln Gamma(alpha_k) plus, over the non-zero n_dk, ln Gamma(n_dk +
        alpha_k) - ln Gamma(alpha_k); the same value up to rounding, in memory O(non-zeros)."""
        alpha, beta = state.alpha, state.beta
        lengths = np.diff(self.doc_ptr)
        doc_part = self.n_docs * gammaln(alpha.sum()) - gammaln(alpha.sum() + lengths).sum()
        ndk = sparse_counts(self.doc_ptr, None, state.z, self.K, "ndk")
        for begin in range(0, ndk["ndk_count"].size, block):
            a = alpha[ndk["ndk_topic"][begin:begin + block]]
            doc_part += (gammaln(ndk["ndk_count"][begin:begin + block] + a) - gammaln(a)).sum()
        del ndk
        topic_part = self.K * gammaln(self.V * beta) - gammaln(self.V * beta + state.nk).sum()
        nkw = self._word_rows(state)
        for begin in range(0, nkw["nkw_count"].size, block):
            part = nkw["nkw_count"][begin:begin + block]
            topic_part += (gammaln(part + beta) - gammaln(beta)).sum()
        return float((doc_part + topic_part) / max(self.n_tokens, 1))

    def sample(self, state: CountState) -> dict[str, np.ndarray]:
        """The counts a sample keeps: n_kw, n_k, alpha, and n_dk for Protocol B. A WarpLDA
        chain's are its non-zero counts (:func:`topictk.state.counts.sparse_counts`, §2.9),
        counted from z, so that sampling adds no (V, K) or (D, K) array to its memory."""
        protocol_b = self.store.train_heldout() is not None
        if self.warp is not None:
            arrays = {**self._word_rows(state), "nk": state.nk, "alpha": state.alpha}
            if protocol_b:
                arrays.update(sparse_counts(self.doc_ptr, None, state.z, self.K, "ndk"))
            return arrays
        # the arrays are written to disk (or used) at once: no copy of the counts is needed
        arrays = {"nkw": state.nkw, "nk": state.nk, "alpha": state.alpha}
        if protocol_b:                              # Protocol B scores with n_dk per sample
            arrays["ndk"] = self.synced(state).ndk
        return arrays

    # ---------------------------------------------------------------- scoring
    def sample_phi(self, state: CountState, sample: dict) -> np.ndarray:
        return phi_hat(dense_counts(sample, "nkw", self.K), sample["nk"], state.beta)

    def sample_prior(self, state: CountState, sample: dict, documents: str) -> np.ndarray:
        return sample["alpha"]

    def averaged_fold_in(self, state: CountState, samples: list[dict] | None, docs,
                         documents: str, pass_index: int) -> np.ndarray:
        """Samples kept as non-zero counts (a WarpLDA chain's, §2.9) are scored by the Gibbs
        fold-in without forming phi-hat (:func:`topictk.inference.warp.sparse_fold_in`): the
        numbers of the dense path, in memory O(non-zeros + K) instead of O(V K)."""
        samples = self.scored_samples(state, samples)
        if (self.warp is None or getattr(self.config.evaluation, "fold_in", "gibbs") != "gibbs"
                or not all("nkw_ptr" in s for s in samples)):
            return super().averaged_fold_in(state, samples, docs, documents, pass_index)
        total = np.zeros(np.asarray(docs.heldout.indices).size)
        for s in samples:
            total += sparse_fold_in(s, state.beta, self.sample_prior(state, s, documents),
                                    docs, evaluation_plan(self, docs, pass_index))
        return total / len(samples)

    def train_heldout_probabilities(self, state: CountState, samples,
                                    heldout) -> np.ndarray:
        """Protocol B (§11.2): p-hat = (1/S) sum_s sum_k theta-hat^s_dk phi-hat^s_kw with
        theta-hat^s = (n_dk + alpha_d)/(N_d + alpha_d.) (TNW 2007 eq. 20), over the saved
        samples that hold n_dk (the current state when there are none); from a sample's
        non-zero counts when it keeps those (§2.9)."""
        samples = [s for s in (samples or []) if "ndk" in s or "ndk_ptr" in s] or [
            self.sample(state) if self.warp is not None
            else self.sample(state) | {"ndk": self.synced(state).ndk}]
        total = np.zeros(np.asarray(heldout.indices).size)
        for s in samples:
            alpha = self.sample_prior(state, s, "train")
            if "ndk_ptr" in s and "nkw_ptr" in s and alpha.ndim == 1:
                total += sparse_mixture(s, state.beta, alpha, heldout, self.threads)
                continue
            ndk = dense_counts(s, "ndk", self.K).astype(np.float64)
            alpha_sum = alpha.sum() if alpha.ndim == 1 else alpha.sum(axis=1, keepdims=True)
            theta = (ndk + alpha) / (ndk.sum(axis=1, keepdims=True) + alpha_sum)
            total += mixture_probabilities(heldout, theta, self.sample_phi(state, s),
                                           self.threads)
        return total / len(samples)

    def state_sizes(self) -> dict:
        return {**super().state_sizes(), "M": self.mh_steps}

    def check_resumable(self, state: CountState) -> None:
        if self.warp is not None and state.prop is not None:
            raise ValueError(f"the state of step {state.step} holds the pending proposals of "
                             f"the earlier inference.sampler = warp kernel, whose chain this "
                             f"version cannot continue (its topics can still be evaluated); "
                             f"train the run again from the start")

    def check_restored(self, state: CountState) -> None:
        if (self.mh is not None and state.step % self.mh.rebuild != 0
                and state.table_z is None):
            raise ValueError(f"the state of step {state.step} has no table_z, which "
                             f"inference.mh_rebuild = {self.mh.rebuild} needs")

    def check_state(self, state: CountState) -> None:
        if not np.all(np.isfinite(state.alpha)):
            raise NumericalError(f"alpha became non-finite at step {state.step}")
