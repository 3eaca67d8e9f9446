"""Running the shards of a training step on a Dask cluster (docs/cluster.md).

A :class:`Cluster` is a Dask client connected to a running scheduler (``training.scheduler``)
or to a local cluster of worker processes started for one run (``training.dask_workers``).
Dask is an optional extra: it is imported here only, when a cluster is asked for, so topictk
works without it.

The workers read the corpus from the store's path, memory-mapped as on one machine: only
counts, assignments and random-stream states travel, never the corpus. Before the first step
every worker opens the store and compares its corpus id (a hash of the vocabulary and of
every array), its topictk version and its compiled kernels with the driver's; a worker that
differs stops the run with a message naming it and the path.

:class:`ShardedGibbs` runs AD-LDA sweeps (docs/algorithms.md §2.4) with each shard, a
contiguous block of the ``inference.chunks`` chunks, on one worker: the shard's assignments
z and document-topic counts stay in that worker's process between sweeps, and each sweep's
one task per shard takes them out and puts the new ones in. Every sweep the driver
broadcasts the word-topic counts; each shard sweeps its chunks against that snapshot with
the chunks' own streams (whose states go out with the task and come back with its result)
and returns its count changes, which the driver adds in shard order. Each chunk sees the
snapshot and its own stream, exactly as in the one-machine sweep, so the run is that of
``inference.chunks`` chunks on one machine, bit for bit, whatever the number of workers.
"""
from __future__ import annotations

import logging
import signal
import sys
import time
import uuid
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import pairwise
from typing import TypeVar

import numpy as np

from topictk.corpus.store import CorpusStore, Documents
from topictk.config.loader import scheduler_problem
from topictk.errors import TopictkError, UsageError
from topictk.inference.base import chunk_bounds_by_tokens, word_frequencies
from topictk.limits import local_workers_problem

log = logging.getLogger("topictk")

T = TypeVar("T")

DASK_EXTRA = 'pip install "topictk[dask]"'


class ClusterError(TopictkError):
    """The Dask cluster cannot be reached, or one of its workers cannot take part."""


class ClusterLost(ClusterError):
    """The scheduler, or every worker, is gone in the middle of the work: the run stops."""


class WorkerLost(ClusterError):
    """A worker holding a shard (or working on one) is gone; the driver recovers."""


#: times one step recovers from lost workers before the run stops
MAX_RECOVERIES = 3
#: copies of an array the driver sends to workers at the same time
MAX_SENDS = 8


def _loss_errors() -> tuple[type[BaseException], ...]:
    """What Dask raises when a worker holding or computing a needed result is gone."""
    import concurrent.futures

    import distributed
    return (concurrent.futures.CancelledError, distributed.KilledWorker, OSError, ShardMissing)


def topictk_version() -> str:
    """The version of the topictk package this module belongs to (imported with it)."""
    return sys.modules["topictk"].__version__


def cluster_requested(training) -> bool:
    """Whether the training section asks for a Dask cluster."""
    return training.scheduler is not None or training.dask_workers is not None


def _distributed(option: str):
    try:
        import distributed
    except ImportError:
        raise UsageError(f"{option} needs Dask, an optional extra: {DASK_EXTRA}") from None
    return distributed


@contextmanager
def _interrupts_ignored():
    """SIGINT ignored while the block starts processes, which inherit that: a Ctrl-C at the
    terminal reaches the whole process group, and a local worker that died of it would be
    taken for a lost worker. The driver stops them itself, after writing its checkpoint."""
    try:
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    except ValueError:          # not the main thread: signals are not this thread's to set
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


