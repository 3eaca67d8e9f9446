"""CVB and CVB0 on a Dask cluster (docs/cluster.md): each shard, a contiguous block of the
``inference.chunks`` chunks, keeps q(z) (mu) of its document-word pairs and its documents'
expected counts m_dk (with CVB, also their variances v_dk) on one worker between iterations
(:class:`topictk.inference.cluster.Shards`).

Every iteration the driver sends the word and topic fields (m, and v with CVB); each chunk of
a shard updates its documents against its own copy of them, exactly as a chunk does on one
machine (docs/algorithms.md §4.4), and returns its change of the fields; the driver adds the
chunks' changes in chunk order, the one-machine merge operation for operation.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from itertools import pairwise

import numpy as np

from topictk.inference.cluster import (
    ClusterTask,
    Shards,
    ShardSpec,
    StoreRef,
    lost_as,
    nbytes,
    peak_rss,
    worker_threads,
)


@dataclass
class CVBShard:
    """A shard's part of the CVB state: q(z) of its pairs and its documents' fields."""

    mu: np.ndarray     # (pairs of the shard, K) float64
    m_dk: np.ndarray   # (documents of the shard, K) float64
    v_dk: np.ndarray | None = None  # their variances (CVB), None for CVB0


@dataclass(frozen=True)
class IterationSettings:
    """What every shard's iteration reads besides the word fields: the topic fields, the
    priors, where the documents are, and whether the run has one chunk only (whose fields
    then come back whole)."""

    m_k: np.ndarray
    alpha: np.ndarray
    beta: float
    store: StoreRef
    whole: bool
    prior: tuple | None = None      # the seed overlay (prior_ptr, prior_topic, prior_extra)
    v_k: np.ndarray | None = None   # the topics' variance field (CVB), None for CVB0


def _shard_pairs(store: StoreRef, spec: ShardSpec):
    """(indptr from 0, indices, counts) of the training pairs of the shard's documents."""
    train = store.open().train()
    indptr = np.asarray(train.indptr)
    p0, p1 = int(indptr[spec.first_doc]), int(indptr[spec.end_doc])
    return (np.ascontiguousarray(indptr[spec.first_doc:spec.end_doc + 1] - p0, dtype=np.int64),
            np.ascontiguousarray(train.indices[p0:p1], dtype=np.int32),
            np.ascontiguousarray(train.counts[p0:p1], dtype=np.int32))


def encode_rows(change: np.ndarray) -> tuple:
    """A (V, K) change as ("dense", array) or, when fewer bytes, ("rows", the rows that
    changed, their values): a chunk changes only the rows of its words."""
    rows = np.flatnonzero(change.any(axis=1)).astype(np.int32)
    if rows.nbytes + rows.size * change.shape[1] * change.itemsize < change.nbytes:
        return ("rows", rows, change[rows])
    return ("dense", change)


def add_rows(target: np.ndarray, encoded: tuple) -> None:
    """target += the change ``encoded`` by :func:`encode_rows` (the other rows' change is 0:
    adding it would leave them as they are)."""
    if encoded[0] == "dense":
        target += encoded[1]
    else:
        target[encoded[1]] += encoded[2]


def merge_iterations(a: tuple, b: tuple) -> tuple:
    """The iterations of two runs of consecutive shards together: their chunks' changes
    listed in chunk order (the driver adds them in that order), the kernel seconds of each
    shard, the largest peak memory."""
    return a[0] + b[0], a[1] + b[1], max(a[2], b[2])


