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


def memory_shortfall(arrays: list[tuple[str, tuple[int, ...], int]],
                     available: int | None = None) -> str | None:
    """None when the arrays fit in the available memory, else the sentence that says how
    much they need (each array's shape and element size) and how much there is.

    ``arrays`` are (name, shape, bytes per element), e.g. ``("topic-word", (K, V), 8)``;
    ``available`` defaults to :func:`available_memory` (no check when the system does not
    report it)."""
    if available is None:
        available = available_memory()
    if available is None:
        return None
    need = dense_bytes(arrays)
    if need <= available:
        return None
    parts = ", ".join(f"{name} {' x '.join(f'{int(d):,}' for d in shape)} x {itemsize} bytes"
                      for name, shape, itemsize in arrays)
    return f"needs about {gib(need)} for its dense arrays ({parts}), more than the " \
           f"{gib(available)} of memory available"
