"""Scoring topics that do not come from a topictk run (another library's model, a hand-made
phi) on a store's held-out tokens, by the estimator ``topictk evaluate`` uses for a
collapsed Gibbs run's point estimate: Gibbs fold-in of every test document's observed part
with the topics fixed, then document completion of its held-out part (ALGORITHMS.md §11.2)."""
from __future__ import annotations

import numpy as np

from topictk.config.loader import Section
from topictk.config.schema import EVALUATION
from topictk.errors import UsageError
from topictk.evaluation.coherence import topic_quality
from topictk.evaluation.perplexity import perplexity_from_probabilities
from topictk.inference.base import TestSet
from topictk.inference.gibbs import fold_in_probabilities
from topictk.streams import Streams


def score_topic_word(store, topic_word: np.ndarray, alpha, *, sweeps: int = 50,
                     burn_in: int = 25, seed: int = 0, threads: int = 1,
                     coherence: bool = False) -> dict:
    """Held-out perplexity of ``topic_word`` (K, V) on ``store`` with the document prior
    ``alpha`` (a number, (K,), or (D_test, K) for a prior per test document); with
    ``coherence`` also UMass, NPMI and diversity on the training documents."""
    phi = np.asarray(topic_word, dtype=np.float64)
    if phi.ndim != 2 or phi.shape[1] != store.n_words:
        raise UsageError(f"topic_word must be (K, V) with V = {store.n_words} (the store's "
                         f"vocabulary); got shape {phi.shape}")
    if not np.all(np.isfinite(phi)) or np.any(phi < 0):
        raise UsageError("topic_word must be finite and non-negative")
    if burn_in < 0 or sweeps <= burn_in:
        raise UsageError(f"sweeps must be larger than burn_in (>= 0); got sweeps = {sweeps}, "
                         f"burn_in = {burn_in}")
    K = phi.shape[0]
    alpha = np.asarray(alpha, dtype=np.float64)
    if alpha.ndim == 0:
        alpha = np.full(K, float(alpha))
    if alpha.shape[-1] != K or alpha.ndim > 2:
        raise UsageError(f"alpha must be a number, (K,) or (D, K) with K = {K}; got shape "
                         f"{alpha.shape}")
    sums = phi.sum(axis=1, keepdims=True)
    if not np.allclose(sums, 1.0, rtol=0, atol=1e-12):    # rows already on the simplex are kept
        phi = phi / sums                                  # bit for bit
    test = TestSet.from_store(store)
    evaluation = Section({**{k: o.default for k, o in EVALUATION.items()},
                          "fold_in_sweeps": int(sweeps), "fold_in_burn_in": int(burn_in)})
    result: dict = {"heldout_tokens": test.n_heldout_tokens}
    if test.n_heldout_tokens:
        weights = np.ascontiguousarray(phi.T)
        probs = fold_in_probabilities(test, weights, weights, alpha, evaluation, Streams(seed),
                                      0, int(threads))
        ppl, floored = perplexity_from_probabilities(probs, test.heldout.counts)
        result.update(perplexity=ppl, floored_tokens=floored)
    else:
        result["perplexity"] = None
    if coherence:
        train = store.train()
        result.update(topic_quality(phi, train.indptr, train.indices))
    return result
