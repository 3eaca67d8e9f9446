"""The Cython Gibbs kernels equal their NumPy twins in tests/reference/gibbs.py exactly
(docs/algorithms.md §2 oracle (c), §12 oracle (d)): same PCG64 streams, same draw contracts."""
from __future__ import annotations

import numpy as np
import pytest

from tests.kernels._kernel import KernelState, even_bounds, random_corpus, stream
from tests.reference import gibbs as ref
from topictk.inference import _heldout
from topictk.inference.gibbs import _gibbs

D, V, K = 14, 17, 5
SYMMETRIC = np.full(K, 0.1)
ASYMMETRIC = np.array([0.05, 0.3, 1.2, 0.1, 0.6])


def _reference_start(doc_ptr, words, seed):
    return ref.init_topics(doc_ptr, words, K, V, np.random.Generator(stream(seed, 0)))


def test_init_topics_equals_reference(seed):
    doc_ptr, words = random_corpus(np.random.default_rng(seed), D, V, 25)
    state = KernelState.initial(doc_ptr, words, K, V, stream(seed, 0))
    expected = _reference_start(doc_ptr, words, seed)
    for got, want in zip(state.arrays(), expected):
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
    # every topic is used by a corpus this size, and the counts add up to N
    assert state.nk.sum() == words.size
    assert np.all(state.nk > 0)


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
@pytest.mark.parametrize("n_chunks,threads", [(1, 1), (2, 1), (2, 2), (3, 1), (3, 2)])
@pytest.mark.parametrize("alpha", [SYMMETRIC, ASYMMETRIC], ids=["symmetric", "asymmetric"])
def test_sweep_equals_reference(seed, sparse, n_chunks, threads, alpha):
    """Chunk 0 samples in place, the other chunks on copies of the start of the iteration
    (dense with two chunks: on the snapshot itself); every combination equals AD-LDA with a
    private copy per chunk, for any number of threads."""
    doc_ptr, words = random_corpus(np.random.default_rng(seed), D, V, 25)
    beta = 0.05
    bounds = even_bounds(D, n_chunks)
    state = KernelState.initial(doc_ptr, words, K, V, stream(seed, 0))
    z, ndk, nkw, nk = _reference_start(doc_ptr, words, seed)
    kernel_streams = [stream(seed, 3, c) for c in range(n_chunks)]
    ref_rngs = [np.random.Generator(stream(seed, 3, c)) for c in range(n_chunks)]
    start_z = z.copy()
    for sweep in range(5):
        fallbacks = state.sweep(alpha, beta, bounds, kernel_streams, sparse, threads)
        ref.sweep(doc_ptr, words, z, ndk, nkw, nk, alpha, beta, bounds, ref_rngs, sparse)
        assert fallbacks == 0
        for name, got, want in zip(("z", "ndk", "nkw", "nk"), state.arrays(), (z, ndk, nkw, nk)):
            assert np.array_equal(got, want), f"{name} differs after sweep {sweep + 1}"
    # the chain moved, so the comparison is not between two untouched arrays
    assert not np.array_equal(state.z, start_z)
    # both consumed exactly the same number of uniforms from every stream
    for bg, rng in zip(kernel_streams, ref_rngs):
        assert bg.state == rng.bit_generator.state


# (sparse, chunks, threads) of consecutive sweeps sharing one SweepBuffers: repeats reuse the
# buffers, every change of sampler, chunking or threads must allocate the right ones anew
BUFFER_SCHEDULE = [(True, 2, 2), (True, 2, 2), (True, 2, 1), (False, 2, 2), (False, 2, 2),
                   (True, 3, 2), (True, 3, 2), (False, 3, 2), (True, 1, 1), (True, 2, 2)]


