"""The word term as an input of the Gibbs sweeps (docs/algorithms.md §2.10): the word prior
beta + o[w, k] with a sparse overlay, and a given topic-word matrix phi. The kernels equal
their NumPy twins (tests/reference/gibbs.py) exactly for both samplers, AD-LDA chunks and the
partitioned schedule; the inputs change the chain the way the conditional says; an overlay
without entries is the symmetric prior, bit for bit."""
from __future__ import annotations

import numpy as np
import pytest

from tests.kernels._kernel import KernelState, even_bounds, random_corpus, stream
from tests.reference import gibbs as ref
from topictk.inference.gibbs import _gibbs
from topictk.inference.base import chunk_bounds_by_tokens
from topictk.inference.gibbs.driver import block_order, word_blocks

D, V, K = 14, 17, 5
BETA = 0.05
ASYMMETRIC = np.array([0.05, 0.3, 1.2, 0.1, 0.6])


def random_overlay(rng: np.random.Generator, n_words: int = V, n_topics: int = K,
                   share: float = 0.3) -> dict[str, np.ndarray]:
    """The kernels' overlay keywords, CSR by word: about ``share`` of the (w, k) pairs get an
    extra prior, some of them large; some words none."""
    mask = rng.random((n_words, n_topics)) < share
    extra = rng.choice([0.0, 0.02, 0.7, 5.0], size=mask.sum())
    ptr = np.zeros(n_words + 1, np.int64)
    np.cumsum(mask.sum(axis=1), out=ptr[1:])
    topics = np.nonzero(mask)[1].astype(np.int32)
    return {"prior_ptr": ptr, "prior_topic": topics, "prior_extra": extra.astype(np.float64)}


def random_phi(rng: np.random.Generator, n_words: int = V, n_topics: int = K) -> np.ndarray:
    """(K, V) rows on the simplex, with zeros (but some mass in every word's column)."""
    phi = rng.gamma(0.3, size=(n_topics, n_words))
    phi[rng.random(phi.shape) < 0.2] = 0.0
    owner = np.arange(n_words) % n_topics
    phi[owner, np.arange(n_words)] += 1e-3
    return phi / phi.sum(axis=1, keepdims=True)


def _prior(kind: str, seed: int, n_docs: int = D) -> np.ndarray:
    if kind == "one":
        return ASYMMETRIC
    return np.random.default_rng(seed + 11).uniform(0.05, 2.0, size=(n_docs, K))


def _term(kind: str, rng: np.random.Generator) -> dict:
    return random_overlay(rng) if kind == "overlay" else {"phi": random_phi(rng)}


def _start(doc_ptr, words, seed):
    state = KernelState.initial(doc_ptr, words, K, V, stream(seed, 0))
    return state, ref.init_topics(doc_ptr, words, K, V, np.random.Generator(stream(seed, 0)))


def _assert_same(state, arrays, what):
    for name, got, want in zip(("z", "ndk", "nkw", "nk"), state.arrays(), arrays):
        assert np.array_equal(got, want), f"{name} differs {what}"


@pytest.mark.parametrize("kind", ["overlay", "phi"])
@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
@pytest.mark.parametrize("n_chunks,threads", [(1, 1), (2, 2), (3, 2)])
@pytest.mark.parametrize("prior", ["one", "per_document"])
def test_sweep_with_word_term_equals_reference(seed, kind, sparse, n_chunks, threads, prior):
    """gibbs_sweep with an overlay or a given phi equals its twin: same z and counts after
    every sweep, the same uniforms consumed; the lists stay those of the counts."""
    rng = np.random.default_rng(seed)
    doc_ptr, words = random_corpus(rng, D, V, 25)
    term = _term(kind, rng)
    alpha = _prior(prior, seed)
    bounds = even_bounds(D, n_chunks)
    state, arrays = _start(doc_ptr, words, seed)
    kernel_streams = [stream(seed, 3, c) for c in range(n_chunks)]
    ref_rngs = [np.random.Generator(stream(seed, 3, c)) for c in range(n_chunks)]
    buffers = _gibbs.SweepBuffers()
    for sweep in range(4):
        if sparse:
            state.rebuild_lists()
        fallbacks = state.sweep(alpha, BETA, bounds, kernel_streams, sparse, threads,
                                buffers if sweep % 2 else None, **term)
        ref.sweep(doc_ptr, words, *arrays, alpha, BETA, bounds, ref_rngs, sparse, **term)
        assert fallbacks == 0
        _assert_same(state, arrays, f"after sweep {sweep + 1}")
        if sparse:
            assert state.lists() == ref.word_topic_lists(state.nkw, state.bits)
    for bg, rng_ in zip(kernel_streams, ref_rngs):
        assert bg.state == rng_.bit_generator.state


