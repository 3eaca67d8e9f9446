"""State of deep LDA / the Poisson gamma belief network (ALGORITHMS.md §8): the layers' topic
matrices, the top-layer weights, the step-size bookkeeping of the stochastic-gradient samplers
and the local chains that persist across updates (batch Gibbs's training documents and the
persistent test chain of §8.11)."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from topictk.state.schema import STEP, Array, ArrayList, Saved, Value


@dataclass
class DeepState(Saved):
    """Plain arrays; layer l (1-based) is at list index l - 1.

    ``phi[l-1]``      (K_{l-1}, K_l) float64, columns on the simplex (K_0 = V): Phi^(l)
    ``r``             (K_L,) float64 > 0: top-layer gamma shapes
    ``M[l-1]``        (K_l,) float64: TLASGR/TLFSGR Fisher scales M_k^(l) (eq. 18); ``M_top``
                      the scale of r (eq. 19); None / 0 for the other algorithms
    ``phi_hat[l-1]``  (K_{l-1}, K_l) expanded means of SGRLD-for-DLDA (§8.9), else None
    ``theta_train``, ``c_train``  (D, sum K_l), (D, L): batch Gibbs's local state, else None
    ``theta_test``, ``c_test``    (D_test, sum K_l), (D_test, L): the persistent test chain
    ``racc``, ``tacc`` (held nnz,), (D_test,): its accumulated rates (§8.11)
    ``chain_step``    the update count after which the test chain last advanced
    ``chain_samples`` how many of its iterations were accumulated
    ``permutation``   the epoch state of the mini-batch schedule (topictk.corpus.batches), else None
    ``floored``, ``fallbacks``, ``clamped``: running counts of gamma draws floored at 1e-300,
    uniform fallbacks of the partition draws, and simplex coordinates clamped by Proj.
    """

    SCHEMA = {
        "layers": Value("ints"),
        "phi": ArrayList("float64", lambda s: [(a, b) for a, b in zip(s["rows"], s["layers"])]),
        "r": Array("float64", ("top",)),
        "theta_test": Array("float64", ("test_docs", "all_topics")),
        "c_test": Array("float64", ("test_docs", "depth")),
        "racc": Array("float64", ("test_heldout",)), "tacc": Array("float64", ("test_docs",)),
        "M": ArrayList("float64", lambda s: [(k,) for k in s["layers"]], optional=True),
        "phi_hat": ArrayList("float64",
                             lambda s: [(a, b) for a, b in zip(s["rows"], s["layers"])],
                             optional=True),
        "theta_train": Array("float64", ("D", "all_topics"), optional=True),
        "c_train": Array("float64", ("D", "depth"), optional=True),
        "permutation": Array("uint64", ("epoch_state",), optional=True),
        "M_top": Value(float), "chain_step": Value(int), "chain_samples": Value(int),
        "floored": Value(int), "fallbacks": Value(int), "clamped": Value(int), **STEP}

    layers: list[int]
    phi: list[np.ndarray]
    r: np.ndarray
    theta_test: np.ndarray
    c_test: np.ndarray
    racc: np.ndarray
    tacc: np.ndarray
    step: int = 0
    M: list[np.ndarray] | None = None
    M_top: float = 0.0
    phi_hat: list[np.ndarray] | None = None
    theta_train: np.ndarray | None = None
    c_train: np.ndarray | None = None
    permutation: np.ndarray | None = None
    chain_step: int = 0
    chain_samples: int = 0
    floored: int = 0
    fallbacks: int = 0
    clamped: int = 0
    sample_steps: list[int] = field(default_factory=list)

    @property
    def depth(self) -> int:
        return len(self.layers)

    def flat_phi(self, vocab: np.ndarray | None = None) -> np.ndarray:
        """Phi^(1..L) concatenated row-major, the kernel's layout; ``vocab`` keeps only those
        rows of Phi^(1) (a mini-batch's words)."""
        first = self.phi[0] if vocab is None else self.phi[0][vocab]
        return np.concatenate([first.ravel()] + [p.ravel() for p in self.phi[1:]])

    def projected(self, layer: int) -> np.ndarray:
        """Topics of ``layer`` (1-based) as word distributions, Phi^(1) ... Phi^(l-1) phi_k^(l):
        (V, K_l), columns on the simplex."""
        out = self.phi[layer - 1]
        for p in reversed(self.phi[:layer - 1]):
            out = p @ out
        return out

    def check_invariants(self) -> None:
        for l, p in enumerate(self.phi, start=1):
            if not np.all(np.isfinite(p)) or not np.all(p > 0):
                raise AssertionError(f"Phi^({l}) must be positive and finite")
            np.testing.assert_allclose(p.sum(axis=0), 1.0, rtol=0, atol=1e-12)
        if not np.all(np.isfinite(self.r)) or not np.all(self.r > 0):
            raise AssertionError("r must be positive and finite")
        for name in ("theta_test", "c_test", "theta_train", "c_train"):
            a = getattr(self, name)
            if a is not None and (not np.all(np.isfinite(a)) or not np.all(a > 0)):
                raise AssertionError(f"{name} must be positive and finite")
        if self.M is not None:
            for l, m in enumerate(self.M, start=1):
                if not np.all(np.isfinite(m)) or np.any(m < 0):
                    raise AssertionError(f"M^({l}) must be finite and >= 0")
        if not (np.all(self.racc >= 0) and np.all(self.tacc >= 0)):
            raise AssertionError("test-chain accumulators must be >= 0")