def test_sweeps_with_kept_buffers_equal_reference(seed):
    """Buffers kept from sweep to sweep (what the drivers do) change no draw: every sweep of a
    schedule that reuses them, and that changes the sampler, the chunks and the threads
    between sweeps, equals the reference."""
    doc_ptr, words = random_corpus(np.random.default_rng(seed), D, V, 25)
    state = KernelState.initial(doc_ptr, words, K, V, stream(seed, 0))
    z, ndk, nkw, nk = _reference_start(doc_ptr, words, seed)
    buffers = _gibbs.SweepBuffers()
    for i, (sparse, n_chunks, threads) in enumerate(BUFFER_SCHEDULE):
        bounds = even_bounds(D, n_chunks)
        if sparse:
            state.rebuild_lists()      # as the driver does after a dense sweep
        kernel_streams = [stream(seed, 4, i, c) for c in range(n_chunks)]
        ref_rngs = [np.random.Generator(stream(seed, 4, i, c)) for c in range(n_chunks)]
        state.sweep(ASYMMETRIC, 0.05, bounds, kernel_streams, sparse, threads, buffers)
        ref.sweep(doc_ptr, words, z, ndk, nkw, nk, ASYMMETRIC, 0.05, bounds, ref_rngs, sparse)
        for name, got, want in zip(("z", "ndk", "nkw", "nk"), state.arrays(), (z, ndk, nkw, nk)):
            assert np.array_equal(got, want), f"{name} differs after sweep {i + 1}"
    with pytest.raises(ValueError, match="2 chunks need 2 streams"):
        state.sweep(ASYMMETRIC, 0.05, even_bounds(D, 2), [stream(seed, 5)], True, 2, buffers)


def test_build_word_topic_lists_equals_reference(seed):
    rng = np.random.default_rng(seed)
    nkw = rng.integers(0, 4, size=(V, K)).astype(np.int32)
    nkw[rng.random((V, K)) < 0.4] = 0
    nkw[3] = 0                      # a word with no topic at all
    nkw[5] = 2                      # a word whose counts all tie
    bits = _gibbs.topic_bits(K)
    wt_ptr = np.zeros(V + 1, np.int64)
    np.cumsum(np.full(V, K), out=wt_ptr[1:])
    entries = np.full(int(wt_ptr[-1]), -7, np.int64)
    lengths = np.zeros(V, np.int32)
    _gibbs.build_word_topic_lists(nkw, wt_ptr, entries, lengths, bits)
    got = [[int(e) for e in entries[wt_ptr[w]:wt_ptr[w] + lengths[w]]] for w in range(V)]
    assert got == ref.word_topic_lists(nkw, bits)
    np.testing.assert_array_equal(lengths, (nkw > 0).sum(axis=1))
    # ties: count descending, then topic descending
    assert [e & ((1 << bits) - 1) for e in got[5]] == [4, 3, 2, 1, 0]
    assert got[3] == []


@pytest.mark.parametrize("n_topics,bits",
                         [(1, 1), (2, 1), (3, 2), (4, 2), (5, 3), (64, 6), (65, 7)])
def test_topic_bits(n_topics, bits):
    assert _gibbs.topic_bits(n_topics) == bits == ref.topic_bits(n_topics)


@pytest.mark.parametrize("n_chunks", [1, 2, 3])
def test_sparse_lists_maintained_equal_lists_rebuilt_from_counts(seed, n_chunks):
    """What makes resume exact: after any sweep the lists are a pure function of the counts."""
    doc_ptr, words = random_corpus(np.random.default_rng(seed), 40, V, 30)
    state = KernelState.initial(doc_ptr, words, K, V, stream(seed, 0))
    bits = state.bits
    streams = [stream(seed, 3, c) for c in range(n_chunks)]
    bounds = even_bounds(40, n_chunks)
    for sweep in range(6):
        state.sweep(ASYMMETRIC, 0.02, bounds, streams, sparse=True)
        maintained = state.lists()
        assert maintained == ref.word_topic_lists(state.nkw, bits), f"sweep {sweep + 1}"
        rebuilt = KernelState(**{**state.__dict__, "wt_entries": state.wt_entries.copy(),
                                 "wt_len": state.wt_len.copy()})
        rebuilt.wt_entries[:] = 0
        rebuilt.rebuild_lists()
        assert rebuilt.lists() == maintained
        # every list stays within its word's slot of the pool
        assert np.all(state.wt_len <= np.diff(state.wt_ptr))


