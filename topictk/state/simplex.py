"""State of SGRLD (ALGORITHMS.md §7): the expanded-mean topic parameters."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from topictk.state.schema import STEP, Array, Saved, Value


@dataclass
class SimplexState(Saved):
    """phi_hat (V, K) float64 word-major, > 0; phi_k = phi_hat[:, k] / phi_hat[:, k].sum().

    ``permutation`` is the current epoch's state (epoch index and Feistel keys, five uint64;
    None for whole-corpus batches),
    ``floored`` counts entries lifted to 1e-300 after mirroring.
    """

    SCHEMA = {"phi_hat": Array("float64", ("V", "K")), "alpha": Array("float64", ("K",)),
              "permutation": Array("uint64", ("epoch_state",), optional=True),
              "beta": Value(float), "floored": Value(int), **STEP}

    phi_hat: np.ndarray
    alpha: np.ndarray
    beta: float
    step: int = 0
    permutation: np.ndarray | None = None
    floored: int = 0
    sample_steps: list[int] = field(default_factory=list)

    def phi(self) -> np.ndarray:
        """Word-major (V, K) topic-word probabilities (columns on the simplex)."""
        return self.phi_hat / self.phi_hat.sum(axis=0, keepdims=True)

    def check_invariants(self) -> None:
        if not np.all(np.isfinite(self.phi_hat)):
            raise AssertionError("phi_hat has non-finite entries")
        if not np.all(self.phi_hat > 0):
            raise AssertionError("phi_hat must be positive")
        np.testing.assert_allclose(self.phi().sum(axis=0), 1.0, rtol=1e-12)
