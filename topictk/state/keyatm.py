"""The state of a keyword topic model chain (docs/algorithms.md §2.13)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from topictk.state.counts import CountState
from topictk.state.schema import Array


@dataclass
class KeyATMState(CountState):
    """A Gibbs chain's counts with keyword topics 0..S-1: ``nkw`` and ``nk`` count the regular
    (s = 0) tokens only, ``ndk`` every token.

    s      (N,)   int8   switch of every token: 1 = drawn from its topic's keyword distribution
    nkey   (V, S) int32  keyword counts n~_kw
    nkey_k (S,)   int64  keyword totals n~_k
    """

    SCHEMA_VERSION = 1
    SCHEMA = {**CountState.SCHEMA, "s": Array("int8", ("N",)),
              "nkey": Array("int32", ("V", "S")), "nkey_k": Array("int64", ("S",))}

    s: np.ndarray | None = None
    nkey: np.ndarray | None = None
    nkey_k: np.ndarray | None = None

    def check_invariants(self, doc_ptr: np.ndarray, words: np.ndarray) -> None:
        """Raise AssertionError unless every count equals the count recomputed from (z, s)."""
        D, K = self.ndk.shape
        V, S = self.nkey.shape
        key = self.s.astype(bool)
        if np.any(key & (self.z >= S)):
            raise AssertionError("a keyword token in a topic without keywords")
        doc = np.repeat(np.arange(D), np.diff(doc_ptr))
        ndk = np.zeros((D, K), dtype=np.int64)
        np.add.at(ndk, (doc, self.z), 1)
        nkw = np.zeros((V, K), dtype=np.int64)
        np.add.at(nkw, (words[~key], self.z[~key]), 1)
        nkey = np.zeros((V, S), dtype=np.int64)
        np.add.at(nkey, (words[key], self.z[key]), 1)
        for name, want, got in (("n_dk", ndk, self.ndk), ("n_kw", nkw, self.nkw),
                                ("n_k", nkw.sum(axis=0), self.nk), ("n~_kw", nkey, self.nkey),
                                ("n~_k", nkey.sum(axis=0), self.nkey_k)):
            if not np.array_equal(want, got):
                raise AssertionError(f"{name} differs from the counts of (z, s)")
