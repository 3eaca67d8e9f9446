"""The left-to-right estimator (docs/algorithms.md §11.3): the kernel against its NumPy twin, and
exact values where the answer is known."""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy.special import gammaln
from topictk.evaluation._left_to_right import left_to_right

from tests.reference import left_to_right as ref
from topictk.corpus.store import Documents, ptr_to_csr, tokens_to_ptr
from topictk.evaluation.left_to_right import document_log_likelihoods
from topictk.inference import base
from topictk.streams import Streams


def make_test_set(observed: list[list[int]], held: list[list[int]],
                  V: int) -> base.EvaluationSet:
    optr, owords = tokens_to_ptr([np.asarray(d, np.int32) for d in observed])
    oindptr, oindices, ocounts = ptr_to_csr(optr, owords, V)
    hptr, hwords = tokens_to_ptr([np.asarray(d, np.int32) for d in held])
    hindptr, hindices, hcounts = ptr_to_csr(hptr, hwords, V)
    return base.EvaluationSet(observed=Documents(optr, owords, oindptr, oindices, ocounts),
                   heldout=Documents(None, None, hindptr, hindices, hcounts))


def random_documents(rng, n_docs, V):
    observed = [list(rng.integers(0, V, size=rng.integers(0, 9))) for _ in range(n_docs)]
    held = [list(rng.integers(0, V, size=rng.integers(0, 5))) for _ in range(n_docs)]
    held[0] = []                               # a document with nothing held out
    observed[1], held[1] = [], [2, 2, 5]       # one with nothing observed
    return observed, held


def kernel(test: base.EvaluationSet, phi, alpha, particles, bounds, seed, threads):
    obs, held = test.observed, test.heldout
    out = np.zeros(obs.n_docs)
    streams = [np.random.PCG64(seed + c) for c in range(bounds.size - 1)]
    left_to_right(obs.doc_ptr, obs.words, held.indptr, held.indices, held.counts, phi,
                  np.atleast_2d(alpha), particles, bounds, streams, out, threads)
    return out


@pytest.mark.parametrize("per_document_alpha", [False, True])
def test_kernel_equals_numpy_twin_at_any_thread_count(per_document_alpha):
    rng = np.random.default_rng(3)
    V, K, D = 12, 4, 9
    observed, held = random_documents(rng, D, V)
    test = make_test_set(observed, held, V)
    phi = rng.dirichlet(np.full(V, 0.5), size=K).T.copy()
    alpha = rng.uniform(0.05, 0.8, size=(D, K) if per_document_alpha else K)
    bounds = np.array([0, 4, 7, D], dtype=np.int64)
    got = kernel(test, phi, alpha, 3, bounds, 11, threads=1)
    obs, h = test.observed, test.heldout
    want = ref.left_to_right(obs.doc_ptr, obs.words, h.indptr, h.indices, h.counts, phi,
                             alpha, 3, bounds,
                             [np.random.PCG64(11 + c) for c in range(bounds.size - 1)])
    assert np.array_equal(got, want)
    assert got[0] == 0.0 and np.all(got[[d for d in range(D) if held[d]]] < 0)
    assert np.array_equal(kernel(test, phi, alpha, 3, bounds, 11, threads=2), got)


def test_one_topic_gives_the_word_probabilities():
    """K = 1: every token's predictive probability is phi[w] whatever the particles draw."""
    V = 6
    phi = np.random.default_rng(0).dirichlet(np.ones(V))[:, None]
    test = make_test_set([[0, 1, 1], [3]], [[2, 4, 4], [5]], V)
    got = kernel(test, phi, np.array([0.3]), 4, np.array([0, 2], dtype=np.int64), 1, 1)
    want = [np.log(phi[[2, 4, 4], 0]).sum(), np.log(phi[5, 0])]
    assert np.allclose(got, want, rtol=1e-12)


def exact_log_likelihood(sequence: list[int], phi: np.ndarray, alpha: np.ndarray) -> float:
    """ln p(w) with theta and z summed out: sum over every z of prod phi times the Polya
    probability of z."""
    K, N = phi.shape[1], len(sequence)
    total = 0.0
    for z in itertools.product(range(K), repeat=N):
        n = np.bincount(z, minlength=K)
        log_polya = (gammaln(alpha.sum()) - gammaln(alpha.sum() + N)
                     + (gammaln(alpha + n) - gammaln(alpha)).sum())
        total += math.exp(log_polya + sum(math.log(phi[w, k]) for w, k in zip(sequence, z)))
    return math.log(total)


