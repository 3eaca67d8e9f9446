"""Batch Gibbs for deep LDA (``dlda-gibbs``, docs/algorithms.md §8.5) on a Dask cluster
(docs/cluster.md): each shard, a contiguous block of the ``inference.chunks`` chunks, keeps its
documents' local state (theta and c of every layer) on one worker between iterations
(:class:`topictk.inference.cluster.Shards`).

An iteration is two passes over the shards, as on one machine. The upward pass takes the
network Phi^(1..L) and r, runs U1-U3 of its documents with its chunks' streams (whose states
go out with the task and come back with the result) and keeps each document's counts m for
the downward pass; it returns the integer statistics X, which the driver adds in shard order
(integers: the same numbers in any order), and each document's q, which it puts in document
order. The driver then draws the new Phi and r from its main stream, and the downward pass
takes them to run D1-D4 of every document, updating theta and c where they are. Every chunk
sees the network and the stream of the one-machine iteration, so the run is that of
``inference.chunks`` chunks on one machine, whatever the number of workers.
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
from topictk.streams import from_states


@dataclass
class DeepShard:
    """A shard's part of the batch-Gibbs state: its documents' theta (all layers) and c, and
    between the two passes of an iteration their counts m."""

    theta: np.ndarray               # (documents of the shard, sum K_l) float64
    c: np.ndarray                   # (documents of the shard, L) float64
    m: np.ndarray | None = None     # (documents of the shard, sum K_l) int32, after upward


@dataclass(frozen=True)
class PassSettings:
    """What both passes read besides the flattened network: its sizes, r, the
    hyperparameters (downward) and where the documents are (upward)."""

    sizes: np.ndarray
    r: np.ndarray
    hyper: np.ndarray
    store: StoreRef


def upward_piece(shard: DeepShard, settings: PassSettings, flat: np.ndarray,
                 part: tuple[ShardSpec, list[dict]]):
    """The upward pass of a shard's chunks (runs on a worker) with the network ``flat``:
    returns the shard with its documents' counts m and (statistics X (int64), each document's
    q, the uniform fallbacks, the chunk streams' states, [kernel seconds], peak memory)."""
    from topictk.inference.dlda import _dlda
    spec, states = part
    train = settings.store.open().train()
    indptr = np.asarray(train.indptr)
    e0, e1 = int(indptr[spec.first_doc]), int(indptr[spec.end_doc])
    n_docs = spec.end_doc - spec.first_doc
    sizes = settings.sizes
    m = np.zeros((n_docs, int(np.sum(sizes[1:]))), dtype=np.int32)
    stats = np.zeros(int(np.sum(sizes[:-1] * sizes[1:])) + int(sizes[-1]), dtype=np.int64)
    qcur = np.zeros(n_docs)
    streams = from_states(states)
    began = time.perf_counter()
    fallbacks = _dlda.gibbs_upward(
        np.ascontiguousarray(indptr[spec.first_doc:spec.end_doc + 1] - e0, dtype=np.int64),
        np.ascontiguousarray(train.indices[e0:e1], dtype=np.int32),
        np.ascontiguousarray(train.counts[e0:e1], dtype=np.int32), flat, sizes, settings.r,
        shard.theta, shard.c, m, stats, qcur, np.ascontiguousarray(spec.bounds, np.int64),
        streams, worker_threads())
    seconds = time.perf_counter() - began
    return DeepShard(shard.theta, shard.c, m), (stats, qcur, int(fallbacks),
                                                [bg.state for bg in streams], [seconds],
                                                peak_rss())


def merge_upward(a: tuple, b: tuple) -> tuple:
    """Two runs of consecutive shards' upward passes together: statistics added, the
    documents' q and the streams' states in shard order."""
    return (a[0] + b[0], np.concatenate([a[1], b[1]]), a[2] + b[2], a[3] + b[3], a[4] + b[4],
            max(a[5], b[5]))


def downward_piece(shard: DeepShard, settings: PassSettings, flat: np.ndarray,
                   part: tuple[ShardSpec, list[dict]]):
    """The downward pass of a shard's chunks (runs on a worker) with the new network ``flat``
    and r, from the counts m of its upward pass: returns the shard's new theta and c and
    (floored draws, the chunk streams' states, [kernel seconds], peak memory)."""
    from topictk.inference.dlda import _dlda
    spec, states = part
    theta, c = shard.theta.copy(), shard.c.copy()
    streams = from_states(states)
    began = time.perf_counter()
    floored = _dlda.gibbs_downward(flat, settings.sizes, settings.r, settings.hyper, theta, c,
                                   shard.m, np.ascontiguousarray(spec.bounds, np.int64),
                                   streams, worker_threads())
    seconds = time.perf_counter() - began
    return DeepShard(theta, c), (int(floored), [bg.state for bg in streams], [seconds],
                                 peak_rss())


def merge_downward(a: tuple, b: tuple) -> tuple:
    """Two runs of consecutive shards' downward passes together."""
    return a[0] + b[0], a[1] + b[1], a[2] + b[2], max(a[3], b[3])


def local_state(shard: DeepShard) -> DeepShard:
    """What of a shard travels back to the driver: theta and c (m is an iteration's own)."""
    return DeepShard(shard.theta, shard.c)


class ShardedDeepGibbs(Shards):
    """The shards of a ``dlda-gibbs`` run on a cluster; see the module docstring."""

    def _part(self, spec: ShardSpec, theta: np.ndarray, c: np.ndarray) -> DeepShard:
        docs = slice(spec.first_doc, spec.end_doc)
        return DeepShard(theta[docs].copy(), c[docs].copy())

    def _pass(self, piece, merge, settings: PassSettings, flat: np.ndarray,
              chunk_streams: list, doing: str):
        """``piece`` on every shard with its chunks' stream states; the streams advanced."""
        result = self.step(ClusterTask(
            piece, context=settings, shared=(flat,), merge=merge, doing=doing,
            cut=lambda n: [(spec, [chunk_streams[c].state for c in spec.chunks])
                           for spec in self.specs]))
        states, seconds, peak = result[-3:]
        for bg, state in zip(chunk_streams, states):
            bg.state = state
        self.cluster.worker_peak = max(self.cluster.worker_peak, peak)
        self.cluster.add_compute([(0.0, s, 0.0) for s in seconds])
        return result[:-3]

    def upward(self, settings: PassSettings, flat: np.ndarray,
               chunk_streams: list) -> tuple[np.ndarray, np.ndarray, int]:
        """The upward pass of every shard: (statistics X, every document's q, fallbacks)."""
        return self._pass(upward_piece, merge_upward, settings, flat, chunk_streams,
                          "during an upward pass")

    def downward(self, settings: PassSettings, flat: np.ndarray, chunk_streams: list) -> int:
        """The downward pass of every shard: the floored draws."""
        floored, = self._pass(downward_piece, merge_downward, settings, flat, chunk_streams,
                              "during a downward pass")
        return floored

    def gather(self, theta: np.ndarray, c: np.ndarray) -> None:
        """Copy the shards' theta and c into ``theta`` and ``c``."""
        if not self.stale:
            return
        for spec, part in zip(self.specs, self._gathered(local_state)):
            theta[spec.first_doc:spec.end_doc] = part.theta
            c[spec.first_doc:spec.end_doc] = part.c
        self.stale = False
