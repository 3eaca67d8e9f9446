"""Batch variational Bayes with variational EM for LDA (Blei, Ng & Jordan 2003).

docs/algorithms.md §3. One training step is one EM iteration: the E-step of every document (kernel
:func:`topictk.inference.variational._vb.e_step`, whole documents under ``nogil``, OpenMP over
documents), the exact ELBO of that E-step (logged per token as ``train_bound_per_token``), the
M-step for lambda (or phi when ``inference.smoothed`` is false) and, with ``model.alpha: auto``,
Newton steps for an asymmetric alpha (§3.4). The NumPy twin is ``tests/reference/vb.py``.

**Choice (E-step start, departs from §3.6).** §3.6 warm-starts every document from its previous
gamma so that the ELBO is non-decreasing. With warm starts alone a document whose gamma has
collapsed onto a few topics early on never leaves them (exp(Elogtheta) of the other topics is
~e^-10), and on the planted corpus of §1.6 batch VB then ends in merged topics from every seed
(mean matched L1 0.6-1.0, ELBO/token -3.5 against -3.24 at the planted topics), while cold
starts (Blei et al.'s lda-c, scikit-learn, gensim) recover them but lose the monotone bound.
The default ``estep_start: best`` runs both starts for a document and keeps the one with the
higher document bound l_d: since documents are independent given lambda, the corpus ELBO is
still non-decreasing, and documents can leave a poor early fixed point. A cold run costs
several warm ones (about 67 against 15 gamma updates per KOS document), so both starts run in
the first ``best_iterations`` (20) EM iterations and afterwards in every ``best_every``-th (5)
only, warm ones in between (every iteration is one of the two kinds, so the bound stays
monotone). On the planted corpus this recovers the topics from 10 seeds in 10, as both starts
throughout do (``best_iterations: 0``); both starts for 10 iterations and warm ones afterwards
leave 3 seeds in 10 with merged topics, and both starts every 5th iteration from the start
leave 2. ``warm`` and ``cold`` are available.

Evaluation (§11.2): test documents are folded in by the same E-step, cold-started, with lambda
frozen; theta-hat = gamma / gamma., phi-hat = lambda / lambda.. On a Protocol B store the
held-out tokens of the training documents are scored with the training gamma.
"""
from __future__ import annotations

import logging

import numpy as np

from topictk import streams as keys
from topictk.config.schema import Option
from topictk.errors import NumericalError
from topictk.inference.base import Traits
from topictk.inference.hyper import resolve_alpha
from topictk.inference.registry import register
from topictk.inference.seed_prior import SeededDriverMixin
from topictk.inference.variational.template import (
    ESTEP_OPTIONS,
    stopping_tolerance,
    PHI_FLOOR,
    BatchEMDriver,
    EStepJob,
    StoreRef,
    add_blocks,
    block_estep,
    cluster_estep,
    estep_blocks,
    estep_wave,
    elog_theta_sum,
    expected_log_topics,
    FoldInCall,
    estep_fold_in_call,
    optimize_alpha,
)
from topictk.inference.variational.grow import grow_vb_state
from topictk.state.variational import VBState
from topictk.streams import Streams

log = logging.getLogger("topictk")


