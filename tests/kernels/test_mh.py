"""The MH kernels (docs/algorithms.md §2.7) against their NumPy twin in tests/reference/mh.py
(exactly, same PCG64 streams), the MH chain's stationary distribution against exact
enumeration of the posterior (one prior, a prior per document), and the MH fold-in's theta-hat
against its exact expectation; each also with the word terms (an overlay of extra word prior,
a given phi)."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.special import gammaln

from tests.kernels._kernel import KernelState, even_bounds, random_corpus, stream
from tests.kernels._mh import MHChain, fold_in
from tests.reference import gibbs as gibbs_ref
from tests.reference import mh as ref
from topictk.inference.gibbs import mh
from topictk.inference.base import FoldInPlan

D, V, K = 14, 17, 5
SYMMETRIC = np.full(K, 0.1)
ASYMMETRIC = np.array([0.05, 0.3, 1.2, 0.1, 0.6])
# a prior per document (DMR): rows far from their mean, so the document factors matter
PER_DOC = np.exp(np.random.default_rng(7).normal(-1.0, 1.2, size=(D, K)))
PRIORS = {"symmetric": SYMMETRIC, "asymmetric": ASYMMETRIC, "per-document": PER_DOC}


def _start(seed, doc_ptr, words, n_topics=K, n_words=V):
    """Kernel chain and twin arrays from the same uniform start."""
    state = KernelState.initial(doc_ptr, words, n_topics, n_words, stream(seed, 0))
    twin = gibbs_ref.init_topics(doc_ptr, words, n_topics, n_words,
                                 np.random.Generator(stream(seed, 0)))
    return state, [a.copy() for a in twin]


def _table_arrays(sampler, w):
    begin, n = sampler.ptr[w], sampler.length[w]
    return (sampler.topic[begin:begin + n].tolist(), sampler.count[begin:begin + n].tolist(),
            sampler.prob[begin:begin + n].tolist(), sampler.alias[begin:begin + n].tolist())


def test_tables_equal_reference(seed):
    doc_ptr, words = random_corpus(np.random.default_rng(seed), D, V, 25)
    state, _ = _start(seed, doc_ptr, words)
    chain = MHChain(doc_ptr, words, *state.arrays(), beta=0.05)
    chain.sampler.build(chain.z, chain.beta, threads=2)
    tb = ref.build_tables(words, chain.z, K, V, 0.05)
    for w in range(V):
        assert _table_arrays(chain.sampler, w) == (tb.topics[w], tb.counts[w], tb.prob[w],
                                                   tb.alias[w])
        assert chain.sampler.mass[w] == tb.mass[w]
    assert chain.sampler.rden.tolist() == tb.rden
    assert chain.sampler.nk.tolist() == tb.nk
    assert chain.sampler.dense_prob.tolist() == tb.dense_prob
    assert chain.sampler.dense_alias.tolist() == tb.dense_alias
    assert chain.sampler.dense_mass == tb.dense_mass
    # every word's table is a distribution: kept mass plus aliased mass gives each topic its
    # weight count * rden (checked on the word with the most topics)
    w = int(np.argmax(chain.sampler.length))
    topics, counts, prob, alias = _table_arrays(chain.sampler, w)
    n = len(topics)
    got = np.zeros(n)
    for j in range(n):
        got[j] += prob[j] / n
        got[alias[j]] += (1 - prob[j]) / n
    weights = np.array([c * chain.sampler.rden[k] for k, c in zip(topics, counts)])
    np.testing.assert_allclose(got, weights / weights.sum(), rtol=1e-12)


def random_overlay(rng, n_words=V, n_topics=K):
    """An overlay of extra word prior (CSR triple) on about a third of the words: word 1 over
    every topic, the last word always, the others at random."""
    rows = []
    for w in range(n_words):
        if w == 1:
            rows.append(np.arange(n_topics))
        elif w == n_words - 1 or rng.random() < 0.3:
            rows.append(np.sort(rng.choice(n_topics, rng.integers(1, 3), replace=False)))
        else:
            rows.append(np.zeros(0, np.int64))
    ptr = np.zeros(n_words + 1, np.int64)
    np.cumsum([r.size for r in rows], out=ptr[1:])
    return ptr, np.concatenate(rows).astype(np.int32), rng.uniform(0.05, 3.0, int(ptr[-1]))


def word_terms(seed, term, n_words=V, n_topics=K) -> dict:
    """The keyword arguments of a word term: an overlay, or a phi (K x V, rows summing to 1)."""
    rng = np.random.default_rng(seed + 50)
    if term == "overlay":
        return {"overlay": random_overlay(rng, n_words, n_topics)}
    return {"phi": rng.dirichlet(np.full(n_words, 0.5), n_topics)}


def _twin_terms(terms: dict) -> dict:
    """The twin's form of the word terms."""
    if "overlay" in terms:
        return {"overlay": ref.Overlay.of_csr(*terms["overlay"])}
    return dict(terms)


