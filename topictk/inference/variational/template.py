"""What the variational drivers (vb, cvb, cvb0, ovb, hsvg, pem) share: the Dirichlet alpha
updates (docs/algorithms.md §3.4), the expected log topics and the document E-step (§3.2,
kernel :mod:`topictk.inference.variational._vb`), the cold-started fold-in of test documents
(§11.2) and the options of the E-step.
"""
from __future__ import annotations

import logging
import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.special import digamma, gammaln, polygamma

from topictk.config.schema import Option
from topictk.corpus.batches import gather_rows
from topictk.corpus.store import Documents
from topictk.inference.variational import _vb
from topictk.inference.base import (
    FIXED_POINT,
    Driver,
    EvaluationSet,
    FoldInPlan,
    MemorySizes,
    StepInfo,
    chunk_bounds_by_tokens,
    row_range,
    fixed_point_fold_in,
    fixed_point_settings,
)
from topictk.inference.cluster import (
    ClusterTask,
    StoreRef,
    concatenated,
    map_merge,
    runs,
    tree_reduce,
    worker_threads,
)
from topictk.inference.perplexity import csr_arrays, mixture_probabilities
from topictk.limits import at_peak

log = logging.getLogger("topictk")


ALPHA_MIN, ALPHA_MAX = 1e-10, 1e5


PHI_FLOOR = 1e-100


# ---------------------------------------------------------------------------------------------
# Dirichlet alpha (§3.4; its start: topictk.inference.hyper.resolve_alpha)
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