@register
class VBDriver(SeededDriverMixin, BatchEMDriver):
    """Batch variational EM; one step is one EM iteration over the whole training corpus."""

    name = "vb"
    # the blocks of the E-step, and the fold-ins, run on a cluster's workers
    traits = Traits(kind="variational", paper="Blei, Ng & Jordan 2003", cluster=True,
                    cluster_fold_in=True, own_fold_in=True, alpha_auto=True,
                    objective="train_bound_per_token", add_documents=("lda",))
    STATE = VBState
    OPTIONS = {
        **ESTEP_OPTIONS,
        "tol": stopping_tolerance("the ELBO"),
        "smoothed": Option("bool", True,
                           help="q(phi) = Dir(lambda) (Blei et al. 2003 §5.4); false = point "
                                "estimate phi (original variational EM)"),
        "estep_start": Option("choice", "best", choices=("best", "warm", "cold"),
                              help="document E-step start: warm = previous gamma (monotone "
                                   "ELBO, §3.6), cold = alpha + N_d/K, best = run both and "
                                   "keep the higher document bound (monotone, and documents "
                                   "can leave a poor early fixed point)"),
        "best_iterations": Option("int", 20, low=0,
                                  help="with estep_start: best, EM iterations that run both "
                                       "starts; later ones start warm except every "
                                       "best_every-th (0 = both starts throughout)"),
        "best_every": Option("int", 5, low=1,
                             help="with estep_start: best, after best_iterations run both "
                                  "starts in every N-th EM iteration only, warm ones in "
                                  "between (1 = every iteration)"),
        "chunks": Option("int", None, low=1, nullable=True,
                         help="blocks of documents whose E-step statistics are summed on "
                              "their own, then added block by block (a cluster spreads the "
                              "blocks over its workers; the numbers depend on this, never on "
                              "the cluster; default: one block)"),
    }

    @classmethod
    def memory_held(cls, data: dict, s) -> list:
        """lambda (V, K) and every training document's gamma (D, K)."""
        return [("lambda", (s.V, s.K), 8), ("gamma", (s.D, s.K), 8)]

    @classmethod
    def memory_phases(cls, data: dict, s) -> list[list]:
        """The E-step: E[log phi] (V, K), each block's statistics (V, K) and the kernel's
        staged terms; the M-step: the statistics beside the new lambda (unsmoothed: and
        max(SS, 1e-100) before it is normalised); alpha's update: the statistics beside
        E[ln theta] of every document (digamma(gamma) and the difference, 2 x D x K)."""
        inference = data["inference"]
        blocks = min(int(inference.get("chunks") or 1), max(s.D, 1))
        smoothed = inference.get("smoothed", True)
        phases = [[("E[log phi]", (s.V, s.K), 8),
                   ("E-step statistics of every block", (blocks, s.V, s.K), 8),
                   estep_wave(s.M * s.K)],
                  [("E-step statistics", (s.V, s.K), 8),
                   ("new lambda", (1 if smoothed else 2, s.V, s.K), 8)]]
        if data["model"].get("alpha") == "auto":
            phases.append([("E-step statistics", (s.V, s.K), 8),
                           ("E[ln theta] of every document", (2, s.D, s.K), 8)])
        return phases

    def __init__(self, config, store, threads: int = 1, *,
                 streams: Streams | None = None):
        super().__init__(config, store, threads, streams=streams)
        self.smoothed = bool(config.inference.smoothed)

    # ------------------------------------------------------------------ state
    def init_state(self) -> VBState:
        """lambda ~ Gam(100, rate 100) i.i.d. from the init stream, w outer, k inner (§3.5)."""
        gen = np.random.Generator(self.streams.persistent(keys.INIT))
        lam = gen.standard_gamma(100.0, size=(self.V, self.K)) / 100.0
        if self.seeds is not None:      # seed words start in their topics (§2.14)
            self.seeds.add_to(lam)
        if not self.smoothed:
            lam = lam / lam.sum(axis=0)
        alpha = resolve_alpha(self.config.model.alpha, self.K)
        gamma = alpha[None, :] + (self.doc_lengths / self.K)[:, None]
        return VBState(lam=np.ascontiguousarray(lam), gamma=np.ascontiguousarray(gamma),
                       alpha=alpha, beta=float(self.config.model.beta), smoothed=self.smoothed)

    @classmethod
    def takes_new_words(cls, config) -> bool:
        """Unsmoothed phi is a point estimate without a prior: new words are dropped."""
        return bool(config.inference.smoothed)

    def grow_state(self, old: VBState, added) -> VBState:
        """Added documents (:func:`topictk.inference.variational.grow.grow_vb_state`)."""
        return grow_vb_state(self, old, added)

    # ------------------------------------------------------------------- step
    def e_step_bound(self, state: VBState):
        """E-step over the corpus with the current lambda: (sstats (V, K), ELBO, iterations)."""
        opts = self.config.inference
        totals = state.lam.sum(axis=0)
        B, shift, topic_part = expected_log_topics(state.lam, totals, state.beta, self.smoothed,
                                                   self.threads, with_term=self.smoothed)
        start = opts.estep_start
        if start == "best" and state.step == 0:
            start = "cold"              # the stored gamma is the cold start: one run suffices
        elif start == "best" and 0 < opts.best_iterations <= state.step \
                and state.step % opts.best_every != 0:
            start = "warm"
        blocks = estep_blocks(self.n_docs, int(opts.chunks or 1))
        if self.cluster is not None:
            job = EStepJob(shift, state.alpha, opts.estep_tol, opts.estep_max_iter,
                           StoreRef.of(self.store), start)
            parts = cluster_estep(self.cluster, job, B, blocks, state.gamma)
            for (d0, d1), part in zip(blocks, parts):
                state.gamma[d0:d1] = part[1]
        else:   # each block updates its rows of gamma in place
            parts = [block_estep(self.csr_view, B, shift, state.alpha, (d0, d1),
                                 opts.estep_tol, opts.estep_max_iter, True, self.threads,
                                 start=start, gamma=state.gamma[d0:d1])
                     for d0, d1 in blocks]
        sstats, _, doc_bound, iterations = add_blocks(parts)
        bound = float(doc_bound.sum()) + (topic_part if self.smoothed else 0.0)
        if self.smoothed and self.seeds is not None:     # the prior beta + o (§2.14)
            bound += self.seeds.elbo_correction(self.seeds.at(state.lam), totals, state.beta)
        return sstats, bound, iterations

    def m_step(self, state: VBState, sstats: np.ndarray) -> None:
        """lambda = beta + o + SS (smoothed) or phi = max(SS + o, 1e-100) normalised per
        topic (§3.3; o the seed overlay, §2.14, zero without seeds); then alpha (§3.4) when
        learnt."""
        if self.smoothed:
            state.lam = sstats + state.beta
            if self.seeds is not None:
                self.seeds.add_to(state.lam)
        else:
            if self.seeds is not None:
                self.seeds.add_to(sstats)
            phi = np.maximum(sstats, PHI_FLOOR)
            state.lam = phi / phi.sum(axis=0)
        if self.learn_alpha:
            state.alpha = optimize_alpha(state.alpha, elog_theta_sum(state.gamma), self.n_docs)

    def expectation(self, state: VBState):
        sstats, bound, iterations = self.e_step_bound(state)
        return sstats, bound, {"estep_iterations": round(float(iterations.mean()), 4)
                               if iterations.size else 0.0}

    def maximization(self, state: VBState, sstats: np.ndarray) -> None:
        self.m_step(state, sstats)

    # -------------------------------------------------------------- estimates
    def fold_in_call(self, state: VBState, prior) -> FoldInCall:
        """theta-hat of unseen documents: cold E-step with lambda frozen (§11.2)."""
        opts = self.config.inference
        return estep_fold_in_call(state.lam, self.prior_of(state, prior), state.beta,
                                  self.smoothed, opts.estep_tol, opts.estep_max_iter,
                                  self.threads)

    def check_restored(self, state: VBState) -> None:
        if state.smoothed != self.smoothed:
            raise ValueError(f"the state has smoothed = {state.smoothed}, the config "
                             f"{self.smoothed}")

    def check_state(self, state: VBState) -> None:
        if not np.all(np.isfinite(state.lam)):
            raise NumericalError(f"lambda became non-finite at step {state.step}")
        if not np.all(np.isfinite(state.gamma)):
            raise NumericalError(f"gamma became non-finite at step {state.step}")
        if not np.all(np.isfinite(state.alpha)):
            raise NumericalError(f"alpha became non-finite at step {state.step}")