PHI = np.array([[0.7, 0.05], [0.1, 0.05], [0.1, 0.3], [0.1, 0.6]])
ALPHA = np.array([0.2, 0.5])


def l2r_minus_exact(observed: list[int], held: list[int], particles: int, seed: int) -> float:
    """The estimate minus the exact ln p(held | observed) = ln p(observed + held) -
    ln p(observed), both by enumeration of all K^N topic assignments."""
    exact = exact_log_likelihood(observed + sorted(held), PHI, ALPHA)
    if observed:
        exact -= exact_log_likelihood(observed, PHI, ALPHA)
    test = make_test_set([observed], [held], PHI.shape[0])
    return kernel(test, PHI, ALPHA, particles, np.array([0, 1], dtype=np.int64), seed, 1)[0] \
        - exact


def test_first_token_is_exact():
    """Nothing before it: p(w_0) = sum_k phi[w_0, k] alpha_k / alpha_sum, no randomness."""
    assert abs(l2r_minus_exact([], [3], 2, 0)) < 1e-12


def test_second_token_converges_to_the_exact_value():
    """One token before it: each particle's z_0 is an exact posterior draw, so the estimate
    of p(w_1 | w_0) is unbiased and its error is Monte Carlo error only."""
    errors = [l2r_minus_exact([0], [3], 20000, seed) for seed in range(3)]
    assert max(map(abs, errors)) < 0.005, errors
    errors = [l2r_minus_exact([], [3, 0], 20000, seed) for seed in range(3)]
    assert max(map(abs, errors)) < 0.005, errors


def test_longer_document_is_close_to_the_exact_value():
    """Further on, the particles' topics are approximate posterior draws (one Gibbs pass per
    position), so a small bias remains: about 0.03 nats on this 6-token document (0.0287 with
    64,000 particles, against a Monte Carlo sd of 0.0008)."""
    error = l2r_minus_exact([0, 0, 3, 1], [3, 0], 4000, 5)
    assert abs(error) < 0.05, error


def test_document_log_likelihoods_depend_on_chunks_not_threads():
    rng = np.random.default_rng(8)
    V, K = 10, 3
    observed, held = random_documents(rng, 20, V)
    test = make_test_set(observed, held, V)
    phi = rng.dirichlet(np.ones(V), size=K).T.copy()
    streams = Streams(4)
    one = document_log_likelihoods(test, phi, np.full(K, 0.1), 5, streams, 3, threads=1)
    two = document_log_likelihoods(test, phi, np.full(K, 0.1), 5, streams, 3, threads=2)
    assert np.array_equal(one, two)
    assert not np.array_equal(one, document_log_likelihoods(test, phi, np.full(K, 0.1), 5,
                                                            Streams(5), 3))


def exact_conditional(observed: list[int], held: list[int], phi: np.ndarray,
                      alpha: np.ndarray) -> float:
    """ln p(held | observed, phi, alpha) by enumeration of every topic assignment."""
    value = exact_log_likelihood(observed + held, phi, alpha)
    return value - exact_log_likelihood(observed, phi, alpha) if observed else value


# documents of two tokens: the first is predicted exactly, and each particle's topic of the
# first is an exact posterior draw when the second is predicted, so the estimate is unbiased
# and its error is Monte Carlo error alone
TWO_TOKEN_DOCS = [([0], [3]), ([], [3, 0]), ([2], [2]), ([], [1, 3]), ([3], [1]), ([1], [0])]


@pytest.mark.parametrize("alpha", [np.array([0.2, 0.5]), np.array([0.1, 0.1]),
                                   np.array([1.5, 0.3])], ids=["asymmetric", "symmetric",
                                                               "large"])
