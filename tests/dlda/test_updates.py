"""Global updates of deep LDA (docs/algorithms.md §8.6-§8.9): the simplex step's covariance (oracle
d),
the noise-free fixed point of TLASGR (oracle e), eq. 8.2 against a numerical
I^-1 grad + Gamma (oracle f), the M guard for topics without tokens, SGRLD-DLDA's fixed point."""
from __future__ import annotations

import numpy as np
import pytest

from tests.dlda._helpers import dlda_config, write_split_store
from topictk.corpus.store import CorpusStore
from topictk.inference.dlda.driver import (
    TLASGRDriver,
    TLFSGRDriver,
    condition_on_simplex,
    project_simplex,
    r_update,
    sgrld_columns,
    tlasgr_columns,
    tlasgr_drift,
)
from topictk.streams import Streams


def test_projection_covariance(seed):
    """Oracle (d): u = y - (sum y - 1) phi has covariance (2 eps/M)(diag phi - phi phi^T)."""
    rng = np.random.default_rng(seed)
    phi = np.array([0.45, 0.25, 0.15, 0.1, 0.05])
    eps, M, n = 0.02, 56.0, 400_000
    drift = rng.normal(size=5)
    drift -= drift.mean()                                  # sums to zero like eq. 8.2
    y = (phi + 0.01 * drift)[:, None] + np.sqrt(2 * eps * phi / M)[:, None] * \
        rng.standard_normal((5, n))
    u = condition_on_simplex(y, phi[:, None])
    np.testing.assert_allclose(u.sum(axis=0), 1.0, atol=1e-12)
    cov = np.cov(u)
    want = 2 * eps / M * (np.diag(phi) - np.outer(phi, phi))
    assert np.max(np.abs(cov - want)) < 0.01 * np.max(np.abs(want))
    np.testing.assert_allclose(u.mean(axis=1), phi + 0.01 * drift,
                               atol=4 * np.sqrt(want.diagonal().max() / n))


def test_projection_lands_on_the_simplex():
    phi = np.array([[0.5, 0.2], [0.3, 0.3], [0.2, 0.5]])
    y = np.array([[0.9, 0.2], [-0.4, 0.3], [0.3, np.inf]])
    out, clamped = project_simplex(y, phi)
    assert clamped == 4             # -0.4; and in the infinite column (sum y = inf) all three
    np.testing.assert_allclose(out.sum(axis=0), 1.0, rtol=1e-15)
    assert np.all(out > 0)
    out, clamped = project_simplex(np.array([[np.nan], [0.5]]), np.array([[0.5], [0.5]]))
    assert np.isnan(out).all()                             # NaN is reported, never clamped


def test_eq_8_2_equals_numerical_preconditioned_gradient():
    """Oracle (f): in reduced coordinates (the last one is 1 - sum), with
    I = M [diag(1/phi) + 1 1^T/phi_last] and Gamma_i = sum_j d(I^-1)_ij / d phi_j,
    I^-1 grad + Gamma = (a - A phi) / M."""
    rng = np.random.default_rng(4)
    K, M = 5, 37.0
    phi = rng.dirichlet(np.ones(K) * 3)
    a = rng.gamma(2.0, size=K) * 10 + 0.1

    def log_post(free):
        full = np.append(free, 1 - free.sum())
        return np.sum((a - 1) * np.log(full))

    def inv_fisher(free):
        last = 1 - free.sum()
        return np.linalg.inv(M * (np.diag(1 / free) + 1 / last))

    free, h = phi[:-1], 1e-6
    grad = np.array([(log_post(free + h * e) - log_post(free - h * e)) / (2 * h)
                     for e in np.eye(K - 1)])
    gamma = np.zeros(K - 1)
    for j, e in enumerate(np.eye(K - 1)):
        gamma += (inv_fisher(free + h * e)[:, j] - inv_fisher(free - h * e)[:, j]) / (2 * h)
    numeric = inv_fisher(free) @ grad + gamma
    drift = tlasgr_drift(phi, a, M)
    np.testing.assert_allclose(drift[:-1], numeric, rtol=1e-6, atol=1e-9)
    assert abs(drift.sum()) < 1e-12
    np.testing.assert_allclose(np.linalg.inv(inv_fisher(free)),
                               M * (np.diag(1 / free) + 1 / (1 - free.sum())))
    np.testing.assert_allclose(inv_fisher(free), (np.diag(free) - np.outer(free, free)) / M,
                               rtol=1e-9, atol=1e-12)


class _ZeroNoise:
    """Stands in for the main stream: standard normals that are all 0 (noise off)."""

    def standard_normal(self, size):
        return np.zeros(size)


@pytest.fixture(scope="module")
def tiny_store(tmp_path_factory):
    rng = np.random.default_rng(0)
    docs = [rng.integers(0, 12, size=int(rng.integers(3, 20))).astype(np.int32)
            for _ in range(30)]
    return write_split_store(tmp_path_factory.mktemp("tiny") / "store", docs, 12, 5)


