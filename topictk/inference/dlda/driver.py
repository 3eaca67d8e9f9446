"""Deep LDA / the Poisson gamma belief network (Zhou, Cong & Chen 2016; Cong, Chen, Liu & Zhou
2017) with four samplers for the globals Phi^(1..L), r:

* ``tlasgr``     topic-layer-adaptive stochastic gradient Riemannian MCMC (Cong 2017 eqs. 15,
                 17-19; docs/algorithms.md §8.7, §8.8);
* ``tlfsgr``     the same with one step for every topic of every layer (§8.9);
* ``dlda-sgrld`` SGRLD on expanded-mean parameters (Cong 2017 eq. 5; §8.9);
* ``dlda-gibbs`` the batch upward-downward Gibbs sampler (Zhou et al. 2016; §8.5).

The local step (upward-downward Gibbs of each document's gamma units, §8.4) is the kernel
:mod:`topictk.inference.dlda._dlda`; the global updates are dense NumPy on the driver, with their
normal (SG-MCMC) or gamma (batch Gibbs) draws taken from the main stream in storage order:
layers in order, each Phi^(l) row by row (lower unit v outer, topic k inner), then r.

Held-out perplexity (§8.11) uses a *persistent test chain*: every test document keeps its local
state, one upward-downward iteration on its observed counts is run at every evaluation of the
training loop, and from update ``inference.burn_in`` on its Poisson rates Phi^(1) theta^(1) are
accumulated. Because it runs inside :meth:`DLDADriver.heldout_probabilities`, which the loop
calls outside the timed step, its time is evaluation time, never ``train_seconds``; so
``training.eval_every`` sets how often it advances (1, as in the paper, for Table 1). The
accumulated value is logged as ``perplexity`` (the driver's objective) and is what
``topictk evaluate`` reports; the *point* perplexity of a fresh chain on the current globals
(``inference.point_perplexity``) is logged as ``perplexity_point``.
"""
from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass

import numpy as np