class Cluster:
    """A Dask client for one run: on the scheduler at ``scheduler``, or on a local cluster of
    ``workers`` single-thread worker processes started for the run and stopped with it."""

    def __init__(self, *, scheduler: str | None = None, workers: int | None = None,
                 timeout: float = 30.0, work: str = "training",
                 options: tuple[str, str] = ("training.scheduler", "training.dask_workers")):
        """``work`` says what the cluster is for (``training``, ``evaluating``...) and
        ``options`` the names of the scheduler and local-workers settings, as the messages
        name them: the config keys for ``train``, the command-line options for the others."""
        if (scheduler is None) == (workers is None):
            raise ValueError("give one of scheduler and workers")
        self.work, self.options = work, options
        option = options[0] if scheduler is not None else options[1]
        # checked here too, for callers that bypass the config: a bad address would fail
        # inside Dask (or only after the timeout), too many workers would start without end
        problem = (scheduler_problem(scheduler) if scheduler is not None
                   else local_workers_problem(workers))
        if problem is not None:
            raise UsageError(f"{option} {problem}" if scheduler is not None
                             else f"{option}: {problem}")
        self.scheduler = scheduler
        self.n_local = workers
        self.timeout = float(timeout)
        self.client = None
        self._local = None
        self.bytes_sent = 0          # what the driver sent to the workers
        self.bytes_received = 0      # what it got back
        # seconds, summed over steps: the slowest shard's kernel time, and the driver's adding
        # of the changes; the rest of a step's wall is transfer and scheduling
        self.compute_seconds = 0.0
        self.merge_seconds = 0.0
        self.send_seconds = 0.0         # the driver sending copies of arrays to the workers
        # the slowest shard's kernel time in its parts (Gibbs: building the SparseLDA word
        # lists from the counts, the sweep, the count change), summed over steps
        self.compute_parts = np.zeros(3)
        self.worker_peak = 0             # the largest peak RSS a worker reported, bytes
        self.runs: list[str] = []        # ids of the chains whose shards live on the workers

    def counters(self) -> dict:
        """The traffic and time counters (since the cluster was opened), for the metrics."""
        return {"cluster_bytes_sent": self.bytes_sent,
                "cluster_bytes_received": self.bytes_received,
                "cluster_compute_seconds": round(self.compute_seconds, 6),
                "cluster_merge_seconds": round(self.merge_seconds, 6),
                "cluster_send_seconds": round(self.send_seconds, 6),
                **{f"cluster_{part}_seconds": round(float(value), 6)
                   for part, value in zip(("lists", "sweep", "change"), self.compute_parts)},
                "cluster_worker_peak_rss": self.worker_peak}

    @classmethod
    def from_config(cls, training) -> Cluster:
        return cls(scheduler=training.scheduler, workers=training.dask_workers,
                   timeout=training.cluster_timeout)

    @property
    def description(self) -> str:
        if self.scheduler is not None:
            return f"the Dask scheduler at {self.scheduler}"
        return f"a local Dask cluster of {self.n_local} worker process(es)"

    def __enter__(self) -> Cluster:
        distributed = _distributed(self.options[0] if self.scheduler is not None
                                   else self.options[1])
        try:
            if self.scheduler is not None:
                self.client = distributed.Client(self.scheduler, timeout=self.timeout,
                                                 set_as_default=False)
            else:
                with _interrupts_ignored():     # Ctrl-C is the driver's to handle
                    self._local = distributed.LocalCluster(
                        n_workers=self.n_local, threads_per_worker=1, processes=True,
                        dashboard_address=":0", silence_logs=logging.CRITICAL)
                self.client = distributed.Client(self._local, timeout=self.timeout,
                                                 set_as_default=False)
        except RuntimeError as exc:     # a local cluster whose workers did not start
            self.close()
            raise ClusterError(f"cannot start {self.description} ({exc})") from None
        except (OSError, TimeoutError, ValueError) as exc:
            self.close()
            reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise ClusterError(f"cannot reach {self.description} within {self.timeout:g} s "
                               f"({reason}); start it with 'dask scheduler' or correct "
                               f"{self.options[0]}") from None
        try:
            self.client.wait_for_workers(1, timeout=self.timeout)
        except (OSError, TimeoutError):
            self.close()
            fix = (f"start one with 'dask worker {self.scheduler}'" if self.scheduler is not None
                   else f"give fewer {self.options[1]} or free memory for them")
            raise ClusterError(f"{self.description} has no worker after {self.timeout:g} s; "
                               f"{fix}") from None
        log.info("%s on %s: %d worker(s)", self.work, self.description, len(self.workers()))
        return self

    def __exit__(self, *exc) -> bool:
        self.close()
        return False

    def close(self) -> None:
        if self.client is not None and self.client.status == "running" and self.runs:
            # the shards' states this run left in workers that outlive it
            try:
                self.client.run(_forget_runs, self.runs, on_error="ignore")
            except _loss_errors():
                pass
        if self.client is not None:
            self.client.close()
            self.client = None
        if self._local is not None:
            self._local.close()
            self._local = None

    def add_compute(self, shards: list[tuple[float, float, float]]) -> None:
        """Count a step's kernel time: the slowest shard's, whose parts are ``shards``."""
        slowest = max(shards, key=sum)
        self.compute_seconds += sum(slowest)
        self.compute_parts += slowest

    def copy_to(self, array: np.ndarray, workers: list[str]) -> dict:
        """One copy of ``array`` on each of ``workers``, sent from here to each directly:
        {address: future}. (Dask's broadcast replicates through the scheduler afterwards,
        which waits for ever on a worker that has just died.)"""
        from concurrent.futures import ThreadPoolExecutor

        def send(address: str):
            return self.client.scatter(array, workers=[address], hash=False, direct=True,
                                       timeout=self.timeout)

        began = time.perf_counter()
        if len(workers) == 1:
            copies = {workers[0]: send(workers[0])}
        else:           # to every worker at once: the sends overlap instead of queueing
            with ThreadPoolExecutor(min(len(workers), MAX_SENDS)) as pool:
                copies = dict(zip(workers, pool.map(send, workers)))
        self.bytes_sent += array.nbytes * len(workers)
        self.send_seconds += time.perf_counter() - began
        return copies

    def check_connected(self) -> None:
        """Stop the run with a message once the client has given up on the scheduler."""
        if self.client is None or self.client.status in ("closing", "closed"):
            raise ClusterLost(f"lost the connection to {self.description}")

    def check_scheduler(self) -> None:
        """After work was lost: raise :class:`ClusterLost` when the scheduler, not a worker,
        is what went away (the client is reconnecting and does not get through within the
        cluster timeout), so that the message names the real cause."""
        deadline = time.monotonic() + self.timeout
        while self.client is not None and self.client.status not in ("running", "closing",
                                                                     "closed"):
            if time.monotonic() > deadline:
                raise ClusterLost(f"lost the connection to {self.description} while "
                                  f"{self.work}")
            time.sleep(0.1)
        self.check_connected()

    def workers(self) -> list[str]:
        """The addresses of the cluster's workers, sorted; when none is connected (one that
        was lost and is being restarted), waits for one up to the cluster timeout."""
        found = sorted(self.client.scheduler_info(n_workers=-1)["workers"])
        if not found:
            try:
                self.client.wait_for_workers(1, timeout=self.timeout)
            except (OSError, TimeoutError):
                raise ClusterLost(f"{self.description} has no worker left after "
                                  f"{self.timeout:g} s") from None
            found = sorted(self.client.scheduler_info(n_workers=-1)["workers"])
        return found

    def check_store(self, store: CorpusStore) -> None:
        """Stop the run unless every worker runs this topictk version with its compiled
        kernels and finds this store at its path."""
        found = self.client.run(_check_worker, str(store.path), store.corpus_id,
                                topictk_version())
        for address, problem in sorted(found.items()):
            if problem:
                raise ClusterError(f"Dask worker {address}: {problem}; every worker must read "
                                   f"the same store at the same path (a shared filesystem) with "
                                   f"the same topictk")


def with_recovery(cluster: Cluster, again: str | Callable[[WorkerLost], None],
                  attempt: Callable[[], T]) -> T:
    """``attempt()`` until it returns, at most MAX_RECOVERIES + 1 times: each try starts by
    checking the connection, and a lost worker (:class:`WorkerLost`) makes the work be done
    again: from inputs the driver still holds (``again`` a string, which says what, in the
    warning), or after ``again(exc)`` has restored what the next try starts from."""
    for tries in range(MAX_RECOVERIES + 1):
        cluster.check_connected()
        try:
            return attempt()
        except WorkerLost as exc:
            cluster.check_scheduler()       # the scheduler gone is not a lost worker
            if tries == MAX_RECOVERIES:
                raise
            if callable(again):
                again(exc)
            else:
                log.warning("%s; %s", exc, again)
    raise AssertionError("unreachable")


def warn_redo(exc: WorkerLost, since: int, upto: int, unit: str) -> None:
    """The warning of a recovery that goes back to step ``since`` and redoes the ``unit``
    (steps, sweeps) up to ``upto``, or only resends the shards of step ``upto``."""
    if upto > since:
        log.warning("%s; redoing %s %d to %d from the state of step %d", exc, unit, since + 1,
                    upto, since)
    else:
        log.warning("%s; sending the shards of step %d out again", exc, upto)


def spread(workers: list[str], n_items: int) -> tuple[list[tuple[int, int]], list[str]]:
    """``n_items`` items (chunks, blocks) cut into one contiguous run per worker (fewer when
    there are fewer items): the runs' [begin, end) and the worker each goes to."""
    n_runs = max(1, min(n_items, len(workers)))
    cuts = np.linspace(0, n_items, n_runs + 1).round().astype(int)
    runs = [(int(a), int(b)) for a, b in pairwise(cuts) if b > a]
    return runs, [workers[i % len(workers)] for i in range(len(runs))]