@pytest.mark.parametrize("driver_cls", [TLASGRDriver, TLFSGRDriver])
def test_noise_off_fixed_point(tiny_store, tmp_path, driver_cls):
    """Oracle (e): fixed statistics, no noise -> phi_vk = a_v/A and
    r = (R X_top + gamma0/K_L)/(c0 + R Q)."""
    config = dlda_config(tiny_store, tmp_path / "run", driver_cls.name, [4, 3],
                         iterations=2000)
    driver = driver_cls(config, CorpusStore.open(tiny_store), streams=Streams(1))
    state = driver.init_state()
    rng = np.random.default_rng(2)
    xbar = [rng.integers(0, 9, size=(12, 4)).astype(float),
            rng.integers(0, 9, size=(4, 3)).astype(float)]
    xtop, qbar, scale = np.array([3.0, 0.5, 2.0]), 1.7, 4.0
    for t in range(1500):
        eps = 1.0 * (1 + t / 21) ** -0.7
        driver.global_update(state, [x.copy() for x in xbar], xtop, qbar, eps, scale, t,
                             _ZeroNoise())
    for l, x in enumerate(xbar):
        a = scale * x + driver.eta[l]
        np.testing.assert_allclose(state.phi[l], a / a.sum(axis=0), atol=1e-8)
    np.testing.assert_allclose(state.r, (scale * xtop + 1.0 / 3) / (1.0 + scale * qbar),
                               rtol=1e-8)


def test_topic_without_tokens_stays_finite(tiny_store, tmp_path):
    """The M guard: a topic whose column of X-bar is 0 has M = 0 at t = 0; its step is
    eps / max(M, eps A) = 1/A, finite, and lands on the batch posterior mean a/A."""
    config = dlda_config(tiny_store, tmp_path / "run", "tlasgr", [4, 3])
    driver = TLASGRDriver(config, CorpusStore.open(tiny_store), streams=Streams(1))
    state = driver.init_state()
    xbar = [np.ones((12, 4)), np.ones((4, 3))]
    xbar[0][:, 2] = 0.0                                    # topic 2 of layer 1: no tokens
    xbar[1][:, 1] = 0.0
    rng = np.random.default_rng(0)
    extra = driver.global_update(state, xbar, np.array([1.0, 0.0, 1.0]), 0.0, 1.0, 5.0, 0, rng)
    assert state.M[0][2] == 0.0 and state.M_top == 0.0
    for p in state.phi:
        assert np.all(np.isfinite(p)) and np.all(p > 0)
    assert np.all(np.isfinite(state.r)) and np.all(state.r > 0)
    assert all(np.isfinite(v) for k, v in extra.items() if k.startswith("lr_"))
    # without noise the empty column becomes the prior mean a/A = uniform
    phi, rate, _ = tlasgr_columns(np.full((3, 1), 1 / 3) + [[0.2], [-0.1], [-0.1]],
                                  np.zeros((3, 1)), np.zeros(1), 1.0, 5.0, 0.5, None)
    np.testing.assert_allclose(phi[:, 0], 1 / 3)
    assert np.isfinite(rate).all()
    r, rate_r, _ = r_update(np.array([0.5, 0.2]), np.zeros(2), 0.0, 0.0, 1.0, 5.0, 1.0, 1.0,
                            None)
    np.testing.assert_allclose(r, 0.5)                     # (gamma0/K_L) / c0
    assert np.isfinite(rate_r)


def test_sgrld_dlda_fixed_point_without_noise():
    """§8.9: the expanded-mean drift's fixed point is phi_k = a/A and phi_hat_.k = K eta."""
    rng = np.random.default_rng(3)
    xbar = rng.integers(0, 20, size=(8, 3)).astype(float)
    phi_hat = rng.gamma(1.0, size=(8, 3))
    for _ in range(5000):
        phi_hat, _, floored = sgrld_columns(phi_hat, xbar, 0.005, 1.0, 0.5, None)
        assert floored == 0
    a = xbar + 0.5
    np.testing.assert_allclose(phi_hat / phi_hat.sum(axis=0), a / a.sum(axis=0), atol=1e-9)
    np.testing.assert_allclose(phi_hat.sum(axis=0), 8 * 0.5, rtol=1e-6)


def test_sgrld_dlda_step_equals_eq5_written_out():
    """One step of §8.9 (Cong 2017 eq. 5) entry by entry, with the mini-batch rescaling R_B and
    the noise sqrt(2 eps phi_hat) xi given explicitly."""
    rng = np.random.default_rng(5)
    V, K, eps, R, eta = 7, 3, 0.01, 12.5, 0.3
    phi_hat = rng.gamma(2.0, size=(V, K))
    xbar = rng.integers(0, 6, size=(V, K)).astype(float)
    xi = rng.standard_normal((V, K))
    got, rate, floored = sgrld_columns(phi_hat, xbar, eps, R, eta, xi.copy())
    want = np.empty((V, K))
    for k in range(K):
        col_total = sum(phi_hat[v, k] for v in range(V))
        x_total = sum(xbar[v, k] for v in range(V))
        for v in range(V):
            phi_vk = phi_hat[v, k] / col_total
            drift = (R * xbar[v, k] + eta) - (R * x_total + col_total) * phi_vk
            want[v, k] = max(abs(phi_hat[v, k] + eps * drift
                                 + np.sqrt(2.0 * eps * phi_hat[v, k]) * xi[v, k]), 1e-300)
    np.testing.assert_allclose(got, want, rtol=1e-12)
    np.testing.assert_allclose(rate, eps / phi_hat.sum(axis=0), rtol=1e-14)
    assert floored == 0
