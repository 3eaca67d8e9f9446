"""The dynamic topic model's kernels and updates against their NumPy twins
(``tests/reference/dtm.py``, docs/algorithms.md §14.2): the token draw bit for bit, the counts
exactly, and every Langevin step's drift against the gradient of the log density it targets
(finite differences), its curvature and its noise's scale; alpha's exact draw against its
conditional's mean and variance."""
from __future__ import annotations

import numpy as np
import pytest

from tests.reference import dtm as ref
from topictk.inference.dtm import _dtm
from topictk.inference.dtm.updates import alpha_draw, eta_step, softmax_topics
from topictk.streams import make_stream


def _corpus(seed=0, D=23, V=17, K=5, T=3):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(0, 30, D)
    doc_ptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    words = rng.integers(0, V, doc_ptr[-1]).astype(np.int32)
    doc_slice = rng.integers(0, T, D).astype(np.int32)
    theta = rng.dirichlet(np.full(K, 0.5), D)
    word_topic = rng.dirichlet(np.full(V, 0.3), (T, K)).transpose(0, 2, 1).copy()
    return doc_ptr, words, doc_slice, theta, word_topic


@pytest.mark.parametrize("threads", [1, 2])
def test_the_token_draw_is_its_twin_bit_for_bit(threads):
    doc_ptr, words, doc_slice, theta, word_topic = _corpus()
    D, K = theta.shape
    bounds = np.array([0, 5, 6, 15, D], dtype=np.int64)
    active = (np.arange(D) % 4 != 1).astype(np.uint8)
    got_z, want_z = np.full(words.size, -1, np.int32), np.full(words.size, -1, np.int32)
    got_n, want_n = np.full((D, K), 7, np.int32), np.full((D, K), 7, np.int32)
    _dtm.sample_topics(doc_ptr, words, doc_slice, theta, word_topic, bounds,
                       [make_stream(3, (11, 0, c)) for c in range(4)], got_z, got_n, threads,
                       active)
    ref.sample_topics(doc_ptr, words, doc_slice, theta, word_topic, bounds,
                      [make_stream(3, (11, 0, c)) for c in range(4)], want_z, want_n, active)
    np.testing.assert_array_equal(got_z, want_z)
    np.testing.assert_array_equal(got_n, want_n)
    assert (got_z >= 0).sum() == sum(doc_ptr[d + 1] - doc_ptr[d] for d in range(D) if active[d])


def test_the_token_draw_follows_theta_times_the_slice_topic():
    """One document of 40,000 tokens of one word: the topics' shares are theta_k p_{t,w,k}
    normalised, within 4 standard errors (a draw from the wrong slice or without theta is
    far outside)."""
    K, V, T = 4, 3, 2
    theta = np.array([[0.1, 0.2, 0.3, 0.4]])
    word_topic = np.random.default_rng(1).dirichlet(np.ones(V), (T, K)).transpose(0, 2, 1).copy()
    words = np.full(40_000, 2, np.int32)
    doc_ptr = np.array([0, words.size], np.int64)
    z, ndk = np.zeros(words.size, np.int32), np.zeros((1, K), np.int32)
    _dtm.sample_topics(doc_ptr, words, np.array([1], np.int32), theta, word_topic,
                       np.array([0, 1], np.int64), [make_stream(0, (1,))], z, ndk, 1)
    want = theta[0] * word_topic[1, 2]
    want /= want.sum()
    se = np.sqrt(want * (1 - want) / words.size)
    assert np.all(np.abs(ndk[0] / words.size - want) < 4 * se), (ndk, want)


def test_bad_slices_or_words_are_refused():
    doc_ptr, words, doc_slice, theta, word_topic = _corpus()
    doc_slice[3] = 9
    with pytest.raises(ValueError, match="slice or a word"):
        _dtm.sample_topics(doc_ptr, words, doc_slice, theta, word_topic,
                           np.array([0, theta.shape[0]], np.int64), [make_stream(0, (1,))],
                           np.zeros(words.size, np.int32), np.zeros(theta.shape, np.int32), 1)


