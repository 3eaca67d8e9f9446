"""Batch variational Bayes with variational EM for LDA (Blei, Ng & Jordan 2003).

ALGORITHMS.md §3. One training step is one EM iteration: the E-step of every document
(kernel :func:`topictk.inference._vb.e_step`, whole documents under ``nogil``, OpenMP over
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
from scipy.special import digamma, gammaln, polygamma

from topictk import streams as keys
from topictk.config.schema import Option
from topictk.corpus.store import Documents
from topictk.errors import NumericalError
from topictk.inference import _vb
from topictk.inference.base import Driver, StepInfo, TestSet
from topictk.inference.registry import register
from topictk.state.variational import VBState
from topictk.streams import Streams

log = logging.getLogger("topictk")

DEFAULT_ALPHA = 0.1
ALPHA_MIN, ALPHA_MAX = 1e-10, 1e5
PHI_FLOOR = 1e-100


# ---------------------------------------------------------------------------------------------
# Dirichlet alpha (§3.4)
def resolve_alpha(value, n_topics: int) -> np.ndarray:
    """model.alpha -> (K,) float64; ``auto`` starts from 0.1 and is learnt."""
    start = DEFAULT_ALPHA if value == "auto" else float(value)
    return np.full(n_topics, start, dtype=np.float64)


def alpha_objective(alpha: np.ndarray, S: np.ndarray, n_docs: float) -> float:
    """L(alpha) = D [lnGamma(alpha_sum) - sum_k lnGamma(alpha_k)] + sum_k (alpha_k - 1) S_k."""
    return float(n_docs * (gammaln(alpha.sum()) - gammaln(alpha).sum()) + np.dot(alpha - 1.0, S))


def alpha_gradient(alpha: np.ndarray, S: np.ndarray, n_docs: float) -> np.ndarray:
    """g_k = D [psi(alpha_sum) - psi(alpha_k)] + S_k."""
    return n_docs * (digamma(alpha.sum()) - digamma(alpha)) + S


def newton_direction(alpha: np.ndarray, g: np.ndarray, n_docs: float) -> np.ndarray:
    """H^-1 g in O(K) for H = diag(h) + z 1 1^T, h_k = -D psi'(alpha_k), z = D psi'(alpha_sum)
    (Sherman-Morrison). The PEM slides print -H without the D on the rank-one term (Typo, §3.4).
    """
    if alpha.size == 1:     # one topic: theta_d = 1 whatever alpha, nothing to learn
        return np.zeros_like(g)
    h = -n_docs * polygamma(1, alpha)
    z = n_docs * polygamma(1, alpha.sum())
    c = np.sum(g / h) / (1.0 / z + np.sum(1.0 / h))
    return (g - c) / h


def inverse_digamma(y: np.ndarray) -> np.ndarray:
    """psi^-1(y): Minka's start, then 5 Newton steps (§3.4)."""
    y = np.asarray(y, dtype=np.float64)
    x = np.where(y >= -2.22, np.exp(np.minimum(y, 700.0)) + 0.5,
                 -1.0 / (np.minimum(y, -2.22) + 0.5772156649015329))
    for _ in range(5):
        x = x - (digamma(x) - y) / polygamma(1, x)
    return x


def fixed_point_alpha(alpha: np.ndarray, S: np.ndarray, n_docs: float, max_iter: int = 1000,
                      tol: float = 1e-8) -> np.ndarray:
    """Minka's fixed point alpha_k <- psi^-1(psi(alpha_sum) + S_k / D) (always positive)."""
    alpha = np.asarray(alpha, dtype=np.float64).copy()
    for _ in range(max_iter):
        new = np.clip(inverse_digamma(digamma(alpha.sum()) + S / n_docs), ALPHA_MIN, ALPHA_MAX)
        change = np.max(np.abs(new - alpha) / alpha)
        alpha = new
        if change < tol:
            break
    return alpha


