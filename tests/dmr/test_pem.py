"""Particle EM (docs/algorithms.md §10): the tempered E-step kernel against its NumPy twin, one EM
iteration against the reference, the §10 oracles (a)-(e), resume = uninterrupted, threads 1 = 2
and the config checks."""
from __future__ import annotations

import json

import numpy as np
import pytest
from scipy.special import digamma

from tests.fixtures import planted_corpus, write_token_store
from tests.reference import pem as ref
from tests.reference import vb as vb_ref
from topictk.corpus.store import CorpusStore
from topictk.errors import ConfigError
from topictk.inference.variational import _pem, _vb
from topictk.inference.base import EvaluationSet as HeldOut
from topictk.inference.variational.pem import (
    PEMDriver,
    particle_weights,
    tempered_objective,
    tempered_weights,
)
from topictk.inference.registry import load_config
from topictk.inference.variational.template import newton_direction
from topictk.inference.variational.vb import VBDriver
from topictk.rundir.checkpoint import load_arrays
from topictk.streams import Streams
from topictk.training.run import train

START = {"cold": 0, "warm": 1, "best": 2}


def _csr(rng, n_docs=25, n_words=18):
    indptr, indices, counts = [0], [], []
    for _ in range(n_docs):
        m = int(rng.integers(1, 9))
        words = np.sort(rng.choice(n_words, size=m, replace=False))
        indices.extend(words)
        counts.extend(rng.integers(1, 5, m))
        indptr.append(len(indices))
    return (np.array(indptr, np.int64), np.array(indices, np.int32),
            np.array(counts, np.int32))


def _kernel(indptr, indices, counts, phi, alpha, gamma, T, start, threads, tol=1e-6,
            max_iter=50):
    W, shift = tempered_weights(phi, T)
    gamma = gamma.copy()
    sstats = np.zeros(phi.shape)
    bounds = np.zeros(indptr.size - 1)
    its = np.zeros(indptr.size - 1, np.int32)
    _pem.e_step_tempered(indptr, indices, counts, W, shift, alpha, gamma, T, START[start], tol,
                         max_iter, sstats, bounds, its, threads)
    return gamma, sstats, bounds, its


