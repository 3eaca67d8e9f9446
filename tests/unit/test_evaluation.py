"""Evaluation oracles (docs/algorithms.md §11): perplexity by document completion and topic
quality."""
from __future__ import annotations

import math

import numpy as np
import pytest

from tests.fixtures import gibbs_config, write_token_store
from topictk.corpus.store import CorpusStore, ptr_to_csr, tokens_to_ptr
from topictk.evaluation.coherence import (
    co_document_counts,
    diversity,
    incidence_matrix,
    npmi,
    top_words,
    topic_quality,
    umass,
)
from topictk.inference.base import (
    EvaluationSet as HeldOutSet,  # (a "Test*" name would be collected)
)
from topictk.inference.gibbs.driver import GibbsDriver
from topictk.inference.perplexity import heldout_perplexity, perplexity_from_probabilities
from topictk.streams import Streams

V = 12


@pytest.fixture
def make_driver(tmp_path):
    """A collapsed-Gibbs driver on a small random store with test documents."""
    def make(seed: int, topics: int, alpha=0.3):
        rng = np.random.default_rng(seed)
        train = [rng.integers(0, V, rng.integers(5, 30)) for _ in range(25)]
        obs = [rng.integers(0, V, rng.integers(0, 12)) for _ in range(8)]
        held = [rng.integers(0, V, rng.integers(1, 6)) for _ in range(8)]
        held[3] = np.zeros(0, np.int64)                      # nothing held out: no contribution
        path = tmp_path / f"store-{seed}-{topics}"
        if not path.exists():
            write_token_store(path, train, V, test_observed=obs, test_heldout=held)
        store = CorpusStore.open(path)
        config = gibbs_config(path, tmp_path / "run", topics=topics, iterations=20,
                              model={"alpha": alpha, "beta": 0.1},
                              evaluation={"fold_in_sweeps": 10, "fold_in_burn_in": 4,
                                          "chunk_docs": 3})
        driver = GibbsDriver(config, store, streams=Streams(seed))
        state = driver.init_state()
        for t in range(5):
            driver.step(state, t)
        return driver, state, HeldOutSet.from_store(store)
    return make


def test_perplexity_from_probabilities_weights_by_counts_and_floors():
    p = np.array([0.5, 0.25, 0.0])
    counts = np.array([2, 1, 0])
    ppl, floored = perplexity_from_probabilities(p, counts)
    assert ppl == pytest.approx(math.exp(-(2 * math.log(0.5) + math.log(0.25)) / 3), rel=1e-15)
    assert floored == 0                              # the zero has count 0
    ppl, floored = perplexity_from_probabilities(np.array([0.0, 0.5]), np.array([1, 3]))
    assert floored == 1
    assert ppl == pytest.approx(math.exp(-(math.log(1e-300) + 3 * math.log(0.5)) / 4))
    ppl, floored = perplexity_from_probabilities(np.zeros(0), np.zeros(0))
    assert math.isnan(ppl) and floored == 0


def test_uniform_topics_give_perplexity_v(make_driver, seed):
    """(a) phi_kw = 1/V for every k (a sample with no counts: phi-hat = beta / (V beta))."""
    driver, state, test = make_driver(seed, topics=4)
    K = 4
    sample = {"nkw": np.zeros((V, K), np.int32), "nk": np.zeros(K, np.int64),
              "alpha": np.array([0.05, 0.5, 1.0, 3.0])}
    result = heldout_perplexity(driver, state, test, [sample], pass_index=0)
    assert result["perplexity"] == pytest.approx(V, rel=1e-12)
    assert result["heldout_tokens"] == test.heldout.n_tokens
    assert result["floored_tokens"] == 0


def test_one_topic_gives_exp_minus_mean_log_phi(make_driver, seed):
    """(b) K = 1: perplexity = exp(-mean ln phi_w) whatever alpha and theta-hat."""
    driver, state, test = make_driver(seed, topics=1)
    rng = np.random.default_rng(seed)
    nkw = rng.integers(0, 20, size=(V, 1)).astype(np.int32)
    phi = (nkw[:, 0] + 0.1) / (nkw.sum() + V * 0.1)
    held = test.heldout
    want = math.exp(-np.sum(held.counts * np.log(phi[held.indices])) / held.counts.sum())
    for alpha in (0.01, 5.0):
        sample = {"nkw": nkw, "nk": np.array([nkw.sum()], np.int64), "alpha": np.array([alpha])}
        got = heldout_perplexity(driver, state, test, [sample], pass_index=3)["perplexity"]
        assert got == pytest.approx(want, rel=1e-12)


