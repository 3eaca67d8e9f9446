"""What the sampled drivers (gibbs, dmr-sem, sgrld, dmr-sgrld) share: the symmetric starting
alpha, the sample schedule of sweep-based samplers, scoring by the Gibbs fold-in of test
documents with the topics frozen (docs/algorithms.md §11.2,
:func:`topictk.inference.base.gibbs_fold_in`) and :class:`SampledDriver`, the template that
scores by averaging over saved samples.
"""
from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise
from types import SimpleNamespace
from typing import Any

import numpy as np

from topictk import progress
from topictk.corpus.store import Documents
from topictk.errors import ConfigError
from topictk.inference.base import (
    Driver,
    EvaluationSet,
    FoldInPlan,
    chunk_bounds_by_docs,
    chunk_bounds_by_tokens,
    fixed_point_fold_in,
    fixed_point_settings,
    gibbs_fold_in,
    row_range,
    take_documents,
)
from topictk.inference.cluster import (
    ClusterTask,
    StoreRef,
    concatenated,
    map_in_order,
    map_merge,
    worker_threads,
)
from topictk.inference.perplexity import mixture_probabilities
from topictk.streams import Streams, eval_key


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


def document_range(docs: Documents, first: int, end: int) -> Documents:
    """Documents ``first``..``end - 1`` of ``docs``, as views with offsets from 0."""
    doc_ptr = words = None
    if docs.doc_ptr is not None:
        doc_ptr, words = row_range(docs.doc_ptr, first, end, docs.words)
    indptr, indices, counts = row_range(docs.indptr, first, end, docs.indices, docs.counts)
    return Documents(doc_ptr=doc_ptr, words=words, indptr=indptr, indices=indices,
                     counts=counts)


def counted_fold_in(driver: Driver, state: Any, documents: Documents, plan: FoldInPlan, *,
                    prior: np.ndarray, sample: dict | None) -> np.ndarray:
    """``driver.fold_in`` of ``documents`` by ``plan``, counted on the progress bar of the
    caller (:func:`topictk.progress.counting`): then a few chunks at a time, each chunk with
    its own stream as in one call, so theta-hat is the same."""
    n_chunks = plan.bounds.size - 1
    groups = progress.chunk_groups(n_chunks, plan.threads)
    if len(groups) == 1:
        theta = driver.fold_in(state, documents, plan, prior=prior, sample=sample)
        progress.count(n_chunks)
        return theta
    per_doc = np.ndim(prior) == 2 and np.shape(prior)[0] > 1
    parts = []
    for c0, c1 in groups:
        first, end = int(plan.bounds[c0]), int(plan.bounds[c1])
        part = FoldInPlan(plan.sweeps, plan.burn_in, plan.bounds[c0:c1 + 1] - first,
                          plan.streams[c0:c1], plan.threads,
                          None if plan.active is None else plan.active[first:end])
        with progress.counting(None):
            parts.append(driver.fold_in(state, document_range(documents, first, end), part,
                                        prior=prior[first:end] if per_doc else prior,
                                        sample=sample))
        progress.count(c1 - c0)
    return np.concatenate(parts)


def _fold_in_settings(evaluation, docs: EvaluationSet) -> SimpleNamespace:
    """``evaluation``'s fold-in keys, with the sweeps of ``docs.fold_in`` when it has them (a
    cluster reads the documents ``docs.rows`` from the store, so only the sweeps can
    differ)."""
    sweeps, burn_in = docs.fold_in or (evaluation.fold_in_sweeps, evaluation.fold_in_burn_in)
    return SimpleNamespace(chunk_docs=evaluation.chunk_docs, fold_in_sweeps=sweeps,
                           fold_in_burn_in=burn_in)


# ------------------------------------------------------------------ fold-ins on a cluster
FOLD_IN_SHARDS_PER_WORKER = 2      # more pieces than workers: a slow one holds up less


def fold_in_documents(store, part: str, rows: np.ndarray | None = None):
    """(observed tokens, held-out entries) of the test documents or, for Protocol B, of the
    training documents; only the documents ``rows`` when given (the in-training curve's)."""
    if part == "test":
        observed, heldout = store.test_observed(), store.test_heldout()
    else:
        observed, heldout = store.train(), store.train_heldout()
    if rows is None:
        return observed, heldout
    return take_documents(observed, rows), take_documents(heldout, rows)