@pytest.mark.parametrize("n_chunks,threads", [(1, 1), (2, 1), (2, 2), (3, 2)])
@pytest.mark.parametrize("prior", PRIORS)
@pytest.mark.parametrize("steps,rebuild", [(1, 1), (2, 3)])
def test_sweep_equals_reference(seed, n_chunks, threads, prior, steps, rebuild):
    _sweeps_equal_reference(seed, n_chunks, threads, PRIORS[prior], steps, rebuild, {})


@pytest.mark.parametrize("term", ["overlay", "phi"])
@pytest.mark.parametrize("n_chunks,threads", [(1, 1), (3, 2)])
@pytest.mark.parametrize("prior", ["asymmetric", "per-document"])
@pytest.mark.parametrize("steps,rebuild", [(1, 1), (2, 3)])
def test_sweep_with_word_terms_equals_reference(seed, term, n_chunks, threads, prior, steps,
                                                rebuild):
    """With an overlay (words with and without one, one over every topic) or a given phi the
    kernel draws what the twin draws and ends where it ends."""
    _sweeps_equal_reference(seed, n_chunks, threads, PRIORS[prior], steps, rebuild,
                            word_terms(seed, term))


def _sweeps_equal_reference(seed, n_chunks, threads, alpha, steps, rebuild, terms):
    doc_ptr, words = random_corpus(np.random.default_rng(seed), D, V, 25)
    beta = 0.05
    bounds = even_bounds(D, n_chunks)
    state, (z, ndk, nkw, nk) = _start(seed, doc_ptr, words)
    chain = MHChain(doc_ptr, words, *state.arrays(), beta=beta, steps=steps, rebuild=rebuild,
                    **terms)
    twin = _twin_terms(terms)
    kernel_streams = [stream(seed, 3, c) for c in range(n_chunks)]
    rngs = [np.random.Generator(stream(seed, 3, c)) for c in range(n_chunks)]
    start_z = z.copy()
    tb = table_z = None
    for sweep in range(6):
        chain.sweep(alpha, bounds, kernel_streams, threads)
        if sweep % rebuild == 0:
            tb = ref.build_tables(words, z, K, V, beta, twin.get("overlay"))
            table_z = z.copy() if rebuild > 1 else None
        ref.sweep(doc_ptr, words, z, ndk, nkw, nk, alpha, beta, bounds, rngs, steps, tb,
                  table_z, **twin)
        for name, got, want in zip(("z", "ndk", "nkw", "nk"), chain.arrays(), (z, ndk, nkw, nk)):
            assert np.array_equal(got, want), f"{name} differs after sweep {sweep + 1}"
    assert not np.array_equal(chain.z, start_z)
    for bg, rng in zip(kernel_streams, rngs):
        assert bg.state == rng.bit_generator.state


@pytest.mark.parametrize("prior", ["asymmetric", "per-document"])
def test_threads_do_not_change_the_chain(seed, prior):
    doc_ptr, words = random_corpus(np.random.default_rng(seed), 40, V, 30)
    bounds = even_bounds(40, 4)
    alpha = ASYMMETRIC if prior == "asymmetric" else np.resize(PER_DOC, (40, K))
    results = []
    for threads in (1, 2):
        state, _ = _start(seed, doc_ptr, words)
        chain = MHChain(doc_ptr, words, *state.arrays(), beta=0.05)
        streams = [stream(seed, 3, c) for c in range(4)]
        for _ in range(4):
            chain.sweep(alpha, bounds, streams, threads)
        results.append([a.copy() for a in chain.arrays()])
    for one, two in zip(*results):
        np.testing.assert_array_equal(one, two)


