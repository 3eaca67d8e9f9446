"""Scoring topics that do not come from a topictk run (another library's model, a hand-made
phi) on a store's held-out tokens, by the estimator ``topictk evaluate`` uses for a
collapsed Gibbs run's point estimate: a fold-in of every test document's observed part with the
topics fixed (the Gibbs one, or the fixed-point one with ``fold_in="fixed-point"``), then
document completion of its held-out part (docs/algorithms.md §11.2, docs/evaluate.md)."""
from __future__ import annotations

import numpy as np

from topictk.config.loader import Section
from topictk.config.schema import EVALUATION
from topictk.errors import UsageError
from topictk.evaluation.coherence import topic_quality
from topictk.inference.base import (
    FIXED_POINT,
    EvaluationSet,
    FoldInPlan,
    fixed_point_fold_in,
)
from topictk.inference.perplexity import (
    mixture_probabilities,
    perplexity_by_slice,
    perplexity_from_probabilities,
)
from topictk.inference.sampled import fold_in_probabilities, heldout_documents
from topictk.streams import Streams


def _check_sample(phi, alpha, V: int) -> tuple[np.ndarray, np.ndarray]:
    phi = np.asarray(phi, dtype=np.float64)
    if phi.ndim != 2 or phi.shape[1] != V:
        raise UsageError(f"topic_word must be (K, V) with V = {V} (the store's vocabulary); "
                         f"got shape {phi.shape}")
    if not np.all(np.isfinite(phi)) or np.any(phi < 0):
        raise UsageError("topic_word must be finite and non-negative")
    K = phi.shape[0]
    alpha = np.asarray(alpha, dtype=np.float64)
    if alpha.ndim == 0:
        alpha = np.full(K, float(alpha))
    if alpha.shape[-1] != K or alpha.ndim > 2:
        raise UsageError(f"alpha must be a number, (K,) or (D, K) with K = {K}; got shape "
                         f"{alpha.shape}")
    sums = phi.sum(axis=1, keepdims=True)
    if not np.allclose(sums, 1.0, rtol=0, atol=1e-12):    # rows already on the simplex are kept
        phi = phi / sums                                  # bit for bit
    return phi, alpha


FOLD_INS = ("gibbs", FIXED_POINT)


def score_topic_word(store, topic_word, alpha, *, sweeps: int = 50, burn_in: int = 25,
                     seed: int = 0, threads: int = 1, coherence: bool = False,
                     fold_in: str = "gibbs", tol: float | None = None,
                     max_iterations: int | None = None) -> dict:
    """Held-out perplexity of ``topic_word`` (K, V) on ``store`` with the document prior
    ``alpha`` (a number, (K,), or (D_test, K) for a prior per test document). A list of
    topic-word arrays (with a list of priors, or one for all) is a set of posterior samples:
    the held-out probabilities are averaged over them, as ``topictk evaluate`` averages a
    run's saved samples. ``coherence``: also UMass, NPMI and diversity of the (first) topics
    on the training documents. ``fold_in``: the estimator of theta, ``gibbs`` (``sweeps``,
    ``burn_in``, ``seed``) or ``fixed-point`` (``tol``, ``max_iterations``, by default those
    of ``evaluation.fold_in_tol`` and ``fold_in_max_iterations``); the result names it as
    ``estimator``."""
    if fold_in not in FOLD_INS:
        raise UsageError(f"fold_in must be one of {', '.join(FOLD_INS)}; got {fold_in!r}")
    tol = float(EVALUATION["fold_in_tol"].default if tol is None else tol)
    max_iterations = int(EVALUATION["fold_in_max_iterations"].default
                         if max_iterations is None else max_iterations)
    if not tol > 0 or max_iterations < 1:
        raise UsageError(f"tol must be > 0 and max_iterations >= 1; got tol = {tol}, "
                         f"max_iterations = {max_iterations}")
    if burn_in < 0 or sweeps <= burn_in:
        raise UsageError(f"sweeps must be larger than burn_in (>= 0); got sweeps = {sweeps}, "
                         f"burn_in = {burn_in}")
    samples = list(topic_word) if isinstance(topic_word, (list, tuple)) else [topic_word]
    if not samples:
        raise UsageError("no topic_word given")
    priors = list(alpha) if isinstance(alpha, (list, tuple)) else [alpha] * len(samples)
    if len(priors) != len(samples):
        raise UsageError(f"{len(priors)} priors for {len(samples)} topic_word samples; give one "
                         f"per sample, or one for all")
    checked = [_check_sample(phi, a, store.n_words) for phi, a in zip(samples, priors)]
    test = EvaluationSet.from_store(store)
    evaluation = Section({**{k: o.default for k, o in EVALUATION.items()},
                          "fold_in_sweeps": int(sweeps), "fold_in_burn_in": int(burn_in)})
    result: dict = {"heldout_tokens": test.n_heldout_tokens, "samples": len(checked),
                    "estimator": fold_in}
    if test.n_heldout_tokens:
        total = np.zeros(test.heldout.indices.size)
        for phi, a in checked:
            weights = np.ascontiguousarray(phi.T)
            if fold_in == FIXED_POINT:
                theta = fixed_point_fold_in(weights, np.atleast_2d(a), test.observed,
                                            heldout_documents(test), tol=tol,
                                            max_iterations=max_iterations,
                                            threads=int(threads))
                total += mixture_probabilities(test.heldout, theta, weights, int(threads))
                continue
            plan = FoldInPlan.for_evaluation(test.observed.n_docs, evaluation, Streams(seed), 0,
                                             int(threads), heldout_documents(test))
            total += fold_in_probabilities(test, weights, weights, a, plan)
        probs = total if len(checked) == 1 else total / len(checked)
        ppl, floored = perplexity_from_probabilities(probs, test.heldout.counts)
        result.update(perplexity=ppl, floored_tokens=floored)
    else:
        result["perplexity"] = None
    if coherence:
        train = store.train()
        result.update(topic_quality(checked[0][0], train.indptr, train.indices))
    return result


