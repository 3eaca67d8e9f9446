"""Seed words in DMR's SGRLD (docs/algorithms.md §2.14) on the example corpus with made-up
covariates: the seeded prior beta + o pulls each seed word into its topic, and with seeds 1
thread equals 2 and a resumed run equals an uninterrupted one (nu included)."""
from __future__ import annotations

import numpy as np

from tests.integration._cli import assert_same_run, ok, write_config
from tests.integration.test_seeded_families import SEEDS, _seed_probability
INFERENCE = {"algorithm": "dmr-sgrld", "iterations": 32, "batch_size": 32, "sweeps": 4,
             "burn_in": 8, "thin": 8}


def _train(directory, store, name, seeds=True, *extra):
    model = {"family": "dmr", "topics": 6, "alpha": 0.1, "beta": 0.01}
    if seeds:
        model["seed_words"] = SEEDS
    config = write_config(directory, store, f"{name}.yaml", output=str(directory / name),
                          model=model, inference=dict(INFERENCE),
                          training={"seed": 5, "eval_every": 4, "checkpoint_every": 4})
    ok("train", "--config", config, "-q", *extra)
    return config, directory / name


def test_seed_words_are_pulled_into_their_topics(tmp_path, meta_store):
    """Every seed word gains in its topic over the unseeded run of the same seed (most by
    more than a factor of 5), and is more probable there than in any other topic."""
    _, seeded = _train(tmp_path, meta_store, "seeded")
    _, plain = _train(tmp_path, meta_store, "plain", False)
    with_seeds = _seed_probability(seeded, meta_store)
    without = _seed_probability(plain, meta_store)
    assert np.all(with_seeds > without), (with_seeds, without)
    assert np.median(with_seeds / np.maximum(without, 1e-300)) > 5, (with_seeds, without)
    import topictk
    phi = topictk.load_run(seeded).topic_word()
    vocab = (meta_store / "vocab.txt").read_text().split()
    best = {w: int(np.argmax(phi[:, vocab.index(w)])) for words in SEEDS.values() for w in words}
    assert best == {w: k for k, words in enumerate(SEEDS.values()) for w in words}, best


def test_seeded_one_thread_equals_two(tmp_path, meta_store):
    _, one = _train(tmp_path, meta_store, "one")
    _, two = _train(tmp_path, meta_store, "two", True, "--set", "training.threads=2")
    assert_same_run(one, two)


def test_seeded_resume_equals_uninterrupted(tmp_path, meta_store):
    total = INFERENCE["iterations"]
    _, straight = _train(tmp_path, meta_store, "straight")
    config, halves = _train(tmp_path, meta_store, "halves", True, "--set",
                            f"inference.iterations={total // 2}")
    ok("train", "--config", config, "--resume", "-q", "--set", f"inference.iterations={total}")
    assert_same_run(straight, halves, extra_evaluations=True)
