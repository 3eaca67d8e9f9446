"""The dynamic topic model (Blei & Lafferty 2006), sampled as Bhadury, Chen, Zhu & Liu (2016)
do: the topics' natural parameters follow a Gaussian random walk over the time slices, every
token's topic is drawn given its document's proportions and its slice's topics, and the
continuous parameters move by Langevin steps. docs/algorithms.md §14.

One iteration (``step``):

1. z: every token from theta_dk phi_{t,k,w} (kernel :func:`topictk.inference.dtm._dtm.
   sample_topics`, exact, O(K) a token; chunks of DOC_CHUNK documents, each with the derived
   stream :func:`topictk.streams.dtm_key` of the iteration and chunk, so the draws do not
   depend on the threads);
2. eta and phi: one preconditioned Langevin step each (:mod:`topictk.inference.dtm.updates`,
   kernel :func:`topictk.inference.dtm._dtm.phi_step`), step epsilon_t = a (1 + t / b)^(-c),
   eta's normals from the main stream, each slice's topics' from the derived stream
   :func:`topictk.streams.dtm_noise_key` of the iteration and slice;
3. alpha: drawn exactly from its Gaussian conditional, slice by slice.

The chain starts from ``inference.lda_sweeps`` sweeps of collapsed Gibbs LDA on all the
training documents (the Gibbs driver, on the run's own streams): its topics, counted per slice,
give phi's start and its document counts eta's (as Blei & Lafferty's own code starts from LDA).
After ``inference.burn_in`` iterations the chain sums softmax(phi_t) and alpha, and every output
reports their means. Test documents are folded in with their slice's topics frozen: the same
two local moves (z, then a Langevin step of eta with the fixed step FOLD_IN_STEP), theta
averaged over the sweeps after the burn-in. A slice without training documents (the last one of
a forecast store, ``prepare --forecast``) is the random walk's step from the slice before it:
its topics are those propagated one step.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

from topictk import streams as keys
from topictk.config.schema import Option
from topictk.corpus.store import Documents
from topictk.errors import ConfigError, CorpusUsageError, NumericalError
from topictk.inference.base import (
    Driver,
    EvaluationSet,
    FoldInPlan,
    StepInfo,
    Traits,
    chunk_bounds_by_docs,
    row_range,
)
from topictk.inference.cluster import (
    ClusterTask,
    StoreRef,
    concatenated,
    map_merge,
    runs,
    worker_threads,
)
from topictk.inference.dtm import _dtm
from topictk.inference.dtm.updates import alpha_draw, eta_step, softmax_topics
from topictk.inference.registry import register
from topictk.inference.sampled import evaluation_plan
from topictk.inference.schedules import sgmcmc_step
from topictk.state.dtm import DTMState
from topictk.streams import Streams, from_states

log = logging.getLogger("topictk")

#: documents per chunk of the token draw (one stream each)
DOC_CHUNK = 64
#: the Langevin step of eta in a fold-in (fixed: a fold-in is short and starts at alpha_t)
FOLD_IN_STEP = 0.5
#: the variance of the first slice's topic and mean parameters around 0
FIRST_VARIANCE = 1.0


def slices_of(store, part: str) -> np.ndarray:
    """The slice of every document of ``part`` (int32), or the usage error saying how to give
    the store its slices."""
    slices = store.slices(part)
    if slices is None:
        raise CorpusUsageError(
            f"{store.path}: the corpus store has no time slices, and model.family dtm needs "
            f"them; prepare it again with --time-column FIELD (e.g. 'topictk prepare INPUT "
            f"--meta-file meta.tsv --time-column year --out {store.path} --force')")
    return np.ascontiguousarray(slices, dtype=np.int32)


def mixture_by_slice(heldout: Documents, theta: np.ndarray, prob: np.ndarray,
                     slices: np.ndarray, block: int = 1 << 16) -> np.ndarray:
    """sum_k theta_dk p_{t_d, w, k} of every held-out entry (CSR ``heldout``), ``prob``
    (T, V, K) the slices' word probabilities."""
    indptr = np.asarray(heldout.indptr)
    indices = np.asarray(heldout.indices)
    doc_of = np.repeat(np.arange(indptr.size - 1), np.diff(indptr))
    out = np.empty(indices.size)
    for lo in range(0, indices.size, block):
        hi = min(lo + block, indices.size)
        d = doc_of[lo:hi]
        out[lo:hi] = np.einsum("ek,ek->e", prob[slices[d], indices[lo:hi]], theta[d])
    return out