def test_an_overlay_without_entries_is_the_symmetric_prior(seed):
    """An overlay with no entry changes no number: o = 0 and beta-bar = V beta."""
    doc_ptr, words = random_corpus(np.random.default_rng(seed), D, V, 25)
    empty = (np.zeros(V + 1, np.int64), np.zeros(0, np.int32), np.zeros(0))
    results = []
    for overlay in (None, empty):
        state, _ = _start(seed, doc_ptr, words)
        chain = MHChain(doc_ptr, words, *state.arrays(), beta=0.05, overlay=overlay)
        streams = [stream(seed, 3, c) for c in range(2)]
        for _ in range(3):
            chain.sweep(ASYMMETRIC, even_bounds(D, 2), streams, 2)
        results.append([a.copy() for a in chain.arrays()])
    for one, two in zip(*results):
        np.testing.assert_array_equal(one, two)


@pytest.mark.parametrize("terms,message", [
    ({"overlay": (np.array([0] + [2] * V, np.int64), np.array([3, 1], np.int32),
                  np.ones(2))}, "ascending topics"),
    ({"overlay": (np.array([0] + [1] * V, np.int64), np.array([1], np.int32),
                  np.array([-0.5]))}, "not >= 0"),
    ({"overlay": (np.zeros(V, np.int64), np.zeros(0, np.int32), np.zeros(0))}, "row offsets"),
    ({"phi": np.ones((K, V - 1))}, "topics x words"),
    ({"phi": np.zeros((K, V))}, "no mass"),
])
def test_bad_word_terms_raise(terms, message):
    doc_ptr, words = random_corpus(np.random.default_rng(0), D, V, 25)
    state, _ = _start(0, doc_ptr, words)
    chain = MHChain(doc_ptr, words, *state.arrays(), beta=0.05, **terms)
    with pytest.raises(ValueError, match=message):
        chain.sweep(SYMMETRIC, even_bounds(D, 1), [stream(0, 3, 0)])
    chain = MHChain(doc_ptr, words, *state.arrays(), beta=0.05, phi=np.ones((K, V)))
    chain.terms.update(prior_ptr=np.zeros(V + 1, np.int64), prior_topic=np.zeros(0, np.int32),
                       prior_extra=np.zeros(0))
    with pytest.raises(ValueError, match="replaces the word prior"):
        chain.sweep(SYMMETRIC, even_bounds(D, 1), [stream(0, 3, 0)])


def test_more_topics_than_tokens():
    doc_ptr = np.array([0, 2, 3], np.int64)
    words = np.array([0, 1, 1], np.int32)
    state, _ = _start(0, doc_ptr, words, n_topics=50, n_words=2)
    chain = MHChain(doc_ptr, words, *state.arrays(), beta=0.1)
    chain.sweep(np.full(50, 0.1), np.array([0, 2], np.int64), [stream(0, 3, 0)])
    assert chain.nk.sum() == 3 and chain.ndk.sum() == 3
    assert np.array_equal(np.bincount(chain.z, minlength=50), chain.nk)


# ---------------------------------------------------------------- stationary distribution

# Corpus {[0, 1, 0], [1, 2], [2, 0]}: words shared between documents and repeated inside one,
# so stale word tables and the document proposal both matter; 3^7 = 2187 assignments.
DOC_PTR = np.array([0, 3, 5, 7], np.int64)
WORDS = np.array([0, 1, 0, 1, 2, 2, 0], np.int32)
DOC_OF = np.repeat(np.arange(3), np.diff(DOC_PTR))
SV, SK, BETA = 3, 3, 0.2
SALPHA = np.array([0.2, 0.7, 0.4])
SWEEPS = 150_000
# The exact Gibbs sampler's state frequencies over SWEEPS sweeps are at total variation 0.030
# from the posterior on this corpus (seeds 0 and 1: the Monte Carlo error of 2187 cells); the
# MH chain with fixed tables at 0.031-0.032, with its acceptance ratio broken (the proposal
# probabilities left out) at 0.33-0.60.
TOLERANCE = 0.045
# Tables rebuilt every sweep from the current state (training) are no longer independent of
# it, which biases the chain on a corpus this small: 0.053 at 150 000 sweeps, 0.042 at
# 600 000 (docs/algorithms.md §2.7); without taking the token's own entry out of the table,
# 0.176.
TOLERANCE_REBUILT = 0.08


