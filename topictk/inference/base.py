"""The interface every inference algorithm implements (docs/extending.md, docs/algorithms.md).

The training loop and the evaluator call only these methods, and read what a driver can do
from its one declared :class:`Traits` record, so they know nothing algorithm-specific:

* ``init_state()``: the initial state (draws from the init stream of ``self.streams``,
  the keyed random streams the driver was constructed with).
* ``step(state, t) -> StepInfo``: one sweep (batch algorithms) or one mini-batch update.
* ``topic_word(state)``: phi-hat, (K, V), rows on the simplex.
* ``sample(state)``: arrays saved as one posterior sample for evaluation.
* ``heldout_probabilities(state, samples, test, pass_index)``: p-hat(w | observed part) of
  every held-out entry of the test documents (fold-in with the globals frozen, §11.2).
* ``state_to_arrays(state)`` / ``state_from_arrays(arrays, header)``: persistence.
* ``train_heldout_probabilities(state, samples, heldout)`` (optional): Protocol B scoring of
  the training documents' held-out tokens with their own training state.
"""
from __future__ import annotations

import copy
import logging
from abc import ABC, abstractmethod
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any, ClassVar, Mapping

import numpy as np

from topictk.config.loader import dense_arrays
from topictk.config.schema import Option
from topictk.corpus.batches import FEISTEL_ROUNDS
from topictk.corpus.features import FeatureEncoding
from topictk.corpus.store import CorpusStore, Documents, ptr_to_csr
from topictk.errors import UsageError
from topictk.state import schema
from topictk.streams import Streams, eval_key, grow_key, infer_key

log = logging.getLogger("topictk")


@dataclass
class StepInfo:
    """What one training step did."""

    tokens: int                    # training tokens visited
    documents: int                 # training documents visited
    collect_sample: bool = False   # the loop should save driver.sample(state)
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class EvaluationSet:
    """Test documents: observed tokens (both representations) and held-out entries (CSR).

    ``fold_in``, when given, is the (sweeps, burn-in) of a Gibbs fold-in that replaces
    ``evaluation.fold_in_sweeps`` / ``fold_in_burn_in`` (the in-training curve's shorter one).
    """

    observed: Documents
    heldout: Documents
    fold_in: tuple[int, int] | None = None
    # the store's test documents these are (sorted), None = all of them: a fold-in on a Dask
    # cluster, whose workers read the documents from the store, takes the same ones
    rows: np.ndarray | None = None

    @classmethod
    def from_store(cls, store: CorpusStore) -> "EvaluationSet":
        return cls(store.test_observed(), store.test_heldout())

    @property
    def n_heldout_tokens(self) -> int:
        return self.heldout.n_tokens

    @property
    def n_docs(self) -> int:
        return self.observed.n_docs

    def curve(self, n_docs: int | None, fold_in: tuple[int, int] | None) -> "EvaluationSet":
        """The documents the in-training curve scores: ``n_docs`` of them spread evenly over
        the test set in store order (documents floor(i D / n), so no stretch of the input
        order is favoured; None or D or more = all), with the fold-in ``fold_in``."""
        if n_docs is None or n_docs >= self.n_docs:
            return EvaluationSet(self.observed, self.heldout, fold_in)
        rows = (np.arange(n_docs, dtype=np.int64) * self.n_docs) // n_docs
        return EvaluationSet(take_documents(self.observed, rows),
                             take_documents(self.heldout, rows), fold_in, rows)


def row_range(ptr, first: int, end: int, *values) -> tuple:
    """Rows ``first`` .. ``end - 1`` of CSR arrays (``ptr``, ``values``...): the offsets from
    0 (int64) and the values' stretch, contiguous (slices of contiguous arrays are views)."""
    ptr = np.asarray(ptr)
    lo, hi = int(ptr[first]), int(ptr[end])
    return (np.ascontiguousarray(ptr[first:end + 1] - lo, dtype=np.int64),
            *(np.ascontiguousarray(np.asarray(v)[lo:hi]) for v in values))


def _take_rows(ptr: np.ndarray, rows: np.ndarray, *values: np.ndarray):
    """The CSR rows ``rows`` of (``ptr``, ``values``...): the new offsets and values."""
    lengths = ptr[rows + 1] - ptr[rows]
    new_ptr = np.zeros(rows.size + 1, dtype=np.int64)
    np.cumsum(lengths, out=new_ptr[1:])
    index = np.concatenate([np.arange(ptr[r], ptr[r + 1], dtype=np.int64) for r in rows]
                           or [np.zeros(0, dtype=np.int64)])
    return (new_ptr, *(np.ascontiguousarray(v[index]) for v in values))


def take_documents(docs: Documents, rows: np.ndarray) -> Documents:
    """Documents ``rows`` (sorted, distinct) of ``docs``, copied, in both representations."""
    indptr, indices, counts = _take_rows(docs.indptr, rows, docs.indices, docs.counts)
    doc_ptr = words = None
    if docs.doc_ptr is not None:
        doc_ptr, words = _take_rows(docs.doc_ptr, rows, docs.words)
    return Documents(doc_ptr=doc_ptr, words=words, indptr=indptr, indices=indices,
                     counts=counts)


def chunk_bounds_by_docs(n_docs: int, chunk_docs: int) -> np.ndarray:
    """Consecutive chunks of ``chunk_docs`` documents: boundaries (C + 1,) int64."""
    bounds = np.arange(0, n_docs, chunk_docs, dtype=np.int64)
    return np.append(bounds, np.int64(n_docs))


