"""CVB's seeded start (docs/algorithms.md §2.14): the pairs of a seed word start with their
mass on its seeded topics, so that with seed words at the default weight every seed word ends
most probable in its own topic; other pairs keep their draw."""
from __future__ import annotations

import numpy as np
import pytest
import yaml

import topictk
from tests.integration._cli import ok, write_config
from topictk.inference.seed_prior import SeedPrior
from topictk.inference.variational.cvb import seed_start

SEEDS = {"errors": ["exception", "raise", "error"], "strings": ["string", "characters", "format"],
         "numbers": ["number", "integer", "float", "decimal"]}


def test_seed_start_keeps_the_pairs_of_seed_words_to_their_topics():
    """A word seeded in topics 1 and 3 keeps its draw there, renormalised; a word seeded in
    topic 0 alone starts there; the other pairs are untouched."""
    rng = np.random.default_rng(2)
    K = 4                       # 6 words: the overlay ptr has 7 entries
    seeds = SeedPrior.from_csr([0, 0, 2, 2, 2, 3, 3], [1, 3, 0], [1.0, 2.0, 0.5], K)
    pair_words = np.array([0, 1, 4, 1, 2, 5, 4])
    mu = rng.dirichlet(np.ones(K), size=pair_words.size)
    before = mu.copy()
    seed_start(mu, pair_words, seeds)
    for row, word in enumerate(pair_words):
        if word == 1:
            expected = np.where([False, True, False, True], before[row], 0.0)
            np.testing.assert_allclose(mu[row], expected / expected.sum(), rtol=1e-15)
        elif word == 4:
            assert mu[row].tolist() == [1.0, 0.0, 0.0, 0.0]
        else:
            assert mu[row].tolist() == before[row].tolist()


@pytest.mark.parametrize("seed", [5, 6, 7])
def test_every_seed_word_is_most_probable_in_its_topic(tmp_path, example_store, seed):
    """CVB, 8 topics, 50 iterations, seed_weight at its default: phi of each seed word is
    highest in its seeded topic (without the seeded start, 'exception' and others end in
    another topic at the seeds 6 and 7)."""
    config = write_config(tmp_path, example_store, "c.yaml", output=str(tmp_path / "run"),
                          model={"topics": 8, "alpha": 0.1, "beta": 0.01, "seed_words": SEEDS},
                          inference={"algorithm": "cvb", "iterations": 50},
                          training={"seed": seed, "eval_every": 0})
    data = yaml.safe_load(config.read_text())
    data["inference"] = {"algorithm": "cvb", "iterations": 50}     # none of the Gibbs keys
    config.write_text(yaml.safe_dump(data, sort_keys=False))
    ok("train", "--config", config, "-q")
    phi = topictk.load_run(tmp_path / "run").topic_word()
    vocab = (example_store / "vocab.txt").read_text().split()
    best = {w: int(np.argmax(phi[:, vocab.index(w)])) for words in SEEDS.values() for w in words}
    assert best == {w: k for k, words in enumerate(SEEDS.values()) for w in words}, best