def cvb_shard_sweep(shard: CVBShard, settings: IterationSettings, m_kw: np.ndarray,
                    *rest):
    """The piece: one CVB or CVB0 iteration of a shard's chunks (runs on a worker), each chunk
    against its own copy of the word and topic fields ``m_kw``, ``settings.m_k`` (with CVB
    also ``v_kw``, the first of ``rest``, and ``settings.v_k``) as they stood at the start of
    the iteration (docs/algorithms.md §4.4); the last of ``rest`` is the shard's spec. Returns
    the shard's new state and (per chunk in order, its changes of m_kw (encoded), m_k, v_kw
    (encoded, None for CVB0) and v_k (None); [kernel seconds]; peak memory). With
    ``settings.whole`` (the run's only chunk) the chunk's fields come back whole."""
    from topictk.inference.variational import _cvb
    *v_kw, spec = rest
    v_kw = v_kw[0] if v_kw else None
    indptr, indices, counts = _shard_pairs(settings.store, spec)
    gaussian = shard.v_dk is not None
    mu, m_dk = shard.mu.copy(), shard.m_dk.copy()
    v_dk = shard.v_dk.copy() if gaussian else None
    m_k, v_k = settings.m_k, settings.v_k
    alpha = np.ascontiguousarray(settings.alpha, dtype=np.float64)
    threads = worker_threads()
    prior = {} if settings.prior is None else dict(zip(
        ("prior_ptr", "prior_topic", "prior_extra"), settings.prior))
    began = time.perf_counter()
    changes = []
    for a, b in pairwise(spec.bounds):
        local_kw, local_k = m_kw.copy(), m_k.copy()
        local_vkw, local_vk = (v_kw.copy(), v_k.copy()) if gaussian else (None, None)
        _cvb.sweep(indptr, indices, counts, mu, m_dk, local_kw, local_k, v_dk, local_vkw,
                   local_vk, alpha, float(settings.beta), np.array([a, b], dtype=np.int64),
                   threads, **prior)
        if settings.whole:
            changes.append((("dense", local_kw), local_k,
                            ("dense", local_vkw) if gaussian else None, local_vk))
            continue
        np.subtract(local_kw, m_kw, out=local_kw)
        change = (encode_rows(local_kw), local_k - m_k, None, None)
        if gaussian:
            np.subtract(local_vkw, v_kw, out=local_vkw)
            change = (*change[:2], encode_rows(local_vkw), local_vk - v_k)
        changes.append(change)
    return CVBShard(mu, m_dk, v_dk), (changes, [time.perf_counter() - began], peak_rss())


def cvb_shard_fields(shard: CVBShard, so_far: tuple | None, shape: tuple[int, int],
                     store: StoreRef, spec: ShardSpec):
    """The fields recomputed from mu (runs on a worker): the shard's m_dk (and v_dk with CVB)
    from scratch, and its pairs added to the word fields ``so_far`` = (m_kw, v_kw or None) of
    the shards before it (None: the first shard). Returns the shard's new state and the word
    fields so far."""
    from topictk.inference.variational import _cvb
    indptr, indices, counts = _shard_pairs(store, spec)
    gaussian = shard.v_dk is not None
    if so_far is None:
        m_kw, v_kw = np.zeros(shape), np.zeros(shape) if gaussian else None
    else:
        m_kw, v_kw = so_far[0].copy(), so_far[1].copy() if gaussian else None
    m_dk = np.empty_like(shard.m_dk)
    v_dk = np.empty_like(shard.v_dk) if gaussian else None
    _cvb.add_fields(indptr, indices, counts, shard.mu, m_dk, m_kw, worker_threads(),
                    v_dk=v_dk, v_kw=v_kw)
    return CVBShard(shard.mu, m_dk, v_dk), (m_kw, v_kw)


