"""Scoring a sample kept as non-zero counts (topictk.inference.gibbs._sparse_score, §2.9, §11.2):
the same numbers, bit for bit, as the dense path (phi-hat formed, the Gibbs fold-in of
_heldout.fold_in_theta, _heldout.mixture_probabilities), and as its NumPy twin."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from tests.kernels._kernel import even_bounds, random_corpus, stream
from tests.reference.gibbs import fold_in_heldout
from topictk.inference.gibbs import _sparse_score
from topictk.inference.base import FoldInPlan, gibbs_fold_in
from topictk.inference.perplexity import mixture_probabilities
from topictk.inference.gibbs.warp import (
    sparse_counts,
    sparse_fold_in,
    sparse_fold_in_theta,
    sparse_mixture,
)
from topictk.state.counts import dense_counts, phi_hat

V, K, BETA = 23, 9, 0.05


def _sample(rng, n_tokens=400, n_topics=K, topics_used=None):
    """A sample as a WarpLDA chain keeps it: n_kw and n_dk as non-zero rows, n_k, alpha."""
    doc_ptr, words = random_corpus(rng, 30, V, n_tokens // 30)
    used = topics_used or n_topics
    z = rng.integers(0, used, words.size).astype(np.int32)
    order = np.argsort(words, kind="stable").astype(np.int32)
    word_ptr = np.zeros(V + 1, dtype=np.int64)
    np.cumsum(np.bincount(words, minlength=V), out=word_ptr[1:])
    return {**sparse_counts(word_ptr, order, z, n_topics, "nkw"),
            **sparse_counts(doc_ptr, None, z, n_topics, "ndk"),
            "nk": np.bincount(z, minlength=n_topics).astype(np.int64)}


def _documents(rng, n_docs, held_share=0.3):
    """Test documents: observed tokens (doc_ptr, words) and held-out entries (CSR), some
    documents with no held-out entry."""
    doc_ptr, words = random_corpus(rng, n_docs, V, 12)
    held_ptr = np.zeros(n_docs + 1, dtype=np.int64)
    held_words = []
    for d in range(n_docs):
        n = 0 if d % 4 == 3 else int(rng.integers(1, 6))
        held_words.append(np.sort(rng.choice(V, size=n, replace=False)))
        held_ptr[d + 1] = held_ptr[d] + n
    held_words = np.concatenate(held_words).astype(np.int32)
    observed = SimpleNamespace(doc_ptr=doc_ptr, words=words, n_docs=n_docs)
    heldout = SimpleNamespace(indptr=held_ptr, indices=held_words,
                              counts=np.ones(held_words.size, dtype=np.int32))
    return SimpleNamespace(observed=observed, heldout=heldout)


def _plan(seed, n_docs, n_chunks, sweeps, burn_in, threads, active):
    return FoldInPlan(sweeps, burn_in, even_bounds(n_docs, n_chunks),
                      [stream(seed, 4, c) for c in range(n_chunks)], threads, active)


def _dense(sample, alpha, docs, plan):
    """The dense path: phi-hat (V, K), the Gibbs fold-in, the mixture."""
    phi = phi_hat(dense_counts(sample, "nkw", K), sample["nk"], BETA)
    theta = gibbs_fold_in(phi, alpha, docs.observed.doc_ptr, docs.observed.words, plan)
    return mixture_probabilities(docs.heldout, theta, phi, plan.threads)


@pytest.mark.parametrize("n_chunks,threads", [(1, 1), (2, 1), (3, 2)])
@pytest.mark.parametrize("sweeps,burn_in", [(6, 3), (4, 4), (1, 0)])
@pytest.mark.parametrize("alpha", ["symmetric", "asymmetric"])
def test_fold_in_equals_the_dense_path(seed, n_chunks, threads, sweeps, burn_in, alpha):
    """p-hat of every held-out entry equals the dense path's bit for bit, NaN where the plan
    skips a document, and the streams end where the dense path leaves them."""
    rng = np.random.default_rng(seed)
    sample = _sample(rng, topics_used=K - 2)          # two topics without a token
    a = np.full(K, 0.1) if alpha == "symmetric" else rng.uniform(0.02, 0.8, K)
    docs = _documents(rng, 17)
    active = (np.diff(docs.heldout.indptr) > 0).astype(np.uint8)
    active[5] = 0                                     # a document with entries, skipped
    sparse_plan = _plan(seed, 17, n_chunks, sweeps, burn_in, threads, active)
    dense_plan = _plan(seed, 17, n_chunks, sweeps, burn_in, threads, active)
    got = sparse_fold_in(sample, BETA, a, docs, sparse_plan)
    want = _dense(sample, a, docs, dense_plan)
    np.testing.assert_array_equal(got, want)
    skipped = slice(docs.heldout.indptr[5], docs.heldout.indptr[6])
    assert np.all(np.isnan(got[skipped])) and not np.any(np.isnan(np.delete(
        got, np.arange(docs.heldout.indptr[5], docs.heldout.indptr[6]))))
    for a_stream, b_stream in zip(sparse_plan.streams, dense_plan.streams):
        assert a_stream.state == b_stream.state


@pytest.mark.parametrize("n_chunks,threads", [(1, 1), (3, 2)])
@pytest.mark.parametrize("sweeps,burn_in", [(6, 3), (1, 0)])
def test_fold_in_theta_equals_the_dense_path(seed, n_chunks, threads, sweeps, burn_in):
    """theta-hat itself (what `topictk infer` reports) equals gibbs_fold_in's with the dense
    phi-hat bit for bit, NaN rows where the plan skips a document."""
    rng = np.random.default_rng(seed)
    sample = _sample(rng, topics_used=K - 2)
    a = rng.uniform(0.02, 0.8, K)
    docs = _documents(rng, 17).observed
    active = np.ones(17, dtype=np.uint8)
    active[[4, 9]] = 0
    got = sparse_fold_in_theta(sample, sample["nk"], BETA, a, docs,
                               _plan(seed, 17, n_chunks, sweeps, burn_in, threads, active))
    phi = phi_hat(dense_counts(sample, "nkw", K), sample["nk"], BETA)
    want = gibbs_fold_in(phi, a, docs.doc_ptr, docs.words,
                         _plan(seed, 17, n_chunks, sweeps, burn_in, threads, active))
    np.testing.assert_array_equal(got, want)
    assert np.all(np.isnan(got[[4, 9]])) and not np.any(np.isnan(np.delete(got, [4, 9], 0)))


def test_fold_in_equals_the_twin(seed):
    """Against the NumPy twin of the dense fold-in (tests/reference/gibbs.py)."""
    rng = np.random.default_rng(seed)
    sample = _sample(rng)
    a = rng.uniform(0.05, 0.5, K)
    docs = _documents(rng, 11)
    active = (np.diff(docs.heldout.indptr) > 0).astype(np.uint8)
    got = sparse_fold_in(sample, BETA, a, docs, _plan(seed, 11, 2, 5, 2, 1, active))
    phi = phi_hat(dense_counts(sample, "nkw", K), sample["nk"], BETA)
    rngs = [np.random.Generator(stream(seed, 4, c)) for c in range(2)]
    want = fold_in_heldout(docs.observed.doc_ptr, docs.observed.words, docs.heldout.indptr,
                           docs.heldout.indices, phi, phi, a, 5, 2, even_bounds(11, 2), rngs)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("threads", [1, 2])
def test_protocol_b_mixture_equals_the_dense_path(seed, threads):
    """theta-hat from the non-zero n_dk, mixed with phi-hat: the dense formula's numbers."""
    rng = np.random.default_rng(seed)
    sample = _sample(rng, topics_used=K - 1)
    alpha = rng.uniform(0.05, 0.5, K)
    n_docs = sample["ndk_ptr"].size - 1
    docs = _documents(rng, n_docs)
    ndk = dense_counts(sample, "ndk", K).astype(np.float64)
    theta = (ndk + alpha) / (ndk.sum(axis=1, keepdims=True) + alpha.sum())
    phi = phi_hat(dense_counts(sample, "nkw", K), sample["nk"], BETA)
    want = mixture_probabilities(docs.heldout, theta, phi, 1)
    got = sparse_mixture(sample, BETA, alpha, docs.heldout, threads)
    np.testing.assert_array_equal(got, want)