def test_averaging_identical_samples_equals_point_perplexity(make_driver, seed):
    """(d) p-hat = (1/S) sum_s p-hat^s over S copies of the current state = the point value."""
    driver, state, test = make_driver(seed, topics=3)
    point = heldout_perplexity(driver, state, test, None, pass_index=7)["perplexity"]
    sample = driver.sample(state)
    for copies in (1, 3, 10):
        averaged = heldout_perplexity(driver, state, test, [sample] * copies, pass_index=7)
        assert averaged["perplexity"] == pytest.approx(point, rel=1e-13)
    assert 1 < point < 2 * V


def test_heldout_probabilities_depend_on_the_evaluation_pass_only(make_driver, seed):
    driver, state, test = make_driver(seed, topics=3)
    a = driver.heldout_probabilities(state, None, test, pass_index=2)
    b = driver.heldout_probabilities(state, None, test, pass_index=2)
    c = driver.heldout_probabilities(state, None, test, pass_index=5)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    assert a.shape == (test.heldout.indices.size,)
    assert np.all((a > 0) & (a < 1))


# --------------------------------------------------------------------- topic quality
# Reference corpus, binary document incidence over the words a b c d e f (ids 0..5):
#   d1 = {a, b, c, d} (a twice: incidence is binary)   d2 = {a, b}
#   d3 = {a, c, e}                                      d4 = {b, d, f}
# D(a) = 3, D(b) = 3, D(c) = 2, D(d) = 2, D(e) = 1, D(f) = 1, D_ref = 4
# D(a,b) = 2, D(a,c) = 2, D(b,c) = 1, D(d,f) = 1, D(d,e) = 0, D(e,f) = 0
REFERENCE = [np.array(d) for d in ([0, 0, 1, 2, 3], [0, 1], [0, 2, 4], [1, 3, 5])]
a, b, c, d, e, f = range(6)
# topic 0: top words a > b > c;  topic 1: top words d > f > e
TOPICS = np.array([[0.4, 0.3, 0.2, 0.1 / 3, 0.1 / 3, 0.1 / 3],
                   [0.05, 0.05, 0.1, 0.4, 0.15, 0.25]])


def _reference_csr():
    ptr, words = tokens_to_ptr([x.astype(np.int32) for x in REFERENCE])
    indptr, indices, _ = ptr_to_csr(ptr, words, 6)
    return indptr, indices


def test_top_words_sort_descending_with_ties_by_word_id():
    np.testing.assert_array_equal(top_words(TOPICS, 3), [[a, b, c], [d, f, e]])
    tied = np.array([[0.2, 0.3, 0.2, 0.3]])
    np.testing.assert_array_equal(top_words(tied, 4), [[1, 3, 0, 2]])


def test_umass_equals_hand_computation():
    """C_k = sum_{m=2..M} sum_{l<m} ln((D(v_m, v_l) + 1) / D(v_l)), M = 3.
    topic 0 (a, b, c): ln((2+1)/3) + ln((2+1)/3) + ln((1+1)/3) = ln(2/3)
    topic 1 (d, f, e): ln((1+1)/2) + ln((0+1)/2) + ln((0+1)/1) = ln(1/2)"""
    indptr, indices = _reference_csr()
    scores = umass(top_words(TOPICS, 3), incidence_matrix(indptr, indices, 6))
    np.testing.assert_allclose(scores, [math.log(2 / 3), math.log(1 / 2)], rtol=1e-14)


def test_npmi_equals_hand_computation():
    """NPMI = ln(P(v,v') / (P(v) P(v'))) / -ln P(v,v'); -1 when D(v,v') = 0.
    topic 0: (a,b) ln((2/4) / (3/4 * 3/4)) / ln 2 = ln(8/9) / ln 2
             (a,c) ln((2/4) / (3/4 * 2/4)) / ln 2 = ln(4/3) / ln 2
             (b,c) ln((1/4) / (3/4 * 2/4)) / ln 4 = ln(2/3) / ln 4
    topic 1: (d,f) ln((1/4) / (2/4 * 1/4)) / ln 4 = ln 2 / ln 4 = 1/2;  (d,e), (f,e): -1"""
    indptr, indices = _reference_csr()
    scores = npmi(top_words(TOPICS, 3), incidence_matrix(indptr, indices, 6))
    topic0 = (math.log(8 / 9) / math.log(2) + math.log(4 / 3) / math.log(2)
              + math.log(2 / 3) / math.log(4)) / 3
    np.testing.assert_allclose(scores, [topic0, (0.5 - 1 - 1) / 3], rtol=1e-14)


