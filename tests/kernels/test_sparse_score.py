"""Scoring a sample kept as non-zero counts (topictk.inference.gibbs._sparse_score, §2.9, §11.2):
the same numbers, bit for bit, as the dense path (phi-hat formed, the Gibbs fold-in of
_heldout.fold_in_theta, _heldout.mixture_probabilities), and as its NumPy twin; with the word
terms of §2.10/§2.11 (an overlay of the word prior, a given phi) too, the twin's phi-hat being
tests/reference/gibbs.py's WordTerm.matrix, and the terms change the scores as the equations
say."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from tests.kernels._kernel import even_bounds, random_corpus, stream
from tests.kernels.test_gibbs_word_term import random_overlay, random_phi
from tests.reference import gibbs as ref
from tests.reference.gibbs import fold_in_heldout
from topictk.inference.gibbs import _sparse_score
from topictk.inference.base import FoldInPlan, gibbs_fold_in
from topictk.inference.perplexity import mixture_probabilities
from topictk.inference.gibbs.warp import (
    sample_rows,
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


# ---------------------------------------------------------------- the word terms (§2.10, §2.11)

def _term(kind: str, rng: np.random.Generator) -> dict:
    """The kernels' keyword arguments of an overlay or a given phi (K x V) over this file's
    V words and K topics."""
    if kind == "overlay":
        return random_overlay(rng, V, K)
    return {"phi": random_phi(rng, V, K)}


def _twin_matrix(sample: dict, term: dict) -> np.ndarray:
    """The twin's word-major phi-hat of the sample under ``term``."""
    return ref.WordTerm(BETA, V, K, **term).matrix(dense_counts(sample, "nkw", K), sample["nk"])


def _kernel_fold_in(sample, alpha, docs, plan, term, theta_out=None) -> np.ndarray:
    """fold_in_probabilities under ``term``, as ``sparse_fold_in`` calls it."""
    out = np.empty(docs.heldout.indices.size)
    _sparse_score.fold_in_probabilities(
        docs.observed.doc_ptr, docs.observed.words, docs.heldout.indptr, docs.heldout.indices,
        *sample_rows(sample, "nkw"), sample["nk"], BETA, alpha, plan.sweeps, plan.burn_in,
        plan.bounds, plan.streams, plan.active_flags(docs.observed.n_docs), out, plan.threads,
        theta_out, **term)
    return out


def _kernel_mixture(sample, alpha, heldout, threads, term) -> np.ndarray:
    """mixture_probabilities (Protocol B) under ``term``, as ``sparse_mixture`` calls it."""
    out = np.empty(heldout.indices.size)
    _sparse_score.mixture_probabilities(
        heldout.indptr, heldout.indices, *sample_rows(sample, "ndk"), alpha, float(alpha.sum()),
        *sample_rows(sample, "nkw"), sample["nk"], BETA, out, threads, **term)
    return out


def _protocol_b_theta(sample, alpha) -> np.ndarray:
    """theta-hat of the sample's documents from n_dk, as the dense Protocol B forms it."""
    ndk = dense_counts(sample, "ndk", K).astype(np.float64)
    return (ndk + alpha) / (ndk.sum(axis=1, keepdims=True) + alpha.sum())


@pytest.mark.parametrize("kind", ["overlay", "phi"])
@pytest.mark.parametrize("n_chunks,threads", [(1, 1), (3, 2)])
def test_fold_in_with_word_term_equals_the_twin(seed, kind, n_chunks, threads):
    """With an overlay or a given phi, p-hat and theta-hat equal the twin's (the fold-in of
    tests/reference/gibbs.py on WordTerm.matrix) and the dense path's on that matrix, bit for
    bit, and the streams end where the dense path leaves them."""
    rng = np.random.default_rng(seed)
    sample = _sample(rng, topics_used=K - 2)
    a = rng.uniform(0.02, 0.8, K)
    docs = _documents(rng, 17)
    term = _term(kind, rng)
    weights = _twin_matrix(sample, term)
    active = (np.diff(docs.heldout.indptr) > 0).astype(np.uint8)
    theta = np.empty((17, K))
    plan = _plan(seed, 17, n_chunks, 5, 2, threads, active)
    got = _kernel_fold_in(sample, a, docs, plan, term, theta)
    bounds = even_bounds(17, n_chunks)
    rngs = [np.random.Generator(stream(seed, 4, c)) for c in range(n_chunks)]
    want = fold_in_heldout(docs.observed.doc_ptr, docs.observed.words, docs.heldout.indptr,
                           docs.heldout.indices, weights, weights, a, 5, 2, bounds, rngs)
    np.testing.assert_array_equal(got, want)
    dense_plan = _plan(seed, 17, n_chunks, 5, 2, threads, active)
    dense_theta = gibbs_fold_in(weights, a, docs.observed.doc_ptr, docs.observed.words,
                                dense_plan)
    np.testing.assert_array_equal(theta, dense_theta)
    np.testing.assert_array_equal(
        got, mixture_probabilities(docs.heldout, dense_theta, weights, threads))
    for a_stream, b_stream in zip(plan.streams, dense_plan.streams):
        assert a_stream.state == b_stream.state


