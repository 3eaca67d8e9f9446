"""The upward-downward kernel of deep LDA (docs/algorithms.md §8.4): kernel = NumPy twin under the
§12.3 draw contracts, threads 1 = 2, CRT mean (oracle b), per-document count invariants
(oracle c), Geweke joint-distribution test (oracle a), fallbacks and floors."""
from __future__ import annotations

import numpy as np
import pytest
from scipy.special import digamma

from tests.dlda._helpers import (
    flat,
    gens,
    initial_state,
    n_stats,
    pcg,
    random_csr,
    random_phis,
    sizes_of,
)
from tests.reference import dlda as ref
from topictk.inference.dlda import _dlda

HYPER = np.array([0.5, 0.7, 1.0, 1.3])


def _call(entry, csr, phis, r, theta, c, bounds, seed, threads, hyper=HYPER, **kw):
    indptr, indices, counts = csr
    return entry(indptr, indices, counts, flat(phis), sizes_of(phis), r, hyper, theta, c,
                 chunk_bounds=bounds, streams=pcg(seed, bounds.size - 1), threads=threads, **kw)


def _train(csr, phis, r, theta, c, n_iter, n_burn, pc_start, bounds, seed, threads,
           hyper=HYPER):
    """The training entry point: statistics and q sums after ``n_burn``."""
    stats, qsum = np.zeros(n_stats(phis), np.int64), np.zeros(csr[0].size - 1)
    fb, fl = _call(_dlda.train_chains, csr, phis, r, theta, c, bounds, seed, threads, hyper,
                   n_iter=n_iter, n_burn=n_burn, pc_start=pc_start, stats=stats, qsum=qsum)
    return {"stats": stats, "qsum": qsum, "fallbacks": fb, "floored": fl}


def _evaluate(csr, phis, r, theta, c, n_iter, pc_start, bounds, seed, threads, held,
              acc_burn, acc_thin):
    """The evaluation entry point: held-out rate sums."""
    hptr, hidx = held
    racc, tacc = np.zeros(hidx.size), np.zeros(csr[0].size - 1)
    fb, fl = _call(_dlda.evaluate_chains, csr, phis, r, theta, c, bounds, seed, threads,
                   n_iter=n_iter, pc_start=pc_start, held_indptr=hptr, held_indices=hidx,
                   racc=racc, tacc=tacc, acc_burn=acc_burn, acc_thin=acc_thin)
    return {"racc": racc, "tacc": tacc, "fallbacks": fb, "floored": fl}


@pytest.mark.parametrize("entry", ["train", "evaluate", "infer"])
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("layers", [[4], [5, 3], [5, 4, 2]])
def test_local_chains_equal_reference(seed, layers, threads, entry):
    rng = np.random.default_rng(seed)
    V, J = 10, 11
    phis = random_phis(rng, V, layers)
    r = rng.random(layers[-1]) + 0.05
    csr = random_csr(rng, J, V)
    held = random_csr(rng, J, V, max_entries=3)[:2]
    bounds = np.array([0, 4, 8, J], np.int64)
    theta, c = initial_state(J, layers)
    theta_ref, c_ref = theta.copy(), c.copy()
    net = ref.Net(phis, r, HYPER)
    if entry == "train":
        out = _train(csr, phis, r, theta, c, 9, 4, 3, bounds, seed, threads)
        want = ref.local_chains(*csr, net, theta_ref, c_ref, 9, 4, 3, gens(seed, 3), bounds)
        np.testing.assert_array_equal(out["stats"], ref.flatten_stats(want["stats"]))
        np.testing.assert_array_equal(out["qsum"], want["qsum"])
    elif entry == "evaluate":
        out = _evaluate(csr, phis, r, theta, c, 9, 3, bounds, seed, threads, held, 5, 2)
        want = ref.local_chains(*csr, net, theta_ref, c_ref, 9, 9, 3, gens(seed, 3), bounds,
                                False, held[0], held[1], 5, 2)
        for key in ("racc", "tacc"):
            np.testing.assert_array_equal(out[key], want[key])
    else:
        fb, fl = _call(_dlda.infer_chains, csr, phis, r, theta, c, bounds, seed, threads,
                       n_iter=9, pc_start=3)
        out = {"fallbacks": fb, "floored": fl}
        want = ref.local_chains(*csr, net, theta_ref, c_ref, 9, 9, 3, gens(seed, 3), bounds,
                                False)
    np.testing.assert_array_equal(theta, theta_ref)
    np.testing.assert_array_equal(c, c_ref)
    assert (out["fallbacks"], out["floored"]) == (want["fallbacks"], want["floored"])
    assert np.all(theta > 0) and np.all(np.isfinite(theta)) and np.all(c > 0)