INFER_CHUNK_DOCS = 64


@dataclass(frozen=True)
class FoldInPlan:
    """How documents are folded in with the topics frozen (§11.2): ``sweeps`` Gibbs sweeps of
    which the first ``burn_in`` are discarded, the documents cut into chunks at ``bounds``
    (C + 1) with one stream per chunk, and ``active`` (D,) the documents to fold in (None: all).
    Deterministic fold-ins (an E-step) use none of it. Made by :meth:`for_infer` or
    :meth:`for_evaluation`, whose stream keys differ."""

    sweeps: int
    burn_in: int
    bounds: np.ndarray
    streams: list
    threads: int = 1
    active: np.ndarray | None = None

    @classmethod
    def for_infer(cls, n_docs: int, *, sweeps: int, burn_in: int, seed: int, threads: int = 1,
                  first_chunk: int = 0) -> "FoldInPlan":
        """``topictk infer``: chunks of ``INFER_CHUNK_DOCS`` documents with ``infer_key`` of
        the chunk's index in the whole input (counted from ``first_chunk``), so the result
        depends on ``seed`` only, not on ``threads`` or on how the input is cut into calls."""
        bounds = chunk_bounds_by_docs(n_docs, INFER_CHUNK_DOCS)
        streams = Streams(seed)
        return cls(int(sweeps), int(burn_in), bounds,
                   [streams.derived(infer_key(first_chunk + c)) for c in range(bounds.size - 1)],
                   int(threads))

    @classmethod
    def for_evaluation(cls, n_docs: int, evaluation, streams: Streams, pass_index: int,
                       threads: int = 1, active: np.ndarray | None = None) -> "FoldInPlan":
        """Scoring (``evaluation`` config section): chunks of ``evaluation.chunk_docs``
        documents with the eval streams (4, ``pass_index``, c)."""
        bounds = chunk_bounds_by_docs(n_docs, evaluation.chunk_docs)
        return cls(int(evaluation.fold_in_sweeps), int(evaluation.fold_in_burn_in), bounds,
                   [streams.derived(eval_key(pass_index, c)) for c in range(bounds.size - 1)],
                   int(threads), active)

    def active_flags(self, n_docs: int) -> np.ndarray:
        """(D,) uint8, 1 for the documents to fold in, as the kernels take them."""
        if self.active is None:
            return np.ones(n_docs, dtype=np.uint8)
        return np.ascontiguousarray(self.active, dtype=np.uint8)


def gibbs_fold_in(weights: np.ndarray, alpha: np.ndarray, doc_ptr: np.ndarray,
                  words: np.ndarray, plan: FoldInPlan) -> np.ndarray:
    """theta-hat (D, K) of documents under fixed word-major sampling weights (V, K) (phi-hat
    for collapsed Gibbs) and a Dirichlet prior (1 or D, K): collapsed Gibbs over each
    document's assignments as ``plan`` says, theta_d = (n-bar_dk + alpha_dk) / (N_d +
    alpha_d.) from the kept sweeps' average counts (kernel
    :func:`topictk.inference._heldout.fold_in_theta`). Rows of documents the plan skips are NaN.
    Only the weights of the words that occur are copied, so new documents cost memory by
    their vocabulary, not by V."""
    from topictk.inference import _heldout

    weights = np.asarray(weights, dtype=np.float64)
    K = weights.shape[1]
    alpha = np.ascontiguousarray(np.atleast_2d(alpha), dtype=np.float64)
    D = doc_ptr.size - 1
    # the draws of a word depend on its own row of weights only, so local word ids give the
    # same chain
    vocab, local = np.unique(np.asarray(words), return_inverse=True)
    active = plan.active_flags(D)
    theta = np.full((D, K), np.nan)
    _heldout.fold_in_theta(np.ascontiguousarray(doc_ptr, dtype=np.int64),
                           local.reshape(-1).astype(np.int32),
                           np.ascontiguousarray(weights[vocab]), alpha, plan.sweeps,
                           plan.burn_in, np.ascontiguousarray(plan.bounds, dtype=np.int64),
                           plan.streams, active, theta, plan.threads)
    return theta


FIXED_POINT = "fixed-point"     # evaluation.fold_in of the deterministic fold-in