@dataclass(frozen=True)
class FoldInJob:
    """An evaluation fold-in on the cluster as each of its pieces reads it: the documents
    (``part``: "test" or "train", only ``rows`` when given) in the store, the prior (one row
    for every document; None: each block brings its documents' rows), the sweeps, and the
    seed and pass that key the chunks' eval streams."""

    store: StoreRef
    part: str
    alpha: np.ndarray | None
    sweeps: int
    burn_in: int
    seed: int
    pass_index: int
    rows: np.ndarray | None = None


def fold_in_piece(job: FoldInJob, weights: np.ndarray, phi: np.ndarray,
                  block: tuple[np.ndarray, int, np.ndarray | None]) -> np.ndarray:
    """The cluster piece: the Gibbs fold-in of a block of chunks of documents (runs on a
    worker; ``block``: the chunks' boundaries, the first chunk's index and, for a prior per
    document, the block's rows of it), p-hat of their held-out entries, each chunk with its
    own eval stream, as in the one-machine fold-in."""
    bounds, first_chunk, rows = block
    observed, heldout = fold_in_documents(job.store.open(), job.part, job.rows)
    a, b = int(bounds[0]), int(bounds[-1])
    obs_ptr, held_ptr = np.asarray(observed.doc_ptr), np.asarray(heldout.indptr)
    o0, o1, h0, h1 = int(obs_ptr[a]), int(obs_ptr[b]), int(held_ptr[a]), int(held_ptr[b])
    streams = Streams(job.seed)
    held_part = held_ptr[a:b + 1] - h0
    plan = FoldInPlan(int(job.sweeps), int(job.burn_in), np.asarray(bounds - a, dtype=np.int64),
                      [streams.derived(eval_key(job.pass_index, first_chunk + c))
                       for c in range(bounds.size - 1)], worker_threads(),
                      np.diff(held_part) > 0)
    theta = gibbs_fold_in(weights, job.alpha if rows is None else rows,
                          obs_ptr[a:b + 1] - o0, observed.words[o0:o1], plan)
    held = Documents(doc_ptr=None, words=None, indptr=held_part,
                     indices=heldout.indices[h0:h1], counts=heldout.counts[h0:h1])
    return mixture_probabilities(held, theta, phi, worker_threads())


def cluster_fold_in(driver: Driver, docs: EvaluationSet, part: str, topics: tuple,
                    alpha: np.ndarray, pass_index: int) -> np.ndarray:
    """:func:`fold_in_probabilities` on the driver's cluster, ``topics`` the (weights, phi) of
    the fold-in and of the mixture, ``alpha`` the prior, (K,) or a row per document (D, K):
    the chunks of ``evaluation.chunk_docs`` documents (of the documents ``docs.rows`` only,
    when given) cut into contiguous blocks, one piece each, with the topics sent to each worker
    once and each block with its documents' rows of a prior per document; the blocks' results
    put together in order. Every chunk is folded in with its own stream, so the numbers are
    the one-machine ones."""
    settings = _fold_in_settings(driver.config.evaluation, docs)
    observed, heldout = fold_in_documents(driver.store, part, docs.rows)
    obs_ptr = np.asarray(observed.doc_ptr)
    bounds = chunk_bounds_by_docs(obs_ptr.size - 1, settings.chunk_docs)
    n_chunks = bounds.size - 1
    if n_chunks == 0 or int(np.asarray(heldout.indptr)[-1]) == 0:
        return np.zeros(int(np.asarray(heldout.indptr)[-1]), dtype=np.float64)

    per_document = np.ndim(alpha) == 2 and np.shape(alpha)[0] > 1

    def rows_of(a: int, b: int) -> np.ndarray | None:
        """The prior's rows of the documents of chunks [a, b), for a prior per document."""
        if not per_document:
            return None
        return np.ascontiguousarray(alpha[bounds[a]:bounds[b]], dtype=np.float64)

    def cut(n_workers: int) -> list:
        cuts = chunk_bounds_by_tokens(np.ascontiguousarray(obs_ptr[bounds], dtype=np.int64),
                                      min(n_chunks, FOLD_IN_SHARDS_PER_WORKER * n_workers))
        return [(bounds[a:b + 1], int(a), rows_of(a, b)) for a, b in pairwise(cuts) if b > a]

    job = FoldInJob(StoreRef.of(driver.store), part, None if per_document else alpha,
                    settings.fold_in_sweeps, settings.fold_in_burn_in, driver.streams.seed,
                    pass_index, docs.rows)
    weights, phi = (np.ascontiguousarray(t, dtype=np.float64) for t in topics)
    return map_merge(driver.cluster, ClusterTask(
        fold_in_piece, cut, context=job, shared=(weights, phi), merge=concatenated,
        doing="during the fold-in", again="folding in again"))


