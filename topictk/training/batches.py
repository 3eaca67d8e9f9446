"""Mini-batches streamed from the memory-mapped store.

A finite corpus is visited in epochs: each epoch is a fresh permutation of the documents drawn
from the main stream, cut into consecutive batches of ``batch_size`` (the last short batch is
dropped; ALGORITHMS.md §5). A batch as large as the corpus is the corpus in document order.
Only the batch's documents are read from the store, so memory follows the batch, not the corpus.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class Batch:
    """One mini-batch in representation T with batch-local word ids."""

    doc_ids: np.ndarray    # (B,) int64 training document indices
    doc_ptr: np.ndarray    # (B + 1,) int64
    words: np.ndarray      # (N_B,) int32, local ids into ``vocab``
    vocab: np.ndarray      # (V_B,) int32 global word ids, ascending

    @property
    def n_tokens(self) -> int:
        return int(self.doc_ptr[-1])


def gather_batch(doc_ptr: np.ndarray, words: np.ndarray, doc_ids: np.ndarray) -> Batch:
    """Read the tokens of ``doc_ids`` (in that order) from memory-mapped T arrays."""
    doc_ids = np.asarray(doc_ids, dtype=np.int64)
    starts = np.asarray(doc_ptr[doc_ids], dtype=np.int64)
    ends = np.asarray(doc_ptr[doc_ids + 1], dtype=np.int64)
    ptr = np.zeros(doc_ids.size + 1, dtype=np.int64)
    np.cumsum(ends - starts, out=ptr[1:])
    tokens = np.empty(int(ptr[-1]), dtype=np.int32)
    for j, (s, e) in enumerate(zip(starts, ends)):
        tokens[ptr[j]:ptr[j + 1]] = words[s:e]
    vocab, local = np.unique(tokens, return_inverse=True)
    return Batch(doc_ids=doc_ids, doc_ptr=ptr, words=local.astype(np.int32),
                 vocab=vocab.astype(np.int32))


class EpochSchedule:
    """Which documents form mini-batch t; the current epoch's permutation is state."""

    def __init__(self, n_docs: int, batch_size: int):
        self.n_docs = n_docs
        self.batch_size = min(batch_size, n_docs)
        self.per_epoch = max(1, n_docs // self.batch_size)
        self.whole_corpus = self.batch_size >= n_docs

    def batch_ids(self, t: int, permutation: np.ndarray | None,
                  rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray | None]:
        """Document ids of batch t and the (possibly new) epoch permutation."""
        if self.whole_corpus:
            return np.arange(self.n_docs, dtype=np.int64), None
        position = t % self.per_epoch
        if position == 0 or permutation is None:
            permutation = rng.permutation(self.n_docs).astype(np.int64)
        start = position * self.batch_size
        return permutation[start:start + self.batch_size], permutation