def fixed_point_fold_in(phi: np.ndarray, alpha: np.ndarray, documents: Documents,
                        active: np.ndarray | None, *, tol: float, max_iterations: int,
                        threads: int = 1) -> np.ndarray:
    """theta-hat (D, K) of documents under fixed word-major topics ``phi`` (V, K) and a
    Dirichlet prior (1 or D, K) by the fixed-point fold-in (§11.2, ``evaluation.fold_in:
    fixed-point``): theta_dk <- (sum_w c_dw r_dwk + alpha_dk) / (N_d + alpha_d.) with
    r_dwk proportional to theta_dk phi_wk, from the uniform theta until max_k |change| <
    ``tol`` or ``max_iterations`` updates (kernel
    :func:`topictk.inference._fixed_point.fold_in_theta`). No random numbers: the same at any
    thread count. Rows of documents not ``active`` are NaN."""
    from topictk.inference import _fixed_point

    phi = np.asarray(phi, dtype=np.float64)
    K = phi.shape[1]
    alpha = np.ascontiguousarray(np.atleast_2d(alpha), dtype=np.float64)
    indptr, indices, counts = documents.indptr, documents.indices, documents.counts
    if indptr is None:
        indptr, indices, counts = ptr_to_csr(np.asarray(documents.doc_ptr, dtype=np.int64),
                                             np.asarray(documents.words, dtype=np.int32),
                                             phi.shape[0])
    D = np.asarray(indptr).size - 1
    # only the rows of the words that occur are copied (new documents cost by their vocabulary)
    vocab, local = np.unique(np.asarray(indices), return_inverse=True)
    flags = (np.ones(D, dtype=np.uint8) if active is None
             else np.ascontiguousarray(active, dtype=np.uint8))
    theta = np.full((D, K), np.nan)
    iterations = np.zeros(D, dtype=np.int32)
    _fixed_point.fold_in_theta(np.ascontiguousarray(indptr, dtype=np.int64),
                               local.reshape(-1).astype(np.int32),
                               np.ascontiguousarray(counts, dtype=np.int32),
                               np.ascontiguousarray(phi[vocab]), alpha, flags, float(tol),
                               int(max_iterations), theta, iterations, int(threads))
    return theta


def fixed_point_settings(config) -> tuple[float, int] | None:
    """(tol, max_iterations) when ``config`` scores by the fixed-point fold-in, else None."""
    evaluation = getattr(config, "evaluation", None)
    if getattr(evaluation, "fold_in", "gibbs") != FIXED_POINT:
        return None
    return (float(evaluation.fold_in_tol), int(evaluation.fold_in_max_iterations))


def tokens_by_word(words: np.ndarray, n_words: int, dtype=np.int64,
                   block: int = 1 << 20) -> tuple[np.ndarray, np.ndarray]:
    """The tokens grouped by word, for the samplers that visit a word's tokens together (MH
    tables, WarpLDA's word phase): ``word_ptr`` (V + 1) int64 offsets and ``word_tokens`` (N)
    positions of ``dtype``, the tokens of word w being ``word_tokens[word_ptr[w]:word_ptr[w +
    1]]`` in corpus order: the stable argsort of ``words``, made ``block`` tokens at a time
    (a counting sort of the blocks), so that no N-sized int64 temporary is made."""
    word_ptr = np.zeros(n_words + 1, dtype=np.int64)
    np.cumsum(word_frequencies(words, n_words), out=word_ptr[1:])
    word_tokens = np.empty(words.size, dtype=dtype)
    filled = word_ptr[:-1].copy()          # the next free entry of every word
    for begin in range(0, words.size, block):
        part = words[begin:begin + block]
        order = np.argsort(part, kind="stable")
        ranked = part[order]
        # entry of the i-th token of the sorted block: its word's next free entry plus its
        # rank among the block's tokens of that word
        rank = np.arange(ranked.size) - np.searchsorted(ranked, ranked, "left")
        word_tokens[filled[ranked] + rank] = order + begin
        filled += np.bincount(part, minlength=n_words)
    return word_ptr, word_tokens


def word_frequencies(words: np.ndarray, n_words: int, block: int = 1 << 20) -> np.ndarray:
    """Occurrences of every word id in ``words``, counted block by block: ``np.bincount``
    converts its whole input to intp first, a transient twice the size of an int32 corpus."""
    freq = np.zeros(n_words, dtype=np.int64)
    for begin in range(0, words.size, block):
        freq += np.bincount(words[begin:begin + block], minlength=n_words)
    return freq


def chunk_bounds_by_tokens(doc_ptr: np.ndarray, n_chunks: int) -> np.ndarray:
    """C contiguous blocks of documents with about equal token counts (greedy, §2.4)."""
    n_docs = doc_ptr.size - 1
    n_chunks = max(1, min(n_chunks, n_docs))
    total = int(doc_ptr[-1])
    targets = (np.arange(1, n_chunks) * total) / n_chunks
    inner = np.searchsorted(doc_ptr[1:], targets, side="left") + 1
    bounds = np.concatenate([[0], inner, [n_docs]]).astype(np.int64)
    return np.maximum.accumulate(bounds)


#: ``inference.chunks: auto``: this many AD-LDA chunks for a corpus of at least
#: AUTO_CHUNK_TOKENS training tokens, else 1 (docs/algorithms.md §2.4; the default of the Gibbs
#: drivers before the partitioned schedule, still CVB's)
AUTO_CHUNKS = 2
AUTO_CHUNK_TOKENS = 1 << 16


def resolve_chunks(setting, n_tokens: int) -> int:
    """The chunk count of ``inference.chunks``: the number given, or for ``auto`` one fixed by
    the corpus size alone (AUTO_CHUNKS, or 1 below AUTO_CHUNK_TOKENS tokens), so that two
    threads find work and the chain never depends on how many there are."""
    if setting != "auto":
        return int(setting)
    return AUTO_CHUNKS if n_tokens >= AUTO_CHUNK_TOKENS else 1


#: ``inference.blocks: null``: this many blocks of the partitioned schedule for a corpus of
#: at least AUTO_CHUNK_TOKENS training tokens, else 1: the default of runs trained before
#: ``inference.block_sync`` (docs/algorithms.md §2.8)
EARLIER_BLOCKS = 2