def test_document_log_likelihoods_equal_exact_values(alpha):
    """The estimator as evaluation calls it, against enumeration, for several alpha: a
    changed alpha changes the estimate, and by what the exact values say. With 20,000
    particles the Monte Carlo sd of a document's value is below 0.003 here, so 0.01 allows
    more than 3 sd; using alpha = 1 instead moves the values by 0.05 to 0.4."""
    observed = [o for o, _ in TWO_TOKEN_DOCS]
    held = [h for _, h in TWO_TOKEN_DOCS]
    test = make_test_set(observed, held, PHI.shape[0])
    got = document_log_likelihoods(test, PHI, alpha, 20000, Streams(3), chunk_docs=4)
    # the held-out tokens are scored in CSR order (ascending word id)
    want = [exact_conditional(o, sorted(h), PHI, alpha) for o, h in TWO_TOKEN_DOCS]
    np.testing.assert_allclose(got, want, rtol=0, atol=0.01)
    ones = [exact_conditional(o, sorted(h), PHI, np.ones(2)) for o, h in TWO_TOKEN_DOCS]
    assert np.max(np.abs(np.subtract(want, ones))) > 0.05


@pytest.fixture(scope="module")
def small_store(tmp_path_factory):
    """A planted corpus with K* = 3 topics on V = 12 words; its test documents are the first two
    tokens of 8 other planted documents, split as in TWO_TOKEN_DOCS (short enough to
    enumerate)."""
    from tests.fixtures import planted_corpus, write_token_store

    corpus = planted_corpus(5, n_topics=3, n_words=12, n_docs=128, mean_length=25)
    test = [d[:2] for d in corpus.docs[:8]]
    observed = [d[:1] if i % 2 else d[:0] for i, d in enumerate(test)]
    held = [d[1:] if i % 2 else d for i, d in enumerate(test)]
    return write_token_store(tmp_path_factory.mktemp("l2r") / "store", corpus.docs[8:], 12,
                             test_observed=observed, test_heldout=held)


LDA_FAMILY = {
    "gibbs": {"iterations": 20},
    "sgrld": {"iterations": 10, "batch_size": 40, "burn_in": 5, "samples": 1},
    "vb": {"iterations": 10},
    "cvb0": {"iterations": 10},
    "ovb": {"iterations": 10, "batch_size": 40},
    "hsvg": {"iterations": 10, "batch_size": 40},
    "pem": {"iterations": 5, "particles": 2},
}


@pytest.mark.parametrize("algorithm", sorted(LDA_FAMILY))
def test_lda_family_runs_are_scored_with_their_alpha(small_store, tmp_path, algorithm):
    """A run with model.alpha = 0.3 is scored (§11.3) with the run's topics and alpha = 0.3 for
    every topic: the left-to-right perplexity equals the exact one of those topics within the
    estimator's Monte Carlo error (20,000 particles on two-token documents: under 0.003 in
    ln perplexity here); alpha = 1 in its place moves ln perplexity by about 0.1."""
    from topictk.corpus.store import CorpusStore
    from topictk.evaluation.left_to_right import left_to_right_perplexity
    from topictk.inference.registry import get_driver, load_config

    inference = {"algorithm": algorithm, **LDA_FAMILY[algorithm]}
    config = load_config(None, raw={
        "corpus": str(small_store), "output": str(tmp_path / "run"),
        "model": {"topics": 3, "alpha": 0.3, "beta": 0.05}, "inference": inference,
        "training": {"eval_every": 0, "checkpoint_every": 0}})
    store = CorpusStore.open(small_store)
    driver = get_driver(algorithm)(config, store, 1, streams=Streams(2))
    state = driver.init_state()
    for t in range(int(inference["iterations"])):
        driver.step(state, t)
    test = base.EvaluationSet.from_store(store)
    got = left_to_right_perplexity(driver, state, test, None, 20000, Streams(7))
    phi = driver.topic_word(state).T                       # (V, K)
    obs, held = test.observed, test.heldout

    def exact_perplexity(alpha):
        total = 0.0
        for d in range(obs.n_docs):
            o = list(obs.words[obs.doc_ptr[d]:obs.doc_ptr[d + 1]])
            h = [int(w) for w, n in zip(held.indices[held.indptr[d]:held.indptr[d + 1]],
                                        held.counts[held.indptr[d]:held.indptr[d + 1]])
                 for _ in range(n)]
            total += exact_conditional(o, h, phi, alpha)
        return math.exp(-total / test.n_heldout_tokens)

    want = exact_perplexity(np.full(3, 0.3))
    assert abs(math.log(got["perplexity_left_to_right"] / want)) < 0.005, (got, want)
    assert abs(math.log(exact_perplexity(np.ones(3)) / want)) > 0.03
