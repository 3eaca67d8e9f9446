"""Mini-batches streamed from the memory-mapped store.

A finite corpus is visited in epochs: each epoch is a fresh permutation of the documents,
cut into consecutive batches of ``batch_size`` (the last short batch is dropped;
docs/algorithms.md §5). A batch as large as the corpus is the corpus in document order. Only the
batch's documents are read from the store, so memory follows the batch, not the corpus.

**Choice (epoch permutations).** An epoch's permutation is not stored as D indices (memory
would grow with the corpus): it is a keyed Feistel permutation of 0..D-1 (4 rounds of a
SplitMix64 round function on a power-of-4 domain, cycle-walking into [0, D)) whose four 64-bit
round keys are drawn from the main stream when the epoch starts. The epoch index and the keys
(five numbers) are the state a checkpoint keeps.
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


def gather_rows(docs, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Representation C of the documents ``rows`` (in that order): (indptr, indices int32,
    counts int32) read from the (memory-mapped) CSR arrays of ``docs`` without touching the
    other rows."""
    rows = np.asarray(rows, dtype=np.int64)
    starts = np.asarray(docs.indptr[rows], dtype=np.int64)
    ends = np.asarray(docs.indptr[rows + 1], dtype=np.int64)
    lengths = ends - starts
    indptr = np.zeros(rows.size + 1, dtype=np.int64)
    np.cumsum(lengths, out=indptr[1:])
    entry = np.repeat(starts - indptr[:-1], lengths) + np.arange(indptr[-1], dtype=np.int64)
    return (indptr, np.ascontiguousarray(docs.indices[entry], dtype=np.int32),
            np.ascontiguousarray(docs.counts[entry], dtype=np.int32))


FEISTEL_ROUNDS = 4
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


def _mix64(x: np.ndarray) -> np.ndarray:
    """SplitMix64 finaliser on a uint64 array (wrapping arithmetic)."""
    x = (x ^ (x >> np.uint64(30))) * _M1
    x = (x ^ (x >> np.uint64(27))) * _M2
    return x ^ (x >> np.uint64(31))


def permute(positions: np.ndarray, n: int, round_keys: np.ndarray) -> np.ndarray:
    """The document at each position of the epoch permutation of 0..n-1 keyed by
    ``round_keys`` (4 uint64): a balanced Feistel network on 2h-bit numbers (4^h >= n), applied
    repeatedly until the value falls inside [0, n) (cycle walking)."""
    positions = np.asarray(positions, dtype=np.uint64)
    half = max(1, (max(int(n) - 1, 1).bit_length() + 1) // 2)
    mask = np.uint64((1 << half) - 1)
    shift = np.uint64(half)
    round_keys = np.asarray(round_keys, dtype=np.uint64)

    def feistel(x: np.ndarray) -> np.ndarray:
        left, right = x >> shift, x & mask
        for r in range(FEISTEL_ROUNDS):
            left, right = right, left ^ (_mix64(right ^ round_keys[r]) & mask)
        return (left << shift) | right

    out = feistel(positions)
    outside = out >= np.uint64(n)
    while np.any(outside):
        out[outside] = feistel(out[outside])
        outside = out >= np.uint64(n)
    return out.astype(np.int64)


class EpochSchedule:
    """Which documents form mini-batch t. The epoch state is five uint64 numbers (the epoch
    index and its Feistel round keys), so it does not grow with the corpus."""

    def __init__(self, n_docs: int, batch_size: int, *, permute_whole: bool = False):
        self.n_docs = n_docs
        self.batch_size = min(batch_size, n_docs)
        self.per_epoch = max(1, n_docs // self.batch_size)
        # a batch of the whole corpus is the corpus in document order, unless every epoch
        # is to be a permutation of it all the same (online VB's order of documents)
        self.whole_corpus = self.batch_size >= n_docs and not permute_whole

    def batch_ids(self, t: int, epoch_state: np.ndarray | None,
                  rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray | None]:
        """Document ids of batch t and the (possibly new) epoch state; a new epoch draws its
        keys from ``rng``'s bit generator (the main stream)."""
        if self.whole_corpus:
            return np.arange(self.n_docs, dtype=np.int64), None
        epoch, position = divmod(t, self.per_epoch)
        if epoch_state is None or int(epoch_state[0]) != epoch:
            keys = np.asarray(rng.bit_generator.random_raw(FEISTEL_ROUNDS), dtype=np.uint64)
            epoch_state = np.concatenate([np.array([epoch], dtype=np.uint64), keys])
        start = position * self.batch_size
        ids = permute(np.arange(start, start + self.batch_size), self.n_docs, epoch_state[1:])
        return ids, epoch_state