#: ``inference.blocks: auto`` (the default): AUTO_BLOCKS blocks from AUTO_CHUNK_TOKENS training
#: tokens (1 block, the exact sampler, below), more for larger corpora ((tokens from, blocks)
#: of MORE_BLOCKS); fixed by the corpus alone. More blocks than threads let a thread that
#: another process slows down take fewer of the sweep's B * B tasks
#: (benchmarks/results/default_threads.md); each document is entered once per block, so more
#: blocks cost one thread a little (+2.5 % at 4 against 2 on 20 Newsgroups, K = 128).
AUTO_BLOCKS = 4
MORE_BLOCKS = ((1 << 22, 8), (1 << 25, 16))


def resolve_blocks(setting, n_tokens: int) -> int:
    """The block count of ``inference.blocks``: the number given; for ``auto`` one fixed by the
    corpus size alone (AUTO_BLOCKS); for null that of runs trained before ``auto``
    (EARLIER_BLOCKS, or 1 below AUTO_CHUNK_TOKENS tokens)."""
    if setting is None:
        return EARLIER_BLOCKS if n_tokens >= AUTO_CHUNK_TOKENS else 1
    if setting != "auto":
        return int(setting)
    blocks = AUTO_BLOCKS if n_tokens >= AUTO_CHUNK_TOKENS else 1
    for tokens, count in MORE_BLOCKS:
        if n_tokens >= tokens:
            blocks = count
    return blocks


def warn_idle_threads(setting, threads: int, n_chunks: int, key: str = "inference.chunks",
                      what: str = "AD-LDA with more chunks") -> None:
    """Say so when threads are left without a chunk (or block) to work on: a warning when the
    count was given in ``key``, a note when it is the default (more would make another chain,
    ``what``)."""
    if threads <= n_chunks:
        return
    if setting in ("auto", None):
        if n_chunks == 1:       # a small corpus: the exact chain, over in moments anyway
            return
        log.info("%s auto = %d for this corpus: %d of the %d threads work on the sweep; set "
                 "%s >= threads to use them all (a different chain: %s)", key, n_chunks,
                 n_chunks, threads, key, what)
    else:
        log.warning("training.threads = %d but %s = %d: only %d thread(s) can work; set %s >= "
                    "threads", threads, key, n_chunks, n_chunks, key)


@dataclass(frozen=True)
class MemorySizes:
    """The sizes a run's arrays are made of, for the memory check before training
    (:meth:`Driver.memory_arrays`), from its resolved config and its store's counts: K, V,
    D (training documents), N (training tokens), M (training (document, word) pairs), the
    training threads, and what an in-training evaluation scores: ``curve_docs`` test
    documents with ``curve_tokens`` observed tokens in ``curve_pairs`` pairs (0 when the run
    evaluates nothing), and whether it also scores the training documents' held-out tokens
    (Protocol B)."""

    K: int
    V: int
    D: int
    N: int
    M: int
    threads: int
    test_docs: int
    curve_docs: int
    curve_tokens: int
    curve_pairs: int
    train_heldout: bool

    @classmethod
    def of(cls, data: dict, counts: dict) -> "MemorySizes":
        model, training = data["model"], data["training"]
        test_docs = counts["test_documents"]
        docs = tokens = pairs = 0
        if training.get("eval_every") and test_docs:
            curve = data["evaluation"].get("curve_docs")
            docs = test_docs if curve in (None, "auto") else min(int(curve), test_docs)
            tokens = counts["test_observed_tokens"] * docs // test_docs
            pairs = counts.get("test_observed_pairs", tokens) * docs // test_docs
        N = counts["train_tokens"]
        return cls(K=int(model["topics"]), V=counts["vocabulary"], D=counts["train_documents"],
                   N=N, M=counts.get("train_pairs") or N, threads=int(training["threads"]),
                   test_docs=test_docs, curve_docs=docs, curve_tokens=tokens,
                   curve_pairs=pairs,
                   train_heldout=bool(training.get("eval_every"))
                   and counts.get("train_heldout_pairs", 0) > 0)

    @property
    def curve_words(self) -> int:
        """The most distinct words the curve documents hold (a Gibbs fold-in copies the rows
        of its weights for them)."""
        return min(self.V, self.curve_pairs)


class _StateSizes(Mapping):
    """The sizes of a driver's state-shape symbols, looked up when a shape asks for them."""

    # looked up only when a shape asks for them: N reads the whole training corpus
    BASIC = {"K": lambda d: d.K, "V": lambda d: d.V, "D": lambda d: d.n_docs,
             "N": lambda d: d.n_tokens}

    def __init__(self, driver: "Driver"):
        self.driver = driver
        self.extra = driver.state_sizes()

    def __getitem__(self, symbol: str):
        if symbol in self.extra:
            return self.extra[symbol]
        return self.BASIC[symbol](self.driver)

    def __iter__(self):
        return iter(self.extra)

    def __len__(self) -> int:
        return len(self.extra)


#: the sections a driver may offer beyond what every run has, and the method each one reads:
#: ``topics`` and the report list each topic's metadata features (``feature_table``), show
#: the topic hierarchy (``layer_weights``, ``layer_topic_word``), and ``evaluate`` adds the
#: driver's own numbers (``evaluation_report``)
REPORT_SECTIONS = {"features": "feature_table", "tree": "layer_weights",
                   "evaluation": "evaluation_report"}


