"""Collapsed Gibbs as a model: the log joint it reports (§1.3), recovery of planted topics
(§1.6, §2 oracle (e)) and Minka's fixed point for alpha (§2.5)."""
from __future__ import annotations

import numpy as np
import pytest
from scipy.special import digamma
from scipy.stats import dirichlet_multinomial

from tests.fixtures import gibbs_config, matched_l1, planted_corpus, write_token_store
from topictk.corpus.store import CorpusStore
from topictk.inference.gibbs.driver import GibbsDriver
from topictk.inference.hyper import minka_alpha, minka_alpha_of_rows
from topictk.state.counts import CountState
from topictk.streams import Streams

# ------------------------------------------------------------------------ (e) log joint
TINY_DOCS = [np.array([0, 1, 1, 3]), np.array([2, 2]), np.array([3, 0, 1]), np.array([1])]
TINY_V = 4


def _polya_log_prob(sequence, prior) -> float:
    """ln p(sequence) under a Dirichlet-multinomial, by the chain rule of the Pólya urn:
    p(x_i = j | x_<i) = (prior_j + #{l < i: x_l = j}) / (sum(prior) + i)."""
    seen = np.zeros(len(prior))
    total = 0.0
    for i, j in enumerate(sequence):
        total += np.log((prior[j] + seen[j]) / (np.sum(prior) + i))
        seen[j] += 1
    return total


def _dirmult_sequence_log_prob(sequence, prior) -> float:
    """The same through scipy: ln DirMult(counts) minus ln of the multinomial coefficient."""
    counts = np.bincount(sequence, minlength=len(prior))
    n = counts.sum()
    if n == 0:
        return 0.0
    log_coef = np.sum(np.log(np.arange(1, n + 1))) - sum(
        np.sum(np.log(np.arange(1, c + 1))) for c in counts)
    return float(dirichlet_multinomial.logpmf(counts, prior, n) - log_coef)


def _brute_force_log_joint(docs, z, alpha, beta, n_words, log_prob) -> float:
    """sum_d ln p(z_d | alpha) + sum_k ln p(words with topic k | beta), each a Dirichlet-
    multinomial probability of a sequence."""
    K = alpha.size
    total = sum(log_prob(zd, alpha) for zd in z)
    words = np.concatenate(docs)
    topics = np.concatenate(z)
    for k in range(K):
        total += log_prob(words[topics == k], np.full(n_words, beta))
    return total


@pytest.fixture
def tiny_driver(tmp_path):
    def make(topics, alpha, beta, streams=None):
        store = write_token_store(tmp_path / f"store{topics}", TINY_DOCS, TINY_V)
        config = gibbs_config(store, tmp_path / "run", topics=topics,
                              model={"alpha": alpha, "beta": beta})
        return GibbsDriver(config, CorpusStore.open(store), streams=streams)
    return make


@pytest.mark.parametrize("K,beta", [(2, 0.3), (3, 0.05)])
def test_log_joint_equals_brute_force_dirichlet_multinomial(seed, tiny_driver, K, beta):
    driver = tiny_driver(K, 0.5, beta)
    rng = np.random.default_rng(seed)
    alpha = rng.uniform(0.1, 2.0, K)                 # asymmetric alpha, set on the state
    z = [rng.integers(0, K, d.size) for d in TINY_DOCS]
    flat = np.concatenate(z).astype(np.int32)
    words = np.concatenate(TINY_DOCS)
    ndk = np.array([np.bincount(zd, minlength=K) for zd in z], np.int32)
    nkw = np.zeros((TINY_V, K), np.int32)
    np.add.at(nkw, (words, flat), 1)
    state = CountState(z=flat, ndk=ndk, nkw=nkw, nk=nkw.sum(axis=0).astype(np.int64),
                       alpha=alpha, beta=beta)
    state.check_invariants(driver.doc_ptr, driver.words)
    n_tokens = words.size
    polya = _brute_force_log_joint(TINY_DOCS, z, alpha, beta, TINY_V, _polya_log_prob)
    scipy_value = _brute_force_log_joint(TINY_DOCS, z, alpha, beta, TINY_V,
                                         _dirmult_sequence_log_prob)
    assert polya == pytest.approx(scipy_value, rel=1e-10)
    assert driver.objective(state) == pytest.approx(polya / n_tokens, rel=1e-12, abs=1e-12)