# A prior per document (DMR) for the same corpus: rows unlike each other and unlike their
# mean alpha-bar, so the document proposal's ratio needs its document factors. With fixed
# tables: total variation 0.022 (seeds 0 and 1); with the factors left out 0.45-0.52.
SALPHA_DOC = np.array([[0.1, 1.5, 0.3], [0.9, 0.15, 0.4], [0.25, 0.3, 2.0]])


# The word terms on the same corpus: an overlay of extra prior (word 0 on topic 0, word 2 on
# topics 1 and 2; word 1 has none), and a given phi (K x V, rows summing to 1), with the
# prior per document. Fixed tables, seeds 0 and 1: total variation 0.029 (overlay) and 0.025
# (phi); with the overlay left out of the proposal's density in the word proposal's ratio
# 0.09-0.20, with phi's ratio in the document proposal's inverted 0.56.
SOVERLAY = (np.array([0, 1, 1, 3], np.int64), np.array([0, 1, 2], np.int32),
            np.array([1.5, 0.8, 0.3]))
SPHI = np.array([[0.6, 0.3, 0.1], [0.1, 0.5, 0.4], [0.25, 0.25, 0.5]])
STERMS = {"overlay": {"overlay": SOVERLAY}, "phi": {"phi": SPHI}}


def _dense_overlay(overlay, n_words, n_topics) -> np.ndarray:
    """o as a (V, K) array."""
    ptr, topic, extra = overlay
    dense = np.zeros((n_words, n_topics))
    for w in range(n_words):
        dense[w, topic[ptr[w]:ptr[w + 1]]] = extra[ptr[w]:ptr[w + 1]]
    return dense


def _log_joint(z, alpha=SALPHA, overlay=None, phi=None) -> float:
    """ln p(w, z | alpha, beta) (§1.3) up to a constant; ``alpha`` (K,) or a row per
    document. With an overlay the prior of phi_k is Dirichlet(beta + o[:, k]); with a given
    phi the word factor is phi[z_i, w_i]."""
    alpha = np.broadcast_to(alpha, (3, SK))
    ndk = np.zeros((3, SK))
    nkw = np.zeros((SV, SK))
    np.add.at(ndk, (DOC_OF, z), 1)
    np.add.at(nkw, (WORDS, z), 1)
    nk = nkw.sum(axis=0)
    doc = np.sum(gammaln(ndk + alpha)) - np.sum(gammaln(ndk.sum(1) + alpha.sum(1)))
    if phi is not None:
        return float(doc + np.sum(np.log(phi[z, WORDS])))
    prior = BETA + (0.0 if overlay is None else _dense_overlay(overlay, SV, SK))
    return float(doc - np.sum(gammaln(nk + np.sum(np.broadcast_to(prior, (SV, SK)), axis=0)))
                 + np.sum(gammaln(nkw + prior)))


def _posterior(alpha=SALPHA, overlay=None, phi=None) -> np.ndarray:
    states = np.array(list(itertools.product(range(SK), repeat=WORDS.size)))
    lj = np.array([_log_joint(z, alpha, overlay, phi) for z in states])
    p = np.exp(lj - lj.max())
    return p / p.sum()


def _mh_frequencies(seed: int, steps: int, rebuild: int | None, alpha=SALPHA,
                    **terms) -> np.ndarray:
    """State frequencies of an MH chain over SWEEPS sweeps: tables rebuilt every ``rebuild``
    sweeps as in training, or (None) built once from the first state and kept."""
    state, _ = _start(seed, DOC_PTR, WORDS, n_topics=SK, n_words=SV)
    chain = MHChain(DOC_PTR, WORDS, *state.arrays(), beta=BETA, steps=steps,
                    rebuild=rebuild or 2, **terms)
    if rebuild is None:
        chain.build(chain.z)
        chain.table_z = chain.z.copy()
        chain.step = 1          # never a multiple of 2 again: the tables stay
    bounds = np.array([0, 3], np.int64)
    streams = [stream(seed, 3, 0)]
    codes = np.empty(SWEEPS, np.int64)
    place = SK ** np.arange(WORDS.size - 1, -1, -1)
    for t in range(SWEEPS):
        chain.sweep(alpha, bounds, streams)
        if rebuild is None:
            chain.step = 1
        codes[t] = chain.z @ place
    return np.bincount(codes, minlength=SK ** WORDS.size) / SWEEPS


