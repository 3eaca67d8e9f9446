"""The interface every inference algorithm implements (DESIGN.md, "Inference driver").

The training loop and the evaluator call only these methods, so they know nothing
algorithm-specific:

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

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, ClassVar, Mapping

import numpy as np

from topictk.config.schema import Option
from topictk.corpus.batches import FEISTEL_ROUNDS
from topictk.corpus.store import CorpusStore, Documents
from topictk.errors import UsageError
from topictk.inference import _minibatch
from topictk.state import schema
from topictk.streams import Streams, infer_key


@dataclass
class StepInfo:
    """What one training step did."""

    tokens: int                    # training tokens visited
    documents: int                 # training documents visited
    collect_sample: bool = False   # the loop should save driver.sample(state)
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class EvaluationSet:
    """Test documents: observed tokens (both representations) and held-out entries (CSR)."""

    observed: Documents
    heldout: Documents

    @classmethod
    def from_store(cls, store: CorpusStore) -> "EvaluationSet":
        return cls(store.test_observed(), store.test_heldout())

    @property
    def n_heldout_tokens(self) -> int:
        return self.heldout.n_tokens


def chunk_bounds_by_docs(n_docs: int, chunk_docs: int) -> np.ndarray:
    """Consecutive chunks of ``chunk_docs`` documents: boundaries (C + 1,) int64."""
    bounds = np.arange(0, n_docs, chunk_docs, dtype=np.int64)
    return np.append(bounds, np.int64(n_docs))


INFER_CHUNK_DOCS = 64


def fold_in_proportions(topic_word: np.ndarray, alpha: np.ndarray, doc_ptr: np.ndarray,
                        words: np.ndarray, *, sweeps: int, burn_in: int, seed: int,
                        threads: int = 1, first_chunk: int = 0) -> np.ndarray:
    """Topic proportions of documents under fixed topics (K, V) and a Dirichlet prior (1 or D,
    K): collapsed Gibbs over each document's assignments, ``sweeps`` sweeps of which the first
    ``burn_in`` are discarded, theta_d = (n-bar_dk + alpha_dk) / (N_d + alpha_d.) from the kept
    sweeps' average counts. Chunks of 64 documents with one stream each (``infer_key`` of the
    chunk's index in the whole input, counted from ``first_chunk``), so the result depends on
    ``seed`` only, not on ``threads`` or on how the input is cut into calls."""
    phi = np.asarray(topic_word, dtype=np.float64)
    K = phi.shape[0]
    alpha = np.ascontiguousarray(np.atleast_2d(alpha), dtype=np.float64)
    D = doc_ptr.size - 1
    # the documents are already contiguous: only the words need local ids, as in a batch
    vocab, local = np.unique(words, return_inverse=True)
    weights = np.ascontiguousarray(phi[:, vocab].T)
    bounds = chunk_bounds_by_docs(D, INFER_CHUNK_DOCS)
    streams = Streams(seed)
    chunk_streams = [streams.derived(infer_key(first_chunk + c)) for c in range(bounds.size - 1)]
    word_topic = np.zeros((vocab.size, K), dtype=np.int64)
    doc_topic = np.zeros((D, K), dtype=np.int64)
    _minibatch.local_gibbs(np.ascontiguousarray(doc_ptr, dtype=np.int64),
                           local.reshape(-1).astype(np.int32), weights, alpha, int(sweeps),
                           int(burn_in), bounds, chunk_streams, word_topic, doc_topic,
                           int(threads))
    prior = np.broadcast_to(alpha, (D, K))
    lengths = np.diff(doc_ptr).astype(np.float64)
    return (doc_topic / float(sweeps - burn_in) + prior) / (lengths + prior.sum(axis=1))[:, None]


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


class _StateSizes(Mapping):
    """The sizes of a driver's state-shape symbols, looked up when a shape asks for them."""

    ATTRIBUTES = {"K": "K", "V": "V", "D": "n_docs", "N": "n_tokens"}

    def __init__(self, driver: "Driver"):
        self.driver = driver
        self.extra = driver.state_sizes()

    def __getitem__(self, symbol: str):
        if symbol in self.extra:
            return self.extra[symbol]
        return getattr(self.driver, self.ATTRIBUTES.get(symbol, symbol))

    def __iter__(self):
        return iter(self.extra)

    def __len__(self) -> int:
        return len(self.extra)


