"""Particle EM for LDA (PEM slides), in the well-posed form of docs/algorithms.md §10.

P particles share the point topics phi and the Dirichlet alpha; each particle p keeps its own
local variational state gamma_p (D, K) (mu is never stored), and every document d weighs the
particles with weights of its own omega_d (§10.2). The tempered objective is

    L_T = sum_d [sum_p omega_dp l_pd + T H(omega_d)],

l_pd the particle's unsmoothed VB objective term of document d with the z-entropy multiplied by
T (the slides' lambda). One training step is one EM iteration at T_t (§10.5: a geometric
annealing schedule from ``anneal_from`` to ``temperature`` over ``anneal_steps`` iterations,
otherwise T):

1. E-step of every particle with (phi, alpha) fixed: the §3.2 coordinate ascent with tempered
   responsibilities mu proportional to exp((Elogtheta + ln phi) / T), warm-started from the
   particle's previous gamma (``estep_start``). At T = 1 this is exactly the VB kernel
   :func:`topictk.inference.variational._vb.e_step`, so P = 1, T = 1 reproduces unsmoothed VB-EM bit
   for bit (§10 oracle a); other temperatures use
   :func:`topictk.inference.variational._pem.e_step_tempered` (T = 0: hard assignment to the arg-max
   topic, §10.3).
2. omega_dp = softmax_p(l_pd / T) (one-hot on the document's best particle at T = 0), the
   exact maximiser of L_T in omega_d -- the corrected, per-document form of the slides' eq. 2.
3. The EM stopping rule on L_T (relative change < ``tol``) is checked before the M-step (§3.5),
   between iterations of the same T.
4. M-step: phi_kw proportional to max(sum_p sum_d omega_dp n_dw mu_pdwk, 1e-100) (a second,
   weighted statistics pass over every particle); with ``model.alpha: auto`` the Newton step of
   §3.4 on S_k = sum_p sum_d omega_dp Elogtheta_pdk
   (:func:`topictk.inference.variational.vb.optimize_alpha`).

At a fixed T no step decreases L_T (logged per token as ``train_bound_per_token``); the bound of
every document's best particle is logged as ``best_bound_per_token`` and particles that collapse
onto one another as ``particles_collapsed`` (§10.4).

Initialisation (§10.4): phi as unsmoothed VB (Gam(100, 100) from the init stream, normalised);
particle 0 starts from gamma = alpha + N_d / K, particle p >= 1 from
gamma_pdk = alpha_k + N_d e_pdk / sum_k e_pdk with e_pdk ~ Gam(1, 1) drawn from its own stream
(key (0, p), the init family), so particle p starts the same whatever P is; ``particle_offset``
numbers the particles from another start.

Prediction (§10.4, §11.2): p(w | test doc) = sum_k theta-hat_dk phi_kw with theta-hat from the
fold-in E-step (at the final T, cold-started, phi and alpha frozen). Because phi and alpha are
shared and the fold-in starts cold, theta-hat is the same for every particle; it is computed
once.

The state lives here rather than in ``topictk/state`` (it is only used by this driver).
"""
from __future__ import annotations

import logging
import operator
from dataclasses import dataclass, field

import numpy as np
from scipy.special import digamma