@pytest.mark.parametrize("steps", [1, 2])
def test_mh_chain_targets_the_posterior(seed, steps):
    """With the tables fixed, every MH step leaves the posterior invariant exactly: total
    variation between the chain's state frequencies over 150 000 sweeps and the exact
    posterior below TOLERANCE."""
    tv = 0.5 * np.abs(_mh_frequencies(seed, steps, None) - _posterior()).sum()
    assert tv < TOLERANCE, f"total variation {tv:.4f}"


def test_mh_chain_with_rebuilt_tables_stays_close_to_the_posterior(seed):
    tv = 0.5 * np.abs(_mh_frequencies(seed, 1, 1) - _posterior()).sum()
    assert tv < TOLERANCE_REBUILT, f"total variation {tv:.4f}"


def test_mh_chain_with_a_prior_per_document_targets_the_posterior(seed):
    """A prior per document, tables fixed: the document proposal draws from alpha-bar and
    its ratio carries the document factors, so the chain is exact again."""
    tv = 0.5 * np.abs(_mh_frequencies(seed, 1, None, SALPHA_DOC)
                      - _posterior(SALPHA_DOC)).sum()
    assert tv < TOLERANCE, f"total variation {tv:.4f}"


@pytest.mark.parametrize("term", STERMS)
def test_mh_chain_with_word_terms_targets_the_posterior(seed, term):
    """Fixed tables with an overlay of the word prior, or a given phi: the acceptance ratios
    hold the proposals' densities and the new target exactly, so the chain's frequencies are
    within TOLERANCE of the exact posterior of that target."""
    tv = 0.5 * np.abs(_mh_frequencies(seed, 1, None, SALPHA_DOC, **STERMS[term])
                      - _posterior(SALPHA_DOC, **STERMS[term])).sum()
    assert tv < TOLERANCE, f"total variation {tv:.4f}"


# ---------------------------------------------------------------- fold-in

def _model_counts(seed, n_words=V, n_topics=K):
    """A model's (nkw, nk) from a random training state; the last word never occurs in
    training, so its table is empty and only the shared part proposes for it."""
    doc_ptr, words = random_corpus(np.random.default_rng(seed + 100), 30, n_words - 1, 25)
    state, _ = _start(seed, doc_ptr, words, n_topics=n_topics, n_words=n_words)
    return state.nkw, state.nk


def _test_documents(seed, n_docs=9):
    """Test documents over every word, the third one empty."""
    doc_ptr, words = random_corpus(np.random.default_rng(seed + 200), n_docs, V, 12)
    lengths = np.diff(doc_ptr)
    lengths[2] = 0
    keep = np.repeat(np.arange(n_docs), np.diff(doc_ptr)) != 2
    doc_ptr = np.zeros(n_docs + 1, np.int64)
    np.cumsum(lengths, out=doc_ptr[1:])
    return doc_ptr, words[keep]


FOLD_PRIORS = {"symmetric": SYMMETRIC, "asymmetric": ASYMMETRIC,
               "per-document": PER_DOC[:9]}


@pytest.mark.parametrize("n_chunks,threads", [(1, 1), (2, 1), (2, 2), (3, 2)])
@pytest.mark.parametrize("prior", FOLD_PRIORS)
@pytest.mark.parametrize("steps", [1, 2])
def test_fold_in_equals_reference(seed, n_chunks, threads, prior, steps):
    nkw, nk = _model_counts(seed)
    doc_ptr, words = _test_documents(seed)
    alpha = FOLD_PRIORS[prior]
    active = np.ones(9, bool)
    active[5] = False
    bounds = even_bounds(9, n_chunks)
    kernel_streams = [stream(seed, 4, 0, c) for c in range(n_chunks)]
    rngs = [np.random.Generator(stream(seed, 4, 0, c)) for c in range(n_chunks)]
    plan = FoldInPlan(6, 3, bounds, kernel_streams, threads, active)
    theta = mh.mh_fold_in(nkw, nk, 0.05, alpha, doc_ptr, words, plan, steps)
    want = ref.fold_in_theta(nkw, nk, 0.05, alpha, doc_ptr, words, steps, 6, 3, bounds, rngs,
                             active)
    np.testing.assert_array_equal(theta, want)
    assert np.isnan(theta[5]).all() and np.isfinite(np.delete(theta, 5, axis=0)).all()
    np.testing.assert_allclose(theta[active].sum(axis=1), 1.0, rtol=1e-12)
    for bg, rng in zip(kernel_streams, rngs):
        assert bg.state == rng.bit_generator.state


