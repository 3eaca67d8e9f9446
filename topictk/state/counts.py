"""Count state of collapsed Gibbs sampling (docs/algorithms.md §2.1)."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from topictk.state.schema import STEP, Array, Saved, Value


@dataclass
class CountState(Saved):
    """Topic assignments and the counts they imply.

    z    (N,)   int32  topic of every training token (canonical order)
    ndk  (D, K) int32  document-topic counts
    nkw  (V, K) int32  word-major topic-word counts
    nk   (K,)   int64  topic totals
    alpha (K,)  float64, beta float
    sample_steps: steps at which a sample of (nkw, nk) was saved for evaluation
    table_z (N,) int32  the MH sampler's word-proposal tables were built from these topics
                        (kept and saved only when they are rebuilt less often than every sweep)
    prop (N, M) int32   the pending proposals of the earlier WarpLDA kernel (read to refuse
                        resuming them)
    """

    SCHEMA = {"z": Array("int32", ("N",)), "ndk": Array("int32", ("D", "K")),
              "nkw": Array("int32", ("V", "K")), "nk": Array("int64", ("K",)),
              "alpha": Array("float64", ("K",)), "beta": Value(float),
              "table_z": Array("int32", ("N",), optional=True),
              "prop": Array("int32", ("N", "M"), optional=True), **STEP}

    z: np.ndarray
    ndk: np.ndarray
    nkw: np.ndarray
    nk: np.ndarray
    alpha: np.ndarray
    beta: float
    sample_steps: list[int] = field(default_factory=list)
    step: int = 0
    table_z: np.ndarray | None = None
    prop: np.ndarray | None = None

    @property
    def n_topics(self) -> int:
        return self.ndk.shape[1]

    def check_invariants(self, doc_ptr: np.ndarray, words: np.ndarray) -> None:
        """Raise AssertionError unless every count equals the count recomputed from z."""
        D, K = self.ndk.shape
        V = self.nkw.shape[0]
        if self.z.min(initial=0) < 0 or self.z.max(initial=0) >= K:
            raise AssertionError("topic ids outside 0..K-1")
        doc_of = np.repeat(np.arange(D), np.diff(doc_ptr))
        ndk = np.zeros((D, K), dtype=np.int64)
        np.add.at(ndk, (doc_of, self.z), 1)
        nkw = np.zeros((V, K), dtype=np.int64)
        np.add.at(nkw, (words, self.z), 1)
        if not np.array_equal(ndk, self.ndk):
            raise AssertionError("n_dk differs from the counts of z")
        if not np.array_equal(nkw, self.nkw):
            raise AssertionError("n_kw differs from the counts of z")
        if not np.array_equal(nkw.sum(axis=0), self.nk):
            raise AssertionError("n_k differs from the counts of z")
        if not (np.all(np.isfinite(self.alpha)) and np.all(self.alpha > 0)):
            raise AssertionError("alpha must be positive and finite")

    def topic_word(self) -> np.ndarray:
        """phi-hat (K, V): (n_kw + beta) / (n_k + V beta)."""
        return phi_hat(self.nkw, self.nk, self.beta).T.copy()


@dataclass
class WarpState(CountState):
    """The state of a WarpLDA-order chain (docs/algorithms.md §2.9): z and nk are the chain;
    ``ndk`` and ``nkw`` are None while it samples and are counted from z
    (:class:`topictk.inference.gibbs.warp.WarpCounts`) when something reads them. Saved without
    them, so a checkpoint holds 4 N + 8 K bytes of topics and counts, not 4 (D + V) K.
    ``prop`` is only read from the checkpoints of the earlier kernel, whose proposals waited a
    phase (refused on resume: that chain cannot go on).
    ``word_rows``, not saved, holds the non-zero n_kw of z once something has counted them
    (scoring, the top words, the log joint, every block of ``topictk infer``), until the next
    sweep."""

    SCHEMA = {"z": Array("int32", ("N",)), "nk": Array("int64", ("K",)),
              "alpha": Array("float64", ("K",)), "beta": Value(float),
              "prop": Array("int32", ("N", "M"), optional=True), **STEP}

    word_rows: dict | None = field(default=None, repr=False, compare=False)

    @property
    def n_topics(self) -> int:
        return self.nk.size

    @classmethod
    def restore(cls, fields: dict):
        return super().restore({"ndk": None, "nkw": None, **fields})


def dense_counts(arrays: dict, name: str, n_topics: int) -> np.ndarray:
    """The (n_rows, K) int32 counts of a sample's non-zero counts ``name``: the CSR arrays
    ``{name}_ptr`` (n_rows + 1) int64 offsets, ``{name}_topic`` and ``{name}_count`` int32,
    topics ascending in a row (or the dense array ``arrays[name]`` when it is there)."""
    if name in arrays:
        return arrays[name]
    ptr = arrays[f"{name}_ptr"]
    out = np.zeros((ptr.size - 1, n_topics), dtype=np.int32)
    row = np.repeat(np.arange(ptr.size - 1), np.diff(ptr))
    out[row, arrays[f"{name}_topic"]] = arrays[f"{name}_count"]
    return out


def phi_hat(nkw: np.ndarray, nk: np.ndarray, beta: float) -> np.ndarray:
    """Word-major (V, K) phi-hat from counts (one (V, K) float64 array, built in place)."""
    V = nkw.shape[0]
    out = nkw.astype(np.float64)
    out += beta
    out /= nk + V * beta
    return out
