"""Calling the collapsed Gibbs kernels the way the driver does, for the kernel tests."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from topictk.inference.gibbs import _gibbs


def stream(seed: int, *key: int) -> np.random.PCG64:
    """The PCG64 stream ``(seed, key)``; kernel and reference get separate but equal copies."""
    return np.random.PCG64(np.random.SeedSequence(seed, spawn_key=key))


def random_corpus(rng: np.random.Generator, n_docs: int, n_words: int,
                  max_length: int) -> tuple[np.ndarray, np.ndarray]:
    """(doc_ptr int64, words int32) of random documents with 1..max_length tokens."""
    lengths = rng.integers(1, max_length + 1, n_docs)
    doc_ptr = np.zeros(n_docs + 1, np.int64)
    np.cumsum(lengths, out=doc_ptr[1:])
    words = rng.integers(0, n_words, int(doc_ptr[-1])).astype(np.int32)
    return doc_ptr, words


def even_bounds(n_docs: int, n_chunks: int) -> np.ndarray:
    return np.round(np.linspace(0, n_docs, n_chunks + 1)).astype(np.int64)


@dataclass
class KernelState:
    """The arrays the driver hands to ``gibbs_sweep`` (counts plus the SparseLDA pool)."""

    doc_ptr: np.ndarray
    words: np.ndarray
    z: np.ndarray
    ndk: np.ndarray
    nkw: np.ndarray
    nk: np.ndarray
    wt_ptr: np.ndarray
    wt_entries: np.ndarray
    wt_len: np.ndarray
    bits: int

    @classmethod
    def initial(cls, doc_ptr: np.ndarray, words: np.ndarray, n_topics: int, n_words: int,
                init_stream: np.random.PCG64) -> "KernelState":
        n_docs = doc_ptr.size - 1
        z = np.zeros(words.size, np.int32)
        ndk = np.zeros((n_docs, n_topics), np.int32)
        nkw = np.zeros((n_words, n_topics), np.int32)
        nk = np.zeros(n_topics, np.int64)
        _gibbs.init_topics(doc_ptr, words, z, ndk, nkw, nk, init_stream)
        # pool capacity as in GibbsDriver: min(frequency of w, K) entries for word w
        freq = np.bincount(words, minlength=n_words)
        wt_ptr = np.zeros(n_words + 1, np.int64)
        np.cumsum(np.minimum(freq, n_topics), out=wt_ptr[1:])
        state = cls(doc_ptr, words, z, ndk, nkw, nk, wt_ptr,
                    np.zeros(max(1, int(wt_ptr[-1])), np.int64), np.zeros(n_words, np.int32),
                    _gibbs.topic_bits(n_topics))
        state.rebuild_lists()
        return state

    def rebuild_lists(self) -> None:
        _gibbs.build_word_topic_lists(self.nkw, self.wt_ptr, self.wt_entries, self.wt_len,
                                      self.bits)

    def lists(self) -> list[list[int]]:
        """The SparseLDA list of every word as Python ints."""
        return [[int(e) for e in self.wt_entries[self.wt_ptr[w]:self.wt_ptr[w] + self.wt_len[w]]]
                for w in range(self.wt_len.size)]

    def sweep(self, alpha: np.ndarray, beta: float, bounds: np.ndarray,
              streams: list[np.random.PCG64], sparse: bool, threads: int = 1,
              buffers: _gibbs.SweepBuffers | None = None, **word_term) -> int:
        return _gibbs.gibbs_sweep(self.doc_ptr, self.words, self.z, self.ndk, self.nkw, self.nk,
                                  np.ascontiguousarray(np.atleast_2d(alpha), np.float64),
                                  float(beta), bounds,
                                  streams, sparse, self.wt_ptr, self.wt_entries, self.wt_len,
                                  self.bits, threads, buffers, **word_term)

    def arrays(self) -> tuple[np.ndarray, ...]:
        return self.z, self.ndk, self.nkw, self.nk
