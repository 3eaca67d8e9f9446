"""States of the variational family (ALGORITHMS.md §3, §4, §5) as plain arrays with
``check_invariants()``.

* :class:`VBState` -- batch variational EM (§3): q(phi_k) = Dir(lambda_k) (smoothed) or a point
  estimate phi (unsmoothed), q(theta_d) = Dir(gamma_d) kept for every document (warm starts).
* :class:`OnlineState` -- online VB / SVI (§5): lambda in the lazy form
  ``lambda_kw = offset + scale * lam_tilde_kw``; no per-document state.
* :class:`CVBState` -- CVB and CVB0 (§4): one variational vector mu per distinct
  (document, word) pair and the mean (and, for CVB, variance) fields.

Topic-word arrays are word-major, (V, K), as inside the kernels (§1.5); the public
``topic_word()`` returns a (K, V) copy.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from topictk.state.schema import STEP, Array, Saved, Value


def _check_alpha(alpha: np.ndarray) -> None:
    if not (np.all(np.isfinite(alpha)) and np.all(alpha > 0)):
        raise AssertionError("alpha must be positive and finite")


def _check_rows_on_simplex(rows: np.ndarray, what: str, tol: float = 1e-9) -> None:
    if rows.size == 0:
        return
    if not np.all(np.isfinite(rows)) or rows.min() < 0:
        raise AssertionError(f"{what} has negative or non-finite entries")
    err = np.abs(rows.sum(axis=1) - 1.0).max()
    if err > tol:
        raise AssertionError(f"{what} rows are off the simplex by {err:.3g}")


@dataclass
class VBState(Saved):
    """Batch variational EM (Blei, Ng & Jordan 2003).

    lam    (V, K) float64  lambda (smoothed: q(phi_k) = Dir(lambda_k)) or phi (unsmoothed,
                           columns on the simplex); in Blei et al. (2003) lambda is the
                           smoothed topic parameter and phi the unsmoothed beta matrix
    gamma  (D, K) float64  q(theta_d) = Dir(gamma_d), kept for warm starts (§3.6)
    alpha  (K,)   float64  Dirichlet prior of theta (learnt when model.alpha is auto)
    beta   float           symmetric prior of phi (smoothed only)
    bound  float           ELBO of the E-step of the last completed step (§3.3), nan before
    bound_prev float       ELBO of the step before (for the EM stopping rule)
    converged bool         the EM stopping rule fired; later steps do nothing
    """

    SCHEMA = {"lam": Array("float64", ("V", "K")), "gamma": Array("float64", ("D", "K")),
              "alpha": Array("float64", ("K",)), "beta": Value(float), "smoothed": Value(bool),
              "bound": Value("nan-float"), "bound_prev": Value("nan-float"),
              "converged": Value(bool), **STEP}

    lam: np.ndarray
    gamma: np.ndarray
    alpha: np.ndarray
    beta: float
    smoothed: bool = True
    bound: float = float("nan")
    bound_prev: float = float("nan")
    converged: bool = False
    sample_steps: list[int] = field(default_factory=list)
    step: int = 0

    @property
    def n_topics(self) -> int:
        return self.lam.shape[1]

    def phi(self) -> np.ndarray:
        """Word-major (V, K) point estimate: lambda / lambda_k. (or phi itself)."""
        return self.lam / self.lam.sum(axis=0)

    def topic_word(self) -> np.ndarray:
        return self.phi().T.copy()

    def theta(self) -> np.ndarray:
        """(D, K) gamma_d / gamma_d. of every training document."""
        return self.gamma / self.gamma.sum(axis=1, keepdims=True)

    def check_invariants(self) -> None:
        """lambda > 0 (or phi columns on the simplex), gamma > 0, theta rows on the simplex."""
        if not np.all(np.isfinite(self.lam)) or self.lam.min(initial=1.0) <= 0:
            raise AssertionError("lambda must be positive and finite")
        if not self.smoothed:
            err = np.abs(self.lam.sum(axis=0) - 1.0).max(initial=0.0)
            if err > 1e-9:
                raise AssertionError(f"phi columns are off the simplex by {err:.3g}")
        if not np.all(np.isfinite(self.gamma)) or self.gamma.min(initial=1.0) <= 0:
            raise AssertionError("gamma must be positive and finite")
        _check_rows_on_simplex(self.theta(), "theta")
        _check_alpha(self.alpha)


@dataclass
class OnlineState(Saved):
    """Online VB / SVI (Hoffman, Blei & Bach 2010) with the lazy lambda of §5.

    lambda_kw = offset + scale * lam_tilde_kw; lam_sum_k = sum_w lam_tilde_kw, so
    lambda_k. = V offset + scale lam_sum_k. ``offset`` is eta (beta) while eta is fixed; it
    follows eta's updates when eta is learnt (lambda <- (1 - rho) lambda + rho (eta + R SS)
    moves the offset to (1 - rho) offset + rho eta).

    lam_tilde (V, K) float64; lam_sum (K,); alpha (K,); beta = eta (Hoffman's eta).
    t       completed global updates (the step counter of §12.1)
    epoch   index of the current epoch; keys (4,) uint64 the round keys of its permutation
    rho     step size of the last update (0 before the first)
    """

    SCHEMA = {"lam_tilde": Array("float64", ("V", "K")), "lam_sum": Array("float64", ("K",)),
              "alpha": Array("float64", ("K",)), "keys": Array("uint64", ("feistel",)),
              "beta": Value(float), "scale": Value(float), "offset": Value(float),
              "epoch": Value(int), "rho": Value(float), **STEP}

    lam_tilde: np.ndarray
    lam_sum: np.ndarray
    scale: float
    offset: float
    alpha: np.ndarray
    beta: float
    keys: np.ndarray
    epoch: int = 0
    rho: float = 0.0
    sample_steps: list[int] = field(default_factory=list)
    step: int = 0

    @property
    def n_topics(self) -> int:
        return self.lam_tilde.shape[1]

    def lam(self) -> np.ndarray:
        """Dense (V, K) lambda."""
        return self.offset + self.scale * self.lam_tilde

    def lam_totals(self) -> np.ndarray:
        """(K,) lambda_k. from the incremental sums."""
        return self.lam_tilde.shape[0] * self.offset + self.scale * self.lam_sum

    def phi(self) -> np.ndarray:
        lam = self.lam()
        return lam / lam.sum(axis=0)

    def topic_word(self) -> np.ndarray:
        return self.phi().T.copy()

    def check_invariants(self, tol: float = 1e-9) -> None:
        """lambda > 0 and finite; lam_sum equals the column sums of lam_tilde."""
        lam = self.lam()
        if not np.all(np.isfinite(lam)) or lam.min(initial=1.0) <= 0:
            raise AssertionError("lambda must be positive and finite")
        if not (np.isfinite(self.scale) and self.scale > 0):
            raise AssertionError("the lazy scale must be positive")
        direct = self.lam_tilde.sum(axis=0)
        err = (np.abs(direct - self.lam_sum).max(initial=0.0)
               / max(np.abs(direct).max(initial=0.0), 1.0))
        if err > tol:
            raise AssertionError(f"incremental lambda sums are off by {err:.3g} (relative)")
        _check_alpha(self.alpha)
        if not (np.isfinite(self.beta) and self.beta > 0):
            raise AssertionError("eta must be positive and finite")


@dataclass
class CVBState(Saved):
    """CVB (Teh, Newman & Welling 2007) or CVB0 (Asuncion et al. 2009).

    mu   (M, K) float64  q(z) of the tokens of each distinct (d, w) pair, in CSR order (TNW's
                         gamma_ijk)
    m_dk (D, K), m_kw (V, K), m_k (K,)   expected counts (fields, §4.2)
    v_dk, v_kw, v_k                      their variances (CVB only; empty arrays for CVB0)
    monitor  the last convergence statistic (CVB bound or CVB0 training perplexity), nan
             before the first check
    """

    # the variance fields are empty, (0, K), (0, K), (0,), for CVB0 (gaussian false)
    SCHEMA = {"mu": Array("float64", ("pairs", "K")), "m_dk": Array("float64", ("D", "K")),
              "m_kw": Array("float64", ("V", "K")), "m_k": Array("float64", ("K",)),
              "v_dk": Array("float64", ("var_docs", "K")),
              "v_kw": Array("float64", ("var_words", "K")),
              "v_k": Array("float64", ("var_topics",)),
              "alpha": Array("float64", ("K",)), "beta": Value(float), "gaussian": Value(bool),
              "monitor": Value("nan-float"), "converged": Value(bool), **STEP}

    mu: np.ndarray
    m_dk: np.ndarray
    m_kw: np.ndarray
    m_k: np.ndarray
    v_dk: np.ndarray
    v_kw: np.ndarray
    v_k: np.ndarray
    alpha: np.ndarray
    beta: float
    gaussian: bool = True
    monitor: float = float("nan")
    converged: bool = False
    sample_steps: list[int] = field(default_factory=list)
    step: int = 0

    @property
    def n_topics(self) -> int:
        return self.mu.shape[1]

    def phi(self) -> np.ndarray:
        """Word-major (V, K) phi-hat = (beta + m_kw) / (V beta + m_k) (TNW 2007 eq. 19)."""
        V = self.m_kw.shape[0]
        return (self.beta + self.m_kw) / (V * self.beta + self.m_k)

    def topic_word(self) -> np.ndarray:
        return self.phi().T.copy()

    def theta(self) -> np.ndarray:
        """(D, K) theta-hat = (alpha + m_dk) / (alpha_sum + N_d)."""
        return (self.alpha + self.m_dk) / (self.alpha.sum() + self.m_dk.sum(axis=1, keepdims=True))

    def check_invariants(self, indptr: np.ndarray, indices: np.ndarray, counts: np.ndarray,
                         tol: float = 1e-9) -> None:
        """mu rows on the simplex; counts conserved (sum_k m_dk = N_d, sum_k m_k = N); the
        incremental fields equal the fields recomputed from mu."""
        _check_rows_on_simplex(self.mu, "mu")
        indptr = np.asarray(indptr)
        counts = np.asarray(counts, dtype=np.float64)
        indices = np.asarray(indices)
        D, K = self.m_dk.shape
        V = self.m_kw.shape[0]
        rows = np.repeat(np.arange(D), np.diff(indptr))
        weighted = counts[:, None] * self.mu
        m_dk = np.zeros((D, K))
        np.add.at(m_dk, rows, weighted)
        m_kw = np.zeros((V, K))
        np.add.at(m_kw, indices, weighted)
        n_d = np.zeros(D)
        np.add.at(n_d, rows, counts)
        scale = max(1.0, float(counts.sum()))

        def close(a, b, what):
            err = np.abs(a - b).max(initial=0.0)
            if err > tol * scale:
                raise AssertionError(f"{what} differs from its value recomputed from mu by "
                                     f"{err:.3g}")

        close(self.m_dk.sum(axis=1), n_d, "sum_k m_dk (document length)")
        close(self.m_k.sum(), counts.sum(), "sum_k m_k (corpus length)")
        close(self.m_dk, m_dk, "m_dk")
        close(self.m_kw, m_kw, "m_kw")
        close(self.m_k, m_kw.sum(axis=0), "m_k")
        if self.gaussian:
            wv = counts[:, None] * self.mu * (1.0 - self.mu)
            v_dk = np.zeros((D, K))
            np.add.at(v_dk, rows, wv)
            v_kw = np.zeros((V, K))
            np.add.at(v_kw, indices, wv)
            close(self.v_dk, v_dk, "v_dk")
            close(self.v_kw, v_kw, "v_kw")
            close(self.v_k, v_kw.sum(axis=0), "v_k")
        _check_alpha(self.alpha)
