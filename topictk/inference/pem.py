"""Particle EM for LDA (PEM slides), in the well-posed form of docs/algorithms.md §10.

P particles share the point topics phi and the Dirichlet alpha; each particle p keeps its own
local variational state gamma_p (D, K) (mu is never stored). The tempered objective is

    L_T = sum_p omega_p L_p + T H(omega),

L_p the particle's unsmoothed VB objective with the z-entropy multiplied by T (the slides' lambda).
One training step is one EM iteration:

1. E-step of every particle with (phi, alpha) fixed: the §3.2 coordinate ascent with tempered
   responsibilities mu proportional to exp((Elogtheta + ln phi) / T), warm-started from the
   particle's previous gamma (``estep_start``). At T = 1 this is exactly the VB kernel
   :func:`topictk.inference._vb.e_step`, so P = 1, T = 1 reproduces unsmoothed VB-EM bit for
   bit (§10 oracle a); other temperatures use :func:`topictk.inference._pem.e_step_tempered`
   (T = 0: hard assignment to the arg-max topic, §10.3).
2. omega_p = softmax(L_p / T) (one-hot on the best particle at T = 0), the exact maximiser of
   L_T in omega -- the corrected form of the slides' eq. 2.
3. The EM stopping rule on L_T (relative change < ``tol``) is checked before the M-step (§3.5).
4. M-step: phi_kw proportional to max(sum_p omega_p SS_p,kw, 1e-100); with ``model.alpha: auto``
   the Newton step of §3.4 on the weighted statistic S_k = sum_p omega_p sum_d Elogtheta_pdk
   (:func:`topictk.inference.vb.optimize_alpha`).

Every step does not decrease L_T (logged per token as ``train_bound_per_token``).

Initialisation (§10.4): phi as unsmoothed VB (Gam(100, 100) from the init stream, normalised);
particle 0 starts from gamma = alpha + N_d / K, particle p >= 1 from
gamma_pdk = alpha_k + N_d e_pdk / sum_k e_pdk with e_pdk ~ Gam(1, 1) drawn from its own stream
(key (0, p), the init family), so particle p starts the same whatever P is.

Prediction (§10.4, §11.2): p(w | test doc) = sum_p omega_p sum_k theta-hat_pdk phi_kw with
theta-hat_p from the particle's fold-in E-step (tempered, cold-started, phi and alpha frozen).
Because phi and alpha are shared and the fold-in starts cold, theta-hat_p is the same for every
particle and the mixture equals one fold-in; it is computed once.

The state lives here rather than in ``topictk/state`` (it is only used by this driver).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field

import numpy as np

from topictk import streams as keys
from topictk.config.schema import Option
from topictk.errors import NumericalError
from topictk.inference import _pem
from topictk.inference.base import EvaluationSet
from topictk.inference.perplexity import csr_arrays, mixture_probabilities
from topictk.inference.registry import register
from topictk.inference.variational import (
    ESTEP_OPTIONS,
    PHI_FLOOR,
    START,
    BatchEMDriver,
    doc_lengths,
    e_step,
    elog_theta_sum,
    expected_log_topics,
    optimize_alpha,
    resolve_alpha,
)
from topictk.state.schema import STEP, Array, Saved, Value
from topictk.streams import Streams

log = logging.getLogger("topictk")


def particle_key(p: int) -> tuple[int, int]:
    """Stream key of particle p's initial perturbation (the init family, §12.3)."""
    return (keys.INIT[0], int(p))


# Positive temperatures below this are computed at it (PEMDriver). The tempered E-step divides
# differences of log weights by T, in tempered_weights and in the kernel; near T = 1e-305 the
# quotients overflow to -inf and the kernel's log-space fallback divides 0 by 0. At 1e-280 a
# difference would have to exceed 1e28 to overflow, and exp(-d / T) is already 0 for every
# d > 1e-277: the responsibilities are those of the T = 0 limit, but for exact ties, which
# T -> 0+ shares evenly where T = 0 gives them to the first topic.
MIN_TEMPERATURE = 1e-280


def working_temperature(temperature: float) -> float:
    """``temperature`` as computed: 0 stays 0, positive values below MIN_TEMPERATURE become
    MIN_TEMPERATURE."""
    temperature = float(temperature)
    return MIN_TEMPERATURE if 0.0 < temperature < MIN_TEMPERATURE else temperature


