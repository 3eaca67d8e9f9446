"""The Gibbs family on a Dask cluster (docs/cluster.md): AD-LDA sweeps (docs/algorithms.md
§2.4) with each shard, a contiguous block of the ``inference.chunks`` chunks, on one worker.

The shard's assignments z and document-topic counts stay in that worker's process between
sweeps (:class:`topictk.inference.cluster.Shards`). Every sweep the driver broadcasts the
word-topic counts; each shard sweeps its chunks against that snapshot with the chunks' own
streams (whose states go out with the task and come back with its result) and returns its
count changes, which the driver adds in shard order. Each chunk sees the snapshot and its own
stream, exactly as in the one-machine sweep, so the run is that of ``inference.chunks`` chunks
on one machine, bit for bit, whatever the number of workers.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from topictk.inference.cluster import (
    ClusterTask,
    Shards,
    ShardSpec,
    StoreRef,
    peak_rss,
    worker_threads,
)


@dataclass
class GibbsShard:
    """A shard's part of the Gibbs state: the topics of its tokens and its documents' counts."""

    z: np.ndarray      # (tokens of the shard,) int32
    ndk: np.ndarray    # (documents of the shard, K) int32


@dataclass(frozen=True)
class SweepSettings:
    """What every shard's sweep reads besides the counts: the topic totals and priors, the
    sampler chosen by the driver and where the documents are."""

    nk: np.ndarray
    alpha: np.ndarray
    beta: float
    sparse: bool
    store: StoreRef
    overlay: tuple | None = None    # the seed words' prior (prior_ptr, prior_topic, prior_extra)


@dataclass
class SweepResult:
    """What the shards' sweeps return, in shard order: the count changes (encoded), the
    chunk streams' states, the rounding fallbacks, the kernel seconds (lists, sweep, change)
    and peak memory of each shard."""

    changes: list
    nk_change: np.ndarray
    stream_states: list
    fallbacks: int
    seconds: list
    peak: int


def encode_change(change: np.ndarray) -> tuple:
    """An integer count change as ("dense", array) or, when fewer bytes, ("sparse", flat
    indices, values)."""
    flat = change.reshape(-1)
    where = np.flatnonzero(flat)
    index = where.astype(np.int32) if flat.size < 2**31 else where
    if index.nbytes + where.size * flat.itemsize < flat.nbytes:
        return ("sparse", index, flat[where])
    return ("dense", change)


def add_change(target: np.ndarray, encoded: tuple) -> None:
    """target += the change ``encoded`` by :func:`encode_change`."""
    if encoded[0] == "dense":
        target += encoded[1]
    else:                       # the indices are distinct: no need for np.add.at
        flat = target.reshape(-1)
        flat[encoded[1]] += encoded[2]


def merge_sweeps(a: SweepResult, b: SweepResult) -> SweepResult:
    """The sweeps of two runs of consecutive shards together: integer changes, added in any
    order to the same numbers."""
    return SweepResult(a.changes + b.changes, a.nk_change + b.nk_change,
                       a.stream_states + b.stream_states, a.fallbacks + b.fallbacks,
                       a.seconds + b.seconds, max(a.peak, b.peak))


def _sparse_lists(nkw: np.ndarray, word_freq: np.ndarray, sparse: bool):
    """The SparseLDA word lists (ptr, entries, lengths, bits) of the counts ``nkw``, as the
    driver's sweep builds them (empty for the dense sampler)."""
    from topictk.inference.gibbs import _gibbs
    V, K = nkw.shape
    bits = _gibbs.topic_bits(K)
    ptr = np.zeros(V + 1, dtype=np.int64)
    np.cumsum(np.minimum(word_freq, K), out=ptr[1:])
    entries = np.zeros(max(1, int(ptr[-1])) if sparse else 1, dtype=np.int64)
    lengths = np.zeros(V, dtype=np.int32)
    if sparse:      # the lists are a function of the counts: those of the driver's sweep
        _gibbs.build_word_topic_lists(nkw, ptr, entries, lengths, bits, worker_threads())
    return ptr, entries, lengths, bits