def fold_in_documents(prob: np.ndarray, alpha: np.ndarray, eta_variance: float,
                      documents: Documents, slices: np.ndarray, plan: FoldInPlan
                      ) -> np.ndarray:
    """theta-hat (D, K) of ``documents`` with the topics ``prob`` (T, V, K) and the slice means
    ``alpha`` (T, K) frozen: ``plan.sweeps`` of (z given eta, then a Langevin step of eta
    given z), eta starting at alpha of its slice; theta averaged over the sweeps after
    ``plan.burn_in``. Chunk c draws from ``plan.streams[c]`` only (its tokens, then its
    documents' normals), so theta-hat does not depend on the threads."""
    doc_ptr = np.ascontiguousarray(documents.doc_ptr, dtype=np.int64)
    words = np.ascontiguousarray(documents.words, dtype=np.int32)
    D, K = doc_ptr.size - 1, prob.shape[2]
    active = plan.active_flags(D)
    eta = np.ascontiguousarray(alpha[slices], dtype=np.float64)
    mean = eta.copy()
    lengths = np.diff(doc_ptr).astype(np.float64)
    z = np.zeros(words.size, dtype=np.int32)
    ndk = np.zeros((D, K), dtype=np.int32)
    theta_sum = np.zeros((D, K))
    bounds = np.ascontiguousarray(plan.bounds, dtype=np.int64)
    gens = [np.random.Generator(s) for s in plan.streams]
    theta = softmax_topics(eta)
    for sweep in range(plan.sweeps):
        _dtm.sample_topics(doc_ptr, words, slices, theta, prob, bounds, list(plan.streams), z,
                           ndk, plan.threads, active)
        for c, gen in enumerate(gens):
            a, b = int(bounds[c]), int(bounds[c + 1])
            eta_step(eta[a:b], ndk[a:b], lengths[a:b], mean[a:b], eta_variance, FOLD_IN_STEP,
                     gen.standard_normal((b - a, K)), theta[a:b])
        theta = softmax_topics(eta)
        if sweep >= plan.burn_in:
            theta_sum += theta
    theta = theta_sum / (plan.sweeps - plan.burn_in)
    theta[~active.astype(bool)] = 1.0 / K
    return theta


@dataclass(frozen=True)
class DTMFoldIn:
    """:func:`fold_in_documents` as each run of chunks reads it on a cluster: the eta
    variance, the sweeps and those before the average."""

    eta_variance: float
    sweeps: int
    burn_in: int


def dtm_fold_in_piece(job: DTMFoldIn, prob: np.ndarray, alpha: np.ndarray,
                      part: tuple) -> np.ndarray:
    """The cluster piece: theta-hat of a run of chunks (on a worker), ``part`` = (their
    doc_ptr from 0, words, slices, chunk bounds from 0, their streams' states, their active
    flags or None)."""
    doc_ptr, words, slices, bounds, states, active = part
    streams = from_states(states)
    documents = Documents(doc_ptr=doc_ptr, words=words, indptr=None, indices=None, counts=None)
    plan = FoldInPlan(job.sweeps, job.burn_in, bounds, streams, worker_threads(), active)
    return fold_in_documents(prob, alpha, job.eta_variance, documents, slices, plan)