def particle_weights(bounds: np.ndarray, temperature: float) -> np.ndarray:
    """omega_p = exp(L_p / T) / sum_p' exp(L_p' / T) by log-sum-exp; T = 0: one-hot on the
    best particle (the first of equals). The maximum is subtracted before dividing by T, so
    a tiny T gives weights that tend to the T = 0 ones (ties shared) instead of inf - inf."""
    bounds = np.asarray(bounds, dtype=np.float64)
    if temperature <= 0.0:
        omega = np.zeros(bounds.size)
        omega[int(np.argmax(bounds))] = 1.0
        return omega
    with np.errstate(over="ignore", under="ignore"):   # -inf and exp(-inf) = 0 are right here
        x = np.exp((bounds - bounds.max()) / temperature)
    return x / x.sum()


def weights_entropy(omega: np.ndarray) -> float:
    """H(omega) = -sum_p omega_p ln omega_p (0 ln 0 = 0)."""
    nz = omega[omega > 0]
    return float(-np.sum(nz * np.log(nz)))


def tempered_objective(bounds: np.ndarray, omega: np.ndarray, temperature: float) -> float:
    """L_T = sum_p omega_p L_p + T H(omega) (§10.2)."""
    value = float(np.dot(omega, bounds))
    if temperature > 0.0:
        value += temperature * weights_entropy(omega)
    return value


def tempered_weights(phi: np.ndarray, temperature: float) -> tuple[np.ndarray, np.ndarray]:
    """(LW, m) for the tempered kernel: m_w = max_k ln phi_wk and LW = (ln phi - m) / T
    (T = 0: ln phi - m). ``phi`` is word-major (V, K)."""
    logphi = np.log(phi)
    shift = logphi.max(axis=1)
    centred = logphi - shift[:, None]
    if temperature > 0.0:
        centred /= temperature
    return np.ascontiguousarray(centred), shift


def estep_particle(indptr, indices, counts, phi: np.ndarray, alpha: np.ndarray,
                   gamma: np.ndarray, temperature: float, *, start: str, tol: float,
                   max_iter: int, threads: int, sstats=None, doc_bound=None,
                   iterations=None, weights=None) -> None:
    """The E-step of one particle (gamma in place): the VB kernel at T = 1, the tempered kernel
    otherwise. ``weights`` = :func:`particle_estep_weights` when already computed for this
    phi."""
    if weights is None:
        weights = particle_estep_weights(phi, temperature)
    table, shift = weights
    if temperature == 1.0:
        e_step(indptr, indices, counts, table, shift, alpha, gamma, start=start, tol=tol,
               max_iter=max_iter, threads=threads, sstats=sstats, doc_bound=doc_bound,
               iterations=iterations)
    else:
        _pem.e_step_tempered(indptr, indices, counts, table, shift,
                             np.ascontiguousarray(alpha, dtype=np.float64), gamma,
                             float(temperature), START[start], float(tol), int(max_iter),
                             sstats, doc_bound, iterations, int(threads))


def particle_estep_weights(phi: np.ndarray, temperature: float, threads: int = 1):
    """The word weights :func:`estep_particle` needs: at T = 1 exactly what unsmoothed VB
    computes, (B = exp(ln phi - m), m); otherwise :func:`tempered_weights`."""
    if temperature == 1.0:
        B, shift, _ = expected_log_topics(phi, phi.sum(axis=0), 0.0, False, threads)
        return B, shift
    return tempered_weights(phi, temperature)


@dataclass
class PEMState(Saved):
    """Particle EM state.

    phi    (V, K)    float64 word-major point topics, columns on the simplex
    gamma  (P, D, K) float64 q(theta_d) = Dir(gamma_pd) of every particle (warm starts)
    alpha  (K,)      float64 Dirichlet prior (learnt when model.alpha is auto)
    omega  (P,)      float64 particle weights (uniform before the first E-step)
    particle_bounds (P,) L_p of the last E-step (nan before)
    bound, bound_prev  L_T of the last two E-steps; converged: the EM stopping rule fired
    """

    SCHEMA = {"phi": Array("float64", ("V", "K")), "gamma": Array("float64", ("P", "D", "K")),
              "alpha": Array("float64", ("K",)), "omega": Array("float64", ("P",)),
              "particle_bounds": Array("float64", ("P",)), "bound": Value("nan-float"),
              "bound_prev": Value("nan-float"), "converged": Value(bool), **STEP}

    phi: np.ndarray
    gamma: np.ndarray
    alpha: np.ndarray
    omega: np.ndarray
    particle_bounds: np.ndarray
    bound: float = float("nan")
    bound_prev: float = float("nan")
    converged: bool = False
    sample_steps: list[int] = field(default_factory=list)
    step: int = 0

    @property
    def n_particles(self) -> int:
        return self.gamma.shape[0]

    def topic_word(self) -> np.ndarray:
        return self.phi.T.copy()

    def check_invariants(self) -> None:
        """phi columns and omega on the simplex, gamma > alpha-free positivity, all finite."""
        if not np.all(np.isfinite(self.phi)) or self.phi.min(initial=1.0) <= 0:
            raise AssertionError("phi must be positive and finite")
        err = np.abs(self.phi.sum(axis=0) - 1.0).max(initial=0.0)
        if err > 1e-9:
            raise AssertionError(f"phi columns are off the simplex by {err:.3g}")
        if not np.all(np.isfinite(self.gamma)) or self.gamma.min(initial=1.0) <= 0:
            raise AssertionError("gamma must be positive and finite")
        if not (np.all(self.omega >= 0) and abs(self.omega.sum() - 1.0) < 1e-12):
            raise AssertionError("omega must be a probability vector")
        if not (np.all(np.isfinite(self.alpha)) and np.all(self.alpha > 0)):
            raise AssertionError("alpha must be positive and finite")


