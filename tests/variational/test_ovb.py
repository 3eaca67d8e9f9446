"""Online VB / SVI (docs/algorithms.md §5): lazy lambda against the dense NumPy twin, the batch-VB
special case, the mass invariant, epochs, config errors, memory, planted recovery, threads."""
from __future__ import annotations

import logging
import tracemalloc

import numpy as np
import pytest

from tests.fixtures import matched_l1, planted_corpus, write_token_store
from tests.reference import ovb as ref
from tests.reference import vb as vb_ref
from tests.variational.conftest import best_of_three, make_config, random_docs, run_driver
from topictk import streams as keys
from topictk.corpus.store import CorpusStore
from topictk.errors import ConfigError
from topictk.inference.minibatch import step_size
from topictk.inference.variational.ovb import OVBDriver, permute
from topictk.streams import Streams


def _driver(config, threads=1, seed=0):
    driver = OVBDriver(config, CorpusStore.open(config.corpus), threads, streams=Streams(seed))
    return driver, driver.init_state()


def _train_arrays(driver):
    t = driver.train
    return np.asarray(t.indptr), np.asarray(t.indices), np.asarray(t.counts)


@pytest.mark.parametrize("tau0,kappa", [(4.0, 0.6), (0.0, 0.9)])
def test_lazy_lambda_equals_dense_twin(tmp_path, seed, tau0, kappa):
    """§5 oracle (c): 100 lazy updates (14 epochs; a rho = 1 rescale when tau0 = 0) agree with
    the dense reference to 1e-12 relative."""
    small = planted_corpus(seed, n_docs=60, mean_length=30)
    store = write_token_store(tmp_path / "store", small.docs, 50)
    cfg = make_config(store, tmp_path / "run", "ovb", iterations=100,
                      inference={"batch_size": 8, "tau0": tau0, "kappa": kappa})
    driver, state = _driver(cfg, seed=seed)
    lam0 = state.lam().copy()
    for t in range(100):
        driver.step(state, t)
    main = np.random.PCG64(np.random.SeedSequence(entropy=seed, spawn_key=keys.MAIN))
    expected = ref.run(*_train_arrays(driver), lam0, state.alpha, state.beta, 100, 8, tau0,
                       kappa, main)
    assert np.abs(state.lam() - expected).max() <= 1e-12 * np.abs(expected).max()
    state.check_invariants()


def test_whole_corpus_with_rho_one_is_a_batch_vb_iteration(planted_store, tmp_path):
    """§5 oracle (a): |B| = D and rho = 1 (tau0 = 1, kappa = 0) give the batch VB-EM update with
    cold starts."""
    cfg = make_config(planted_store, tmp_path / "run", "ovb", iterations=1,
                      inference={"batch_size": 450})
    driver, state = _driver(cfg)
    driver.tau0, driver.kappa = 1.0, 0.0
    lam = state.lam().copy()
    for t in range(2):
        driver.step(state, t)
        lam, _, _ = vb_ref.em_iteration(*_train_arrays(driver), lam,
                                        np.zeros((450, driver.K)), state.alpha, state.beta,
                                        1e-3, 100, start="cold")
        assert np.abs(state.lam() - lam).max() <= 1e-12 * np.abs(lam).max()


def test_mass_invariant(planted_store, tmp_path, seed):
    """§5 oracle (b): sum(lambda - beta) = (1 - rho) previous + rho R_B sum_{d in B} N_d."""
    cfg = make_config(planted_store, tmp_path / "run", "ovb", iterations=30,
                      inference={"batch_size": 50, "tau0": 2.0, "kappa": 0.8})
    driver, state = _driver(cfg, seed=seed)
    for t in range(30):
        before = float((state.lam() - state.beta).sum())
        info = driver.step(state, t)
        rho = step_size(t, 2.0, 0.8)
        expected = (1 - rho) * before + rho * (450 / 50) * info.tokens
        assert float((state.lam() - state.beta).sum()) == pytest.approx(expected, rel=1e-12)


def test_planted_recovery_after_20_epochs(planted, planted_store, tmp_path, seed):
    """§5 oracle (d) (best of three starts, see
    :func:`tests.variational.conftest.best_of_three`). Correct runs, seeds 0-9: matched L1
    0.067 to 0.073; the bound is that maximum plus a quarter, rounded up."""
    cfg = make_config(planted_store, tmp_path / "run", "ovb", iterations=280,
                      inference={"batch_size": 32, "tau0": 1.0, "kappa": 0.7})
    driver, state = best_of_three(cfg, 280, seed)      # 14 batches per epoch
    assert state.epoch == 19
    assert matched_l1(driver.topic_word(state), planted.phi) < 0.10
    state.check_invariants()


def test_learning_alpha_and_eta(planted, planted_store, tmp_path, seed):
    cfg = make_config(planted_store, tmp_path / "run", "ovb", iterations=280,
                      model={"alpha": "auto", "beta": 0.5},
                      inference={"batch_size": 32, "tau0": 1.0, "kappa": 0.7, "learn_eta": True})
    driver, state = best_of_three(cfg, 280, seed, each=lambda d, s, t: s.check_invariants())
    # correct runs, seeds 0-9: 0.065 to 0.066; the bound is that plus a quarter, rounded up
    assert matched_l1(driver.topic_word(state), planted.phi) < 0.09
    # planted alpha* = 0.2; eta moves down from 0.5 towards the sparse planted topics
    assert np.all((state.alpha > 0.1) & (state.alpha < 0.4))
    assert 0 < state.beta < 0.5


