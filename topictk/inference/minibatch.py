"""What the mini-batch drivers (ovb, hsvg, sgrld, dmr-sgrld and the deep-LDA SG-MCMC drivers)
share: their common options and checks, the local Gibbs statistics of a mini-batch (kernel
:mod:`topictk.inference._minibatch`), the step-size schedule of stochastic variational inference
(docs/algorithms.md §5) and the steps at which SG-MCMC samples are collected.
"""
from __future__ import annotations

import logging
import math
from dataclasses import dataclass

import numpy as np

from topictk import streams as keys
from topictk.config.schema import Option
from topictk.corpus.batches import FEISTEL_ROUNDS, EpochSchedule, gather_batch
from topictk.errors import ConfigError
from topictk.inference import _minibatch
from topictk.inference.base import chunk_bounds_by_docs
from topictk.inference.cluster import ClusterTask, StoreRef, map_merge, runs, worker_threads
from topictk.streams import Streams

log = logging.getLogger("topictk")

FLOOR = 1e-300


def minibatch_options(batch_size: int = 64) -> dict:
    """Options every mini-batch sampler shares."""
    return {
        "batch_size": Option("int", batch_size, low=1,
                             help="documents per update (clamped to the corpus size)"),
        "sweeps": Option("int", 10, low=1, help="local Gibbs sweeps per document"),
        "local_burn_in": Option("int", None, low=0, nullable=True,
                                help="local sweeps discarded (default: half)"),
        "chunk_docs": Option("int", 16, low=1,
                             help="documents per random-stream chunk of a batch"),
    }


def check_minibatch_config(inf: dict, where: str) -> None:
    if inf["local_burn_in"] is None:
        inf["local_burn_in"] = inf["sweeps"] // 2
    if inf["local_burn_in"] >= inf["sweeps"]:
        raise ConfigError(f"inference.local_burn_in must be < inference.sweeps "
                          f"({inf['sweeps']}); got {inf['local_burn_in']} ({where})")


@dataclass(frozen=True)
class LocalJob:
    """One mini-batch's local step as each of its pieces reads it: the batch's documents (by
    id, from the store on a worker), the documents' prior, the chains' sweeps, the chunks'
    size, and the seed and update that key the chunks' streams."""

    doc_ids: np.ndarray
    alpha: np.ndarray
    sweeps: int
    burn_in: int
    chunk_docs: int
    seed: int
    t: int
    store: StoreRef | None = None
    gradient: bool = False      # the documents' sums of DMR's g_dk instead of n_dk (§9.3)

    def chunk_sums(self, batch, weights: np.ndarray, chunks: tuple[int, int], threads: int):
        """The kept-sweep sums of n_kw (V_B, K) and of n_dk (their documents, K; with
        ``gradient`` the float64 sums of g_dk instead) of the local chains of the batch's
        chunks [c0, c1), each chunk with its own stream, and the rounding fallbacks."""
        bounds = chunk_bounds_by_docs(self.doc_ids.size, self.chunk_docs)
        c0, c1 = chunks
        d0, d1 = int(bounds[c0]), int(bounds[c1])
        t0, t1 = int(batch.doc_ptr[d0]), int(batch.doc_ptr[d1])
        alpha = np.atleast_2d(self.alpha)
        streams = Streams(self.seed)
        word_topic = np.zeros((batch.vocab.size, weights.shape[1]), dtype=np.int64)
        doc_topic = np.zeros((d1 - d0, weights.shape[1]), dtype=np.int64)
        doc_grad = (np.zeros((d1 - d0, weights.shape[1]), dtype=np.float64) if self.gradient
                    else None)
        fallbacks = _minibatch.local_gibbs(
            np.ascontiguousarray(batch.doc_ptr[d0:d1 + 1] - t0), batch.words[t0:t1],
            np.ascontiguousarray(weights),
            np.ascontiguousarray(alpha if alpha.shape[0] == 1 else alpha[d0:d1]),
            int(self.sweeps), int(self.burn_in), np.ascontiguousarray(bounds[c0:c1 + 1] - d0),
            [streams.derived(keys.local_key(self.t, c)) for c in range(c0, c1)], word_topic,
            doc_topic, threads, doc_grad)
        return word_topic, doc_topic if doc_grad is None else doc_grad, int(fallbacks)


def local_statistics_piece(job: LocalJob, weights: np.ndarray, chunks: tuple[int, int]):
    """The cluster piece: the local chains of the chunks [c0, c1) of one mini-batch (runs on a
    worker), the batch read from this worker's memory-mapped store as the driver reads it, so
    its local word ids are the driver's."""
    doc_ptr, words, _ = job.store.training_documents()
    return job.chunk_sums(gather_batch(doc_ptr, words, job.doc_ids), weights, chunks,
                          worker_threads())


def add_local_statistics(a: tuple, b: tuple) -> tuple:
    """The cluster merge: the sums of two runs of consecutive chunks together (integers, the
    same numbers in any grouping; the documents' rows, counts or g_dk, in chunk order)."""
    return a[0] + b[0], np.concatenate([a[1], b[1]]), a[2] + b[2]