def test_resume_from_rebuilt_lists_continues_the_same_chain(seed):
    """Sweeping on with lists rebuilt from counts (a resumed run) equals sweeping on with the
    incrementally maintained lists (the uninterrupted run)."""
    doc_ptr, words = random_corpus(np.random.default_rng(seed), 30, V, 30)
    a = KernelState.initial(doc_ptr, words, K, V, stream(seed, 0))
    streams_a = [stream(seed, 3, 0)]
    for _ in range(3):
        a.sweep(ASYMMETRIC, 0.02, even_bounds(30, 1), streams_a, sparse=True)
    b = KernelState(a.doc_ptr, a.words, a.z.copy(), a.ndk.copy(), a.nkw.copy(), a.nk.copy(),
                    a.wt_ptr, np.zeros_like(a.wt_entries), np.zeros_like(a.wt_len), a.bits)
    b.rebuild_lists()
    streams_b = [stream(seed, 3, 0)]
    streams_b[0].state = streams_a[0].state
    for _ in range(3):
        a.sweep(ASYMMETRIC, 0.02, even_bounds(30, 1), streams_a, sparse=True)
        b.sweep(ASYMMETRIC, 0.02, even_bounds(30, 1), streams_b, sparse=True)
    for got, want in zip(b.arrays(), a.arrays()):
        np.testing.assert_array_equal(got, want)


# ---------------------------------------------------------------------------- fold-in

def _kernel_fold_in(obs_ptr, obs_words, held_ptr, held_words, weights, phi, alpha, n_sweeps,
                    n_burn, bounds, streams, threads=1):
    """What scoring computes: the kernel's theta-hat of the documents with held-out entries,
    then the mixture with phi."""
    active = (np.diff(held_ptr) > 0).astype(np.uint8)
    theta = np.full((obs_ptr.size - 1, weights.shape[1]), np.nan)
    _heldout.fold_in_theta(obs_ptr, obs_words, weights, np.atleast_2d(alpha), n_sweeps,
                           n_burn, bounds, streams, active, theta, threads)
    out = np.zeros(held_words.size)
    _heldout.mixture_probabilities(held_ptr, held_words, theta, phi, out, threads)
    return theta, out


def _fold_in_inputs(seed: int, n_test: int):
    rng = np.random.default_rng(seed + 1000)
    obs_ptr, obs_words = random_corpus(rng, n_test, V, 12)
    obs_lengths = np.diff(obs_ptr)
    obs_lengths[2] = 0                                  # a document with no observed token
    obs_ptr = np.concatenate([[0], np.cumsum(obs_lengths)]).astype(np.int64)
    obs_words = obs_words[:obs_ptr[-1]]
    held_lengths = rng.integers(1, 5, n_test)
    held_lengths[4] = 0                                 # a document with nothing held out
    held_ptr = np.concatenate([[0], np.cumsum(held_lengths)]).astype(np.int64)
    held_words = np.concatenate([np.sort(rng.choice(V, n, replace=False)) for n in held_lengths]
                                ).astype(np.int32)
    phi = rng.dirichlet(np.full(V, 0.3), size=K).T.copy()          # (V, K)
    weights = phi * rng.uniform(0.5, 2.0, size=phi.shape)           # any positive weights
    return obs_ptr, obs_words, held_ptr, held_words, weights, phi


@pytest.mark.parametrize("alpha_kind", ["shared", "per_document"])
@pytest.mark.parametrize("n_sweeps,n_burn", [(12, 5), (3, 3)])
def test_fold_in_heldout_equals_reference(seed, alpha_kind, n_sweeps, n_burn):
    n_test = 9
    obs_ptr, obs_words, held_ptr, held_words, weights, phi = _fold_in_inputs(seed, n_test)
    rng = np.random.default_rng(seed + 2000)
    if alpha_kind == "shared":
        alpha = ASYMMETRIC[None, :].copy()
    else:
        alpha = rng.uniform(0.05, 2.0, size=(n_test, K))
    bounds = np.array([0, 4, 9], np.int64)
    theta, out = _kernel_fold_in(obs_ptr, obs_words, held_ptr, held_words, weights, phi,
                                 alpha, n_sweeps, n_burn, bounds,
                                 [stream(seed, 4, 0, c) for c in range(2)])
    want = ref.fold_in_heldout(obs_ptr, obs_words, held_ptr, held_words, weights, phi, alpha,
                               n_sweeps, n_burn, bounds,
                               [np.random.Generator(stream(seed, 4, 0, c)) for c in range(2)])
    np.testing.assert_allclose(out, want, rtol=1e-12, atol=0)
    want_theta = ref.fold_in_theta(obs_ptr, obs_words, weights, alpha, n_sweeps, n_burn, bounds,
                                   [np.random.Generator(stream(seed, 4, 0, c))
                                    for c in range(2)], np.diff(held_ptr) > 0)
    np.testing.assert_allclose(theta, want_theta, rtol=1e-12, atol=0, equal_nan=True)
    # the document with nothing held out is skipped (not sampled), the others sum to 1
    assert np.all(np.isnan(theta[4]))
    np.testing.assert_allclose(np.delete(theta, 4, axis=0).sum(axis=1), 1.0, rtol=1e-12)
    assert np.all(out > 0)
    # no observed token: theta-hat is the prior mean alpha / alpha_sum exactly
    a2 = alpha[2] if alpha_kind == "per_document" else alpha[0]
    rows = slice(held_ptr[2], held_ptr[3])
    np.testing.assert_allclose(out[rows], phi[held_words[rows]] @ (a2 / a2.sum()), rtol=1e-12)