def _streams(states: list[dict]) -> list:
    streams = []
    for state in states:
        bg = np.random.PCG64()
        bg.state = state
        streams.append(bg)
    return streams


def gibbs_shard_sweep(shard: GibbsShard, settings: SweepSettings, snapshot: np.ndarray,
                      part: tuple[ShardSpec, list[dict]]):
    """The piece: one sweep of a shard's chunks against the word-topic counts ``snapshot``
    (runs on a worker), ``part`` the shard and its chunks' stream states. Returns the shard's
    new state and its :class:`SweepResult`."""
    from topictk.inference.gibbs import _gibbs
    from topictk.inference.gibbs.counts import overlay_kwargs
    spec, states = part
    doc_ptr_all, words_all, word_freq = settings.store.training_documents()
    first = int(doc_ptr_all[spec.first_doc])
    doc_ptr = np.ascontiguousarray(doc_ptr_all[spec.first_doc:spec.end_doc + 1] - first,
                                   dtype=np.int64)
    words = words_all[first:int(doc_ptr_all[spec.end_doc])]
    z, ndk = shard.z.copy(), shard.ndk.copy()
    nkw = np.array(snapshot, dtype=np.int32, order="C")
    nk_after = np.array(settings.nk, dtype=np.int64)
    streams = _streams(states)
    began = time.perf_counter()
    ptr, entries, lengths, bits = _sparse_lists(nkw, word_freq, settings.sparse)
    listed = time.perf_counter()
    fallbacks = _gibbs.gibbs_sweep(doc_ptr, words, z, ndk, nkw, nk_after,
                                   np.ascontiguousarray(settings.alpha, dtype=np.float64),
                                   float(settings.beta),
                                   np.ascontiguousarray(spec.bounds, dtype=np.int64), streams,
                                   bool(settings.sparse), ptr, entries, lengths, bits,
                                   worker_threads(), **overlay_kwargs(settings.overlay))
    swept = time.perf_counter()
    del entries, lengths
    np.subtract(nkw, snapshot, out=nkw)
    change = encode_change(nkw)
    seconds = (listed - began, swept - listed, time.perf_counter() - swept)
    return GibbsShard(z, ndk), SweepResult([change], nk_after - settings.nk,
                                           [bg.state for bg in streams], int(fallbacks),
                                           [seconds], peak_rss())


class ShardedGibbs(Shards):
    """The shards of a Gibbs chain on a cluster; see the module docstring."""

    def _part(self, spec: ShardSpec, z: np.ndarray, ndk: np.ndarray) -> GibbsShard:
        t0, t1 = self._token_range(spec)
        return GibbsShard(z[t0:t1].copy(), ndk[spec.first_doc:spec.end_doc].copy())

    def sweep(self, nkw: np.ndarray, nk: np.ndarray, alpha: np.ndarray, beta: float,
              sparse: bool, chunk_streams: list, overlay=None) -> int:
        """One AD-LDA sweep of every shard against ``nkw``; the shards' changes are added to
        ``nkw`` and ``nk`` in shard order and the chunk streams advanced. Returns the rounding
        fallbacks."""
        done = self.step(ClusterTask(
            gibbs_shard_sweep, context=SweepSettings(nk, alpha, beta, sparse, self.store,
                                                   overlay),
            shared=(nkw,), merge=merge_sweeps, doing="during a sweep",
            cut=lambda n: [(spec, [chunk_streams[c].state for c in spec.chunks])
                           for spec in self.specs]))
        self.cluster.add_compute(done.seconds)
        self.cluster.worker_peak = max(self.cluster.worker_peak, done.peak)
        for change in done.changes:
            add_change(nkw, change)
        nk += done.nk_change
        for bg, state in zip(chunk_streams, done.stream_states):
            bg.state = state
        return done.fallbacks

    def gather(self, z: np.ndarray, ndk: np.ndarray) -> None:
        """Copy the shards' assignments and document-topic counts into ``z`` and ``ndk``."""
        if not self.stale:
            return
        for spec, part in zip(self.specs, self._gathered()):
            t0, t1 = self._token_range(spec)
            z[t0:t1] = part.z
            ndk[spec.first_doc:spec.end_doc] = part.ndk
        self.stale = False