def score_slice_topics(store, slice_topic_word, slice_means, eta_var: float, *,
                       sweeps: int = 50, burn_in: int = 25, seed: int = 0,
                       threads: int = 1) -> dict:
    """Held-out perplexity, overall and by time slice, of a dynamic topic model's per-slice
    topics (T, K, V) and slice means (T, K) on ``store``, by the dynamic topic model's own
    fold-in (:func:`topictk.inference.dtm.driver.fold_in_documents`) with the document
    variance ``eta_var``; test documents of a slice beyond T take the last slice's topics."""
    from topictk.inference.dtm.driver import fold_in_documents, mixture_by_slice, slices_of

    versions = np.asarray(slice_topic_word, dtype=np.float64)
    means = np.asarray(slice_means, dtype=np.float64)
    if versions.ndim != 3 or versions.shape[2] != store.n_words:
        raise UsageError(f"slice_topic_word must be (T, K, V) with V = {store.n_words}, the "
                         f"store's words; got shape {versions.shape}")
    T, K, _ = versions.shape
    if means.shape != (T, K):
        raise UsageError(f"slice_means must be (T, K) = ({T}, {K}); got shape {means.shape}")
    if not (np.all(np.isfinite(versions)) and np.all(versions >= 0)
            and np.all(versions.sum(axis=2) > 0) and np.all(np.isfinite(means))):
        raise UsageError("slice_topic_word must be finite, non-negative, every row with some "
                         "weight, and slice_means finite")
    if not eta_var > 0:
        raise UsageError(f"eta_var must be > 0; got {eta_var}")
    if burn_in < 0 or sweeps <= burn_in:
        raise UsageError(f"sweeps must be larger than burn_in (>= 0); got sweeps = {sweeps}, "
                         f"burn_in = {burn_in}")
    test_slices = np.minimum(slices_of(store, "test"), T - 1).astype(np.int32)
    prob = np.ascontiguousarray((versions / versions.sum(axis=2, keepdims=True))
                                .transpose(0, 2, 1))
    test = EvaluationSet.from_store(store)
    result: dict = {"heldout_tokens": test.n_heldout_tokens, "estimator": "dtm"}
    if not test.n_heldout_tokens:
        result["perplexity"] = None
        return result
    evaluation = Section({**{k: o.default for k, o in EVALUATION.items()},
                          "fold_in_sweeps": int(sweeps), "fold_in_burn_in": int(burn_in)})
    plan = FoldInPlan.for_evaluation(test.observed.n_docs, evaluation, Streams(seed), 0,
                                     int(threads), heldout_documents(test))
    theta = fold_in_documents(prob, means, float(eta_var), test.observed, test_slices, plan)
    probs = mixture_by_slice(test.heldout, theta, prob, test_slices)
    ppl, floored = perplexity_from_probabilities(probs, test.heldout.counts)
    by_slice = perplexity_by_slice(probs, test.heldout, store.slices("test"), store.time_slices)
    result.update(perplexity=ppl, floored_tokens=floored, perplexity_by_slice=by_slice)
    return result