def test_bad_arguments_raise():
    rng = np.random.default_rng(0)
    sample = _sample(rng)
    docs = _documents(rng, 5)
    active = np.ones(5, dtype=np.uint8)
    plan = _plan(0, 5, 1, 2, 1, 1, active)
    bad_words = SimpleNamespace(observed=SimpleNamespace(
        doc_ptr=docs.observed.doc_ptr, words=np.full_like(docs.observed.words, V), n_docs=5),
        heldout=docs.heldout)
    with pytest.raises(ValueError, match="has no row"):
        sparse_fold_in(sample, BETA, np.full(K, 0.1), bad_words, plan)
    with pytest.raises(ValueError, match="do not fit"):
        sparse_fold_in(sample, BETA, np.full(K + 1, 0.1), docs, plan)
    wrong_topic = {**sample, "nkw_topic": np.full_like(sample["nkw_topic"], K)}
    with pytest.raises(ValueError, match="outside"):
        sparse_fold_in(wrong_topic, BETA, np.full(K, 0.1), docs, plan)
    with pytest.raises(ValueError, match="streams"):
        _sparse_score.fold_in_probabilities(
            docs.observed.doc_ptr, docs.observed.words, docs.heldout.indptr,
            docs.heldout.indices, sample["nkw_ptr"], sample["nkw_topic"], sample["nkw_count"],
            sample["nk"], BETA, np.full(K, 0.1), 2, 1, even_bounds(5, 2), [stream(0, 4, 0)],
            active, np.empty(docs.heldout.indices.size), 1)
