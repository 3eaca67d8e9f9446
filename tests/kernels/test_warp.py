"""The WarpLDA-order kernel (docs/algorithms.md §2.9) against its NumPy twin in
tests/reference/warp.py (exactly, same PCG64 streams); threads do not change the chain; the
chain's stationary distribution on a tiny corpus against exact enumeration, and topics
recovered from a corpus generated from known topics; the word terms (an overlay of extra word
prior, a given phi) against the twin and the exact posterior of their targets."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from scipy.optimize import linear_sum_assignment

from tests.kernels._kernel import KernelState, even_bounds, random_corpus, stream
from tests.kernels.test_mh import (BETA, DOC_PTR, SALPHA, SK, STERMS, SV, WORDS, _posterior,
                                   _twin_terms, word_terms)
from tests.kernels._mh import overlay_arguments
from tests.reference import warp as ref
from topictk.inference.gibbs import _warp
from topictk.inference.base import tokens_by_word
from topictk.inference.gibbs.driver import word_blocks
from topictk.inference.gibbs.warp import WarpSampler, initial_topics

D, V, K = 14, 17, 5
SYMMETRIC = np.full(K, 0.1)
ASYMMETRIC = np.array([0.05, 0.3, 1.2, 0.1, 0.6])


def _chain(z, n_topics, steps, doc_ptr, words, n_words, bounds, beta):
    """A chain as the driver holds it (z, nk) and its sampler."""
    block = word_blocks(np.bincount(words, minlength=n_words), bounds.size - 1)
    state = SimpleNamespace(z=z.copy(), beta=beta,
                            nk=np.bincount(z, minlength=n_topics).astype(np.int64))
    return state, WarpSampler(steps, doc_ptr, words, n_words, block, bounds), block


@pytest.mark.parametrize("block", [1, 3, 64, 1 << 20])
@pytest.mark.parametrize("positions", [np.int32, np.int64])
def test_word_order_is_the_stable_argsort_of_the_words(seed, block, positions):
    """Made a block of tokens at a time, the word order is the stable argsort of the words
    (every word's tokens in corpus order), with the offsets of every word's tokens."""
    rng = np.random.default_rng(seed)
    words = rng.integers(0, 23, rng.integers(0, 300)).astype(np.int32)
    words[words == 4] = 5                             # a word without tokens
    word_ptr, word_tokens = tokens_by_word(words, 23, positions, block)
    assert word_tokens.dtype == positions
    np.testing.assert_array_equal(word_tokens, np.argsort(words, kind="stable"))
    np.testing.assert_array_equal(np.diff(word_ptr), np.bincount(words, minlength=23))


@pytest.mark.parametrize("n_chunks,threads,positions", [
    (1, 1, np.int32), (2, 1, np.int32), (2, 2, np.int32), (3, 2, np.int32), (2, 2, np.int64)])
@pytest.mark.parametrize("steps", [1, 2])
@pytest.mark.parametrize("alpha", [SYMMETRIC, ASYMMETRIC], ids=["symmetric", "asymmetric"])
def test_sweeps_equal_reference(seed, n_chunks, threads, positions, steps, alpha):
    """Four sweeps: z, n_k and every stream's state equal the twin's (the word order's
    positions as int32, or int64 as for corpora of 2^31 tokens and more)."""
    rng = np.random.default_rng(seed)
    doc_ptr, words = random_corpus(rng, D, V, 9)
    z = rng.integers(0, K, words.size).astype(np.int32)
    bounds = even_bounds(D, n_chunks)
    state, sampler, block = _chain(z, K, steps, doc_ptr, words, V, bounds, 0.2)
    assert sampler.word_tokens.dtype == np.int32
    sampler.word_tokens = sampler.word_tokens.astype(positions)
    doc_streams = [stream(seed, 3, c) for c in range(n_chunks)]
    word_streams = [stream(seed, 7, c) for c in range(n_chunks)]
    twin_z, twin_nk = z.copy(), state.nk.copy()
    doc_gens = [np.random.Generator(stream(seed, 3, c)) for c in range(n_chunks)]
    word_gens = [np.random.Generator(stream(seed, 7, c)) for c in range(n_chunks)]
    for _ in range(4):
        sampler.sweep(state, alpha, bounds, doc_streams, word_streams, doc_ptr, words, threads)
        ref.sweep(doc_ptr, words, twin_z, twin_nk, alpha, 0.2, steps, bounds, block,
                  doc_gens, word_gens)
        np.testing.assert_array_equal(state.z, twin_z)
        np.testing.assert_array_equal(state.nk, twin_nk)
    np.testing.assert_array_equal(state.nk, np.bincount(state.z, minlength=K))
    for bg, gen in zip(doc_streams + word_streams, doc_gens + word_gens):
        assert bg.state == gen.bit_generator.state


def _sweep(sampler, state, alpha, bounds, doc_streams, word_streams, doc_ptr, words, threads,
           overlay=None, phi=None):
    """One sweep as ``WarpSampler.sweep`` runs it, with the word terms given."""
    word_docs, word_cuts, word_list, word_bounds = sampler.layout
    terms = dict(overlay_arguments(overlay), **({} if phi is None else {"phi": phi}))
    _warp.warp_sweep(doc_ptr, words, sampler.word_ptr, sampler.word_tokens, word_docs,
                     word_cuts, word_list, word_bounds, sampler.word_block, state.z, state.nk,
                     alpha, float(state.beta), sampler.steps, bounds, doc_streams,
                     word_streams, threads, **terms)


@pytest.mark.parametrize("term", ["overlay", "phi"])
@pytest.mark.parametrize("n_chunks,threads", [(1, 1), (3, 2)])
@pytest.mark.parametrize("steps", [1, 2])
def test_sweeps_with_word_terms_equal_reference(seed, term, n_chunks, threads, steps):
    """An overlay (words with and without one, one over every topic) or a given phi: z, n_k
    and every stream's state equal the twin's after four sweeps."""
    rng = np.random.default_rng(seed)
    doc_ptr, words = random_corpus(rng, D, V, 9)
    z = rng.integers(0, K, words.size).astype(np.int32)
    bounds = even_bounds(D, n_chunks)
    terms = word_terms(seed, term)
    state, sampler, block = _chain(z, K, steps, doc_ptr, words, V, bounds, 0.2)
    doc_streams = [stream(seed, 3, c) for c in range(n_chunks)]
    word_streams = [stream(seed, 7, c) for c in range(n_chunks)]
    twin_z, twin_nk = z.copy(), state.nk.copy()
    doc_gens = [np.random.Generator(stream(seed, 3, c)) for c in range(n_chunks)]
    word_gens = [np.random.Generator(stream(seed, 7, c)) for c in range(n_chunks)]
    for _ in range(4):
        _sweep(sampler, state, ASYMMETRIC, bounds, doc_streams, word_streams, doc_ptr, words,
               threads, **terms)
        ref.sweep(doc_ptr, words, twin_z, twin_nk, ASYMMETRIC, 0.2, steps, bounds, block,
                  doc_gens, word_gens, **_twin_terms(terms))
        np.testing.assert_array_equal(state.z, twin_z)
        np.testing.assert_array_equal(state.nk, twin_nk)
    for bg, gen in zip(doc_streams + word_streams, doc_gens + word_gens):
        assert bg.state == gen.bit_generator.state


def test_an_overlay_without_entries_is_the_symmetric_prior(seed):
    rng = np.random.default_rng(seed)
    doc_ptr, words = random_corpus(rng, D, V, 9)
    z = rng.integers(0, K, words.size).astype(np.int32)
    bounds = even_bounds(D, 2)
    empty = (np.zeros(V + 1, np.int64), np.zeros(0, np.int32), np.zeros(0))
    results = []
    for overlay in (None, empty):
        state, sampler, _ = _chain(z, K, 2, doc_ptr, words, V, bounds, 0.2)
        streams = [stream(seed, 3, c) for c in range(2)], [stream(seed, 7, c) for c in range(2)]
        for _ in range(3):
            _sweep(sampler, state, ASYMMETRIC, bounds, *streams, doc_ptr, words, 2,
                   overlay=overlay)
        results.append(state.z)
    np.testing.assert_array_equal(*results)


def test_threads_do_not_change_the_chain(seed):
    """Four chunks on 1, 2 and 3 threads, bit for bit."""
    rng = np.random.default_rng(seed)
    doc_ptr, words = random_corpus(rng, 400, 300, 60)
    z = rng.integers(0, 50, words.size).astype(np.int32)
    alpha = rng.uniform(0.05, 0.5, 50)
    bounds = even_bounds(400, 4)
    results = []
    for threads in (1, 2, 3):
        state, sampler, _ = _chain(z, 50, 2, doc_ptr, words, 300, bounds, 0.01)
        doc_streams = [stream(seed, 3, c) for c in range(4)]
        word_streams = [stream(seed, 7, c) for c in range(4)]
        for _ in range(5):
            sampler.sweep(state, alpha, bounds, doc_streams, word_streams, doc_ptr, words,
                          threads)
        results.append((state.z, state.nk))
    for other in results[1:]:
        for a, b in zip(results[0], other):
            np.testing.assert_array_equal(a, b)


def test_more_topics_than_tokens():
    """K far above N: every topic index stays in range and n_k matches z."""
    doc_ptr = np.array([0, 3, 5], np.int64)
    words = np.array([0, 1, 0, 2, 1], np.int32)
    z = np.array([0, 4000, 9999, 5, 5], np.int32)
    bounds = np.array([0, 2], np.int64)
    state, sampler, _ = _chain(z, 10_000, 2, doc_ptr, words, 3, bounds, 0.01)
    for _ in range(20):
        sampler.sweep(state, np.full(10_000, 0.1), bounds, [stream(0, 3, 0)],
                      [stream(0, 7, 0)], doc_ptr, words, 1)
    assert state.z.min() >= 0 and state.z.max() < 10_000
    np.testing.assert_array_equal(state.nk, np.bincount(state.z, minlength=10_000))


def test_bad_arguments_raise():
    doc_ptr = np.array([0, 3, 5], np.int64)
    words = np.array([0, 1, 0, 2, 1], np.int32)
    bounds = np.array([0, 2], np.int64)
    state, sampler, _ = _chain(np.zeros(5, np.int32), K, 1, doc_ptr, words, 3, bounds, 0.1)
    with pytest.raises(ValueError, match="streams"):
        sampler.sweep(state, SYMMETRIC, bounds, [], [], doc_ptr, words, 1)
    with pytest.raises(ValueError, match="one entry per token"):
        sampler.sweep(state, SYMMETRIC, bounds, [stream(0, 3, 0)], [stream(0, 7, 0)], doc_ptr,
                      words[:4], 1)
    streams = [stream(0, 3, 0)], [stream(0, 7, 0)]
    with pytest.raises(ValueError, match="replaces the word prior"):
        _sweep(sampler, state, SYMMETRIC, bounds, *streams, doc_ptr, words, 1,
               overlay=(np.zeros(4, np.int64), np.zeros(0, np.int32), np.zeros(0)),
               phi=np.ones((K, 3)))
    with pytest.raises(ValueError, match="ascending topics"):
        _sweep(sampler, state, SYMMETRIC, bounds, *streams, doc_ptr, words, 1,
               overlay=(np.array([0, 2, 2, 2]), np.array([1, 1], np.int32), np.ones(2)))
    with pytest.raises(ValueError, match="topics x words"):
        _sweep(sampler, state, SYMMETRIC, bounds, *streams, doc_ptr, words, 1,
               phi=np.ones((K, 4)))
    sampler.steps = 0
    with pytest.raises(ValueError, match="one step"):
        sampler.sweep(state, SYMMETRIC, bounds, [stream(0, 3, 0)], [stream(0, 7, 0)], doc_ptr,
                      words, 1)


def test_initial_topics_are_those_of_the_exact_samplers(seed):
    """WarpLDA starts from the z of ``init_topics`` (§2.2) without making its dense counts."""
    rng = np.random.default_rng(seed)
    doc_ptr, words = random_corpus(rng, D, V, 9)
    state = KernelState.initial(doc_ptr, words, 7, V, stream(seed, 0))
    np.testing.assert_array_equal(initial_topics(words.size, 7, stream(seed, 0)), state.z)
    # drawn a block of uniforms at a time, the same z
    np.testing.assert_array_equal(initial_topics(words.size, 7, stream(seed, 0), block=5),
                                  state.z)


def test_count_topics_counts_z():
    rng = np.random.default_rng(3)
    doc_ptr, words = random_corpus(rng, D, V, 9)
    z = rng.integers(0, K, words.size).astype(np.int32)
    state = KernelState.initial(doc_ptr, words, K, V, stream(3, 0))
    state.z[:] = z
    _warp.count_topics(doc_ptr, words, state.z, state.ndk, state.nkw)
    doc_of = np.repeat(np.arange(D), np.diff(doc_ptr))
    ndk = np.zeros((D, K), np.int32)
    nkw = np.zeros((V, K), np.int32)
    np.add.at(ndk, (doc_of, z), 1)
    np.add.at(nkw, (words, z), 1)
    np.testing.assert_array_equal(state.ndk, ndk)
    np.testing.assert_array_equal(state.nkw, nkw)


# ---------------------------------------------------------------- stationary distribution

SWEEPS = 150_000
# Measured on the 7-token corpus of tests/kernels/test_mh.py over SWEEPS sweeps (seeds 0, 1):
# total variation from the exact posterior 0.029-0.031 with one or two MH steps, the Monte
# Carlo error of an exact sampler (the exact Gibbs sampler: 0.030). The WarpLDA kernel of the
# published algorithm, whose proposals were drawn one phase before their use, was 0.096-0.128
# here. With the n_k
# factor left out of both acceptance ratios, or a proposal that may read the token's own
# topic, the distance is several times the tolerance (tests/mutation).
TOLERANCE = 0.045


def _warp_frequencies(seed: int, steps: int, **terms) -> np.ndarray:
    rng = np.random.Generator(stream(seed, 0))
    z = rng.integers(0, SK, WORDS.size).astype(np.int32)
    bounds = np.array([0, 3], np.int64)
    state, sampler, _ = _chain(z, SK, steps, DOC_PTR, WORDS, SV, bounds, BETA)
    doc_streams, word_streams = [stream(seed, 3, 0)], [stream(seed, 7, 0)]
    place = SK ** np.arange(WORDS.size - 1, -1, -1)
    codes = np.empty(SWEEPS, np.int64)
    for t in range(SWEEPS):
        _sweep(sampler, state, SALPHA, bounds, doc_streams, word_streams, DOC_PTR, WORDS, 1,
               **terms)
        codes[t] = state.z @ place
    return np.bincount(codes, minlength=SK ** WORDS.size) / SWEEPS


@pytest.mark.parametrize("steps", [1, 2])
def test_warp_chain_stays_close_to_the_posterior(seed, steps):
    tv = 0.5 * np.abs(_warp_frequencies(seed, steps) - _posterior()).sum()
    assert tv < TOLERANCE, f"total variation {tv:.4f}"


# The word terms of tests/kernels/test_mh.py on the same corpus (one prior for every
# document), seeds 0 and 1, M = 1: total variation 0.028-0.030 (overlay) and 0.029-0.030
# (phi); with the overlay left out of the word phase's ratio 0.22, with phi's ratio there
# inverted 0.52.
@pytest.mark.parametrize("term", STERMS)
def test_warp_chain_with_word_terms_targets_the_posterior(seed, term):
    tv = 0.5 * np.abs(_warp_frequencies(seed, 1, **STERMS[term])
                      - _posterior(SALPHA, **STERMS[term])).sum()
    assert tv < TOLERANCE, f"total variation {tv:.4f}"


# A corpus of 300 documents of 60 tokens drawn from 8 known topics over 200 words: after 300
# sweeps from the same start, mean total variation between the recovered and the true topics
# (matched one to one), seeds 0-3: exact Gibbs 0.052-0.055, WarpLDA 0.054-0.061 with one or
# two MH steps. Either chain now and then merges two topics into one and splits another (exact
# Gibbs on seed 1: two topics off by 0.5-0.7), so the test asks for RECOVERED of the 8 topics
# within 0.1 and a median below RECOVERY (seeds 0-19 pass).
RECOVERY = 0.075
RECOVERED = 6
GD, GV, GK, GL, GALPHA, GBETA = 300, 200, 8, 60, 0.1, 0.05


def _generated(seed: int):
    rng = np.random.default_rng(seed)
    phi = rng.dirichlet(np.full(GV, 0.05), GK)
    theta = rng.dirichlet(np.full(GK, GALPHA), GD)
    words = np.concatenate([rng.choice(GV, GL, p=theta[d] @ phi) for d in range(GD)])
    return np.arange(0, GD * GL + 1, GL, dtype=np.int64), words.astype(np.int32), phi


@pytest.mark.parametrize("steps", [1, 2])
def test_warp_recovers_known_topics(seed, steps):
    doc_ptr, words, phi = _generated(seed)
    z = np.random.default_rng(seed + 1).integers(0, GK, words.size).astype(np.int32)
    bounds = np.array([0, GD], np.int64)
    state, sampler, _ = _chain(z, GK, steps, doc_ptr, words, GV, bounds, GBETA)
    doc_streams, word_streams = [stream(seed, 3, 0)], [stream(seed, 7, 0)]
    for _ in range(300):
        sampler.sweep(state, np.full(GK, GALPHA), bounds, doc_streams, word_streams, doc_ptr,
                      words, 1)
    nkw = np.zeros((GK, GV))
    np.add.at(nkw, (state.z, words), 1)
    estimate = (nkw + GBETA) / (nkw.sum(axis=1, keepdims=True) + GV * GBETA)
    cost = 0.5 * np.abs(estimate[:, None, :] - phi[None, :, :]).sum(axis=2)
    rows, cols = linear_sum_assignment(cost)
    errors = np.sort(cost[rows, cols])
    assert np.sum(errors < 0.1) >= RECOVERED and np.median(errors) < RECOVERY, errors


@pytest.mark.parametrize("ordered", [False, np.int32, np.int64])
def test_row_topic_counts_are_the_non_zero_dense_counts(ordered):
    """The CSR counts of a sample (§2.9): per row its topics ascending with their counts,
    rows given directly (documents) or through an order (words); dense_counts gives the
    dense array back, and no token gives empty rows."""
    from topictk.inference.gibbs.warp import sparse_counts
    from topictk.state.counts import dense_counts

    rng = np.random.default_rng(3)
    rows = np.sort(rng.integers(0, 9, size=300))           # rows 9 and 10 have no token
    z = rng.integers(0, 7, size=300).astype(np.int32)
    dense = np.zeros((11, 7), dtype=np.int32)
    np.add.at(dense, (rows, z), 1)
    row_ptr = np.zeros(12, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=11), out=row_ptr[1:])
    order = None
    if ordered:                                            # the tokens shuffled, found by order
        perm = rng.permutation(300)
        shuffled = np.empty_like(z)
        shuffled[perm] = z
        z, order = shuffled, perm.astype(ordered)
    arrays = sparse_counts(row_ptr, order, z, 7, "nkw")
    ptr, topic, count = arrays["nkw_ptr"], arrays["nkw_topic"], arrays["nkw_count"]
    assert ptr[-1] == np.count_nonzero(dense) == count.size
    for r in range(11):
        row = slice(ptr[r], ptr[r + 1])
        assert np.all(np.diff(topic[row]) > 0)
        assert np.array_equal(dense[r, topic[row]], count[row])
    assert np.array_equal(dense_counts(arrays, "nkw", 7), dense)
    assert dense_counts({"nkw": dense}, "nkw", 7) is dense
    none = sparse_counts(np.zeros(4, np.int64), None, np.zeros(0, np.int32), 2, "ndk")
    assert np.array_equal(none["ndk_ptr"], np.zeros(4)) and none["ndk_topic"].size == 0
    assert np.array_equal(dense_counts(none, "ndk", 2), np.zeros((3, 2)))