@pytest.mark.parametrize("kind", ["overlay", "phi"])
@pytest.mark.parametrize("threads", [1, 2])
def test_protocol_b_mixture_with_word_term_equals_the_dense_path(seed, kind, threads):
    """Protocol B's p-hat under an overlay or a given phi: the dense theta-hat mixed with the
    twin's matrix, bit for bit."""
    rng = np.random.default_rng(seed)
    sample = _sample(rng, topics_used=K - 1)
    alpha = rng.uniform(0.05, 0.5, K)
    docs = _documents(rng, sample["ndk_ptr"].size - 1)
    term = _term(kind, rng)
    want = mixture_probabilities(docs.heldout, _protocol_b_theta(sample, alpha),
                                 _twin_matrix(sample, term), 1)
    np.testing.assert_array_equal(_kernel_mixture(sample, alpha, docs.heldout, threads, term),
                                  want)


def test_an_overlay_without_entries_is_the_symmetric_prior(seed):
    """An overlay with no entry scores as no overlay, bit for bit (fold-in and Protocol B)."""
    rng = np.random.default_rng(seed)
    sample = _sample(rng)
    a = rng.uniform(0.05, 0.5, K)
    docs = _documents(rng, sample["ndk_ptr"].size - 1)
    empty = {"prior_ptr": np.zeros(V + 1, np.int64), "prior_topic": np.zeros(0, np.int32),
             "prior_extra": np.zeros(0)}
    active = (np.diff(docs.heldout.indptr) > 0).astype(np.uint8)
    n = active.size
    np.testing.assert_array_equal(
        _kernel_fold_in(sample, a, docs, _plan(seed, n, 2, 4, 1, 1, active), empty),
        _kernel_fold_in(sample, a, docs, _plan(seed, n, 2, 4, 1, 1, active), {}))
    np.testing.assert_array_equal(_kernel_mixture(sample, a, docs.heldout, 1, empty),
                                  _kernel_mixture(sample, a, docs.heldout, 1, {}))


def test_word_terms_change_protocol_b_as_the_equations_say(seed):
    """p-hat(w | d) = sum_k theta-hat_dk (n_kw + beta + o_wk) / (n_k + beta-bar_k) with an
    overlay, sum_k theta-hat_dk phi[k, w] with a given phi, from the formulas themselves (and
    not the symmetric prior's numbers)."""
    rng = np.random.default_rng(seed)
    sample = _sample(rng)
    alpha = rng.uniform(0.05, 0.5, K)
    docs = _documents(rng, sample["ndk_ptr"].size - 1)
    theta = _protocol_b_theta(sample, alpha)
    nkw = dense_counts(sample, "nkw", K).astype(np.float64)
    o = np.zeros((V, K))
    o[[3, 3, 10], [2, 5, 0]] = [40.0, 0.5, 3.0]
    ptr = np.concatenate([[0], np.cumsum((o > 0).sum(axis=1))]).astype(np.int64)
    overlay = {"prior_ptr": ptr, "prior_topic": np.nonzero(o)[1].astype(np.int32),
               "prior_extra": o[o > 0]}
    phi = random_phi(rng, V, K)
    d_of = np.repeat(np.arange(docs.heldout.indptr.size - 1), np.diff(docs.heldout.indptr))
    w_of = docs.heldout.indices
    phi_hat_o = (nkw + BETA + o) / (sample["nk"] + V * BETA + o.sum(axis=0))
    with_overlay = _kernel_mixture(sample, alpha, docs.heldout, 1, overlay)
    np.testing.assert_allclose(
        with_overlay, np.einsum("ek,ek->e", theta[d_of], phi_hat_o[w_of]), rtol=1e-12)
    np.testing.assert_allclose(_kernel_mixture(sample, alpha, docs.heldout, 1, {"phi": phi}),
                               np.einsum("ek,ke->e", theta[d_of], phi[:, w_of]), rtol=1e-12)
    plain = _kernel_mixture(sample, alpha, docs.heldout, 1, {})
    assert np.all(np.abs(with_overlay - plain)[w_of == 3] > 1e-6)


