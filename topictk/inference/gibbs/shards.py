"""The Gibbs family on a Dask cluster (docs/cluster.md): AD-LDA sweeps (docs/algorithms.md
§2.4) with each shard, a contiguous block of the ``inference.chunks`` chunks, on one worker.

A shard's assignments z, its documents' topic counts and a copy of the global word-topic
counts n_kw stay in its worker's process between sweeps (:class:`topictk.inference.cluster.
Shards`). Every sweep each shard sweeps its chunks against its copy of n_kw, with the chunks'
own streams (whose states go out with the task and come back with the result), and keeps its
change of n_kw; the workers add the changes up among themselves in a pairwise tree in shard
order and hand the total down a binary tree of the shards, each adding it to its copy before
its next sweep (:meth:`~topictk.inference.cluster.Shards.step_relayed`); the driver receives
the total once
and adds it to its own n_kw. The changes are integers, so every copy is the driver's, bit for
bit, and each chunk sees the counts and the stream of the one-machine sweep: the run is that
of ``inference.chunks`` chunks on one machine whatever the number of workers. A change travels
in few bytes (:func:`encode_change`): the non-zero entries as one-byte gaps and values in the
smallest integer type, or every entry in that type when that is smaller.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from topictk.inference import _changes
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
class GibbsShard:
    """A shard's part of the Gibbs state: the topics of its tokens, its documents' counts and
    the global word-topic counts as of its last step (the same on every shard, and the
    driver's)."""

    z: np.ndarray      # (tokens of the shard,) int32
    ndk: np.ndarray    # (documents of the shard, K) int32
    nkw: np.ndarray | None = None   # (V, K) int32; None as the driver brings a shard back
    alpha: np.ndarray | None = None  # (documents of the shard, K): a prior per document (DMR)


@dataclass(frozen=True)
class SweepSettings:
    """What every shard's sweep reads besides the counts: the topic totals and priors, the
    sampler chosen by the driver and where the documents are."""

    nk: np.ndarray
    alpha: np.ndarray | None        # (1, K); None: each shard's own rows (a prior per document)
    beta: float
    sparse: bool
    store: StoreRef
    overlay: tuple | None = None    # the seed words' prior (prior_ptr, prior_topic, prior_extra)


@dataclass
class SweepResult:
    """What the shards' sweeps return, merged in shard order: the change of n_kw (encoded),
    of n_k, the chunk streams' states, the rounding fallbacks, the kernel seconds (lists,
    sweep, change) and peak memory of each shard."""

    change: tuple
    nk_change: np.ndarray
    stream_states: list
    fallbacks: int
    seconds: list
    peak: int
    moved: int = 0      # bytes of the shards' results sent between workers to merge them


def _int_type(lo: int, hi: int) -> np.dtype:
    """The smallest signed integer type that holds ``lo`` .. ``hi``."""
    for dtype in (np.int8, np.int16, np.int32):
        info = np.iinfo(dtype)
        if info.min <= lo and hi <= info.max:
            return np.dtype(dtype)
    return np.dtype(np.int64)


def encode_change(new: np.ndarray, old: np.ndarray | None = None) -> tuple:
    """The integer count change ``new - old`` (int32 arrays of one shape; ``old`` None: 0) in
    few bytes, exactly: ("dense", shape, values), every entry in the smallest signed integer
    type that holds them all, or ("sparse", shape, gaps, values), the non-zero entries only,
    each as its distance from the previous one in the flattened array (a byte: a longer gap
    is bridged by entries of value 0) and its value in that type; whichever is fewer bytes
    (:func:`add_change` reads either; kernel ``topictk.inference._changes``)."""
    new_flat = np.ascontiguousarray(new, dtype=np.int32).reshape(-1)
    old_flat = (np.zeros_like(new_flat) if old is None
                else np.ascontiguousarray(old, dtype=np.int32).reshape(-1))
    nnz, bridges, lo, hi = _changes.change_stats(new_flat, old_flat)
    dtype = _int_type(lo, hi)
    n = nnz + bridges
    if n * (1 + dtype.itemsize) >= new_flat.size * dtype.itemsize:
        values = np.empty(new_flat.size, dtype=dtype)
        _changes.write_dense(new_flat, old_flat, values)
        return ("dense", new.shape, values)
    gaps, values = np.empty(n, dtype=np.uint8), np.empty(n, dtype=dtype)
    _changes.write_sparse(new_flat, old_flat, gaps, values)
    return ("sparse", new.shape, gaps, values)


def add_change(target: np.ndarray, encoded: tuple) -> None:
    """target (int32, C-contiguous) += the change ``encoded`` by :func:`encode_change`."""
    if not target.flags.c_contiguous:       # reshape would add to a copy
        raise ValueError("add_change needs C-contiguous counts")
    flat = target.reshape(-1)
    if encoded[0] == "dense":
        flat += encoded[2]
    else:
        _changes.add_sparse(flat, encoded[2], encoded[3])


def change_nbytes(encoded: tuple) -> int:
    """The bytes of the arrays of an encoded change."""
    return sum(part.nbytes for part in encoded[2:])


def merge_changes(a: tuple, b: tuple) -> tuple:
    """The encoded sum of two encoded changes (int32, as the counts they change)."""
    total = np.zeros(a[1], dtype=np.int32)
    add_change(total, a)
    add_change(total, b)
    return encode_change(total)


def merge_sweeps(a: SweepResult, b: SweepResult) -> SweepResult:
    """The sweeps of two runs of consecutive shards together: integer changes, added in any
    order to the same numbers."""
    return SweepResult(merge_changes(a.change, b.change), a.nk_change + b.nk_change,
                       a.stream_states + b.stream_states, a.fallbacks + b.fallbacks,
                       a.seconds + b.seconds, max(a.peak, b.peak), a.moved + b.moved)


def documents_part(shard: GibbsShard) -> GibbsShard:
    """What of a shard travels back to the driver: z and n_dk (the driver has n_kw)."""
    return GibbsShard(shard.z, shard.ndk)


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


def gibbs_shard_sweep(shard: GibbsShard, settings: SweepSettings, last: SweepResult | None,
                      part: tuple[ShardSpec, list[dict], np.ndarray | None]):
    """The piece: one sweep of a shard's chunks against its copy of n_kw (runs on a worker),
    brought up to date first with ``last``, every shard's change in the previous sweep;
    ``part`` is the shard, its chunks' stream states and, for a prior per document, the
    prior's rows of its documents when they changed (else None: the rows it keeps). Returns
    the shard's new state (n_kw without this sweep's changes, which the next sweep adds) and
    its :class:`SweepResult`."""
    from topictk.inference.gibbs import _gibbs
    from topictk.inference.gibbs.counts import overlay_kwargs
    spec, states, rows = part
    if rows is not None:
        shard.alpha = rows
    alpha = settings.alpha if settings.alpha is not None else shard.alpha
    doc_ptr_all, words_all, word_freq = settings.store.training_documents()
    first = int(doc_ptr_all[spec.first_doc])
    doc_ptr = np.ascontiguousarray(doc_ptr_all[spec.first_doc:spec.end_doc + 1] - first,
                                   dtype=np.int64)
    words = words_all[first:int(doc_ptr_all[spec.end_doc])]
    z, ndk = shard.z.copy(), shard.ndk.copy()
    if last is not None:
        add_change(shard.nkw, last.change)
    nkw = shard.nkw.copy()
    nk_after = np.array(settings.nk, dtype=np.int64)
    streams = from_states(states)
    began = time.perf_counter()
    ptr, entries, lengths, bits = _sparse_lists(nkw, word_freq, settings.sparse)
    listed = time.perf_counter()
    fallbacks = _gibbs.gibbs_sweep(doc_ptr, words, z, ndk, nkw, nk_after,
                                   np.ascontiguousarray(alpha, dtype=np.float64),
                                   float(settings.beta),
                                   np.ascontiguousarray(spec.bounds, dtype=np.int64), streams,
                                   bool(settings.sparse), ptr, entries, lengths, bits,
                                   worker_threads(), **overlay_kwargs(settings.overlay))
    swept = time.perf_counter()
    del entries, lengths
    change = encode_change(nkw, shard.nkw)
    seconds = (listed - began, swept - listed, time.perf_counter() - swept)
    return GibbsShard(z, ndk, shard.nkw, shard.alpha), SweepResult(change,
                                                                   nk_after - settings.nk,
                                                      [bg.state for bg in streams],
                                                      int(fallbacks), [seconds], peak_rss())


class ShardedGibbs(Shards):
    """The shards of a Gibbs chain on a cluster; see the module docstring. A prior per
    document (DMR's alpha_d) goes to each shard as its documents' rows, and again only when
    it changed (a new array: the DMR driver's is a new one when nu moved)."""

    _rows_sent: np.ndarray | None = None    # the per-document prior the shards hold

    def release(self) -> None:
        """Forget the shards (and so the prior rows they held)."""
        self._rows_sent = None
        super().release()

    def abandon(self) -> None:
        self._rows_sent = None
        super().abandon()

    def _part(self, spec: ShardSpec, z: np.ndarray, ndk: np.ndarray,
              nkw: np.ndarray) -> GibbsShard:
        t0, t1 = self._token_range(spec)
        return GibbsShard(z[t0:t1].copy(), ndk[spec.first_doc:spec.end_doc].copy(), nkw)

    def sweep(self, nkw: np.ndarray, nk: np.ndarray, alpha: np.ndarray, beta: float,
              sparse: bool, chunk_streams: list, overlay=None) -> int:
        """One AD-LDA sweep of every shard against its copy of ``nkw`` (the driver's, which
        the shards were sent with and have kept up); the total change is added to ``nkw`` and
        ``nk`` and the chunk streams advanced. ``alpha`` is (1, K), or (D, K) a prior per
        document. Returns the rounding fallbacks."""
        per_document = alpha.ndim == 2 and alpha.shape[0] > 1
        send = per_document and alpha is not self._rows_sent
        done = self.step_relayed(ClusterTask(
            gibbs_shard_sweep, context=SweepSettings(nk, None if per_document else alpha,
                                                   beta, sparse, self.store, overlay),
            merge=merge_sweeps, doing="during a sweep",
            cut=lambda n: [(spec, [chunk_streams[c].state for c in spec.chunks],
                            alpha[spec.first_doc:spec.end_doc] if send else None)
                           for spec in self.specs]))
        self._rows_sent = alpha if per_document else None
        self.cluster.add_compute(done.seconds)
        self.cluster.worker_peak = max(self.cluster.worker_peak, done.peak)
        began = time.perf_counter()
        add_change(nkw, done.change)
        self.cluster.merge_seconds += time.perf_counter() - began
        nk += done.nk_change
        for bg, state in zip(chunk_streams, done.stream_states):
            bg.state = state
        return done.fallbacks

    def gather(self, z: np.ndarray, ndk: np.ndarray) -> None:
        """Copy the shards' assignments and document-topic counts into ``z`` and ``ndk``."""
        if not self.stale:
            return
        for spec, part in zip(self.specs, self._gathered(documents_part)):
            t0, t1 = self._token_range(spec)
            z[t0:t1] = part.z
            ndk[spec.first_doc:spec.end_doc] = part.ndk
        self.stale = False
