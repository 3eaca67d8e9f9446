"""What the mini-batch drivers (ovb, hsvg, sgrld, dmr-sgrld and the deep-LDA SG-MCMC drivers)
share: their common options and checks, the local Gibbs statistics of a mini-batch (kernel
:mod:`topictk.inference._minibatch`), the step-size schedule of stochastic variational inference
(docs/algorithms.md §5) and the steps at which SG-MCMC samples are collected.
"""
from __future__ import annotations

import logging

import numpy as np

from topictk import streams as keys
from topictk.config.schema import Option
from topictk.corpus.batches import EpochSchedule
from topictk.errors import ConfigError
from topictk.inference import _minibatch
from topictk.inference.base import chunk_bounds_by_docs
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


def local_statistics(batch, weights: np.ndarray, alpha: np.ndarray, inf, streams: Streams,
                     t: int, threads: int, cluster=None,
                     store=None) -> tuple[np.ndarray, np.ndarray, int]:
    """E[n_kw] (V_B, K) and E[n_dk] (B, K) of one mini-batch from its local Gibbs chains, one
    stream per chunk of ``chunk_docs`` documents; on ``cluster`` the chunks are cut into one
    piece per worker, which reads the batch from ``store`` (the same numbers)."""
    if cluster is not None:
        from topictk.inference.cluster import cluster_local_statistics
        return cluster_local_statistics(cluster, store, batch.doc_ids, weights, alpha, inf,
                                        streams.seed, t)
    K = weights.shape[1]
    bounds = chunk_bounds_by_docs(batch.doc_ids.size, inf["chunk_docs"])
    chunk_streams = [streams.derived(keys.local_key(t, c)) for c in range(bounds.size - 1)]
    word_topic = np.zeros((batch.vocab.size, K), dtype=np.int64)
    doc_topic = np.zeros((batch.doc_ids.size, K), dtype=np.int64)
    fallbacks = _minibatch.local_gibbs(
        batch.doc_ptr, batch.words, np.ascontiguousarray(weights),
        np.ascontiguousarray(np.atleast_2d(alpha)), int(inf["sweeps"]),
        int(inf["local_burn_in"]), bounds, chunk_streams, word_topic, doc_topic, threads)
    kept = inf["sweeps"] - inf["local_burn_in"]
    return word_topic / kept, doc_topic / kept, int(fallbacks)


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


def epoch_schedule(n_docs: int, batch_size: int) -> EpochSchedule:
    """The mini-batches of the SG-MCMC drivers: keyed epoch permutations of the training
    documents (:class:`topictk.corpus.batches.EpochSchedule`); a batch larger than the corpus
    is the whole corpus, with a warning."""
    if batch_size > n_docs:
        log.warning("inference.batch_size = %d is larger than the corpus (%d documents); "
                    "using the whole corpus in every update", batch_size, n_docs)
    return EpochSchedule(n_docs, batch_size)