@dataclass(frozen=True)
class Traits:
    """What a driver can do, declared once on its class (``traits = Traits(...)``): the one
    record that the config checks, training, evaluation and ``topictk algorithms`` read.

    ``family``: the ``model.family`` it trains; ``families``: further model families it
    trains (``gibbs``: keyatm); ``kind``: its docs family page
    (docs/family-KIND.md); ``paper``: the papers ``topictk algorithms`` cites; ``threads``:
    its kernels use ``training.threads``; ``resume``: ``--resume`` continues its chain
    exactly; ``cluster``: its shards run on a Dask cluster (``use_cluster``);
    ``cluster_fold_in``: evaluate's and infer's fold-ins do too; ``own_fold_in``: those
    fold-ins are its own local update (:meth:`Driver.fold_in`, which takes the cluster
    itself), not the Gibbs fold-in with its weights; ``alpha_auto``: it learns
    an asymmetric alpha with ``model.alpha: auto`` (the others refuse it); ``features``: the
    document prior depends on metadata (DMR); ``layered``: topics come in layers (deep LDA);
    ``persistent_evaluation``: held-out evaluation advances a chain kept in the state, so the
    loop evaluates on the ``eval_every`` schedule only and a resumed run may not change it;
    ``sweep_steps``: a step is one Gibbs sweep of every training document (a curve document
    then costs ``curve_fold_in_sweeps`` of a step's documents); ``objective``: the metrics
    name of :meth:`Driver.objective`, None without one; ``report``: the sections of
    REPORT_SECTIONS it offers; ``add_documents``: the model families whose trained state it
    grows to take new documents (:meth:`Driver.grow_state`, ``train --continue --add``);
    ``time_slices``: its topics change from time slice to time slice of the store
    (:meth:`Driver.slice_topic_word`, :meth:`Driver.slice_prevalence`)."""

    family: str = "lda"
    families: tuple[str, ...] = ()
    kind: str = "sampled"
    paper: str = ""
    threads: bool = True
    resume: bool = True
    cluster: bool = False
    cluster_fold_in: bool = False
    own_fold_in: bool = False
    alpha_auto: bool = False
    features: bool = False
    layered: bool = False
    persistent_evaluation: bool = False
    sweep_steps: bool = False
    objective: str | None = None
    report: frozenset[str] = frozenset()
    add_documents: tuple[str, ...] = ()
    time_slices: bool = False

    def __post_init__(self):
        unknown = set(self.report) - set(REPORT_SECTIONS)
        if unknown:
            raise ValueError(f"unknown report sections {sorted(unknown)}; known: "
                             f"{', '.join(REPORT_SECTIONS)}")
        object.__setattr__(self, "report", frozenset(self.report))

    def but(self, **changes) -> "Traits":
        """These traits with ``changes``: a driver that extends another declares only what
        differs."""
        return replace(self, **changes)

    def offers(self, section: str) -> bool:
        """Whether the driver offers report ``section`` (a key of REPORT_SECTIONS)."""
        if section not in REPORT_SECTIONS:
            raise ValueError(f"unknown report section {section!r}")
        return section in self.report


def cannot_add_documents(algorithm: str, family: str) -> UsageError:
    """The refusal of ``train --continue --add`` for a driver and model family whose state
    cannot grow (not in its traits' ``add_documents``)."""
    return UsageError(f"inference.algorithm {algorithm} with model.family {family} cannot add "
                      f"documents to a trained run (topictk algorithms lists those that can); "
                      f"train a new run on a store with all the documents")


@dataclass(frozen=True)
class AddedDocuments:
    """What :meth:`Driver.grow_state` is told about the documents added to a run: the old
    store's sizes (its documents and tokens come first in the union store, its words keep
    their ids) and the keyed streams of the growth's own draws (``streams.derived`` with
    :func:`topictk.streams.grow_key`: a fold-in never moves the run's persistent streams)."""

    n_docs: int             # the old store's training documents, D_old
    n_tokens: int           # its training tokens, N_old
    n_words: int            # its vocabulary, V_old
    streams: Streams
    fold_in_sweeps: int = 10

    def fold_in_plan(self, n_docs: int, threads: int = 1) -> FoldInPlan:
        """The Gibbs fold-in of the ``n_docs`` added documents under the run's topics: chunks
        of INFER_CHUNK_DOCS documents, each with its stream ``grow_key(0, c)``, so the result
        is the same at any thread count."""
        bounds = chunk_bounds_by_docs(n_docs, INFER_CHUNK_DOCS)
        return FoldInPlan(self.fold_in_sweeps, self.fold_in_sweeps // 2, bounds,
                          [self.streams.derived(grow_key(0, c)) for c in range(bounds.size - 1)],
                          threads)