class ShardedCVB(Shards):
    """The shards of a CVB or CVB0 run on a cluster: each shard's mu and m_dk (and v_dk) stay
    on its worker; every iteration the driver sends the word and topic fields and adds the
    chunks' changes back in chunk order, as the one-machine sweep merges them
    (docs/cluster.md). ``gaussian``: CVB, with the variance fields."""

    def __init__(self, cluster, store, doc_ptr: np.ndarray, pair_ptr: np.ndarray,
                 bounds: np.ndarray, gaussian: bool = False):
        super().__init__(cluster, store, doc_ptr, bounds)
        self.pair_ptr = pair_ptr        # (D + 1) pair offsets of the documents
        self.gaussian = gaussian

    def _part(self, spec: ShardSpec, mu: np.ndarray, m_dk: np.ndarray,
              v_dk: np.ndarray | None = None) -> CVBShard:
        p0, p1 = int(self.pair_ptr[spec.first_doc]), int(self.pair_ptr[spec.end_doc])
        docs = slice(spec.first_doc, spec.end_doc)
        return CVBShard(mu[p0:p1].copy(), m_dk[docs].copy(),
                        v_dk[docs].copy() if self.gaussian else None)

    def sweep(self, m_kw: np.ndarray, m_k: np.ndarray, alpha: np.ndarray, beta: float,
              prior: tuple | None = None, v_kw: np.ndarray | None = None,
              v_k: np.ndarray | None = None) -> None:
        """One iteration of every shard (``prior``: the seed overlay's CSR arrays, or None);
        ``m_kw`` and ``m_k`` (with CVB also ``v_kw`` and ``v_k``) become the merged fields."""
        whole = self.n_chunks == 1
        changes, seconds, peak = self.step(ClusterTask(
            cvb_shard_sweep, context=IterationSettings(m_k, alpha, beta, self.store, whole,
                                                       prior, v_k),
            shared=(m_kw, v_kw) if self.gaussian else (m_kw,), merge=merge_iterations,
            doing="during an iteration", cut=lambda n: self.specs))
        began = time.perf_counter()
        if whole:
            (kw, k_fields, vkw, vk), = changes
            m_kw[...], m_k[...] = kw[1], k_fields
            if self.gaussian:
                v_kw[...], v_k[...] = vkw[1], vk
        else:
            # start + the chunks' changes in chunk order (docs/algorithms.md §4.4)
            for kw, k_change, vkw, vk_change in changes:
                add_rows(m_kw, kw)
                m_k += k_change
                if self.gaussian:
                    add_rows(v_kw, vkw)
                    v_k += vk_change
        self.cluster.merge_seconds += time.perf_counter() - began
        self.cluster.worker_peak = max(self.cluster.worker_peak, peak)
        self.cluster.add_compute([(0.0, s, 0.0) for s in seconds])

    def refresh(self, m_kw: np.ndarray, m_k: np.ndarray, v_kw: np.ndarray | None = None,
                v_k: np.ndarray | None = None) -> None:
        """The fields recomputed from mu, as on one machine: each shard its m_dk (and v_dk),
        and the word fields summed shard after shard in pair order (worker to worker), the
        topic fields on the driver."""
        from topictk.inference.variational import _cvb
        with lost_as("while the fields were recomputed"):
            partials: list = []      # each shard's task adds to the previous shard's sums
            outs = self.submit_step(cvb_shard_fields, lambda s: (
                partials[-1] if partials else None, m_kw.shape, self.store, self.specs[s]),
                on_each=partials.append)
            words, variances = outs[-1].result()
        m_kw[...] = words
        self.cluster.bytes_received += nbytes(m_kw)
        _cvb.topic_fields(m_kw, m_k)
        if self.gaussian:
            v_kw[...] = variances
            self.cluster.bytes_received += nbytes(v_kw)
            _cvb.topic_fields(v_kw, v_k)

    def gather(self, mu: np.ndarray, m_dk: np.ndarray, v_dk: np.ndarray | None = None) -> None:
        """Copy the shards' mu and m_dk (and v_dk) into ``mu`` and ``m_dk`` (``v_dk``)."""
        if not self.stale:
            return
        for spec, part in zip(self.specs, self._gathered()):
            p0, p1 = int(self.pair_ptr[spec.first_doc]), int(self.pair_ptr[spec.end_doc])
            mu[p0:p1] = part.mu
            m_dk[spec.first_doc:spec.end_doc] = part.m_dk
            if self.gaussian:
                v_dk[spec.first_doc:spec.end_doc] = part.v_dk
        self.stale = False
