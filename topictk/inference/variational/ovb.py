"""Online variational Bayes (stochastic variational inference) for LDA (Hoffman, Blei & Bach
2010).

docs/algorithms.md §5. One training step is one mini-batch update t:

* the batch: the next ``batch_size`` positions of the current epoch's permutation (a fresh
  permutation per epoch keyed by the main stream (1,); the last short batch is dropped), read
  row by row from the memory-mapped store -- the corpus is never loaded whole;
* the E-step of §3.2, cold-started, for every document of the batch (Cython kernel
  :func:`topictk.inference.variational._vb.e_step`), with E[ln phi] computed for the batch's
  words only;
* the natural-gradient step lambda <- (1 - rho_t) lambda + rho_t (eta + R_B SS) with
  rho_t = min(1, (tau0 + t)^-kappa) (Hoffman's tau0 and kappa), done lazily:
  lambda = offset + scale * lam_tilde, so a step costs O(K V_B), not O(K V);
* optionally a damped Newton step for an asymmetric alpha (``model.alpha: auto``) and for a
  symmetric eta (``inference.learn_eta``), both with step rho_t.

The NumPy twin is ``tests/reference/ovb.py``. Evaluation folds test documents in with the
batch-VB E-step (cold start, lambda frozen; §11.2).

Epoch permutations are the keyed Feistel permutations of :mod:`topictk.corpus.batches`; the
keys and the epoch index are in the checkpoint, so a resumed run draws exactly the batches of
an uninterrupted one.
"""
from __future__ import annotations

import logging

import numpy as np
from scipy.special import digamma, polygamma

from topictk import streams as keys
from topictk.config.schema import Option
from topictk.corpus.batches import (  # noqa: F401
    FEISTEL_ROUNDS,
    EpochSchedule,
    gather_rows,
    permute,
)
from topictk.corpus.store import Documents
from topictk.errors import NumericalError
from topictk.inference.base import StepInfo, Traits
from topictk.inference.minibatch import batch_sizes, step_size
from topictk.inference.perplexity import mixture_probabilities
from topictk.inference.hyper import resolve_alpha
from topictk.inference.registry import register
from topictk.inference.seed_prior import SeededDriverMixin
from topictk.inference.variational.template import (
    ALPHA_MAX,
    ALPHA_MIN,
    ESTEP_OPTIONS,
    EStepJob,
    StoreRef,
    VariationalDriver,
    add_blocks_pairwise,
    alpha_gradient,
    block_estep,
    cluster_estep,
    e_step,
    estep_blocks,
    estep_wave,
    elog_theta_sum,
    expected_log_topics,
    FoldInCall,
    estep_fold_in_call,
    newton_direction,
)
from topictk.inference.variational.grow import grow_online_state
from topictk.state.variational import OnlineState
from topictk.streams import Streams

log = logging.getLogger("topictk")

SCALE_FLOOR = 1e-100


#: ``tau0: auto`` is the number of mini-batches of an epoch, within these bounds
#: (docs/algorithms.md §5; the upper one is Hoffman et al.'s value for millions of documents)
TAU0_MIN, TAU0_MAX = 1.0, 1024.0


def resolve_tau0(setting, batches_per_epoch: int) -> float:
    """``inference.tau0``: the number given, or for ``auto`` the batches of an epoch, so that
    the first steps average over about an epoch of batches instead of following each one
    (measured on KOS, 20 Newsgroups and NIPS: benchmarks/results/default_steps.md)."""
    if setting != "auto":
        return float(setting)
    return min(TAU0_MAX, max(TAU0_MIN, float(batches_per_epoch)))