def cluster_dtm_fold_in(cluster, prob: np.ndarray, alpha: np.ndarray, eta_variance: float,
                        documents: Documents, slices: np.ndarray,
                        plan: FoldInPlan) -> np.ndarray:
    """:func:`fold_in_documents` on ``cluster``: the plan's chunks cut into one run per worker,
    each with its documents, slices and chunk streams; the rows put together in order. Each
    chunk draws from its own stream only, so the numbers are those of one machine."""
    doc_ptr = np.asarray(documents.doc_ptr, dtype=np.int64)
    words = np.asarray(documents.words, dtype=np.int32)
    bounds = np.asarray(plan.bounds, dtype=np.int64)
    C = bounds.size - 1

    def cut(n_workers: int) -> list:
        parts = []
        for a, b in runs(C, n_workers):
            d0, d1 = int(bounds[a]), int(bounds[b])
            parts.append((*row_range(doc_ptr, d0, d1, words),
                          np.ascontiguousarray(slices[d0:d1], dtype=np.int32),
                          np.ascontiguousarray(bounds[a:b + 1] - d0),
                          [bg.state for bg in plan.streams[a:b]],
                          None if plan.active is None else plan.active[d0:d1]))
        return parts

    return map_merge(cluster, ClusterTask(
        dtm_fold_in_piece, cut, context=DTMFoldIn(float(eta_variance), int(plan.sweeps),
                                                  int(plan.burn_in)),
        shared=(np.ascontiguousarray(prob), np.ascontiguousarray(alpha, dtype=np.float64)),
        merge=concatenated, doing="during the fold-in", again="folding in again"))


MODEL_KEYS = ("phi_var", "eta_var", "alpha_var")


