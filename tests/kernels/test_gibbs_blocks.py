"""The partitioned schedule (docs/algorithms.md §2.8): the kernel equals its NumPy twin
(tests/reference/gibbs.py::block_sweep) exactly for 1, 2, 3 and 5 blocks, both samplers, one
prior and a prior per document, n_k taken at every epoch or carried through the sweep
(flowing); threads never change it; one block is the exact chain; the
word blocks and the token order are what the schedule says."""
from __future__ import annotations

import numpy as np
import pytest

from tests.kernels._kernel import KernelState, random_corpus, stream
from tests.reference import gibbs as ref
from topictk.inference.gibbs import _gibbs
from topictk.inference.base import chunk_bounds_by_tokens
from topictk.inference.gibbs.driver import BLOCK_GAP, block_order, list_offsets, word_blocks

D, V, K = 16, 19, 5
ASYMMETRIC = np.array([0.05, 0.3, 1.2, 0.1, 0.6])


def _prior(kind: str, seed: int) -> np.ndarray:
    if kind == "one":
        return ASYMMETRIC[None, :].copy()
    return np.random.default_rng(seed + 7).uniform(0.05, 2.0, size=(D, K))


def _blocks(doc_ptr, words, n_blocks):
    word_block = word_blocks(np.bincount(words, minlength=V).astype(np.int64), n_blocks)
    return (chunk_bounds_by_tokens(doc_ptr, n_blocks), word_block,
            block_order(doc_ptr, words, word_block, n_blocks))


def _kernel_sweep(state: KernelState, alpha, bounds, order, streams, sparse, threads,
                  buffers=None, flowing=False) -> int:
    word_block = word_blocks(np.bincount(state.words, minlength=state.nkw.shape[0]).astype(
        np.int64), bounds.size - 1)
    return _gibbs.gibbs_block_sweep(state.doc_ptr, state.words, state.z, state.ndk, state.nkw,
                                    state.nk, alpha, 0.05, bounds, order[0], order[1],
                                    word_block, streams, sparse, state.wt_ptr,
                                    state.wt_entries, state.wt_len, state.bits, threads, buffers,
                                    flowing=flowing)


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
@pytest.mark.parametrize("n_blocks,threads", [(1, 1), (2, 1), (2, 2), (3, 1), (3, 2), (3, 3),
                                              (5, 2)])
@pytest.mark.parametrize("prior", ["one", "per_document"])
@pytest.mark.parametrize("flowing", [False, True], ids=["epoch_nk", "flowing"])
def test_block_sweep_equals_reference(seed, sparse, n_blocks, threads, prior, flowing):
    # documents of 1..12 tokens: some have no token in a word block, some are visited in two or
    # three epochs (their topic list carried from one visit to the next, _sparse_doc_start)
    doc_ptr, words = random_corpus(np.random.default_rng(seed), D, V, 12)
    alpha = _prior(prior, seed)
    bounds, word_block, order = _blocks(doc_ptr, words, n_blocks)
    np.testing.assert_array_equal(word_block,
                                  ref.word_blocks(np.bincount(words, minlength=V), n_blocks))
    state = KernelState.initial(doc_ptr, words, K, V, stream(seed, 0))
    z, ndk, nkw, nk = ref.init_topics(doc_ptr, words, K, V, np.random.Generator(stream(seed, 0)))
    kernel_streams = [stream(seed, 3, i) for i in range(n_blocks)]
    ref_rngs = [np.random.Generator(stream(seed, 3, i)) for i in range(n_blocks)]
    buffers = _gibbs.SweepBuffers()
    start_z = z.copy()
    for sweep in range(4):
        if sparse:
            state.rebuild_lists()
        fallbacks = _kernel_sweep(state, alpha, bounds, order, kernel_streams, sparse, threads,
                                  buffers if sweep % 2 else None, flowing)
        ref.block_sweep(doc_ptr, words, z, ndk, nkw, nk, alpha, 0.05, bounds, word_block,
                        ref_rngs, sparse, flowing=flowing)
        assert fallbacks == 0
        for name, got, want in zip(("z", "ndk", "nkw", "nk"), state.arrays(), (z, ndk, nkw, nk)):
            assert np.array_equal(got, want), f"{name} differs after sweep {sweep + 1}"
        if sparse:       # the lists the sweep maintained are those of the counts
            assert state.lists() == ref.word_topic_lists(state.nkw, state.bits)
    assert not np.array_equal(state.z, start_z)
    for bg, rng in zip(kernel_streams, ref_rngs):
        assert bg.state == rng.bit_generator.state


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
@pytest.mark.parametrize("n_blocks,flowing", [(3, False), (3, True), (7, True)])
def test_threads_do_not_change_the_blocks(seed, sparse, n_blocks, flowing):
    """1, 2 and 3 threads give the same bits with three or seven blocks (a larger corpus,
    K = 24); the flowing schedule's tasks run in whatever order the threads take them."""
    rng = np.random.default_rng(seed)
    n_docs, n_words, n_topics = 300, 200, 24
    doc_ptr, words = random_corpus(rng, n_docs, n_words, 60)
    word_block = word_blocks(np.bincount(words, minlength=n_words).astype(np.int64), n_blocks)
    order = block_order(doc_ptr, words, word_block, n_blocks)
    bounds = chunk_bounds_by_tokens(doc_ptr, n_blocks)
    alpha = np.full((1, n_topics), 0.1)
    results = []
    for threads in (1, 2, 3):
        state = KernelState.initial(doc_ptr, words, n_topics, n_words, stream(seed, 0))
        streams = [stream(seed, 3, i) for i in range(n_blocks)]
        buffers = _gibbs.SweepBuffers()
        for _ in range(3):
            _kernel_sweep(state, alpha, bounds, order, streams, sparse, threads, buffers,
                          flowing)
        results.append([a.copy() for a in state.arrays()])
    for other in results[1:]:
        for got, want in zip(other, results[0]):
            np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