def local_statistics(driver, batch, weights: np.ndarray, alpha: np.ndarray,
                     t: int, gradient: bool = False) -> tuple[np.ndarray, np.ndarray, int]:
    """E[n_kw] (V_B, K) and E[n_dk] (B, K) of one mini-batch from its local Gibbs chains, one
    stream per chunk of ``inference.chunk_docs`` documents (with ``gradient``, DMR's g-bar
    (B, K) in place of E[n_dk]); on the driver's cluster the chunks are cut into one piece per
    worker and their sums added among the workers (integers, and each document's row of its
    own chunk: the same numbers)."""
    inf = driver.config.inference
    job = LocalJob(np.ascontiguousarray(batch.doc_ids, dtype=np.int64), alpha,
                   inf["sweeps"], inf["local_burn_in"], inf["chunk_docs"], driver.streams.seed,
                   t, StoreRef.of(driver.store) if driver.cluster is not None else None,
                   gradient)
    n_chunks = chunk_bounds_by_docs(job.doc_ids.size, job.chunk_docs).size - 1
    if driver.cluster is not None:
        word_topic, doc_topic, fallbacks = map_merge(driver.cluster, ClusterTask(
            local_statistics_piece, cut=lambda n: runs(n_chunks, n), context=job,
            shared=(np.ascontiguousarray(weights, dtype=np.float64),),
            merge=add_local_statistics, on_workers=True, doing="during a mini-batch update",
            again="computing the mini-batch's local statistics again"))
    else:
        word_topic, doc_topic, fallbacks = job.chunk_sums(batch, weights, (0, n_chunks),
                                                          driver.threads)
    kept = inf["sweeps"] - inf["local_burn_in"]
    return word_topic / kept, doc_topic / kept, fallbacks


def sample_steps_for(iterations: int, burn_in: int, n_samples: int | None,
                     thin: int | None = None) -> set[int]:
    """Steps (1-based) at which samples are collected: every ``thin``-th update after burn-in,
    or else ``n_samples`` evenly spaced over the updates after burn-in."""
    if thin is not None:
        return set(range(burn_in + thin, iterations + 1, thin))
    span = iterations - burn_in
    n = max(1, min(n_samples, span))
    return {burn_in + int(round((i + 1) * span / n)) for i in range(n)}


def step_size(t: int, tau0: float, kappa: float) -> float:
    """rho_t = min(1, (tau0 + t)^-kappa) (§12.1; the min guards tau0 + t < 1)."""
    base = tau0 + t
    if base <= 1.0:
        return 1.0
    return min(1.0, base ** (-kappa))


def grown_epoch_state(schedule: EpochSchedule, step: int) -> np.ndarray | None:
    """The epoch state (:meth:`EpochSchedule.batch_ids`) of a run grown by added documents
    (``train --continue --add``), whose next update is ``step`` on the union's ``schedule``:
    the epoch before that update's, with no keys, so that the update starts a new epoch, a
    fresh permutation of the whole union (its keys from the run's main stream); None (also a
    new epoch) when that is the first epoch or every batch is the whole corpus."""
    epoch = int(step) // schedule.per_epoch
    if schedule.whole_corpus or epoch == 0:
        return None
    state = np.zeros(FEISTEL_ROUNDS + 1, dtype=np.uint64)
    state[0] = epoch - 1
    return state


def epoch_schedule(n_docs: int, batch_size: int) -> EpochSchedule:
    """The mini-batches of the SG-MCMC drivers: keyed epoch permutations of the training
    documents (:class:`topictk.corpus.batches.EpochSchedule`); a batch larger than the corpus
    is the whole corpus, with a warning."""
    if batch_size > n_docs:
        log.warning("inference.batch_size = %d is larger than the corpus (%d documents); "
                    "using the whole corpus in every update", batch_size, n_docs)
    return EpochSchedule(n_docs, batch_size)


# ------------------------------------------------------------------ memory (the family's)
def batch_sizes(data: dict, s) -> tuple[int, int, int, int]:
    """(documents, tokens, (document, word) pairs, distinct words) of one mini-batch of
    ``inference.batch_size`` documents (at most D) of the corpus's mean length, for the
    memory estimate (``s``: :class:`topictk.inference.base.MemorySizes`); the distinct words
    are those that many pairs' words drawn evenly from the V (V (1 - (1 - 1/V)^pairs))."""
    docs = min(int(data["inference"]["batch_size"]), s.D)
    share = docs / max(s.D, 1)
    tokens, pairs = -(-s.N * docs // max(s.D, 1)), int(s.M * share + 0.5)
    words = s.V * -math.expm1(pairs * math.log1p(-1 / s.V)) if s.V > 1 else s.V
    return docs, tokens, pairs, min(s.V, pairs, math.ceil(words))


def local_step_arrays(data: dict, s, weights: str = "weights of the batch's words"
                      ) -> list[tuple[str, tuple[int, ...], int]]:
    """The arrays of one mini-batch's local Gibbs chains (:func:`local_statistics`): the
    weights of the batch's words (V_B, K), their kept-sweep counts n_kw (V_B, K) int64 with a
    private copy for every thread but the first (threads up to the batch's chunks), the
    documents' n_dk (B, K) int64, and both divided by the kept sweeps (float64)."""
    docs, _, _, words = batch_sizes(data, s)
    chunks = -(-docs // int(data["inference"]["chunk_docs"]))
    copies = min(s.threads, max(chunks, 1))
    return [(weights, (words, s.K), 8),
            ("batch words' topic counts", (copies, words, s.K), 8),
            ("batch words' expected counts", (words, s.K), 8),
            ("batch documents' topic counts", (2, docs, s.K), 8)]