def optimize_alpha(alpha: np.ndarray, S: np.ndarray, n_docs: float, max_steps: int = 50,
                   tol: float = 1e-8) -> np.ndarray:
    """Maximise L(alpha) by Newton steps with step halving (§3.4); falls back to the fixed point
    when 30 halvings do not give a positive alpha with L(alpha_new) >= L(alpha).

    ``S`` (K,) is sum_d E[ln theta_dk] over the ``n_docs`` documents.
    """
    alpha = np.asarray(alpha, dtype=np.float64).copy()
    for _ in range(max_steps):
        delta = newton_direction(alpha, alpha_gradient(alpha, S, n_docs), n_docs)
        before = alpha_objective(alpha, S, n_docs)
        step = 1.0
        for _halving in range(31):
            new = alpha - step * delta
            # rounding slack only: a step that changes L by less than 1e-13 of it is no change
            if np.all(new > 0) and alpha_objective(new, S, n_docs) >= before - 1e-13 * abs(before):
                break
            step *= 0.5
        else:
            log.debug("alpha: Newton halving failed; using the fixed point")
            return fixed_point_alpha(alpha, S, n_docs)
        change = np.max(np.abs(step * delta) / alpha)
        alpha = np.clip(new, ALPHA_MIN, ALPHA_MAX)
        if change < tol:
            break
    return alpha


def elog_theta_sum(gamma: np.ndarray) -> np.ndarray:
    """S_k = sum_d (psi(gamma_dk) - psi(gamma_d.)) (the alpha statistic of §3.4)."""
    if gamma.shape[0] == 0:
        return np.zeros(gamma.shape[1])
    return (digamma(gamma) - digamma(gamma.sum(axis=1, keepdims=True))).sum(axis=0)


# ---------------------------------------------------------------------------------------------
# Shared pieces of the VB family (also used by ovb.py)
def topic_constant(n_topics: int, n_words: int, beta: float) -> float:
    """K [lnGamma(V beta) - V lnGamma(beta)], the constant of the topic part of the ELBO."""
    return float(n_topics * (gammaln(n_words * beta) - n_words * gammaln(beta)))


def expected_log_topics(lam: np.ndarray, lam_totals: np.ndarray, beta: float, smoothed: bool,
                        threads: int, rows: np.ndarray | None = None, offset: float = 0.0,
                        scale: float = 1.0, with_term: bool = False):
    """(B, shift, topic_part) for the words ``rows`` (all words when None) of
    lambda = offset + scale * lam. ``topic_part`` is the topic part of the ELBO (§3.3) when
    ``with_term`` (all words needed), else None."""
    n_rows = lam.shape[0] if rows is None else rows.size
    K = lam.shape[1]
    B = np.empty((n_rows, K))
    shift = np.empty(n_rows)
    term = np.empty(n_rows) if with_term else None
    psi_total = digamma(lam_totals) if smoothed else np.zeros(K)
    _vb.expected_log_topics(lam, rows, float(offset), float(scale), psi_total, bool(smoothed),
                            float(beta), B, shift, term, threads)
    topic_part = None
    if with_term:
        topic_part = (topic_constant(K, lam.shape[0], beta) + float(term.sum())
                      - float(gammaln(lam_totals).sum()))
    return B, shift, topic_part