from topictk import streams as keys
from topictk.config.schema import Option
from topictk.corpus.batches import gather_rows
from topictk.errors import ConfigError, NumericalError, UsageError
from topictk.inference.dlda import _dlda
from topictk.inference.base import (
    Driver,
    EvaluationSet,
    FoldInPlan,
    MemorySizes,
    StepInfo,
    Traits,
    chunk_bounds_by_docs,
    chunk_bounds_by_tokens,
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
from topictk.inference.dlda.shards import PassSettings, ShardedDeepGibbs
from topictk.inference.minibatch import batch_sizes, epoch_schedule
from topictk.inference.perplexity import perplexity_from_probabilities
from topictk.inference.registry import register
from topictk.inference.dlda.grow import (grow_deep_state, grow_training_chains,
                                         grown_first_layer)
from topictk.inference.schedules import sgmcmc_step
from topictk.limits import at_peak
from topictk.state.deep import DeepState
from topictk.streams import Streams, from_states

log = logging.getLogger("topictk")

FLOOR = 1e-300
CHAIN_PASS = 2**30        # eval-stream pass index offset of the persistent test chain


# --------------------------------------------------------------------------- helpers
def resolve_eta(value, layers: list[int]) -> list[float]:
    """model.eta -> eta^(l) for every layer; ``auto`` is 1/K_l (Cong 2017)."""
    return [1.0 / k if value == "auto" else float(value) for k in layers]


def initial_theta(n_docs: int, layers: list[int]) -> np.ndarray:
    """theta_j^(l) = 1/K_l for every document (§8.6, §8.11): (n_docs, sum K_l)."""
    return np.concatenate([np.full((n_docs, k), 1.0 / k) for k in layers], axis=1)


def initial_phis(init: np.random.Generator, n_words: int, layers: list[int]) -> list[np.ndarray]:
    """Phi^(l)_vk = 0.05 + 0.95 U, columns normalised (§8.10); uniforms in storage order."""
    phis, rows = [], n_words
    for k in layers:
        p = 0.05 + 0.95 * init.random((rows, k))
        phis.append(p / p.sum(axis=0))
        rows = k
    return phis


def gather_csr(docs, doc_ids: np.ndarray):
    """Rows ``doc_ids`` of the (memory-mapped) training documents with batch-local word ids
    -> (indptr, local indices int32, counts int32, vocab int32 ascending)."""
    ptr, words, counts = gather_rows(docs, doc_ids)
    vocab, local = np.unique(words, return_inverse=True)
    return ptr, local.astype(np.int32), counts, vocab.astype(np.int32)


def split_stats(stats: np.ndarray, sizes: list[int]) -> tuple[list[np.ndarray], np.ndarray]:
    """Kernel statistics -> ([X^(1), ..., X^(L)], X^(L+1))."""
    out, pos = [], 0
    for a, b in zip(sizes[:-1], sizes[1:]):
        out.append(stats[pos:pos + a * b].reshape(a, b))
        pos += a * b
    return out, stats[pos:]


def condition_on_simplex(y: np.ndarray, phi_old: np.ndarray) -> np.ndarray:
    """The exact part of Proj∠ (§8.8): a Gaussian step y ~ N(mu, (2 eps/M) diag(phi_old))
    conditioned on the hyperplane sum = 1, u = y - (sum y - 1) phi_old, column by column;
    u has covariance (2 eps/M)(diag phi - phi phi^T) and the same mean when sum mu = 1."""
    return y - (y.sum(axis=0) - 1.0) * phi_old


def project_simplex(y: np.ndarray, phi_old: np.ndarray) -> tuple[np.ndarray, int]:
    """Proj∠ of §8.8, column by column: :func:`condition_on_simplex`, then, only for columns
    with a non-positive or infinite coordinate, clamp at 0 (infinite -> 0), floor at 1e-300,
    and renormalise. Returns (columns on the simplex, number of clamped coordinates).

    Departure from §8.8: a NaN in y is not clamped to 0 but left in its column, so that the
    non-finite check after the update reports it (§12.5: never silently replace NaN).
    """
    with np.errstate(invalid="ignore", over="ignore"):     # inf - inf: clamped below
        u = condition_on_simplex(y, phi_old)
    nan_cols = np.isnan(y).any(axis=0)
    outside = ~((u > 0) & np.isfinite(u))
    outside[:, nan_cols] = False
    bad = outside.any(axis=0)
    if bad.any():
        ub = u[:, bad]
        ub = np.where(np.isfinite(ub), np.maximum(ub, 0.0), 0.0)
        u[:, bad] = np.maximum(ub, FLOOR)
    u[:, nan_cols] = np.nan
    return u / u.sum(axis=0), int(np.count_nonzero(outside))


def fisher_scale(M: np.ndarray | float | None, total, t: int, eps_prime: float):
    """Eq. 18/19: M = T at t = 0, else (1 - eps') M + eps' T."""
    if t == 0 or M is None:
        return np.array(total, dtype=np.float64, copy=True)
    return (1.0 - eps_prime) * M + eps_prime * total


def tlasgr_columns(phi: np.ndarray, xbar: np.ndarray, M: np.ndarray, eps: float, scale: float,
                   eta: float, noise: np.ndarray | None) -> tuple[np.ndarray, np.ndarray, int]:
    """Eq. 15 + Proj∠ for every column of one layer (§8.7).

    ``xbar`` (K_{l-1}, K_l) is the batch average X-bar^(l), ``scale`` = R_B, ``M`` (K_l,) the
    Fisher scales to use (M_k^(l) for TLASGR, M-bar for TLFSGR); the guard M_eff = max(M, eps A)
    keeps the drift from overshooting a/A. Returns (new Phi^(l), eps / M_eff (K_l,), clamped)."""
    a = scale * xbar + eta
    A = a.sum(axis=0)
    rate = eps / np.maximum(M, eps * A)                    # (K_l,)
    y = phi + rate * (a - A * phi)
    if noise is not None:
        y += np.sqrt(2.0 * rate * phi) * noise
    new, clamped = project_simplex(y, phi)
    return new, rate, clamped


def tlasgr_drift(phi: np.ndarray, a: np.ndarray, M: float) -> np.ndarray:
    """I^-1 grad + Gamma of eq. 8.2 for one column: (a_v - A phi_v) / M (all coordinates)."""
    return (a - a.sum() * phi) / M


def r_update(r: np.ndarray, xtop: np.ndarray, qbar: float, M: float, eps: float, scale: float,
             gamma0: float, c0: float, noise: np.ndarray | None) -> tuple[np.ndarray, float, int]:
    """Eq. 17 with the M_eff guard (§8.7) -> (new r, eps / M_eff, floored entries)."""
    A_r = c0 + scale * qbar
    rate = eps / max(M, eps * A_r)
    y = r + rate * ((scale * xtop + gamma0 / r.size) - r * A_r)
    if noise is not None:
        y += np.sqrt(2.0 * rate * r) * noise
    np.abs(y, out=y)
    low = y < FLOOR
    y[low] = FLOOR
    return y, rate, int(np.count_nonzero(low))


def sgrld_columns(phi_hat: np.ndarray, xbar: np.ndarray, eps: float, scale: float, eta: float,
                  noise: np.ndarray | None) -> tuple[np.ndarray, np.ndarray, int]:
    """Cong 2017 eq. 5 (noise inside |.|; §8.9) on one layer's expanded means
    -> (new phi_hat, eps / phi_hat_.k (the step on the simplex scale), floored entries)."""
    total = phi_hat.sum(axis=0)
    phi = phi_hat / total
    drift = (scale * xbar + eta) - (scale * xbar.sum(axis=0) + total) * phi
    new = phi_hat + eps * drift
    if noise is not None:
        new += np.sqrt(2.0 * eps * phi_hat) * noise
    np.abs(new, out=new)
    low = new < FLOOR
    new[low] = FLOOR
    return new, eps / total, int(np.count_nonzero(low))


def dirichlet_columns(shape: np.ndarray, main: np.random.Generator) -> np.ndarray:
    """Columns ~ Dir(shape[:, k]) (§12.3): gammas in storage order, floor 1e-300, normalise,
    floor, renormalise."""
    g = np.maximum(main.standard_gamma(shape), FLOOR)
    phi = np.maximum(g / g.sum(axis=0), FLOOR)
    return phi / phi.sum(axis=0)


# --------------------------------------------------------------------------- options
def _step_options(a: float, b: float, c: float) -> dict:
    return {
        "a": Option("float", a, low=0, low_open=True, help="epsilon_t scale a"),
        "b": Option("float", b, low=0, low_open=True, help="epsilon_t offset b"),
        "c": Option("float", c, low=0.5, high=1, low_open=True,
                    help="epsilon_t decay c; (0.5, 1] so the steps sum to infinity and their "
                         "squares do not"),
    }


COMMON_OPTIONS = {
    "burn_in": Option("int", None, low=0, nullable=True,
                      help="updates before the persistent test chain accumulates its rates "
                           "(default: half the iterations)"),
    "point_perplexity": {
        "iterations": Option("int", 600, low=1,
                             help="local iterations of the fresh test chain of a point "
                                  "perplexity"),
        "last": Option("int", 400, low=1, help="of which the last N are used ..."),
        "thin": Option("int", 2, low=1, help="... every thin-th of them"),
        "every": Option("int", 0, low=0,
                        help="updates between point perplexities (0: at every evaluation); "
                             "other evaluations log perplexity_point as NaN"),
    },
}

SG_OPTIONS = {
    "batch_size": Option("int", 200, low=1, help="documents per update (|B|)"),
    "local_burn_in": Option("int", None, low=0, nullable=True,
                            help="local upward-downward iterations discarded (default 20 L)"),
    "local_samples": Option("int", None, low=1, nullable=True,
                            help="local iterations averaged into the statistics (default 10 L)"),
    "chunk_docs": Option("int", 16, low=1,
                         help="documents per random-stream chunk of a mini-batch"),
}

FORGETTING = {
    "a": Option("float", None, low=0, low_open=True, nullable=True,
                help="epsilon'_t scale (default: step.a, i.e. epsilon' = epsilon); "
                     "epsilon'_t is capped at 1"),
    "b": Option("float", None, low=0, low_open=True, nullable=True, help="default: step.b"),
    "c": Option("float", None, low=0, low_open=True, nullable=True, help="default: step.c"),
}


# --------------------------------------------------------------------------- drivers
class DLDADriver(Driver):
    """What the four DLDA samplers share: layers, hyperparameters, initialisation, the test
    chains, persistence. Subclasses implement ``step``."""

    # the objective is the persistent test chain's accumulated perplexity, and every
    # evaluation advances that chain; the chains of evaluate and infer run on a cluster's
    # workers
    traits = Traits(family="dlda", kind="mini-batch", layered=True,
                    persistent_evaluation=True, objective="perplexity",
                    report={"tree", "evaluation"}, cluster_fold_in=True, own_fold_in=True)
    STATE = DeepState
    stochastic = True

    @classmethod
    def check_config(cls, data: dict, where: str) -> None:
        model, inf = data["model"], data["inference"]
        if data.get("evaluation", {}).get("fold_in") == "fixed-point":
            raise ConfigError(f"evaluation.fold_in: fixed-point does not apply to deep LDA "
                              f"(a gamma prior from the layer above, not a Dirichlet one; "
                              f"evaluate scores with the persistent test chain); leave it "
                              f"out ({where})")
        layers = model["layers"]
        if model.get("topics") is None:
            model["topics"] = layers[0]
        elif model["topics"] != layers[0]:
            raise ConfigError(f"model.topics must equal the first entry of model.layers "
                              f"({layers[0]}) or be left out; got {model['topics']} ({where})")
        wider = [i + 2 for i in range(len(layers) - 1) if layers[i + 1] > layers[i]]
        if wider:
            log.warning("model.layers = %s: layer %s is wider than the layer below it; deep "
                        "LDA usually narrows upwards (%s)", layers,
                        ", ".join(map(str, wider)), where)
        if inf["burn_in"] is None:
            inf["burn_in"] = inf["iterations"] // 2
        if inf["burn_in"] >= inf["iterations"]:
            raise ConfigError(f"inference.burn_in must be < inference.iterations "
                              f"({inf['iterations']}); got {inf['burn_in']} ({where})")
        pp = inf["point_perplexity"]
        if pp["last"] > pp["iterations"]:
            raise ConfigError(f"inference.point_perplexity.last must be <= "
                              f"inference.point_perplexity.iterations ({pp['iterations']}); "
                              f"got {pp['last']} ({where})")
        if cls.stochastic:
            L = len(layers)
            if inf["local_burn_in"] is None:
                inf["local_burn_in"] = 20 * L
            if inf["local_samples"] is None:
                inf["local_samples"] = 10 * L
            if "forgetting" in inf:
                for key in ("a", "b", "c"):
                    if inf["forgetting"][key] is None:
                        inf["forgetting"][key] = inf["step"][key]

    MEMORY_FIX = ("use a smaller vocabulary (topictk prepare --vocab-size): the first "
                  "layer's V x K_1 arrays dominate")
    #: (V, K_1) arrays a global update makes beside Phi^(1) and the batch's statistics
    #: spread to (V, K_1): TLASGR's normals, a, its drift terms, y, the noise's scale and
    #: its square root, and the columns projected and normalised (tlasgr_columns)
    UPDATE_ARRAYS = 8

    @classmethod
    def memory_arrays(cls, data: dict, counts: dict) -> list[tuple[str, tuple[int, ...], int]]:
        """The family's template: the layers' Phi^(l) (and what the sampler keeps beside
        them, :meth:`memory_held`), the persistent test chain (theta, c and the accumulated
        rates of the test documents), and the largest of the step's parts
        (:meth:`memory_phases`) and of an evaluation: the networks flattened for the kernel
        beside a fresh test chain."""
        s = MemorySizes.of(data, counts)
        layers = [int(k) for k in data["model"]["layers"]]
        rows = [s.V] + layers
        network = sum(a * b for a, b in zip(rows, layers)) + layers[-1]
        held = [("Phi of every layer", (network,), 8)] + cls.memory_held(data, s, layers)
        if s.test_docs:
            held.append(("persistent test chain", (s.test_docs, sum(layers) + len(layers)), 8))
        phases = cls.memory_phases(data, s, layers, network)
        if s.curve_docs:
            phases.append([("networks for the kernel", (network,), 8),
                           ("fresh test chain", (s.curve_docs, sum(layers) + len(layers)), 8)])
        return at_peak(held, *phases)

    @classmethod
    def memory_held(cls, data: dict, s, layers: list[int]) -> list:
        """Arrays the sampler keeps beside Phi (none)."""
        return []

    @classmethod
    def memory_phases(cls, data: dict, s, layers: list[int], network: int) -> list[list]:
        """A mini-batch's local chains: Phi with the batch's rows of Phi^(1) (and those rows
        alone), the statistics (int64) with a private copy for every thread but the first, the
        documents' chains; the global update: the batch's statistics spread to (V, K_1) and
        UPDATE_ARRAYS more (V, K_1) arrays for the first layer."""
        docs, _, _, words = batch_sizes(data, s)
        batch_network = network - (s.V - words) * layers[0]
        chunks = -(-docs // int(data["inference"]["chunk_docs"]))
        copies = min(s.threads, max(chunks, 1))
        return [[("batch's rows of Phi^(1)", (words, layers[0]), 8),
                 ("networks of the batch's words", (batch_network,), 8),
                 ("batch statistics", (copies, batch_network), 8),
                 ("batch statistics averaged", (batch_network,), 8),
                 ("batch chains", (docs, sum(layers) + len(layers)), 8)],
                [("global update of the first layer", (1 + cls.UPDATE_ARRAYS, s.V, layers[0]),
                  8)]]

    def __init__(self, config, store, threads: int = 1, *,
                 streams: Streams | None = None):
        super().__init__(config, store, threads, streams=streams)
        model, inf = config.model, config.inference
        self.layers = [int(k) for k in model.layers]
        self.L = len(self.layers)
        self.train = self.train_documents    # memory-mapped
        self.eta = resolve_eta(model.eta, self.layers)
        self.hyper = np.array([model.a0, model.b0, model.e0, model.f0], dtype=np.float64)
        self.gamma0, self.c0 = float(model.gamma0), float(model.c0)
        self.burn_in = int(inf.burn_in)
        self.iterations = int(inf.iterations)
        self.sizes = np.array([self.V] + self.layers, dtype=np.int64)
        self.test = EvaluationSet.from_store(store)

    # ---------------------------------------------------------------- state

    def init_state(self) -> DeepState:
        init = np.random.Generator(self.streams.persistent(keys.INIT))
        phis = initial_phis(init, self.V, self.layers)
        n_test = self.test.observed.n_docs
        state = DeepState(
            layers=list(self.layers), phi=phis,
            r=np.full(self.layers[-1], 1.0 / self.layers[-1]),
            theta_test=initial_theta(n_test, self.layers), c_test=np.ones((n_test, self.L)),
            racc=np.zeros(self.test.heldout.indices.size), tacc=np.zeros(n_test))
        self._init_extra(state)
        return state

    def _init_extra(self, state: DeepState) -> None:
        """Algorithm-specific parts of the initial state."""

    def check_state(self, state: DeepState) -> None:
        where = "iteration" if not self.stochastic else "update"
        for l, p in enumerate(state.phi, start=1):
            if not np.all(np.isfinite(p)):
                raise NumericalError(
                    f"Phi^({l}) (layer {l}) became NaN or infinite at {where} {state.step}; "
                    f"{self._advice()} (the last good checkpoint is kept)")
        if not np.all(np.isfinite(state.r)):
            raise NumericalError(
                f"r (top layer {self.L}) became NaN or infinite at {where} {state.step}; "
                f"{self._advice()} (the last good checkpoint is kept)")

    def _advice(self) -> str:
        return "lower inference.step.a"

    def state_sizes(self) -> dict:
        return {**super().state_sizes(), "layers": self.layers, "rows": [self.V] + self.layers,
                "top": self.layers[-1], "all_topics": sum(self.layers), "depth": self.L,
                "test_docs": self.test.observed.n_docs,
                "test_heldout": self.test.heldout.indices.size}

    def state_from_arrays(self, header: dict, arrays: dict) -> DeepState:
        layers = [int(k) for k in header.get("layers", [])]
        if layers != self.layers:     # before the shapes, which follow from the layers
            raise ValueError(f"model.layers {layers} in the file, {self.layers} in the config")
        return super().state_from_arrays(header, arrays)

    def check_restored(self, state: DeepState) -> None:
        """Raise ValueError when the algorithm's own arrays are missing."""

    # ---------------------------------------------------------------- topics
    def topic_word(self, state: DeepState) -> np.ndarray:
        """First-layer topics (K_1, V)."""
        return state.phi[0].T.copy()

    def layer_topic_word(self, state: DeepState, layer: int) -> np.ndarray:
        """Topics of ``layer`` projected to words, Phi^(1)...Phi^(l-1) phi_k^(l): (K_l, V)."""
        return state.projected(layer).T.copy()

    def layer_weights(self, state: DeepState, layer: int) -> np.ndarray:
        """Phi^(layer) (K_{l-1}, K_l): how strongly each lower unit belongs to each topic."""
        return state.phi[layer - 1]

    def fold_in(self, state: DeepState, documents, plan: FoldInPlan, *, prior=None,
                sample=None) -> np.ndarray:
        """(D, K_1) topic proportions of documents: each document's upward-downward chain
        (§8.4) with the networks and r fixed, started as the test chain is (§8.11:
        theta^(l) = 1/K_l, c = 1), p/c sampled from iteration min(burn_in // 2, 10) on as in
        the point perplexity; theta^(1) normalised and averaged over the iterations after
        ``plan.burn_in``, one stream per chunk of the plan advancing across the iterations.
        The network's gamma prior replaces a Dirichlet ``prior``. Scoring does not mix this
        theta with the topics: it accumulates the rates of the persistent test chain (§8.11).
        On a cluster the chunks are cut into one run per worker, each run's chains there with
        its chunks' streams: the same numbers."""
        csr = (np.ascontiguousarray(documents.indptr, dtype=np.int64),
               np.ascontiguousarray(documents.indices, dtype=np.int32),
               np.ascontiguousarray(documents.counts, dtype=np.int32))
        job = FoldInChains(self.sizes, state.r, self.hyper, int(plan.sweeps),
                           int(plan.burn_in), tuple(self.layers))
        flat = state.flat_phi()
        C = plan.bounds.size - 1
        if self.cluster is None or C == 0:
            return job.run(flat, csr, plan.bounds, plan.streams, int(plan.threads))

        def cut(n_workers: int) -> list:
            return [(*row_range(csr[0], int(plan.bounds[a]), int(plan.bounds[b]), *csr[1:]),
                     np.ascontiguousarray(plan.bounds[a:b + 1] - plan.bounds[a]),
                     [bg.state for bg in plan.streams[a:b]])
                    for a, b in runs(C, n_workers)]

        return map_merge(self.cluster, ClusterTask(
            fold_in_chains_piece, cut, context=job, shared=(flat,), merge=concatenated,
            doing="during the fold-in", again="folding in again"))

    def document_prior(self, state: DeepState, features) -> None:
        """None: theta has the gamma prior of the network above it, not a Dirichlet."""
        return None

    # ---------------------------------------------------------------- local chains
    def _chains(self, state: DeepState, docs, theta, c, n_iter: int, pc_start: int,
                chunk_docs: int, chunk_keys, *, held=None, racc=None, tacc=None,
                acc_burn: int = 0, acc_thin: int = 1) -> tuple[int, int]:
        """Run the chains of ``docs`` = (indptr, indices, counts) from ``theta`` and ``c``
        (updated in place) with the networks fixed, chunk ch with the stream of
        ``chunk_keys(ch)``; with ``held`` = (held-out indptr, indices) the rates are added to
        ``racc`` and ``tacc`` (:class:`ChainRun`). On a cluster the chunks are cut into one
        run per worker (the documents, their chains and accumulators travel with it, and come
        back): the same numbers. Returns (fallbacks, floored)."""
        docs = tuple(np.ascontiguousarray(a, dtype=t)
                     for a, t in zip(docs, (np.int64, np.int32, np.int32)))
        if held is not None:
            held = (np.ascontiguousarray(held[0], dtype=np.int64),
                    np.ascontiguousarray(held[1], dtype=np.int32))
        bounds = chunk_bounds_by_docs(docs[0].size - 1, chunk_docs)
        C = bounds.size - 1
        job = ChainRun(self.sizes, state.r, self.hyper, int(n_iter), int(pc_start),
                         tuple(tuple(chunk_keys(ch)) for ch in range(C)), self.streams.seed,
                         int(acc_burn), int(acc_thin))
        flat = state.flat_phi()
        if self.cluster is None or C == 0:
            return job.run(flat, (0, C, bounds, docs, theta, c, held, racc, tacc), self.threads)

        def cut(n_workers: int) -> list:
            parts = []
            for a, b in runs(C, n_workers):
                d0, d1 = int(bounds[a]), int(bounds[b])
                h = None if held is None else row_range(held[0], d0, d1, held[1])
                h0, h1 = (0, 0) if held is None else (int(held[0][d0]), int(held[0][d1]))
                parts.append((a, b, np.ascontiguousarray(bounds[a:b + 1] - d0),
                              row_range(docs[0], d0, d1, *docs[1:]), theta[d0:d1], c[d0:d1], h,
                              None if racc is None else racc[h0:h1],
                              None if tacc is None else tacc[d0:d1]))
            return parts

        fallbacks = floored = 0
        parts = cut(len(self.cluster.workers()))
        results = map_merge(self.cluster, ClusterTask(
            chain_run_piece, lambda n: parts, context=job, shared=(flat,),
            doing="during the test chains", again="running the test chains again"))
        for part, (new_theta, new_c, new_racc, new_tacc, fb, fl) in zip(parts, results):
            part[4][...], part[5][...] = new_theta, new_c
            if new_racc is not None:
                part[7][...], part[8][...] = new_racc, new_tacc
            fallbacks, floored = fallbacks + fb, floored + fl
        return fallbacks, floored

    def _advance_test_chain(self, state: DeepState) -> None:
        """One iteration of the persistent test chain after update ``state.step`` (§8.11),
        accumulating the rates once the update index t = step - 1 reaches the burn-in."""
        if state.chain_step >= state.step or self.test.observed.n_docs == 0:
            return
        obs, held = self.test.observed, self.test.heldout
        accumulate = state.step - 1 >= self.burn_in
        step = state.step
        self._chains(state, (obs.indptr, obs.indices, obs.counts), state.theta_test,
                     state.c_test, 1, 0, self.config.evaluation.chunk_docs,
                     lambda ch: keys.eval_key(CHAIN_PASS + step, ch),
                     held=(held.indptr, held.indices) if accumulate else None,
                     racc=state.racc if accumulate else None,
                     tacc=state.tacc if accumulate else None)
        state.chain_step = state.step
        state.chain_samples += int(accumulate)

    def _rates(self, racc: np.ndarray, tacc: np.ndarray, test: EvaluationSet) -> np.ndarray:
        """p_vj = Racc_vj / Tacc_j for every held-out entry (§8.11)."""
        held = test.heldout
        row = np.repeat(np.arange(held.n_docs), np.diff(np.asarray(held.indptr)))
        with np.errstate(divide="ignore", invalid="ignore"):
            p = racc / tacc[row]
        return np.where(np.isfinite(p), p, 0.0)

    def point_probabilities(self, state: DeepState, test: EvaluationSet,
                            pass_index: int) -> np.ndarray:
        """Point perplexity's p-hat (§8.11): a fresh chain on the current globals,
        ``point_perplexity.iterations`` iterations, rates accumulated every ``thin``-th of
        the ``last``; p/c sampling from iteration min(burn/2, 10) as in the local chains."""
        pp = self.config.inference.point_perplexity
        obs, held = test.observed, test.heldout
        n, burn = int(pp["iterations"]), int(pp["iterations"]) - int(pp["last"])
        racc, tacc = np.zeros(held.indices.size), np.zeros(obs.n_docs)
        if obs.n_docs:
            self._chains(state, (obs.indptr, obs.indices, obs.counts),
                         initial_theta(obs.n_docs, self.layers), np.ones((obs.n_docs, self.L)),
                         n, min(burn // 2, 10), self.config.evaluation.chunk_docs,
                         lambda ch: keys.eval_key(pass_index, ch),
                         held=(held.indptr, held.indices), racc=racc, tacc=tacc,
                         acc_burn=burn, acc_thin=int(pp["thin"]))
        return self._rates(racc, tacc, test)

    def _point_due(self, step: int) -> bool:
        every = int(self.config.inference.point_perplexity["every"])
        return every == 0 or step % every == 0 or step >= self.iterations

    def predictive_topics(self, state: DeepState, samples, test: EvaluationSet):
        """One layer: theta_d ~ Gam(r, 1/c_d) normalised is Dir(r), so the left-to-right
        estimator scores Phi^(1) with alpha = r (§11.3). Deeper networks put a gamma prior on
        r itself, which the estimator does not cover."""
        if state.depth > 1:
            raise UsageError(f"the left-to-right estimator needs a Dirichlet prior on theta; a "
                             f"{state.depth}-layer '{self.name}' network has a gamma prior from "
                             f"the layer above. Use the default estimator (document completion)")
        return [(state.phi[0], state.r)]

    @classmethod
    def heldout_estimator(cls, config) -> str:
        return "persistent test chain"

    def heldout_probabilities(self, state: DeepState, samples, test: EvaluationSet,
                              pass_index: int) -> np.ndarray:
        """During training (``samples`` None): advance the persistent test chain, then return
        the point perplexity's p-hat (NaN where it is not due). From ``topictk evaluate``
        (a list of samples): the persistent chain's accumulated rates (§8.11), or the point
        estimate when the chain has accumulated nothing yet."""
        if samples is None:
            self._advance_test_chain(state)
            if not self._point_due(state.step):
                return np.full(test.heldout.indices.size, np.nan)
            return self.point_probabilities(state, test, pass_index)
        if state.chain_samples == 0:
            return self.point_probabilities(state, test, pass_index)
        return self._rates(state.racc, state.tacc, test)

    def objective(self, state: DeepState) -> float | None:
        """The persistent test chain's perplexity (§8.11), None before it accumulates."""
        if state.chain_samples == 0 or self.test.n_heldout_tokens == 0:
            return None
        ppl, _ = perplexity_from_probabilities(
            self._rates(state.racc, state.tacc, self.test), self.test.heldout.counts)
        return ppl

    def evaluation_report(self, state: DeepState, test: EvaluationSet) -> dict:
        """Extra fields of ``topictk evaluate`` for deep models."""
        ppl, floored = perplexity_from_probabilities(
            self.point_probabilities(state, test, 0), test.heldout.counts)
        pp = self.config.inference.point_perplexity
        point_samples = int(pp["last"]) // int(pp["thin"])
        return {"layers": list(self.layers), "perplexity_point": ppl,
                "point_floored_tokens": floored,
                "samples": state.chain_samples or point_samples,
                "perplexity_source": ("persistent test chain" if state.chain_samples
                                      else "point (the test chain has no samples yet)")}


@dataclass(frozen=True)
class ChainRun:
    """Chains of documents with the networks fixed (§8.4; the test chains of §8.11) as each
    run of their chunks reads them: the network's sizes, r, the hyperparameters, the
    iterations, p/c sampling's first iteration, every chunk's stream key under ``seed`` and,
    when the rates are accumulated, from which iteration and how often."""

    sizes: np.ndarray
    r: np.ndarray
    hyper: np.ndarray
    n_iter: int
    pc_start: int
    keys: tuple
    seed: int
    acc_burn: int = 0
    acc_thin: int = 1

    def run(self, flat: np.ndarray, part: tuple, threads: int) -> tuple[int, int]:
        """The chains of chunks [c0, c1) of ``part`` = (c0, c1, their document bounds from
        0, their CSR rows, theta, c, held-out CSR rows or None, racc, tacc), updated in place:
        :func:`topictk.inference.dlda._dlda.evaluate_chains` with held-out rows, else
        ``infer_chains``. Returns (fallbacks, floored)."""
        c0, c1, bounds, docs, theta, c, held, racc, tacc = part
        streams = Streams(self.seed)
        run = {"n_iter": self.n_iter, "pc_start": self.pc_start,
               "chunk_bounds": np.ascontiguousarray(bounds, dtype=np.int64),
               "streams": [streams.derived(self.keys[ch]) for ch in range(c0, c1)],
               "threads": threads}
        chains = (*docs, flat, self.sizes, self.r, self.hyper, theta, c)
        if held is not None:
            return _dlda.evaluate_chains(*chains, held_indptr=held[0], held_indices=held[1],
                                         racc=racc, tacc=tacc, acc_burn=self.acc_burn,
                                         acc_thin=self.acc_thin, **run)
        return _dlda.infer_chains(*chains, **run)


def chain_run_piece(job: ChainRun, flat: np.ndarray, part: tuple):
    """The cluster piece: :meth:`ChainRun.run` of a run of chunks (on a worker); returns
    their new theta, c, racc, tacc (None without held-out rows), fallbacks and floored."""
    c0, c1, bounds, docs, theta, c, held, racc, tacc = part
    theta, c = np.array(theta), np.array(c)
    racc = None if racc is None else np.array(racc)
    tacc = None if tacc is None else np.array(tacc)
    fb, fl = job.run(flat, (c0, c1, bounds, docs, theta, c, held, racc, tacc), worker_threads())
    return theta, c, racc, tacc, int(fb), int(fl)


@dataclass(frozen=True)
class FoldInChains:
    """The fold-in of documents by their chains (:meth:`DLDADriver.fold_in`) as each run of
    their chunks reads it: the network's sizes, r, the hyperparameters, the iterations and
    those before the average, the layers."""

    sizes: np.ndarray
    r: np.ndarray
    hyper: np.ndarray
    sweeps: int
    burn_in: int
    layers: tuple

    def run(self, flat: np.ndarray, csr: tuple, bounds: np.ndarray, streams: list,
            threads: int) -> np.ndarray:
        """theta^(1) of the documents ``csr`` averaged over the iterations after the burn-in,
        chunk ``bounds`` each with its stream of ``streams`` (advanced)."""
        D, K1 = csr[0].size - 1, self.layers[0]
        theta, c = initial_theta(D, list(self.layers)), np.ones((D, len(self.layers)))
        pc_from = min(self.burn_in // 2, 10)
        total = np.zeros((D, K1))
        for it in range(1, self.sweeps + 1):
            # one iteration per call; the call numbers it 1, so pc_start 1 = on, 2 = off
            _dlda.infer_chains(*csr, flat, self.sizes, self.r, self.hyper, theta, c, n_iter=1,
                               pc_start=1 if it >= pc_from else 2,
                               chunk_bounds=np.ascontiguousarray(bounds, dtype=np.int64),
                               streams=streams, threads=int(threads))
            if it > self.burn_in:
                first = theta[:, :K1]
                total += first / first.sum(axis=1, keepdims=True)
        return total / (self.sweeps - self.burn_in)


def fold_in_chains_piece(job: FoldInChains, flat: np.ndarray, part: tuple) -> np.ndarray:
    """The cluster piece: the fold-in of a run of chunks (on a worker), ``part`` = (their CSR
    rows..., their bounds from 0, their streams' states)."""
    *csr, bounds, states = part
    return job.run(flat, tuple(csr), bounds, from_states(states), worker_threads())


@dataclass
class DeepRestartPoint:
    """What a ``dlda-gibbs`` run on a cluster goes back to when a worker or the cluster is
    lost: the iteration, the network, r, the running counts and every persistent stream of
    that iteration (theta and c are the driver's copies, not touched until the next gather,
    after which a newer point is taken). The persistent test chain is left where it is: it
    advances once per iteration number (``chain_step``), so the evaluations of the iterations
    done again find it advanced already, and the numbers are those of an uninterrupted run."""

    step: int
    phi: list
    r: np.ndarray
    counts: tuple
    streams: dict

    @classmethod
    def of(cls, state: DeepState, streams: Streams) -> DeepRestartPoint:
        return cls(state.step, [p.copy() for p in state.phi], state.r.copy(),
                   (state.floored, state.fallbacks, state.clamped), streams.state())

    def restore(self, state: DeepState, streams: Streams) -> None:
        state.step = self.step
        state.phi = [p.copy() for p in self.phi]
        state.r = self.r.copy()
        state.floored, state.fallbacks, state.clamped = self.counts
        streams.restore(self.streams)


@dataclass(frozen=True)
class DeepLocalJob:
    """One mini-batch's local chains (§8.6) as each of their pieces reads them: the batch's
    documents (by id, from the store on a worker), the network's sizes above the batch's words,
    r and the hyperparameters, the chains' iterations, the chunks' size, and the seed and
    update that key each chunk's stream."""

    doc_ids: np.ndarray
    layers: tuple
    r: np.ndarray
    hyper: np.ndarray
    n_iter: int
    n_burn: int
    pc_start: int
    chunk_docs: int
    seed: int
    t: int
    store: StoreRef | None = None

    def chunk_sums(self, batch, flat: np.ndarray, chunks: tuple[int, int], threads: int):
        """The statistics X (int64, the kernel's layout), every document's q sum, the uniform
        fallbacks and the floored draws of the chains of the batch's chunks [c0, c1), each
        chunk with the stream of (t, its index in the batch). ``batch``: the whole batch's
        (indptr, local word ids, counts, vocabulary); ``flat``: Phi with the batch's rows of
        Phi^(1)."""
        ptr, idx, cnt, vocab = batch
        bounds = chunk_bounds_by_docs(ptr.size - 1, self.chunk_docs)
        c0, c1 = chunks
        d0, d1 = int(bounds[c0]), int(bounds[c1])
        e0, e1 = int(ptr[d0]), int(ptr[d1])
        sizes = np.array([vocab.size, *self.layers], dtype=np.int64)
        stats = np.zeros(int(np.sum(sizes[:-1] * sizes[1:])) + self.layers[-1], dtype=np.int64)
        qsum = np.zeros(d1 - d0)
        streams = Streams(self.seed)
        fb, fl = _dlda.train_chains(
            np.ascontiguousarray(ptr[d0:d1 + 1] - e0, dtype=np.int64),
            np.ascontiguousarray(idx[e0:e1], dtype=np.int32),
            np.ascontiguousarray(cnt[e0:e1], dtype=np.int32), flat, sizes, self.r, self.hyper,
            initial_theta(d1 - d0, list(self.layers)), np.ones((d1 - d0, len(self.layers))),
            n_iter=int(self.n_iter), n_burn=int(self.n_burn), pc_start=int(self.pc_start),
            stats=stats, qsum=qsum, chunk_bounds=np.ascontiguousarray(bounds[c0:c1 + 1] - d0),
            streams=[streams.derived(keys.local_key(self.t, c)) for c in range(c0, c1)],
            threads=threads)
        return stats, qsum, int(fb), int(fl)


def deep_local_piece(job: DeepLocalJob, flat: np.ndarray, chunks: tuple[int, int]):
    """The cluster piece: the local chains of the chunks [c0, c1) of one mini-batch (runs on a
    worker), the batch read from this worker's store as the driver reads it, so that its
    local word ids are the driver's."""
    batch = gather_csr(job.store.open().train(), job.doc_ids)
    return job.chunk_sums(batch, flat, chunks, worker_threads())


def add_deep_statistics(a: tuple, b: tuple) -> tuple:
    """The cluster merge: two runs of consecutive chunks together (integer statistics, the
    same in any grouping; the documents' q sums in chunk order)."""
    return a[0] + b[0], np.concatenate([a[1], b[1]]), a[2] + b[2], a[3] + b[3]


class _StochasticDLDA(DLDADriver):
    """Mini-batch samplers: local chains per batch (§8.6) then a global SG-MCMC step."""

    OPTIONS = {**COMMON_OPTIONS, **SG_OPTIONS, "step": _step_options(1.0, 21.0, 0.7)}

    def __init__(self, config, store, threads: int = 1, *,
                 streams: Streams | None = None):
        super().__init__(config, store, threads, streams=streams)
        inf = config.inference
        self.schedule = epoch_schedule(self.n_docs, int(inf.batch_size))

    def local_statistics(self, state: DeepState, batch, ids: np.ndarray, t: int):
        """§8.6: fresh chains for the documents ``ids`` (``batch``, their CSR rows by
        :func:`gather_csr`), 20L + 10L iterations by default -> ([X-bar^(l)] with X-bar^(1)
        over the batch vocabulary, X-bar^(L+1), Q-bar, fallbacks, floored). On a cluster the
        batch's chunks are cut into one run per worker, each chunk with its own stream as on
        one machine; the integer statistics are added among the workers and the documents'
        q sums come back in chunk order: the same numbers."""
        inf = self.config.inference
        vocab = batch[3]
        burn, coll = int(inf.local_burn_in), int(inf.local_samples)
        job = DeepLocalJob(np.ascontiguousarray(ids, dtype=np.int64), tuple(self.layers),
                           state.r, self.hyper, burn + coll, burn, min(burn // 2, 10),
                           int(inf.chunk_docs), self.streams.seed, t,
                           StoreRef.of(self.store) if self.cluster is not None else None)
        flat = state.flat_phi(vocab)
        n_chunks = chunk_bounds_by_docs(ids.size, job.chunk_docs).size - 1
        if self.cluster is not None:
            stats, qsum, fb, fl = map_merge(self.cluster, ClusterTask(
                deep_local_piece, cut=lambda n: runs(n_chunks, n), context=job,
                shared=(flat,), merge=add_deep_statistics, on_workers=True,
                doing="during a mini-batch update",
                again="computing the mini-batch's local chains again"))
        else:
            stats, qsum, fb, fl = job.chunk_sums(batch, flat, (0, n_chunks), self.threads)
        xs, xtop = split_stats(stats, [vocab.size] + self.layers)
        return [x / coll for x in xs], xtop / coll, float(qsum.sum()) / coll, fb, fl

    def step(self, state: DeepState, t: int) -> StepInfo:
        inf = self.config.inference
        main = np.random.Generator(self.streams.persistent(keys.MAIN))
        ids, state.permutation = self.schedule.batch_ids(t, state.permutation, main)
        batch = gather_csr(self.train, ids)
        xbar, xtop, qbar, fb, fl = self.local_statistics(state, batch, ids, t)
        first = np.zeros((self.V, self.layers[0]))
        first[batch[3]] = xbar[0]
        xbar[0] = first
        eps = sgmcmc_step(inf.step["a"], inf.step["b"], inf.step["c"], t)
        scale = self.n_docs / ids.size
        extra = self.global_update(state, xbar, xtop, qbar, eps, scale, t, main)
        state.floored += fl
        state.fallbacks += fb
        state.step = t + 1
        extra.update({"epsilon": eps, "floored": fl, "fallbacks": fb})
        return StepInfo(tokens=int(batch[2].sum(dtype=np.int64)), documents=int(ids.size),
                        extra=extra)

    def global_update(self, state, xbar, xtop, qbar, eps, scale, t, main) -> dict:
        raise NotImplementedError


@register
class TLASGRDriver(_StochasticDLDA):
    """TLASGR-MCMC (Cong 2017): one step is one mini-batch update of every layer and r."""

    name = "tlasgr"
    # a mini-batch's local chains run on a cluster's workers
    traits = DLDADriver.traits.but(paper="Cong, Chen, Liu & Zhou 2017", add_documents=("dlda",),
                                   cluster=True)
    OPTIONS = {**_StochasticDLDA.OPTIONS, "forgetting": FORGETTING}
    shared_scale = False      # TLFSGR: one M-bar for every topic

    def grow_state(self, old: DeepState, added) -> DeepState:
        """Added documents (:mod:`topictk.inference.dlda.grow`): the new words' rows of
        Phi^(1) at their posterior mean given the Fisher scales M^(1)."""
        scales = old.M[0] if old.M is not None else np.zeros(self.layers[0])
        if self.shared_scale:
            scales = np.full(self.layers[0], float(np.mean(scales)))
        return grow_deep_state(old, grown_first_layer(old.phi[0], self.V, self.eta[0], scales),
                               schedule=self.schedule)

    def global_update(self, state, xbar, xtop, qbar, eps, scale, t, main) -> dict:
        fg = self.config.inference.forgetting
        eps_p = min(1.0, sgmcmc_step(fg["a"], fg["b"], fg["c"], t))   # a convex combination
        # eq. 18 for every layer and eq. 19 for r; all from the same batch statistics
        state.M = [fisher_scale(None if state.M is None else state.M[l],
                                scale * xbar[l].sum(axis=0), t, eps_p) for l in range(self.L)]
        state.M_top = float(fisher_scale(state.M_top, scale * qbar, t, eps_p))
        mbar = float(np.mean(state.M[0]))
        extra, clamped = {}, 0
        for l in range(self.L):
            M = np.full(self.layers[l], mbar) if self.shared_scale else state.M[l]
            noise = main.standard_normal(size=state.phi[l].shape)
            state.phi[l], rate, c = tlasgr_columns(state.phi[l], xbar[l], M, eps, scale,
                                                   self.eta[l], noise)
            clamped += c
            extra[f"lr_layer{l + 1}"] = float(np.mean(rate))
        noise = main.standard_normal(size=state.r.shape)
        state.r, rate_r, floored_r = r_update(state.r, xtop, qbar, state.M_top, eps, scale,
                                              self.gamma0, self.c0, noise)
        state.clamped += clamped
        extra.update({"lr_r": rate_r, "clamped": clamped, "r_floored": floored_r})
        return extra

    def check_restored(self, state: DeepState) -> None:
        if state.step > 0 and state.M is None:
            raise ValueError("the Fisher scales M are missing")


@register
class TLFSGRDriver(TLASGRDriver):
    """TLFSGR (Cong 2017 baseline): every topic of every layer uses M-bar = mean_k M_k^(1);
    r keeps its own M^(L+1) (§8.9)."""

    name = "tlfsgr"
    shared_scale = True


@register
class DLDASGRLDDriver(_StochasticDLDA):
    """SGRLD for DLDA (Cong 2017 eq. 5): expanded means per layer, no Fisher scales; r as in
    TLASGR (§8.9). The 20News preset step is a = 0.1, b = 21, c = 0.9."""

    name = "dlda-sgrld"
    traits = DLDADriver.traits.but(paper="Cong et al. 2017; Patterson & Teh 2013",
                                   add_documents=("dlda",), cluster=True)
    OPTIONS = {**COMMON_OPTIONS, **SG_OPTIONS, "step": _step_options(0.1, 21.0, 0.9)}

    # sgrld_columns: the normals, phi, the drift, the new phi_hat, the noise's scale and its
    # square root
    UPDATE_ARRAYS = 6

    @classmethod
    def memory_held(cls, data: dict, s, layers: list[int]) -> list:
        """The expanded means phi_hat of every layer."""
        rows = [s.V] + layers
        return [("expanded means", (sum(a * b for a, b in zip(rows, layers)),), 8)]

    def _init_extra(self, state: DeepState) -> None:
        state.phi_hat = [p.copy() for p in state.phi]

    def grow_state(self, old: DeepState, added) -> DeepState:
        """Added documents (:mod:`topictk.inference.dlda.grow`): the new words' expanded
        means at eta."""
        first = old.phi_hat[0]
        extra = np.full((self.V - first.shape[0], first.shape[1]), float(self.eta[0]))
        grown = np.ascontiguousarray(np.vstack([first, extra]))
        return grow_deep_state(old, grown / grown.sum(axis=0), [grown, *old.phi_hat[1:]],
                               schedule=self.schedule)

    def global_update(self, state, xbar, xtop, qbar, eps, scale, t, main) -> dict:
        state.M_top = float(fisher_scale(state.M_top, scale * qbar, t, eps))
        extra, floored = {}, 0
        for l in range(self.L):
            noise = main.standard_normal(size=state.phi_hat[l].shape)
            state.phi_hat[l], rate, f = sgrld_columns(state.phi_hat[l], xbar[l], eps, scale,
                                                      self.eta[l], noise)
            state.phi[l] = state.phi_hat[l] / state.phi_hat[l].sum(axis=0)
            floored += f
            extra[f"lr_layer{l + 1}"] = float(np.mean(rate))
        noise = main.standard_normal(size=state.r.shape)
        state.r, rate_r, floored_r = r_update(state.r, xtop, qbar, state.M_top, eps, scale,
                                              self.gamma0, self.c0, noise)
        extra.update({"lr_r": rate_r, "phi_hat_floored": floored, "r_floored": floored_r})
        return extra

    def check_state(self, state: DeepState) -> None:
        for l, p in enumerate(state.phi_hat, start=1):
            if not np.all(np.isfinite(p)):
                raise NumericalError(
                    f"phi_hat^({l}) (layer {l}) became NaN or infinite at update {state.step}; "
                    f"lower inference.step.a (the last good checkpoint is kept)")
        super().check_state(state)

    def check_restored(self, state: DeepState) -> None:
        if state.phi_hat is None:
            raise ValueError("the expanded means phi_hat are missing")


@register
class DLDAGibbsDriver(DLDADriver):
    """Batch upward-downward Gibbs (§8.5): one step is one iteration over the whole training
    corpus; Phi^(l) ~ Dir, r ~ Gam between the upward and the downward pass."""

    name = "dlda-gibbs"
    # both passes of an iteration run on a cluster's shards
    traits = DLDADriver.traits.but(kind="sampled", paper="Zhou, Cong & Chen 2016",
                                   add_documents=("dlda",), cluster=True)
    stochastic = False
    OPTIONS = {
        **COMMON_OPTIONS,
        "chunks": Option("int", 32, low=1,
                         help="token-balanced blocks of training documents, each with its own "
                              "persistent random stream; threads work on blocks (use >= "
                              "threads); documents are independent given the globals, so this "
                              "changes the random numbers, not the algorithm"),
    }

    MEMORY_FIX = ("train with inference.algorithm: tlasgr (mini-batches: no state of the "
                  "training documents), or use a smaller vocabulary")

    @classmethod
    def memory_held(cls, data: dict, s, layers: list[int]) -> list:
        """Every training document's chain: theta and c (float64) and the upward pass's
        counts m (int32)."""
        return [("training documents' chains", (s.D, sum(layers) + len(layers)), 8),
                ("training documents' upward counts", (s.D, sum(layers)), 4)]

    @classmethod
    def memory_phases(cls, data: dict, s, layers: list[int], network: int) -> list[list]:
        """The upward pass: Phi flattened, the statistics (int64) with a private copy for
        every thread but the first; the global draws: the statistics beside the new Phi and
        each layer's Dirichlet shape, gamma draws and their normalisations (V, K_1 each)."""
        copies = min(s.threads, int(data["inference"].get("chunks") or 1))
        return [[("networks for the kernel", (network,), 8),
                 ("statistics", (copies, network), 8)],
                [("statistics", (network,), 8),
                 ("new Phi^(1), its Dirichlet shape and draws", (4, s.V, layers[0]), 8)]]

    def __init__(self, config, store, threads: int = 1, *,
                 streams: Streams | None = None):
        super().__init__(config, store, threads, streams=streams)
        self.bounds = chunk_bounds_by_tokens(np.asarray(self.train.doc_ptr),
                                             int(config.inference.chunks))
        self.doc_m: np.ndarray | None = None    # (D, sum K_l) int32, m of the upward pass
        self.remote: ShardedDeepGibbs | None = None     # the shards on a cluster
        self._restart: DeepRestartPoint | None = None

    def _advice(self) -> str:
        return "check the corpus and the model hyperparameters"

    def _init_extra(self, state: DeepState) -> None:
        state.theta_train = initial_theta(self.n_docs, self.layers)
        state.c_train = np.ones((self.n_docs, self.L))

    def check_restored(self, state: DeepState) -> None:
        if state.theta_train is None:
            raise ValueError("the training documents' local state is missing")

    def grow_state(self, old: DeepState, added) -> DeepState:
        """Added documents (:mod:`topictk.inference.dlda.grow`): the old documents' chains go
        on, the added ones start afresh; the new words' rows of Phi^(1) at 1/V."""
        first = grown_first_layer(old.phi[0], self.V, self.eta[0], np.zeros(self.layers[0]))
        return dataclasses.replace(grow_deep_state(old, first),
                                   **grow_training_chains(old, self.n_docs, self.layers))

    def step(self, state: DeepState, t: int) -> StepInfo:
        if self.remote is None:
            return self._step(state, t)
        return self._remote_step(state, t)

    def _step(self, state: DeepState, t: int) -> StepInfo:
        """Iteration t + 1: the upward pass, the global draws, the downward pass (§8.5); the
        passes on the cluster's shards when there is one."""
        C = self.bounds.size - 1
        streams = self.streams.chunk_streams((3,), C, persistent=True)
        main = np.random.Generator(self.streams.persistent(keys.MAIN))
        if self.remote is not None:
            settings = PassSettings(self.sizes, state.r, self.hyper, StoreRef.of(self.store))
            stats, qcur, fb = self.remote.upward(settings, state.flat_phi(), streams)
        else:
            if self.doc_m is None:
                self.doc_m = np.zeros((self.n_docs, sum(self.layers)), dtype=np.int32)
            stats = np.zeros(int(np.sum(self.sizes[:-1] * self.sizes[1:])) + self.layers[-1],
                             dtype=np.int64)
            qcur = np.zeros(self.n_docs)
            indptr = np.ascontiguousarray(self.train.indptr, dtype=np.int64)
            fb = _dlda.gibbs_upward(indptr, np.ascontiguousarray(self.train.indices, np.int32),
                                    np.ascontiguousarray(self.train.counts, np.int32),
                                    state.flat_phi(), self.sizes, state.r, state.theta_train,
                                    state.c_train, self.doc_m, stats, qcur, self.bounds,
                                    streams, self.threads)
        xs, xtop = split_stats(stats, [int(s) for s in self.sizes])
        Q = float(np.sum(qcur))
        state.phi = [dirichlet_columns(self.eta[l] + xs[l], main) for l in range(self.L)]
        r = main.standard_gamma(self.gamma0 / self.layers[-1] + xtop) / (self.c0 + Q)
        low = r < FLOOR
        r[low] = FLOOR
        state.r = r
        if self.remote is not None:
            settings = PassSettings(self.sizes, state.r, self.hyper, StoreRef.of(self.store))
            fl = self.remote.downward(settings, state.flat_phi(), streams)
        else:
            fl = _dlda.gibbs_downward(state.flat_phi(), self.sizes, state.r, self.hyper,
                                      state.theta_train, state.c_train, self.doc_m,
                                      self.bounds, streams, self.threads)
        state.floored += fl
        state.fallbacks += fb
        state.step = t + 1
        return StepInfo(tokens=self.n_tokens, documents=self.n_docs,
                        extra={"floored": fl, "fallbacks": fb,
                               "r_floored": int(np.count_nonzero(low))})

    # -------------------------------------------------------------- on a cluster
    def use_cluster(self, cluster) -> None:
        """Run both passes of every iteration on ``cluster``'s shards: the training
        documents' theta and c live on its workers, brought back when a checkpoint or the
        model is written (:mod:`topictk.inference.dlda.shards`)."""
        super().use_cluster(cluster)
        self.remote = ShardedDeepGibbs(cluster, self.store,
                                       np.asarray(self.train.doc_ptr, dtype=np.int64),
                                       self.bounds)

    def _remote_step(self, state: DeepState, t: int) -> StepInfo:
        """:meth:`_step` on the cluster; a worker lost on the way is recovered from
        (:meth:`_recover`) and the iteration done again."""
        def attempt() -> StepInfo:
            if self.remote.shards is None:
                self.remote.distribute(state.theta_train, state.c_train)
            if not self.remote.stale:           # the driver holds the whole state: keep it
                self._restart = DeepRestartPoint.of(state, self.streams)
            return self._step(state, t)

        return self.remote.recovering(lambda exc: self._recover(state, exc, t), attempt)

    def _recover(self, state: DeepState, exc: Exception, upto: int) -> None:
        """After a worker was lost: go back to the last iteration at which the driver held
        the whole state (theta and c as last gathered, with the network, r and the streams
        kept then), send the shards out again and redo the iterations before ``upto``; they
        are a function of that state, so the redone ones are the lost ones, bit for bit."""
        back = self._restart
        self.remote.restart(exc, back.step, upto, "iterations")
        back.restore(state, self.streams)
        for t in range(back.step, upto):
            self._remote_step(state, t)

    def synced(self, state: DeepState) -> DeepState:
        """``state`` with theta and c brought back from the cluster when they are behind."""
        if self.remote is None or not self.remote.stale:
            return state
        self.remote.recovering(lambda exc: self._recover(state, exc, state.step),
                               lambda: self.remote.gather(state.theta_train, state.c_train))
        return state

    def state_to_arrays(self, state: DeepState) -> tuple[dict, dict[str, np.ndarray]]:
        return super().state_to_arrays(self.synced(state))

    def mark_step(self, state: DeepState) -> None:
        """Nothing to copy: the restart point of the iterations on the cluster is the mark."""

    def roll_back(self, state: DeepState) -> int:
        """After the cluster was lost: the state as the driver last held it whole (the
        iteration of the last gather, or the one before the iteration under way); the shards
        are gone with the cluster."""
        if self.remote.stale:
            self._restart.restore(state, self.streams)
        self.remote.abandon()
        return state.step