@pytest.mark.parametrize("threads", [1, 2])
def test_gibbs_passes_equal_reference(seed, threads):
    rng = np.random.default_rng(seed)
    V, J, layers = 9, 13, [4, 3]
    phis = random_phis(rng, V, layers)
    r = rng.random(layers[-1]) + 0.1
    indptr, indices, counts = random_csr(rng, J, V)
    bounds = np.array([0, 5, 9, J], np.int64)
    theta, c = initial_state(J, layers)
    theta[:] = rng.gamma(1.0, size=theta.shape)
    c[:] = rng.gamma(2.0, size=c.shape)
    theta_ref, c_ref = theta.copy(), c.copy()
    doc_m = np.zeros((J, sum(layers)), np.int32)
    stats, qcur = np.zeros(n_stats(phis), np.int64), np.zeros(J)
    streams = pcg(seed, 3)
    fb = _dlda.gibbs_upward(indptr, indices, counts, flat(phis), sizes_of(phis), r, theta, c,
                            doc_m, stats, qcur, bounds, streams, threads)
    rngs = [np.random.Generator(s) for s in pcg(seed, 3)]
    st_ref, ms, q_ref, fb_ref = ref.gibbs_upward(indptr, indices, counts,
                                                 ref.Net(phis, r, HYPER), theta_ref, c_ref,
                                                 rngs, bounds)
    np.testing.assert_array_equal(stats, ref.flatten_stats(st_ref))
    np.testing.assert_array_equal(qcur, q_ref)
    np.testing.assert_array_equal(doc_m, np.array([np.concatenate(m) for m in ms]))
    assert fb == fb_ref
    phis2 = random_phis(rng, V, layers)
    fl = _dlda.gibbs_downward(flat(phis2), sizes_of(phis2), r, HYPER, theta, c, doc_m, bounds,
                              streams, threads)
    fl_ref = ref.gibbs_downward(ref.Net(phis2, r, HYPER), theta_ref, c_ref, ms, rngs, bounds)
    np.testing.assert_array_equal(theta, theta_ref)
    np.testing.assert_array_equal(c, c_ref)
    assert fl == fl_ref