@pytest.mark.parametrize("term", ["overlay", "phi"])
@pytest.mark.parametrize("n_chunks,threads", [(1, 1), (3, 2)])
@pytest.mark.parametrize("prior", FOLD_PRIORS)
def test_fold_in_with_word_terms_equals_reference(seed, term, n_chunks, threads, prior):
    nkw, nk = _model_counts(seed)
    doc_ptr, words = _test_documents(seed)
    terms = word_terms(seed, term)
    active = np.ones(9, bool)
    active[5] = False
    bounds = even_bounds(9, n_chunks)
    kernel_streams = [stream(seed, 4, 0, c) for c in range(n_chunks)]
    rngs = [np.random.Generator(stream(seed, 4, 0, c)) for c in range(n_chunks)]
    plan = FoldInPlan(6, 3, bounds, kernel_streams, threads, active)
    theta = fold_in(nkw, nk, 0.05, FOLD_PRIORS[prior], doc_ptr, words, plan, 2, **terms)
    want = ref.fold_in_theta(nkw, nk, 0.05, FOLD_PRIORS[prior], doc_ptr, words, 2, 6, 3,
                             bounds, rngs, active, **_twin_terms(terms))
    np.testing.assert_array_equal(theta, want)
    for bg, rng in zip(kernel_streams, rngs):
        assert bg.state == rng.bit_generator.state


def test_fold_in_count_tables_equal_reference(seed):
    nkw, nk = _model_counts(seed)
    vocab = np.array([0, 3, 4, 9, V - 1], np.int64)
    tables = mh.CountTables(nkw, nk, vocab, 0.05, threads=2)
    tb = ref.count_tables(nkw, nk, vocab.tolist(), 0.05)
    for j in range(vocab.size):
        assert _table_arrays(tables, j) == (tb.topics[j], tb.counts[j], tb.prob[j],
                                            tb.alias[j])
        assert tables.mass[j] == tb.mass[j]
    assert tables.length[-1] == 0                      # a word the model never saw
    assert tables.rden.tolist() == tb.rden
    assert (tables.dense_prob.tolist(), tables.dense_alias.tolist(),
            tables.dense_mass) == (tb.dense_prob, tb.dense_alias, tb.dense_mass)


def test_fold_in_of_an_empty_document_is_the_prior_mean_as_the_gibbs_fold_in():
    from topictk.inference.base import gibbs_fold_in
    from topictk.state.counts import phi_hat

    nkw, nk = _model_counts(0)
    doc_ptr, words = _test_documents(0)
    for alpha in FOLD_PRIORS.values():
        plans = [FoldInPlan(4, 2, np.array([0, 9]), [stream(0, 4, 0, 0)]) for _ in range(2)]
        theta = mh.mh_fold_in(nkw, nk, 0.05, alpha, doc_ptr, words, plans[0])
        gibbs = gibbs_fold_in(phi_hat(nkw, nk, 0.05), alpha, doc_ptr, words, plans[1])
        assert np.array_equal(theta[2], gibbs[2])
        row = np.atleast_2d(alpha)[2 % np.atleast_2d(alpha).shape[0]]
        np.testing.assert_allclose(theta[2], row / row.sum(), rtol=1e-15)


# Two short documents folded in with fixed counts; theta-hat over many sweeps against its exact
# expectation E[(n_dk + alpha_dk) / (N_d + alpha_d.)] under p(z_d | w_d, phi-hat, alpha_d),
# enumerated over the K^N_d assignments.
FOLD_NKW = np.array([[5, 0, 1], [0, 4, 2], [2, 2, 0], [0, 0, 0]], np.int32)
FOLD_NK = FOLD_NKW.sum(axis=0).astype(np.int64)
FOLD_DOCS = (np.array([0, 5, 9], np.int64), np.array([0, 1, 1, 2, 3, 0, 2, 2, 1], np.int32))
FOLD_BETA = 0.3
FOLD_ALPHA = {"shared": np.array([0.3, 0.8, 0.2]),
              "per-document": np.array([[0.1, 2.0, 0.3], [1.5, 0.1, 0.6]])}
