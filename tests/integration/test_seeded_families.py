"""Seed words in the variational and SGRLD families (docs/algorithms.md §2.12): the seeded
prior beta + o pulls each seed word into its topic; with seeds, 1 thread equals 2, a resumed
run equals an uninterrupted one, and a 2-worker Dask cluster equals one machine."""
from __future__ import annotations

import numpy as np
import pytest
import yaml

from tests.integration._cli import assert_same_run, model_arrays, ok, write_config
from topictk.inference.seed_prior import SeedPrior

SEEDS = {"errors": ["exception", "raise", "error"], "strings": ["string", "characters", "format"]}

# short runs of each family on the example corpus (checkpoints every 4 steps)
RUNS = {
    "vb": {"iterations": 8},
    "pem": {"iterations": 8},
    "cvb": {"iterations": 8},
    "cvb0": {"iterations": 8, "chunks": 3},
    "ovb": {"iterations": 24, "batch_size": 32},
    "hsvg": {"iterations": 24, "batch_size": 32},
    "sgrld": {"iterations": 32, "batch_size": 32, "burn_in": 8, "thin": 8},
}


def _train(directory, store, algorithm, seeds=True, name="run", *extra, **inference):
    model = {"topics": 6, "alpha": 0.1, "beta": 0.01}
    if seeds:
        model["seed_words"] = SEEDS
    config = write_config(directory, store, f"{name}.yaml", output=str(directory / name),
                          model=model, inference={"algorithm": algorithm,
                                                  **RUNS[algorithm], **inference},
                          training={"seed": 5, "eval_every": 4, "checkpoint_every": 4})
    data = yaml.safe_load(config.read_text())
    data["inference"] = {"algorithm": algorithm, **RUNS[algorithm], **inference}
    config.write_text(yaml.safe_dump(data, sort_keys=False))
    ok("train", "--config", config, "-q", *extra)
    return config, directory / name


def _seed_probability(run_dir, store) -> np.ndarray:
    """phi of each seed word in its seeded topic (the i-th label's row i)."""
    import topictk
    phi = topictk.load_run(run_dir).topic_word()
    vocab = (store / "vocab.txt").read_text().split()
    return np.array([phi[k, vocab.index(w)] for k, words in enumerate(SEEDS.values())
                     for w in words])


@pytest.mark.parametrize("algorithm", list(RUNS))
def test_seed_words_are_pulled_into_their_topics(tmp_path, example_store, algorithm):
    _, seeded = _train(tmp_path, example_store, algorithm, True, "seeded")
    _, plain = _train(tmp_path, example_store, algorithm, False, "plain")
    with_seeds = _seed_probability(seeded, example_store)
    without = _seed_probability(plain, example_store)
    # every seed word gains in its topic, most by more than a factor of 5
    assert np.all(with_seeds > without), (with_seeds, without)
    assert np.median(with_seeds / np.maximum(without, 1e-300)) > 5, (with_seeds, without)


@pytest.mark.parametrize("algorithm", list(RUNS))
def test_seeded_one_thread_equals_two(tmp_path, example_store, algorithm):
    _, one = _train(tmp_path, example_store, algorithm, True, "one")
    _, two = _train(tmp_path, example_store, algorithm, True, "two", "--set",
                    "training.threads=2")
    assert_same_run(one, two)


@pytest.mark.parametrize("algorithm", list(RUNS))
def test_seeded_resume_equals_uninterrupted(tmp_path, example_store, algorithm):
    total = RUNS[algorithm]["iterations"]
    _, straight = _train(tmp_path, example_store, algorithm, True, "straight")
    config, halves = _train(tmp_path, example_store, algorithm, True, "halves", "--set",
                            f"inference.iterations={total // 2}")
    ok("train", "--config", config, "--resume", "-q", "--set", f"inference.iterations={total}")
    assert_same_run(straight, halves, extra_evaluations=True)


