"""Bounds on what a config or an input file can make topictk ask of the machine.

Threads, JSON nesting, the dense arrays of a model and the length of a value quoted in an
error message all come from files a user (or anyone who wrote the file) controls; each is
checked here against a limit before it can crash the process (a segfault from 100,000
OpenMP threads, a RecursionError from JSON nested 100,000 deep, an allocation the machine
cannot hold, an error message that is gigabytes long).
"""
from __future__ import annotations

import json
import logging
import os
import reprlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

log = logging.getLogger("topictk")

# threads per core allowed before a thread count is lowered; never fewer than MIN_THREAD_CAP,
# so that a config written for a small laptop (threads: 8) runs unchanged on a 1-core machine
THREADS_PER_CORE = 4
MIN_THREAD_CAP = 8

# deepest JSON nesting read from an input line, a manifest or a metrics log; topictk's own
# files nest 4 deep, metadata fields rarely more than 2
MAX_JSON_DEPTH = 64


def cores() -> int:
    """CPUs this process may run on (its affinity mask where the system reports one)."""
    try:
        return max(len(os.sched_getaffinity(0)), 1)
    except (AttributeError, OSError):
        return max(os.cpu_count() or 1, 1)


def cpu_quota(root: str = "/sys/fs/cgroup") -> int | None:
    """The CPUs a cgroup v2 quota (``cpu.max``: QUOTA PERIOD) lets this process use, rounded
    up; None without a quota or where there is no such file."""
    try:
        text = (Path(root) / "cpu.max").read_text().split()
    except OSError:
        return None
    if len(text) != 2 or text[0] == "max":
        return None
    try:
        quota, period = int(text[0]), int(text[1])
    except ValueError:
        return None
    return max(1, -(-quota // period)) if quota > 0 and period > 0 else None


def available_cores() -> int:
    """``training.threads: auto``: the CPUs this process may run on when asked (its affinity
    mask), fewer when a cgroup quota allows fewer."""
    quota = cpu_quota()
    return cores() if quota is None else min(cores(), quota)


def resolve_threads(setting, name: str) -> int:
    """The thread count of ``setting``: ``auto`` is :func:`available_cores`, a number is itself;
    either lowered to :func:`max_threads` (:func:`cap_threads`)."""
    if setting == "auto":
        return available_cores()
    return cap_threads(int(setting), name)


def max_threads() -> int:
    """The most threads topictk starts: the cores times THREADS_PER_CORE, at least
    MIN_THREAD_CAP."""
    return max(cores() * THREADS_PER_CORE, MIN_THREAD_CAP)


def cap_threads(threads: int, name: str) -> int:
    """``threads`` lowered to :func:`max_threads`, with one log line when it is lowered. More
    threads than that only slow a run down (the numbers never depend on the thread count),
    and OpenMP cannot start hundreds of thousands: it aborts or crashes the process."""
    cap = max_threads()
    if threads > cap:
        log.warning("%s = %s is more than this machine can use (%d cores x %d); using %d "
                    "threads", name, short(threads), cores(), THREADS_PER_CORE, cap)
        return cap
    return threads


_repr = reprlib.Repr()
_repr.maxstring = 60
_repr.maxother = 60
_repr.maxlong = 40
_repr.maxlist = _repr.maxtuple = _repr.maxdict = _repr.maxset = 6
_repr.maxlevel = 3


def short(value: Any, limit: int = 80) -> str:
    """``repr(value)`` cut to about ``limit`` characters, in time and memory bounded whatever
    the value (a YAML alias bomb expands to 10^9 elements that ``repr`` would spell out)."""
    text = _repr.repr(value)
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    return text


def one_line(text: str, limit: int = 200) -> str:
    """``text`` on one line (runs of white space, newlines included, become one space), cut to
    ``limit`` characters."""
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def text_lines(text: str) -> list[str]:
    """The lines of ``text``, split at ``\\n``, ``\\r\\n`` and ``\\r`` only: ``str.splitlines``
    also splits at form feeds, U+0085, U+2028 and U+2029, which may stand inside a word of a
    vocabulary file, and would shift every later word id by one."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def json_too_deep(text: str, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether ``text`` (one JSON document) nests arrays and objects more than ``limit``
    deep. Python's parser recurses once per level and fails with RecursionError near 1,000
    levels; a text with fewer brackets than ``limit`` is passed at once."""
    if text.count("[") + text.count("{") <= limit:
        return False
    depth = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            if depth > limit:
                return True
        elif ch in "]}":
            depth -= 1
    return False


def json_loads(text: str | bytes, limit: int = MAX_JSON_DEPTH) -> Any:
    """``json.loads`` that refuses nesting deeper than ``limit`` with the JSONDecodeError every
    caller already handles (Python's parser would recurse until RecursionError)."""
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text).decode("utf-8")
    if json_too_deep(text, limit):
        raise json.JSONDecodeError(f"nested more than {limit} levels deep", text, 0)
    return json.loads(text)


# ---------------------------------------------------------------- memory

def available_memory() -> int | None:
    """Bytes of memory available for new allocations without swapping (Linux MemAvailable),
    else the free physical memory, or None when the system does not say."""
    try:
        with open("/proc/meminfo", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def gib(n_bytes: float) -> str:
    """A size for a message: ``12.3 GiB``, ``850 MiB``."""
    if n_bytes >= 2**30:
        return f"{n_bytes / 2**30:,.1f} GiB"
    return f"{n_bytes / 2**20:,.0f} MiB"


def dense_bytes(arrays: Iterable[tuple[str, tuple[int, ...], int]]) -> int:
    """Total bytes of arrays given as (name, shape, bytes per element)."""
    total = 0
    for _, shape, itemsize in arrays:
        n = itemsize
        for dim in shape:
            n *= int(dim)
        total += n
    return total


def at_peak(held: Iterable[tuple[str, tuple[int, ...], int]],
            *phases: Iterable[tuple[str, tuple[int, ...], int]]
            ) -> list[tuple[str, tuple[int, ...], int]]:
    """The arrays a run holds at its peak: ``held``, kept from start to end (the state), and
    the largest of ``phases``, the arrays of the parts of a step that never overlap (an
    E-step, an M-step, an update, an evaluation), made and freed in turn."""
    largest = max((list(phase) for phase in phases), key=dense_bytes, default=[])
    return list(held) + largest


# a documented knob: the most memory, in bytes (suffixes K, M, G, T allowed), a run may
# count on, below whatever the system allows (e.g. on a machine shared with other work)
MEMORY_LIMIT_ENV = "TOPICTK_MEMORY_LIMIT"


def _read_int(path: str) -> int | None:
    try:
        with open(path, encoding="ascii", errors="replace") as f:
            text = f.read().strip()
        return int(text) if text.isdigit() else None
    except (OSError, ValueError):
        return None


def _own_usage(field: str) -> int:
    """A size of this process from /proc/self/status (``VmSize``, ``VmData``), bytes; 0 when
    the system does not say."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _cgroup_room() -> int | None:
    """What the memory cgroup of this process still allows (its limit less its usage), v2
    or v1; None when there is no limit."""
    for limit_file, usage_file in (("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
                                   ("/sys/fs/cgroup/memory/memory.limit_in_bytes",
                                    "/sys/fs/cgroup/memory/memory.usage_in_bytes")):
        limit = _read_int(limit_file)       # "max" (no limit) reads as None
        if limit is not None and limit < 2**60:  # v1 writes "no limit" as a huge number
            return max(limit - (_read_int(usage_file) or 0), 0)
    return None


def parse_size(text: str) -> int | None:
    """Bytes of ``12345``, ``800M``, ``2G``, ``1.5T`` (powers of 1024), or None when ``text``
    is not a size."""
    text = text.strip().upper().removesuffix("B").removesuffix("I")
    scale = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}.get(text[-1:], 1)
    number = text[:-1] if scale > 1 else text
    try:
        value = float(number)
    except ValueError:
        return None
    return int(value * scale) if value >= 0 and value < 2**63 / scale else None


def memory_limit() -> tuple[int, str] | None:
    """The most memory a run can still allocate and where that bound comes from: the
    smallest of the memory available (MemAvailable), the room left by the address-space and
    data limits of this process (``ulimit -v``, ``ulimit -d``), the room left in its memory
    cgroup, and TOPICTK_MEMORY_LIMIT; None when nothing is known."""
    import resource

    found: list[tuple[int, str]] = []
    available = available_memory()
    if available is not None:
        found.append((available, "memory available"))
    for name, option, field, what in (("RLIMIT_AS", "-v", "VmSize", "address space"),
                                      ("RLIMIT_DATA", "-d", "VmData", "data segment")):
        try:
            soft, _ = resource.getrlimit(getattr(resource, name))
        except (AttributeError, ValueError, OSError):
            continue
        if soft != resource.RLIM_INFINITY:
            found.append((max(soft - _own_usage(field), 0),
                          f"room left by the {what} limit of this process (ulimit {option})"))
    room = _cgroup_room()
    if room is not None:
        found.append((room, "room left in this process's memory cgroup (memory.max)"))
    knob = os.environ.get(MEMORY_LIMIT_ENV)
    if knob:
        size = parse_size(knob)
        if size is not None:
            found.append((size, f"{MEMORY_LIMIT_ENV}={knob} setting"))
        else:
            log.warning("%s=%s is not a size in bytes (e.g. 8G); ignored", MEMORY_LIMIT_ENV,
                        short(knob))
    return min(found, key=lambda item: item[0]) if found else None


def describe_arrays(arrays: list[tuple[str, tuple[int, ...], int]], most: int = 3) -> str:
    """The largest ``most`` arrays of an estimate, for a message: ``topic-word counts 1,000 x
    50,000 x 4 B = 191 MiB``."""
    ranked = sorted(arrays, key=lambda a: dense_bytes([a]), reverse=True)
    parts = [f"{name} {' x '.join(f'{int(d):,}' for d in shape)} x {itemsize} B"
             f" = {gib(dense_bytes([(name, shape, itemsize)]))}"
             for name, shape, itemsize in ranked[:most]]
    if len(ranked) > most:
        parts.append(f"{len(ranked) - most} smaller")
    return ", ".join(parts)


def memory_shortfall(arrays: list[tuple[str, tuple[int, ...], int]],
                     limit: tuple[int, str] | None = None) -> str | None:
    """None when the arrays fit in what the machine allows, else the sentence that says how
    much they need (the largest arrays with their shapes), the limit and where it comes from.

    ``arrays`` are (name, shape, bytes per element), e.g. ``("topic-word", (K, V), 8)``;
    ``limit`` is (bytes, its source) and defaults to :func:`memory_limit` (no check when
    nothing is known)."""
    if limit is None:
        limit = memory_limit()
    if limit is None:
        return None
    need = dense_bytes(arrays)
    room, source = limit
    if need <= room:
        return None
    return (f"needs about {gib(need)} of memory ({describe_arrays(arrays)}), more than the "
            f"{gib(room)} allowed (the {source})")



def out_of_memory(what: str, estimate: int | None, fix: str) -> str:
    """The message of an allocation that failed while ``what`` (the run or output, named)
    was being done: the estimate made beforehand when there is one, what is allowed now and
    by what, and ``fix``."""
    known = f"estimated at about {gib(estimate)}; " if estimate else ""
    limit = memory_limit()
    allowed = f"{gib(limit[0])} now allowed by the {limit[1]}" if limit else "no limit known"
    return f"{what}: out of memory ({known}{allowed}); {fix}"

# ------------------------------------------------------------- local Dask workers

# memory of one local Dask worker before it holds any shard: its process with topictk and
# NumPy loaded, and its nanny (about 80 MiB measured on Linux, rounded up)
WORKER_BYTES = 100 * 2**20


def max_local_workers() -> tuple[int, str]:
    """The most worker processes a local Dask cluster may start here, and why: one thread
    each, so no more than :func:`max_threads`, and no more than the memory allowed holds
    (WORKER_BYTES each, before their shards)."""
    cap = max_threads()
    why = f"{cores()} cores x {THREADS_PER_CORE} single-thread workers"
    limit = memory_limit()
    if limit is not None and limit[0] // WORKER_BYTES < cap:
        cap = max(int(limit[0] // WORKER_BYTES), 1)
        why = f"{gib(limit[0])} of memory ({limit[1]}) at {gib(WORKER_BYTES)} a worker"
    return cap, why


def local_workers_problem(workers: int) -> str | None:
    """None when this machine can run ``workers`` local Dask worker processes, else what is
    wrong and the fix, for a message that names the option first."""
    cap, why = max_local_workers()
    if workers <= cap:
        return None
    return (f"{workers:,} worker processes are more than this machine can run (at most {cap}: "
            f"{why}); give at most {cap}, or --scheduler to use a cluster of more machines")
