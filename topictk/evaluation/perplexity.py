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
