"""The global draws of the hierarchical Dirichlet process chain (docs/algorithms.md §2.15):
the table draw against its NumPy twin and its known mean, the weights' Dirichlet update, the
concentrations' auxiliary-variable draws."""
from __future__ import annotations

import numpy as np
from scipy.special import digamma, gammaln

from tests.reference import hdp as reference
from topictk.inference.gibbs import hdp


def _generator(seed: int) -> np.random.Generator:
    return np.random.Generator(np.random.PCG64(seed))


def test_table_draw_equals_its_twin(seed):
    """The same tables as the plain loop from the same stream, across more than one block of
    documents, with empty rows and topics; and the stream ends in the same place."""
    rng = np.random.default_rng(seed)
    ndk = rng.poisson(1.5, size=(hdp.CRT_BLOCK + 37, 6)).astype(np.int32)
    ndk[5] = 0
    ndk[:, 2] = 0
    weight = rng.gamma(1.0, 1.0, 6)
    mine, theirs = _generator(seed), _generator(seed)
    got = hdp.crt_tables(ndk, weight, mine)
    want = reference.crt_tables(ndk, weight, theirs)
    np.testing.assert_array_equal(got, want)
    assert mine.random() == theirs.random()
    # the documents' lengths count the customers as the rows do
    doc_ptr = np.concatenate([[0], np.cumsum(ndk.sum(axis=1))])
    mine, again = _generator(seed), _generator(seed)
    np.testing.assert_array_equal(hdp.crt_tables(ndk, weight, mine, doc_ptr),
                                  hdp.crt_tables(ndk, weight, again))
    assert mine.random() == again.random()
    assert got[2] == 0 and np.all(got <= ndk.sum(axis=0)) and np.all(got[ndk.any(0)] > 0)


def test_table_draw_of_non_zero_rows_equals_the_dense_one(seed):
    """The WarpLDA-order chain's table draw, from n_dk's non-zero entries as CSR rows (topics
    ascending), gives the tables of the dense draw from the same stream, across blocks of
    documents and with empty rows, and leaves the stream in the same place."""
    from topictk.inference.gibbs.warp import sparse_counts
    rng = np.random.default_rng(seed)
    D, K = hdp.CRT_BLOCK + 211, 7
    lengths = rng.integers(0, 9, D)
    lengths[[0, 3, hdp.CRT_BLOCK]] = 0
    doc_ptr = np.zeros(D + 1, dtype=np.int64)
    np.cumsum(lengths, out=doc_ptr[1:])
    z = rng.integers(0, K - 1, doc_ptr[-1]).astype(np.int32)       # topic K - 1 stays empty
    ndk = np.zeros((D, K), dtype=np.int32)
    np.add.at(ndk, (np.repeat(np.arange(D), lengths), z), 1)
    rows = sparse_counts(doc_ptr, None, z, K, "ndk")
    weight = rng.gamma(0.5, 1.0, K)
    dense, sparse = _generator(seed), _generator(seed)
    want = hdp.crt_tables(ndk, weight, dense)
    got = hdp.crt_tables_of_rows(rows["ndk_ptr"], rows["ndk_topic"], rows["ndk_count"], weight,
                                 sparse)
    np.testing.assert_array_equal(got, want)
    assert got[K - 1] == 0 and dense.random() == sparse.random()


def test_table_draw_has_the_crt_mean():
    """E[m] = sum_{i<n} a / (a + i) = a (psi(a + n) - psi(a)); the mean of 4,000 documents of
    n customers within 4 standard errors, for small and large a."""
    n, D = 25, 4000
    ndk = np.full((D, 3), n, dtype=np.int32)
    weight = np.array([0.05, 1.0, 20.0])
    generator = _generator(3)
    draws = np.array([hdp.crt_tables(ndk[d:d + 1], weight, generator) for d in range(0, D)])
    i = np.arange(n)
    p = weight[:, None] / (weight[:, None] + i)
    mean, var = p.sum(axis=1), (p * (1 - p)).sum(axis=1)
    np.testing.assert_allclose(mean, weight * (digamma(weight + n) - digamma(weight)))
    assert np.all(np.abs(draws.mean(axis=0) - mean) < 4 * np.sqrt(var / D)), (
        draws.mean(axis=0), mean)