def test_crt_mean():
    """Oracle (b): with one first-layer topic, m^(1) = N_j and the top counts are
    CRT(N_j, r); their mean is r (psi(r + m) - psi(r))."""
    J = 20000
    for r_value, m in [(0.3, 1), (0.3, 7), (2.0, 5), (2.0, 60)]:
        indptr = np.arange(J + 1, dtype=np.int64)
        indices = np.zeros(J, np.int32)
        counts = np.full(J, m, np.int32)
        phis = [np.ones((1, 1))]
        theta, c = initial_state(J, [1])
        bounds = np.array([0, J // 2, J], np.int64)
        out = _train((indptr, indices, counts), phis, np.array([r_value]), theta, c, 1, 0, 1,
                     bounds, 3, 1)
        mean = out["stats"][-1] / J
        expected = r_value * (digamma(r_value + m) - digamma(r_value))
        p = r_value / (r_value + np.arange(m))
        se = np.sqrt((p * (1 - p)).sum() / J)
        assert abs(mean - expected) < 4 * se + 1e-12, (r_value, m, mean, expected)


def test_per_document_count_invariants(seed):
    """Oracle (c): one collected iteration of one document at a time."""
    rng = np.random.default_rng(seed)
    V, layers = 12, [6, 4, 3]
    phis = random_phis(rng, V, layers)
    r = rng.random(3) + 0.2
    for _ in range(20):
        indptr, indices, counts = random_csr(rng, 1, V, max_entries=8, max_count=6)
        theta, c = initial_state(1, layers)
        out = _train((indptr, indices, counts), phis, r, theta, c, 4, 3, 1,
                          np.array([0, 1], np.int64), int(rng.integers(1 << 30)), 1)
        stats = out["stats"]
        X, pos = [], 0
        for p in phis:
            X.append(stats[pos:pos + p.size].reshape(p.shape))
            pos += p.size
        top = stats[pos:]
        data = np.zeros(V, np.int64)
        data[indices] = counts
        np.testing.assert_array_equal(X[0].sum(axis=1), data)      # sum_k x_vk^(1) = x_v
        m = X[0].sum(axis=0)
        assert m.sum() == counts.sum()                               # sum_k m_k^(1) = N_j
        for l in range(1, len(layers)):
            x_in = X[l].sum(axis=1)                                  # x_v^(l+1)
            assert np.all((x_in >= 1) == (m > 0))                    # 1 <= x <= m when m > 0
            assert np.all(x_in <= m)
            m = X[l].sum(axis=0)                                     # m_k^(l+1)
        assert np.all((top >= 1) == (m > 0)) and np.all(top <= m)


def test_unusable_weights_fall_back_to_uniform_and_are_counted():
    rng = np.random.default_rng(1)
    V, layers = 6, [3, 2]
    phis = random_phis(rng, V, layers)
    r = np.array([0.5, 0.5])
    csr = (np.array([0, 2, 3], np.int64), np.array([0, 4, 2], np.int32),
           np.array([3, 1, 2], np.int32))
    theta, c = initial_state(2, layers)
    theta[:, :3] = [[0.0, 0.0, 0.0], [np.inf, 1.0, 1.0]]            # total 0 and infinite
    theta_ref, c_ref = theta.copy(), c.copy()
    bounds = np.array([0, 1, 2], np.int64)
    out = _train(csr, phis, r, theta, c, 1, 0, 1, bounds, 9, 1)
    want = ref.local_chains(*csr, ref.Net(phis, r, HYPER), theta_ref, c_ref, 1, 0, 1,
                            gens(9, 2), bounds)
    assert out["fallbacks"] == want["fallbacks"] == 3                # one per (v, j)
    np.testing.assert_array_equal(theta, theta_ref)
    assert np.all(np.isfinite(theta)) and np.all(theta > 0)


def test_underflowing_gamma_draws_are_floored_and_counted():
    rng = np.random.default_rng(2)
    V, layers = 8, [4, 3]
    phis = random_phis(rng, V, layers)
    r = np.full(3, 1e-6)                            # shapes ~1e-6: most draws underflow
    csr = random_csr(rng, 20, V)
    theta, c = initial_state(20, layers)
    out = _train(csr, phis, r, theta, c, 5, 0, 1, np.array([0, 10, 20], np.int64), 4, 2)
    assert out["floored"] > 0
    assert np.all(theta >= 1e-300) and np.all(np.isfinite(theta)) and not np.isnan(theta).any()


def _geweke(seed: int, n_chains: int, n_steps: int, n_forward: int):
    """Oracle (a): L = 2, V = 6, K = (3, 2), globals fixed, a0 = b0 = 2, e0 = f0 = 6.
    Forward draws from eq. 8.1 against successive-conditional draws (one local iteration
    given x, then x ~ Pois(Phi^(1) theta^(1))), chains started from forward draws.
    Returns the largest quartile deviation in units of the forward inter-quartile range."""
    rng = np.random.default_rng(seed)
    a0 = b0 = 2.0
    e0 = f0 = 6.0
    hyper = np.array([a0, b0, e0, f0])
    phi1 = rng.dirichlet(np.ones(6), size=3).T                     # (6, 3)
    phi2 = rng.dirichlet(np.ones(3), size=2).T                     # (3, 2)
    r = np.array([1.5, 2.5])

    def forward(n):
        p2 = rng.beta(a0, b0, n)
        c2 = (1 - p2) / p2
        c3 = rng.gamma(e0, 1 / f0, n)
        th2 = rng.gamma(np.broadcast_to(r, (n, 2))) / c3[:, None]
        th1 = rng.gamma(th2 @ phi2.T) / c2[:, None]
        return {"c3": c3[:, None], "theta2": th2, "p2": p2[:, None], "theta1": th1}

    fwd = forward(n_forward)
    start = forward(n_chains)
    theta = np.ascontiguousarray(np.concatenate([start["theta1"], start["theta2"]], axis=1))
    theta = np.maximum(theta, 1e-300)
    c = np.ascontiguousarray(np.stack([(1 - start["p2"][:, 0]) / start["p2"][:, 0],
                                       start["c3"][:, 0]], axis=1))
    flat_phi = np.concatenate([phi1.ravel(), phi2.ravel()])
    sizes = np.array([6, 3, 2], np.int64)
    bounds = np.arange(0, n_chains + 1, 50, dtype=np.int64)
    draws = {k: [] for k in fwd}
    for step in range(n_steps):
        x = rng.poisson(theta[:, :3] @ phi1.T)                      # (J, 6)
        rows, cols = np.nonzero(x)
        indptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=n_chains))])
        _dlda.infer_chains(indptr.astype(np.int64), cols.astype(np.int32),
                           x[rows, cols].astype(np.int32), flat_phi, sizes, r, hyper, theta,
                           c, n_iter=1, pc_start=0, chunk_bounds=bounds,
                           streams=pcg(seed * 1000 + step, bounds.size - 1), threads=1)
        draws["c3"].append(c[:, 1:].copy())
        draws["theta2"].append(theta[:, 3:].copy())
        draws["p2"].append(1 / (1 + c[:, :1]))
        draws["theta1"].append(theta[:, :3].copy())
    worst = 0.0
    for key, f in fwd.items():
        s = np.concatenate(draws[key])
        qf = np.quantile(f, [0.25, 0.5, 0.75], axis=0)
        qs = np.quantile(s, [0.25, 0.5, 0.75], axis=0)
        worst = max(worst, float(np.max(np.abs(qf - qs) / (qf[2] - qf[0]))))
    return worst


def test_geweke_local_step(seed):
    """Fast variant of oracle (a): 2 * 10^5 successive-conditional draws from 20,000 short
    chains (10 steps each) started at forward draws, against 2 * 10^5 forward draws. Short
    chains keep the Monte Carlo error of the quartiles near 1 % of the IQR (long chains mix
    slowly along the theta^(1) / c^(2) scale); a 10 % error in e0 or a0 gives 18 % or 7 %."""
    assert _geweke(seed, 20000, 10, 200000) < 0.05


@pytest.mark.slow
def test_geweke_local_step_long_chains(seed):
    """Oracle (a) with long chains: 10,000 chains x 200 steps against 10^6 forward draws."""
    assert _geweke(seed, 10000, 200, 1000000) < 0.05