# ------------------------------------------------------------------ on the workers
# Each worker process keeps the training documents of the stores it has opened, memory-mapped,
# with their word frequencies (the SparseLDA pool sizes), keyed by path and corpus id.
_OPENED: dict[tuple[str, str], tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
_STORES: dict[tuple[str, str], CorpusStore] = {}


# The shards' parts of a chain's state that this worker process holds between steps, by key
# (run id, shard, step): a step's task takes its shard's part out and puts the new one in, so
# only the step's result travels, and one task per shard and step is scheduled.
_RESIDENT: dict[str, object] = {}


class ShardMissing(ClusterError):
    """A shard's state is not on the worker that was asked for it (lost with its worker)."""


def _keep(part, key: str) -> str:
    _RESIDENT[key] = part
    return key


def _held(key: str, take: bool):
    if key not in _RESIDENT:
        raise ShardMissing(f"shard {key} is not held here (its worker was lost)")
    return _RESIDENT.pop(key) if take else _RESIDENT[key]


def _fetch(key: str):
    return _held(key, take=False)


def _forget_runs(runs: list[str]) -> None:
    for key in [key for key in _RESIDENT if key.split("-", 1)[0] in runs]:
        del _RESIDENT[key]


def _step_task(work: Callable, key_in: str, key_out: str, *args):
    """``work(shard, *args)`` on the shard held under ``key_in``, which returns (the shard's
    new state, the step's result): the state is kept here under ``key_out``, the result
    returned."""
    state, out = work(_held(key_in, take=True), *args)
    _RESIDENT[key_out] = state
    return out


def _check_worker(path: str, corpus_id: str, version: str) -> str | None:
    """What keeps this worker from training on the store at ``path``, or None."""
    try:
        from topictk.inference import _gibbs  # noqa: F401  (the compiled kernels)
    except ImportError as exc:
        return f"cannot import topictk's compiled kernels ({exc})"
    if topictk_version() != version:
        return f"runs topictk {topictk_version()}, the driver {version}"
    try:
        store = CorpusStore.open(path)
    except TopictkError as exc:
        return f"cannot open the corpus store {path} ({exc})"
    if store.corpus_id != corpus_id:
        return (f"finds another corpus at {path} (corpus id {store.corpus_id[:12]}, the "
                f"driver's {corpus_id[:12]})")
    return None


def _worker_store(path: str, corpus_id: str) -> CorpusStore:
    """The store at ``path`` as this worker opened it (once), checked to be the driver's."""
    key = (path, corpus_id)
    if key not in _STORES:
        store = CorpusStore.open(path)
        if store.corpus_id != corpus_id:
            raise ClusterError(f"{path}: another corpus than the driver's (corpus id "
                               f"{store.corpus_id[:12]}, expected {corpus_id[:12]})")
        _STORES[key] = store
    return _STORES[key]


def _training_documents(path: str, corpus_id: str):
    """(doc_ptr, words, word frequencies) of the store's training documents."""
    key = (path, corpus_id)
    if key not in _OPENED:
        store = _worker_store(path, corpus_id)
        train = store.train()
        words = np.asarray(train.words)
        _OPENED[key] = (np.asarray(train.doc_ptr), words, word_frequencies(words, store.n_words))
    return _OPENED[key]


def _peak_rss() -> int:
    """The peak resident memory of this (worker) process so far, bytes."""
    import resource
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


def _worker_threads() -> int:
    try:
        from distributed import get_worker
        return max(1, int(get_worker().state.nthreads))
    except (ImportError, ValueError, AttributeError):
        return 1


@dataclass
class GibbsShard:
    """A shard's part of the Gibbs state: the topics of its tokens and its documents' counts."""

    z: np.ndarray      # (tokens of the shard,) int32
    ndk: np.ndarray    # (documents of the shard, K) int32

    @property
    def nbytes(self) -> int:
        return self.z.nbytes + self.ndk.nbytes


@dataclass(frozen=True)
class ShardSpec:
    """Which documents a shard holds and how its chunks cut them."""

    first_doc: int
    end_doc: int
    first_chunk: int
    bounds: np.ndarray   # chunk boundaries, in documents counted from first_doc


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


def encoded_bytes(encoded: tuple) -> int:
    return sum(a.nbytes for a in encoded[1:])


def gibbs_shard_sweep(shard: GibbsShard, snapshot: np.ndarray, nk: np.ndarray,
                      alpha: np.ndarray, beta: float, sparse: bool, path: str, corpus_id: str,
                      spec: ShardSpec, stream_states: list[dict]):
    """One sweep of a shard's chunks against the word-topic counts ``snapshot`` (runs on a
    worker). Returns the shard's new state and (its change of the word-topic counts, encoded;
    its change of nk; its chunks' stream states after the sweep; rounding fallbacks)."""
    from topictk.inference import _gibbs
    doc_ptr_all, words_all, word_freq = _training_documents(path, corpus_id)
    first = int(doc_ptr_all[spec.first_doc])
    doc_ptr = np.ascontiguousarray(doc_ptr_all[spec.first_doc:spec.end_doc + 1] - first,
                                   dtype=np.int64)
    words = words_all[first:int(doc_ptr_all[spec.end_doc])]
    z, ndk = shard.z.copy(), shard.ndk.copy()
    nkw = np.array(snapshot, dtype=np.int32, order="C")
    nk_after = np.array(nk, dtype=np.int64)
    V, K = nkw.shape
    streams = []
    for state in stream_states:
        bg = np.random.PCG64()
        bg.state = state
        streams.append(bg)
    threads = _worker_threads()
    began = time.perf_counter()
    bits = _gibbs.topic_bits(K)
    ptr = np.zeros(V + 1, dtype=np.int64)
    np.cumsum(np.minimum(word_freq, K), out=ptr[1:])
    entries = np.zeros(max(1, int(ptr[-1])) if sparse else 1, dtype=np.int64)
    lengths = np.zeros(V, dtype=np.int32)
    if sparse:      # the lists are a function of the counts: those of the driver's sweep
        _gibbs.build_word_topic_lists(nkw, ptr, entries, lengths, bits, threads)
    listed = time.perf_counter()
    fallbacks = _gibbs.gibbs_sweep(doc_ptr, words, z, ndk, nkw, nk_after,
                                   np.ascontiguousarray(alpha, dtype=np.float64), float(beta),
                                   np.ascontiguousarray(spec.bounds, dtype=np.int64), streams,
                                   bool(sparse), ptr, entries, lengths, bits, threads)
    swept = time.perf_counter()
    del entries, lengths
    np.subtract(nkw, snapshot, out=nkw)
    change = encode_change(nkw)
    seconds = (listed - began, swept - listed, time.perf_counter() - swept)
    return GibbsShard(z, ndk), (change, nk_after - nk, [bg.state for bg in streams],
                                int(fallbacks), seconds, _peak_rss())


# ------------------------------------------------------------------ on the driver
class Shards:
    """The shards of a chain whose state lives on the workers between steps: the chunks cut
    into one contiguous shard per worker, about equal in tokens, each with its home worker."""

    def __init__(self, cluster: Cluster, store: CorpusStore, doc_ptr: np.ndarray,
                 bounds: np.ndarray):
        self.cluster = cluster
        self.client = cluster.client
        self.path = str(store.path)
        self.corpus_id = store.corpus_id
        self.doc_ptr = doc_ptr          # (D + 1) token offsets of the documents
        self.bounds = bounds
        self.n_chunks = bounds.size - 1
        self.run = uuid.uuid4().hex[:8]
        cluster.runs.append(self.run)
        self.shards = None        # the keys of the shards' parts of the state on their workers
        self.specs: list[ShardSpec] = []
        self.homes: list[str] = []      # the worker of each shard
        self.stale = False        # the driver's copy of the shards' state is behind theirs

    def _plan(self) -> list[str]:
        """Cut the chunks into one shard per worker (as many as there are chunks at most),
        contiguous and about equal in tokens; returns the home worker of each shard."""
        workers = self.cluster.workers()
        n_shards = min(self.n_chunks, len(workers))
        chunk_tokens = np.ascontiguousarray(self.doc_ptr[self.bounds], dtype=np.int64)
        cuts = chunk_bounds_by_tokens(chunk_tokens, n_shards)
        self.specs = []
        for a, b in pairwise(cuts):
            a, b = int(a), int(b)
            first, end = int(self.bounds[a]), int(self.bounds[b])
            self.specs.append(ShardSpec(first, end, a, self.bounds[a:b + 1] - first))
        return [workers[s * len(workers) // len(self.specs)] for s in range(len(self.specs))]

    def _token_range(self, spec: ShardSpec) -> tuple[int, int]:
        return int(self.doc_ptr[spec.first_doc]), int(self.doc_ptr[spec.end_doc])

    def _part(self, spec: ShardSpec, *arrays: np.ndarray):
        """The shard ``spec``'s part of the state ``arrays``, as it travels to its worker."""
        raise NotImplementedError

    def distribute(self, *arrays: np.ndarray) -> None:
        """Send each shard's part of the state ``arrays`` to its home worker, which keeps it."""
        self.release()
        try:
            self.client.wait_for_workers(1, timeout=self.cluster.timeout)
            self.homes = self._plan()
            kept = []
            for s, (spec, home) in enumerate(zip(self.specs, self.homes)):
                part = self._part(spec, *arrays)
                sent = self.client.scatter(part, workers=[home], hash=False, direct=True)
                self.cluster.bytes_sent += part.nbytes
                kept.append(self.client.submit(_keep, sent, self._key(s), workers=[home],
                                               allow_other_workers=True, pure=False))
            self.shards = self.client.gather(kept, direct=True)
        except _loss_errors() as exc:
            raise WorkerLost(f"a Dask worker was lost while the shards were sent out "
                             f"({type(exc).__name__})") from None
        except TimeoutError:
            raise ClusterLost(f"{self.cluster.description} has had no worker for "
                              f"{self.cluster.timeout:g} s") from None
        self.stale = False

    def _key(self, s: int) -> str:
        """A new key for shard ``s``'s state on its worker."""
        return f"{self.run}-{s}-{uuid.uuid4().hex[:8]}"

    def submit_step(self, work: Callable, args_of: Callable[[int], tuple],
                    on_each: Callable | None = None) -> list:
        """One task per shard on its home worker: ``work(shard's state, *args_of(s))`` with
        the new state kept there; returns the futures of the tasks' results in shard order
        (each passed to ``on_each`` as it is submitted: a later shard's arguments may take
        it)."""
        outs, keys = [], []
        for s, home in enumerate(self.homes):
            keys.append(self._key(s))
            outs.append(self.client.submit(_step_task, work, self.shards[s], keys[-1],
                                           *args_of(s), key=f"{work.__name__}-{keys[-1]}",
                                           workers=[home], allow_other_workers=True,
                                           pure=False))
            if on_each is not None:
                on_each(outs[-1])
        self.shards = keys
        self.stale = True
        return outs

    def _gathered(self) -> list:
        """The shards' parts of the state, brought back from their workers."""
        try:
            parts = self.client.gather(
                [self.client.submit(_fetch, key, workers=[home], allow_other_workers=True,
                                    pure=False) for key, home in zip(self.shards, self.homes)],
                direct=True)
        except _loss_errors() as exc:
            raise WorkerLost(f"a Dask worker holding a shard was lost ({type(exc).__name__})"
                             ) from None
        self.cluster.bytes_received += sum(part.nbytes for part in parts)
        return parts

    def release(self) -> None:
        """Forget the shards' states on every worker (the run's keys)."""
        if self.shards is not None:
            self.shards = None
            try:
                self.client.run(_forget_runs, [self.run], on_error="ignore")
            except _loss_errors():
                pass


class ShardedGibbs(Shards):
    """The shards of a Gibbs chain on a cluster; see the module docstring."""

    def _part(self, spec: ShardSpec, z: np.ndarray, ndk: np.ndarray) -> GibbsShard:
        t0, t1 = self._token_range(spec)
        return GibbsShard(z[t0:t1].copy(), ndk[spec.first_doc:spec.end_doc].copy())

    def sweep(self, nkw: np.ndarray, nk: np.ndarray, alpha: np.ndarray, beta: float,
              sparse: bool, chunk_streams: list) -> int:
        """One AD-LDA sweep of every shard against ``nkw``; the shards' changes are added to
        ``nkw`` and ``nk`` in shard order and the chunk streams advanced. Returns the rounding
        fallbacks."""
        try:
            return self._sweep(nkw, nk, alpha, beta, sparse, chunk_streams)
        except _loss_errors() as exc:
            raise WorkerLost(f"a Dask worker was lost during a sweep ({type(exc).__name__})"
                             ) from None

    def _sweep(self, nkw, nk, alpha, beta, sparse, chunk_streams) -> int:
        client = self.client
        snapshots = self.cluster.copy_to(nkw, sorted(set(self.homes)))

        def args(s: int) -> tuple:
            spec = self.specs[s]
            chunks = range(spec.first_chunk, spec.first_chunk + spec.bounds.size - 1)
            return (snapshots[self.homes[s]], nk, alpha, beta, sparse, self.path,
                    self.corpus_id, spec, [chunk_streams[c].state for c in chunks])

        outs = self.submit_step(gibbs_shard_sweep, args)
        fallbacks = 0
        results = client.gather(outs, direct=True)
        began = time.perf_counter()
        self.cluster.add_compute([out[4] for out in results])
        for spec, out in zip(self.specs, results):
            change, nk_change, states, shard_fallbacks, _, peak = out
            self.cluster.worker_peak = max(self.cluster.worker_peak, peak)
            self.cluster.bytes_received += encoded_bytes(change) + nk_change.nbytes
            add_change(nkw, change)
            nk += nk_change
            for c, state in zip(range(spec.first_chunk, spec.first_chunk + len(states)), states):
                chunk_streams[c].state = state
            fallbacks += shard_fallbacks
        self.cluster.merge_seconds += time.perf_counter() - began
        del outs, results
        return fallbacks

    def gather(self, z: np.ndarray, ndk: np.ndarray) -> None:
        """Copy the shards' assignments and document-topic counts into ``z`` and ``ndk``."""
        if not self.stale:
            return
        for spec, part in zip(self.specs, self._gathered()):
            t0, t1 = self._token_range(spec)
            z[t0:t1] = part.z
            ndk[spec.first_doc:spec.end_doc] = part.ndk
        self.stale = False


# ------------------------------------------------------------------ CVB0 on the workers
@dataclass
class CVBShard:
    """A shard's part of the CVB0 state: q(z) of its pairs and its documents' fields."""

    mu: np.ndarray     # (pairs of the shard, K) float64
    m_dk: np.ndarray   # (documents of the shard, K) float64

    @property
    def nbytes(self) -> int:
        return self.mu.nbytes + self.m_dk.nbytes


def _shard_pairs(path: str, corpus_id: str, spec: ShardSpec):
    """(indptr from 0, indices, counts) of the training pairs of the shard's documents."""
    train = _worker_store(path, corpus_id).train()
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


def cvb0_shard_sweep(shard: CVBShard, m_kw: np.ndarray, m_k: np.ndarray, alpha: np.ndarray,
                     beta: float, path: str, corpus_id: str, spec: ShardSpec, whole: bool):
    """One CVB0 iteration of a shard's chunks (runs on a worker), each chunk against its own
    copy of the word and topic fields ``m_kw``, ``m_k`` as they stood at the start of the
    iteration (docs/algorithms.md §4.4). Returns the shard's new state and, per chunk in order,
    its change of m_kw (encoded) and of m_k: the changes the one-machine sweep adds in chunk
    order. With ``whole`` (the run's only chunk) the chunk's fields come back instead."""
    from topictk.inference import _cvb
    indptr, indices, counts = _shard_pairs(path, corpus_id, spec)
    mu, m_dk = shard.mu.copy(), shard.m_dk.copy()
    alpha = np.ascontiguousarray(alpha, dtype=np.float64)
    threads = _worker_threads()
    began = time.perf_counter()
    changes = []
    for a, b in pairwise(spec.bounds):
        local_kw, local_k = m_kw.copy(), m_k.copy()
        _cvb.sweep(indptr, indices, counts, mu, m_dk, local_kw, local_k, None, None, None,
                   alpha, float(beta), np.array([a, b], dtype=np.int64), threads)
        if whole:
            changes.append((("dense", local_kw), local_k))
        else:
            np.subtract(local_kw, m_kw, out=local_kw)
            changes.append((encode_rows(local_kw), local_k - m_k))
    return CVBShard(mu, m_dk), (changes, time.perf_counter() - began, _peak_rss())


def cvb0_shard_fields(shard: CVBShard, m_kw: np.ndarray | None, shape: tuple[int, int],
                      path: str, corpus_id: str, spec: ShardSpec):
    """The fields recomputed from mu (runs on a worker): the shard's m_dk from scratch, and its
    pairs added to the word fields ``m_kw`` of the shards before it (None: the first shard).
    Returns the shard's new state and the word fields so far."""
    from topictk.inference import _cvb
    indptr, indices, counts = _shard_pairs(path, corpus_id, spec)
    m_kw = np.zeros(shape) if m_kw is None else m_kw.copy()
    m_dk = np.empty_like(shard.m_dk)
    _cvb.add_fields(indptr, indices, counts, shard.mu, m_dk, m_kw, _worker_threads())
    return CVBShard(shard.mu, m_dk), m_kw


class ShardedCVB0(Shards):
    """The shards of a CVB0 run on a cluster: each shard's mu and m_dk stay on its worker;
    every iteration the driver sends the word and topic fields and adds the chunks' changes
    back in chunk order, as the one-machine sweep merges them (docs/cluster.md)."""

    def __init__(self, cluster: Cluster, store: CorpusStore, doc_ptr: np.ndarray,
                 pair_ptr: np.ndarray, bounds: np.ndarray):
        super().__init__(cluster, store, doc_ptr, bounds)
        self.pair_ptr = pair_ptr        # (D + 1) pair offsets of the documents

    def _part(self, spec: ShardSpec, mu: np.ndarray, m_dk: np.ndarray) -> CVBShard:
        p0, p1 = int(self.pair_ptr[spec.first_doc]), int(self.pair_ptr[spec.end_doc])
        return CVBShard(mu[p0:p1].copy(), m_dk[spec.first_doc:spec.end_doc].copy())

    def sweep(self, m_kw: np.ndarray, m_k: np.ndarray, alpha: np.ndarray, beta: float) -> None:
        """One CVB0 iteration of every shard; ``m_kw`` and ``m_k`` become the merged fields."""
        try:
            self._sweep(m_kw, m_k, alpha, beta)
        except _loss_errors() as exc:
            raise WorkerLost(f"a Dask worker was lost during an iteration "
                             f"({type(exc).__name__})") from None

    def _sweep(self, m_kw, m_k, alpha, beta) -> None:
        copies = self.cluster.copy_to(m_kw, sorted(set(self.homes)))
        self.cluster.bytes_sent += m_k.nbytes * len(self.specs)
        whole = self.n_chunks == 1
        outs = self.submit_step(cvb0_shard_sweep, lambda s: (
            copies[self.homes[s]], m_k, alpha, beta, self.path, self.corpus_id, self.specs[s],
            whole))
        results = self.client.gather(outs, direct=True)
        began = time.perf_counter()
        if whole:
            (change, k_fields), = results[0][0]
            m_kw[...], m_k[...] = change[1], k_fields
        else:
            # start + the chunks' changes in chunk order (docs/algorithms.md §4.4)
            for changes, _, _ in results:
                for change, k_change in changes:
                    add_rows(m_kw, change)
                    m_k += k_change
        for changes, seconds, peak in results:
            self.cluster.bytes_received += sum(encoded_bytes(c) + k.nbytes for c, k in changes)
            self.cluster.worker_peak = max(self.cluster.worker_peak, peak)
        self.cluster.merge_seconds += time.perf_counter() - began
        self.cluster.add_compute([(0.0, r[1], 0.0) for r in results])

    def refresh(self, m_kw: np.ndarray, m_k: np.ndarray) -> None:
        """The fields recomputed from mu, as on one machine: each shard its m_dk, and the word
        fields summed shard after shard in pair order (worker to worker), m_k on the driver."""
        from topictk.inference import _cvb
        try:
            partials: list = []      # each shard's task adds to the previous shard's sums
            outs = self.submit_step(cvb0_shard_fields, lambda s: (
                partials[-1] if partials else None, m_kw.shape, self.path, self.corpus_id,
                self.specs[s]), on_each=partials.append)
            m_kw[...] = outs[-1].result()
        except _loss_errors() as exc:
            raise WorkerLost(f"a Dask worker was lost while the fields were recomputed "
                             f"({type(exc).__name__})") from None
        self.cluster.bytes_received += m_kw.nbytes
        _cvb.topic_fields(m_kw, m_k)

    def gather(self, mu: np.ndarray, m_dk: np.ndarray) -> None:
        """Copy the shards' mu and m_dk into ``mu`` and ``m_dk``."""
        if not self.stale:
            return
        for spec, part in zip(self.specs, self._gathered()):
            p0, p1 = int(self.pair_ptr[spec.first_doc]), int(self.pair_ptr[spec.end_doc])
            mu[p0:p1] = part.mu
            m_dk[spec.first_doc:spec.end_doc] = part.m_dk
        self.stale = False


# ------------------------------------------------------------------ fold-in of evaluation
FOLD_IN_SHARDS_PER_WORKER = 2      # more pieces than workers: a slow one holds up less


def _fold_in_documents(store: CorpusStore, part: str, rows: np.ndarray | None = None):
    """(observed tokens, held-out entries) of the test documents or, for Protocol B, of the
    training documents; only the documents ``rows`` when given (the in-training curve's)."""
    from topictk.inference.base import take_documents
    if part == "test":
        observed, heldout = store.test_observed(), store.test_heldout()
    else:
        observed, heldout = store.train(), store.train_heldout()
    if rows is None:
        return observed, heldout
    return take_documents(observed, rows), take_documents(heldout, rows)


def fold_in_shard(path: str, corpus_id: str, part: str, weights: np.ndarray, phi: np.ndarray,
                  alpha: np.ndarray, sweeps: int, burn_in: int, bounds: np.ndarray,
                  first_chunk: int, seed: int, pass_index: int,
                  rows: np.ndarray | None = None) -> np.ndarray:
    """The Gibbs fold-in of a block of chunks of documents (runs on a worker): p-hat of their
    held-out entries, each chunk with its own eval stream, as in the one-machine fold-in."""
    from topictk.inference.base import FoldInPlan, gibbs_fold_in
    from topictk.inference.perplexity import mixture_probabilities
    from topictk.streams import Streams, eval_key
    store = CorpusStore.open(path)
    if store.corpus_id != corpus_id:
        raise ClusterError(f"{path}: another corpus than the driver's")
    observed, heldout = _fold_in_documents(store, part, rows)
    a, b = int(bounds[0]), int(bounds[-1])
    obs_ptr, held_ptr = np.asarray(observed.doc_ptr), np.asarray(heldout.indptr)
    o0, o1, h0, h1 = int(obs_ptr[a]), int(obs_ptr[b]), int(held_ptr[a]), int(held_ptr[b])
    streams = Streams(seed)
    held_part = held_ptr[a:b + 1] - h0
    plan = FoldInPlan(int(sweeps), int(burn_in), np.asarray(bounds - a, dtype=np.int64),
                      [streams.derived(eval_key(pass_index, first_chunk + c))
                       for c in range(bounds.size - 1)], _worker_threads(),
                      np.diff(held_part) > 0)
    theta = gibbs_fold_in(weights, alpha, obs_ptr[a:b + 1] - o0, observed.words[o0:o1], plan)
    block = Documents(doc_ptr=None, words=None, indptr=held_part,
                      indices=heldout.indices[h0:h1], counts=heldout.counts[h0:h1])
    return mixture_probabilities(block, theta, phi, _worker_threads())


def cluster_fold_in(cluster: Cluster, store: CorpusStore, part: str, weights: np.ndarray,
                    phi: np.ndarray, alpha: np.ndarray, evaluation, seed: int,
                    pass_index: int, rows: np.ndarray | None = None) -> np.ndarray:
    """:func:`topictk.inference.sampled.fold_in_probabilities` on the cluster: the chunks of
    ``evaluation.chunk_docs`` documents (of the documents ``rows`` only, when given) cut
    into contiguous blocks, one task each, with the topics broadcast; the blocks' results put
    together in order. Every chunk is folded in with its own stream, so the numbers are the
    one-machine ones."""
    return with_recovery(cluster, "folding in again",
                         lambda: _fold_in_once(cluster, store, part, weights, phi, alpha,
                                               evaluation, seed, pass_index, rows))


def _fold_in_once(cluster: Cluster, store: CorpusStore, part: str, weights: np.ndarray,
                  phi: np.ndarray, alpha: np.ndarray, evaluation, seed: int,
                  pass_index: int, rows: np.ndarray | None) -> np.ndarray:
    from topictk.inference.base import chunk_bounds_by_docs
    observed, heldout = _fold_in_documents(store, part, rows)
    obs_ptr = np.asarray(observed.doc_ptr)
    bounds = chunk_bounds_by_docs(obs_ptr.size - 1, evaluation.chunk_docs)
    n_chunks = bounds.size - 1
    if n_chunks == 0 or int(np.asarray(heldout.indptr)[-1]) == 0:
        return np.zeros(int(np.asarray(heldout.indptr)[-1]), dtype=np.float64)
    client = cluster.client
    try:
        workers = cluster.workers()
        n_blocks = min(n_chunks, FOLD_IN_SHARDS_PER_WORKER * len(workers))
        cuts = chunk_bounds_by_tokens(np.ascontiguousarray(obs_ptr[bounds], dtype=np.int64),
                                      n_blocks)
        weights = np.ascontiguousarray(weights, dtype=np.float64)
        phi = np.ascontiguousarray(phi, dtype=np.float64)
        blocks = [(int(a), int(b)) for a, b in pairwise(cuts) if b > a]
        homes = [workers[i % len(workers)] for i in range(len(blocks))]
        used = sorted(set(homes))
        weights_f = cluster.copy_to(weights, used)
        phi_f = weights_f if phi is weights else cluster.copy_to(phi, used)
        futures = [client.submit(fold_in_shard, str(store.path), store.corpus_id, part,
                                 weights_f[home], phi_f[home], alpha, evaluation.fold_in_sweeps,
                                 evaluation.fold_in_burn_in, bounds[a:b + 1], a, seed,
                                 pass_index, rows, workers=[home], allow_other_workers=True,
                                 pure=False)
                   for (a, b), home in zip(blocks, homes)]
        parts = client.gather(futures, direct=True)
    except _loss_errors() as exc:
        raise WorkerLost(f"a Dask worker was lost during the fold-in ({type(exc).__name__})"
                         ) from None
    cluster.bytes_received += sum(p.nbytes for p in parts)
    return np.concatenate(parts)


# ------------------------------------------------------------------ fold-in of infer
def infer_block(topic_word: np.ndarray, alpha: np.ndarray, doc_ptr: np.ndarray,
                words: np.ndarray, sweeps: int, burn_in: int, seed: int,
                first_chunk: int) -> np.ndarray:
    """Topic proportions of a block of new documents (runs on a worker)."""
    from topictk.inference.base import FoldInPlan, gibbs_fold_in
    plan = FoldInPlan.for_infer(doc_ptr.size - 1, sweeps=sweeps, burn_in=burn_in, seed=seed,
                                threads=_worker_threads(), first_chunk=first_chunk)
    return gibbs_fold_in(topic_word.T, alpha, doc_ptr, words, plan)


def cluster_infer_blocks(cluster: Cluster, topic_word: np.ndarray, alpha: np.ndarray,
                         pieces, *, sweeps: int, burn_in: int, seed: int):
    """(first document, proportions) of every block of ``pieces`` (first document, doc_ptr,
    words, first chunk), folded in on the workers, in input order, with a few blocks per
    worker in flight. The streams are keyed by each block's first chunk, so the numbers are
    those of one machine; a block whose worker is lost is folded in here instead."""
    from collections import deque

    client = cluster.client
    workers = cluster.workers()
    topic_word = np.ascontiguousarray(topic_word, dtype=np.float64)
    copies = cluster.copy_to(topic_word, workers)
    window: deque = deque()

    def finish(item):
        start, ptr, words, first_chunk, future = item
        try:
            theta = future.result()
        except _loss_errors() as exc:
            log.warning("a Dask worker was lost during infer (%s); folding the block of "
                        "document %d in here", type(exc).__name__, start + 1)
            theta = infer_block(topic_word, alpha, ptr, words, sweeps, burn_in, seed,
                                first_chunk)
        cluster.bytes_received += theta.nbytes
        return start, theta

    for i, (start, ptr, words, first_chunk) in enumerate(pieces):
        home = workers[i % len(workers)]
        ptr = np.ascontiguousarray(ptr, dtype=np.int64)
        words = np.ascontiguousarray(words, dtype=np.int32)
        data = client.scatter([ptr, words], workers=[home], hash=False, direct=True)
        cluster.bytes_sent += ptr.nbytes + words.nbytes
        future = client.submit(infer_block, copies[home], alpha, *data, sweeps, burn_in, seed,
                               first_chunk, workers=[home], allow_other_workers=True,
                               pure=False)
        window.append((start, ptr, words, first_chunk, future))
        if len(window) >= 2 * len(workers):
            yield finish(window.popleft())
    while window:
        yield finish(window.popleft())


# ------------------------------------------------------------- mini-batch local steps
def local_statistics_piece(path: str, corpus_id: str, doc_ids: np.ndarray, weights: np.ndarray,
                           alpha: np.ndarray, sweeps: int, burn_in: int, chunk_docs: int,
                           chunks: tuple[int, int], seed: int, t: int):
    """The local Gibbs chains of the chunks [c0, c1) of one mini-batch (runs on a worker):
    the batch is read from this worker's memory-mapped store as the driver reads it, so the
    batch's local word ids are the driver's; each chunk draws from its own local stream.
    Returns the kept-sweep sums of n_kw (V_B, K) over those chunks, of n_dk for their
    documents, and the rounding fallbacks."""
    from topictk.corpus.batches import gather_batch
    from topictk.inference import _minibatch
    from topictk.inference.base import chunk_bounds_by_docs
    from topictk.streams import Streams, local_key
    doc_ptr, words, _ = _training_documents(path, corpus_id)
    batch = gather_batch(doc_ptr, words, doc_ids)
    bounds = chunk_bounds_by_docs(doc_ids.size, chunk_docs)
    c0, c1 = chunks
    d0, d1 = int(bounds[c0]), int(bounds[c1])
    t0, t1 = int(batch.doc_ptr[d0]), int(batch.doc_ptr[d1])
    alpha = np.atleast_2d(alpha)
    streams = Streams(seed)
    word_topic = np.zeros((batch.vocab.size, weights.shape[1]), dtype=np.int64)
    doc_topic = np.zeros((d1 - d0, weights.shape[1]), dtype=np.int64)
    fallbacks = _minibatch.local_gibbs(
        np.ascontiguousarray(batch.doc_ptr[d0:d1 + 1] - t0), batch.words[t0:t1],
        weights, np.ascontiguousarray(alpha if alpha.shape[0] == 1 else alpha[d0:d1]),
        int(sweeps), int(burn_in), np.ascontiguousarray(bounds[c0:c1 + 1] - d0),
        [streams.derived(local_key(t, c)) for c in range(c0, c1)], word_topic, doc_topic,
        _worker_threads())
    return word_topic, doc_topic, int(fallbacks)


def cluster_local_statistics(cluster: Cluster, store: CorpusStore, doc_ids: np.ndarray,
                             weights: np.ndarray, alpha: np.ndarray, inf, seed: int,
                             t: int) -> tuple[np.ndarray, np.ndarray, int]:
    """The kept-sweep sums of :func:`topictk.inference.minibatch.local_statistics` with the
    chunks of the mini-batch cut into one contiguous piece per worker. The sums are of
    integers, so adding the pieces gives the one-machine numbers exactly; a piece whose
    worker is lost is computed again (its inputs are all here and in the store)."""
    from topictk.inference.base import chunk_bounds_by_docs
    n_chunks = chunk_bounds_by_docs(doc_ids.size, inf["chunk_docs"]).size - 1
    return with_recovery(cluster, "computing the mini-batch's local statistics again",
                         lambda: _local_statistics_once(
                             cluster, store, doc_ids, weights, alpha, inf, seed, t, n_chunks))


def _local_statistics_once(cluster: Cluster, store: CorpusStore, doc_ids, weights, alpha, inf,
                           seed: int, t: int, n_chunks: int):
    client = cluster.client
    try:
        pieces, homes = spread(cluster.workers(), n_chunks)
        weights = np.ascontiguousarray(weights, dtype=np.float64)
        copies = cluster.copy_to(weights, sorted(set(homes)))
        doc_ids = np.ascontiguousarray(doc_ids, dtype=np.int64)
        cluster.bytes_sent += doc_ids.nbytes * len(pieces)
        futures = [client.submit(local_statistics_piece, str(store.path), store.corpus_id,
                                 doc_ids, copies[home], alpha, inf["sweeps"],
                                 inf["local_burn_in"], inf["chunk_docs"], piece, seed, t,
                                 workers=[home], allow_other_workers=True, pure=False)
                   for piece, home in zip(pieces, homes)]
        parts = client.gather(futures, direct=True)
    except _loss_errors() as exc:
        raise WorkerLost(f"a Dask worker was lost during a mini-batch update "
                         f"({type(exc).__name__})") from None
    word_topic = parts[0][0]
    for part in parts[1:]:
        word_topic += part[0]
    doc_topic = np.concatenate([part[1] for part in parts])
    cluster.bytes_received += sum(p[0].nbytes + p[1].nbytes for p in parts)
    kept = inf["sweeps"] - inf["local_burn_in"]
    return word_topic / kept, doc_topic / kept, sum(p[2] for p in parts)


# ------------------------------------------------------- online VB's mini-batch E-step
def batch_estep_piece(path: str, corpus_id: str, doc_ids: np.ndarray, B: np.ndarray,
                      shift: np.ndarray, alpha: np.ndarray, tol: float, max_iter: int,
                      blocks: list[tuple[int, int]]) -> list:
    """The cold E-steps of some blocks of one online-VB mini-batch (runs on a worker): the
    batch is read from this worker's store as the driver reads it, so its local word ids are
    the driver's. One (sstats, gamma, bound, iterations) per block, each block's statistics
    summed on their own."""
    from topictk.corpus.batches import gather_rows
    from topictk.inference.variational import block_estep
    indptr, indices, counts = gather_rows(_worker_store(path, corpus_id).train(), doc_ids)
    _, local = np.unique(indices, return_inverse=True)
    csr = (indptr, np.ascontiguousarray(local, dtype=np.int32), counts)
    return [block_estep(csr, B, shift, alpha, block, tol, max_iter, True, _worker_threads())
            for block in blocks]


def cluster_batch_estep(cluster: Cluster, store: CorpusStore, doc_ids: np.ndarray,
                        B: np.ndarray, shift: np.ndarray, alpha: np.ndarray, tol: float,
                        max_iter: int, blocks: list[tuple[int, int]]) -> list:
    """The E-step blocks of one online-VB mini-batch spread over the workers in contiguous
    runs, their results returned block by block in order (the driver adds the blocks'
    statistics in that order, as on one machine). Lost work is done again."""
    return with_recovery(cluster, "computing the mini-batch's E-step again",
                         lambda: _batch_estep_once(cluster, store, doc_ids, B, shift, alpha,
                                                    tol, max_iter, blocks))


def _batch_estep_once(cluster: Cluster, store: CorpusStore, doc_ids, B, shift, alpha, tol,
                      max_iter, blocks):
    client = cluster.client
    try:
        ranges, homes = spread(cluster.workers(), len(blocks))
        runs = [blocks[a:b] for a, b in ranges]
        B = np.ascontiguousarray(B, dtype=np.float64)
        copies = cluster.copy_to(B, sorted(set(homes)))
        doc_ids = np.ascontiguousarray(doc_ids, dtype=np.int64)
        cluster.bytes_sent += (doc_ids.nbytes + shift.nbytes) * len(runs)
        futures = [client.submit(batch_estep_piece, str(store.path), store.corpus_id, doc_ids,
                                 copies[home], shift, alpha, float(tol), int(max_iter), run,
                                 workers=[home], allow_other_workers=True, pure=False)
                   for run, home in zip(runs, homes)]
        parts = client.gather(futures, direct=True)
    except _loss_errors() as exc:
        raise WorkerLost(f"a Dask worker was lost during an online-VB E-step "
                         f"({type(exc).__name__})") from None
    results = [block for part in parts for block in part]
    cluster.bytes_received += sum(r[0].nbytes + r[1].nbytes for r in results)
    return results


# -------------------------------------------------------------- batch VB's E-step
def corpus_estep_piece(path: str, corpus_id: str, B: np.ndarray, shift: np.ndarray,
                       alpha: np.ndarray, start: str, tol: float, max_iter: int,
                       blocks: list[tuple[int, int]], gammas: list[np.ndarray]) -> list:
    """The E-steps of some blocks of the training documents (runs on a worker), each block
    from its rows of gamma (warm and best starts): one (sstats, gamma, bound, iterations)
    per block."""
    from topictk.inference.variational import block_estep
    train = _worker_store(path, corpus_id).train()
    csr = (train.indptr, train.indices, train.counts)
    return [block_estep(csr, B, shift, alpha, block, tol, max_iter, True, _worker_threads(),
                        start=start, gamma=np.array(gamma, dtype=np.float64))
            for block, gamma in zip(blocks, gammas)]


def cluster_corpus_estep(cluster: Cluster, store: CorpusStore, B: np.ndarray, shift: np.ndarray,
                         alpha: np.ndarray, start: str, tol: float, max_iter: int,
                         blocks: list[tuple[int, int]], gamma: np.ndarray) -> list:
    """Batch VB's E-step blocks spread over the workers in contiguous runs; every block's
    result comes back in block order (the driver adds the statistics in that order, as on
    one machine). ``gamma`` is read, not written: lost work is simply done again."""
    return with_recovery(cluster, "computing the E-step again",
                         lambda: _corpus_estep_once(cluster, store, B, shift, alpha, start,
                                                     tol, max_iter, blocks, gamma))


def _corpus_estep_once(cluster: Cluster, store: CorpusStore, B, shift, alpha, start, tol,
                       max_iter, blocks, gamma):
    client = cluster.client
    try:
        ranges, homes = spread(cluster.workers(), len(blocks))
        runs = [blocks[a:b] for a, b in ranges]
        copies = cluster.copy_to(np.ascontiguousarray(B, dtype=np.float64), sorted(set(homes)))
        futures = []
        for run, home in zip(runs, homes):
            rows = [gamma[d0:d1] for d0, d1 in run]
            cluster.bytes_sent += shift.nbytes + sum(r.nbytes for r in rows)
            futures.append(client.submit(corpus_estep_piece, str(store.path), store.corpus_id,
                                         copies[home], shift, alpha, start, float(tol),
                                         int(max_iter), run, rows, workers=[home],
                                         allow_other_workers=True, pure=False))
        parts = client.gather(futures, direct=True)
    except _loss_errors() as exc:
        raise WorkerLost(f"a Dask worker was lost during an E-step ({type(exc).__name__})"
                         ) from None
    results = [block for part in parts for block in part]
    cluster.bytes_received += sum(r[0].nbytes + r[1].nbytes for r in results)
    return results