def test_log_joint_with_one_topic_is_the_evidence(tiny_driver):
    """With K = 1 every token's topic is fixed, so ln p(w, z) = ln p(w): the Pólya-urn
    probability of the whole corpus as one sequence of words."""
    driver = tiny_driver(1, 0.7, 0.2)
    words = np.concatenate(TINY_DOCS)
    z = np.zeros(words.size, np.int32)
    nkw = np.bincount(words, minlength=TINY_V).astype(np.int32)[:, None]
    state = CountState(z=z, ndk=np.array([[d.size] for d in TINY_DOCS], np.int32), nkw=nkw,
                       nk=np.array([words.size], np.int64), alpha=np.array([0.7]), beta=0.2)
    want = _polya_log_prob(words, np.full(TINY_V, 0.2))     # p(z) = 1 with one topic
    assert driver.objective(state) * words.size == pytest.approx(want, rel=1e-12)


def test_point_estimates_are_on_the_simplex(tiny_driver, seed):
    driver = tiny_driver(3, 0.5, 0.05, streams=Streams(seed))
    state = driver.init_state()
    for t in range(3):
        driver.step(state, t)
    phi = driver.topic_word(state)
    assert phi.shape == (3, TINY_V)
    np.testing.assert_allclose(phi.sum(axis=1), 1.0, rtol=0, atol=1e-12)
    theta = (state.ndk + state.alpha) / (state.ndk.sum(axis=1, keepdims=True) + state.alpha.sum())
    np.testing.assert_allclose(theta.sum(axis=1), 1.0, rtol=0, atol=1e-12)


# ------------------------------------------------------------------- (f) planted corpus
@pytest.mark.parametrize("sparse", [True, False], ids=["sparse", "dense"])
def test_planted_topics_are_recovered_after_300_sweeps(tmp_path, seed, sparse):
    corpus = planted_corpus(seed)                     # K* = 5, V = 50, D = 500, xi = 80
    store = write_token_store(tmp_path / "planted", corpus.docs, 50)
    config = gibbs_config(store, tmp_path / "run", topics=5, iterations=300,
                          model={"alpha": 0.1, "beta": 0.01}, inference={"sparse": sparse})
    driver = GibbsDriver(config, CorpusStore.open(store), streams=Streams(seed))
    state = driver.init_state()
    before = matched_l1(driver.topic_word(state), corpus.phi)
    for t in range(300):
        driver.step(state, t)
    state.check_invariants(driver.doc_ptr, driver.words)
    after = matched_l1(driver.topic_word(state), corpus.phi)
    assert before > 1.0                               # random start: nothing recovered
    # correct runs, seeds 0-9 (each its own corpus): 0.067 to 0.080 for either sampler; the
    # bound is that maximum plus a quarter
    assert after < 0.10, f"mean matched L1 {after:.3f} after 300 sweeps"