def csr_arrays(docs: Documents) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The CSR arrays of ``docs`` as the kernels want them (no copy when already right)."""
    return (np.ascontiguousarray(docs.indptr, dtype=np.int64),
            np.ascontiguousarray(docs.indices, dtype=np.int32),
            np.ascontiguousarray(docs.counts, dtype=np.int32))


def doc_lengths(indptr: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """N_d of every row of a CSR block (int64)."""
    cum = np.zeros(counts.size + 1, dtype=np.int64)
    np.cumsum(counts, out=cum[1:])
    return cum[indptr[1:]] - cum[indptr[:-1]]


START = {"cold": 0, "warm": 1, "best": 2}


def e_step(indptr, indices, counts, B, shift, alpha, gamma, *, start: str, tol: float,
           max_iter: int, threads: int, sstats=None, doc_bound=None, iterations=None) -> None:
    """Call the E-step kernel with checked dtypes (see :func:`topictk.inference._vb.e_step`);
    ``start`` is cold, warm or best."""
    _vb.e_step(indptr, indices, counts, B, shift, np.ascontiguousarray(alpha, dtype=np.float64),
               gamma, START[start], float(tol), int(max_iter), sstats, doc_bound, iterations,
               int(threads))


def fold_in_theta(docs: Documents, lam: np.ndarray, alpha: np.ndarray, beta: float,
                  smoothed: bool, tol: float, max_iter: int, threads: int) -> np.ndarray:
    """theta-hat = gamma / gamma. of documents folded in by a cold E-step with lambda frozen
    (§11.2: VB, SVI)."""
    indptr, indices, counts = csr_arrays(docs)
    B, shift, _ = expected_log_topics(lam, lam.sum(axis=0), beta, smoothed, threads)
    gamma = np.empty((indptr.size - 1, lam.shape[1]))
    e_step(indptr, indices, counts, B, shift, alpha, gamma, start="cold", tol=tol,
           max_iter=max_iter, threads=threads)
    return gamma / gamma.sum(axis=1, keepdims=True)


def mixture_probabilities(docs: Documents, theta: np.ndarray, phi: np.ndarray,
                          threads: int) -> np.ndarray:
    """sum_k theta_dk phi_wk for every entry of ``docs`` (``phi`` word-major (V, K))."""
    indptr, indices, _ = csr_arrays(docs)
    out = np.zeros(indices.size)
    _vb.mixture_probabilities(indptr, indices, np.ascontiguousarray(theta, dtype=np.float64),
                              np.ascontiguousarray(phi, dtype=np.float64), out, threads)
    return out


def _nan_to_none(x: float):
    return None if x is None or not np.isfinite(x) else float(x)


def _none_to_nan(x) -> float:
    return float("nan") if x is None else float(x)


ESTEP_OPTIONS = {
    "estep_tol": Option("float", 1e-3, low=0, low_open=True,
                        help="E-step stops when the mean |change of gamma_dk| is below this"),
    "estep_max_iter": Option("int", 100, low=1, help="most gamma updates per document E-step"),
}


@register
class VBDriver(Driver):
    """Batch variational EM; one step is one EM iteration over the whole training corpus."""

    name = "vb"
    objective_name = "train_bound_per_token"
    OPTIONS = {
        **ESTEP_OPTIONS,
        "tol": Option("float", 1e-5, low=0,
                      help="stop when the relative ELBO change falls below this (0 = never); "
                           "later steps do nothing"),
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
    }

    def __init__(self, config, store, threads: int = 1):
        super().__init__(config, store, threads)
        train = store.train()
        self.indptr, self.indices, self.counts = csr_arrays(train)
        self.n_docs = self.indptr.size - 1
        self.doc_lengths = doc_lengths(self.indptr, self.counts)
        self.n_tokens = int(self.doc_lengths.sum())
        self.V = store.n_words
        self.K = int(config.model.topics)
        opts = config.inference
        self.smoothed = bool(opts.smoothed)
        self.learn_alpha = config.model.alpha == "auto"
        self.streams: Streams | None = None

    # ------------------------------------------------------------------ state
    def init_state(self, streams: Streams) -> VBState:
        """lambda ~ Gam(100, rate 100) i.i.d. from the init stream, w outer, k inner (§3.5)."""
        self.streams = streams
        gen = np.random.Generator(streams.persistent(keys.INIT))
        lam = gen.standard_gamma(100.0, size=(self.V, self.K)) / 100.0
        if not self.smoothed:
            lam = lam / lam.sum(axis=0)
        alpha = resolve_alpha(self.config.model.alpha, self.K)
        gamma = alpha[None, :] + (self.doc_lengths / self.K)[:, None]
        return VBState(lam=np.ascontiguousarray(lam), gamma=np.ascontiguousarray(gamma),
                       alpha=alpha, beta=float(self.config.model.beta), smoothed=self.smoothed)

    def attach(self, state: VBState, streams: Streams) -> None:
        self.streams = streams

    # ------------------------------------------------------------------- step
    def e_step_bound(self, state: VBState):
        """E-step over the corpus with the current lambda: (sstats (V, K), ELBO, iterations)."""
        opts = self.config.inference
        totals = state.lam.sum(axis=0)
        B, shift, topic_part = expected_log_topics(state.lam, totals, state.beta, self.smoothed,
                                                   self.threads, with_term=self.smoothed)
        sstats = np.zeros((self.V, self.K))
        doc_bound = np.zeros(self.n_docs)
        iterations = np.zeros(self.n_docs, dtype=np.int32)
        start = opts.estep_start
        if start == "best" and state.step == 0:
            start = "cold"              # the stored gamma is the cold start: one run suffices
        elif start == "best" and 0 < opts.best_iterations <= state.step \
                and state.step % opts.best_every != 0:
            start = "warm"
        e_step(self.indptr, self.indices, self.counts, B, shift, state.alpha, state.gamma,
               start=start, tol=opts.estep_tol, max_iter=opts.estep_max_iter,
               threads=self.threads, sstats=sstats, doc_bound=doc_bound, iterations=iterations)
        bound = float(doc_bound.sum()) + (topic_part if self.smoothed else 0.0)
        return sstats, bound, iterations

    def m_step(self, state: VBState, sstats: np.ndarray) -> None:
        """lambda = beta + SS (smoothed) or phi = max(SS, 1e-100) normalised per topic (§3.3);
        then alpha (§3.4) when learnt."""
        if self.smoothed:
            state.lam = sstats + state.beta
        else:
            phi = np.maximum(sstats, PHI_FLOOR)
            state.lam = phi / phi.sum(axis=0)
        if self.learn_alpha:
            state.alpha = optimize_alpha(state.alpha, elog_theta_sum(state.gamma), self.n_docs)

    def step(self, state: VBState, t: int) -> StepInfo:
        if state.converged:
            state.step = t + 1
            return StepInfo(tokens=0, documents=0, extra={"converged": True})
        sstats, bound, iterations = self.e_step_bound(state)
        state.bound_prev, state.bound = state.bound, bound
        tol = float(self.config.inference.tol)
        if (tol > 0 and np.isfinite(state.bound_prev)
                and abs(bound - state.bound_prev) <= tol * abs(state.bound_prev)):
            state.converged = True       # stop before the M-step (§3.5)
        else:
            self.m_step(state, sstats)
        state.step = t + 1
        return StepInfo(tokens=self.n_tokens, documents=self.n_docs,
                        extra={"estep_iterations": round(float(iterations.mean()), 4)
                               if iterations.size else 0.0,
                               "converged": state.converged})

    # -------------------------------------------------------------- estimates
    def topic_word(self, state: VBState) -> np.ndarray:
        return state.topic_word()

    def objective(self, state: VBState) -> float | None:
        """The exact ELBO of the last E-step per training token (§3.3)."""
        if not np.isfinite(state.bound):
            return None
        return state.bound / max(self.n_tokens, 1)

    def fold_in(self, state: VBState, documents: Documents) -> np.ndarray:
        """theta-hat of unseen documents: cold E-step with lambda frozen (§11.2)."""
        opts = self.config.inference
        return fold_in_theta(documents, state.lam, state.alpha, state.beta, self.smoothed,
                             opts.estep_tol, opts.estep_max_iter, self.threads)

    def heldout_probabilities(self, state: VBState, samples, test: TestSet,
                              pass_index: int) -> np.ndarray:
        theta = self.fold_in(state, test.observed)
        return mixture_probabilities(test.heldout, theta, state.phi(), self.threads)

    def train_heldout_probabilities(self, state: VBState, samples,
                                    heldout: Documents) -> np.ndarray:
        """Protocol B: held-out tokens of training documents with theta-hat = gamma / gamma.."""
        return mixture_probabilities(heldout, state.theta(), state.phi(), self.threads)

    # ------------------------------------------------------------ persistence
    def state_to_arrays(self, state: VBState):
        header = {"step": state.step, "sample_steps": list(state.sample_steps),
                  "beta": state.beta, "smoothed": state.smoothed,
                  "bound": _nan_to_none(state.bound), "bound_prev": _nan_to_none(state.bound_prev),
                  "converged": bool(state.converged)}
        return header, {"lam": state.lam, "gamma": state.gamma, "alpha": state.alpha}

    def state_from_arrays(self, header: dict, arrays: dict[str, np.ndarray]) -> VBState:
        state = VBState(lam=np.ascontiguousarray(arrays["lam"], dtype=np.float64),
                        gamma=np.ascontiguousarray(arrays["gamma"], dtype=np.float64),
                        alpha=np.ascontiguousarray(arrays["alpha"], dtype=np.float64),
                        beta=float(header["beta"]), smoothed=bool(header["smoothed"]),
                        bound=_none_to_nan(header["bound"]),
                        bound_prev=_none_to_nan(header["bound_prev"]),
                        converged=bool(header["converged"]),
                        sample_steps=[int(s) for s in header["sample_steps"]],
                        step=int(header["step"]))
        if state.lam.shape != (self.V, self.K) or state.gamma.shape != (self.n_docs, self.K):
            raise ValueError("state arrays do not match the corpus and model size")
        if state.smoothed != self.smoothed:
            raise ValueError(f"the state has smoothed = {state.smoothed}, the config "
                             f"{self.smoothed}")
        return state

    def check_state(self, state: VBState) -> None:
        if not np.all(np.isfinite(state.lam)):
            raise NumericalError(f"lambda became non-finite at step {state.step}")
        if not np.all(np.isfinite(state.gamma)):
            raise NumericalError(f"gamma became non-finite at step {state.step}")
        if not np.all(np.isfinite(state.alpha)):
            raise NumericalError(f"alpha became non-finite at step {state.step}")