def test_fold_in_per_document_alpha_is_used_per_document(seed):
    """Rows of a 2-D alpha belong to their documents: swapping two rows changes only the
    probabilities of those documents' held-out words (first rows, no observed token)."""
    n_test = 9
    obs_ptr, obs_words, held_ptr, held_words, weights, phi = _fold_in_inputs(seed, n_test)
    alpha = np.tile(ASYMMETRIC, (n_test, 1))
    alpha[2] = ASYMMETRIC[::-1]
    bounds = np.array([0, n_test], np.int64)
    _, out_a = _kernel_fold_in(obs_ptr, obs_words, held_ptr, held_words, weights, phi, alpha, 6,
                               2, bounds, [stream(seed, 4, 1, 0)])
    # the same prior for every document, still given per document (the dense path, as above)
    same = np.tile(ASYMMETRIC, (n_test, 1))
    _, out_b = _kernel_fold_in(obs_ptr, obs_words, held_ptr, held_words, weights, phi, same, 6,
                               2, bounds, [stream(seed, 4, 1, 0)])
    rows = slice(held_ptr[2], held_ptr[3])
    other = np.ones(held_words.size, bool)
    other[rows] = False
    # document 2 has no observed token, so it draws nothing: the others see the same stream
    np.testing.assert_array_equal(out_a[other], out_b[other])
    a2 = ASYMMETRIC[::-1]
    np.testing.assert_allclose(out_a[rows], phi[held_words[rows]] @ (a2 / a2.sum()), rtol=1e-12)
    assert not np.allclose(out_a[rows], out_b[rows])


@pytest.mark.parametrize("n_chunks", [1, 2, 3])
def test_dense_sweep_with_a_prior_per_document_equals_reference(seed, n_chunks):
    """DMR's sampler (§9.2): the dense sweep with alpha (D, K) equals the twin, and with equal
    rows it is the ordinary dense sweep."""
    rng = np.random.default_rng(seed + 77)
    lens = rng.integers(1, 25, 30)
    doc_ptr = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    words = rng.integers(0, 20, doc_ptr[-1]).astype(np.int32)
    alpha = rng.uniform(0.05, 1.5, size=(30, 4))
    bounds = np.linspace(0, 30, n_chunks + 1).astype(np.int64)
    results = []
    for per_doc in (alpha, np.tile(alpha[0], (30, 1)), alpha[:1]):
        z = np.zeros(words.size, np.int32)
        ndk = np.zeros((30, 4), np.int32)
        nkw = np.zeros((20, 4), np.int32)
        nk = np.zeros(4, np.int64)
        _gibbs.init_topics(doc_ptr, words, z, ndk, nkw, nk, np.random.PCG64(seed))
        z2, ndk2, nkw2, nk2 = z.copy(), ndk.copy(), nkw.copy(), nk.copy()
        streams = [np.random.PCG64(seed * 7 + c) for c in range(n_chunks)]
        dummy = np.zeros(1, np.int64)
        for _ in range(3):
            _gibbs.gibbs_sweep(doc_ptr, words, z, ndk, nkw, nk, np.ascontiguousarray(per_doc),
                               0.05, bounds, streams, False, np.zeros(21, np.int64), dummy,
                               np.zeros(20, np.int32), 2, 1)
        rngs = [np.random.Generator(np.random.PCG64(seed * 7 + c)) for c in range(n_chunks)]
        for _ in range(3):
            ref.sweep(doc_ptr, words, z2, ndk2, nkw2, nk2, per_doc, 0.05, bounds, rngs, False)
        np.testing.assert_array_equal(z, z2)
        np.testing.assert_array_equal(nkw, nkw2)
        results.append(z.copy())
    np.testing.assert_array_equal(results[1], results[2])
    # a prior per document must have one row per document (SparseLDA's per-document buckets are
    # compared with their twin in tests/dmr/test_dmr.py)
    with pytest.raises(ValueError, match="alpha has 5 rows for 30 documents"):
        _gibbs.gibbs_sweep(doc_ptr, words, z, ndk, nkw, nk, np.ascontiguousarray(alpha[:5]),
                           0.05, bounds, [np.random.PCG64(1) for _ in range(n_chunks)], True,
                           np.zeros(21, np.int64), np.zeros(1, np.int64), np.zeros(20, np.int32),
                           2, 1)


