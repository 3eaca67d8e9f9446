"""The topic-map computations (docs/algorithms.md §11.8) on small cases computed by hand, and
the LDAvis data built from them."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

from topictk.evaluation import ldavis


def test_term_frequencies_count_every_occurrence():
    indices = np.array([0, 2, 2])           # two documents: {0: 3, 2: 1} and {2: 4}
    counts = np.array([3, 1, 4])
    assert ldavis.term_frequencies(indices, counts, 4).tolist() == [3, 0, 5, 0]


def test_topic_shares_of_disjoint_topics_are_their_words_share():
    phi = np.array([[1.0, 0.0, 0.0], [0.0, 0.5, 0.5]])
    shares = ldavis.topic_shares(phi, np.array([3.0, 1.0, 1.0]))
    assert shares == pytest.approx([0.6, 0.4], abs=1e-9)


def test_topic_shares_of_overlapping_topics_maximise_the_likelihood():
    # 3 ln(pi_1 / 2 + pi_2) + ln(pi_1 / 2) is largest at pi_1 = 1/2 (derivative by hand)
    phi = np.array([[0.5, 0.5], [1.0, 0.0]])
    assert ldavis.topic_shares(phi, np.array([3.0, 1.0])) == pytest.approx([0.5, 0.5], abs=1e-6)


def test_topic_term_counts_split_each_word_by_its_posterior():
    phi = np.array([[0.5, 0.5], [1.0, 0.0]])
    counts = ldavis.topic_term_counts(phi, np.array([0.5, 0.5]), np.array([3.0, 1.0]))
    # p(k | w0) = (0.25, 0.5) / 0.75; word 1 only in topic 0
    assert counts == pytest.approx(np.array([[1.0, 1.0], [2.0, 0.0]]))
    assert counts.sum(axis=0) == pytest.approx([3.0, 1.0])


def test_js_distances_by_hand():
    phi = np.array([[1.0, 0.0], [0.0, 1.0], [0.5, 0.5]])
    dist = ldavis.js_distances(phi)
    # in bits: disjoint topics JS = 1; a point mass against the uniform: H(3/4, 1/4) - 1/2
    half = -(0.75 * math.log2(0.75) + 0.25 * math.log2(0.25)) - 0.5
    assert dist[0, 1] == pytest.approx(1.0, rel=1e-6)
    assert dist[0, 2] == pytest.approx(math.sqrt(half), rel=1e-5)
    assert dist[1, 2] == pytest.approx(dist[0, 2], rel=1e-6)
    assert np.array_equal(dist, dist.T) and np.all(np.diag(dist) == 0)


def test_classical_mds_recovers_points_on_a_line_and_a_square():
    line = ldavis.classical_mds(np.array([[0, 1, 2], [1, 0, 1], [2, 1, 0.0]]))
    assert line == pytest.approx(np.array([[1.0, 0.0], [0.0, 0.0], [-1.0, 0.0]]), abs=1e-12)
    square = np.array([[0, 0], [1, 0], [1, 1], [0, 1.0]])
    dist = np.linalg.norm(square[:, None] - square[None], axis=2)
    coords = ldavis.classical_mds(dist)
    again = np.linalg.norm(coords[:, None] - coords[None], axis=2)
    assert again == pytest.approx(dist, abs=1e-12)
    assert coords.sum(axis=0) == pytest.approx([0, 0], abs=1e-12)


def test_relevance_picks_frequent_terms_at_one_and_exclusive_terms_at_zero():
    # word 0 is frequent everywhere, word 1 rare but only in topic 0
    phi = np.array([[0.6, 0.1, 0.3], [0.7, 0.0, 0.3]])
    proportion = np.array([0.65, 0.05, 0.3])
    logprob, loglift = ldavis.log_terms(phi, proportion)
    assert ldavis.relevant_terms(logprob, loglift, 1, lambda_step=1.0)[0].tolist() == [0, 1]
    assert ldavis.relevant_terms(logprob, loglift, 1, lambda_step=1.0)[1].tolist() == [0]
    # with a fine grid the middle word never wins: ln(.3) + 0 against the others
    assert 2 not in ldavis.relevant_terms(logprob, loglift, 1, lambda_step=0.01)[0]


def test_relevant_terms_equal_the_brute_force_over_the_grid():
    rng = np.random.default_rng(3)
    phi = rng.dirichlet(np.full(400, 0.1), size=6)
    freq = rng.integers(1, 60, size=400).astype(float)
    logprob, loglift = ldavis.log_terms(phi, freq / freq.sum())
    found = ldavis.relevant_terms(logprob, loglift, 12, lambda_step=0.01)
    lambdas = np.linspace(0, 1, 101)
    for k in range(6):
        scores = np.outer(lambdas, logprob[k]) + np.outer(1 - lambdas, loglift[k])
        assert found[k].tolist() == np.unique(np.argsort(-scores, axis=1)[:, :12]).tolist()


def test_saliency_by_hand():
    phi = np.array([[0.5, 0.5], [1.0, 0.0]])
    shares = np.array([0.5, 0.5])
    proportion = np.array([0.75, 0.25])
    # word 0: p(k | w) = (1/3, 2/3); word 1: (1, 0)
    expected = [0.75 * (1 / 3 * math.log(2 / 3) + 2 / 3 * math.log(4 / 3)),
                0.25 * math.log(2)]
    assert ldavis.saliency(phi, shares, proportion) == pytest.approx(expected)


def test_ldavis_data_keeps_the_model_order_and_numbers_from_one():
    phi = np.array([[0.7, 0.2, 0.1, 0.0], [0.0, 0.1, 0.2, 0.7], [0.25, 0.25, 0.25, 0.25]])
    freq = np.array([30.0, 10.0, 10.0, 50.0])
    vocab = ["alpha", "beta", "gamma", "delta"]
    data = ldavis.ldavis_data(phi, vocab, freq, n_terms=2)
    assert set(data) == {"mdsDat", "tinfo", "token.table", "R", "lambda.step", "plot.opts",
                         "topic.order"}
    assert data["topic.order"] == [1, 2, 3] and data["mdsDat"]["topics"] == [1, 2, 3]
    shares = ldavis.topic_shares(phi, freq)
    assert data["mdsDat"]["Freq"] == pytest.approx(100 * shares)
    assert data["R"] == 2 and data["lambda.step"] == 0.01
    categories = data["tinfo"]["Category"]
    assert categories[:2] == ["Default", "Default"]
    assert set(categories[2:]) == {"Topic1", "Topic2", "Topic3"}
    rows = [i for i, c in enumerate(categories) if c == "Topic1"]
    assert data["tinfo"]["Term"][rows[0]] == "alpha"     # topic 0 is alpha's
    for i in rows:
        assert data["tinfo"]["Freq"][i] <= data["tinfo"]["Total"][i] + 1e-9
    table = data["token.table"]
    for term in set(table["Term"]):
        share = sum(f for t, f in zip(table["Term"], table["Freq"]) if t == term)
        assert share <= 1 + 1e-9
    json.dumps(data, allow_nan=False)                    # plain JSON, no NaN or infinity


def test_ldavis_data_accepts_the_shares_given():
    phi = np.array([[0.9, 0.1], [0.1, 0.9]])
    data = ldavis.ldavis_data(phi, ["a", "b"], np.array([5.0, 5.0]),
                              shares=np.array([0.25, 0.75]))
    assert data["mdsDat"]["Freq"] == pytest.approx([25.0, 75.0])