def test_npmi_is_one_for_words_in_every_document():
    docs = [np.array([0, 1, 2]), np.array([0, 1]), np.array([1, 0, 3])]
    ptr, words = tokens_to_ptr([x.astype(np.int32) for x in docs])
    indptr, indices, _ = ptr_to_csr(ptr, words, 4)
    got = npmi(np.array([[0, 1]]), incidence_matrix(indptr, indices, 4))
    np.testing.assert_array_equal(got, [1.0])


@pytest.mark.parametrize("group", [1, 12, 20, 1024])    # topics 1, 2, 4 or all 9 at a time
def test_co_document_counts_equal_direct_counts_whatever_the_group(group):
    """Counted a group of topics at a time, every (topic, word, word) entry is
    the number of documents holding both words, counted here document by document."""
    rng = np.random.default_rng(5)
    docs = [rng.choice(30, rng.integers(1, 12), replace=False).astype(np.int32)
            for _ in range(40)]
    ptr, words = tokens_to_ptr(docs)
    indptr, indices, _ = ptr_to_csr(ptr, words, 30)
    top = np.stack([rng.choice(30, 5, replace=False) for _ in range(9)])
    sets = [set(d.tolist()) for d in docs]
    want = np.array([[[sum(a in s and b in s for s in sets) for b in t] for a in t]
                     for t in top], dtype=np.float64)
    got = co_document_counts(top, incidence_matrix(indptr, indices, 30), group=group)
    np.testing.assert_array_equal(got, want)


def test_topic_quality_reports_means_and_diversity():
    indptr, indices = _reference_csr()
    result = topic_quality(TOPICS, indptr, indices, coherence_top=3, diversity_top=3)
    assert result["umass"] == pytest.approx((math.log(2 / 3) + math.log(1 / 2)) / 2, rel=1e-14)
    topic0 = (math.log(8 / 9) / math.log(2) + math.log(4 / 3) / math.log(2)
              + math.log(2 / 3) / math.log(4)) / 3
    assert result["npmi"] == pytest.approx((topic0 - 0.5) / 2, rel=1e-14)
    assert result["diversity"] == 1.0               # top-3 sets {a,b,c} and {d,f,e} disjoint
    # top-4 sets {a,b,c,d} and {d,f,e,c} share c and d: 6 unique of 8
    assert topic_quality(TOPICS, indptr, indices, 3, 4)["diversity"] == pytest.approx(6 / 8)


@pytest.mark.parametrize("K", [1, 2, 5])
def test_diversity_of_identical_and_disjoint_topics(K):
    rng = np.random.default_rng(K)
    row = rng.dirichlet(np.ones(200))
    assert diversity(np.tile(row, (K, 1)), 25) == pytest.approx(1 / K)
    disjoint = np.full((K, 25 * K), 1e-6)
    for k in range(K):
        disjoint[k, 25 * k:25 * (k + 1)] = 1.0
    disjoint /= disjoint.sum(axis=1, keepdims=True)
    assert diversity(disjoint, 25) == 1.0


def _coherence_written_out(topic_word, docs, n):
    """(mean UMass, mean NPMI) of every topic's top ``n`` words as docs/evaluate.md defines
    them, counted document by document from the documents' word sets: top words by descending
    probability (ties by word id); UMass sum_{m>l} ln((D(v_m, v_l) + 1) / D(v_l)); NPMI the
    mean over pairs of ln(P(v, v') / (P(v) P(v'))) / -ln P(v, v'), -1 for words that never
    co-occur and 1 for a pair in every document."""
    sets = [set(int(w) for w in doc) for doc in docs]
    n_docs = len(sets)

    def held_by(*words):
        return sum(all(w in s for w in words) for s in sets)

    umass_scores, npmi_scores = [], []
    for row in topic_word:
        top = sorted(range(row.size), key=lambda w: (-row[w], w))[:n]
        total, pairs = 0.0, []
        for m in range(1, n):
            for l in range(m):
                both = held_by(top[m], top[l])
                total += math.log((both + 1) / held_by(top[l]))
                if both == 0:
                    pairs.append(-1.0)
                elif both == n_docs:
                    pairs.append(1.0)
                else:
                    joint = both / n_docs
                    pmi = math.log(joint / (held_by(top[m]) / n_docs * held_by(top[l]) / n_docs))
                    pairs.append(pmi / -math.log(joint))
        umass_scores.append(total)
        npmi_scores.append(sum(pairs) / len(pairs))
    return sum(umass_scores) / len(umass_scores), sum(npmi_scores) / len(npmi_scores)