def test_objective_is_a_per_token_bound(planted_store, tmp_path):
    cfg = make_config(planted_store, tmp_path / "run", "ovb", iterations=50,
                      inference={"batch_size": 64, "tau0": 1.0})
    values = []
    driver, state = run_driver(cfg, 50, each=lambda d, s, t: values.append(d.objective(s)))
    assert all(np.isfinite(values))
    assert -6 < np.mean(values[-10:]) < -2 and np.mean(values[-10:]) > np.mean(values[:3])


# ------------------------------------------------------------------------------ batches
def test_epoch_permutation_is_a_bijection(seed):
    rng = np.random.default_rng(seed)
    for n in [1, 2, 3, 7, 64, 65, 450, 1000, int(rng.integers(2, 5000))]:
        k = rng.integers(0, 2**63, size=4, dtype=np.uint64)
        perm = permute(np.arange(n), n, k)
        assert np.array_equal(np.sort(perm), np.arange(n))
        assert all(perm[i] == ref.permute(i, n, k) for i in range(min(n, 50)))


def test_epochs_are_fresh_permutations_from_the_main_stream(planted_store, tmp_path):
    cfg = make_config(planted_store, tmp_path / "run", "ovb", iterations=1,
                      inference={"batch_size": 100})
    driver, state = _driver(cfg)
    seen = [driver.batch_documents(state, t) for t in range(8)]      # 4 batches per epoch
    first, second = np.concatenate(seen[:4]), np.concatenate(seen[4:])
    assert len(set(first)) == 400 and len(set(second)) == 400      # no repeat within an epoch
    assert not np.array_equal(first, second)
    main = np.random.PCG64(np.random.SeedSequence(entropy=0, spawn_key=keys.MAIN))
    main.random_raw(4)
    assert np.array_equal(state.keys, main.random_raw(4))           # epoch 1's keys


def test_batch_size_larger_than_corpus_is_clamped(planted_store, tmp_path, caplog):
    cfg = make_config(planted_store, tmp_path / "run", "ovb", inference={"batch_size": 10_000})
    with caplog.at_level(logging.WARNING, logger="topictk"):
        driver, _ = _driver(cfg)
    assert driver.batch_size == 450
    assert "inference.batch_size = 10000 is larger than the corpus (450 training documents)" \
        in caplog.text


@pytest.mark.parametrize("key,value,message", [
    ("kappa", 0.5, "inference.kappa must be a number in (0.5, 1]; got 0.5"),
    ("kappa", 0.3, "inference.kappa must be a number in (0.5, 1]; got 0.3"),
    ("kappa", 1.2, "inference.kappa must be a number in (0.5, 1]; got 1.2"),
    ("tau0", -1, "inference.tau0 must be a number >= 0 or auto; got -1"),
    ("batch_size", 0, "inference.batch_size must be an integer >= 1; got 0"),
])
def test_bad_schedule_values_are_refused(planted_store, tmp_path, key, value, message):
    with pytest.raises(ConfigError) as err:
        make_config(planted_store, tmp_path / "run", "ovb", inference={key: value})
    assert message in str(err.value)


def test_single_token_documents_and_words_absent_from_training(tmp_path, seed):
    """One-token documents train, and a vocabulary word seen only in test documents gets a
    small positive probability."""
    rng = np.random.default_rng(seed)
    docs = random_docs(rng, 40, 19, single=10)          # word 19 never occurs in training
    store = write_token_store(tmp_path / "store", docs, 20,
                              test_observed=[np.array([19, 1], np.int32)],
                              test_heldout=[np.array([19], np.int32)])
    for algorithm in ("ovb", "vb", "cvb", "cvb0"):
        cfg = make_config(store, tmp_path / algorithm, algorithm, topics=3, iterations=20,
                          inference={"batch_size": 8} if algorithm == "ovb" else {})
        driver, state = run_driver(cfg, 20)
        from topictk.inference.base import EvaluationSet

        p = driver.heldout_probabilities(state, None, EvaluationSet.from_store(driver.store), 0)
        assert p.shape == (1,) and 0 < p[0] < 0.05


# ------------------------------------------------------------------ threads and memory
def test_one_thread_equals_two(planted_store, tmp_path):
    cfg = make_config(planted_store, tmp_path / "run", "ovb", iterations=20,
                      model={"alpha": "auto"},
                      inference={"batch_size": 64, "tau0": 1.0, "learn_eta": True})
    _, a = run_driver(cfg, 20, threads=1)
    _, b = run_driver(cfg, 20, threads=2)
    for name in ("lam_tilde", "lam_sum", "alpha", "keys"):
        assert np.array_equal(getattr(a, name), getattr(b, name))
    assert (a.scale, a.offset, a.beta) == (b.scale, b.offset, b.beta)


def _peak_step_memory(store, tmp_path, steps=20):
    cfg = make_config(store, tmp_path / "run", "ovb", topics=8, inference={"batch_size": 64})
    driver, state = _driver(cfg)
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        for t in range(steps):
            driver.step(state, t)
        return tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()


def test_peak_memory_does_not_grow_with_the_corpus(tmp_path):
    """Mini-batches are read from the memory-mapped store: a corpus 8x larger costs no more
    memory per update (the permutation is keyed, not stored)."""
    rng = np.random.default_rng(0)
    sizes = {}
    for n_docs in (2_000, 16_000):
        docs = [rng.integers(0, 300, size=30).astype(np.int32) for _ in range(n_docs)]
        store = write_token_store(tmp_path / f"s{n_docs}", docs, 300)
        sizes[n_docs] = _peak_step_memory(store, tmp_path / f"r{n_docs}")
    corpus_bytes = 16_000 * 30 * 4
    assert sizes[16_000] < sizes[2_000] + 16_384
    assert sizes[16_000] < corpus_bytes / 4