@dataclass(frozen=True)
class TokenJob:
    """One iteration's token draw as a cluster piece reads it: the store (its training
    documents and their slices, read on the worker), the seed and the iteration that key the
    chunks' streams, the chunks' document bounds."""

    store: StoreRef | None
    seed: int
    t: int
    bounds: np.ndarray

    def draw(self, doc_ptr: np.ndarray, words: np.ndarray, doc_slice: np.ndarray,
             theta: np.ndarray, prob: np.ndarray, chunks: tuple[int, int], threads: int,
             counts: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(z, n_dk, n_{t,w,k}) of the documents of chunks [c0, c1): their tokens drawn, each
        chunk from its stream (:func:`topictk.streams.dtm_key`), and counted per slice (into
        ``counts`` when given). ``theta`` holds the rows of those documents only."""
        c0, c1 = chunks
        d0, d1 = int(self.bounds[c0]), int(self.bounds[c1])
        t0, t1 = int(doc_ptr[d0]), int(doc_ptr[d1])
        ptr = np.ascontiguousarray(doc_ptr[d0:d1 + 1] - t0)
        part_words = np.ascontiguousarray(words[t0:t1])
        part_slices = np.ascontiguousarray(doc_slice[d0:d1])
        streams = Streams(self.seed)
        z = np.empty(t1 - t0, dtype=np.int32)
        ndk = np.empty((d1 - d0, prob.shape[2]), dtype=np.int32)
        _dtm.sample_topics(ptr, part_words, part_slices, theta, prob,
                           np.ascontiguousarray(self.bounds[c0:c1 + 1] - d0),
                           [streams.derived(keys.dtm_key(self.t, c)) for c in range(c0, c1)],
                           z, ndk, threads)
        if counts is None:
            counts = np.empty(prob.shape, dtype=np.int32)
        _dtm.slice_word_counts(ptr, part_words, part_slices, z, counts)
        return z, ndk, counts


def token_piece(job: TokenJob, theta: np.ndarray, prob: np.ndarray,
                chunks: tuple[int, int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The cluster piece (runs on a worker): :meth:`TokenJob.draw` of a run of chunks, the
    documents read from the worker's memory-mapped store as the driver reads them."""
    doc_ptr, words, _ = job.store.training_documents()
    doc_slice = slices_of(job.store.open(), "train")
    d0, d1 = int(job.bounds[chunks[0]]), int(job.bounds[chunks[1]])
    return job.draw(doc_ptr, words, doc_slice, np.ascontiguousarray(theta[d0:d1]), prob,
                    chunks, worker_threads())


def add_draws(a: tuple, b: tuple) -> tuple:
    """The cluster merge: two runs of consecutive chunks together (their tokens and
    documents in order, the counts added: integers, the same in any grouping)."""
    return np.concatenate([a[0], b[0]]), np.concatenate([a[1], b[1]]), a[2] + b[2]


def background(words: np.ndarray, n_words: int, beta: float) -> np.ndarray:
    """(V,) the first slice's prior mean of every topic's natural parameters: the log of
    the training corpus's word frequencies (plus ``beta``), centred, so that a word a topic
    has not used falls back to how common it is, not to 1 / V."""
    freq = np.bincount(words, minlength=n_words).astype(np.float64) + beta
    mean = np.log(freq)
    mean -= mean.mean()
    return mean


@register
class DTMDriver(Driver):
    """The dynamic topic model; one step is one iteration over every training token."""

    name = "dtm-sgld"
    # the token draws run on a cluster's workers
    traits = Traits(family="dtm", kind="sampled", sweep_steps=True, time_slices=True,
                    cluster=True, cluster_fold_in=True, own_fold_in=True,
                    paper="Blei & Lafferty 2006; Bhadury, Chen, Zhu & Liu 2016")
    STATE = DTMState
    OPTIONS = {
        "lda_sweeps": Option("int", 50, low=0,
                             help="collapsed Gibbs LDA sweeps on all the training documents "
                                  "that give the chain its start (counted apart from "
                                  "inference.iterations)"),
        "burn_in": Option("int", None, low=0, nullable=True,
                          help="iterations before the reported means start summing (default: "
                               "half the iterations)"),
        "step": {
            "a": Option("float", 1.0, low=0, low_open=True,
                        help="Langevin step epsilon_t = a (1 + t / b)^(-c): the first step, "
                             "in units of the preconditioned (Newton) step"),
            "b": Option("float", 100.0, low=0, low_open=True, help="epsilon_t offset b"),
            "c": Option("float", 0.55, low=0.5, high=1, low_open=True,
                        help="epsilon_t decay c; (0.5, 1] so the steps sum to infinity and "
                             "their squares do not"),
        },
    }

    @classmethod
    def check_config(cls, data: dict, where: str) -> None:
        fold_in = data.get("evaluation", {}).get("fold_in")
        if fold_in not in (None, "gibbs"):
            raise ConfigError(f"evaluation.fold_in: {fold_in} does not apply to the dynamic "
                              f"topic model (a logistic-normal document prior, not a Dirichlet "
                              f"one; evaluate folds documents in by its own sampler, docs/"
                              f"algorithms.md §14.4); leave it out ({where})")
        inf = data["inference"]
        if inf["burn_in"] is None:
            inf["burn_in"] = inf["iterations"] // 2
        if inf["burn_in"] >= inf["iterations"]:
            raise ConfigError(f"inference.burn_in must be < inference.iterations "
                              f"({inf['iterations']}); got {inf['burn_in']} ({where})")

    @classmethod
    def memory_arrays(cls, data: dict, counts: dict) -> list[tuple[str, tuple[int, ...], int]]:
        """phi, its running sum, the counts and the step's temporaries (T, V, K) each, and
        the documents' parameters."""
        K, V = int(data["model"]["topics"]), int(counts["vocabulary"])
        D, T = int(counts["train_documents"]), max(1, int(counts.get("time_slices") or 1))
        return [("phi and its running sum", (2, T, V, K), 8),
                ("a step's word probabilities, counts and temporaries", (6, T, V, K), 8),
                ("z", (int(counts["train_tokens"]),), 4), ("eta and n_dk", (2, D, K), 8)]

    def __init__(self, config, store, threads: int = 1, *, streams=None):
        super().__init__(config, store, threads, streams=streams)
        self.doc_slice = slices_of(store, "train")
        self.T = len(store.time_slices)
        self.doc_ptr, self.words = self.token_view
        self.lengths = np.diff(self.doc_ptr).astype(np.float64)
        self.bounds = chunk_bounds_by_docs(self.n_docs, DOC_CHUNK)
        model = config.model
        self.phi_var, self.eta_var, self.alpha_var = (float(getattr(model, k))
                                                      for k in MODEL_KEYS)
        self.background = background(self.words, self.V, float(model.beta))
        # the word probabilities of the state's phi, kept from the step that made them:
        # (the state, its step, the probabilities)
        self._prob: tuple[object, int, np.ndarray] | None = None
        # (T, V, K) arrays a step writes into and hands back, kept from step to step: fresh
        # ones would cost the operating system's zeroing of their pages every step
        self._spares: dict[str, np.ndarray] = {}

    def state_sizes(self) -> dict:
        return {**super().state_sizes(), "T": self.T}

    # ------------------------------------------------------------------ the chain
    def lda_start(self) -> tuple[np.ndarray, np.ndarray]:
        """(z, n_dk) after ``inference.lda_sweeps`` sweeps of the collapsed Gibbs driver on
        the training documents (its own schedule and threads; the run's streams), or z drawn
        uniformly from the init stream with no sweeps."""
        from topictk.inference.registry import get_driver, load_config

        sweeps = int(self.config.inference.lda_sweeps)
        if sweeps == 0:
            init = np.random.Generator(self.streams.persistent(keys.INIT))
            z = init.integers(0, self.K, size=self.n_tokens).astype(np.int32)
            ndk = np.zeros((self.n_docs, self.K), dtype=np.int32)
            doc_of = np.repeat(np.arange(self.n_docs), np.diff(self.doc_ptr))
            np.add.at(ndk, (doc_of, z), 1)
            return z, ndk
        model = self.config.model
        lda = load_config(None, raw={
            "corpus": {"path": str(self.store.path)},
            "model": {"topics": self.K, "alpha": float(model.alpha), "beta": float(model.beta)},
            "inference": {"algorithm": "gibbs", "iterations": sweeps},
            "training": {"seed": int(self.config.training.seed), "threads": self.threads},
            "output": "lda-start"})
        gibbs = get_driver("gibbs")(lda, self.store, self.threads, streams=self.streams)
        state = gibbs.init_state()
        for t in range(sweeps):
            gibbs.step(state, t)
        return (np.ascontiguousarray(state.z, dtype=np.int32),
                np.ascontiguousarray(state.ndk, dtype=np.int32))

    def word_probabilities(self, state: DTMState) -> np.ndarray:
        """(T, V, K) softmax of the state's phi over the words (the kernel's numbers, kept
        from the step that made them)."""
        if self._prob is not None and self._prob[0] is state and self._prob[1] == state.step:
            return self._prob[2]
        prob = np.empty_like(state.phi)
        _dtm.word_probabilities(state.phi, prob, self.threads)
        self._prob = (state, state.step, prob)
        return prob

    def draw_tokens(self, theta: np.ndarray, prob: np.ndarray, t: int
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(z, n_dk, n_{t,w,k}) of iteration ``t``'s token draw: here, or on the cluster's
        workers in runs of chunks whose results are put together among them (the same
        numbers: every chunk draws from its own stream, the counts are integer sums)."""
        job = TokenJob(StoreRef.of(self.store) if self.cluster is not None else None,
                       self.streams.seed, t, self.bounds)
        n_chunks = self.bounds.size - 1
        if self.cluster is None:
            return job.draw(self.doc_ptr, self.words, self.doc_slice, theta, prob,
                            (0, n_chunks), self.threads,
                            self.spare("counts", np.int32))
        return map_merge(self.cluster, ClusterTask(
            token_piece, cut=lambda n: runs(n_chunks, n), context=job, shared=(theta, prob),
            merge=add_draws, on_workers=True, doing="during the token draw",
            again="drawing the iteration's tokens again"))

    def spare(self, name: str, dtype=np.float64) -> np.ndarray:
        """A (T, V, K) array to write into (its contents are not kept)."""
        array = self._spares.pop(name, None)
        if array is None:
            array = np.empty((self.T, self.V, self.K), dtype=dtype)
        return array

    def slice_counts(self, z: np.ndarray) -> np.ndarray:
        counts = np.empty((self.T, self.V, self.K), dtype=np.int32)
        _dtm.slice_word_counts(self.doc_ptr, self.words, self.doc_slice, z, counts)
        return counts

    def init_state(self) -> DTMState:
        z, ndk = self.lda_start()
        beta, alpha0 = float(self.config.model.beta), float(self.config.model.alpha)
        counts = self.slice_counts(z)
        phi = np.log((counts + beta) / (counts.sum(axis=1, keepdims=True) + self.V * beta))
        phi -= phi.mean(axis=1, keepdims=True)
        eta = np.log((ndk + alpha0) / (self.lengths[:, None] + self.K * alpha0))
        eta -= eta.mean(axis=1, keepdims=True)
        alpha = np.zeros((self.T, self.K))
        np.add.at(alpha, self.doc_slice, eta)
        per_slice = np.bincount(self.doc_slice, minlength=self.T)[:, None]
        alpha /= np.maximum(per_slice, 1)
        for t in range(1, self.T):          # a slice without documents starts as the one before
            if per_slice[t, 0] == 0:
                alpha[t] = alpha[t - 1]
        return DTMState(z=z, ndk=ndk, eta=eta, phi=phi, alpha=alpha,
                        prob_sum=np.zeros_like(phi), alpha_sum=np.zeros_like(alpha))

    def step(self, state: DTMState, t: int) -> StepInfo:
        inf = self.config.inference
        eps = sgmcmc_step(inf.step["a"], inf.step["b"], inf.step["c"], t)
        prob = self.word_probabilities(state)
        theta = softmax_topics(state.eta)
        state.z, state.ndk, counts = self.draw_tokens(theta, prob, t)
        main = np.random.Generator(self.streams.persistent(keys.MAIN))
        eta_step(state.eta, state.ndk, self.lengths, state.alpha[self.doc_slice], self.eta_var,
                 eps, main.standard_normal(state.eta.shape), theta)
        new_phi, new_prob = self.spare("phi"), self.spare("prob")
        _dtm.phi_step(state.phi, counts, prob, self.background,
                      [self.streams.derived(keys.dtm_noise_key(t, s)) for s in range(self.T)],
                      eps, self.phi_var, FIRST_VARIANCE, new_phi, new_prob, self.threads)
        if self.cluster is None:
            self._spares["counts"] = counts
        self._spares["phi"], state.phi = state.phi, new_phi
        self._spares["prob"] = prob
        del counts, prob
        alpha_draw(state.alpha, state.eta, self.doc_slice, self.alpha_var, FIRST_VARIANCE,
                   self.eta_var, main.standard_normal(state.alpha.shape))
        state.step = t + 1
        self._prob = (state, state.step, new_prob)
        if state.step > int(inf.burn_in):
            state.prob_sum += new_prob
            state.alpha_sum += state.alpha
            state.kept += 1
        return StepInfo(tokens=self.n_tokens, documents=self.n_docs,
                        extra={"epsilon": eps})

    def check_state(self, state: DTMState) -> None:
        for name in ("phi", "eta", "alpha"):
            if not np.all(np.isfinite(getattr(state, name))):
                raise NumericalError(f"{name} became NaN or infinite at iteration {state.step}; "
                                     f"lower inference.step.a (the last good checkpoint is "
                                     f"kept)")

    # ------------------------------------------------------------------ what it reports
    def slice_probabilities(self, state: DTMState) -> np.ndarray:
        """(T, V, K) the slices' word probabilities: their mean over the kept iterations, or
        the current ones before any was kept."""
        if state.kept:
            return state.prob_sum / state.kept
        return self.word_probabilities(state).copy()

    def slice_alpha(self, state: DTMState) -> np.ndarray:
        """(T, K) the slices' mean topic parameters (their mean over the kept iterations)."""
        return state.alpha_sum / state.kept if state.kept else state.alpha.copy()

    def slice_topic_word(self, state: DTMState) -> np.ndarray:
        """(T, K, V) every slice's topics, rows on the simplex."""
        return np.ascontiguousarray(self.slice_probabilities(state).transpose(0, 2, 1))

    def slice_prevalence(self, state: DTMState) -> np.ndarray:
        """(T, K) the slices' topic proportions: softmax of their mean topic parameters
        alpha_t (their mean over the kept iterations), the share a document of the slice has
        at its prior mean; defined for a slice without documents too (propagated)."""
        return softmax_topics(self.slice_alpha(state))

    def topic_word(self, state: DTMState) -> np.ndarray:
        """(K, V) the topics over all slices: the slices' topics weighted by their training
        tokens."""
        weights = np.bincount(self.doc_slice, weights=self.lengths, minlength=self.T)
        weights = weights / weights.sum()
        return np.einsum("t,tvk->kv", weights, self.slice_probabilities(state))

    @classmethod
    def heldout_estimator(cls, config) -> str:
        return "dtm"

    def test_slices(self, test: EvaluationSet) -> np.ndarray:
        slices = slices_of(self.store, "test")
        return slices if test.rows is None else np.ascontiguousarray(slices[test.rows])

    def heldout_probabilities(self, state: DTMState, samples, test: EvaluationSet,
                              pass_index: int) -> np.ndarray:
        plan = evaluation_plan(self, test, pass_index)
        prob = self.slice_probabilities(state)
        slices = self.test_slices(test)
        theta = self._fold_in(prob, self.slice_alpha(state), test.observed, slices, plan)
        return mixture_by_slice(test.heldout, theta, prob, slices)

    def _fold_in(self, prob: np.ndarray, alpha: np.ndarray, documents: Documents,
                 slices: np.ndarray, plan: FoldInPlan) -> np.ndarray:
        """:func:`fold_in_documents`, on the driver's cluster when it has one."""
        if self.cluster is None or plan.bounds.size < 2:
            return fold_in_documents(prob, alpha, self.eta_var, documents, slices, plan)
        return cluster_dtm_fold_in(self.cluster, prob, alpha, self.eta_var, documents, slices,
                                   plan)

    def fold_in(self, state: DTMState, documents: Documents, plan: FoldInPlan, *,
                prior=None, sample=None, slices: np.ndarray | None = None) -> np.ndarray:
        """theta-hat with every document's slice's topics (``slices``); documents without a
        time are folded in with the last slice's, the most recent."""
        if slices is None:
            slices = np.full(documents.n_docs, self.T - 1, dtype=np.int32)
        return self._fold_in(self.slice_probabilities(state), self.slice_alpha(state),
                             documents, np.ascontiguousarray(slices, dtype=np.int32), plan)

    def infer_proportions(self, state: DTMState, doc_ptr, words, features, *, sweeps: int,
                          burn_in: int, seed: int, threads: int = 1, first_chunk: int = 0,
                          slices: np.ndarray | None = None) -> np.ndarray:
        """:meth:`Driver.infer_proportions` with every document's time slice (``slices``,
        None: the last slice for all)."""
        documents, plan = self.new_documents(doc_ptr, words, sweeps=sweeps, burn_in=burn_in,
                                             seed=seed, threads=threads,
                                             first_chunk=first_chunk)
        return self.fold_in(state, documents, plan, slices=slices)

    def document_prior(self, state: DTMState, features) -> np.ndarray:
        return np.atleast_2d(softmax_topics(self.slice_alpha(state))[-1:])