def _blocky_documents(rng, n_words=40, n_docs=60):
    """Documents drawing most words from one of four blocks of 10 words, every word in at
    least one document, so coherence depends on how far down a topic's list it looks."""
    docs = []
    for i in range(n_docs):
        block = rng.integers(4)
        own = rng.choice(np.arange(10 * block, 10 * block + 10), rng.integers(2, 8),
                         replace=False)
        other = rng.choice(n_words, rng.integers(0, 4), replace=False)
        docs.append(np.unique(np.concatenate([own, other, [i % n_words]])).astype(np.int32))
    return docs


def test_coherence_is_scored_on_the_coherence_top_words_not_the_diversity_top():
    """topic_quality's UMass and NPMI equal the direct counts over the top
    evaluation.coherence_top (10) words, while the diversity looks at the top
    evaluation.diversity_top (25); over the top 25 the coherence is another value."""
    from topictk.config.schema import EVALUATION
    n_coherence = EVALUATION["coherence_top"].default
    n_diversity = EVALUATION["diversity_top"].default
    assert (n_coherence, n_diversity) == (10, 25)
    rng = np.random.default_rng(11)
    docs = _blocky_documents(rng)
    ptr, words = tokens_to_ptr(docs)
    indptr, indices, _ = ptr_to_csr(ptr, words, 40)
    topic_word = rng.dirichlet(np.full(40, 0.4), size=4)
    topic_word[:, :10] += 0.05                       # topics leaning on the first block
    topic_word /= topic_word.sum(axis=1, keepdims=True)
    want_umass, want_npmi = _coherence_written_out(topic_word, docs, n_coherence)
    top25_umass, top25_npmi = _coherence_written_out(topic_word, docs, n_diversity)
    assert abs(top25_umass - want_umass) > 1.0 and abs(top25_npmi - want_npmi) > 1e-3
    top = [set(sorted(range(40), key=lambda w: (-row[w], w))[:n_diversity]) for row in topic_word]
    for result in (topic_quality(topic_word, indptr, indices, coherence_top=n_coherence,
                                 diversity_top=n_diversity),
                   topic_quality(topic_word, indptr, indices)):     # the same defaults
        assert result["umass"] == pytest.approx(want_umass, rel=1e-12)
        assert result["npmi"] == pytest.approx(want_npmi, rel=1e-12)
        assert result["diversity"] == pytest.approx(len(set().union(*top)) / (4 * n_diversity))


def test_evaluate_scores_coherence_on_the_configured_top_words(tmp_path):
    """`topictk evaluate` of a run with evaluation.coherence_top = 6 reports UMass and NPMI of
    the run's topics' top 6 words, counted directly, not of its diversity_top (25)."""
    from topictk.evaluation.run import LoadedRun, evaluate_run
    from topictk.training.run import train
    rng = np.random.default_rng(3)
    docs = _blocky_documents(rng)
    write_token_store(tmp_path / "store", docs, 40)
    train(gibbs_config(tmp_path / "store", tmp_path / "run", topics=4, iterations=10,
                       model={"alpha": 0.3, "beta": 0.05},
                       evaluation={"coherence_top": 6, "diversity_top": 25}), quiet=True)
    topic_word = LoadedRun(tmp_path / "run").topic_word()
    want_umass, want_npmi = _coherence_written_out(topic_word, docs, 6)
    top25_umass, top25_npmi = _coherence_written_out(topic_word, docs, 25)
    assert abs(top25_umass - want_umass) > 1.0 and abs(top25_npmi - want_npmi) > 1e-3
    result = evaluate_run(tmp_path / "run")
    assert result["umass"] == pytest.approx(want_umass, rel=1e-12)
    assert result["npmi"] == pytest.approx(want_npmi, rel=1e-12)