def test_one_block_is_the_exact_chain(seed, sparse):
    doc_ptr, words = random_corpus(np.random.default_rng(seed), D, V, 12)
    bounds, _, order = _blocks(doc_ptr, words, 1)
    a = KernelState.initial(doc_ptr, words, K, V, stream(seed, 0))
    b = KernelState.initial(doc_ptr, words, K, V, stream(seed, 0))
    sa, sb = [stream(seed, 3, 0)], [stream(seed, 3, 0)]
    for _ in range(3):
        _kernel_sweep(a, ASYMMETRIC[None, :], bounds, order, sa, sparse, 2)
        b.sweep(ASYMMETRIC, 0.05, np.array([0, D], np.int64), sb, sparse, 2)
    for got, want in zip(a.arrays(), b.arrays()):
        np.testing.assert_array_equal(got, want)


def test_word_blocks_are_deterministic_and_balanced(seed):
    rng = np.random.default_rng(seed)
    freq = rng.zipf(1.3, 500).clip(max=10_000).astype(np.int64)
    freq[rng.random(500) < 0.1] = 0
    for n_blocks in (2, 3, 7):
        block = word_blocks(freq, n_blocks)
        np.testing.assert_array_equal(block, word_blocks(freq.copy(), n_blocks))
        assert set(np.unique(block)) == set(range(n_blocks))
        load = np.bincount(block, weights=freq, minlength=n_blocks)
        # greedy to the lightest block: no block exceeds another by more than the largest
        # frequency, nor the mean by more than that
        assert load.max() - load.min() <= freq.max()
        assert load.max() <= freq.sum() / n_blocks + freq.max()
    # ties: the more frequent word first, equal frequencies by id, to the lower block
    np.testing.assert_array_equal(word_blocks(np.array([3, 5, 3, 1], np.int64), 2),
                                  [1, 0, 1, 0])


def test_block_order_groups_the_tokens_by_word_block_then_document(seed):
    doc_ptr, words = random_corpus(np.random.default_rng(seed), D, V, 12)
    n_blocks = 3
    word_block = word_blocks(np.bincount(words, minlength=V).astype(np.int64), n_blocks)
    order, order_ptr = block_order(doc_ptr, words, word_block, n_blocks)
    assert order.dtype == order_ptr.dtype == np.int64
    ptr = order_ptr.reshape(n_blocks, D + 1)
    assert ptr[0, 0] == 0 and ptr[-1, -1] == words.size
    np.testing.assert_array_equal(ptr[1:, 0], ptr[:-1, -1])
    for b in range(n_blocks):
        for d in range(D):
            got = order[ptr[b, d]:ptr[b, d + 1]].tolist()
            want = [t for t in range(doc_ptr[d], doc_ptr[d + 1]) if word_block[words[t]] == b]
            assert got == want


def test_block_sweep_refuses_an_order_of_another_size(seed):
    doc_ptr, words = random_corpus(np.random.default_rng(seed), D, V, 12)
    bounds, _, (order, order_ptr) = _blocks(doc_ptr, words, 2)
    state = KernelState.initial(doc_ptr, words, K, V, stream(seed, 0))
    with pytest.raises(ValueError, match="order needs"):
        _kernel_sweep(state, ASYMMETRIC[None, :], bounds, (order[:-1], order_ptr),
                      [stream(seed, 3, 0), stream(seed, 3, 1)], True, 1)


def test_lists_of_a_word_block_lie_together_and_sample_the_same(seed):
    """The pool layout of the partitioned schedule (each word block's lists together, a cache
    line between blocks) changes no number: the sweep equals the reference."""
    doc_ptr, words = random_corpus(np.random.default_rng(seed), D, V, 12)
    bounds, word_block, order = _blocks(doc_ptr, words, 3)
    capacity = np.minimum(np.bincount(words, minlength=V), K)
    ptr = list_offsets(capacity, word_block)
    np.testing.assert_array_equal(list_offsets(capacity, None)[1:], np.cumsum(capacity))
    spans = sorted((int(ptr[w]), int(ptr[w] + capacity[w]), int(word_block[w])) for w in range(V))
    assert spans[0][0] == 0 and spans[-1][1] <= ptr[-1]
    for (_, end, b), (begin, _, c) in zip(spans, spans[1:]):
        assert begin >= end + (BLOCK_GAP if b != c else 0)
    state = KernelState.initial(doc_ptr, words, K, V, stream(seed, 0))
    state.wt_ptr, state.wt_entries = ptr, np.zeros(int(ptr[-1]), np.int64)
    state.rebuild_lists()
    z, ndk, nkw, nk = ref.init_topics(doc_ptr, words, K, V, np.random.Generator(stream(seed, 0)))
    kernel_streams = [stream(seed, 3, i) for i in range(3)]
    ref_rngs = [np.random.Generator(stream(seed, 3, i)) for i in range(3)]
    for _ in range(3):
        _kernel_sweep(state, ASYMMETRIC[None, :], bounds, order, kernel_streams, True, 3)
        ref.block_sweep(doc_ptr, words, z, ndk, nkw, nk, ASYMMETRIC[None, :], 0.05, bounds,
                        word_block, ref_rngs, True)
    for got, want in zip(state.arrays(), (z, ndk, nkw, nk)):
        np.testing.assert_array_equal(got, want)
    assert state.lists() == ref.word_topic_lists(nkw, state.bits)