def test_slice_counts_are_the_counts_of_z():
    doc_ptr, words, doc_slice, theta, word_topic = _corpus(2)
    z = np.random.default_rng(0).integers(0, 5, words.size).astype(np.int32)
    counts = np.full((3, 17, 5), 9, np.int32)
    _dtm.slice_word_counts(doc_ptr, words, doc_slice, z, counts)
    np.testing.assert_array_equal(counts, ref.slice_word_counts(doc_ptr, words, doc_slice, z,
                                                                3, 17, 5))


def _numeric_gradient(f, x, h=1e-6):
    grad = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        x[i] += h
        up = f(x)
        x[i] -= 2 * h
        down = f(x)
        x[i] += h
        grad[i] = (up - down) / (2 * h)
    return grad


def test_the_phi_step_drifts_along_the_gradient_scaled_by_the_curvature():
    """The twin's step against finite differences of ln p(phi | z), its curvature and its
    noise's scale."""
    rng = np.random.default_rng(4)
    T, V, K = 3, 6, 2
    phi = rng.normal(size=(T, V, K))
    counts = rng.integers(0, 6, (T, V, K)).astype(np.int32)
    mean = rng.normal(size=(V, 1))
    var, first = 0.3, 2.0
    grad = _numeric_gradient(lambda p: ref.log_phi_density(p, counts, var, first, mean),
                             phi.copy())
    p = ref.softmax_words(phi)
    expected = p * counts.sum(axis=1, keepdims=True)
    precision = np.array([1 / first + 1 / var, 2 / var, 1 / var])[:, None, None]
    curvature = np.maximum(counts, expected) + precision
    eps = 0.37
    moved = phi.copy()
    ref.phi_step(moved, counts, eps, var, first, None, mean)
    np.testing.assert_allclose(moved - phi, eps * grad / curvature, rtol=1e-6, atol=1e-9)
    noise = rng.normal(size=phi.shape)
    noisy = phi.copy()
    ref.phi_step(noisy, counts, eps, var, first, noise.copy(), mean)
    np.testing.assert_allclose(noisy - moved, np.sqrt(2 * eps / curvature) * noise, rtol=1e-9)


@pytest.mark.parametrize("T", [1, 2, 5])
@pytest.mark.parametrize("threads", [1, 2])
def test_the_phi_kernel_is_its_twin(T, threads):
    """The kernel's step and its new word probabilities are the twin's (to rounding), with
    and without noise (each slice's normals from its stream, by the ziggurat's twin), and the
    probabilities it writes are word_probabilities' of its phi, bit for bit (a resumed chain
    recomputes them)."""
    rng = np.random.default_rng(T)
    V, K = 7, 3
    phi = rng.normal(size=(T, V, K))
    counts = rng.integers(0, 9, (T, V, K)).astype(np.int32)
    mean = rng.normal(size=V)
    prob = np.empty_like(phi)
    _dtm.word_probabilities(phi, prob, threads)
    np.testing.assert_allclose(prob, ref.softmax_words(phi), rtol=1e-12)
    tables = _dtm.ziggurat_tables()
    for noisy in (False, True):
        streams = [make_stream(9, (12, 3, s)) for s in range(T)] if noisy else None
        noise = None
        if noisy:
            noise = np.stack([ref.ziggurat_normals(make_stream(9, (12, 3, s)), V * K, tables)
                              .reshape(V, K) for s in range(T)])
        want = phi.copy()
        ref.phi_step(want, counts, 0.6, 0.2, 1.5, noise, mean[:, None])
        got, got_prob = np.empty_like(phi), np.empty_like(phi)
        _dtm.phi_step(phi, counts, prob, mean, streams, 0.6, 0.2, 1.5, got, got_prob, threads)
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(got_prob, ref.softmax_words(want), rtol=1e-10)
        again = np.empty_like(phi)
        _dtm.word_probabilities(got, again, 3 - threads)
        np.testing.assert_array_equal(again, got_prob)


