"""States of the Dirichlet-multinomial regression topic model (ALGORITHMS.md §9) as plain
arrays with ``check_invariants()``.

Both keep the regression weights nu (K, F) -- lambda in Mimno & McCallum (2008) and in the DMR
report, renamed nu in ALGORITHMS.md to avoid the clash with SVI's lambda -- beside the topics:

* :class:`DMRCountState` -- stochastic EM (§9.2): the collapsed Gibbs state of §2.1 (z and the
  counts it implies) and nu;
* :class:`DMRSimplexState` -- SGRLD + SGLD (§9.3): the expanded-mean topics phi_hat of §7 and nu.

The document prior is never stored: alpha_d = exp(x_d^T nu) is recomputed from the features.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from topictk.state.counts import CountState
from topictk.state.schema import Array, Value
from topictk.state.simplex import SimplexState

# exp() of the linear predictor is taken within these bounds: far outside any sensible prior
# (alpha_dk from 5e-131 to 2e130), they only keep a wild L-BFGS trial point finite.
ETA_MIN, ETA_MAX = -300.0, 300.0


def feature_products(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a^T b over the documents for (D, P) and (D, Q) arrays -> (P, Q), by NumPy's own loops:
    BLAS would pick its summation order (and spin threads) by the machine's core count."""
    return np.einsum("dp,dq->pq", a, b)


def linear_predictor(features: np.ndarray, nu: np.ndarray) -> np.ndarray:
    """eta_dk = x_d^T nu_k (D, K), clipped to [ETA_MIN, ETA_MAX]. The products run in NumPy's
    own loops, not BLAS (see :func:`feature_products`)."""
    eta = np.einsum("df,kf->dk", np.asarray(features, dtype=np.float64), nu)
    np.clip(eta, ETA_MIN, ETA_MAX, out=eta)
    return np.ascontiguousarray(eta)


def document_alpha(features: np.ndarray, nu: np.ndarray) -> np.ndarray:
    """alpha_dk = exp(x_d^T nu_k) for every row of ``features`` (D, F) -> (D, K) C-contiguous."""
    return np.exp(linear_predictor(features, nu))


def _check_nu(nu: np.ndarray, n_features: int | None) -> None:
    if nu.ndim != 2:
        raise AssertionError("nu must be (K, F)")
    if n_features is not None and nu.shape[1] != n_features:
        raise AssertionError(f"nu has {nu.shape[1]} features, the corpus {n_features}")
    if not np.all(np.isfinite(nu)):
        raise AssertionError("nu has non-finite entries")


@dataclass
class DMRCountState(CountState):
    """Collapsed Gibbs state of DMR stochastic EM.

    z, ndk, nkw, nk, beta as :class:`topictk.state.counts.CountState`;
    nu (K, F) float64 regression weights, the intercept in the last column.
    ``alpha`` holds exp(nu[:, -1]), the prior of a document whose other features are all 0
    (kept so that the count-state helpers keep working; the sampler uses alpha_d).
    ``optimizations`` counts the nu updates done so far.
    """

    # alpha is exp(nu[:, -1]), not saved
    SCHEMA = {**{k: v for k, v in CountState.SCHEMA.items() if k != "alpha"},
              "nu": Array("float64", ("K", "F")), "optimizations": Value(int)}

    @classmethod
    def restore(cls, fields: dict):
        return super().restore({**fields, "alpha": np.exp(fields["nu"][:, -1])})

    nu: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    optimizations: int = 0

    def check_invariants(self, doc_ptr: np.ndarray, words: np.ndarray,
                         features: np.ndarray | None = None) -> None:
        """Counts equal the counts of z (§2.1) and nu is finite with one row per topic."""
        super().check_invariants(doc_ptr, words)
        _check_nu(self.nu, None if features is None else features.shape[1])
        if self.nu.shape[0] != self.ndk.shape[1]:
            raise AssertionError("nu must have one row per topic")


@dataclass
class DMRSimplexState(SimplexState):
    """SGRLD + SGLD state: phi_hat (V, K) as :class:`topictk.state.simplex.SimplexState` and
    nu (K, F) float64. ``alpha`` holds exp(nu[:, -1]) (see :class:`DMRCountState`)."""

    # the saved alpha is exp(nu[:, -1]) and is recomputed from nu on loading
    SCHEMA = {**SimplexState.SCHEMA, "nu": Array("float64", ("K", "F"))}

    @classmethod
    def restore(cls, fields: dict):
        return super().restore({**fields, "alpha": np.exp(fields["nu"][:, -1])})

    nu: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))

    def check_invariants(self, features: np.ndarray | None = None) -> None:
        super().check_invariants()
        _check_nu(self.nu, None if features is None else features.shape[1])
        if self.nu.shape[0] != self.phi_hat.shape[1]:
            raise AssertionError("nu must have one row per topic")