def test_planted_corpus_fixture_matches_its_definition(seed):
    corpus = planted_corpus(seed)
    assert len(corpus.docs) == 500
    assert corpus.phi.shape == (5, 50)
    np.testing.assert_allclose(corpus.phi.sum(axis=1), 1.0, rtol=1e-12)
    # two planted topics are at L1 distance 2 (1 - delta) = 1.9
    assert np.abs(corpus.phi[0] - corpus.phi[1]).sum() == pytest.approx(1.9)
    lengths = np.array([d.size for d in corpus.docs])
    assert lengths.min() >= 1 and abs(lengths.mean() - 80) < 3
    # tokens of a document concentrate on the blocks of its dominant topics
    d = int(np.argmax(corpus.theta.max(axis=1)))
    block = int(np.argmax(corpus.theta[d]))
    share = np.mean((corpus.docs[d] // 10) == block)
    assert share > 0.7


# ------------------------------------------------------------------------- (g) Minka
def _minka_direct_step(ndk, alpha):
    """One step of §2.5 with scipy's digamma, document by document."""
    lengths = ndk.sum(axis=1)
    numer = np.sum(digamma(ndk + alpha) - digamma(alpha), axis=0)
    denom = np.sum(digamma(lengths + alpha.sum()) - digamma(alpha.sum()))
    return np.clip(alpha * numer / denom, 1e-10, 1e5)


def _minka_direct(ndk, alpha, max_iter=200, tol=1e-6):
    alpha = alpha.astype(np.float64).copy()
    for _ in range(max_iter):
        new = _minka_direct_step(ndk, alpha)
        change = np.max(np.abs(new - alpha) / alpha)
        alpha = new
        if change < tol:
            break
    return alpha


def _document_topic_counts(rng, n_docs, true_alpha):
    theta = rng.dirichlet(true_alpha, size=n_docs)
    lengths = rng.integers(0, 60, n_docs)             # includes empty documents
    return np.array([rng.multinomial(n, t) for n, t in zip(lengths, theta)], np.int32)


def test_minka_alpha_single_steps_equal_direct_digamma(seed):
    rng = np.random.default_rng(seed)
    ndk = _document_topic_counts(rng, 200, np.array([0.1, 0.5, 1.0, 0.05, 2.0]))
    alpha = np.full(5, 0.3)
    for steps in (1, 2, 5):
        got = minka_alpha(ndk, alpha, max_iter=steps)
        want = alpha.copy()
        for _ in range(steps):
            want = _minka_direct_step(ndk, want)
        np.testing.assert_allclose(got, want, rtol=1e-11)
        assert not np.allclose(got, alpha)


def test_minka_alpha_converges_to_the_fixed_point(seed):
    rng = np.random.default_rng(seed)
    true_alpha = np.array([0.1, 0.5, 1.0, 0.05, 2.0])
    ndk = _document_topic_counts(rng, 400, true_alpha)
    got = minka_alpha(ndk, np.full(5, 0.3))
    want = _minka_direct(ndk, np.full(5, 0.3))
    np.testing.assert_allclose(got, want, rtol=1e-8)
    # a fixed point: one more step changes alpha by less than the tolerance
    np.testing.assert_allclose(_minka_direct_step(ndk, got), got, rtol=2e-6)
    # and it learns the asymmetry of the generating alpha (ordering of the components)
    assert np.argsort(got).tolist() == np.argsort(true_alpha).tolist()


@pytest.mark.parametrize("steps", [1, 200])
def test_minka_alpha_of_rows_equals_the_dense_update(seed, steps):
    """From the non-zero n_dk as compressed rows (a WarpLDA chain's form, empty documents and
    an unused topic among them): the dense update's alpha bit for bit."""
    rng = np.random.default_rng(seed)
    ndk = _document_topic_counts(rng, 150, np.array([0.1, 0.5, 1.0, 0.05, 2.0, 0.3]))
    ndk[:, 4] = 0
    ndk[-1] = 0                                          # an empty last document
    alpha = rng.uniform(0.05, 1.0, 6)
    ptr = np.concatenate(([0], np.cumsum(np.count_nonzero(ndk, axis=1)))).astype(np.int64)
    docs, topic = np.nonzero(ndk)
    got = minka_alpha_of_rows(ptr, topic.astype(np.int32), ndk[docs, topic], alpha,
                              max_iter=steps)
    np.testing.assert_array_equal(got, minka_alpha(ndk, alpha, max_iter=steps))
    assert not np.allclose(got, alpha)


def test_minka_alpha_is_clamped_and_keeps_its_input():
    ndk = np.array([[5, 0], [4, 0], [6, 0]], np.int32)   # topic 1 never used
    alpha = np.array([0.5, 0.5])
    got = minka_alpha(ndk, alpha)
    np.testing.assert_array_equal(alpha, [0.5, 0.5])        # not modified in place
    assert got[1] == 1e-10                                 # the lower clamp
    assert np.all(got >= 1e-10) and np.all(got <= 1e5)
    assert np.all(np.isfinite(got))


@pytest.mark.parametrize("burn_in, thin", [(4, 2), (3, 1), (0, 5)])
def test_samples_are_collected_every_thin_sweeps_after_burn_in(tmp_path, burn_in, thin):
    """§12.2: the samples are the states after sweeps burn_in + thin, burn_in + 2 thin, ...;
    the state after sweep burn_in itself is still burn-in."""
    store = write_token_store(tmp_path / "tiny", TINY_DOCS, TINY_V)
    config = gibbs_config(store, tmp_path / "run", topics=2, iterations=10,
                          inference={"burn_in": burn_in, "thin": thin})
    driver = GibbsDriver(config, CorpusStore.open(store), streams=Streams(0))
    state = driver.init_state()
    collected = [t + 1 for t in range(10) if driver.step(state, t).collect_sample]
    assert collected == list(range(burn_in + thin, 11, thin))
