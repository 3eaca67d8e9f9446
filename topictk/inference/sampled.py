"""What the sampled drivers (gibbs, dmr-sem, sgrld, dmr-sgrld) share: the symmetric starting
alpha, the sample schedule of sweep-based samplers, scoring by the Gibbs fold-in of test
documents with the topics frozen (docs/algorithms.md §11.2,
:func:`topictk.inference.base.gibbs_fold_in`) and :class:`SampledDriver`, the template that
scores by averaging over saved samples.
"""
from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np

from topictk.errors import ConfigError
from topictk.inference.base import Driver, EvaluationSet, FoldInPlan, gibbs_fold_in
from topictk.inference.perplexity import mixture_probabilities

DEFAULT_ALPHA = 0.1


def resolve_alpha(value, n_topics: int) -> np.ndarray:
    """model.alpha -> (K,) float64; ``auto`` starts from 0.1 and is learnt."""
    start = DEFAULT_ALPHA if value == "auto" else float(value)
    return np.full(n_topics, start, dtype=np.float64)


def heldout_documents(docs: EvaluationSet) -> np.ndarray:
    """(D,) True for the documents of ``docs`` with held-out entries: the only ones a scoring
    fold-in samples."""
    return np.diff(np.asarray(docs.heldout.indptr)) > 0


def fold_in_probabilities(test: EvaluationSet, weights: np.ndarray, phi: np.ndarray,
                          alpha: np.ndarray, plan: FoldInPlan) -> np.ndarray:
    """p-hat of every held-out entry of ``test`` (§11.2): theta-hat of the Gibbs fold-in of
    its documents with sampling weights ``weights`` (V, K), mixed with the topics ``phi``
    (V, K); both are phi-hat for collapsed Gibbs."""
    obs = test.observed
    theta = gibbs_fold_in(weights, alpha, obs.doc_ptr, obs.words, plan)
    return mixture_probabilities(test.heldout, theta, phi, plan.threads)


def evaluation_plan(driver: Driver, docs: EvaluationSet, pass_index: int) -> FoldInPlan:
    """The fold-in plan of scoring ``docs`` in evaluation pass ``pass_index``: the
    ``evaluation`` section's sweeps (or those of ``docs.fold_in``) and chunks, only documents
    with held-out entries."""
    return FoldInPlan.for_evaluation(docs.observed.n_docs,
                                     _fold_in_settings(driver.config.evaluation, docs),
                                     driver.streams, pass_index, driver.threads,
                                     heldout_documents(docs))


def _fold_in_settings(evaluation, docs: EvaluationSet) -> SimpleNamespace:
    """``evaluation``'s fold-in keys, with the sweeps of ``docs.fold_in`` when it has them (a
    cluster reads the documents ``docs.rows`` from the store, so only the sweeps can
    differ)."""
    sweeps, burn_in = docs.fold_in or (evaluation.fold_in_sweeps, evaluation.fold_in_burn_in)
    return SimpleNamespace(chunk_docs=evaluation.chunk_docs, fold_in_sweeps=sweeps,
                           fold_in_burn_in=burn_in)


def resolve_sample_schedule(inf: dict, where: str) -> None:
    """Defaults and check of a sweep-based sampler's samples: burn-in half the iterations,
    then 10 samples (Gibbs, dmr-sem)."""
    iterations = inf["iterations"]
    if inf["burn_in"] is None:
        inf["burn_in"] = iterations // 2
    if inf["burn_in"] >= iterations:
        raise ConfigError(f"inference.burn_in must be < inference.iterations ({iterations}); "
                          f"got {inf['burn_in']} ({where})")
    if inf["thin"] is None:
        inf["thin"] = max(1, (iterations - inf["burn_in"]) // 10)


TRAIN_HELDOUT_PASS = 2**31 - 1   # eval-stream pass index of Protocol B scoring


class SampledDriver(Driver):
    """Template of the drivers that keep posterior samples and score by averaging over them
    (§11.2): the held-out tokens of the test documents by a Gibbs fold-in with each sample's
    topics, Protocol B by the same fold-in on the training documents' observed tokens, the
    left-to-right estimator with each sample's topics. A driver gives one sample's topics and
    document prior (:meth:`sample_phi`, :meth:`sample_prior`); with no saved sample the current
    state counts as one."""

    def sample_phi(self, state: Any, sample: dict[str, np.ndarray]) -> np.ndarray:
        """phi-hat (V, K) of one saved sample."""
        raise NotImplementedError

    def sample_prior(self, state: Any, sample: dict[str, np.ndarray],
                     documents: str) -> np.ndarray:
        """The Dirichlet prior of theta under one sample: (K,), or (D, K) for the ``"test"``
        or ``"train"`` documents when it depends on them."""
        raise NotImplementedError

    def scored_samples(self, state: Any, samples: list[dict] | None) -> list[dict]:
        return samples or [self.sample(state)]

    def fold_in(self, state: Any, documents, plan: FoldInPlan, *, prior=None,
                sample: dict | None = None) -> np.ndarray:
        """theta-hat by the Gibbs fold-in with the topics of ``sample`` (:meth:`sample_phi`),
        or of the current state when None."""
        if sample is None:
            return super().fold_in(state, documents, plan, prior=prior)
        if prior is None:
            raise ValueError("a fold-in with a saved sample needs the documents' prior")
        return gibbs_fold_in(self.sample_phi(state, sample), prior, documents.doc_ptr,
                             documents.words, plan)

    def averaged_fold_in(self, state: Any, samples: list[dict] | None, docs: EvaluationSet,
                         documents: str, pass_index: int) -> np.ndarray:
        """p-hat of every held-out entry of ``docs``: :meth:`fold_in` with each sample's
        topics and prior, mixed with those topics, averaged over the samples."""
        samples = self.scored_samples(state, samples)
        total = np.zeros(docs.heldout.indices.size)
        for s in samples:
            phi = np.ascontiguousarray(self.sample_phi(state, s))
            prior = self.sample_prior(state, s, documents)
            if self.cluster is not None and np.ndim(prior) == 1:
                from topictk.inference.cluster import cluster_fold_in
                total += cluster_fold_in(self.cluster, self.store, documents, phi, phi, prior,
                                         _fold_in_settings(self.config.evaluation, docs),
                                         self.streams.seed, pass_index, docs.rows)
            else:
                theta = self.fold_in(state, docs.observed,
                                     evaluation_plan(self, docs, pass_index), prior=prior,
                                     sample=s)
                total += mixture_probabilities(docs.heldout, theta, phi, self.threads)
        return total / len(samples)

    def heldout_probabilities(self, state: Any, samples, test: EvaluationSet,
                              pass_index: int) -> np.ndarray:
        return self.averaged_fold_in(state, samples, test, "test", pass_index)

    def train_heldout_probabilities(self, state: Any, samples, heldout) -> np.ndarray:
        """Protocol B (§11.2): each training document's theta-hat comes from a fold-in of its
        observed tokens with the sample's topics (what a mini-batch local step computes)."""
        train = EvaluationSet(observed=self.store.train(), heldout=heldout)
        return self.averaged_fold_in(state, samples, train, "train", TRAIN_HELDOUT_PASS)

    def predictive_topics(self, state: Any, samples, test: EvaluationSet):
        return [(self.sample_phi(state, s), self.sample_prior(state, s, "test"))
                for s in self.scored_samples(state, samples)]
