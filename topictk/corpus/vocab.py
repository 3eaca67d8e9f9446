"""Choosing the vocabulary from training documents' document frequencies."""
from __future__ import annotations

import hashlib

import numpy as np


def document_frequency(docs: list[np.ndarray], n_types: int) -> tuple[np.ndarray, np.ndarray]:
    """(document frequency, corpus frequency) of every input type id over ``docs``."""
    df = np.zeros(n_types, dtype=np.int64)
    cf = np.zeros(n_types, dtype=np.int64)
    for tokens in docs:
        if tokens.size:
            np.add.at(cf, tokens, 1)
            df[np.unique(tokens)] += 1
    return df, cf


def _min_threshold(value: float, n_docs: int) -> float:
    """min_df: a share of documents when below 1, otherwise a count."""
    return value * n_docs if 0 < value < 1 else value


def _max_threshold(value: float, n_docs: int) -> float:
    """max_df: a share of documents when at most 1 (1.0 = no limit), otherwise a count."""
    return value * n_docs if 0 < value <= 1 else value


def select_vocabulary(type_names: list[str], df: np.ndarray, cf: np.ndarray, n_docs: int, *,
                      min_df: float = 1, max_df: float = 1.0, vocab_size: int | None = None,
                      stopwords: frozenset[str] = frozenset()) -> np.ndarray:
    """Input type ids kept in the vocabulary, in vocabulary order.

    Kept: types with ``min_df <= df <= max_df`` (min_df a share of documents below 1, max_df a
    share up to 1.0, otherwise counts) that are not stop words. Order: corpus frequency
    descending, ties alphabetical.
    ``vocab_size`` keeps the most frequent.
    """
    keep = (df >= max(_min_threshold(min_df, n_docs), 1)) & (df <= _max_threshold(max_df, n_docs))
    if stopwords:
        keep &= np.array([name not in stopwords for name in type_names], dtype=bool)
    ids = np.flatnonzero(keep)
    names = np.array([type_names[i] for i in ids], dtype=object)
    order = np.lexsort((names, -cf[ids])) if ids.size else ids
    ids = ids[order]
    if vocab_size is not None:
        ids = ids[:vocab_size]
    return ids


def vocab_hash(words: list[str]) -> str:
    """sha256 of the vocabulary file's content (one word per line)."""
    return hashlib.sha256(("\n".join(words) + "\n").encode("utf-8")).hexdigest()
