"""Held-out splits (docs/algorithms.md §11.1): which documents are test documents, and which of
their tokens are observed (used to infer the document's topics) or held out (scored)."""
from __future__ import annotations

import math

import numpy as np


def choose_test_documents(n_docs: int, test_docs: float, seed: int,
                          strata: np.ndarray | None = None) -> np.ndarray:
    """Boolean mask of test documents.

    ``test_docs`` is a share of the documents (0 <= value < 1) or a count (an integer >= 1).
    The documents are drawn with ``default_rng(SeedSequence(seed, spawn_key=(1,)))``, a stream
    separate from the token split. With ``strata`` (a stratum per document, e.g. its time
    slice), each stratum in ascending order gives its share of the test documents
    (:func:`stratum_counts`), drawn by a permutation of its documents from the same stream.
    """
    n_test = int(round(test_docs * n_docs)) if test_docs < 1 else int(test_docs)
    n_test = min(n_test, n_docs)
    rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(1,)))
    mask = np.zeros(n_docs, dtype=bool)
    if strata is None:
        mask[rng.permutation(n_docs)[:n_test]] = True
        return mask
    strata = np.asarray(strata)
    groups = [np.flatnonzero(strata == s) for s in np.unique(strata)]
    for members, take in zip(groups, stratum_counts([g.size for g in groups], n_test)):
        mask[members[rng.permutation(members.size)[:take]]] = True
    return mask


def stratum_counts(sizes: list[int], n_test: int) -> list[int]:
    """``n_test`` test documents shared among strata of ``sizes`` in proportion, by largest
    remainder (ties to the earlier stratum), never more than a stratum holds."""
    total = sum(sizes)
    if total == 0:
        return [0] * len(sizes)
    quotas = [n_test * size / total for size in sizes]
    counts = [int(math.floor(q)) for q in quotas]
    # the remainders add up to the documents left, each below 1, so enough strata have one;
    # a stratum with a remainder holds more than its floor
    order = sorted(range(len(sizes)), key=lambda i: (-(quotas[i] - math.floor(quotas[i])), i))
    for i in order[:n_test - sum(counts)]:
        counts[i] += 1
    return counts


def observed_count(n_tokens: int, heldout_fraction: float) -> int:
    """n_obs = ceil((1 - heldout_fraction) N_d), guarded against rounding (0.9 * 10 -> 9)."""
    return min(n_tokens, math.ceil((1.0 - heldout_fraction) * n_tokens - 1e-9))


def split_tokens(docs: list[np.ndarray], heldout_fraction: float,
                 seed: int, rng: np.random.Generator | None = None
                 ) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Document completion split of every document's tokens.

    One ``numpy.random.default_rng(seed)`` (or the generator ``rng`` when given); documents in
    index order; for each a ``permutation(N_d)``; the first n_obs positions are observed (kept
    in that split order), the rest held out.
    """
    if rng is None:
        rng = np.random.default_rng(seed)
    observed, heldout = [], []
    for tokens in docs:
        perm = rng.permutation(tokens.size)
        n_obs = observed_count(tokens.size, heldout_fraction)
        observed.append(tokens[perm[:n_obs]])
        heldout.append(tokens[perm[n_obs:]])
    return observed, heldout


def split_train_tokens(docs: list[np.ndarray], heldout_fraction: float,
                       seed: int) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Protocol B (§11.1): the same per-document split applied to the training documents, with
    its own generator ``default_rng(SeedSequence(seed, spawn_key=(2,)))`` so that it neither
    reuses nor shifts the test documents' split. A document keeps at least one observed token
    (n_obs = ceil((1 - f) N_d) >= 1)."""
    rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(2,)))
    return split_tokens(docs, heldout_fraction, seed, rng=rng)