from topictk import streams as keys
from topictk.config.schema import Option
from topictk.errors import ConfigError, NumericalError
from topictk.limits import available_memory
from topictk.inference.variational import _pem
from topictk.inference.base import EvaluationSet, Traits, row_range
from topictk.inference.cluster import ClusterTask, StoreRef, map_merge, runs, worker_threads
from topictk.inference.hyper import resolve_alpha
from topictk.inference.perplexity import mixture_probabilities
from topictk.inference.registry import register
from topictk.inference.seed_prior import SeededDriverMixin
from topictk.inference.variational.grow import grow_pem_state
from topictk.inference.variational.template import (
    ESTEP_OPTIONS,
    stopping_tolerance,
    PHI_FLOOR,
    START,
    BatchEMDriver,
    FoldInCall,
    e_step,
    elog_theta_sum,
    estep_blocks,
    estep_wave,
    expected_log_topics,
    optimize_alpha,
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
    """omega_p = exp(L_p / T) / sum_p' exp(L_p' / T) over the last axis, by log-sum-exp;
    T = 0: one-hot on the best particle (the first of equals). The maximum is subtracted before
    dividing by T, so a tiny T gives weights that tend to the T = 0 ones (ties shared) instead
    of inf - inf. ``bounds`` is (P,) or (D, P) (one row of particle bounds per document)."""
    bounds = np.asarray(bounds, dtype=np.float64)
    if temperature <= 0.0:
        omega = np.zeros(bounds.shape)
        np.put_along_axis(omega, np.argmax(bounds, axis=-1)[..., None], 1.0, axis=-1)
        return omega
    with np.errstate(over="ignore", under="ignore"):   # -inf and exp(-inf) = 0 are right here
        x = np.exp((bounds - bounds.max(axis=-1, keepdims=True)) / temperature)
    return x / x.sum(axis=-1, keepdims=True)


def weights_entropy(omega: np.ndarray) -> float:
    """H(omega) = -sum omega ln omega over every entry (0 ln 0 = 0); for (D, P) weights the
    sum of the documents' entropies."""
    nz = omega[omega > 0]
    return float(-np.sum(nz * np.log(nz)))


def tempered_objective(bounds: np.ndarray, omega: np.ndarray, temperature: float) -> float:
    """L_T = sum omega L + T H(omega) (§10.2); (D, P) arguments sum over documents (§10.3)."""
    value = float(np.sum(omega * bounds))
    if temperature > 0.0:
        value += temperature * weights_entropy(omega)
    return value


def annealed_temperature(t: int, start: float, end: float, steps: int) -> float:
    """T_t of the geometric schedule of §10.5: ``start`` at t = 0, ``end`` from t = steps on,
    T_t = start (end / start)^(t / steps) between (``steps`` = 0: always ``end``)."""
    if steps <= 0 or t >= steps:
        return float(end)
    return float(start * (end / start) ** (t / steps))


def particle_distances(gamma: np.ndarray) -> np.ndarray:
    """(P, P) mean over documents of the total-variation distance between the particles'
    theta-hat_pd = gamma_pd / gamma_pd. (§10.4, the collapse check)."""
    theta = gamma / gamma.sum(axis=2, keepdims=True)
    P = theta.shape[0]
    dist = np.zeros((P, P))
    for p in range(P):
        for q in range(p + 1, P):
            dist[p, q] = dist[q, p] = 0.5 * np.abs(theta[p] - theta[q]).sum(axis=1).mean()
    return dist


def collapsed_particles(dist: np.ndarray, tol: float) -> int:
    """How many particles lie within ``tol`` of an earlier particle (0 for one particle)."""
    return sum(1 for q in range(1, dist.shape[0]) if dist[q, :q].min() < tol)


def weighted_elog_theta_sum(gamma: np.ndarray, omega: np.ndarray) -> np.ndarray:
    """S_k = sum_p sum_d omega_dp E ln theta_pdk, the alpha statistic of §10.3; ``gamma``
    (P, D, K), ``omega`` (D, P)."""
    S = np.zeros(gamma.shape[2])
    for p in range(gamma.shape[0]):
        elog = digamma(gamma[p]) - digamma(gamma[p].sum(axis=1, keepdims=True))
        S += omega[:, p] @ elog
    return S


def state_bytes(P: int, D: int, K: int, V: int, M: int = 0, blocks: int = 1) -> int:
    """Bytes particle EM holds for P particles: gamma (P D K), the particle bounds and weights
    of every document (3 P D), phi and the statistics (2 V K), and with P > 1 what the E-steps
    of the largest of ``blocks`` blocks of documents leave for the weighted pass (the Z of
    each particle's CSR entries of the block and its A of every document of the block) and the
    pass's sums (V K), all float64."""
    docs, pairs = -(-D // max(blocks, 1)), -(-M // max(blocks, 1))
    extra = P * pairs + P * docs * K + V * K if P > 1 else 0
    return 8 * (P * D * K + 3 * P * D + 2 * V * K + extra)


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
                   iterations=None, weights=None, pair_z=None, doc_a=None) -> None:
    """The E-step of one particle (gamma in place): the VB kernel at T = 1, the tempered kernel
    otherwise. ``weights`` = :func:`particle_estep_weights` when already computed for this
    phi; ``pair_z`` (M) receives every entry's Z and ``doc_a`` (D, K) every document's A for the
    final gamma."""
    if weights is None:
        weights = particle_estep_weights(phi, temperature)
    table, shift = weights
    if temperature == 1.0:
        e_step(indptr, indices, counts, table, shift, alpha, gamma, start=start, tol=tol,
               max_iter=max_iter, threads=threads, sstats=sstats, doc_bound=doc_bound,
               iterations=iterations, pair_z=pair_z, doc_a=doc_a)
    else:
        _pem.e_step_tempered(indptr, indices, counts, table, shift,
                             np.ascontiguousarray(alpha, dtype=np.float64), gamma,
                             float(temperature), START[start], float(tol), int(max_iter),
                             sstats, doc_bound, iterations, int(threads), pair_z, doc_a)


def particle_estep_weights(phi: np.ndarray, temperature: float, threads: int = 1):
    """The word weights :func:`estep_particle` needs: at T = 1 exactly what unsmoothed VB
    computes, (B = exp(ln phi - m), m); otherwise :func:`tempered_weights`."""
    if temperature == 1.0:
        B, shift, _ = expected_log_topics(phi, phi.sum(axis=0), 0.0, False, threads)
        return B, shift
    return tempered_weights(phi, temperature)


def particle_fold_in(indptr, indices, counts, table: np.ndarray, shift: np.ndarray,
                     alpha: np.ndarray, *, temperature: float, tol: float, max_iter: int,
                     threads: int) -> np.ndarray:
    """theta-hat of documents (CSR) by the particles' cold E-step at ``temperature`` with the
    word weights (``table``, ``shift``) of :func:`particle_estep_weights` frozen."""
    gamma = np.empty((indptr.size - 1, table.shape[1]))
    estep_particle(indptr, indices, counts, None, alpha, gamma, temperature, start="cold",
                   tol=tol, max_iter=max_iter, threads=threads, weights=(table, shift))
    return gamma / gamma.sum(axis=1, keepdims=True)


@dataclass(frozen=True)
class ParticleEStep:
    """One EM iteration's E-step as each block of documents reads it (§10.3): the prior, the
    temperature, the E-step's start and stopping rule, and where the documents are (for a
    cluster's workers)."""

    alpha: np.ndarray
    temperature: float
    start: str
    tol: float
    max_iter: int
    store: StoreRef | None = None

    def block(self, csr, weights, table: np.ndarray, gamma: np.ndarray, threads: int,
              buffers: tuple[np.ndarray, np.ndarray] | None = None):
        """The block of documents ``csr`` = (indptr, indices, counts): every particle's E-step
        from its rows of ``gamma`` (P, D_b, K, C-contiguous, updated in place), the block's
        particle weights omega (D_b, P) and its omega-weighted statistics (V, K). ``weights``:
        :func:`particle_estep_weights` of phi; ``table``: the tempered table of phi
        (:func:`tempered_weights`), read with more than one particle; ``buffers``: flat
        float64 arrays at least P M_b and P D_b K long for what the E-steps leave for the
        weighted pass (None: allocated here). Returns (statistics, the particles' bounds l
        (P, D_b), their gamma updates (P, D_b), omega)."""
        indptr, indices, counts = csr
        P, n_docs, K = gamma.shape
        T = self.temperature
        sstats = np.zeros((weights[0].shape[0], K))
        doc_bounds = np.zeros((P, n_docs))
        iterations = np.zeros((P, n_docs), dtype=np.int32)
        pair_z = doc_a = None
        if P > 1:
            if buffers is None:
                buffers = (np.empty(P * indices.size), np.empty(P * n_docs * K))
            pair_z = buffers[0][:P * indices.size].reshape(P, indices.size)
            doc_a = buffers[1][:P * n_docs * K].reshape(P, n_docs, K)
        for p in range(P):
            estep_particle(indptr, indices, counts, None, self.alpha, gamma[p], T,
                           start=self.start, tol=self.tol, max_iter=self.max_iter,
                           threads=threads, sstats=sstats if P == 1 else None,
                           doc_bound=doc_bounds[p], iterations=iterations[p], weights=weights,
                           pair_z=None if P == 1 else pair_z[p],
                           doc_a=None if P == 1 else doc_a[p])
        if P == 1:                      # omega = 1: exactly unsmoothed VB at T = 1
            return sstats, doc_bounds, iterations, np.ones((n_docs, 1))
        omega = np.ascontiguousarray(particle_weights(doc_bounds.T, T))
        _pem.weighted_statistics(indptr, indices, counts, table, gamma, omega, pair_z, float(T),
                                 sstats, int(threads),
                                 expweights=weights[0] if T == 1.0 else None, doc_a=doc_a)
        return sstats, doc_bounds, iterations, omega


def particle_blocks_piece(job: ParticleEStep, B: np.ndarray, shift: np.ndarray,
                          table: np.ndarray, run: list) -> list:
    """The cluster piece: the particles' E-steps of a run of blocks (runs on a worker), each
    block ((d0, d1), its rows of every particle's gamma) read from this worker's store as the
    driver reads it: one (statistics, bounds, updates, omega, new gamma rows) per block."""
    train = job.store.open().train()
    out = []
    for (d0, d1), gamma in run:
        csr = row_range(train.indptr, d0, d1, train.indices, train.counts)
        gamma = np.array(gamma, dtype=np.float64)
        out.append((*job.block(csr, (B, shift), table, gamma, worker_threads()), gamma))
    return out


@dataclass
class PEMState(Saved):
    """Particle EM state.

    phi    (V, K)    float64 word-major point topics, columns on the simplex
    gamma  (P, D, K) float64 q(theta_d) = Dir(gamma_pd) of every particle (warm starts)
    alpha  (K,)      float64 Dirichlet prior (learnt when model.alpha is auto)
    omega  (D, P)    float64 every document's particle weights (uniform before the first E-step)
    particle_bounds (P,) sum_d l_pd of the last E-step (nan before)
    bound, bound_prev  L_T of the last two E-steps; converged: the EM stopping rule fired
    """

    SCHEMA = {"phi": Array("float64", ("V", "K")), "gamma": Array("float64", ("P", "D", "K")),
              "alpha": Array("float64", ("K",)), "omega": Array("float64", ("D", "P")),
              "particle_bounds": Array("float64", ("P",)), "bound": Value("nan-float"),
              "bound_prev": Value("nan-float"), "converged": Value(bool), **STEP}
    # 2: one weight per document and particle (version 1 had one per particle; its migration
    # is declared in topictk.state.migrations)
    SCHEMA_VERSION = 2

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

    def topic_word(self) -> np.ndarray:
        return self.phi.T.copy()

    def check_invariants(self) -> None:
        """phi columns and every document's omega on the simplex, gamma positive, all
        finite."""
        if not np.all(np.isfinite(self.phi)) or self.phi.min(initial=1.0) <= 0:
            raise AssertionError("phi must be positive and finite")
        err = np.abs(self.phi.sum(axis=0) - 1.0).max(initial=0.0)
        if err > 1e-9:
            raise AssertionError(f"phi columns are off the simplex by {err:.3g}")
        if not np.all(np.isfinite(self.gamma)) or self.gamma.min(initial=1.0) <= 0:
            raise AssertionError("gamma must be positive and finite")
        if not (np.all(self.omega >= 0)
                and np.abs(self.omega.sum(axis=1) - 1.0).max(initial=0.0) < 1e-12):
            raise AssertionError("every document's omega must be a probability vector")
        if not (np.all(np.isfinite(self.alpha)) and np.all(self.alpha > 0)):
            raise AssertionError("alpha must be positive and finite")


@register
class PEMDriver(SeededDriverMixin, BatchEMDriver):
    """Particle EM; one step is one EM iteration of every particle (§10.3)."""

    name = "pem"
    own_estimator = "particle E-step"
    # the blocks of the particles' E-steps, and the fold-ins, run on a cluster's workers
    traits = Traits(kind="variational", paper="particle EM (docs/algorithms.md §10)",
                    alpha_auto=True, objective="train_bound_per_token", add_documents=("lda",),
                    cluster=True, cluster_fold_in=True, own_fold_in=True)
    STATE = PEMState
    OPTIONS = {
        "particles": Option("int", 4, low=1, help="number of particles P"),
        "temperature": Option("float", 1.0, low=0, high=1e6,
                              help="T multiplying the z-entropy and the entropy of the particle "
                                   "weights (the final T of an annealed run); 1 = VB, 0 = hard "
                                   "assignment to the arg-max topic; positive values below "
                                   "1e-280 are computed at 1e-280, already the T -> 0 limit "
                                   "in double precision"),
        "anneal_from": Option("float", 1.0, low=0, low_open=True, high=1e6,
                              help="T of the first EM iteration; T falls geometrically to "
                                   "temperature over anneal_steps iterations"),
        "anneal_steps": Option("int", 0, low=0,
                               help="EM iterations of the annealing (0 = constant T); the "
                                    "stopping rule waits until they are done"),
        "particle_offset": Option("int", 0, low=0,
                                  help="index of the first particle's start (0 = the "
                                       "deterministic start, p = particle p's perturbed one); "
                                       "a 1-particle run with offset p is a restart of VB "
                                       "from particle p's start"),
        "collapse_tol": Option("float", 1e-3, low=0,
                               help="particles whose theta-hat are within this mean total "
                                    "variation of an earlier particle are reported as "
                                    "collapsed (metric particles_collapsed)"),
        **ESTEP_OPTIONS,
        "chunks": Option("int", None, low=1, nullable=True,
                         help="blocks of documents whose particles' E-steps and weighted "
                              "statistics are computed on their own, the statistics then added "
                              "block by block (a cluster spreads the blocks over its workers; "
                              "the numbers depend on this, never on the cluster; default: one "
                              "block)"),
        "tol": stopping_tolerance("L_T"),
        "estep_start": Option("choice", "warm", choices=("warm", "best", "cold"),
                              help="particle E-step start: warm = the particle's previous gamma "
                                   "(§10.4; keeps the particles apart), best = the better of "
                                   "warm and cold per document, cold = alpha + N_d/K (every "
                                   "particle then follows the same path after one iteration)"),
    }

    MEMORY_FIX = ("lower inference.particles (each holds a D x K gamma, and with more than "
                  "one the weighted pass keeps another for a block of documents; "
                  "inference.chunks makes the blocks smaller)")

    @classmethod
    def memory_held(cls, data: dict, s) -> list:
        """phi (V, K), every particle's gamma (P, D, K) and the documents' weights; with P > 1
        what the E-steps of a block leave for the weighted pass (:meth:`pass_buffers`): Z of
        every pair and A of every document of the largest block, for each particle."""
        inference = data["inference"]
        P = int(inference["particles"])
        held = [("phi", (s.V, s.K), 8), ("gamma of every particle", (P, s.D, s.K), 8),
                ("particle weights and bounds", (3, P, s.D), 8)]
        if P > 1:
            docs, pairs = cls._block_sizes(inference, s)
            held += [("Z of every pair of a block and particle", (P, pairs), 8),
                     ("A of every document of a block and particle", (P, docs, s.K), 8)]
        return held

    @staticmethod
    def _block_sizes(inference, s) -> tuple[int, int]:
        """(documents, pairs) of the largest of the ``inference.chunks`` blocks, about."""
        blocks = min(int(inference.get("chunks") or 1), max(s.D, 1))
        return -(-s.D // blocks), -(-s.M // blocks)

    @classmethod
    def memory_phases(cls, data: dict, s) -> list[list]:
        """The E-steps of a block of documents (the largest of the ``inference.chunks``): the
        word weights (V, K; away from T = 1 the tempered log weights and their exponentials,
        two), the statistics of every block so far and, with one particle, the staged terms;
        with P > 1 also the tempered table of the weighted pass and, with more than one block,
        the particles' gamma rows of the block; the particle report (P > 1): the weights and
        statistics beside every particle's theta-hat (P, D, K) and two differences (D, K); the
        M-step: the statistics, max(SS, 1e-100) and the new phi; alpha's update: the
        statistics beside E[ln theta] (2 x D x K)."""
        inference = data["inference"]
        P = int(inference["particles"])
        blocks = min(int(inference.get("chunks") or 1), max(s.D, 1))
        docs, _ = cls._block_sizes(inference, s)
        weights = ("E-step word weights", (cls._weight_tables(inference), s.V, s.K), 8)
        statistics = ("statistics", (s.V, s.K), 8)
        block_statistics = ("statistics of every block", (blocks, s.V, s.K), 8)
        if P == 1:
            phases = [[weights, block_statistics, estep_wave(docs * s.K)]]
        else:
            block = [weights, block_statistics, ("tempered table", (s.V, s.K), 8)]
            if blocks > 1:
                block.append(("gamma rows of a block", (P, docs, s.K), 8))
            phases = [block,
                      [("E-step weights and statistics", (2, s.V, s.K), 8),
                       ("theta-hat of every particle", (P, s.D, s.K), 8),
                       ("differences of two particles' theta-hat", (2, s.D, s.K), 8)]]
        phases.append([("statistics, max(SS, 1e-100) and the new phi", (3, s.V, s.K), 8)])
        if data["model"].get("alpha") == "auto":
            phases.append([statistics, ("E[ln theta] of every document", (2, s.D, s.K), 8)])
        return phases

    @staticmethod
    def _weight_tables(inference) -> int:
        """(V, K) tables of an E-step's word weights: one at T = 1, two at any other
        temperature the run reaches (the tempered log weights and their exponentials)."""
        tempered = float(inference.get("temperature", 1.0)) != 1.0 or (
            int(inference.get("anneal_steps", 0)) > 0
            and float(inference.get("anneal_from", 1.0)) != 1.0)
        return 2 if tempered else 1

    @classmethod
    def memory_evaluation(cls, data: dict, s) -> list:
        """The curve's fold-in: the E-step's word weights at the final temperature and the
        documents' gamma and theta-hat."""
        final = float(data["inference"].get("temperature", 1.0))
        return [("E-step word weights of the fold-in", (1 if final == 1.0 else 2, s.V, s.K), 8),
                ("gamma and theta-hat of the curve", (2, s.curve_docs, s.K), 8)]

    @classmethod
    def memory_train_heldout(cls, data: dict, s) -> list:
        """Protocol B: phi-hat and the training documents' theta-hat, summed over the
        particles (one more D x K term)."""
        return [("phi-hat", (s.V, s.K), 8),
                ("theta-hat of the training documents", (2, s.D, s.K), 8)]

    @classmethod
    def check_config(cls, data: dict, where: str) -> None:
        inf = data["inference"]
        if inf["anneal_steps"] > 0 and inf["temperature"] <= 0:
            raise ConfigError(f"inference.temperature must be > 0 when inference.anneal_steps "
                              f"> 0 (the annealed temperature must end at a positive value); "
                              f"got {inf['temperature']} ({where})")

    def __init__(self, config, store, threads: int = 1, *,
                 streams: Streams | None = None):
        super().__init__(config, store, threads, streams=streams)
        opts = config.inference
        self.P = int(opts.particles)
        self.check_memory()
        self.temperature = working_temperature(opts.temperature)
        self._pass_buffers: tuple[np.ndarray, np.ndarray] | None = None

    def check_memory(self) -> None:
        """Refuse, before any allocation, particle states larger than the available memory."""
        blocks = min(int(self.config.inference.chunks or 1), max(self.n_docs, 1))
        need = state_bytes(self.P, self.n_docs, self.K, self.V, self.indices.size, blocks)
        free = available_memory()
        if free is not None and need > free:
            raise ConfigError(
                f"inference.particles = {self.P}: the particle states need about "
                f"{need / 2**30:.2f} GiB ({self.n_docs} documents x {self.K} topics x "
                f"{self.P} particles) but {free / 2**30:.2f} GiB are available; lower "
                f"inference.particles or model.topics")

    def temperature_at(self, t: int) -> float:
        """T of EM iteration t (§10.5): the annealing schedule, then ``temperature``."""
        opts = self.config.inference
        return working_temperature(annealed_temperature(t, float(opts.anneal_from),
                                                        self.temperature,
                                                        int(opts.anneal_steps)))

    # ------------------------------------------------------------------ state
    def init_state(self) -> PEMState:
        gen = np.random.Generator(self.streams.persistent(keys.INIT))
        lam = gen.standard_gamma(100.0, size=(self.V, self.K)) / 100.0
        if self.seeds is not None:      # seed words start in their topics (§2.14)
            self.seeds.add_to(lam)
        phi = lam / lam.sum(axis=0)
        alpha = resolve_alpha(self.config.model.alpha, self.K)
        gamma = np.empty((self.P, self.n_docs, self.K))
        offset = int(self.config.inference.particle_offset)
        for p in range(self.P):
            gamma[p] = self.particle_start(offset + p, alpha)
        return PEMState(phi=np.ascontiguousarray(phi), gamma=gamma, alpha=alpha,
                        omega=np.full((self.n_docs, self.P), 1.0 / self.P),
                        particle_bounds=np.full(self.P, np.nan))

    def particle_start(self, p: int, alpha: np.ndarray, lengths: np.ndarray | None = None,
                       stream: np.random.BitGenerator | None = None) -> np.ndarray:
        """gamma (D, K) of particle p's start (§10.4): alpha + N_d / K for p = 0, otherwise
        alpha + N_d e_pd / sum_k e_pdk with e_pdk ~ Gam(1, 1) from stream (0, p). ``lengths``
        and ``stream``: other documents' N_d and the stream of their draws (documents added
        to a trained run, :func:`topictk.inference.variational.grow.grow_pem_state`)."""
        lengths = self.doc_lengths if lengths is None else lengths
        if p == 0:
            return alpha[None, :] + (lengths / self.K)[:, None]
        if stream is None:
            stream = self.streams.derived(particle_key(p))
        e = np.random.Generator(stream).standard_gamma(1.0, size=(lengths.size, self.K))
        np.maximum(e, 1e-300, out=e)
        return alpha[None, :] + lengths[:, None] * e / e.sum(axis=1, keepdims=True)

    @classmethod
    def takes_new_words(cls, config) -> bool:
        """phi is a point estimate without a prior: new words are dropped."""
        return False

    def grow_state(self, old: PEMState, added) -> PEMState:
        """Added documents (:func:`topictk.inference.variational.grow.grow_pem_state`)."""
        return grow_pem_state(self, old, added)

    # ------------------------------------------------------------------- step
    def expectation(self, state: PEMState):
        """Every particle's E-step, each document's weights omega_d = softmax(l_.d / T), the
        omega-weighted statistics and L_T (§10.3), block by block over the ``inference.chunks``
        blocks of documents (each block's statistics summed on its own, then added in block
        order; on a cluster the blocks run on the workers, with the same numbers)."""
        T = self.temperature_at(state.step)
        if state.step > 0 and T != self.temperature_at(state.step - 1):
            state.bound = float("nan")          # T changed: no stopping-rule comparison
        opts = self.config.inference
        weights = particle_estep_weights(state.phi, T, self.threads)
        table = tempered_weights(state.phi, T)[0] if self.P > 1 else np.zeros((0, self.K))
        job = ParticleEStep(np.ascontiguousarray(state.alpha, dtype=np.float64), T,
                            opts.estep_start, float(opts.estep_tol), int(opts.estep_max_iter),
                            StoreRef.of(self.store) if self.cluster is not None else None)
        blocks = estep_blocks(self.n_docs, int(opts.chunks or 1))
        if self.cluster is not None:
            def cut(n_workers: int) -> list:
                return [[(block, state.gamma[:, block[0]:block[1]]) for block in blocks[a:b]]
                        for a, b in runs(len(blocks), n_workers)]

            parts = map_merge(self.cluster, ClusterTask(
                particle_blocks_piece, cut, context=job,
                shared=(np.ascontiguousarray(weights[0]), weights[1], table),
                merge=operator.add, doing="during the particles' E-steps",
                again="computing the particles' E-steps again"))
            for (d0, d1), part in zip(blocks, parts):
                state.gamma[:, d0:d1] = part[4]
        else:
            parts = [self._block(job, weights, table, state.gamma, d0, d1) for d0, d1 in blocks]
        sstats = parts[0][0]
        for part in parts[1:]:
            sstats += part[0]
        doc_bounds, iterations, omega = (np.concatenate([part[i] for part in parts],
                                                        axis=1 if i < 3 else 0)
                                         for i in (1, 2, 3))
        state.omega = omega
        if self.P == 1:
            value = float(doc_bounds[0].sum())
        else:
            value = tempered_objective(doc_bounds.T, state.omega, T)
        updates = sum(float(row.mean()) if row.size else 0.0 for row in iterations) / self.P
        state.particle_bounds = doc_bounds.sum(axis=1)
        return sstats, value, {"estep_iterations": round(updates, 4), "temperature": T,
                               **self.particle_report(state, doc_bounds)}

    def pass_buffers(self) -> tuple[np.ndarray, np.ndarray] | None:
        """With more than one particle, what the E-steps of a block leave for the weighted
        pass, Z and A (:meth:`ParticleEStep.block`'s ``buffers``), for the largest block:
        allocated at the first step and reused, every entry a block reads written by its
        E-steps. None with one particle."""
        if self.P == 1:
            return None
        if self._pass_buffers is None:
            blocks = estep_blocks(self.n_docs, int(self.config.inference.chunks or 1))
            pairs = max(int(self.indptr[b] - self.indptr[a]) for a, b in blocks)
            docs = max(b - a for a, b in blocks)
            self._pass_buffers = (np.empty(self.P * pairs), np.empty(self.P * docs * self.K))
        return self._pass_buffers

    def _block(self, job: ParticleEStep, weights, table: np.ndarray, gamma: np.ndarray,
               d0: int, d1: int):
        """:meth:`ParticleEStep.block` of the documents [d0, d1) on this machine, their rows
        of ``gamma`` (P, D, K) updated in place (through a contiguous copy when the block is
        not the whole corpus)."""
        csr = row_range(self.indptr, d0, d1, self.indices, self.counts)
        rows = np.ascontiguousarray(gamma[:, d0:d1])
        out = job.block(csr, weights, table, rows, self.threads, self.pass_buffers())
        if not np.shares_memory(rows, gamma):
            gamma[:, d0:d1] = rows
        return out

    def particle_report(self, state: PEMState, doc_bounds: np.ndarray) -> dict:
        """What a step logs about its particles: the bound of the best particle of every
        document per token, the mean largest weight, the particle of most weight, and how
        many particles collapsed onto an earlier one."""
        report = {"best_bound_per_token": float(doc_bounds.max(axis=0).sum())
                  / max(self.n_tokens, 1),
                  "omega_max": round(float(state.omega.max(axis=1).mean()), 6)
                  if self.n_docs else 1.0,
                  "best_particle": int(np.argmax(state.omega.sum(axis=0)))}
        if self.P > 1:
            dist = particle_distances(state.gamma)
            report["particle_distance_min"] = float(dist[np.triu_indices(self.P, 1)].min())
            report["particles_collapsed"] = collapsed_particles(
                dist, float(self.config.inference.collapse_tol))
        return report

    def m_step(self, state: PEMState, sstats: np.ndarray) -> None:
        """phi from the omega-weighted statistics (exact, §10.3), plus the seed words'
        pseudo-counts o (the MAP estimate under Dir(1 + o), §2.14) when there are seeds; alpha
        by Newton when learnt."""
        if self.seeds is not None:
            self.seeds.add_to(sstats)
        phi = np.maximum(sstats, PHI_FLOOR)
        state.phi = np.ascontiguousarray(phi / phi.sum(axis=0))
        if self.learn_alpha:
            S = (elog_theta_sum(state.gamma[0]) if self.P == 1
                 else weighted_elog_theta_sum(state.gamma, state.omega))
            state.alpha = optimize_alpha(state.alpha, S, self.n_docs)

    def maximization(self, state: PEMState, sstats) -> None:
        self.m_step(state, sstats)

    def work(self) -> tuple[int, int]:
        return self.n_tokens * self.P, self.n_docs * self.P

    # -------------------------------------------------------------- estimates
    def fold_in_call(self, state: PEMState, prior) -> FoldInCall:
        """theta-hat (D, K) of unseen documents: the particles' E-step at the final
        temperature, cold-started with phi and alpha frozen -- the same for every particle
        (module docstring)."""
        opts = self.config.inference
        weights = particle_estep_weights(state.phi, self.temperature, self.threads)
        return FoldInCall(particle_fold_in, (*weights, np.ascontiguousarray(
            self.prior_of(state, prior), dtype=np.float64)),
            {"temperature": self.temperature, "tol": float(opts.estep_tol),
             "max_iter": int(opts.estep_max_iter)})

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
        """Protocol B: sum_k (sum_p omega_dp gamma_pdk / gamma_pd.) phi_kw with the training
        gammas."""
        theta = state.omega[:, 0, None] * state.gamma[0] / state.gamma[0].sum(axis=1,
                                                                              keepdims=True)
        for p in range(1, self.P):
            theta += state.omega[:, p, None] * state.gamma[p] / state.gamma[p].sum(
                axis=1, keepdims=True)
        return mixture_probabilities(heldout, theta, self._phi(state), self.threads)

    def state_sizes(self) -> dict:
        return {**super().state_sizes(), "P": self.P}

    def check_state(self, state: PEMState) -> None:
        for name in ("phi", "gamma", "alpha", "omega"):
            if not np.all(np.isfinite(getattr(state, name))):
                raise NumericalError(f"{name} became non-finite at step {state.step}")
