"""The Gibbs chain of a run grown by added documents (``train --continue RUN --add STORE``,
docs/train.md "Adding documents to a trained model").

The old tokens keep their topics. The added documents are folded in under the run's topics as
``evaluate`` folds in test documents (:func:`topictk.inference.base.gibbs_fold_in`, phi-hat of
the run's counts with the beta prior for the new words, the documents' prior under the run's
state: alpha, or DMR's exp(x_d nu) of their features; chunks with their own derived
streams), and each added token then takes one topic drawn from its document's folded-in
theta-hat times phi-hat of its word. Every count is then counted again from the union's z, so
the state is exactly the counts of its topics; sweeps go on over old and new documents together.
"""
from __future__ import annotations

import numpy as np

from topictk.inference.base import AddedDocuments, gibbs_fold_in
from topictk.inference.gibbs import _warp
from topictk.streams import grow_key

#: tokens whose topic probabilities are formed at a time (a (block, K) float64 array)
DRAW_BLOCK = 1 << 15


def draw_topics(theta: np.ndarray, phi: np.ndarray, doc_ptr: np.ndarray, words: np.ndarray,
                stream) -> np.ndarray:
    """(N,) int32: for every token of the documents (``doc_ptr``, ``words``) one topic drawn
    with probability proportional to theta[d, k] phi[w, k] (``phi`` word-major (V, K)), by the
    inverse of its cumulative sum at a uniform of ``stream`` (one per token, in order)."""
    n_tokens = int(words.size)
    doc_of = np.repeat(np.arange(doc_ptr.size - 1), np.diff(doc_ptr))
    uniform = np.random.Generator(stream).random(n_tokens)
    z = np.empty(n_tokens, dtype=np.int32)
    for begin in range(0, n_tokens, DRAW_BLOCK):
        end = min(begin + DRAW_BLOCK, n_tokens)
        weight = theta[doc_of[begin:end]] * phi[words[begin:end]]
        cumulative = np.cumsum(weight, axis=1)
        target = uniform[begin:end] * cumulative[:, -1]
        chosen = (cumulative < target[:, None]).sum(axis=1)
        z[begin:end] = np.minimum(chosen, phi.shape[1] - 1)
    return z


def grown_topics(driver, old, added: AddedDocuments) -> np.ndarray:
    """(N,) int32 topics of the union's tokens: the old chain's, then the added tokens'."""
    doc_ptr, words = driver.doc_ptr, driver.words
    old_z = np.asarray(old.z, dtype=np.int32)
    K, V = driver.K, driver.V
    old_words = words[:added.n_tokens].astype(np.int64)
    nkw = np.bincount(old_words * K + old_z, minlength=V * K).reshape(V, K)
    phi = (nkw + old.beta) / (np.bincount(old_z, minlength=K) + V * old.beta)   # (V, K)
    new_ptr = np.ascontiguousarray(doc_ptr[added.n_docs:] - doc_ptr[added.n_docs])
    new_words = np.ascontiguousarray(words[added.n_tokens:])
    plan = added.fold_in_plan(new_ptr.size - 1, driver.threads)
    features = driver.features_of("train")
    features = None if features is None else features[added.n_docs:]
    prior = driver.document_prior(old, features)       # (1 or D_added, K)
    theta = gibbs_fold_in(phi, prior, new_ptr, new_words, plan)
    new_z = draw_topics(theta, phi, new_ptr, new_words, added.streams.derived(grow_key(1)))
    return np.concatenate([old_z, new_z])


def grow_count_state(driver, old, added: AddedDocuments):
    """The driver's count state (its representation's class) of the union: z of
    :func:`grown_topics`, n_dk, n_kw and n_k counted from it (none for WarpLDA's chain, which
    counts them when read), the run's alpha, beta and step; the MH sampler's tables are built
    from this z (``table_z``)."""
    z = grown_topics(driver, old, added)
    K = driver.K
    ndk = nkw = None
    if "ndk" in driver.STATE.SCHEMA:
        ndk = np.zeros((driver.n_docs, K), dtype=np.int32)
        nkw = np.zeros((driver.V, K), dtype=np.int32)
        _warp.count_topics(driver.doc_ptr, driver.words, z, ndk, nkw)
    state = driver.STATE(z=z, ndk=ndk, nkw=nkw,
                         nk=np.bincount(z, minlength=K).astype(np.int64),
                         alpha=np.array(old.alpha, dtype=np.float64), beta=float(old.beta),
                         step=int(old.step))
    return driver.counts.grown(state, old)


class GrowMixin:
    """The Gibbs driver's :meth:`~topictk.inference.base.Driver.grow_state`: the families
    its traits list in ``add_documents`` grow by :func:`grow_count_state`."""

    def grow_state(self, old, added: AddedDocuments):
        if getattr(self.config.model, "family", "lda") not in self.traits.add_documents:
            return super().grow_state(old, added)
        return grow_count_state(self, old, added)
