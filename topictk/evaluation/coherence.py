"""Topic quality from top words (docs/algorithms.md §11.5): UMass, NPMI (document co-occurrence in
the training corpus) and topic diversity."""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import scipy.sparse as sp


def top_words(topic_word: np.ndarray, n: int) -> np.ndarray:
    """(K, n) word ids sorted by probability descending, ties by ascending word id."""
    order = np.argsort(-topic_word, axis=1, kind="stable")
    return order[:, :n]


def incidence_matrix(indptr: np.ndarray, indices: np.ndarray, n_words: int) -> "sp.csc_matrix":
    """Binary document x word incidence (D, V) as CSC, for column slicing."""
    import scipy.sparse as sp  # here: `train` does not pay SciPy's import (about 23 MiB)

    data = np.ones(indices.size, dtype=np.int32)        # counts of documents: exact in int32
    return sp.csr_matrix((data, np.asarray(indices), np.asarray(indptr)),
                         shape=(indptr.size - 1, n_words)).tocsc()


#: top words (with repeats) of the topics whose co-document counts are taken in one product
CO_GROUP = 1024


def co_document_counts(top: np.ndarray, incidence: "sp.csc_matrix",
                       group: int = CO_GROUP) -> np.ndarray:
    """(K, n, n): documents containing both of two top words of each topic (the diagonal:
    documents containing the word), from one product over the union of the top words of
    ``group // n`` topics at a time: memory O(group^2 + K n^2), not the square of the union of
    all topics' top words (at K = 10,000 most of the vocabulary)."""
    K, n = top.shape
    counts = np.empty((K, n, n))
    step = max(1, group // max(n, 1))
    for begin in range(0, K, step):
        union, position = np.unique(top[begin:begin + step], return_inverse=True)
        position = position.reshape(-1, n)
        sub = incidence[:, union]
        co = (sub.T @ sub).toarray()
        counts[begin:begin + step] = co[position[:, :, None], position[:, None, :]]
    return counts


def umass(top: np.ndarray, incidence: "sp.csc_matrix",
          counts: np.ndarray | None = None) -> np.ndarray:
    """Per-topic UMass: sum_{m>l} ln((D(v_m, v_l) + 1) / D(v_l)); ``counts``: the
    :func:`co_document_counts` of ``top``, when at hand."""
    counts = co_document_counts(top, incidence) if counts is None else counts
    scores = []
    for words, co in zip(top, counts):
        total = 0.0
        for m in range(1, len(words)):
            for l in range(m):
                total += np.log((co[m, l] + 1.0) / co[l, l]) if co[l, l] > 0 else 0.0
        scores.append(total)
    return np.array(scores)


def npmi(top: np.ndarray, incidence: "sp.csc_matrix",
         counts: np.ndarray | None = None) -> np.ndarray:
    """Per-topic mean NPMI over all pairs of top words (document co-occurrence); ``counts``:
    the :func:`co_document_counts` of ``top``, when at hand."""
    n_docs = incidence.shape[0]
    counts = co_document_counts(top, incidence) if counts is None else counts
    scores = []
    for words, co in zip(top, counts):
        values = []
        for m in range(1, len(words)):
            for l in range(m):
                joint = co[m, l] / n_docs
                if co[m, l] == 0:
                    values.append(-1.0)
                elif joint >= 1.0:
                    values.append(1.0)
                else:
                    pmi = np.log(joint / ((co[m, m] / n_docs) * (co[l, l] / n_docs)))
                    values.append(pmi / -np.log(joint))
        scores.append(np.mean(values) if values else 0.0)
    return np.array(scores)


def diversity(topic_word: np.ndarray, n: int = 25) -> float:
    """Share of unique words among the top-n words of all topics (Dieng et al. 2020)."""
    top = top_words(topic_word, n)
    return float(np.unique(top).size / top.size)


def topic_quality(topic_word: np.ndarray, indptr: np.ndarray, indices: np.ndarray,
                  coherence_top: int = 10, diversity_top: int = 25) -> dict:
    """Mean UMass, mean NPMI and topic diversity of ``topic_word`` (K, V)."""
    V = topic_word.shape[1]
    top = top_words(topic_word, min(max(coherence_top, diversity_top), V))
    return quality_of_top_words(top, indptr, indices, V, coherence_top, diversity_top)


def quality_of_top_words(top: np.ndarray, indptr: np.ndarray, indices: np.ndarray,
                         n_words: int, coherence_top: int = 10,
                         diversity_top: int = 25) -> dict:
    """:func:`topic_quality` from the topics' top words (K, n), n at least the larger of
    ``coherence_top`` and ``diversity_top`` (or V): the first of a topic's top words are its
    top words for a smaller n."""
    incidence = incidence_matrix(indptr, indices, n_words)
    coherent = np.ascontiguousarray(top[:, :min(coherence_top, n_words)])
    diverse = top[:, :min(diversity_top, n_words)]
    counts = co_document_counts(coherent, incidence)
    return {"umass": float(np.mean(umass(coherent, incidence, counts))),
            "npmi": float(np.mean(npmi(coherent, incidence, counts))),
            "diversity": float(np.unique(diverse).size / diverse.size)}
