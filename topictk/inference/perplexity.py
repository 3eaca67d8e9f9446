"""Per-held-out-word perplexity by document completion (ALGORITHMS.md §11.2)."""
from __future__ import annotations

import numpy as np

FLOOR = 1e-300


def perplexity_from_probabilities(probabilities: np.ndarray,
                                  counts: np.ndarray) -> tuple[float, int]:
    """exp(-sum_j c_j ln max(p_j, 1e-300) / sum_j c_j) and the number of floored tokens."""
    counts = np.asarray(counts, dtype=np.float64)
    total = counts.sum()
    if total == 0:
        return float("nan"), 0
    p = np.asarray(probabilities, dtype=np.float64)
    floored = p < FLOOR
    log_p = np.log(np.where(floored, FLOOR, p))
    return float(np.exp(-np.dot(counts, log_p) / total)), int(counts[floored].sum())


def heldout_perplexity(driver, state, test, samples, pass_index: int) -> dict:
    """Document-completion perplexity of ``state`` (``samples`` None = point perplexity)."""
    probs = driver.heldout_probabilities(state, samples, test, pass_index)
    ppl, floored = perplexity_from_probabilities(probs, test.heldout.counts)
    return {"perplexity": ppl, "heldout_tokens": test.n_heldout_tokens,
            "floored_tokens": floored}


def train_heldout_perplexity(driver, state, store, samples) -> dict:
    """Protocol B (§11.1): perplexity of the training documents' held-out tokens scored with
    each document's own training state; empty when the store has none or the algorithm does
    not support it."""
    held = store.train_heldout()
    if held is None or held.n_tokens == 0:
        return {}
    probs = driver.train_heldout_probabilities(state, samples, held)
    if probs is None:
        return {}
    ppl, floored = perplexity_from_probabilities(probs, held.counts)
    return {"perplexity_train_heldout": ppl, "train_heldout_tokens": held.n_tokens,
            "train_heldout_floored_tokens": floored}