@pytest.mark.parametrize("kind", ["overlay", "phi"])
@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
@pytest.mark.parametrize("n_blocks,threads", [(1, 1), (2, 2), (3, 2)])
def test_block_sweep_with_word_term_equals_reference(seed, kind, sparse, n_blocks, threads):
    """The partitioned schedule with an overlay or a given phi equals its twin."""
    rng = np.random.default_rng(seed)
    doc_ptr, words = random_corpus(rng, D, V, 12)
    term = _term(kind, rng)
    word_block = word_blocks(np.bincount(words, minlength=V).astype(np.int64), n_blocks)
    bounds = chunk_bounds_by_tokens(doc_ptr, n_blocks)
    order, order_ptr = block_order(doc_ptr, words, word_block, n_blocks)
    state, arrays = _start(doc_ptr, words, seed)
    kernel_streams = [stream(seed, 3, i) for i in range(n_blocks)]
    ref_rngs = [np.random.Generator(stream(seed, 3, i)) for i in range(n_blocks)]
    alpha = ASYMMETRIC[None, :].copy()
    for sweep in range(3):
        if sparse:
            state.rebuild_lists()
        _gibbs.gibbs_block_sweep(state.doc_ptr, state.words, state.z, state.ndk, state.nkw,
                                 state.nk, alpha, BETA, bounds, order, order_ptr, word_block,
                                 kernel_streams, sparse, state.wt_ptr, state.wt_entries,
                                 state.wt_len, state.bits, threads, **term)
        ref.block_sweep(doc_ptr, words, *arrays, alpha, BETA, bounds, word_block, ref_rngs,
                        sparse, **term)
        _assert_same(state, arrays, f"after sweep {sweep + 1}")
    for bg, rng_ in zip(kernel_streams, ref_rngs):
        assert bg.state == rng_.bit_generator.state


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
def test_empty_overlay_is_the_symmetric_prior(seed, sparse):
    """An overlay without entries (beta-bar_k = V beta + 0.0) gives the chain of no overlay,
    bit for bit."""
    doc_ptr, words = random_corpus(np.random.default_rng(seed), D, V, 25)
    empty = {"prior_ptr": np.zeros(V + 1, np.int64), "prior_topic": np.zeros(0, np.int32),
             "prior_extra": np.zeros(0)}
    a, _ = _start(doc_ptr, words, seed)
    b, _ = _start(doc_ptr, words, seed)
    streams_a, streams_b = [stream(seed, 3, 0)], [stream(seed, 3, 0)]
    for _ in range(3):
        a.sweep(ASYMMETRIC, BETA, even_bounds(D, 1), streams_a, sparse)
        b.sweep(ASYMMETRIC, BETA, even_bounds(D, 1), streams_b, sparse, **empty)
    _assert_same(b, a.arrays(), "with an empty overlay")


def _share_of_word_in_topic(sparse, seed, word, topic, **term):
    """After 15 sweeps (alpha = 1), the share of ``word``'s tokens assigned to ``topic``."""
    doc_ptr, words = random_corpus(np.random.default_rng(seed), 60, V, 30)
    state, _ = _start(doc_ptr, words, seed)
    streams = [stream(seed, 3, 0)]
    for _ in range(15):
        state.rebuild_lists()
        state.sweep(np.ones(K), BETA, even_bounds(60, 1), streams, sparse, **term)
    return np.mean(state.z[words == word] == topic)


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
def test_a_heavy_overlay_pulls_the_word_into_its_topic(seed, sparse):
    """o[3, k] = 50 (beta = 0.05) puts at least 60 % of word 3's tokens in topic k, for k = 2
    and for k = 4 from the same start and stream: a share no chain gives both topics by
    chance, and three times the 1 / K of a word without preference."""
    ptr = np.zeros(V + 1, np.int64)
    ptr[4:] = 1
    for topic in (2, 4):
        share = _share_of_word_in_topic(sparse, seed, 3, topic, prior_ptr=ptr,
                                        prior_topic=np.array([topic], np.int32),
                                        prior_extra=np.array([50.0]))
        assert share >= 0.6


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
def test_a_given_phi_sends_a_word_to_the_topic_that_owns_it(seed, sparse):
    """phi[k, 3] = 0 except for k = 1: every token of word 3 is in topic 1 after one sweep,
    whatever its counts say."""
    phi = random_phi(np.random.default_rng(seed))
    phi[:, 3] = 0.0
    phi[1, 3] = 0.5
    phi = phi / phi.sum(axis=1, keepdims=True)
    assert _share_of_word_in_topic(sparse, seed, 3, 1, phi=phi) == 1.0


def test_word_term_inputs_are_checked():
    doc_ptr, words = random_corpus(np.random.default_rng(1), D, V, 10)
    state, _ = _start(doc_ptr, words, 1)
    streams = [stream(1, 3, 0)]
    good = random_overlay(np.random.default_rng(2))

    def sweep(**term):
        state.sweep(ASYMMETRIC, BETA, even_bounds(D, 1), streams, True, **term)

    with pytest.raises(ValueError, match="replaces the word prior"):
        sweep(**good, phi=random_phi(np.random.default_rng(3)))
    with pytest.raises(ValueError, match="needs prior_ptr, prior_topic and prior_extra"):
        sweep(prior_ptr=good["prior_ptr"], prior_topic=good["prior_topic"])
    with pytest.raises(ValueError, match="phi needs 5 x 17"):
        sweep(phi=np.ones((K, V - 1)))
    with pytest.raises(ValueError, match="18 row offsets"):
        sweep(**{**good, "prior_ptr": good["prior_ptr"][:-1]})
    bad = good["prior_topic"].copy()
    bad[0] = K
    with pytest.raises(ValueError, match="ascending topics"):
        sweep(**{**good, "prior_topic": bad})
    bad = good["prior_extra"].copy()
    bad[0] = -1.0
    with pytest.raises(ValueError, match="extra prior not >= 0"):
        sweep(**{**good, "prior_extra": bad})
