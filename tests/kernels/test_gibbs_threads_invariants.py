"""Threads never change the numbers (docs/algorithms.md §12.3), and the counts
equal the counts of z after every sweep and every AD-LDA merge (§2 oracle (d))."""
from __future__ import annotations

import numpy as np
import pytest

from tests.kernels._kernel import KernelState, random_corpus, stream
from tests.reference import gibbs as ref
from topictk.inference import _heldout
from topictk.inference.base import chunk_bounds_by_docs, chunk_bounds_by_tokens
from topictk.state.counts import CountState

V, K = 60, 8
ALPHA = np.linspace(0.05, 0.5, K)


def _run(doc_ptr, words, seed, sparse, n_chunks, threads, sweeps):
    state = KernelState.initial(doc_ptr, words, K, V, stream(seed, 0))
    streams = [stream(seed, 3, c) for c in range(n_chunks)]
    bounds = chunk_bounds_by_tokens(doc_ptr, n_chunks)
    for _ in range(sweeps):
        state.sweep(ALPHA, 0.01, bounds, streams, sparse, threads=threads)
    return state


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
def test_one_thread_equals_two_threads_with_four_chunks(seed, sparse):
    doc_ptr, words = random_corpus(np.random.default_rng(seed), 300, V, 60)
    one = _run(doc_ptr, words, seed, sparse, 4, threads=1, sweeps=5)
    two = _run(doc_ptr, words, seed, sparse, 4, threads=2, sweeps=5)
    for a, b in zip(one.arrays(), two.arrays()):
        np.testing.assert_array_equal(a, b)
    if sparse:
        assert one.lists() == two.lists()
    # more threads than chunks is allowed and changes nothing either
    eight = _run(doc_ptr, words, seed, sparse, 4, threads=8, sweeps=5)
    np.testing.assert_array_equal(eight.z, one.z)


def test_chunks_change_the_chain(seed):
    """C = 4 is AD-LDA, a different chain from C = 1 (so the thread test above is not
    comparing a sampler that ignores its chunks)."""
    doc_ptr, words = random_corpus(np.random.default_rng(seed), 300, V, 60)
    exact = _run(doc_ptr, words, seed, True, 1, threads=1, sweeps=3)
    adlda = _run(doc_ptr, words, seed, True, 4, threads=1, sweeps=3)
    assert not np.array_equal(exact.z, adlda.z)


def test_fold_in_one_thread_equals_two_threads(seed):
    rng = np.random.default_rng(seed)
    obs_ptr, obs_words = random_corpus(rng, 70, V, 30)
    phi = rng.dirichlet(np.full(V, 0.1), size=K).T.copy()
    bounds = chunk_bounds_by_docs(70, 16)
    outs = []
    for threads in (1, 2):
        theta = np.full((70, K), np.nan)
        _heldout.fold_in_theta(obs_ptr, obs_words, phi, ALPHA[None, :].copy(), 20, 10,
                               bounds, [stream(seed, 4, 7, c) for c in range(bounds.size - 1)],
                               np.ones(70, np.uint8), theta, threads)
        outs.append(theta)
    np.testing.assert_array_equal(outs[0], outs[1])
    assert np.all(outs[0] > 0)


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
@pytest.mark.parametrize("n_chunks,threads", [(1, 1), (3, 1), (3, 2)])
def test_counts_equal_counts_of_z_after_every_sweep(seed, sparse, n_chunks, threads):
    doc_ptr, words = random_corpus(np.random.default_rng(seed), 120, V, 40)
    state = KernelState.initial(doc_ptr, words, K, V, stream(seed, 0))
    counts = CountState(z=state.z, ndk=state.ndk, nkw=state.nkw, nk=state.nk, alpha=ALPHA,
                        beta=0.01)
    counts.check_invariants(doc_ptr, words)
    streams = [stream(seed, 3, c) for c in range(n_chunks)]
    bounds = chunk_bounds_by_tokens(doc_ptr, n_chunks)
    for _ in range(8):
        state.sweep(ALPHA, 0.01, bounds, streams, sparse, threads=threads)
        counts.check_invariants(doc_ptr, words)
        assert int(state.nk.sum()) == words.size
        assert state.ndk.min() >= 0 and state.nkw.min() >= 0
        if sparse:
            assert state.lists() == ref.word_topic_lists(state.nkw, state.bits)


@pytest.mark.parametrize("field", ["ndk", "nkw", "nk", "z", "alpha"])
def test_check_invariants_detects_damage(seed, field):
    """The invariant check is not vacuous: any inconsistent count is reported."""
    doc_ptr, words = random_corpus(np.random.default_rng(seed), 20, V, 20)
    state = KernelState.initial(doc_ptr, words, K, V, stream(seed, 0))
    counts = CountState(z=state.z, ndk=state.ndk, nkw=state.nkw, nk=state.nk,
                        alpha=ALPHA.copy(), beta=0.01)
    counts.check_invariants(doc_ptr, words)
    if field == "ndk":
        counts.ndk[0, counts.z[0]] -= 1
        counts.ndk[0, (counts.z[0] + 1) % K] += 1
    elif field == "nkw":
        counts.nkw[words[0], counts.z[0]] += 1
    elif field == "nk":
        counts.nk[0] += 1
    elif field == "z":
        counts.z[0] = K
    else:
        counts.alpha[1] = np.nan
    with pytest.raises(AssertionError):
        counts.check_invariants(doc_ptr, words)


def test_chunk_bounds_by_tokens_are_contiguous_and_token_balanced():
    lengths = np.array([5, 5, 5, 5, 100, 5, 5, 5, 5, 5, 5, 5])
    doc_ptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    bounds = chunk_bounds_by_tokens(doc_ptr, 3)
    assert bounds.dtype == np.int64
    assert bounds[0] == 0 and bounds[-1] == lengths.size
    assert np.all(np.diff(bounds) >= 0)
    # greedy on cumulative N_d: every boundary is within one document of its target c N / C
    targets = np.arange(4) * lengths.sum() / 3
    assert np.all(np.abs(doc_ptr[bounds] - targets) <= lengths.max())
    even = np.arange(0, 130, 10, dtype=np.int64)              # 12 documents of 10 tokens
    np.testing.assert_array_equal(chunk_bounds_by_tokens(even, 3), [0, 4, 8, 12])
    np.testing.assert_array_equal(chunk_bounds_by_tokens(even, 4), [0, 3, 6, 9, 12])
    # never more chunks than documents, and one chunk is the whole corpus
    np.testing.assert_array_equal(chunk_bounds_by_tokens(doc_ptr[:3], 8), [0, 1, 2])
    np.testing.assert_array_equal(chunk_bounds_by_tokens(doc_ptr, 1), [0, 12])
    np.testing.assert_array_equal(chunk_bounds_by_docs(35, 16), [0, 16, 32, 35])
