"""What the sampled drivers (gibbs, dmr-sem, sgrld, dmr-sgrld) share: the symmetric starting
alpha, the sample schedule of sweep-based samplers, and the Gibbs fold-in of test documents
with the topics frozen (ALGORITHMS.md §11.2, kernel
:func:`topictk.inference._gibbs.fold_in_heldout`).
"""
from __future__ import annotations

import numpy as np

from topictk import streams as keys
from topictk.errors import ConfigError
from topictk.inference import _gibbs
from topictk.inference.base import TestSet, chunk_bounds_by_docs
from topictk.streams import Streams

DEFAULT_ALPHA = 0.1


def resolve_alpha(value, n_topics: int) -> np.ndarray:
    """model.alpha -> (K,) float64; ``auto`` starts from 0.1 and is learnt."""
    start = DEFAULT_ALPHA if value == "auto" else float(value)
    return np.full(n_topics, start, dtype=np.float64)


def fold_in_probabilities(test: TestSet, weights: np.ndarray, phi: np.ndarray,
                          alpha: np.ndarray, evaluation, streams: Streams, pass_index: int,
                          threads: int) -> np.ndarray:
    """Gibbs fold-in of every test document (§11.2) -> p-hat of every held-out entry.

    ``weights`` (V, K) drive the sampler, ``phi`` (V, K) gives the predictive probabilities;
    both are phi-hat for collapsed Gibbs. Streams: (4, pass_index, c) for chunk c of
    ``evaluation.chunk_docs`` documents.
    """
    obs, held = test.observed, test.heldout
    bounds = chunk_bounds_by_docs(obs.n_docs, evaluation.chunk_docs)
    chunk_streams = [streams.derived(keys.eval_key(pass_index, c)) for c in range(bounds.size - 1)]
    out = np.zeros(held.indices.size, dtype=np.float64)
    _gibbs.fold_in_heldout(
        np.ascontiguousarray(obs.doc_ptr), np.ascontiguousarray(obs.words),
        np.ascontiguousarray(held.indptr), np.ascontiguousarray(held.indices),
        np.ascontiguousarray(weights, dtype=np.float64),
        np.ascontiguousarray(phi, dtype=np.float64),
        np.ascontiguousarray(np.atleast_2d(alpha), dtype=np.float64),
        int(evaluation.fold_in_sweeps), int(evaluation.fold_in_burn_in), bounds, chunk_streams,
        out, threads)
    return out


def resolve_sample_schedule(inf: dict, where: str) -> None:
    """Defaults and check of a sweep-based sampler's samples: burn-in half the iterations,
    then 10 samples (Gibbs, dmr-sem)."""
    iterations = inf["iterations"]
    if inf["burn_in"] is None:
        inf["burn_in"] = iterations // 2
    if inf["burn_in"] >= iterations:
        raise ConfigError(f"inference.burn_in must be < inference.iterations ({iterations}); "
                          f"got {inf['burn_in']} ({where})")
    if inf["thin"] is None:
        inf["thin"] = max(1, (iterations - inf["burn_in"]) // 10)