@pytest.mark.parametrize("n_topics", [1, 3, 4, 7, 8, 13])
@pytest.mark.parametrize("per_document", [False, True], ids=["shared", "per_document"])
def test_dense_blocked_draw_equals_reference_for_any_block_split(seed, n_topics, per_document):
    """The dense draw goes by blocks of four topics: full blocks only, a short last block,
    a single short block; one prior or one per document (DMR)."""
    rng = np.random.default_rng(seed)
    doc_ptr, words = random_corpus(rng, D, V, 25)
    shape = (D, n_topics) if per_document else (n_topics,)
    alpha = rng.uniform(0.05, 1.5, size=shape)
    state = KernelState.initial(doc_ptr, words, n_topics, V, stream(seed, 0))
    z, ndk, nkw, nk = ref.init_topics(doc_ptr, words, n_topics, V,
                                      np.random.Generator(stream(seed, 0)))
    kernel_streams = [stream(seed, 3, 0)]
    ref_rngs = [np.random.Generator(stream(seed, 3, 0))]
    for _ in range(4):
        state.sweep(alpha, 0.05, even_bounds(D, 1), kernel_streams, sparse=False)
        ref.sweep(doc_ptr, words, z, ndk, nkw, nk, alpha, 0.05, even_bounds(D, 1), ref_rngs,
                  False)
    for got, want in zip(state.arrays(), (z, ndk, nkw, nk)):
        np.testing.assert_array_equal(got, want)
    assert kernel_streams[0].state == ref_rngs[0].bit_generator.state


def test_dense_blocked_draw_follows_the_weights():
    """The block-wise mapping of a uniform draws topic k with probability p_k / sum(p):
    frequencies of 200,000 uniforms on K = 7 weights (a full block and a short one, zero
    weights on both sides of a block edge) within 5 standard errors."""
    p = [0.5, 0.0, 2.0, 1.0, 0.0, 3.0, 0.25]
    total = sum(p)
    u = np.random.default_rng(5).random(200_000)
    counts = np.bincount([ref._draw_blocked(x, p) for x in u], minlength=len(p))
    expected = np.array(p) / total * u.size
    se = np.sqrt(expected * (1 - np.array(p) / total)) + 1e-9
    assert counts[1] == counts[4] == 0
    assert np.all(np.abs(counts - expected) < 5 * se)


def test_mean_list_length_equals_reference(seed):
    rng = np.random.default_rng(seed)
    nkw = rng.integers(0, 3, size=(V, K)).astype(np.int32)
    nkw[rng.random((V, K)) < 0.5] = 0
    freq = rng.integers(0, 40, V).astype(np.int64)
    freq[2] = 0                                 # a word without tokens does not count
    got = _gibbs.mean_list_length(nkw, freq)
    assert got == pytest.approx(ref.mean_list_length(nkw, freq), rel=1e-15)
    assert 0 < got < K
    # from the SparseLDA list lengths (current lists): the same number without the O(VK) scan
    wt_ptr = np.zeros(V + 1, np.int64)
    np.cumsum(np.full(V, K), out=wt_ptr[1:])
    lengths = np.zeros(V, np.int32)
    _gibbs.build_word_topic_lists(nkw, wt_ptr, np.zeros(V * K, np.int64), lengths,
                                  _gibbs.topic_bits(K))
    assert _gibbs.mean_list_length(nkw, freq, lengths) == got
    assert _gibbs.mean_list_length(nkw, np.zeros(V, np.int64)) == 0.0
    with pytest.raises(ValueError, match="one entry per word"):
        _gibbs.mean_list_length(nkw, freq[:-1])
    with pytest.raises(ValueError, match="one entry per word"):
        _gibbs.mean_list_length(nkw, freq, lengths[:-1])
