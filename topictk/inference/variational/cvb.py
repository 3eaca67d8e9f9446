"""Collapsed variational Bayes for LDA: CVB with the Gaussian correction (Teh, Newman & Welling
2007) and its zero-order variant CVB0 (Asuncion, Welling, Smyth & Teh 2009).

docs/algorithms.md §4. theta and phi are integrated out; q(z) keeps one K-vector mu per distinct
(document, word) pair (TNW's gamma_ijk), updated with the exclusion rule of §4.4 (one token
copy removed from the fields per pair update). One training step is one sweep over every pair
(kernel :func:`topictk.inference.variational._cvb.sweep`); every ``refresh_every`` steps the fields
are recomputed from mu, every ``check_every`` steps the convergence statistic (the approximate bound
of §4.6 for CVB, the training perplexity for CVB0) is compared with the previous one.
The NumPy twin is ``tests/reference/cvb.py``.

Evaluation (§11.2, §4.7): phi-hat = (beta + m_kw)/(V beta + m_k); a test document is folded in
by CVB0 updates with phi-hat frozen, theta-hat = (alpha + m_dk)/(alpha_sum + N_obs). On a
Protocol B store the training documents' held-out tokens use their own training fields.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
from scipy.special import gammaln

from topictk import streams as keys
from topictk._cy.special import psi1
from topictk.config.schema import Option
from topictk.corpus.store import Documents
from topictk.errors import NumericalError
from topictk.inference.variational import _cvb
from topictk.inference.base import (
    StepInfo,
    Traits,
    chunk_bounds_by_tokens,
    resolve_chunks,
    warn_idle_threads,
)
from topictk.inference.variational.cvb_shards import ShardedCVB
from topictk.inference.perplexity import mixture_probabilities
from topictk.inference.registry import register
from topictk.inference.seed_prior import SeededDriverMixin
from topictk.inference.variational.template import FoldInCall, VariationalDriver, doc_lengths
from topictk.inference.variational.grow import grow_cvb_state
from topictk.state.variational import CVBState
from topictk.streams import Streams

log = logging.getLogger("topictk")


def gaussian_lngamma(a, m, v):
    """G(a; m, v) = lnGamma(a + m) + psi'(a + m) v / 2, the second-order expectation of
    lnGamma(a + n) for n with mean m and variance v (§4.6)."""
    x = a + m
    return gammaln(x) + 0.5 * psi1(x) * v


def seed_start(mu: np.ndarray, pair_words: np.ndarray, seeds) -> None:
    """The start of the seed words' pairs (§2.14): mu_dwk of a pair (d, w) of a seed word w
    becomes u_dwk 1[o_wk > 0] / sum_j u_dwj 1[o_wj > 0], u its Dir(1) draw, so that its
    tokens start in w's seeded topics (split by the draw when w is seeded in several), as
    Gibbs starts them; other pairs keep their draw. ``mu`` (pairs, K)
    in place; ``pair_words`` (pairs,) the word of each pair; ``seeds`` the
    :class:`~topictk.inference.seed_prior.SeedPrior`."""
    seeded = np.flatnonzero(np.diff(seeds.ptr) > 0)                # the seed words, ascending
    position = np.full(seeds.V, -1, dtype=np.int64)
    position[seeded] = np.arange(seeded.size)
    keep = np.zeros((seeded.size, seeds.K), dtype=bool)             # (seed words, K)
    keep[position[seeds.words], seeds.topic] = True
    rows = np.flatnonzero(position[pair_words] >= 0)
    if rows.size == 0:
        return
    start = np.where(keep[position[pair_words[rows]]], mu[rows], 0.0)
    mu[rows] = start / start.sum(axis=1, keepdims=True)


def cvb0_fold_in(indptr, indices, counts, phi: np.ndarray, alpha: np.ndarray, *, tol: float,
                 max_passes: int, threads: int) -> np.ndarray:
    """theta-hat of documents (CSR) by CVB0 updates with the word-major phi-hat frozen
    (kernel :func:`topictk.inference.variational._cvb.fold_in`)."""
    theta = np.empty((indptr.size - 1, phi.shape[1]))
    _cvb.fold_in(indptr, indices, counts, phi, alpha, tol, max_passes, theta, threads)
    return theta


@dataclass
class FieldsPoint:
    """What a CVB or CVB0 run on a cluster goes back to when a worker is lost: the step, with
    the word and topic fields (CVB0's variance fields are empty) and convergence state of that
    step (mu and the document fields are the driver's copies, not touched until the next
    gather, after which a newer point is taken)."""

    step: int
    m_kw: np.ndarray
    m_k: np.ndarray
    v_kw: np.ndarray
    v_k: np.ndarray
    monitor: float
    converged: bool

    @classmethod
    def of(cls, state: CVBState) -> FieldsPoint:
        return cls(state.step, state.m_kw.copy(), state.m_k.copy(), state.v_kw.copy(),
                   state.v_k.copy(), state.monitor, state.converged)

    def restore(self, state: CVBState) -> None:
        state.m_kw[...] = self.m_kw
        state.m_k[...] = self.m_k
        state.v_kw[...] = self.v_kw
        state.v_k[...] = self.v_k
        state.step, state.monitor, state.converged = self.step, self.monitor, self.converged


@register
class CVBDriver(SeededDriverMixin, VariationalDriver):
    """CVB with the second-order (Gaussian) correction; one step is one sweep over all pairs."""

    name = "cvb"
    own_estimator = "CVB0 fold-in"
    # the chunks of an iteration run on a cluster's workers
    traits = Traits(kind="variational", paper="Teh, Newman & Welling 2007",
                    objective="train_bound_per_token", add_documents=("lda",), cluster=True,
                    cluster_fold_in=True, own_fold_in=True)
    STATE = CVBState
    gaussian = True
    OPTIONS = {
        "chunks": Option("int", "auto", low=1, auto=True,
                         help="document chunks updated in parallel against private word "
                              "fields: 1 = the sequential schedule; auto = 2 (1 below "
                              "65,536 tokens), fixed by the corpus, never by the threads"),
        "tol": Option("float", 1e-5, low=0,
                      help="stop when the convergence statistic changes by less than this "
                           "(relative; 0 = never); later steps do nothing"),
        "check_every": Option("int", 10, low=1,
                              help="steps between convergence checks (CVB: approximate bound; "
                                   "CVB0: training perplexity)"),
        "refresh_every": Option("int", 10, low=1,
                                help="steps between recomputing the fields from mu (removes "
                                     "floating-point drift)"),
        "fold_in_tol": Option("float", 1e-6, low=0, low_open=True,
                              help="fold-in of test documents stops at mean |change of mu| "
                                   "below this"),
        "fold_in_max_passes": Option("int", 200, low=1,
                                     help="most fold-in passes per test document"),
    }

    MEMORY_FIX = ("train with inference.algorithm: cvb0 (no variance fields) and "
                  "inference.chunks: 1 (no private copies of the word fields), or with vb or "
                  "ovb, which keep no K values per (document, word) pair")

    @classmethod
    def memory_held(cls, data: dict, s) -> list:
        """mu, K values for each training (document, word) pair, and the fields: m_dk, m_kw
        and, for CVB, their variances v_dk, v_kw."""
        fields = 2 if cls.gaussian else 1
        return [("mu of every (document, word) pair", (s.M, s.K), 8),
                ("document-topic fields", (fields, s.D, s.K), 8),
                ("topic-word fields", (fields, s.V, s.K), 8)]

    @classmethod
    def memory_phases(cls, data: dict, s) -> list[list]:
        """A sweep with C > 1 chunks: each chunk's private word fields (m_kw, and v_kw for
        CVB); the approximate bound (the objective; CVB's convergence check): the terms of its
        larger part, four arrays of the fields' size (CVB0 first recomputes m and v of the
        documents and words) and the pairs' entropies; CVB0's convergence check: theta-hat,
        phi-hat and the pairs' probabilities."""
        inference = data["inference"]
        fields = 2 if cls.gaussian else 1
        chunks = resolve_chunks(inference.get("chunks", "auto"), s.N)
        phases = []
        if chunks > 1:
            phases.append([("chunks' private word fields", (chunks, fields, s.V, s.K), 8)])
        bound = [("terms of the approximate bound", (4, max(s.D, s.V), s.K), 8),
                 ("entropies of the pairs", (s.M,), 8)]
        if not cls.gaussian:
            bound += [("document fields for the bound", (2, s.D, s.K), 8),
                      ("word fields for the bound", (2, s.V, s.K), 8)]
        checks = inference.get("tol", 0) > 0
        if s.curve_docs or s.train_heldout or (checks and cls.gaussian):
            phases.append(bound)
        if checks and not cls.gaussian:
            phases.append([("theta-hat", (s.D, s.K), 8), ("phi-hat", (s.V, s.K), 8),
                           ("probabilities of the pairs", (s.M,), 8)])
        return phases

    @classmethod
    def memory_evaluation(cls, data: dict, s) -> list:
        """CVB0 updates of the curve documents with phi-hat (V, K) frozen: their theta-hat."""
        return [("phi-hat", (s.V, s.K), 8),
                ("theta-hat of the curve", (s.curve_docs, s.K), 8)]

    def __init__(self, config, store, threads: int = 1, *,
                 streams: Streams | None = None):
        super().__init__(config, store, threads, streams=streams)
        self.indptr, self.indices, self.counts = self.csr_view
        self.doc_lengths = doc_lengths(self.indptr, self.counts)
        token_ptr = np.zeros(self.n_docs + 1, dtype=np.int64)
        np.cumsum(self.doc_lengths, out=token_ptr[1:])
        chunks = config.inference.chunks
        self.bounds = chunk_bounds_by_tokens(token_ptr,
                                             resolve_chunks(chunks, int(token_ptr[-1])))
        self.n_chunks = self.bounds.size - 1
        warn_idle_threads(chunks, self.threads, self.n_chunks)
        self.remote: ShardedCVB | None = None    # the shards on a Dask cluster (use_cluster)
        self._restart: FieldsPoint | None = None

    # ------------------------------------------------------------------ state
    def _empty_var(self):
        return np.zeros((0, self.K)), np.zeros((0, self.K)), np.zeros(0)

    def init_state(self) -> CVBState:
        """mu ~ Dir(1) per pair from the init stream (§4.7), the pairs of seed words then
        kept to their seeded topics (:func:`seed_start`, §2.14), fields from scratch."""
        mu = np.empty((self.indices.size, self.K))
        _cvb.init_mu(mu, self.streams.persistent(keys.INIT))
        if self.seeds is not None:
            seed_start(mu, self.indices, self.seeds)
        alpha = np.full(self.K, float(self.config.model.alpha))
        state = CVBState(mu=mu, m_dk=np.zeros((self.n_docs, self.K)),
                         m_kw=np.zeros((self.V, self.K)), m_k=np.zeros(self.K),
                         v_dk=np.zeros((self.n_docs, self.K)) if self.gaussian else None,
                         v_kw=np.zeros((self.V, self.K)) if self.gaussian else None,
                         v_k=np.zeros(self.K) if self.gaussian else None,
                         alpha=alpha, beta=float(self.config.model.beta), gaussian=self.gaussian)
        self.refresh_fields(state)
        if not self.gaussian:
            state.v_dk, state.v_kw, state.v_k = self._empty_var()
        return state


    def grow_state(self, old: CVBState, added) -> CVBState:
        """Added documents (:func:`topictk.inference.variational.grow.grow_cvb_state`)."""
        return grow_cvb_state(self, old, added)

    def refresh_fields(self, state: CVBState) -> None:
        """Recompute every field from mu (§4.7)."""
        var = (state.v_dk, state.v_kw, state.v_k) if self.gaussian else (None, None, None)
        _cvb.compute_fields(self.indptr, self.indices, self.counts, state.mu, state.m_dk,
                            state.m_kw, state.m_k, *var, self.threads)

    # ------------------------------------------------------------------- step
    def step(self, state: CVBState, t: int) -> StepInfo:
        extra = self._step(state, t) if self.remote is None else self._remote_step(state, t)
        if extra is None:
            return StepInfo(tokens=0, documents=0, extra={"converged": True})
        extra["converged"] = state.converged
        return StepInfo(tokens=self.n_tokens, documents=self.n_docs, extra=extra)

    def _step(self, state: CVBState, t: int) -> dict | None:
        """Iteration t + 1 (None once converged): the sweep, the fields refreshed every
        ``refresh_every`` steps, the convergence check every ``check_every``."""
        if state.converged:
            state.step = t + 1
            return None
        if self.remote is not None:
            self.remote.sweep(state.m_kw, state.m_k, state.alpha, state.beta,
                              None if self.seeds is None else self.seeds.csr,
                              state.v_kw, state.v_k)
        else:
            var = (state.v_dk, state.v_kw, state.v_k) if self.gaussian else (None, None, None)
            prior = {} if self.seeds is None else dict(zip(
                ("prior_ptr", "prior_topic", "prior_extra"), self.seeds.csr))
            _cvb.sweep(self.indptr, self.indices, self.counts, state.mu, state.m_dk,
                       state.m_kw, state.m_k, *var, state.alpha, state.beta, self.bounds,
                       self.threads, **prior)
        state.step = t + 1
        opts = self.config.inference
        if state.step % opts.refresh_every == 0:
            if self.remote is not None:
                self.remote.refresh(state.m_kw, state.m_k, state.v_kw, state.v_k)
            else:
                self.refresh_fields(state)
        extra = {}
        if opts.tol > 0 and state.step % opts.check_every == 0:
            if self.remote is not None:     # the statistic reads every document's fields
                self.remote.gather(state.mu, state.m_dk, state.v_dk)
            value = self.monitor(state)
            previous = state.monitor
            if np.isfinite(previous) and abs(value - previous) <= opts.tol * abs(previous):
                state.converged = True
            state.monitor = value
            extra["monitor"] = value
        return extra

    # -------------------------------------------------------------- on a cluster
    def use_cluster(self, cluster) -> None:
        """Run every iteration's chunks on ``cluster``: mu and the document fields live on its
        workers, brought back when something reads them (checkpoints, the convergence check,
        the objective, Protocol B scoring)."""
        super().use_cluster(cluster)
        token_ptr = np.zeros(self.n_docs + 1, dtype=np.int64)
        np.cumsum(self.doc_lengths, out=token_ptr[1:])
        self.remote = ShardedCVB(cluster, self.store, token_ptr, self.indptr, self.bounds,
                                 self.gaussian)

    def _remote_step(self, state: CVBState, t: int) -> dict | None:
        """:meth:`_step` on the cluster; a worker lost on the way is recovered from
        (:meth:`_recover`) and the step done again."""
        def attempt() -> dict | None:
            if self.remote.shards is None:
                self.remote.distribute(state.mu, state.m_dk, state.v_dk)
            if not self.remote.stale:           # the driver holds the whole state: keep it
                self._restart = FieldsPoint.of(state)
            return self._step(state, t)

        return self.remote.recovering(lambda exc: self._recover(state, exc, t), attempt)

    def _recover(self, state: CVBState, exc: Exception, upto: int) -> None:
        """After a worker was lost: go back to the last step at which the driver held the whole
        state (mu and the document fields as last gathered, the word and topic fields kept
        then), send the shards out again and redo the steps before ``upto``. The iterations are
        a function of that state, so the steps redone are the lost ones, bit for bit."""
        back = self._restart
        self.remote.restart(exc, back.step, upto, "steps")
        back.restore(state)             # state.mu and state.m_dk are those of back.step
        for t in range(back.step, upto):
            self._remote_step(state, t)

    def synced(self, state: CVBState) -> CVBState:
        """``state`` with mu and the document fields brought back from the cluster when they
        are behind."""
        if self.remote is None or not self.remote.stale:
            return state
        self.remote.recovering(lambda exc: self._recover(state, exc, state.step),
                               lambda: self.remote.gather(state.mu, state.m_dk, state.v_dk))
        return state

    def mark_step(self, state: CVBState) -> None:
        """Nothing to copy: the restart point of the iterations on the cluster is the mark."""

    def roll_back(self, state: CVBState) -> int:
        """After the cluster was lost: the state as the driver last held it whole (mu and the
        document fields as last gathered, with the word and topic fields of that step); the
        shards are gone with it."""
        if self.remote.stale:
            self._restart.restore(state)
        self.remote.abandon()
        return state.step

    def state_to_arrays(self, state: CVBState) -> tuple[dict, dict[str, np.ndarray]]:
        return super().state_to_arrays(self.synced(state))

    def training_theta(self, state: CVBState) -> np.ndarray:
        return super().training_theta(self.synced(state))

    def monitor(self, state: CVBState) -> float:
        """The convergence statistic of §4.7: the bound (CVB), training perplexity (CVB0)."""
        if self.gaussian:
            return self.approximate_bound(state)
        return self.training_perplexity(state)

    # -------------------------------------------------------------- estimates
    def approximate_bound(self, state: CVBState) -> float:
        """B of §4.6 (second-order approximation of the collapsed free energy, total)."""
        if self.gaussian:
            m_dk, m_kw, m_k = state.m_dk, state.m_kw, state.m_k
            v_dk, v_kw, v_k = state.v_dk, state.v_kw, state.v_k
        else:  # CVB0 keeps no variances: one O(MK) pass when the bound is asked for
            m_dk, m_kw, m_k = np.empty_like(state.m_dk), np.empty_like(state.m_kw), np.empty(self.K)
            v_dk, v_kw, v_k = np.empty_like(state.m_dk), np.empty_like(state.m_kw), np.empty(self.K)
            _cvb.compute_fields(self.indptr, self.indices, self.counts, state.mu, m_dk, m_kw,
                                m_k, v_dk, v_kw, v_k, self.threads)
        alpha, beta = state.alpha, state.beta
        a_sum = alpha.sum()
        vbeta = self.V * beta
        doc = (self.n_docs * gammaln(a_sum) - gammaln(a_sum + self.doc_lengths).sum()
               + (gaussian_lngamma(alpha, m_dk, v_dk) - gammaln(alpha)).sum())
        if self.seeds is not None:      # beta_wk = beta + o_wk, beta-bar_k (§2.14)
            beta_wk = beta + self.seeds.dense()
            vbeta = self.seeds.topic_totals(beta)
            topic = (gammaln(vbeta).sum() - gaussian_lngamma(vbeta, m_k, v_k).sum()
                     + (gaussian_lngamma(beta_wk, m_kw, v_kw) - gammaln(beta_wk)).sum())
        else:
            topic = (self.K * gammaln(vbeta) - gaussian_lngamma(vbeta, m_k, v_k).sum()
                     + (gaussian_lngamma(beta, m_kw, v_kw) - gammaln(beta)).sum())
        ent = np.empty(self.indices.size)
        _cvb.pair_entropy(self.counts, state.mu, ent, self.threads)
        return float(doc + topic - ent.sum())

    def training_perplexity(self, state: CVBState) -> float:
        """exp(-sum n_dw ln(sum_k theta-hat_dk phi-hat_wk) / N) on the training pairs."""
        train = Documents(None, None, self.indptr, self.indices, self.counts)
        p = mixture_probabilities(train, state.theta(), self.point_phi(state), self.threads)
        return float(np.exp(-np.dot(self.counts, np.log(np.maximum(p, 1e-300))) / self.n_tokens))

    def objective(self, state: CVBState) -> float:
        """The approximate bound of §4.6 per training token."""
        return self.approximate_bound(self.synced(state)) / max(self.n_tokens, 1)

    def fold_in_call(self, state: CVBState, prior) -> FoldInCall:
        """theta-hat of unseen documents by CVB0 updates with phi-hat frozen (§4.7)."""
        opts = self.config.inference
        return FoldInCall(cvb0_fold_in, (np.ascontiguousarray(self.point_phi(state)),
                                         np.ascontiguousarray(self.prior_of(state, prior),
                                                              dtype=np.float64)),
                          {"tol": float(opts.fold_in_tol),
                           "max_passes": int(opts.fold_in_max_passes)})

    def point_phi(self, state: CVBState) -> np.ndarray:
        """Word-major (V, K) phi-hat = (beta_wk + m_kw) / (beta-bar_k + m_k): the state's
        own without seeds, with the seed words' prior beta + o (§2.14) with them."""
        if self.seeds is None:
            return state.phi()
        prior = state.beta + self.seeds.dense()
        return (prior + state.m_kw) / (self.seeds.topic_totals(state.beta) + state.m_k)

    def topic_word(self, state: CVBState) -> np.ndarray:
        return self.point_phi(state).T.copy()

    def state_sizes(self) -> dict:
        variance = (self.n_docs, self.V, self.K) if self.gaussian else (0, 0, 0)
        return {**super().state_sizes(), "pairs": self.indices.size,
                **dict(zip(("var_docs", "var_words", "var_topics"), variance))}

    def check_restored(self, state: CVBState) -> None:
        if state.gaussian != self.gaussian:
            raise ValueError(f"the state has gaussian = {state.gaussian}, the config's "
                             f"algorithm {self.name} {self.gaussian}")

    def check_state(self, state: CVBState) -> None:
        for name in ("m_k", "v_k"):
            if not np.all(np.isfinite(getattr(state, name))):
                raise NumericalError(f"{name} became non-finite at step {state.step}")


@register
class CVB0Driver(CVBDriver):
    """CVB0: the zero-order update (no variance fields, no exponential)."""

    name = "cvb0"
    traits = CVBDriver.traits.but(paper="Asuncion, Welling, Smyth & Teh 2009")
    gaussian = False