@dataclass(frozen=True)
class InferJob:
    """``topictk infer``'s fold-in as each block reads it: the prior (None: each block brings
    its documents' rows), the sweeps and the seed that keys the chunks' streams."""

    alpha: np.ndarray | None
    sweeps: int
    burn_in: int
    seed: int


@dataclass(frozen=True)
class InferBlock:
    """A block of new documents: the input's index of its first document, its tokens, the
    input's index of its first chunk (which keys the chunks' streams) and, for a prior per
    document, its documents' rows of it."""

    start: int
    doc_ptr: np.ndarray
    words: np.ndarray
    first_chunk: int
    prior: np.ndarray | None = None

    @property
    def nbytes(self) -> int:
        return (self.doc_ptr.nbytes + self.words.nbytes
                + (0 if self.prior is None else self.prior.nbytes))

    @property
    def first_document(self) -> int:
        """The input's number of its first document, counted from 1 (in messages)."""
        return self.start + 1


def infer_piece(job: InferJob, topic_word: np.ndarray, block: InferBlock) -> np.ndarray:
    """The cluster piece of ``infer``: topic proportions of a block of new documents (on a
    worker, or here when its worker was lost)."""
    plan = FoldInPlan.for_infer(block.doc_ptr.size - 1, sweeps=job.sweeps,
                                burn_in=job.burn_in, seed=job.seed, threads=worker_threads(),
                                first_chunk=block.first_chunk)
    return gibbs_fold_in(topic_word.T, job.alpha if block.prior is None else block.prior,
                         block.doc_ptr, block.words, plan)


def cluster_infer_blocks(cluster, topic_word: np.ndarray, alpha: np.ndarray | None, pieces, *,
                         sweeps: int, burn_in: int, seed: int):
    """(first document, proportions) of every block of ``pieces`` (first document, doc_ptr,
    words, first chunk, the documents' prior rows or None for ``alpha``), folded in on the
    workers, in input order, with a few blocks per worker in flight. The streams are keyed by
    each block's first chunk, so the numbers are those of one machine; a block whose worker is
    lost is folded in here instead."""
    blocks = (InferBlock(start, np.ascontiguousarray(ptr, dtype=np.int64),
                         np.ascontiguousarray(words, dtype=np.int32), first_chunk,
                         None if prior is None else np.ascontiguousarray(prior,
                                                                         dtype=np.float64))
              for start, ptr, words, first_chunk, prior in pieces)
    task = ClusterTask(infer_piece, cut=None, context=InferJob(alpha, sweeps, burn_in, seed),
                       shared=(np.ascontiguousarray(topic_word, dtype=np.float64),),
                       doing="during infer",
                       again="folding the block of document {part.first_document} in here")
    for block, theta in map_in_order(cluster, task, blocks):
        yield block.start, theta


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
        fixed = fixed_point_settings(self.config)
        if fixed is not None:
            return fixed_point_fold_in(self.sample_phi(state, sample), prior, documents,
                                       plan.active, tol=fixed[0], max_iterations=fixed[1],
                                       threads=plan.threads)
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
            if self.cluster is not None and fixed_point_settings(self.config) is None:
                total += cluster_fold_in(self, docs, documents, (phi, phi), prior, pass_index)
            else:
                theta = counted_fold_in(self, state, docs.observed,
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
