"""Running a family's work on a Dask cluster (docs/cluster.md): one map-and-merge for all.

A :class:`Cluster` is a Dask client connected to a running scheduler (``training.scheduler``)
or to a local cluster of worker processes started for one run (``training.dask_workers``).
Dask is an optional extra: it is imported here only, inside the functions that need it, so
topictk works without it.

The workers read the corpus from the store's path, memory-mapped as on one machine: only
counts, assignments and random-stream states travel, never the corpus. Before the first step
every worker opens the store and compares its corpus id (a hash of the vocabulary and of
every array), its topictk version and its compiled kernels with the driver's; a worker that
differs stops the run with a message naming it and the path.

A family's cluster code is a :class:`ClusterTask`: its *piece*, the function a worker runs on
one part of the work, and its *merge*, which puts the results of consecutive pieces together.
:func:`map_merge` runs the pieces on the workers and merges their results in piece order, on
the driver or among the workers (a fixed-order tree: the same numbers either way), and does
the work again when a worker is lost; :func:`map_in_order` streams the results of a long
input. A chain whose state lives on the workers between steps (Gibbs and CVB0 shards) keeps
it in :class:`Shards`, whose :meth:`Shards.step` runs a task on the shards in the same way.
The families' pieces sit beside their drivers (``gibbs_shards``, ``cvb_shards``,
``minibatch``, ``variational``, ``sampled``).
"""
from __future__ import annotations

import logging
import signal
import sys
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, fields, is_dataclass
from functools import reduce
from itertools import pairwise
from typing import Any, TypeVar

import numpy as np

from topictk.config.loader import scheduler_problem
from topictk.corpus.store import CorpusStore
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


class ShardMissing(ClusterError):
    """A shard's state is not on the worker that was asked for it (lost with its worker)."""


class SendFailed(ClusterError):
    """Data sent to a worker that the scheduler had removed meanwhile (lost with it)."""


#: times one step recovers from lost workers before the run stops
MAX_RECOVERIES = 3
#: copies of an array the driver sends to workers at the same time
MAX_SENDS = 8
# from this many workers on, an array every worker needs (a step's shared arrays) is sent
# once and passed down a binary tree of the workers, so that the driver's sending does not
# grow with them; on fewer it is sent to each directly (one hop less)
RELAY_FROM = 4


def _loss_errors() -> tuple[type[BaseException], ...]:
    """What Dask raises when a worker holding or computing a needed result is gone."""
    import concurrent.futures

    import distributed
    return (concurrent.futures.CancelledError, distributed.KilledWorker, OSError, ShardMissing,
            SendFailed)


@contextmanager
def lost_as(doing: str):
    """Dask's errors of a lost worker raised as :class:`WorkerLost`, the message saying what
    was under way (``doing``: "during a sweep")."""
    try:
        yield
    except _loss_errors() as exc:
        raise WorkerLost(f"a Dask worker was lost {doing} ({type(exc).__name__})") from None