class Driver(ABC):
    """Base class of inference drivers; subclasses register with ``@register``."""

    name: ClassVar[str]
    family: ClassVar[str] = "lda"
    STATE: ClassVar[type]           # the state class (declares its saved layout, SCHEMA)
    # True when held-out evaluation during training advances a chain kept in the state (deep
    # LDA's persistent test chain): the loop then evaluates on the eval_every schedule only,
    # and a resumed run may not change that schedule
    persistent_evaluation: ClassVar[bool] = False
    OPTIONS: ClassVar[dict[str, Option]] = {}
    objective_name: ClassVar[str | None] = None
    uses_features: ClassVar[bool] = False     # the document prior depends on metadata (DMR)
    # the driver runs its shards on a Dask cluster when given one (use_cluster)
    cluster_support: ClassVar[bool] = False
    # what ``topictk algorithms`` lists: the docs family page (docs/family-KIND.md), the
    # papers, and whether the kernels use training.threads and a run resumes exactly
    kind: ClassVar[str] = "sampled"
    paper: ClassVar[str] = ""
    threads_support: ClassVar[bool] = True
    resume_support: ClassVar[bool] = True
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
        (:class:`topictk.inference.cluster.Cluster`); only drivers with ``cluster_support``."""
        raise NotImplementedError(f"{self.name} does not run on a cluster")

    @property
    def fixed_on_resume(self) -> frozenset[str]:
        """Settings a resumed run of this driver may not change although others' may."""
        return frozenset({"training.eval_every"}) if self.persistent_evaluation else frozenset()

    def scheduled_samples(self, upto: int) -> list[int] | None:
        """The steps up to ``upto`` at which this config collects posterior samples, for
        drivers whose schedule depends on the whole run; None when each step decides."""
        return None

    @classmethod
    def check_config(cls, data: dict, where: str) -> None:
        """Cross-key checks after every key was validated on its own."""

    @abstractmethod
    def init_state(self) -> Any: ...

    @abstractmethod
    def step(self, state: Any, t: int) -> StepInfo: ...

    @abstractmethod
    def topic_word(self, state: Any) -> np.ndarray: ...

    def objective(self, state: Any) -> float | None:
        """The algorithm's own per-token objective (log joint, bound), if it has one."""
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

    def check_restored(self, state: Any) -> None:
        """Raise ValueError when a restored state contradicts the config in a way its array
        shapes do not show (a setting saved in the state)."""

    def train_heldout_probabilities(self, state: Any, samples: list[dict[str, np.ndarray]] | None,
                                    heldout: Documents) -> np.ndarray | None:
        """Protocol B (§11.1, §11.2): p-hat(w | d) of every held-out entry of the *training*
        documents (row d = training document d), from each document's own training state.
        None when the algorithm does not support it."""
        return None

    def infer_proportions(self, state: Any, doc_ptr: np.ndarray, words: np.ndarray,
                          features: np.ndarray | None, *, sweeps: int, burn_in: int, seed: int,
                          threads: int = 1, first_chunk: int = 0) -> np.ndarray:
        """(D, K) topic proportions of new documents (``topictk infer``), by default the
        Dirichlet fold-in of :func:`fold_in_proportions` with ``topic_word`` and
        ``document_prior``. ``first_chunk``: the index of the documents' first chunk of
        ``INFER_CHUNK_DOCS`` in the whole input (its streams are keyed by it)."""
        return fold_in_proportions(self.topic_word(state), self.document_prior(state, features),
                                   doc_ptr, words, sweeps=sweeps, burn_in=burn_in, seed=seed,
                                   threads=threads, first_chunk=first_chunk)

    def document_prior(self, state: Any, features: np.ndarray | None) -> np.ndarray:
        """The Dirichlet prior of theta for new documents (``topictk infer``): (1, K), or
        (D, K) from the documents' ``features`` when the prior depends on metadata
        (``uses_features``). The default is the state's ``alpha``."""
        alpha = getattr(state, "alpha", None)
        if alpha is None:
            raise UsageError(f"'{self.name}' runs have no Dirichlet document prior to fold new "
                             f"documents in with")
        return np.atleast_2d(np.asarray(alpha, dtype=np.float64))

    def predictive_topics(self, state: Any, samples: list[dict[str, np.ndarray]] | None,
                          test: EvaluationSet) -> list[tuple[np.ndarray, np.ndarray]]:
        """The (phi-hat (V, K), alpha (1 or D_test, K)) pairs that the left-to-right estimator
        (§11.3) scores the test documents with, one per sample. The default is one pair: the
        topics of ``topic_word`` and the test documents' ``document_prior``."""
        features = self.store.features("test") if self.uses_features else None
        return [(self.topic_word(state).T, self.document_prior(state, features))]

    def check_state(self, state: Any) -> None:
        """Raise :class:`topictk.errors.NumericalError` if global parameters are not finite."""
