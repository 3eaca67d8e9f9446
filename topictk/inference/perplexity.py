"""Per-held-out-word perplexity by document completion (docs/algorithms.md §11.2)."""
from __future__ import annotations

import numpy as np

from topictk.corpus.store import Documents
from topictk.inference import _heldout

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


def heldout_perplexity(driver, state, test, samples, pass_index: int,
                       slices: tuple[np.ndarray, list[str]] | None = None) -> dict:
    """Document-completion perplexity of ``state`` (``samples`` None = point perplexity);
    with ``slices`` (the time slice of every test document of ``test``, and the slices'
    names) also ``perplexity_by_slice``: the same of each slice's documents (None for a
    slice without held-out tokens)."""
    probs = driver.heldout_probabilities(state, samples, test, pass_index)
    counts = np.asarray(test.heldout.counts)
    ppl, floored = perplexity_from_probabilities(probs, counts)
    result = {"perplexity": ppl, "heldout_tokens": test.n_heldout_tokens,
              "floored_tokens": floored}
    if slices is not None:
        result["perplexity_by_slice"] = perplexity_by_slice(probs, test.heldout, *slices)
    return result


def perplexity_by_slice(probs: np.ndarray, heldout: Documents, doc_slices: np.ndarray,
                        names: list[str]) -> dict[str, float | None]:
    """The perplexity of each time slice's held-out entries (``probs``, one per entry of the
    CSR ``heldout``; ``doc_slices`` the slice of each of its documents), by the slices'
    ``names``; None for a slice without held-out tokens."""
    counts = np.asarray(heldout.counts)
    of_entry = np.repeat(np.asarray(doc_slices), np.diff(np.asarray(heldout.indptr)))
    by_slice = {}
    for s, name in enumerate(names):
        mine = of_entry == s
        value = perplexity_from_probabilities(probs[mine], counts[mine])[0]
        by_slice[name] = None if not np.isfinite(value) else value
    return by_slice


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


def csr_arrays(docs: Documents) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The CSR arrays of ``docs`` as the kernels want them (no copy when already right)."""
    return (np.ascontiguousarray(docs.indptr, dtype=np.int64),
            np.ascontiguousarray(docs.indices, dtype=np.int32),
            np.ascontiguousarray(docs.counts, dtype=np.int32))


def mixture_probabilities(docs: Documents, theta: np.ndarray, phi: np.ndarray,
                          threads: int) -> np.ndarray:
    """sum_k theta_dk phi_wk for every entry of ``docs`` (``phi`` word-major (V, K))."""
    indptr, indices, _ = csr_arrays(docs)
    out = np.zeros(indices.size)
    _heldout.mixture_probabilities(indptr, indices,
                                   np.ascontiguousarray(theta, dtype=np.float64),
                                   np.ascontiguousarray(phi, dtype=np.float64), out, threads)
    return out