def doc_lengths(indptr: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """N_d of every row of a CSR block (int64)."""
    cum = np.zeros(counts.size + 1, dtype=np.int64)
    np.cumsum(counts, out=cum[1:])
    return cum[indptr[1:]] - cum[indptr[:-1]]


START = {"cold": 0, "warm": 1, "best": 2}


def e_step(indptr, indices, counts, B, shift, alpha, gamma, *, start: str, tol: float,
           max_iter: int, threads: int, sstats=None, doc_bound=None, iterations=None,
           pair_z=None, doc_a=None) -> None:
    """Call the E-step kernel with checked dtypes (see
    :func:`topictk.inference.variational._vb.e_step`); ``start`` is cold, warm or best."""
    _vb.e_step(indptr, indices, counts, B, shift, np.ascontiguousarray(alpha, dtype=np.float64),
               gamma, START[start], float(tol), int(max_iter), sstats, doc_bound, iterations,
               int(threads), pair_z=pair_z, doc_a=doc_a)


def estep_fold_in(indptr, indices, counts, B: np.ndarray, shift: np.ndarray,
                  alpha: np.ndarray, *, tol: float, max_iter: int, threads: int) -> np.ndarray:
    """theta-hat = gamma / gamma. of the documents (CSR) by a cold E-step with the topics'
    weights ``B`` and ``shift`` (:func:`expected_log_topics`) frozen."""
    gamma = np.empty((indptr.size - 1, B.shape[1]))
    e_step(indptr, indices, counts, B, shift, alpha, gamma, start="cold", tol=tol,
           max_iter=max_iter, threads=threads)
    return gamma / gamma.sum(axis=1, keepdims=True)


def estep_fold_in_call(lam: np.ndarray, alpha: np.ndarray, beta: float, smoothed: bool,
                       tol: float, max_iter: int, threads: int) -> FoldInCall:
    """The cold E-step fold-in with ``lam`` frozen (:func:`estep_fold_in`), its tables made
    once."""
    B, shift, _ = expected_log_topics(lam, lam.sum(axis=0), beta, smoothed, threads)
    return FoldInCall(estep_fold_in, (B, shift, np.ascontiguousarray(alpha, dtype=np.float64)),
                      {"tol": float(tol), "max_iter": int(max_iter)})


@dataclass(frozen=True)
class FoldInCall:
    """A variational fold-in with the topics frozen, as each block of documents reads it:
    ``function(indptr, indices, counts, *arrays, threads=, **settings)`` (module level, so
    that a cluster's workers run it) returns theta-hat of the documents; ``arrays`` are the
    topics' tables and the prior (sent once to each worker), ``settings`` the stopping rule.
    Every document is folded in on its own, deterministically, so the documents may be cut
    into blocks anywhere: the numbers do not change."""

    function: Callable
    arrays: tuple
    settings: dict

    def __call__(self, csr: tuple, threads: int) -> np.ndarray:
        return self.function(*csr, *self.arrays, threads=threads, **self.settings)


def fold_in_piece(call: tuple, *arrays_and_block) -> np.ndarray:
    """The cluster piece: theta-hat of a block of documents (its CSR arrays) by the fold-in
    ``call`` = (function, settings) with ``arrays`` (runs on a worker)."""
    function, settings = call
    *arrays, block = arrays_and_block
    return function(*block, *arrays, threads=worker_threads(), **settings)


def cluster_fold_in_theta(cluster, call: FoldInCall, csr: tuple) -> np.ndarray:
    """theta-hat of the documents ``csr`` by ``call`` on ``cluster``: the documents cut into
    contiguous blocks about equal in entries, FOLD_IN_BLOCKS_PER_WORKER per worker, the
    blocks' rows put together in order; lost work is done again."""
    indptr, indices, counts = csr
    n_docs = indptr.size - 1
    if n_docs == 0:
        return call(csr, 1)

    def cut(n_workers: int) -> list:
        cuts = chunk_bounds_by_tokens(np.ascontiguousarray(indptr, dtype=np.int64),
                                      min(n_docs, FOLD_IN_BLOCKS_PER_WORKER * n_workers))
        return [row_range(indptr, int(a), int(b), indices, counts)
                for a, b in zip(cuts[:-1], cuts[1:]) if b > a]

    return map_merge(cluster, ClusterTask(
        fold_in_piece, cut, context=(call.function, call.settings),
        shared=tuple(np.ascontiguousarray(a) for a in call.arrays), merge=concatenated,
        doing="during the fold-in", again="folding in again"))


#: blocks of documents per worker in a fold-in on a cluster (more than one: a slow worker
#: holds up less)
FOLD_IN_BLOCKS_PER_WORKER = 2


def estep_blocks(n_docs: int, chunks: int) -> list[tuple[int, int]]:
    """The document ranges [d0, d1) of a mini-batch's ``chunks`` E-step blocks (equal in
    documents, none empty)."""
    cuts = np.linspace(0, n_docs, min(chunks, max(n_docs, 1)) + 1).round().astype(np.int64)
    return [(int(a), int(b)) for a, b in zip(cuts[:-1], cuts[1:])]


def block_estep(csr, B: np.ndarray, shift: np.ndarray, alpha: np.ndarray,
                block: tuple[int, int], tol: float, max_iter: int, with_sstats: bool,
                threads: int, start: str = "cold", gamma: np.ndarray | None = None):
    """The E-step of the rows [d0, d1) of CSR arrays whose word ids index the rows of ``B``:
    (sstats of these rows (B's rows, K) or None, gamma, bound, iterations). ``gamma``: the
    rows' variational parameters, updated in place (warm and best starts read them); a cold
    start may leave it None."""
    indptr, indices, counts = csr
    d0, d1 = block
    e0, e1 = int(indptr[d0]), int(indptr[d1])
    K = B.shape[1]
    if gamma is None:
        gamma = np.empty((d1 - d0, K))
    sstats = np.zeros((B.shape[0], K)) if with_sstats else None
    bound = np.zeros(d1 - d0)
    iterations = np.zeros(d1 - d0, dtype=np.int32)
    e_step(np.ascontiguousarray(indptr[d0:d1 + 1] - e0), indices[e0:e1], counts[e0:e1], B,
           shift, alpha, gamma, start=start, tol=tol, max_iter=max_iter, threads=threads,
           sstats=sstats, doc_bound=bound, iterations=iterations)
    return sstats, gamma, bound, iterations


def add_blocks(parts: list) -> tuple:
    """The blocks' E-step results put together: statistics added in block order, the
    per-document arrays (gamma, bound, iterations) concatenated."""
    sstats = parts[0][0]
    if sstats is not None:
        for part in parts[1:]:
            sstats += part[0]
    return (sstats, *(np.concatenate([part[i] for part in parts]) for i in (1, 2, 3)))


def add_two_blocks(a: tuple, b: tuple) -> tuple:
    """The E-step results of two runs of consecutive blocks together: statistics added, the
    per-document arrays concatenated (``a``'s first)."""
    sstats = None if a[0] is None else a[0] + b[0]
    return (sstats, *(np.concatenate([a[i], b[i]]) for i in (1, 2, 3)))


def add_blocks_pairwise(parts: list) -> tuple:
    """The blocks' E-step results put together with the statistics added pairwise in block
    order (:func:`topictk.inference.cluster.tree_reduce`): the sum a cluster's workers form
    among themselves, so that the driver receives the total only."""
    return tree_reduce(parts, add_two_blocks)


def add_piece_blocks(a: list, b: list) -> list:
    """The cluster merge of two pieces of one block each (:func:`estep_piece`'s lists)."""
    return [add_two_blocks(a[0], b[0])]


@dataclass(frozen=True)
class EStepJob:
    """An E-step on the cluster as each of its pieces reads it: the topics' shift, the
    prior, the stopping rule, the start, where the documents are, and which: a mini-batch's
    (``doc_ids``, whose words the rows of E[log beta] follow in sorted order) or, with None,
    the training corpus."""

    shift: np.ndarray
    alpha: np.ndarray
    tol: float
    max_iter: int
    store: StoreRef
    start: str = "cold"
    doc_ids: np.ndarray | None = None


def estep_piece(job: EStepJob, B: np.ndarray, run: list) -> list:
    """The cluster piece: the E-steps of a run of blocks (runs on a worker), each block
    ((d0, d1), its rows of gamma or None for a cold start) on its own, the documents read
    from this worker's store as the driver reads them: one (sstats, gamma, bound,
    iterations) per block."""
    train = job.store.open().train()
    if job.doc_ids is None:
        csr = (train.indptr, train.indices, train.counts)
    else:
        indptr, indices, counts = gather_rows(train, job.doc_ids)
        _, local = np.unique(indices, return_inverse=True)
        csr = (indptr, np.ascontiguousarray(local, dtype=np.int32), counts)
    return [block_estep(csr, B, job.shift, job.alpha, block, job.tol, job.max_iter, True,
                        worker_threads(), start=job.start,
                        gamma=None if gamma is None else np.array(gamma, dtype=np.float64))
            for block, gamma in run]


def cluster_estep(cluster, job: EStepJob, B: np.ndarray, blocks: list[tuple[int, int]],
                  gamma: np.ndarray | None = None) -> list:
    """The E-step ``blocks`` on the workers. A corpus's blocks (``gamma``'s rows travel with
    them, read, not written) are spread in contiguous runs and every block's result comes
    back in block order, for :func:`add_blocks` to add as on one machine. A mini-batch's
    blocks (``job.doc_ids``) are one piece each, their results added among the workers in
    the tree of :func:`add_blocks_pairwise`, and the driver receives the one total (a list of
    it). Lost work is simply done again."""
    shared = (np.ascontiguousarray(B, dtype=np.float64),)
    if job.doc_ids is not None:
        return map_merge(cluster, ClusterTask(
            estep_piece, lambda n: [[(block, None)] for block in blocks], context=job,
            shared=shared, merge=add_piece_blocks, exact=True, on_workers=True,
            doing="during an online-VB E-step", again="computing the mini-batch's E-step again"))

    def cut(n_workers: int) -> list:
        return [[(block, None if gamma is None else gamma[block[0]:block[1]])
                 for block in blocks[a:b]] for a, b in runs(len(blocks), n_workers)]

    return map_merge(cluster, ClusterTask(
        estep_piece, cut, context=job, shared=shared, merge=operator.add,
        doing="during an E-step", again="computing the E-step again"))


#: doubles the E-step kernel stages the statistics of a wave of documents in (WAVE_DOUBLES of
#: topictk/_cy/estep.pxd): VB's terms, K per (document, word) pair, PEM's K per document
ESTEP_WAVE = 1 << 21


def estep_wave(per_wave: int) -> tuple[str, tuple[int, ...], int]:
    """The E-step's staging buffer (when it adds statistics) for a block whose stages total
    ``per_wave`` doubles."""
    return ("E-step's staged statistics", (min(ESTEP_WAVE, per_wave),), 8)


ESTEP_OPTIONS = {
    "estep_tol": Option("float", 1e-3, low=0, low_open=True,
                        help="E-step stops when the mean |change of gamma_dk| is below this"),
    "estep_max_iter": Option("int", 100, low=1, help="most gamma updates per document E-step"),
}


def stopping_tolerance(objective: str) -> Option:
    """The ``tol`` option of a batch algorithm that stops when ``objective`` settles."""
    return Option("float", 1e-5, low=0,
                  help=f"stop when the relative change of {objective} falls below this "
                       f"(0 = never); later steps do nothing")


# ---------------------------------------------------------------------------------------------
class VariationalDriver(Driver):
    """Template of the drivers that keep a point estimate of the topics (vb, cvb, cvb0, ovb,
    pem): a test document is scored by folding it in (:meth:`fold_in`, the algorithm's own
    local update with the topics frozen) and mixing, p-hat(w | d) = sum_k theta-hat_dk phi_wk
    (§11.2); Protocol B mixes the training documents' own theta-hat."""

    # the estimator of theta evaluate scores with unless evaluation.fold_in is fixed-point
    own_estimator = "variational E-step"

    MEMORY_FIX = ("leave inference.chunks out (one V x K block of E-step statistics), or "
                  "train with inference.algorithm: ovb (a mini-batch's statistics, no D x K "
                  "arrays)")

    @classmethod
    def memory_arrays(cls, data: dict, counts: dict) -> list[tuple[str, tuple[int, ...], int]]:
        """The family's template: the state's arrays (:meth:`memory_held`) and the largest of
        what the parts of a step make and free in turn (:meth:`memory_phases`) and of an
        in-training evaluation (:meth:`memory_evaluation`, Protocol B's
        :meth:`memory_train_heldout`), float64 as NumPy and the kernels allocate them.
        Checkpoints are written from the state's own arrays."""
        sizes = MemorySizes.of(data, counts)
        phases = list(cls.memory_phases(data, sizes))
        if sizes.curve_docs:
            phases.append(cls.memory_evaluation(data, sizes))
        if sizes.train_heldout:
            phases.append(cls.memory_train_heldout(data, sizes))
        return at_peak(cls.memory_held(data, sizes), *phases)

    @classmethod
    def memory_held(cls, data: dict, s: MemorySizes) -> list:
        """The arrays of the state, held throughout."""
        raise NotImplementedError

    @classmethod
    def memory_phases(cls, data: dict, s: MemorySizes) -> list[list]:
        """The arrays of each part of a step (E-step, M-step, sweep, update), made and freed
        in turn."""
        raise NotImplementedError

    @classmethod
    def memory_evaluation(cls, data: dict, s: MemorySizes) -> list:
        """The in-training curve: a cold E-step of its documents with lambda frozen, which
        holds E[log phi] (V, K) and their gamma and theta-hat; the mixture then reads phi-hat
        (V, K) once E[log phi] is freed."""
        return [("E[log phi] of the fold-in", (s.V, s.K), 8),
                ("gamma and theta-hat of the curve", (2, s.curve_docs, s.K), 8)]

    @classmethod
    def memory_train_heldout(cls, data: dict, s: MemorySizes) -> list:
        """Protocol B: phi-hat mixed with the training documents' theta-hat."""
        return [("phi-hat", (s.V, s.K), 8),
                ("theta-hat of the training documents", (s.D, s.K), 8)]

    def fold_in(self, state: Any, documents: Documents, plan: FoldInPlan | None = None, *,
                prior: np.ndarray | None = None, sample: dict | None = None) -> np.ndarray:
        """theta-hat (D, K) of ``documents`` by the algorithm's own local update with the
        topics frozen (:meth:`fold_in_call`), on the driver's cluster when it has one:
        deterministic, so ``plan`` (of the Gibbs fold-ins) does not apply."""
        call = self.fold_in_call(state, prior)
        csr = csr_arrays(documents)
        if self.cluster is None:
            return call(csr, self.threads)
        return cluster_fold_in_theta(self.cluster, call, csr)

    def fold_in_call(self, state: Any, prior: np.ndarray | None) -> FoldInCall:
        """The algorithm's fold-in of documents with the topics of ``state`` frozen and the
        Dirichlet ``prior`` (:meth:`prior_of`)."""
        raise NotImplementedError

    @staticmethod
    def prior_of(state: Any, prior: np.ndarray | None) -> np.ndarray:
        """The (K,) Dirichlet prior of a fold-in: ``prior`` (one row) or the state's alpha."""
        if prior is None:
            return state.alpha
        prior = np.atleast_2d(np.asarray(prior, dtype=np.float64))
        if prior.shape[0] != 1:
            raise ValueError("a variational fold-in takes one prior for every document")
        return prior[0]

    def topic_word(self, state: Any) -> np.ndarray:
        """(K, V) topics: the state's own point estimate."""
        return state.topic_word()

    def point_phi(self, state: Any) -> np.ndarray:
        """The word-major (V, K) topics the mixture scores with."""
        return state.phi()

    def training_theta(self, state: Any) -> np.ndarray:
        """theta-hat (D, K) of the training documents from their own state."""
        return state.theta()

    def heldout_probabilities(self, state: Any, samples, test: EvaluationSet,
                              pass_index: int) -> np.ndarray:
        fixed = fixed_point_settings(self.config)
        if fixed is not None:
            theta = fixed_point_fold_in(self.point_phi(state), state.alpha, test.observed, None,
                                        tol=fixed[0], max_iterations=fixed[1],
                                        threads=self.threads)
        else:
            theta = self.fold_in(state, test.observed)
        return mixture_probabilities(test.heldout, theta, self.point_phi(state), self.threads)

    @classmethod
    def heldout_estimator(cls, config) -> str:
        """``fixed-point`` when asked, else the algorithm's own local update (§11.2)."""
        if fixed_point_settings(config) is not None:
            return FIXED_POINT
        return cls.own_estimator

    def train_heldout_probabilities(self, state: Any, samples,
                                    heldout: Documents) -> np.ndarray:
        return mixture_probabilities(heldout, self.training_theta(state), self.point_phi(state),
                                     self.threads)


class BatchEMDriver(VariationalDriver):
    """Template of batch variational EM (vb, pem): one step is an E-step over every document
    and its bound, the stopping rule (relative change of the bound below ``inference.tol``,
    checked before the M-step, §3.5), then the M-step; once converged, steps do nothing."""

    def __init__(self, config, store, threads: int = 1, *, streams=None):
        super().__init__(config, store, threads, streams=streams)
        self.indptr, self.indices, self.counts = self.csr_view
        self.doc_lengths = doc_lengths(self.indptr, self.counts)
        self.learn_alpha = config.model.alpha == "auto"

    def expectation(self, state: Any) -> tuple[Any, float, dict]:
        """The E-step: (sufficient statistics, the bound, what to log)."""
        raise NotImplementedError

    def maximization(self, state: Any, sstats: Any) -> None:
        raise NotImplementedError

    def work(self) -> tuple[int, int]:
        """(tokens, documents) an E-step visits."""
        return self.n_tokens, self.n_docs

    def objective(self, state: Any) -> float | None:
        """The bound of the last E-step per training token (VB: the exact ELBO, §3.3; particle
        EM: L_T, §11.4); None before the first."""
        if not np.isfinite(state.bound):
            return None
        return state.bound / max(self.n_tokens, 1)

    def step(self, state: Any, t: int) -> StepInfo:
        if state.converged:
            state.step = t + 1
            return StepInfo(tokens=0, documents=0, extra={"converged": True})
        sstats, bound, extra = self.expectation(state)
        state.bound_prev, state.bound = state.bound, bound
        tol = float(self.config.inference.tol)
        if (tol > 0 and np.isfinite(state.bound_prev)
                and abs(bound - state.bound_prev) <= tol * abs(state.bound_prev)):
            state.converged = True       # stop before the M-step (§3.5)
        else:
            self.maximization(state, sstats)
        state.step = t + 1
        tokens, documents = self.work()
        return StepInfo(tokens=tokens, documents=documents,
                        extra={**extra, "converged": state.converged})
