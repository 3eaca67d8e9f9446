"""Permission bits for files and directories written through temporary names.

``tempfile.mkstemp`` creates files 0600 and ``mkdtemp`` directories 0700 whatever the umask;
the atomic writers (:func:`topictk.training.checkpoint.atomic_write_bytes`, the corpus store's
``write_store``) give what they publish the mode ``open`` or ``mkdir`` would have given it.
"""
from __future__ import annotations

import functools
import os
import stat
from pathlib import Path


@functools.lru_cache(maxsize=1)
def umask() -> int:
    """The process umask, read once (``umask.cache_clear()`` after changing it).

    Linux reports it in /proc/self/status, which changes nothing; elsewhere it is read by
    setting and restoring it, which briefly gives files other threads create mode 0666/0777:
    caching makes that happen once per process, not once per write."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def new_file_mode() -> int:
    """The mode of a new regular file: 0o666 & ~umask."""
    return 0o666 & ~umask()


def new_dir_mode() -> int:
    """The mode of a new directory: 0o777 & ~umask."""
    return 0o777 & ~umask()


def replacement_mode(path: Path, default: int) -> int:
    """The permission bits of the existing ``path`` (what its replacement keeps), or
    ``default`` when there is none."""
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        return default