def test_weights_follow_their_dirichlet():
    """pi ~ Dir(gamma / K + m): the mean of 4,000 draws within 4 standard errors of the
    Dirichlet's mean, every draw on the simplex and above the floor even where gamma / K + m
    is 0.001 (a plain Gamma draw underflows there)."""
    tables = np.array([0, 0, 3, 10, 40], dtype=np.int64)
    gamma = 0.005
    shape = gamma / tables.size + tables
    generator = _generator(5)
    draws = np.array([hdp.draw_weights(tables, gamma, generator) for _ in range(4000)])
    assert np.all(draws >= 0.99 * hdp.PI_FLOOR)
    np.testing.assert_allclose(draws.sum(axis=1), 1.0)
    a0 = shape.sum()
    mean = shape / a0
    sd = np.sqrt(mean * (1 - mean) / (a0 + 1))
    assert np.all(np.abs(draws.mean(axis=0) - mean) < 4 * sd / np.sqrt(4000) + 1e-12), (
        draws.mean(axis=0), mean)


def _posterior_mean(log_density, grid: np.ndarray) -> float:
    logp = log_density(grid)
    p = np.exp(logp - logp.max())
    return float((grid * p).sum() / p.sum())


def test_concentration_draws_have_their_posterior_mean():
    """alpha_0 and gamma, each redrawn 6,000 times from its own last value with the tables
    fixed (a Gibbs chain over the auxiliary variables), average within 4 % of the exact
    posterior mean, found on a grid: p(alpha_0 | m..) ~ Gamma(alpha_0; 1, 1) alpha_0^m..
    prod_d Gamma(alpha_0) / Gamma(alpha_0 + N_d), p(gamma | K-bar, m..) ~ Gamma(gamma; 1, 0.1)
    gamma^K-bar Gamma(gamma) / Gamma(gamma + m..)."""
    lengths = np.r_[np.full(150, 50), np.full(50, 7), 0]
    total, live = 700, 12
    alpha0, gamma, generator = 1.0, 1.0, _generator(7)
    alphas, gammas = [], []
    for _ in range(6000):
        alpha0 = hdp.resample_alpha0(alpha0, lengths, total, (1.0, 1.0), generator)
        gamma = hdp.resample_gamma(gamma, live, total, (1.0, 0.1), generator)
        alphas.append(alpha0)
        gammas.append(gamma)
    n = lengths[lengths > 0]
    grid = np.linspace(1e-3, 20, 40001)
    want = _posterior_mean(lambda x: -x + total * np.log(x) + (
        gammaln(x)[:, None] - gammaln(x[:, None] + n)).sum(axis=1), grid)
    assert abs(np.mean(alphas[200:]) - want) / want < 0.04, (np.mean(alphas[200:]), want)
    want = _posterior_mean(lambda x: -0.1 * x + live * np.log(x) + gammaln(x)
                           - gammaln(x + total), grid)
    assert abs(np.mean(gammas[200:]) - want) / want < 0.04, (np.mean(gammas[200:]), want)


def test_a_split_and_the_merge_back_have_inverse_ratios(seed):
    """Detailed balance of the split-merge move, term by term: for a merged state x (a
    topic's tokens in k, pi_k, pi_j) and a split x' of it (its tokens dealt into k and j, pi'
    proposed, the deal's ln q), the log ratio of x -> x' and that of the merge x' -> x (E
    empty slots in x, E - 1 in x') add up to 0, whatever the weights."""
    rng = np.random.default_rng(seed)
    n, V = 50, 9
    docs = np.sort(rng.integers(0, 7, n))
    words = rng.integers(0, V, n)
    side = rng.random(n) < 0.4
    pi, proposed = (0.3, 1e-9), (0.12, 0.18 + 1e-9)
    common = (0.7, 0.05, V, 0.02)
    log_q, n_empty = -31.5, 5
    split = hdp.pair_log_ratio(True, docs, words, docs[~side], words[~side], docs[side],
                               words[side], pi, proposed, log_q, n_empty, *common)
    merge = hdp.pair_log_ratio(False, docs, words, docs[~side], words[~side], docs[side],
                               words[side], proposed, pi, log_q, n_empty - 1, *common)
    assert np.isfinite(split)
    np.testing.assert_allclose(split + merge, 0.0, atol=1e-9)


def test_the_split_merge_term_of_the_joint_is_its_dense_formula():
    """A topic's factors of ln p(z | pi) from its tokens' documents and words equal the dense
    formula over every document and word (zero counts adding nothing)."""
    rng = np.random.default_rng(4)
    docs, words = rng.integers(0, 6, 40), rng.integers(0, 8, 40)
    a, beta, V = 0.37, 0.05, 8
    nd = np.bincount(docs, minlength=6)
    nw = np.bincount(words, minlength=V)
    want = ((gammaln(a + nd) - gammaln(a)).sum() + gammaln(V * beta)
            - gammaln(V * beta + 40) + (gammaln(beta + nw) - gammaln(beta)).sum())
    np.testing.assert_allclose(hdp.topic_log_joint(docs, words, a, beta, V), want)
    assert hdp.topic_log_joint(docs[:0], words[:0], a, beta, V) == 0.0
