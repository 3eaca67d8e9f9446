"""Held-out perplexity by the left-to-right estimator (Wallach et al. 2009; docs/algorithms.md
§11.3).

Document completion (§11.2) plugs in a point estimate of theta from the observed tokens; the
left-to-right estimator instead integrates theta out, estimating ln p(held | observed, phi,
alpha) of each test document with R particles that resample the topics of everything before
the token they predict. It is the more accurate of the two, and costs O(R len^2 K) per
document against the fold-in's O(sweeps len K).

Every algorithm offers the (phi-hat, alpha) pairs it is scored with through
:meth:`topictk.inference.base.Driver.predictive_topics`: one pair per saved sample for the
samplers (alpha_d of each test document for DMR, §9.4), the point estimate of §11.2 for the
variational methods. A document's value is averaged over samples in probability space,
ln p-hat_d = logsumexp_s(ll_d^s) - ln S, and the perplexity is exp(-sum_d ln p-hat_d /
N_held).
"""
from __future__ import annotations

import numpy as np
from scipy.special import logsumexp

from topictk import progress
from topictk.evaluation._left_to_right import left_to_right
from topictk.inference.base import EvaluationSet, chunk_bounds_by_docs
from topictk.streams import Streams, left_to_right_key

DEFAULT_PARTICLES = 20


def document_log_likelihoods(test: EvaluationSet, phi: np.ndarray, alpha: np.ndarray,
                             particles: int, streams: Streams, chunk_docs: int,
                             threads: int = 1) -> np.ndarray:
    """(D_test,) left-to-right estimates of ln p(held | observed) for one (phi (V, K), alpha
    (K,) or (D_test, K)); 0 for documents without held-out tokens. Streams: ``(6, c)`` for
    chunk c of ``chunk_docs`` documents."""
    obs, held = test.observed, test.heldout
    bounds = chunk_bounds_by_docs(obs.n_docs, chunk_docs)
    chunk_streams = [streams.derived(left_to_right_key(c)) for c in range(bounds.size - 1)]
    out = np.zeros(obs.n_docs, dtype=np.float64)
    obs_ptr = np.ascontiguousarray(obs.doc_ptr, dtype=np.int64)
    held_ptr = np.ascontiguousarray(held.indptr, dtype=np.int64)
    alpha = np.ascontiguousarray(np.atleast_2d(alpha), dtype=np.float64)
    words, held_words, held_counts, phi = (
        np.ascontiguousarray(obs.words, dtype=np.int32),
        np.ascontiguousarray(held.indices, dtype=np.int32),
        np.ascontiguousarray(held.counts, dtype=np.int32),
        np.ascontiguousarray(phi, dtype=np.float64))
    # a few chunks per call when a bar counts the documents: each chunk keeps its stream
    for c0, c1 in progress.chunk_groups(bounds.size - 1, threads):
        first, end = int(bounds[c0]), int(bounds[c1])
        left_to_right(obs_ptr[first:end + 1], words, held_ptr[first:end + 1], held_words,
                      held_counts, phi, alpha[first:end] if alpha.shape[0] > 1 else alpha,
                      int(particles), bounds[c0:c1 + 1] - first, chunk_streams[c0:c1],
                      out[first:end], int(threads))
        progress.count(end - first)
    return out


def left_to_right_perplexity(driver, state, test: EvaluationSet, samples, particles: int,
                             streams: Streams, threads: int = 1) -> dict:
    """The run's held-out perplexity by the left-to-right estimator, over its samples."""
    pairs = driver.predictive_topics(state, samples, test)
    chunk_docs = int(driver.config.evaluation.chunk_docs)
    with progress.bar(len(pairs) * test.n_docs, desc="left-to-right",
                      unit="doc") as shown, progress.counting(shown):
        lls = np.stack([document_log_likelihoods(test, phi, alpha, particles, streams,
                                                 chunk_docs, threads) for phi, alpha in pairs])
    per_doc = logsumexp(lls, axis=0) - np.log(len(pairs))
    n_held = test.n_heldout_tokens
    return {"perplexity_left_to_right": float(np.exp(-per_doc.sum() / n_held)),
            "left_to_right_particles": int(particles), "left_to_right_samples": len(pairs)}