@register
class OVBDriver(SeededDriverMixin, VariationalDriver):
    """Online VB / SVI; one step is one mini-batch update."""

    name = "ovb"
    # the blocks of a mini-batch's E-step, and the fold-ins, run on a cluster's workers
    traits = Traits(kind="mini-batch", paper="Hoffman, Blei & Bach 2010", cluster=True,
                    cluster_fold_in=True, own_fold_in=True, alpha_auto=True,
                    objective="train_bound_per_token", add_documents=("lda",))
    STATE = OnlineState
    OPTIONS = {
        **ESTEP_OPTIONS,
        "batch_size": Option("int", 64, low=1,
                             help="documents per mini-batch |B| (clamped to the corpus size)"),
        "tau0": Option("float", "auto", low=0, auto=True,
                       help="delay of the step size rho_t = (tau0 + t)^-kappa (Hoffman's "
                            "tau0); auto = the mini-batches of an epoch, D / batch_size, "
                            "in [1, 1024]"),
        "kappa": Option("float", 0.7, low=0.5, high=1, low_open=True,
                        help="forgetting rate of rho_t = (tau0 + t)^-kappa, in (0.5, 1]"),
        "learn_eta": Option("bool", False,
                            help="learn a symmetric topic prior eta (model.beta is its start)"),
        "chunks": Option("int", None, low=1, nullable=True,
                         help="blocks of the mini-batch whose E-step statistics are summed "
                              "on their own, then added pairwise in block order (a cluster "
                              "runs the blocks on its workers, which add them among "
                              "themselves; the numbers depend on this, never on the "
                              "cluster; default: one block)"),
    }

    MEMORY_FIX = ("set training.eval_every: 0 (no dense lambda beside E[log phi] or "
                  "phi-hat during training)")

    @classmethod
    def memory_held(cls, data: dict, s) -> list:
        """lam_tilde (V, K); no per-document state."""
        return [("lambda", (s.V, s.K), 8)]

    @classmethod
    def memory_phases(cls, data: dict, s) -> list[list]:
        """A mini-batch's E-step: E[log phi] of its words, each block's statistics of them,
        the documents' gamma and the kernel's staged terms; the update: the statistics, their
        scaled copy and the rows of lambda they are added to; learning eta: the dense lambda
        and its digamma (V, K each); the objective (evaluated with the curve): E[log phi] of
        every word."""
        inference = data["inference"]
        docs, _, pairs, words = batch_sizes(data, s)
        blocks = min(int(inference.get("chunks") or 1), max(docs, 1))
        phases = [[("E[log phi] of the batch's words", (words, s.K), 8),
                   ("E-step statistics of every block", (blocks, words, s.K), 8),
                   ("gamma of the batch", (docs, s.K), 8), estep_wave(pairs * s.K)],
                  [("batch statistics, scaled, and their rows of lambda", (3, words, s.K),
                    8)]]
        if inference.get("learn_eta"):
            phases.append([("dense lambda and its digamma", (2, s.V, s.K), 8)])
        if s.curve_docs or s.train_heldout:
            phases.append([("E[log phi] of every word (the bound)", (s.V, s.K), 8)])
        return phases

    @classmethod
    def memory_evaluation(cls, data: dict, s) -> list:
        """The curve's cold E-step with the dense lambda and its E[log phi] (then lambda
        and phi-hat for the mixture), and the documents' gamma and theta-hat."""
        return [("dense lambda and E[log phi] of the fold-in", (2, s.V, s.K), 8),
                ("gamma and theta-hat of the curve", (2, s.curve_docs, s.K), 8)]

    @classmethod
    def memory_train_heldout(cls, data: dict, s) -> list:
        """Protocol B: the dense lambda, phi-hat and E[log phi], and the cold E-step of
        blocks of 4,096 training documents."""
        return [("dense lambda, phi-hat and E[log phi]", (3, s.V, s.K), 8),
                ("gamma and theta-hat of a block", (2, min(s.D, 4096), s.K), 8)]

    def __init__(self, config, store, threads: int = 1, *,
                 streams: Streams | None = None):
        super().__init__(config, store, threads, streams=streams)
        self.train = self.train_documents        # memory-mapped; rows are read per batch
        opts = config.inference
        batch = int(opts.batch_size)
        if batch > self.n_docs:
            log.warning("inference.batch_size = %d is larger than the corpus (%d training "
                        "documents); using %d", batch, self.n_docs, self.n_docs)
            batch = self.n_docs
        self.batch_size = batch
        self.batches_per_epoch = self.n_docs // batch
        self.schedule = EpochSchedule(self.n_docs, batch, permute_whole=True)
        self.tau0 = resolve_tau0(opts.tau0, self.batches_per_epoch)
        self.kappa = float(opts.kappa)
        self.learn_alpha = config.model.alpha == "auto"
        self.learn_eta = bool(opts.learn_eta)

    # ------------------------------------------------------------------ state
    def init_state(self) -> OnlineState:
        """lambda ~ Gam(100, rate 100) i.i.d. from the init stream (w outer, k inner), stored as
        lam_tilde = lambda - beta with scale 1 and offset beta."""
        gen = np.random.Generator(self.streams.persistent(keys.INIT))
        beta = float(self.config.model.beta)
        lam = gen.standard_gamma(100.0, size=(self.V, self.K)) / 100.0
        if self.seeds is not None:      # seed words start in their topics (§2.14)
            self.seeds.add_to(lam)
        lam_tilde = np.ascontiguousarray(lam - beta)
        return OnlineState(lam_tilde=lam_tilde, lam_sum=lam_tilde.sum(axis=0), scale=1.0,
                           offset=beta, alpha=resolve_alpha(self.config.model.alpha, self.K),
                           beta=beta, keys=np.zeros(FEISTEL_ROUNDS, dtype=np.uint64), epoch=-1)


    def grow_state(self, old: OnlineState, added) -> OnlineState:
        """Added documents (:func:`topictk.inference.variational.grow.grow_online_state`)."""
        return grow_online_state(self, old, added)

    def continued_settings(self, state: OnlineState) -> dict:
        """The step sizes go on: ``tau0: auto`` stays the batches per epoch of this run."""
        return {"inference.tau0": self.tau0} if self.config.inference.tau0 == "auto" else {}

    # ---------------------------------------------------------------- batches
    def batch_documents(self, state: OnlineState, t: int) -> np.ndarray:
        """Document ids of mini-batch t from the shared epoch schedule (which draws the
        epoch's keys from the main stream when t starts a new epoch); the state keeps the
        epoch and its keys."""
        epoch = t // self.batches_per_epoch
        if epoch not in (state.epoch, state.epoch + 1):
            raise ValueError(f"mini-batch {t} is not in the current epoch {state.epoch} "
                             f"or the next")
        current = (None if state.epoch < 0 else
                   np.concatenate([np.array([state.epoch], dtype=np.uint64), state.keys]))
        main = np.random.Generator(self.streams.persistent(keys.MAIN))
        docs, current = self.schedule.batch_ids(t, current, main)
        state.epoch, state.keys = int(current[0]), np.array(current[1:], dtype=np.uint64)
        return docs

    def _batch_estep(self, state: OnlineState, docs: np.ndarray, with_sstats: bool):
        """Cold E-step of the documents ``docs`` with the current lambda, in
        ``inference.chunks`` blocks whose statistics are added pairwise in block order
        (:func:`add_blocks_pairwise`; on the cluster's workers, among themselves, when there
        is one)."""
        indptr, indices, counts = gather_rows(self.train, docs)
        words, local = np.unique(indices, return_inverse=True)
        local = np.ascontiguousarray(local, dtype=np.int32)
        B, shift, _ = expected_log_topics(state.lam_tilde, state.lam_totals(), state.beta, True,
                                          self.threads, rows=words.astype(np.int32),
                                          offset=state.offset, scale=state.scale)
        blocks = estep_blocks(docs.size, int(self.config.inference.chunks or 1))
        opts = self.config.inference
        if self.cluster is not None and with_sstats:
            job = EStepJob(shift, state.alpha, opts.estep_tol, opts.estep_max_iter,
                           StoreRef.of(self.store),
                           doc_ids=np.ascontiguousarray(docs, dtype=np.int64))
            parts = cluster_estep(self.cluster, job, B, blocks)
        else:
            parts = [block_estep((indptr, local, counts), B, shift, state.alpha, block,
                                 opts.estep_tol, opts.estep_max_iter, with_sstats, self.threads)
                     for block in blocks]
        sstats, gamma, bound, iterations = add_blocks_pairwise(parts)
        return words, gamma, sstats, bound, int(counts.sum(dtype=np.int64)), iterations

    # ------------------------------------------------------------------- step
    def step(self, state: OnlineState, t: int) -> StepInfo:
        docs = self.batch_documents(state, t)
        words, gamma, sstats, _, n_tokens, iterations = self._batch_estep(state, docs, True)
        rho = step_size(t, self.tau0, self.kappa)
        ratio = self.n_docs / docs.size                         # R_B
        self.update_lambda(state, words, sstats, rho, ratio)
        if self.learn_alpha:
            state.alpha = self.alpha_step(state.alpha, elog_theta_sum(gamma), rho, ratio)
        if self.learn_eta:
            state.beta = self.eta_step(state, rho)
        state.rho = rho
        state.step = t + 1
        return StepInfo(tokens=n_tokens, documents=int(docs.size),
                        extra={"rho": rho, "epoch": state.epoch,
                               "estep_iterations": round(float(iterations.mean()), 4)})

    def update_lambda(self, state: OnlineState, words: np.ndarray, sstats: np.ndarray,
                      rho: float, ratio: float) -> None:
        """lambda <- (1 - rho) lambda + rho (eta + o + R_B SS), lazily (§5; o the seed
        overlay of §2.14, added to lam_tilde at its entries as rho o / scale)."""
        scale = (1.0 - rho) * state.scale
        state.offset = (1.0 - rho) * state.offset + rho * state.beta if self.learn_eta \
            else state.offset
        rescaled = scale < SCALE_FLOOR
        if rescaled:        # fold the scale into lam_tilde (O(KV), rare; rho = 1 lands here)
            state.lam_tilde *= scale
            scale = 1.0
        factor = rho * ratio / scale
        state.lam_tilde[words] += factor * sstats
        if self.seeds is not None:
            self.seeds.add_to(state.lam_tilde, rho / scale)
        if rescaled:
            state.lam_sum = state.lam_tilde.sum(axis=0)
        else:
            state.lam_sum += factor * sstats.sum(axis=0)
            if self.seeds is not None:
                state.lam_sum += (rho / scale) * self.seeds.column_sums()
        state.scale = scale

    def alpha_step(self, alpha: np.ndarray, batch_S: np.ndarray, rho: float,
                   ratio: float) -> np.ndarray:
        """alpha <- alpha - rho H^-1 g with g, H of the corpus-scale alpha objective of §3.4
        estimated from the batch (S = R_B sum_{d in B} E[ln theta_d]); the step is halved until
        alpha stays positive."""
        g = alpha_gradient(alpha, ratio * batch_S, self.n_docs)
        delta = newton_direction(alpha, g, self.n_docs)
        step = rho
        for _ in range(31):
            new = alpha - step * delta
            if np.all(new > 0):
                break
            step *= 0.5
        else:
            return alpha
        return np.clip(new, ALPHA_MIN, ALPHA_MAX)

    def eta_step(self, state: OnlineState, rho: float) -> float:
        """eta <- eta - rho g / h for the symmetric topic prior (O(KV) digammas):
        g = K V [psi(V eta) - psi(eta)] + sum_kw Elogphi_kw, h = K V [V psi'(V eta) - psi'(eta)];
        with seed words (beta_wk = eta + o_wk, §2.14) V psi(V eta) becomes the mean over k of
        V psi(beta-bar_k), and psi(eta) the mean over (k, w) of psi(eta + o_wk) (psi' alike)."""
        eta = state.beta
        K, V = self.K, self.V
        totals = state.lam_totals()
        elog_sum = float(digamma(state.lam()).sum() - V * digamma(totals).sum())
        g = K * V * (digamma(V * eta) - digamma(eta)) + elog_sum
        h = K * V * (V * polygamma(1, V * eta) - polygamma(1, eta))
        if self.seeds is not None:
            bar, o = self.seeds.topic_totals(eta), self.seeds.extra
            g += (V * (digamma(bar) - digamma(V * eta)).sum()
                  - (digamma(eta + o) - digamma(eta)).sum())
            h += (V * V * (polygamma(1, bar) - polygamma(1, V * eta)).sum()
                  - (polygamma(1, eta + o) - polygamma(1, eta)).sum())
        step = rho
        for _ in range(31):
            new = eta - step * g / h
            if new > 0:
                return float(min(max(new, ALPHA_MIN), ALPHA_MAX))
            step *= 0.5
        return eta

    # -------------------------------------------------------------- estimates
    def objective(self, state: OnlineState) -> float | None:
        """Hoffman's per-word ELBO estimate (§5) on the last mini-batch, recomputed with the
        current lambda (a cold E-step of that batch plus the O(KV) topic terms)."""
        if state.step == 0:
            return None
        t_last = state.step - 1
        epoch, position = divmod(t_last, self.batches_per_epoch)
        if epoch != state.epoch:
            return None
        begin = position * self.batch_size
        docs = permute(np.arange(begin, begin + self.batch_size), self.n_docs, state.keys)
        _, _, _, bound, n_tokens, _ = self._batch_estep(state, docs, False)
        _, _, topic_part = expected_log_topics(state.lam_tilde, state.lam_totals(), state.beta,
                                               True, self.threads, offset=state.offset,
                                               scale=state.scale, with_term=True)
        if self.seeds is not None:      # the prior beta + o (§2.14)
            topic_part += self.seeds.elbo_correction(
                state.offset + state.scale * self.seeds.at(state.lam_tilde), state.lam_totals(),
                state.beta)
        ratio = self.n_docs / docs.size
        return (ratio * float(bound.sum()) + topic_part) / (ratio * max(n_tokens, 1))

    def fold_in_call(self, state: OnlineState, prior) -> FoldInCall:
        """theta-hat of unseen documents: cold E-step with lambda frozen (§11.2)."""
        opts = self.config.inference
        return estep_fold_in_call(state.lam(), self.prior_of(state, prior), state.beta, True,
                                  opts.estep_tol, opts.estep_max_iter, self.threads)

    def train_heldout_probabilities(self, state: OnlineState, samples, heldout: Documents,
                                    block: int = 4096) -> np.ndarray:
        """Protocol B. Online VB keeps no per-document state, so each training document's
        theta-hat is gamma/gamma. of a cold E-step of its observed tokens with the final lambda
        (what the algorithm would compute for it); documents are processed in blocks."""
        lam = state.lam()
        phi = lam / lam.sum(axis=0)
        opts = self.config.inference
        B, shift, _ = expected_log_topics(lam, lam.sum(axis=0), state.beta, True, self.threads)
        held_indptr = np.asarray(heldout.indptr, dtype=np.int64)
        out = np.zeros(held_indptr[-1])
        for begin in range(0, self.n_docs, block):
            rows = np.arange(begin, min(begin + block, self.n_docs))
            indptr, indices, counts = gather_rows(self.train, rows)
            gamma = np.empty((rows.size, self.K))
            e_step(indptr, indices, counts, B, shift, state.alpha, gamma, start="cold",
                   tol=opts.estep_tol, max_iter=opts.estep_max_iter, threads=self.threads)
            theta = gamma / gamma.sum(axis=1, keepdims=True)
            h_ptr, h_idx, h_cnt = gather_rows(heldout, rows)
            out[held_indptr[rows[0]]:held_indptr[rows[-1] + 1]] = mixture_probabilities(
                Documents(None, None, h_ptr, h_idx, h_cnt), theta, phi, self.threads)
        return out

    def check_state(self, state: OnlineState) -> None:
        if not (np.isfinite(state.scale) and np.all(np.isfinite(state.lam_sum))):
            raise NumericalError(f"lambda became non-finite at update {state.step}")
        if not np.all(np.isfinite(state.alpha)) or not np.isfinite(state.beta):
            raise NumericalError(f"alpha or eta became non-finite at update {state.step}")