@pytest.mark.parametrize("algorithm", [
    "cvb0",
    pytest.param("vb", marks=pytest.mark.slow), pytest.param("ovb", marks=pytest.mark.slow),
    pytest.param("hsvg", marks=pytest.mark.slow), pytest.param("sgrld", marks=pytest.mark.slow)])
def test_seeded_cluster_equals_one_machine(tmp_path, example_store, algorithm):
    extra = {"chunks": 3} if algorithm in ("vb", "ovb") else {}
    _, here = _train(tmp_path, example_store, algorithm, True, "here", **extra)
    _, there = _train(tmp_path, example_store, algorithm, True, "there", "--dask-workers", "2",
                      **extra)
    header_a, arrays_a = model_arrays(here)
    header_b, arrays_b = model_arrays(there)
    assert header_a["state"] == header_b["state"]
    for name in arrays_a:
        assert np.array_equal(arrays_a[name], arrays_b[name]), name


def test_elbo_correction_is_the_seeded_topic_term():
    """SeedPrior.elbo_correction is the topic part of the ELBO (§3.3) with beta + o minus the
    one with the symmetric beta, computed densely."""
    from scipy.special import digamma, gammaln
    rng = np.random.default_rng(3)
    V, K, beta = 9, 3, 0.05
    overlay = np.zeros((V, K))
    overlay[[0, 2, 2, 7], [1, 0, 2, 1]] = [0.5, 2.0, 0.1, 1.3]
    rows, topics = np.nonzero(overlay)
    seeds = SeedPrior.from_csr(np.searchsorted(rows, np.arange(V + 1)), topics,
                               overlay[rows, topics], K)
    lam = rng.gamma(2.0, size=(V, K))
    totals = lam.sum(axis=0)

    def topic_part(prior):
        elog = digamma(lam) - digamma(totals)
        return float((gammaln(prior.sum(axis=0)) - gammaln(prior).sum(axis=0)).sum()
                     + ((prior - lam) * elog).sum() + gammaln(lam).sum() - gammaln(totals).sum())

    expected = topic_part(beta + overlay) - topic_part(np.full((V, K), beta))
    assert seeds.elbo_correction(seeds.at(lam), totals, beta) == pytest.approx(expected,
                                                                              rel=1e-12)


@pytest.mark.parametrize("rho", [0.3, 1.0])
def test_online_update_adds_the_seeded_prior(rho):
    """Online VB's lazy update is lambda <- (1 - rho) lambda + rho (eta + o + R_B SS) (§5 with
    §2.12), checked against the dense formula (HSVG shares it)."""
    from types import SimpleNamespace

    from topictk.inference.variational.ovb import OVBDriver
    from topictk.state.variational import OnlineState
    rng = np.random.default_rng(1)
    V, K, beta = 7, 3, 0.1
    ptr = np.array([0, 1, 1, 3, 3, 3, 3, 4])
    seeds = SeedPrior.from_csr(ptr, [2, 0, 1, 0], [0.5, 2.0, 1.0, 3.0], K)
    lam_tilde = rng.gamma(2.0, size=(V, K))
    state = OnlineState(lam_tilde=lam_tilde.copy(), lam_sum=lam_tilde.sum(axis=0), scale=0.5,
                        offset=beta, alpha=np.full(K, 0.1), beta=beta,
                        keys=np.zeros(4, dtype=np.uint64))
    before = state.lam()
    words, sstats = np.array([1, 4, 6]), rng.gamma(1.0, size=(3, K))
    driver = SimpleNamespace(seeds=seeds, learn_eta=False)
    OVBDriver.update_lambda(driver, state, words, sstats, rho, 4.0)
    full = np.zeros((V, K))
    full[words] = sstats
    expected = (1 - rho) * before + rho * (beta + seeds.dense() + 4.0 * full)
    np.testing.assert_allclose(state.lam(), expected, rtol=1e-12)
    np.testing.assert_allclose(state.lam_totals(), expected.sum(axis=0), rtol=1e-12)
