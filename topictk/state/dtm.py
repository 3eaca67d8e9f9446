"""The state of a dynamic topic model chain (docs/algorithms.md §14)."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from topictk.state.schema import STEP, Array, Saved, Value


@dataclass
class DTMState(Saved):
    """The chain's topics, document parameters and slice means, and the running sums of what
    it reports.

    z         (N,)       int32    topic of every training token
    ndk       (D, K)     int32    n_dk, the counts of z per document
    eta       (D, K)     float64  the documents' topic parameters, theta_d = softmax(eta_d)
    phi       (T, V, K)  float64  the topics' natural parameters per slice, word-major
    alpha     (T, K)     float64  the slices' mean topic parameters
    prob_sum  (T, V, K)  float64  sum of softmax(phi_t) over the kept iterations
    alpha_sum (T, K)     float64  sum of alpha over the kept iterations
    kept      int                 iterations summed (0: none yet; the current state reports)
    """

    SCHEMA_VERSION = 1
    SCHEMA = {"z": Array("int32", ("N",)), "ndk": Array("int32", ("D", "K")),
              "eta": Array("float64", ("D", "K")), "phi": Array("float64", ("T", "V", "K")),
              "alpha": Array("float64", ("T", "K")),
              "prob_sum": Array("float64", ("T", "V", "K")),
              "alpha_sum": Array("float64", ("T", "K")), "kept": Value(int), **STEP}

    z: np.ndarray
    ndk: np.ndarray
    eta: np.ndarray
    phi: np.ndarray
    alpha: np.ndarray
    prob_sum: np.ndarray
    alpha_sum: np.ndarray
    kept: int = 0
    step: int = 0
    sample_steps: list[int] = field(default_factory=list)

    def check_invariants(self, doc_ptr: np.ndarray) -> None:
        """Raise AssertionError unless n_dk are the counts of z and every parameter is
        finite."""
        K = self.ndk.shape[1]
        doc_of = np.repeat(np.arange(doc_ptr.size - 1), np.diff(doc_ptr))
        ndk = np.zeros_like(self.ndk)
        np.add.at(ndk, (doc_of, self.z), 1)
        if self.z.size and (self.z.min() < 0 or self.z.max() >= K):
            raise AssertionError("z holds a topic outside 0..K-1")
        if not np.array_equal(ndk, self.ndk):
            raise AssertionError("n_dk differs from the counts of z")
        for name in ("eta", "phi", "alpha", "prob_sum", "alpha_sum"):
            if not np.all(np.isfinite(getattr(self, name))):
                raise AssertionError(f"{name} has non-finite entries")