# ------------------------------------------------------------------ kernel = twin
@pytest.mark.parametrize("start", ["cold", "warm", "best"])
@pytest.mark.parametrize("T", [0.0, 0.4, 1.0, 2.5])
def test_tempered_e_step_equals_reference(seed, T, start):
    rng = np.random.default_rng(seed)
    indptr, indices, counts = _csr(rng)
    K = 4
    phi = rng.dirichlet(np.full(18, 0.5), size=K).T.copy()          # (V, K)
    alpha = rng.random(K) + 0.05
    gamma0 = rng.random((indptr.size - 1, K)) * 5 + alpha
    g1, ss1, b1, it1 = _kernel(indptr, indices, counts, phi, alpha, gamma0, T, start, 1)
    g2, ss2, b2, it2 = _kernel(indptr, indices, counts, phi, alpha, gamma0, T, start, 2)
    for x, y in ((g1, g2), (ss1, ss2), (b1, b2), (it1, it2)):      # threads change nothing
        np.testing.assert_array_equal(x, y)
    if start == "best":
        # the better of the cold and the warm run of every document (warm on ties); both
        # converge near the same point, so rounding may pick the other one in the twin
        gc, _, bc, _ = _kernel(indptr, indices, counts, phi, alpha, gamma0, T, "cold", 1)
        gw, _, bw, _ = _kernel(indptr, indices, counts, phi, alpha, gamma0, T, "warm", 1)
        cold = bc > bw
        np.testing.assert_array_equal(g1, np.where(cold[:, None], gc, gw))
        np.testing.assert_array_equal(b1, np.maximum(bc, bw))
        return
    g, ss, b, it = ref.e_step_tempered(indptr, indices, counts, np.log(phi), alpha, gamma0, T,
                                       start, 1e-6, 50)
    np.testing.assert_allclose(g1, g, rtol=1e-10)
    np.testing.assert_allclose(ss1, ss, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(b1, b, rtol=1e-10)
    np.testing.assert_array_equal(it1, it)
    # every token is assigned once
    assert ss1.sum() == pytest.approx(counts.sum(), rel=1e-12)


def test_tempered_kernel_at_one_is_the_vb_kernel(seed):
    rng = np.random.default_rng(seed)
    indptr, indices, counts = _csr(rng)
    K = 5
    phi = rng.dirichlet(np.full(18, 0.3), size=K).T.copy()
    alpha = np.full(K, 0.1)
    gamma0 = np.ones((indptr.size - 1, K))
    g1, ss1, b1, _ = _kernel(indptr, indices, counts, phi, alpha, gamma0, 1.0, "cold", 1,
                             tol=1e-3, max_iter=100)
    B, shift, _ = vb_ref.expected_log_topics(phi, None, 0.0, 1.0, None, False, 0.0)
    g2 = gamma0.copy()
    ss2 = np.zeros(phi.shape)
    b2 = np.zeros(indptr.size - 1)
    _vb.e_step(indptr, indices, counts, B, shift, alpha, g2, 0, 1e-3, 100, ss2, b2, None, 1)
    np.testing.assert_allclose(g1, g2, rtol=1e-12)
    np.testing.assert_allclose(ss1, ss2, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(b1, b2, rtol=1e-12)


# ------------------------------------------------------------------------ drivers
@pytest.fixture(scope="module")
def planted_store(tmp_path_factory):
    corpus = planted_corpus(seed=7, n_docs=160)
    observed = [d[: int(0.8 * d.size)] for d in corpus.docs[:20]]
    heldout = [d[int(0.8 * d.size):] for d in corpus.docs[:20]]
    path = tmp_path_factory.mktemp("pem") / "store"
    write_token_store(path, corpus.docs[20:], 50, test_observed=observed, test_heldout=heldout)
    return path


def _config(store, out, algorithm="pem", model=None, training=None, **inference):
    inf = {"algorithm": algorithm, "iterations": 12}
    inf.update(inference)
    return load_config(None, raw={
        "corpus": str(store), "output": str(out),
        "model": {"topics": 5, "alpha": "auto", **(model or {})}, "inference": inf,
        "training": {"seed": 3, "eval_every": 4, "checkpoint_every": 4, **(training or {})}})


@pytest.mark.parametrize("start", ["warm", "best"])
def test_a_one_particle_at_unit_temperature_is_unsmoothed_vb(planted_store, tmp_path, seed,
                                                             start):
    """§10 oracle (a): P = 1, T = 1 reproduces unsmoothed VB-EM (§3) exactly: same init, same
    phi, gamma, alpha and bound after every iteration, same held-out probabilities."""
    store = CorpusStore.open(planted_store)
    vb = VBDriver(_config(planted_store, tmp_path / "vb", algorithm="vb", smoothed=False,
                          estep_start=start, tol=0), store, streams=Streams(seed))
    pem = PEMDriver(_config(planted_store, tmp_path / "pem", particles=1, temperature=1.0,
                            estep_start=start, tol=0), store, streams=Streams(seed))
    s_vb, s_pem = vb.init_state(), pem.init_state()
    np.testing.assert_array_equal(s_vb.lam, s_pem.phi)
    np.testing.assert_array_equal(s_vb.gamma, s_pem.gamma[0])
    from topictk.inference.base import EvaluationSet as _TestSet
    test = _TestSet.from_store(store)
    for t in range(8):
        vb.step(s_vb, t)
        pem.step(s_pem, t)
        np.testing.assert_array_equal(s_vb.lam, s_pem.phi)
        np.testing.assert_array_equal(s_vb.gamma, s_pem.gamma[0])
        np.testing.assert_array_equal(s_vb.alpha, s_pem.alpha)
        assert s_vb.bound == s_pem.bound
        assert vb.objective(s_vb) == pem.objective(s_pem)
    assert not np.allclose(s_vb.alpha, 0.1)                    # alpha was learnt
    np.testing.assert_array_equal(vb.heldout_probabilities(s_vb, None, test, 0),
                                  pem.heldout_probabilities(s_pem, None, test, 0))


def test_b_weights():
    """§10 oracle (b): omega sums to 1; L_1 - L_2 = T ln 3 gives (0.75, 0.25)."""
    for T in (0.5, 1.0, 7.0):
        omega = particle_weights(np.array([-1e6 + T * np.log(3.0), -1e6]), T)
        np.testing.assert_allclose(omega, [0.75, 0.25], rtol=1e-9)
    omega = particle_weights(np.array([-3.0, -1.0, -2.0, -1.5]), 2.0)
    assert omega.sum() == pytest.approx(1.0, abs=1e-15)
    np.testing.assert_allclose(omega, ref.particle_weights([-3.0, -1.0, -2.0, -1.5], 2.0))
    # L_T at the weights is the maximum over omega: T log sum_p exp(L_p / T)
    L = np.array([-3.0, -1.0, -2.0])
    assert tempered_objective(L, particle_weights(L, 2.0), 2.0) == pytest.approx(
        2.0 * np.log(np.sum(np.exp(L / 2.0))), rel=1e-12)


@pytest.mark.parametrize("T", [1.0, 0.5, 0.0])
def test_c_objective_is_non_decreasing(planted_store, tmp_path, seed, T):
    """§10 oracle (c): L_T never decreases (alpha learnt, three particles)."""
    driver = PEMDriver(_config(planted_store, tmp_path / "r", particles=3, temperature=T, tol=0),
                       CorpusStore.open(planted_store), streams=Streams(seed))
    state = driver.init_state()
    values = []
    for t in range(15):
        driver.step(state, t)
        state.check_invariants()
        values.append(state.bound)
    diffs = np.diff(values)
    assert np.all(diffs >= -1e-9 * np.abs(values[1:])), diffs


def test_d_newton_direction_is_the_dense_solve(seed):
    """§10 oracle (d): the O(K) Newton direction with the omega-weighted statistic equals a
    dense solve of the K x K system."""
    rng = np.random.default_rng(seed)
    K, D = 6, 40
    alpha = rng.random(K) + 0.05
    gammas = rng.random((3, D, K)) * 10 + 0.1
    omega = rng.dirichlet(np.ones(3))
    from scipy.special import digamma
    S = sum(o * (digamma(g) - digamma(g.sum(axis=1, keepdims=True))).sum(axis=0)
            for o, g in zip(omega, gammas))
    g = D * (digamma(alpha.sum()) - digamma(alpha)) + S
    np.testing.assert_allclose(newton_direction(alpha, g, D),
                               vb_ref.newton_direction_dense(alpha, S, D), rtol=1e-10)


def test_e_zero_temperature_is_hard(seed):
    """§10 oracle (e): T = 0 gives one-hot mu (whole tokens per topic) and T -> 0 tends to it:
    at T = 1e-9 (where the shifted exponentials underflow and the kernel falls back to log
    space) gamma, the statistics and the bound equal those of T = 0; omega is one-hot."""
    rng = np.random.default_rng(seed)
    indptr, indices, counts = _csr(rng)
    K = 4
    phi = rng.dirichlet(np.full(18, 0.5), size=K).T.copy()
    alpha = np.full(K, 0.3)
    gamma0 = np.ones((indptr.size - 1, K))
    g0, ss0, b0, _ = _kernel(indptr, indices, counts, phi, alpha, gamma0, 0.0, "cold", 1)
    np.testing.assert_array_equal(ss0, np.round(ss0))          # whole tokens per topic
    g, ss, b, _ = _kernel(indptr, indices, counts, phi, alpha, gamma0, 1e-9, "cold", 2)
    assert np.all(np.isfinite(g)) and np.all(np.isfinite(ss)) and np.all(np.isfinite(b))
    np.testing.assert_allclose(g, g0, rtol=1e-9)
    np.testing.assert_allclose(ss, ss0, atol=1e-9)
    np.testing.assert_allclose(b, b0, rtol=1e-9)
    for d in range(indptr.size - 1):                            # the twin's mu is one-hot
        ids = indices[indptr[d]:indptr[d + 1]]
        _, mu, _, _ = ref.e_step_document(ids, counts[indptr[d]:indptr[d + 1]], np.log(phi),
                                          alpha, gamma0[d], 1e-9, 1e-6, 50)
        assert np.all(mu.max(axis=1) > 1 - 1e-9)
    assert list(particle_weights(np.array([-5.0, -2.0, -2.0 - 1e-9]), 0.0)) == [0, 1, 0]
    assert particle_weights(np.array([-5.0, -2.0, -2.1]), 1e-3).max() > 1 - 1e-12


def test_small_temperature_stays_finite(seed):
    """At T = 0.01 most shifted exponentials underflow; the log-space fallback keeps every
    number finite and equal to the twin."""
    rng = np.random.default_rng(seed)
    indptr, indices, counts = _csr(rng)
    K = 6
    phi = rng.dirichlet(np.full(18, 0.1), size=K).T.copy()
    alpha = np.full(K, 0.05)
    gamma0 = rng.random((indptr.size - 1, K)) * 3 + 0.05
    g, ss, b, _ = _kernel(indptr, indices, counts, phi, alpha, gamma0, 0.01, "warm", 1)
    gr, ssr, br, _ = ref.e_step_tempered(indptr, indices, counts, np.log(phi), alpha, gamma0,
                                         0.01, "warm", 1e-6, 50)
    np.testing.assert_allclose(g, gr, rtol=1e-9)
    np.testing.assert_allclose(ss, ssr, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(b, br, rtol=1e-9)


def test_tiny_temperature_weights_tend_to_the_zero_limit():
    """Dividing the bounds by T before subtracting their maximum gave inf - inf."""
    for T in (1e-300, 5e-324):
        np.testing.assert_array_equal(particle_weights(np.array([-5.0, -2.0, -2.1]), T),
                                      [0.0, 1.0, 0.0])
        np.testing.assert_array_equal(particle_weights(np.array([-3e5, -2e5, -2e5]), T),
                                      [0.0, 0.5, 0.5])             # T -> 0+ shares ties


@pytest.mark.parametrize("T", [1e-300, 1e-310, 5e-324])
def test_tiny_positive_temperature_runs_as_the_zero_limit(planted_store, tmp_path, seed, T):
    """A positive T far below any gap of the objective (here down to the smallest double)
    stays finite and gives the T = 0 run: one-hot weights but for documents where particles
    converged to the same bound (T -> 0+ shares those ties, T = 0 gives them to the first
    particle; the particles are the same there, so the statistics are too), the same topics,
    bound and held-out probabilities."""
    store = CorpusStore.open(planted_store)
    test = HeldOut.from_store(store)
    runs = []
    for temperature in (0.0, T):
        driver = PEMDriver(_config(planted_store, tmp_path / "r", particles=3,
                                   temperature=temperature, tol=0), store, streams=Streams(seed))
        state = driver.init_state()
        for t in range(6):
            driver.step(state, t)
            driver.check_state(state)
        runs.append((driver, state))
    (d0, s0), (d1, s1) = runs
    ties = np.any(s1.omega != s0.omega, axis=1)
    assert np.all(s0.omega.max(axis=1) == 1.0) and ties.sum() < ties.size
    np.testing.assert_array_equal(s1.omega[~ties], s0.omega[~ties])
    for d in np.flatnonzero(ties):                 # shared among particles at the same point
        shared = s1.omega[d] > 0
        assert s0.omega[d, np.argmax(shared)] == 1.0
        first = s1.gamma[np.argmax(shared), d]
        np.testing.assert_allclose(s1.gamma[shared, d], np.tile(first, (shared.sum(), 1)),
                                   rtol=1e-9)
    np.testing.assert_allclose(s1.phi, s0.phi, rtol=1e-9, atol=1e-300)
    np.testing.assert_allclose(s1.gamma, s0.gamma, rtol=1e-9)
    assert s1.bound == pytest.approx(s0.bound, rel=1e-12)
    np.testing.assert_allclose(d1.heldout_probabilities(s1, None, test, 0),
                               d0.heldout_probabilities(s0, None, test, 0), rtol=1e-9)


def test_tiny_positive_temperature_trains(planted_store, tmp_path):
    """The whole run (E-steps, weights, evaluation, checkpoints) at T = 5e-324: no overflow
    warning (warnings are errors here), every number finite."""
    train(_config(planted_store, tmp_path / "run", particles=2, temperature=5e-324), quiet=True)
    _, arrays = load_arrays(tmp_path / "run" / "model.npz")
    assert all(np.all(np.isfinite(arrays[k])) for k in ("phi", "gamma", "alpha", "omega"))
    perplexities = [json.loads(line)["perplexity_point"] for line in
                    (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert perplexities and all(np.isfinite(perplexities))


def test_em_iteration_equals_reference(planted_store, tmp_path, seed):
    """Two PEM iterations (P = 3, T = 0.7, alpha fixed) equal the reference iteration."""
    driver = PEMDriver(_config(planted_store, tmp_path / "r", model={"alpha": 0.2},
                               particles=3, temperature=0.7, tol=0, estep_tol=1e-8,
                               estep_max_iter=30),
                       CorpusStore.open(planted_store), streams=Streams(seed))
    state = driver.init_state()
    phi, gammas = state.phi.copy(), state.gamma.copy()
    for t in range(2):
        driver.step(state, t)
        phi_next, gammas, omega, value = ref.em_iteration(
            driver.indptr, driver.indices, driver.counts, phi, gammas, state.alpha, 0.7,
            "warm", 1e-8, 30)
        np.testing.assert_allclose(state.gamma, gammas, rtol=1e-9)
        np.testing.assert_allclose(state.omega, omega, rtol=1e-9, atol=1e-12)
        assert state.bound == pytest.approx(value, rel=1e-11)
        np.testing.assert_allclose(state.phi, phi_next, rtol=1e-9, atol=1e-15)
        phi = phi_next


@pytest.mark.parametrize("particles", [1, 3])
def test_em_iterations_in_blocks_equal_the_reference_and_one_block(planted_store, tmp_path,
                                                                   particles):
    """With ``inference.chunks: 4`` every particle's E-step and the weighted statistics run
    block by block, the statistics added in block order: the iterations are the reference's
    and, but for the order of the statistics' sums, the one-block run's; at 2 threads the
    same numbers as at 1."""
    store = CorpusStore.open(planted_store)
    extra = {"model": {"alpha": 0.2}, "particles": particles, "temperature": 0.7, "tol": 0,
             "estep_tol": 1e-8, "estep_max_iter": 30}
    drivers = [PEMDriver(_config(planted_store, tmp_path / name, **extra, **more), store,
                         threads, streams=Streams(4))
               for name, more, threads in (("one", {}, 1), ("four", {"chunks": 4}, 1),
                                           ("four-t2", {"chunks": 4}, 2))]
    states = [driver.init_state() for driver in drivers]
    phi, gammas = states[0].phi.copy(), states[0].gamma.copy()
    for t in range(3):
        for driver, state in zip(drivers, states):
            driver.step(state, t)
        phi, gammas, omega, value = ref.em_iteration(
            drivers[0].indptr, drivers[0].indices, drivers[0].counts, phi, gammas,
            states[0].alpha, 0.7, "warm", 1e-8, 30)
        one, four, four_t2 = states
        for key in ("phi", "gamma", "omega", "particle_bounds"):
            np.testing.assert_array_equal(getattr(four, key), getattr(four_t2, key))
            np.testing.assert_allclose(getattr(four, key), getattr(one, key), rtol=1e-11,
                                       atol=1e-15)
        np.testing.assert_allclose(four.gamma, gammas, rtol=1e-9)
        np.testing.assert_allclose(four.phi, phi, rtol=1e-9, atol=1e-15)
        assert four.bound == pytest.approx(value, rel=1e-11)


def test_particles_start_the_same_whatever_their_number(planted_store, tmp_path):
    store = CorpusStore.open(planted_store)
    two = PEMDriver(_config(planted_store, tmp_path / "a", particles=2), store, streams=Streams(1))
    four = PEMDriver(_config(planted_store, tmp_path / "b", particles=4), store, streams=Streams(1))
    a, b = two.init_state(), four.init_state()
    np.testing.assert_array_equal(a.gamma, b.gamma[:2])
    np.testing.assert_array_equal(a.phi, b.phi)
    assert not np.allclose(b.gamma[1], b.gamma[2])
    # every particle's gamma_d sums to alpha. + N_d
    np.testing.assert_allclose(b.gamma.sum(axis=2), (b.gamma[0].sum(axis=1))[None, :]
                               * np.ones((4, 1)), rtol=1e-12)


def test_resume_equals_uninterrupted_and_threads(planted_store, tmp_path):
    extra = {"particles": 2, "temperature": 0.8, "tol": 0}
    train(_config(planted_store, tmp_path / "full", **extra), quiet=True)
    train(_config(planted_store, tmp_path / "half", **{**extra, "iterations": 8}), quiet=True)
    train(_config(planted_store, tmp_path / "half", **extra), resume=True, quiet=True)
    train(_config(planted_store, tmp_path / "t2", training={"threads": 2}, **extra), quiet=True)
    _, a = load_arrays(tmp_path / "full" / "model.npz")
    lines = {}
    for name in ("full", "half", "t2"):
        _, b = load_arrays(tmp_path / name / "model.npz")
        for key in ("phi", "gamma", "alpha", "omega", "particle_bounds"):
            np.testing.assert_array_equal(a[key], b[key], err_msg=f"{name}: {key}")
        lines[name] = [(m["step"], m["perplexity_point"], m["train_bound_per_token"])
                       for m in map(json.loads,
                                    (tmp_path / name / "metrics.jsonl").read_text().splitlines())]
    assert lines["full"] == lines["half"] == lines["t2"]


def test_config_checks(planted_store, tmp_path):
    with pytest.raises(ConfigError, match=r"inference\.particles must be an integer >= 1; "
                                          r"got 0 \(<config>\)"):
        _config(planted_store, tmp_path / "x", particles=0)
    with pytest.raises(ConfigError, match=r"inference\.temperature must be a number in "
                                          r"\[0, 1000000\]; got -0\.5 \(<config>\)"):
        _config(planted_store, tmp_path / "x", temperature=-0.5)
    # T = 0 is the hard-assignment limit of §10.3, so it is accepted
    assert _config(planted_store, tmp_path / "x", temperature=0).inference.temperature == 0.0
    with pytest.raises(ConfigError, match=r"inference\.temperature must be a finite number "
                                          r"in \[0, 1000000\]; got inf \(<config>\)"):
        _config(planted_store, tmp_path / "x", temperature=float("inf"))
    # beyond 1e6 every weight is flat to double precision, and near 1e305 the E-step overflows
    with pytest.raises(ConfigError, match=r"got 1e\+308"):
        _config(planted_store, tmp_path / "x", temperature=1e308)


# ------------------------------------------- per-document weights, annealing, collapse, memory
def test_document_weights_equal_the_twin(seed):
    """omega_d = softmax_p(l_pd / T) for every document (§10.3), T = 0 one-hot per document;
    L_T at those weights is sum_d T logsumexp_p(l_pd / T)."""
    rng = np.random.default_rng(seed)
    bounds = rng.normal(-50, 3, size=(30, 4))
    for T in (0.0, 0.3, 1.0, 6.0):
        omega = particle_weights(bounds, T)
        np.testing.assert_allclose(omega, ref.particle_weights(bounds, T), rtol=1e-12,
                                   atol=1e-300)
        np.testing.assert_allclose(omega.sum(axis=1), 1.0, rtol=1e-14)
    np.testing.assert_array_equal(particle_weights(bounds, 0.0).argmax(axis=1),
                                  bounds.argmax(axis=1))
    from scipy.special import logsumexp
    assert tempered_objective(bounds, particle_weights(bounds, 2.0), 2.0) == pytest.approx(
        float(np.sum(2.0 * logsumexp(bounds / 2.0, axis=1))), rel=1e-12)


def _estep_outputs(indptr, indices, counts, phi, gammas, T, threads=1, start=1):
    """Every particle's E-step of its given gamma without an update, as the driver runs it (the
    VB kernel at T = 1, the tempered one otherwise): (pair_z (P, M), bounds (P, D), sstats of
    each particle (P, V, K), the word weights (table, shift), gammas after the call, doc_a
    (P, D, K))."""
    from topictk.inference.variational.pem import particle_estep_weights
    P, D, K = gammas.shape
    alpha = np.full(K, 0.2)
    weights = particle_estep_weights(phi, T)
    table, shift = weights
    pair_z = np.full((P, indices.size), -1.0)
    doc_a = np.full((P, D, K), -1.0)
    bounds = np.zeros((P, D))
    sstats = np.zeros((P,) + phi.shape)
    out = gammas.copy()
    for p in range(P):
        if T == 1.0:
            _vb.e_step(indptr, indices, counts, table, shift, alpha, out[p], start, 0.0, 0,
                       sstats[p], bounds[p], None, threads, pair_z=pair_z[p], doc_a=doc_a[p])
        else:
            _pem.e_step_tempered(indptr, indices, counts, table, shift, alpha, out[p], T, start,
                                 0.0, 0, sstats[p], bounds[p], None, threads, pair_z[p],
                                 doc_a[p])
    return pair_z, bounds, sstats, weights, out, doc_a


def _weighted(indptr, indices, counts, phi, gammas, omega, T, threads, wave=0, with_a=True):
    """The weighted statistics pass as the driver calls it, from the E-steps' own Z and A
    (``with_a`` False: A recomputed from gamma by the pass)."""
    pair_z, _, _, weights, _, doc_a = _estep_outputs(indptr, indices, counts, phi, gammas, T)
    LW, _ = tempered_weights(phi, T)
    sstats = np.zeros(phi.shape)
    _pem.weighted_statistics(indptr, indices, counts, LW, np.ascontiguousarray(gammas),
                             np.ascontiguousarray(omega), pair_z, T, sstats, threads, wave,
                             expweights=weights[0] if T == 1.0 else None,
                             doc_a=doc_a if with_a else None)
    return sstats


@pytest.mark.parametrize("T", [0.0, 1e-3, 0.6, 1.0])
def test_weighted_statistics_kernel_equals_the_twin(seed, T):
    """The statistics pass with per-document weights equals sum_p sum_d omega_dp n_dw mu_pdwk
    of the twin (mu recomputed from each particle's gamma), at 1 and 2 threads and in waves of
    any size, bit for bit between them, without touching gamma; T = 1e-3 sends entries down the
    log-space path, T = 1 reads the VB kernel's Z and table."""
    rng = np.random.default_rng(seed)
    indptr, indices, counts = _csr(rng)
    K, D = 4, indptr.size - 1
    phi = rng.dirichlet(np.full(18, 0.5), size=K).T.copy()
    gammas = rng.random((3, D, K)) * 4 + 0.2
    omega = rng.dirichlet(np.ones(3), size=D)
    omega[0] = [1.0, 0.0, 0.0]                       # a document of weight 0 adds nothing
    before = gammas.copy()
    got = {(threads, wave, with_a): _weighted(indptr, indices, counts, phi, gammas, omega, T,
                                              threads, wave, with_a)
           for threads in (1, 2) for wave in (0, 1, 7) for with_a in (True, False)}
    np.testing.assert_array_equal(gammas, before)
    for key, value in got.items():
        np.testing.assert_array_equal(value, got[1, 0, True], err_msg=str(key))
    want = ref.weighted_statistics(indptr, indices, counts, np.log(phi), gammas, omega, T)
    np.testing.assert_allclose(got[1, 0, True], want, rtol=1e-10, atol=1e-12)
    assert got[1, 0, True].sum() == pytest.approx(counts.sum(), rel=1e-12)


@pytest.mark.parametrize("T", [0.0, 1e-3, 0.6, 1.0])
@pytest.mark.parametrize("start", [1, 2])
def test_estep_pair_z_is_the_final_normaliser(seed, T, start):
    """pair_z is Z = sum_k A_k W_wk of every entry and doc_a the A of every document for the
    final gamma (0 where the entry is done in log space, and at T = 0), also under the
    best-of-both start, and asking for them changes no other output of the E-step."""
    rng = np.random.default_rng(seed)
    indptr, indices, counts = _csr(rng)
    K, D = 4, indptr.size - 1
    phi = rng.dirichlet(np.full(18, 0.4), size=K).T.copy()
    gammas = rng.random((2, D, K)) * 4 + 0.2
    pair_z, bounds, sstats, (table, _), after, doc_a = _estep_outputs(
        indptr, indices, counts, phi, gammas, T, start=start)
    assert np.all(pair_z >= 0.0)
    W = table if T == 1.0 else np.exp(table)
    for p in range(2):
        for d in range(D):
            g = after[p, d]
            elog = digamma(g) - digamma(g.sum())
            A = np.exp((elog - elog.max()) / T) if T > 0 else np.zeros(K)
            np.testing.assert_allclose(doc_a[p, d], A, rtol=1e-9)
            for j in range(indptr[d], indptr[d + 1]):
                if T == 0.0:
                    assert pair_z[p, j] == 0.0
                elif pair_z[p, j] > 0.0:
                    assert pair_z[p, j] == pytest.approx(float(A @ W[indices[j]]), rel=1e-13)
    if T == 1e-3:
        assert (pair_z == 0.0).any() and (pair_z > 0.0).any()
    # the same call without pair_z: every other output bit for bit the same
    alpha = np.full(K, 0.2)
    for p in range(2):
        g = gammas[p].copy()
        ss = np.zeros(phi.shape)
        b = np.zeros(D)
        LW, shift = tempered_weights(phi, T)
        if T == 1.0:
            from topictk.inference.variational.pem import particle_estep_weights
            B, sh = particle_estep_weights(phi, 1.0)
            _vb.e_step(indptr, indices, counts, B, sh, alpha, g, start, 0.0, 0, ss, b, None, 1)
        else:
            _pem.e_step_tempered(indptr, indices, counts, LW, shift, alpha, g, T, start, 0.0, 0,
                                 ss, b, None, 1)
        np.testing.assert_array_equal(g, after[p])
        np.testing.assert_array_equal(b, bounds[p])
        np.testing.assert_array_equal(ss, sstats[p])


@pytest.mark.parametrize("T", [0.0, 1e-3, 0.6, 1.0])
def test_weighted_statistics_of_one_particle_are_its_estep_statistics(seed, T):
    """One particle of weight 1: the pass equals the E-step kernel's own statistics of the same
    gamma (to rounding: the pass factors W out of the sum), and splitting the particles into
    separate calls adds up to the whole."""
    rng = np.random.default_rng(seed)
    indptr, indices, counts = _csr(rng, n_docs=40)
    K, D = 5, indptr.size - 1
    phi = rng.dirichlet(np.full(18, 0.3), size=K).T.copy()
    gammas = rng.random((3, D, K)) * 6 + 0.2
    omega = rng.dirichlet(np.ones(3), size=D)
    sstats = _estep_outputs(indptr, indices, counts, phi, gammas, T)[2]
    for threads in (1, 2):
        one = _weighted(indptr, indices, counts, phi, gammas[1:2], np.ones((D, 1)), T, threads)
        np.testing.assert_allclose(one, sstats[1], rtol=1e-12, atol=1e-12)
        whole = _weighted(indptr, indices, counts, phi, gammas, omega, T, threads)
        parts = sum(_weighted(indptr, indices, counts, phi, gammas[p:p + 1], omega[:, p:p + 1],
                              T, threads) for p in range(3))
        np.testing.assert_allclose(whole, parts, rtol=1e-12, atol=1e-12)


def test_weighted_statistics_checks_its_shapes():
    rng = np.random.default_rng(0)
    indptr, indices, counts = _csr(rng)
    D = indptr.size - 1
    LW = np.zeros((18, 3))
    gammas = np.ones((2, D, 3))
    z = np.ones((2, indices.size))

    def call(lw=LW, omega=np.ones((D, 2)) / 2, T=1.0, pair_z=z, W=None, A=None):
        _pem.weighted_statistics(indptr, indices, counts, lw, gammas, omega, pair_z, T,
                                 np.zeros((lw.shape[0], lw.shape[1])), 1, expweights=W,
                                 doc_a=A)

    with pytest.raises(ValueError, match="disagree on P"):
        call(omega=np.ones((D, 3)) / 3)
    with pytest.raises(ValueError, match="disagree on K"):
        call(lw=np.zeros((18, 4)))
    with pytest.raises(ValueError, match="temperature"):
        call(T=-1.0)
    with pytest.raises(ValueError, match="pair_z"):
        call(pair_z=np.ones((2, indices.size - 1)))
    with pytest.raises(ValueError, match="pair_z"):
        call(pair_z=np.ones((3, indices.size)))
    with pytest.raises(ValueError, match="expweights"):
        call(W=np.ones((17, 3)))
    with pytest.raises(ValueError, match="doc_a"):
        call(A=np.ones((2, D, 4)))


def test_annealed_temperature_schedule():
    from topictk.inference.variational.pem import annealed_temperature
    for t in range(12):
        assert annealed_temperature(t, 8.0, 1.0, 6) == pytest.approx(
            ref.annealed_temperature(t, 8.0, 1.0, 6), rel=1e-13)
    assert annealed_temperature(0, 8.0, 1.0, 6) == 8.0
    assert annealed_temperature(3, 8.0, 1.0, 6) == pytest.approx(8.0 ** 0.5)
    assert annealed_temperature(6, 8.0, 1.0, 6) == annealed_temperature(50, 8.0, 1.0, 6) == 1.0
    assert annealed_temperature(0, 8.0, 0.5, 0) == 0.5                # no annealing


def test_annealed_run_logs_its_temperature_and_waits_to_stop(planted_store, tmp_path):
    """The E-step of iteration t runs at T_t; the stopping rule does not fire while T
    changes (a large tol would stop at the second iteration otherwise)."""
    train(_config(planted_store, tmp_path / "r", particles=2, anneal_from=4.0, anneal_steps=4,
                  tol=0.5, training={"eval_every": 1, "checkpoint_every": 100}), quiet=True)
    lines = [json.loads(x) for x in (tmp_path / "r" / "metrics.jsonl").read_text().splitlines()]
    temps = [m["temperature"] for m in lines if "temperature" in m]   # until converged
    np.testing.assert_allclose(temps[:5], [4.0, 4.0 ** 0.75, 2.0, 4.0 ** 0.25, 1.0],
                               rtol=1e-12)
    assert all(not m["converged"] for m in lines[:5]) and lines[-1]["converged"]


def test_particle_distances_and_collapse_report(planted_store, tmp_path, seed):
    """Particles that meet are reported: the distance twin, and with cold E-step starts every
    particle follows particle 0 after one iteration, so P - 1 of them are logged as
    collapsed; warm starts keep them apart."""
    from topictk.inference.variational.pem import collapsed_particles, particle_distances
    rng = np.random.default_rng(seed)
    gammas = rng.random((4, 20, 5)) + 0.1
    gammas[3] = gammas[1] * 2.0                     # same theta-hat as particle 1
    dist = particle_distances(gammas)
    np.testing.assert_allclose(dist, ref.particle_distances(gammas), rtol=1e-12, atol=1e-15)
    assert collapsed_particles(dist, 1e-9) == 1 and collapsed_particles(dist[:1, :1], 1) == 0
    for start, collapsed in (("cold", 2), ("warm", 0)):
        train(_config(planted_store, tmp_path / start, particles=3, estep_start=start,
                      training={"eval_every": 4}), quiet=True)
        last = json.loads((tmp_path / start / "metrics.jsonl").read_text().splitlines()[-1])
        assert last["particles_collapsed"] == collapsed, (start, last)
        assert (last["particle_distance_min"] < 1e-3) == (start == "cold")


def test_particle_offset_starts_from_that_particle(planted_store, tmp_path):
    """A 1-particle run with particle_offset r starts where particle r of a larger run does
    (the restarts of best-of-P VB)."""
    store = CorpusStore.open(planted_store)
    four = PEMDriver(_config(planted_store, tmp_path / "a", particles=4), store,
                     streams=Streams(2)).init_state()
    for r in range(4):
        one = PEMDriver(_config(planted_store, tmp_path / "b", particles=1, particle_offset=r),
                        store, streams=Streams(2)).init_state()
        np.testing.assert_array_equal(one.gamma[0], four.gamma[r])
        np.testing.assert_array_equal(one.phi, four.phi)


def test_weighted_alpha_statistic(seed):
    from scipy.special import digamma

    from topictk.inference.variational.pem import weighted_elog_theta_sum
    rng = np.random.default_rng(seed)
    gammas = rng.random((3, 15, 4)) * 5 + 0.1
    omega = rng.dirichlet(np.ones(3), size=15)
    want = sum(omega[d, p] * (digamma(gammas[p, d]) - digamma(gammas[p, d].sum()))
               for p in range(3) for d in range(15))
    np.testing.assert_allclose(weighted_elog_theta_sum(gammas, omega), want, rtol=1e-12)


def test_annealing_must_end_at_a_positive_temperature(planted_store, tmp_path):
    with pytest.raises(ConfigError, match=r"inference\.temperature must be > 0 when "
                                          r"inference\.anneal_steps > 0 \(the annealed "
                                          r"temperature must end at a positive value\); got 0"):
        _config(planted_store, tmp_path / "x", temperature=0, anneal_steps=5)
    with pytest.raises(ConfigError, match=r"inference\.anneal_from must be a number in "
                                          r"\(0, 1000000\]; got 0"):
        _config(planted_store, tmp_path / "x", anneal_from=0, anneal_steps=5)


def test_particles_that_do_not_fit_in_memory_are_refused_first(planted_store, tmp_path,
                                                                monkeypatch):
    """The estimate is checked before anything is allocated, and the message gives it."""
    from topictk.inference.variational import pem
    monkeypatch.setattr(pem, "available_memory", lambda: 2 ** 20)
    monkeypatch.setattr(PEMDriver, "init_state", lambda self: pytest.fail("allocated"))
    with pytest.raises(ConfigError, match=r"inference\.particles = 1000: the particle states "
                                          r"need about 0\.\d\d GiB \(140 documents x 5 "
                                          r"topics x 1000 particles\) but 0\.00 GiB are "
                                          r"available; lower inference\.particles"):
        train(_config(planted_store, tmp_path / "big", particles=1000), quiet=True)
    assert not (tmp_path / "big" / "metrics.jsonl").exists()


def _alpha_newton_written_out(alpha, S, D):
    """§3.4 with a dense K x K solve: Newton steps alpha - s H^-1 g on
    L = D [lnG(alpha.) - sum lnG(alpha_k)] + sum (alpha_k - 1) S_k, s halved until alpha stays
    positive and L does not fall, at most 50 steps, stopping when max |s Delta| / alpha < 1e-8,
    clamped to [1e-10, 1e5]."""
    from scipy.special import gammaln, polygamma

    def L(a):
        return D * (gammaln(a.sum()) - gammaln(a).sum()) + np.dot(a - 1.0, S)

    alpha = np.array(alpha, dtype=np.float64)
    K = alpha.size
    for _ in range(50):
        g = D * (digamma(alpha.sum()) - digamma(alpha)) + S
        H = np.diag(-D * polygamma(1, alpha)) + D * polygamma(1, alpha.sum()) * np.ones((K, K))
        delta = np.linalg.solve(H, g)
        before, s = L(alpha), 1.0
        for _halving in range(31):
            new = alpha - s * delta
            if np.all(new > 0) and L(new) >= before - 1e-13 * abs(before):
                break
            s *= 0.5
        else:
            raise AssertionError("no Newton step kept alpha positive")
        change = np.max(np.abs(s * delta) / alpha)
        alpha = np.clip(new, 1e-10, 1e5)
        if change < 1e-8:
            break
    return alpha


@pytest.mark.parametrize("T", [1.0, 0.5])
def test_learnt_alpha_is_the_newton_step_on_the_particle_weighted_statistic(planted_store,
                                                                            tmp_path, seed, T):
    """With alpha learnt and three particles, every M-step's alpha is the §3.4 Newton
    maximiser for S_k = sum_p sum_d omega_dp (psi(gamma_pdk) - psi(gamma_pd.)), the gammas and
    weights of that iteration's E-step (§10.3), computed here in NumPy. The weights are not
    one-hot on particle 0, so alpha from particle 0's statistic alone is measurably another
    value."""
    driver = PEMDriver(_config(planted_store, tmp_path / "r", particles=3, temperature=T, tol=0),
                       CorpusStore.open(planted_store), streams=Streams(seed))
    state = driver.init_state()
    D = driver.n_docs
    for t in range(3):
        alpha_before = state.alpha.copy()
        driver.step(state, t)
        gamma, omega = state.gamma, state.omega                 # the E-step's, kept by the M-step
        assert gamma.shape[0] == 3 and omega.shape == (D, 3)
        elog = digamma(gamma) - digamma(gamma.sum(axis=2, keepdims=True))   # (P, D, K)
        S = np.einsum("dp,pdk->k", omega, elog)
        want = _alpha_newton_written_out(alpha_before, S, D)
        np.testing.assert_allclose(state.alpha, want, rtol=1e-9, err_msg=f"iteration {t}")
        # the statistic of particle 0 alone (weight 1 on every document) is another alpha
        assert omega[:, 0].max() - omega[:, 0].min() > 0.1
        first = _alpha_newton_written_out(alpha_before, elog[0].sum(axis=0), D)
        assert np.max(np.abs(first / want - 1.0)) > 1e-3, t