class Driver(ABC):
    """Base class of inference drivers; subclasses register with ``@register``."""

    name: ClassVar[str]
    # what the driver can do (threads, resume, cluster, alpha: auto, report sections, ...)
    traits: ClassVar[Traits] = Traits()
    STATE: ClassVar[type]           # the state class (declares its saved layout, SCHEMA)
    OPTIONS: ClassVar[dict[str, Option]] = {}
    cluster: Any = None             # the cluster it was given

    def __init__(self, config, store: CorpusStore, threads: int = 1, *,
                 streams: Streams | None = None):
        self.config = config
        self.store = store
        self.threads = int(threads)
        # every draw of the run comes from these keyed streams: a new run's are seeded by
        # training.seed, a resumed or loaded run's are restored from its checkpoint
        self.streams = streams if streams is not None else Streams(int(config.training.seed))

    # ------------------------------------------------------------- corpus view
    # The training corpus as every driver sees it (memory-mapped; contiguous views where a
    # kernel wants a dtype). Cached on first use, so a driver pays only for the views it uses.
    @cached_property
    def train_documents(self) -> Documents:
        return self.store.train()

    @cached_property
    def V(self) -> int:
        """Vocabulary size."""
        return self.store.n_words

    @cached_property
    def K(self) -> int:
        """Number of topics (of the bottom layer's config key ``model.topics``)."""
        return int(self.config.model.topics)

    @cached_property
    def n_docs(self) -> int:
        """Training documents, D."""
        return self.train_documents.n_docs

    @cached_property
    def n_tokens(self) -> int:
        """Training tokens, N."""
        return self.train_documents.n_tokens

    @cached_property
    def token_view(self) -> tuple[np.ndarray, np.ndarray]:
        """Representation T of the training corpus: (doc_ptr int64 (D + 1,), words int32 (N,)),
        contiguous (the store's own arrays when they already are)."""
        train = self.train_documents
        return (np.ascontiguousarray(train.doc_ptr, dtype=np.int64),
                np.ascontiguousarray(train.words, dtype=np.int32))

    @cached_property
    def csr_view(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Representation C of the training corpus: (indptr int64, indices int32, counts
        int32), contiguous."""
        train = self.train_documents
        return (np.ascontiguousarray(train.indptr, dtype=np.int64),
                np.ascontiguousarray(train.indices, dtype=np.int32),
                np.ascontiguousarray(train.counts, dtype=np.int32))

    def use_cluster(self, cluster) -> None:
        """Run the shards of every step on ``cluster``
        (:class:`topictk.inference.cluster.Cluster`); only drivers whose traits say
        ``cluster``, which pass ``self.cluster`` on to their shard work."""
        if not self.traits.cluster:
            raise NotImplementedError(f"{self.name} does not run on a cluster")
        self.cluster = cluster

    @property
    def fixed_on_resume(self) -> frozenset[str]:
        """Settings a resumed run of this driver may not change although others' may."""
        return (frozenset({"training.eval_every"}) if self.traits.persistent_evaluation
                else frozenset())

    def scheduled_samples(self, upto: int) -> list[int] | None:
        """The steps up to ``upto`` at which this config collects posterior samples, for
        drivers whose schedule depends on the whole run; None when each step decides."""
        return None

    @classmethod
    def check_config(cls, data: dict, where: str) -> None:
        """Cross-key checks after every key was validated on its own."""

    # what to do when a run would not fit in memory, after "lower model.topics"
    MEMORY_FIX: ClassVar[str] = "use a smaller vocabulary"

    @classmethod
    def memory_arrays(cls, data: dict, counts: dict) -> list[tuple[str, tuple[int, ...], int]]:
        """The large arrays a run of this driver holds at its peak, as (name, shape, bytes per
        element), from the resolved config ``data`` and the corpus store's ``counts``: what
        the memory check before training adds up. Unless a driver says more, the dense
        arrays every algorithm holds (:func:`topictk.config.loader.dense_arrays`)."""
        return dense_arrays(data["model"], counts)

    @classmethod
    def resume_config(cls, config, arrays: dict, saved: dict) -> Any:
        """The driver's resume rules: ``config`` for continuing the chain whose checkpoint
        holds ``arrays`` and whose run saved the settings ``saved`` (its config.yaml as a
        mapping, empty when unreadable). A setting whose meaning changed since the run was
        trained is put back to what it meant then, so that a resumed run continues its own
        chain; a setting put back to its saved value is not a change that resuming refuses
        (here: nothing changed). How old saved *states* are read is declared apart, as
        migrations (:mod:`topictk.state.migrations`)."""
        return config

    @abstractmethod
    def init_state(self) -> Any: ...

    def grow_state(self, old: Any, added: "AddedDocuments") -> Any:
        """The state to continue a trained run with after documents were added
        (``train --continue RUN --add STORE``): ``old`` is the run's state on its own store,
        this driver's store is the union (:mod:`topictk.corpus.union`: the old training
        documents first, then the added ones; the old words keep their ids, new words follow).
        Only drivers whose traits list the model family in ``add_documents`` override it."""
        raise cannot_add_documents(self.name, getattr(self.config.model, "family", "lda"))

    @classmethod
    def takes_new_words(cls, config: Any) -> bool:
        """Whether a run of ``config`` continued with added documents gives the words new to
        its vocabulary their prior (True, the default), or, its topics having no prior (a
        point estimate of phi), has them dropped from the added documents with their tokens,
        which ``train`` reports (:mod:`topictk.corpus.union`)."""
        return True

    def continued_settings(self, state: Any) -> dict[str, Any]:
        """Settings (dotted keys) that a run continued from this one's ``state`` with added
        documents is given: those kept as this run resolved them, where resolving them on the
        larger corpus would change the schedule (online VB's ``tau0: auto``), and those the
        continuation needs (SGRLD's samples are taken after ``state.step``); by default
        none."""
        return {}

    @abstractmethod
    def step(self, state: Any, t: int) -> StepInfo: ...

    @abstractmethod
    def topic_word(self, state: Any) -> np.ndarray: ...

    def objective(self, state: Any) -> float | None:
        """The algorithm's own per-token objective (log joint, bound), if it has one."""
        return None

    def listed_topics(self, state: Any) -> np.ndarray | None:
        """The rows of the topics that every output lists, in the order listed, when not
        every topic (a hierarchical Dirichlet process lists its live topics, largest first;
        each keeps its number, row + 1); None: all, in row order (the default)."""
        return None

    def topic_weights(self, state: Any) -> dict[str, np.ndarray] | None:
        """(K,) weights shown beside each listed topic, by name (a hierarchical Dirichlet
        process: ``pi`` and the token ``share``); None: none (the default)."""
        return None

    def ranked_words(self, state: Any, n: int) -> tuple[np.ndarray, np.ndarray] | None:
        """(K, n) word ids of every topic by :meth:`topic_word` descending, ties by ascending
        word id, and their (K, n) probabilities, when the driver finds them without forming
        topic_word; None: read them from topic_word (the default)."""
        return None

    def sample(self, state: Any) -> dict[str, np.ndarray]:
        """Arrays that make up one saved posterior sample (default: none)."""
        return {}

    @abstractmethod
    def heldout_probabilities(self, state: Any, samples: list[dict[str, np.ndarray]] | None,
                              test: EvaluationSet, pass_index: int) -> np.ndarray: ...

    def state_to_arrays(self, state: Any) -> tuple[dict, dict[str, np.ndarray]]:
        """The header values and named arrays that save ``state`` (its class's ``SCHEMA``)."""
        return schema.to_arrays(state)

    def state_from_arrays(self, header: dict, arrays: dict[str, np.ndarray]) -> Any:
        """The ``STATE`` saved as ``header`` and ``arrays``, every array checked against this
        corpus and model (:func:`topictk.state.schema.from_arrays`); raises ValueError naming
        the field that does not fit."""
        state = schema.from_arrays(self.STATE, header, arrays, _StateSizes(self))
        self.check_restored(state)
        return state

    def state_sizes(self) -> dict[str, Any]:
        """Sizes of the symbols in the state's array shapes beyond K, V, D (training
        documents) and N (training tokens), which are the driver's attributes of those names
        (``n_docs``, ``n_tokens``)."""
        return {"feistel": FEISTEL_ROUNDS, "epoch_state": FEISTEL_ROUNDS + 1}

    def check_resumable(self, state: Any) -> None:
        """Raise ValueError, with the fix, when a restored state can be read (evaluated,
        inferred with) but not continued by this version's sampler (default: it can)."""

    def check_restored(self, state: Any) -> None:
        """Raise ValueError when a restored state contradicts the config in a way its array
        shapes do not show (a setting saved in the state)."""

    def train_heldout_probabilities(self, state: Any, samples: list[dict[str, np.ndarray]] | None,
                                    heldout: Documents) -> np.ndarray | None:
        """Protocol B (§11.1, §11.2): p-hat(w | d) of every held-out entry of the *training*
        documents (row d = training document d), from each document's own training state.
        None when the algorithm does not support it."""
        return None

    def fold_in(self, state: Any, documents: Documents, plan: FoldInPlan, *,
                prior: np.ndarray | None = None, sample: dict | None = None) -> np.ndarray:
        """theta-hat (D, K) of ``documents`` with the model's topics frozen: the one fold-in
        that ``evaluate`` scores with (mixed with the topics, §11.2) and ``infer`` reports.

        ``plan`` says how a sampled fold-in runs (sweeps, chunks, streams, which documents);
        ``prior`` is the documents' Dirichlet prior (1 or D, K), by default
        ``document_prior(state, None)``; ``sample`` is one saved posterior sample whose topics
        to use instead of the state's. The default is the collapsed-Gibbs fold-in of
        :func:`gibbs_fold_in` with :meth:`fold_in_weights`; drivers with another local update
        (an E-step, a deep chain) override it."""
        if prior is None:
            prior = self.document_prior(state, None)
        fixed = fixed_point_settings(self.config)
        if fixed is not None:
            return fixed_point_fold_in(self.topic_word(state).T, prior, documents, plan.active,
                                       tol=fixed[0], max_iterations=fixed[1],
                                       threads=plan.threads)
        return gibbs_fold_in(self.fold_in_weights(state), prior, documents.doc_ptr,
                             documents.words, plan)

    @classmethod
    def heldout_estimator(cls, config) -> str:
        """The estimator of theta that :meth:`heldout_probabilities` scores the runs of
        ``config`` with, as evaluate declares it: ``evaluation.fold_in`` (gibbs, mh or
        fixed-point) by default."""
        return str(getattr(config.evaluation, "fold_in", "gibbs"))

    def fold_in_weights(self, state: Any) -> np.ndarray:
        """The word-major (V, K) weights the default Gibbs fold-in samples with: phi-hat
        (``topic_word``), or what the algorithm's own local step samples with."""
        return self.topic_word(state).T

    def infer_proportions(self, state: Any, doc_ptr: np.ndarray, words: np.ndarray,
                          features: np.ndarray | None, *, sweeps: int, burn_in: int, seed: int,
                          threads: int = 1, first_chunk: int = 0) -> np.ndarray:
        """(D, K) topic proportions of new documents (``topictk infer``): :meth:`fold_in`
        with the documents' ``document_prior`` and the infer plan
        (:meth:`FoldInPlan.for_infer`). ``first_chunk``: the index of the documents' first
        chunk of ``INFER_CHUNK_DOCS`` in the whole input (its streams are keyed by it)."""
        documents, plan = self.new_documents(doc_ptr, words, sweeps=sweeps, burn_in=burn_in,
                                             seed=seed, threads=threads,
                                             first_chunk=first_chunk)
        return self.fold_in(state, documents, plan,
                            prior=self.document_prior(state, features))

    def new_documents(self, doc_ptr: np.ndarray, words: np.ndarray, *, sweeps: int,
                      burn_in: int, seed: int, threads: int = 1,
                      first_chunk: int = 0) -> tuple[Documents, FoldInPlan]:
        """New documents' tokens in both representations, and the infer plan of their
        fold-in (:meth:`FoldInPlan.for_infer`), as :meth:`infer_proportions` takes them."""
        doc_ptr = np.ascontiguousarray(doc_ptr, dtype=np.int64)
        words = np.ascontiguousarray(words, dtype=np.int32)
        indptr, indices, counts = ptr_to_csr(doc_ptr, words, self.V)
        documents = Documents(doc_ptr=doc_ptr, words=words, indptr=indptr, indices=indices,
                              counts=counts)
        return documents, FoldInPlan.for_infer(doc_ptr.size - 1, sweeps=sweeps,
                                               burn_in=burn_in, seed=seed, threads=threads,
                                               first_chunk=first_chunk)

    def document_prior(self, state: Any, features: np.ndarray | None) -> np.ndarray:
        """The Dirichlet prior of theta for new documents (``topictk infer``): (1, K), or
        (D, K) from the documents' ``features`` when the prior depends on metadata
        (traits ``features``). The default is the state's ``alpha``."""
        alpha = getattr(state, "alpha", None)
        if alpha is None:
            raise UsageError(f"'{self.name}' runs have no Dirichlet document prior to fold new "
                             f"documents in with")
        return np.atleast_2d(np.asarray(alpha, dtype=np.float64))

    def features_of(self, documents: str) -> np.ndarray | None:
        """(D, F) the features of the ``"train"`` or ``"test"`` documents that the document
        prior depends on (traits ``features``); None for a prior that depends on none."""
        return None

    def feature_encoding(self) -> FeatureEncoding | None:
        """How new documents' metadata become the features of :meth:`features_of`; None for a
        prior that depends on none."""
        return None

    def feature_names(self) -> list[str]:
        """The names of the columns of :meth:`features_of` (none without features)."""
        return []

    def predictive_topics(self, state: Any, samples: list[dict[str, np.ndarray]] | None,
                          test: EvaluationSet) -> list[tuple[np.ndarray, np.ndarray]]:
        """The (phi-hat (V, K), alpha (1 or D_test, K)) pairs that the left-to-right estimator
        (§11.3) scores the test documents with, one per sample. The default is one pair: the
        topics of ``topic_word`` and the test documents' ``document_prior``."""
        return [(self.topic_word(state).T,
                 self.document_prior(state, self.features_of("test")))]

    def mark_step(self, state: Any) -> None:
        """Before a step on a cluster: keep what :meth:`roll_back` returns to, a copy of the
        state and of the streams (the step's shard work is on the workers, the rest here)."""
        self._mark = (copy.deepcopy(state), self.streams.state())

    def roll_back(self, state: Any) -> int:
        """After the cluster was lost in the middle of a step: put ``state`` and the streams
        back to the last step whose whole state the driver holds, and return that step."""
        saved, streams = self._mark
        vars(state).update(vars(copy.deepcopy(saved)))
        self.streams.restore(streams)
        return state.step

    def check_state(self, state: Any) -> None:
        """Raise :class:`topictk.errors.NumericalError` if global parameters are not finite."""

    # ------------------------------------------------- report sections (traits.report)
    # Called only when the driver's traits offer the section; a driver that declares one
    # overrides its method (the registry checks that it does).
    def feature_table(self, state: Any, n: int) -> list[list[dict]]:
        """Section ``features``: per topic, the ``n`` metadata features that weigh most in its
        document prior, [{"feature", "weight", "contrast"}]."""
        raise NotImplementedError(f"{self.name} offers no feature table")

    def layer_weights(self, state: Any, layer: int) -> np.ndarray:
        """Section ``tree``: the (K_{l-1}, K_l) weights linking the topics of ``layer`` to
        those below it (layer 1: the words)."""
        raise NotImplementedError(f"{self.name} has no topic layers")

    def layer_topic_word(self, state: Any, layer: int) -> np.ndarray:
        """Section ``tree``: the topics of ``layer`` projected onto the words, (K_l, V)."""
        raise NotImplementedError(f"{self.name} has no topic layers")

    # ------------------------------------------------- topics by time slice (traits.time_slices)
    def slice_topic_word(self, state: Any) -> np.ndarray:
        """(T, K, V) every time slice's version of the topics, rows on the simplex."""
        raise NotImplementedError(f"{self.name} has one version of each topic")

    def slice_prevalence(self, state: Any) -> np.ndarray:
        """(T, K) every time slice's topic proportions, rows on the simplex."""
        raise NotImplementedError(f"{self.name} has one version of each topic")

    def evaluation_report(self, state: Any, test: EvaluationSet) -> dict:
        """Section ``evaluation``: the driver's own numbers that ``evaluate`` adds to its
        result (deep LDA: the persistent test chain's)."""
        raise NotImplementedError(f"{self.name} adds nothing to evaluate")