def send_to(client, data, address: str, **options):
    """``client.scatter(data)`` straight to the worker at ``address``. When that worker dies
    between receiving the data and the scheduler recording it, the scheduler answers with a
    KeyError naming the worker: that is a lost worker (:class:`SendFailed`), not a fault."""
    try:
        return client.scatter(data, workers=[address], hash=False, direct=True, **options)
    except KeyError as exc:
        if exc.args and exc.args[0] == address:
            raise SendFailed(f"worker {address} was removed while data was sent to it") from None
        raise


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
        self.bytes_between = 0       # what the workers sent each other (relays, merges)
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
                "cluster_bytes_workers": self.bytes_between,
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
        """One copy of ``array`` on each of ``workers``: {address: future}. From RELAY_FROM
        workers on it is sent from here to the first only, and each worker's copy is taken
        from its parent's in a binary tree of the workers (worker i from worker (i - 1) // 2:
        depth log2 W, each worker passing it on at most twice), a task each; on fewer it is
        sent from here to each directly. (Not Dask's broadcast, which replicates through the
        scheduler afterwards and waits for ever on a worker that has just died.)"""
        from concurrent.futures import ThreadPoolExecutor

        def send(address: str):
            return send_to(self.client, array, address, timeout=self.timeout)

        began = time.perf_counter()
        if len(workers) == 1:
            copies = {workers[0]: send(workers[0])}
            self.bytes_sent += array.nbytes
        elif len(workers) >= RELAY_FROM:
            held = [send(workers[0])]
            for i, address in enumerate(workers[1:], start=1):
                held.append(self.client.submit(_relay, held[(i - 1) // 2], workers=[address],
                                               allow_other_workers=True, pure=False))
            copies = dict(zip(workers, held))
            self.bytes_sent += array.nbytes
            self.bytes_between += array.nbytes * (len(workers) - 1)
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


# ------------------------------------------------------------------ recovery
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


def runs(n_items: int, n_workers: int) -> list[tuple[int, int]]:
    """``n_items`` items (chunks, blocks) cut into one contiguous run per worker (fewer when
    there are fewer items): the runs' [begin, end)."""
    n_runs = max(1, min(n_items, n_workers))
    cuts = np.linspace(0, n_items, n_runs + 1).round().astype(int)
    return [(int(a), int(b)) for a, b in pairwise(cuts) if b > a]


# ------------------------------------------------------------------ on the workers
@dataclass(frozen=True)
class StoreRef:
    """The corpus store as the workers find it: its path (the same on every host) and the
    driver's corpus id, which a worker's copy must have."""

    path: str
    corpus_id: str

    @classmethod
    def of(cls, store: CorpusStore) -> StoreRef:
        return cls(str(store.path), store.corpus_id)

    def open(self) -> CorpusStore:
        """The store as this worker opened it (once), checked to be the driver's."""
        key = (self.path, self.corpus_id)
        if key not in _STORES:
            store = CorpusStore.open(self.path)
            if store.corpus_id != self.corpus_id:
                raise ClusterError(f"{self.path}: another corpus than the driver's (corpus id "
                                   f"{store.corpus_id[:12]}, expected {self.corpus_id[:12]})")
            _STORES[key] = store
        return _STORES[key]

    def training_documents(self):
        """(doc_ptr, words, word frequencies) of the store's training documents, kept by
        this worker (the frequencies are the SparseLDA pool sizes)."""
        key = (self.path, self.corpus_id)
        if key not in _OPENED:
            store = self.open()
            train = store.train()
            words = np.asarray(train.words)
            _OPENED[key] = (np.asarray(train.doc_ptr), words,
                            word_frequencies(words, store.n_words))
        return _OPENED[key]


# Each worker process keeps the stores it has opened, and their training documents, by path
# and corpus id.
_OPENED: dict[tuple[str, str], tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
_STORES: dict[tuple[str, str], CorpusStore] = {}


# The shards' parts of a chain's state that this worker process holds between steps, by key
# (run id, shard, step): a step's task takes its shard's part out and puts the new one in, so
# only the step's result travels, and one task per shard and step is scheduled.
_RESIDENT: dict[str, object] = {}


def _keep(part, key: str) -> str:
    _RESIDENT[key] = part
    return key


def _held(key: str, take: bool):
    if key not in _RESIDENT:
        raise ShardMissing(f"shard {key} is not held here (its worker was lost)")
    return _RESIDENT.pop(key) if take else _RESIDENT[key]


def _relay(value):
    """``value``, now also on this worker (a copy for the shards below it in the tree)."""
    return value


def _fetch(key: str, view: Callable | None = None):
    part = _held(key, take=False)
    return part if view is None else view(part)


def _forget_runs(runs_: list[str]) -> None:
    for key in [key for key in _RESIDENT if key.split("-", 1)[0] in runs_]:
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
        from topictk.inference import _heldout  # noqa: F401  (the compiled kernels)
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


def peak_rss() -> int:
    """The peak resident memory of this (worker) process so far, bytes."""
    import resource
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


def worker_threads() -> int:
    """The threads of the worker this runs on (1 outside a worker)."""
    try:
        from distributed import get_worker
        return max(1, int(get_worker().state.nthreads))
    except (ImportError, ValueError, AttributeError):
        return 1


# ------------------------------------------------------------------ the cluster map
@dataclass(frozen=True)
class ClusterTask:
    """A family's work on the cluster: its piece and its merge.

    ``piece(context, *shared, part)`` runs on a worker for each part of ``cut(n)`` (n: the
    workers, or the shards), the i-th part on worker i mod n; ``context`` goes with every
    piece, each array of ``shared`` is sent once to each worker that runs one. ``merge(a, b)``
    puts the results of two runs of consecutive pieces together (``a`` the earlier); without
    it the result is the list of the pieces' results. ``exact``: the merge gives the same
    numbers however the pieces are grouped (integer sums, concatenations), or the family sums
    in the tree of :func:`tree_reduce` on one machine too, so among the workers it may be
    that pairwise tree; else it runs in a chain, in piece order, as on the driver.
    ``on_workers``: merge among the workers, the driver receives the merged result
    only. ``doing`` and ``again`` say, in messages, what was under way when a worker was lost
    and what is done about it."""

    piece: Callable
    cut: Callable[[int], list]
    context: Any = None
    shared: tuple = ()
    merge: Callable | None = None
    exact: bool = True
    on_workers: bool = False
    doing: str = "during the work"
    again: str = "doing it again"


def nbytes(value) -> int:
    """The bytes of the arrays in ``value`` (nested in tuples, lists, dicts, dataclasses or
    objects with an ``nbytes``), what travels of it."""
    if isinstance(value, (tuple, list)):
        return sum(nbytes(v) for v in value)
    if isinstance(value, dict):
        return sum(nbytes(v) for v in value.values())
    if is_dataclass(value) and not hasattr(value, "nbytes"):
        return sum(nbytes(getattr(value, f.name)) for f in fields(value))
    size = getattr(value, "nbytes", 0)
    return size if isinstance(size, (int, np.integer)) else 0


def concatenated(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The merge of pieces that return the rows of consecutive documents."""
    return np.concatenate([a, b])


def merge_in_order(merge: Callable | None, results: list):
    """The driver's merge: the results added one after the other in piece order, as the
    one-machine code adds its blocks (or their list, without a merge)."""
    if merge is None:
        return list(results)
    return reduce(merge, results)


def merge_among_workers(client, task: ClusterTask, futures: list, homes: list[str],
                        count_moved: bool = False):
    """The future of the pieces' results merged on the workers, each merge on the worker of
    its earlier operand: a pairwise tree in piece order for an ``exact`` merge, a chain in
    piece order (the driver's order, operation for operation) for any other. With
    ``count_moved`` the results have a ``moved`` count of bytes, to which each merge adds its
    later operand's when that came from another worker."""
    def merged(a, b, home, b_home):
        if count_moved:
            return client.submit(_merge_moved, task.merge, a, b, b_home != home,
                                 workers=[home], allow_other_workers=True, pure=False)
        return client.submit(task.merge, a, b, workers=[home], allow_other_workers=True,
                             pure=False)

    level = list(zip(futures, homes))
    if not task.exact:
        total = level[0][0]
        for future, home in level[1:]:
            total = merged(total, future, level[0][1], home)
        return total
    return tree_reduce(level, lambda a, b: (merged(a[0], b[0], a[1], b[1]), a[1]))[0]


def tree_reduce(items: list, combine: Callable):
    """``items`` combined pairwise in order: each level combines items (0, 1), (2, 3), ...
    and carries an odd last one to the next, until one is left; the tree of
    :func:`merge_among_workers`, so that a family whose one-machine sum follows it gets the
    same floating-point numbers from the workers' merge."""
    level = list(items)
    while len(level) > 1:
        paired = [combine(a, b) for a, b in zip(level[::2], level[1::2])]
        level = paired + level[len(paired) * 2:]
    return level[0]


def _merge_moved(merge: Callable, a, b, moved: bool):
    """``merge(a, b)``, counting ``b``'s bytes as moved between workers when ``moved``."""
    out = merge(a, b)
    if moved:
        out.moved += nbytes(b)
    return out


def _shared_copies(cluster: Cluster, shared: tuple, workers: list[str]) -> list[dict]:
    """One {worker: future} per array of ``shared`` (an array given twice is sent once)."""
    sent: dict[int, dict] = {}
    for array in shared:
        if id(array) not in sent:
            sent[id(array)] = cluster.copy_to(array, workers)
    return [sent[id(array)] for array in shared]


def _submit(cluster: Cluster, task: ClusterTask, parts: list, homes: list[str]) -> list:
    """The futures of ``task.piece`` on every part, each on its home worker."""
    copies = _shared_copies(cluster, task.shared, sorted(set(homes)))
    futures = []
    for part, home in zip(parts, homes):
        cluster.bytes_sent += nbytes(task.context) + nbytes(part)
        futures.append(cluster.client.submit(task.piece, task.context,
                                             *(copy[home] for copy in copies), part,
                                             workers=[home], allow_other_workers=True,
                                             pure=False))
    return futures


def map_merge(cluster: Cluster, task: ClusterTask):
    """``task``'s pieces run on the workers and their results merged in piece order (on the
    workers when ``task.on_workers``); lost work is done again from the same inputs, at most
    MAX_RECOVERIES times (the driver holds them all, and the store the rest)."""
    return with_recovery(cluster, task.again, lambda: _map_once(cluster, task))


def _map_once(cluster: Cluster, task: ClusterTask):
    client = cluster.client
    with lost_as(task.doing):
        workers = cluster.workers()
        parts = list(task.cut(len(workers)))
        homes = [workers[i % len(workers)] for i in range(len(parts))]
        futures = _submit(cluster, task, parts, homes)
        if task.on_workers and task.merge is not None and len(futures) > 1:
            futures = [merge_among_workers(client, task, futures, homes)]
        results = client.gather(futures, direct=True)
    cluster.bytes_received += nbytes(results)
    began = time.perf_counter()
    merged = merge_in_order(task.merge, results)
    cluster.merge_seconds += time.perf_counter() - began
    return merged


def map_in_order(cluster: Cluster, task: ClusterTask, parts: Iterable) -> Iterator[tuple]:
    """(part, the result of ``task.piece`` on it) for each of ``parts`` (an iterable, read as
    the work goes), in order, with two pieces per worker in flight; each part travels to its
    worker directly. A piece whose worker is lost is run here instead (``task.again`` may
    name the part as ``{part}``)."""
    client = cluster.client
    workers = cluster.workers()
    copies = _shared_copies(cluster, task.shared, workers)
    window: deque = deque()

    def finish(part, future) -> tuple:
        try:
            if isinstance(future, BaseException):   # never sent: its worker was lost
                raise future
            result = future.result()
        except _loss_errors() as exc:
            log.warning("a Dask worker was lost %s (%s); %s", task.doing, type(exc).__name__,
                        task.again.format(part=part))
            result = task.piece(task.context, *task.shared, part)
        cluster.bytes_received += nbytes(result)
        return part, result

    for i, part in enumerate(parts):
        home = workers[i % len(workers)]
        try:
            sent = send_to(client, [part], home)[0]
        except _loss_errors() as exc:
            window.append((part, exc))
            continue
        cluster.bytes_sent += nbytes(part)
        window.append((part, client.submit(task.piece, task.context,
                                           *(copy[home] for copy in copies), sent,
                                           workers=[home], allow_other_workers=True,
                                           pure=False)))
        if len(window) >= 2 * len(workers):
            yield finish(*window.popleft())
    while window:
        yield finish(*window.popleft())


# ------------------------------------------------------------------ state on the workers
@dataclass(frozen=True)
class ShardSpec:
    """Which documents a shard holds and how its chunks cut them."""

    first_doc: int
    end_doc: int
    first_chunk: int
    bounds: np.ndarray   # chunk boundaries, in documents counted from first_doc

    @property
    def chunks(self) -> range:
        """The shard's chunks, numbered in the whole run."""
        return range(self.first_chunk, self.first_chunk + self.bounds.size - 1)


class Shards:
    """The shards of a chain whose state lives on the workers between steps: the chunks cut
    into one contiguous shard per worker, about equal in tokens, each with its home worker.
    A family gives :meth:`_part` (a shard's part of the state, as it travels) and runs its
    steps with :meth:`step`."""

    def __init__(self, cluster: Cluster, store: CorpusStore, doc_ptr: np.ndarray,
                 bounds: np.ndarray):
        self.cluster = cluster
        self.client = cluster.client
        self.store = StoreRef.of(store)
        self.doc_ptr = doc_ptr          # (D + 1) token offsets of the documents
        self.bounds = bounds
        self.n_chunks = bounds.size - 1
        self.run = uuid.uuid4().hex[:8]
        cluster.runs.append(self.run)
        self.shards = None        # the keys of the shards' parts of the state on their workers
        # per shard, the future of the merged result of the last step_relayed, on the shard's
        # worker or its parent's in the tree, which the shard's next step takes (None: no
        # step yet since the shards were sent out)
        self.pending: list | None = None
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
            with lost_as("while the shards were sent out"):
                self.client.wait_for_workers(1, timeout=self.cluster.timeout)
                self.homes = self._plan()
                kept = []
                for s, (spec, home) in enumerate(zip(self.specs, self.homes)):
                    part = self._part(spec, *arrays)
                    sent = send_to(self.client, part, home)
                    self.cluster.bytes_sent += nbytes(part)
                    kept.append(self.client.submit(_keep, sent, self._key(s), workers=[home],
                                                   allow_other_workers=True, pure=False))
                self.shards = self.client.gather(kept, direct=True)
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

    def step(self, task: ClusterTask):
        """One step of every shard: ``task.piece(shard's state, context, *shared, part)``
        with the s-th part of ``task.cut(shards)``, which returns the shard's new state (kept
        on its worker) and its result; the results merged in shard order on the driver."""
        with lost_as(task.doing):
            copies = _shared_copies(self.cluster, task.shared, sorted(set(self.homes)))
            parts = task.cut(len(self.specs))
            self.cluster.bytes_sent += nbytes(task.context) * len(parts)
            outs = self.submit_step(task.piece, lambda s: (
                task.context, *(copy[self.homes[s]] for copy in copies), parts[s]))
            results = self.client.gather(outs, direct=True)
        self.cluster.bytes_received += nbytes(results)
        began = time.perf_counter()
        merged = merge_in_order(task.merge, results)
        self.cluster.merge_seconds += time.perf_counter() - began
        return merged

    def step_relayed(self, task: ClusterTask):
        """One step of every shard whose results the workers merge and share among
        themselves: ``task.piece(shard's state, context, last, part)`` on each shard, with
        ``last`` the merged result of the shards' previous relayed step (None for the first
        since they were sent out), which the piece applies to its state before its step; the
        results merged by ``task.merge`` (``exact``) in a pairwise tree in shard order on the
        workers (:func:`merge_among_workers`, the root on shard 0's worker). The merged result
        goes down a binary tree of the shards to their next step: shard 0 has it, shard s
        takes it from the worker of shard (s - 1) // 2, and a shard with children keeps a copy
        for them. The driver sends each shard its part and receives the merged result once,
        so its traffic and work per step do not grow with the number of shards; a worker
        sends at most one merge operand per level of the tree and two copies of the
        result."""
        n = len(self.specs)
        last = self.pending or [None] * n
        with lost_as(task.doing):
            parts = task.cut(n)
            self.cluster.bytes_sent += nbytes(task.context) * len(parts) + nbytes(parts)
            outs = self.submit_step(task.piece, lambda s: (task.context, last[s], parts[s]))
            merged = (merge_among_workers(self.client, task, outs, self.homes, count_moved=True)
                      if n > 1 else outs[0])
            result = self.client.gather(merged, direct=True)
        # where each shard's next step finds the merged result: on its own worker (shard 0,
        # and a copy on each shard with children), else on its parent's
        held = [merged]
        for s in range(1, n):
            parent = held[(s - 1) // 2]
            held.append(self.client.submit(_relay, parent, workers=[self.homes[s]],
                                           allow_other_workers=True, pure=False)
                        if 2 * s + 1 < n else parent)
        self.pending = held
        size = nbytes(result)
        self.cluster.bytes_received += size
        crossed = sum(self.homes[s] != self.homes[(s - 1) // 2] for s in range(1, n))
        self.cluster.bytes_between += result.moved + crossed * size
        return result

    def _gathered(self, view: Callable | None = None) -> list:
        """The shards' parts of the state, brought back from their workers (``view(part)``
        of each, made on its worker, when given)."""
        with lost_as("while the shards' state was brought back"):
            parts = self.client.gather(
                [self.client.submit(_fetch, key, view, workers=[home],
                                    allow_other_workers=True, pure=False)
                 for key, home in zip(self.shards, self.homes)],
                direct=True)
        self.cluster.bytes_received += nbytes(parts)
        return parts

    def recovering(self, again: Callable[[WorkerLost], None], attempt: Callable[[], T]) -> T:
        """``attempt()`` with the recovery of :func:`with_recovery` on this cluster: after a
        lost worker, ``again(exc)`` goes back to the restart point (:meth:`restart`)."""
        return with_recovery(self.cluster, again, attempt)

    def restart(self, exc: WorkerLost, since: int, upto: int, unit: str) -> None:
        """Start a recovery from step ``since`` (whose whole state the driver holds, as the
        caller puts back) up to ``upto``: warn, and forget the shards on the workers, to be
        sent out again from that state."""
        self.cluster.check_connected()
        warn_redo(exc, since, upto, unit)
        self.release()
        self.stale = False

    def abandon(self) -> None:
        """The cluster is gone: its shards with it (the driver's state is what it holds)."""
        self.shards, self.stale, self.pending = None, False, None

    def release(self) -> None:
        """Forget the shards' states on every worker (the run's keys)."""
        self.pending = None
        if self.shards is not None:
            self.shards = None
            try:
                self.client.run(_forget_runs, [self.run], on_error="ignore")
            except _loss_errors():
                pass