def test_the_normals_are_their_twin_bit_for_bit_and_standard():
    """The ziggurat's draws are its twin's, bit for bit, over 20,000 draws (the wedges and
    the tail included); 400,000 of them have mean 0 and variance 1 within 4 standard errors,
    the tail beyond the base strip (|x| > 3.4426) its normal share within 4 standard errors,
    and a Kolmogorov-Smirnov distance below 0.003 (p > 0.01 for a standard normal)."""
    from scipy import stats

    tables = _dtm.ziggurat_tables()
    got = np.empty(20_000)
    _dtm.standard_normals(make_stream(5, (12, 0, 0)), got)
    np.testing.assert_array_equal(got, ref.ziggurat_normals(make_stream(5, (12, 0, 0)),
                                                            20_000, tables))
    n = 400_000
    x = np.empty(n)
    _dtm.standard_normals(make_stream(6, (12, 1, 0)), x)
    assert abs(x.mean()) < 4 / np.sqrt(n)
    assert abs(x.var() - 1) < 4 * np.sqrt(2 / n)
    tail = 2 * stats.norm.sf(3.442619855899)
    assert abs(np.mean(np.abs(x) > 3.442619855899) - tail) < 4 * np.sqrt(tail / n)
    assert stats.kstest(x, "norm").statistic < 0.003


def test_the_walk_of_one_slice_pulls_to_its_first_mean_only():
    grad, prec = ref.walk_neighbours(np.array([[2.0, -1.0]]), 0.5, 4.0, 1.0)
    np.testing.assert_allclose(grad, [[-0.25, 0.5]])
    np.testing.assert_allclose(prec, [[0.25]])


def test_the_eta_step_drifts_along_the_gradient_scaled_by_the_curvature():
    rng = np.random.default_rng(5)
    D, K = 4, 3
    eta = rng.normal(size=(D, K))
    ndk = rng.integers(0, 9, (D, K)).astype(np.int32)
    mean = rng.normal(size=(D, K))
    lengths = ndk.sum(axis=1).astype(float)
    grad = _numeric_gradient(lambda e: ref.log_eta_density(e, ndk, mean, 0.7), eta.copy())
    curvature = np.maximum(ndk, softmax_topics(eta) * lengths[:, None]) + 1 / 0.7
    moved = eta.copy()
    eta_step(moved, ndk, lengths, mean, 0.7, 0.2, None)
    np.testing.assert_allclose(moved - eta, 0.2 * grad / curvature, rtol=1e-6, atol=1e-9)


def test_alpha_is_drawn_from_its_gaussian_conditional():
    """With zero normals alpha_t lands on its conditional mean given its neighbours (the ones
    already drawn on its left) and its documents; with unit normals one standard deviation
    above it."""
    rng = np.random.default_rng(6)
    T, K, D = 3, 2, 9
    eta = rng.normal(size=(D, K))
    doc_slice = np.array([0, 0, 1, 1, 1, 1, 2, 0, 2], np.int32)
    start = rng.normal(size=(T, K))
    var, first, eta_var = 0.2, 1.5, 0.8
    for scale in (0.0, 1.0):
        alpha = start.copy()
        alpha_draw(alpha, eta, doc_slice, var, first, eta_var, np.full((T, K), scale))
        left = None
        for t in range(T):
            n = np.count_nonzero(doc_slice == t)
            prec = n / eta_var + (1 / first if t == 0 else 1 / var) + (1 / var if t < T - 1
                                                                       else 0)
            total = eta[doc_slice == t].sum(axis=0) / eta_var
            if t > 0:
                total = total + left / var
            if t < T - 1:
                total = total + start[t + 1] / var
            np.testing.assert_allclose(alpha[t], total / prec + scale / np.sqrt(prec))
            left = alpha[t]