def test_word_terms_change_the_fold_in_as_the_equations_say(seed):
    """A given phi whose every column has one topic forces each token to its word's topic, so
    theta-hat_dk = (tokens of d whose word is k's + alpha_k) / (N_d + alpha.) exactly. With
    n_k = 1e9 and an overlay of 1e9 on (word 3, topic 2), phi-hat of word 3 is 1/2 in topic 2
    and below 1e-7 elsewhere, so the tokens of a document of word 3 alone all go to topic 2:
    theta-hat_d = (N_d [k = 2] + alpha_k) / (N_d + alpha.) (odds of one miss in the run
    below 1e-3)."""
    rng = np.random.default_rng(seed)
    sample = _sample(rng)
    a = rng.uniform(0.05, 0.5, K)
    docs = _documents(rng, 9)
    owner = rng.integers(0, K, V)
    phi = np.zeros((K, V))
    phi[owner, np.arange(V)] = 1.0
    active = np.ones(9, np.uint8)
    theta = np.empty((9, K))
    _kernel_fold_in(sample, a, docs, _plan(seed, 9, 2, 3, 1, 1, active), {"phi": phi}, theta)
    obs = docs.observed
    for d in range(9):
        toks = owner[obs.words[obs.doc_ptr[d]:obs.doc_ptr[d + 1]]]
        want = (np.bincount(toks, minlength=K) + a) / (toks.size + a.sum())
        np.testing.assert_allclose(theta[d], want, rtol=1e-12)
    obs.words[obs.doc_ptr[4]:obs.doc_ptr[5]] = 3
    overlay = {"prior_ptr": np.concatenate([np.zeros(4, np.int64), np.ones(V - 3, np.int64)]),
               "prior_topic": np.array([2], np.int32), "prior_extra": np.array([1e9])}
    heavy = {**sample, "nk": np.full(K, 10**9, np.int64)}
    _kernel_fold_in(heavy, a, docs, _plan(seed, 9, 2, 3, 1, 1, active), overlay, theta)
    n_4 = obs.doc_ptr[5] - obs.doc_ptr[4]
    np.testing.assert_allclose(theta[4], (n_4 * (np.arange(K) == 2) + a) / (n_4 + a.sum()),
                               rtol=1e-12)


def test_bad_word_terms_raise():
    """An overlay with a given phi, a partial or malformed overlay, a phi of the wrong shape
    or without mass in a word's column are refused, by both kernels."""
    rng = np.random.default_rng(0)
    sample = _sample(rng)
    a = np.full(K, 0.1)
    docs = _documents(rng, sample["ndk_ptr"].size - 1)
    n = docs.observed.n_docs
    overlay = random_overlay(rng, V, K)
    phi = random_phi(rng, V, K)
    no_mass = phi.copy()
    no_mass[:, 4] = 0.0
    wrong_topic = {**overlay, "prior_topic": np.full_like(overlay["prior_topic"], K)}
    cases = [({**overlay, "phi": phi}, "replaces"),
             ({"prior_ptr": overlay["prior_ptr"]}, "needs prior_ptr"),
             ({**overlay, "prior_ptr": overlay["prior_ptr"][:-1]}, "row offsets"),
             (wrong_topic, "ascending topics"),
             ({"phi": phi[:, :-1].copy()}, "phi needs"),
             ({"phi": no_mass}, "no mass")]
    for term, message in cases:
        plan = _plan(0, n, 1, 2, 1, 1, np.ones(n, np.uint8))
        with pytest.raises(ValueError, match=message):
            _kernel_fold_in(sample, a, docs, plan, term)
        with pytest.raises(ValueError, match=message):
            _kernel_mixture(sample, a, docs.heldout, 1, term)