FOLD_SWEEPS = 200_000
# |theta-hat - E theta-hat| over the six entries, largest, seeds 0-3 with FOLD_SWEEPS sweeps:
# the dense Gibbs fold-in 0.0006-0.0013, the MH fold-in 0.0006-0.0017; with the word proposal
# accepted always 0.13-0.14, with the document proposal drawing from another document's prior
# (per-document prior) 0.30.
FOLD_TOLERANCE = 0.01


# The word terms of the fold-in: an overlay on words 0 and 2, a given phi (K x V). Measured
# as above (prior per document), seeds 0-3: at most 0.0014 (overlay) and 0.0008 (phi); with
# the overlay left out of phi-hat in the document proposal's ratio 0.05, with phi's ratio
# there inverted 0.08.
FOLD_OVERLAY = (np.array([0, 2, 2, 3, 3], np.int64), np.array([1, 2, 0], np.int32),
                np.array([2.0, 0.5, 1.0]))
FOLD_PHI = np.array([[0.5, 0.1, 0.3, 0.1], [0.05, 0.6, 0.15, 0.2], [0.3, 0.3, 0.1, 0.3]])
FOLD_TERMS = {"overlay": {"overlay": FOLD_OVERLAY}, "phi": {"phi": FOLD_PHI}}


def _exact_theta(alpha: np.ndarray, overlay=None, phi=None) -> np.ndarray:
    alpha = np.broadcast_to(alpha, (2, 3))
    if phi is None:
        prior = FOLD_BETA + (0.0 if overlay is None else _dense_overlay(overlay, 4, 3))
        prior = np.broadcast_to(prior, (4, 3))
        phi = (FOLD_NKW + prior) / (FOLD_NK + prior.sum(axis=0))
    else:
        phi = phi.T
    doc_ptr, words = FOLD_DOCS
    theta = np.zeros((2, 3))
    for d in range(2):
        w = words[doc_ptr[d]:doc_ptr[d + 1]]
        states = np.array(list(itertools.product(range(3), repeat=w.size)))
        nd = np.stack([np.bincount(z, minlength=3) for z in states])
        logp = (np.log(phi[w, states]).sum(axis=1)
                + gammaln(nd + alpha[d]).sum(axis=1))
        p = np.exp(logp - logp.max())
        p /= p.sum()
        theta[d] = p @ ((nd + alpha[d]) / (w.size + alpha[d].sum()))
    return theta


@pytest.mark.parametrize("prior", FOLD_ALPHA)
def test_mh_fold_in_theta_matches_exact_expectation(seed, prior):
    alpha = FOLD_ALPHA[prior]
    plan = FoldInPlan(FOLD_SWEEPS, 100, np.array([0, 1, 2]),
                      [stream(seed, 4, 0, 0), stream(seed, 4, 0, 1)])
    theta = mh.mh_fold_in(FOLD_NKW, FOLD_NK, FOLD_BETA, alpha, *FOLD_DOCS, plan, steps=1)
    error = np.abs(theta - _exact_theta(alpha)).max()
    assert error < FOLD_TOLERANCE, f"largest error {error:.4f}"


@pytest.mark.parametrize("term", FOLD_TERMS)
def test_mh_fold_in_with_word_terms_matches_exact_expectation(seed, term):
    """phi-hat with an overlay of the word prior, or a given phi: theta-hat against its
    exact expectation under that word factor."""
    alpha = FOLD_ALPHA["per-document"]
    plan = FoldInPlan(FOLD_SWEEPS, 100, np.array([0, 1, 2]),
                      [stream(seed, 4, 0, 0), stream(seed, 4, 0, 1)])
    theta = fold_in(FOLD_NKW, FOLD_NK, FOLD_BETA, alpha, *FOLD_DOCS, plan, 1, **FOLD_TERMS[term])
    error = np.abs(theta - _exact_theta(alpha, **FOLD_TERMS[term])).max()
    assert error < FOLD_TOLERANCE, f"largest error {error:.4f}"