def _nan_to_none(x: float):
    return None if x is None or not np.isfinite(x) else float(x)


def _none_to_nan(x) -> float:
    return float("nan") if x is None else float(x)


@register
class PEMDriver(BatchEMDriver):
    """Particle EM; one step is one EM iteration of every particle (§10.3)."""

    name = "pem"
    STATE = PEMState
    objective_name = "train_bound_per_token"
    OPTIONS = {
        "particles": Option("int", 4, low=1, help="number of particles P"),
        "temperature": Option("float", 1.0, low=0, high=1e6,
                              help="T multiplying the z-entropy and the entropy of the particle "
                                   "weights; 1 = VB, 0 = hard assignment to the arg-max topic; "
                                   "positive values below 1e-280 are computed at 1e-280, "
                                   "already the T -> 0 limit in double precision"),
        **ESTEP_OPTIONS,
        "tol": Option("float", 1e-5, low=0,
                      help="stop when the relative change of L_T falls below this (0 = never); "
                           "later steps do nothing"),
        "estep_start": Option("choice", "warm", choices=("warm", "best", "cold"),
                              help="particle E-step start: warm = the particle's previous gamma "
                                   "(§10.4; keeps the particles apart), best = the better of "
                                   "warm and cold per document, cold = alpha + N_d/K (every "
                                   "particle then follows the same path after one iteration)"),
    }

    def __init__(self, config, store, threads: int = 1, *,
                 streams: Streams | None = None):
        super().__init__(config, store, threads, streams=streams)
        self.indptr, self.indices, self.counts = self.csr_view
        self.doc_lengths = doc_lengths(self.indptr, self.counts)
        opts = config.inference
        self.P = int(opts.particles)
        self.temperature = working_temperature(opts.temperature)
        self.learn_alpha = config.model.alpha == "auto"

    # ------------------------------------------------------------------ state
    def init_state(self) -> PEMState:
        gen = np.random.Generator(self.streams.persistent(keys.INIT))
        lam = gen.standard_gamma(100.0, size=(self.V, self.K)) / 100.0
        phi = lam / lam.sum(axis=0)
        alpha = resolve_alpha(self.config.model.alpha, self.K)
        gamma = np.empty((self.P, self.n_docs, self.K))
        gamma[0] = alpha[None, :] + (self.doc_lengths / self.K)[:, None]
        for p in range(1, self.P):
            e = np.random.Generator(self.streams.derived(particle_key(p))).standard_gamma(
                1.0, size=(self.n_docs, self.K))
            np.maximum(e, 1e-300, out=e)
            gamma[p] = alpha[None, :] + self.doc_lengths[:, None] * e / e.sum(axis=1,
                                                                              keepdims=True)
        return PEMState(phi=np.ascontiguousarray(phi), gamma=gamma, alpha=alpha,
                        omega=np.full(self.P, 1.0 / self.P),
                        particle_bounds=np.full(self.P, np.nan))


    # ------------------------------------------------------------------- step
    def e_step(self, state: PEMState):
        """Every particle's E-step: (SS (P, V, K), L (P,), mean gamma updates per document)."""
        opts = self.config.inference
        weights = particle_estep_weights(state.phi, self.temperature, self.threads)
        sstats = np.zeros((self.P, self.V, self.K))
        bounds = np.zeros(self.P)
        updates = 0.0
        for p in range(self.P):
            doc_bound = np.zeros(self.n_docs)
            iterations = np.zeros(self.n_docs, dtype=np.int32)
            estep_particle(self.indptr, self.indices, self.counts, state.phi, state.alpha,
                           state.gamma[p], self.temperature, start=opts.estep_start,
                           tol=opts.estep_tol, max_iter=opts.estep_max_iter,
                           threads=self.threads, sstats=sstats[p], doc_bound=doc_bound,
                           iterations=iterations, weights=weights)
            bounds[p] = float(doc_bound.sum())
            updates += float(iterations.mean()) if iterations.size else 0.0
        return sstats, bounds, updates / self.P

    def m_step(self, state: PEMState, sstats: np.ndarray) -> None:
        """phi from the omega-weighted statistics (exact, §10.3); alpha by Newton when learnt."""
        total = state.omega[0] * sstats[0]
        for p in range(1, self.P):
            total += state.omega[p] * sstats[p]
        phi = np.maximum(total, PHI_FLOOR)
        state.phi = np.ascontiguousarray(phi / phi.sum(axis=0))
        if self.learn_alpha:
            S = state.omega[0] * elog_theta_sum(state.gamma[0])
            for p in range(1, self.P):
                S = S + state.omega[p] * elog_theta_sum(state.gamma[p])
            state.alpha = optimize_alpha(state.alpha, S, self.n_docs)

    def expectation(self, state: PEMState):
        """Every particle's E-step, the weights omega = softmax(L_p / T), and L_T."""
        sstats, bounds, updates = self.e_step(state)
        state.particle_bounds = bounds
        state.omega = particle_weights(bounds, self.temperature)
        value = tempered_objective(bounds, state.omega, self.temperature)
        return sstats, value, {"estep_iterations": round(updates, 4),
                               "best_particle": int(np.argmax(bounds)),
                               "omega_max": round(float(state.omega.max()), 6)}

    def maximization(self, state: PEMState, sstats) -> None:
        self.m_step(state, sstats)

    def work(self) -> tuple[int, int]:
        return self.n_tokens * self.P, self.n_docs * self.P

    # -------------------------------------------------------------- estimates
    def topic_word(self, state: PEMState) -> np.ndarray:
        return state.topic_word()

    def objective(self, state: PEMState) -> float | None:
        """L_T of the last E-step per training token (§11.4)."""
        if not np.isfinite(state.bound):
            return None
        return state.bound / max(self.n_tokens, 1)

    def fold_in(self, state: PEMState, documents, plan=None, *, prior=None,
                sample=None) -> np.ndarray:
        """theta-hat (D, K) of unseen documents: the particles' tempered E-step, cold-started
        with phi and alpha frozen -- the same for every particle (module docstring)."""
        opts = self.config.inference
        indptr, indices, counts = csr_arrays(documents)
        gamma = np.empty((indptr.size - 1, self.K))
        estep_particle(indptr, indices, counts, state.phi, self.prior_of(state, prior), gamma,
                       self.temperature, start="cold", tol=opts.estep_tol,
                       max_iter=opts.estep_max_iter, threads=self.threads)
        return gamma / gamma.sum(axis=1, keepdims=True)

    def predictive_topics(self, state: PEMState, samples, test: EvaluationSet):
        """The particles share phi and alpha; theta, which alone differs, is integrated out."""
        return [(self._phi(state), state.alpha)]

    def point_phi(self, state: PEMState) -> np.ndarray:
        return self._phi(state)

    @staticmethod
    def _phi(state: PEMState) -> np.ndarray:
        """phi renormalised per topic, as :meth:`topictk.state.variational.VBState.phi` does
        (so that one particle at T = 1 scores exactly as unsmoothed VB)."""
        return state.phi / state.phi.sum(axis=0)

    def train_heldout_probabilities(self, state: PEMState, samples, heldout) -> np.ndarray:
        """Protocol B: sum_p omega_p sum_k (gamma_pdk / gamma_pd.) phi_kw with the training
        gammas."""
        total = np.zeros(np.asarray(heldout.indices).size)
        for p in range(self.P):
            if state.omega[p] == 0.0:
                continue
            theta = state.gamma[p] / state.gamma[p].sum(axis=1, keepdims=True)
            total += state.omega[p] * mixture_probabilities(heldout, theta, self._phi(state),
                                                            self.threads)
        return total

    def state_sizes(self) -> dict:
        return {**super().state_sizes(), "P": self.P}

    def check_state(self, state: PEMState) -> None:
        for name in ("phi", "gamma", "alpha", "omega"):
            if not np.all(np.isfinite(getattr(state, name))):
                raise NumericalError(f"{name} became non-finite at step {state.step}")
