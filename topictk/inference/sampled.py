"""What the sampled drivers (gibbs, dmr-sem, sgrld, dmr-sgrld) share: the symmetric starting
alpha, the sample schedule of sweep-based samplers, the Gibbs fold-in of test documents with
the topics frozen (docs/algorithms.md §11.2, kernel
:func:`topictk.inference._gibbs.fold_in_heldout`)
and :class:`SampledDriver`, the template that scores by averaging over saved samples.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from topictk import streams as keys
from topictk.errors import ConfigError
from topictk.inference import _gibbs
from topictk.inference.base import Driver, EvaluationSet, chunk_bounds_by_docs
from topictk.streams import Streams

DEFAULT_ALPHA = 0.1


def resolve_alpha(value, n_topics: int) -> np.ndarray:
    """model.alpha -> (K,) float64; ``auto`` starts from 0.1 and is learnt."""
    start = DEFAULT_ALPHA if value == "auto" else float(value)
    return np.full(n_topics, start, dtype=np.float64)


def fold_in_probabilities(test: EvaluationSet, weights: np.ndarray, phi: np.ndarray,
                          alpha: np.ndarray, evaluation, streams: Streams, pass_index: int,
                          threads: int) -> np.ndarray:
    """Gibbs fold-in of every test document (§11.2) -> p-hat of every held-out entry.

    ``weights`` (V, K) drive the sampler, ``phi`` (V, K) gives the predictive probabilities;
    both are phi-hat for collapsed Gibbs. Streams: (4, pass_index, c) for chunk c of
    ``evaluation.chunk_docs`` documents.
    """
    obs, held = test.observed, test.heldout
    bounds = chunk_bounds_by_docs(obs.n_docs, evaluation.chunk_docs)
    chunk_streams = [streams.derived(keys.eval_key(pass_index, c)) for c in range(bounds.size - 1)]
    out = np.zeros(held.indices.size, dtype=np.float64)
    _gibbs.fold_in_heldout(
        np.ascontiguousarray(obs.doc_ptr), np.ascontiguousarray(obs.words),
        np.ascontiguousarray(held.indptr), np.ascontiguousarray(held.indices),
        np.ascontiguousarray(weights, dtype=np.float64),
        np.ascontiguousarray(phi, dtype=np.float64),
        np.ascontiguousarray(np.atleast_2d(alpha), dtype=np.float64),
        int(evaluation.fold_in_sweeps), int(evaluation.fold_in_burn_in), bounds, chunk_streams,
        out, threads)
    return out


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

    def averaged_fold_in(self, state: Any, samples: list[dict] | None, docs: EvaluationSet,
                         documents: str, pass_index: int) -> np.ndarray:
        """p-hat of every held-out entry of ``docs``, averaged over the samples."""
        samples = self.scored_samples(state, samples)
        total = np.zeros(docs.heldout.indices.size)
        for s in samples:
            phi = np.ascontiguousarray(self.sample_phi(state, s))
            prior = self.sample_prior(state, s, documents)
            if self.cluster is not None and np.ndim(prior) == 1:
                from topictk.inference.cluster import cluster_fold_in
                total += cluster_fold_in(self.cluster, self.store, documents, phi, phi, prior,
                                         self.config.evaluation, self.streams.seed, pass_index)
            else:
                total += fold_in_probabilities(docs, phi, phi, prior, self.config.evaluation,
                                               self.streams, pass_index, self.threads)
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
