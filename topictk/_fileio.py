"""Atomic file writes, and the permission bits of what they publish.

A file is written to a temporary name beside its target, fsynced and renamed over it, so a
reader (or a process killed mid-write) sees the old file or the new one, never a part.
``tempfile.mkstemp`` creates files 0600 and ``mkdtemp`` directories 0700 whatever the umask;
:func:`atomic_write_bytes` and the corpus store's ``write_store`` give what they publish the
mode ``open`` or ``mkdir`` would have given it.

A temporary file is locked (``flock``) by its writer while it is written, so a later writer of
the same folder can tell the temporary file of a killed write (unlocked) from one being written
and remove it (:func:`remove_stale_temps`).
"""
from __future__ import annotations

import fcntl
import functools
import os
import re
import stat
import tempfile
import time
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


def atomic_write_bytes(path: Path, writer) -> None:
    """Call ``writer(file)`` on a temporary file beside ``path``, fsync, then rename.

    The file gets the mode of the file it replaces, or 0o666 & ~umask when it is new (as
    ``open`` would give it; ``mkstemp`` alone leaves 0600)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temps(path.parent, path.name)
    mode = replacement_mode(path, new_file_mode())
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.{TEMP_TAG}", suffix=".tmp",
                               dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            _lock_nowait(f.fileno())
            os.fchmod(f.fileno(), mode)
            writer(f)
            f.flush()
            os.fsync(f.fileno())
            os.replace(tmp, path)       # still locked: never taken for a killed write's
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(exc, OSError) and exc.filename is None:
            exc.filename = str(path)    # a failed write (disk full) names the file it was for
        raise
    try:
        dfd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:
        pass


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, lambda f: f.write(text.encode("utf-8")))


# the temporary names of atomic_write_bytes: "." + target name + ".topictk-" + 8 random
# characters (tempfile's) + ".tmp"; clean-up takes only names with topictk's tag, so a file of
# the user's named like another program's temporary file is never removed
TEMP_TAG = "topictk-"
_TEMP = re.compile(r"^\.(?P<target>.+)\." + TEMP_TAG + r"[a-z0-9_]{8}\.tmp$")


def is_temp_name(name: str) -> bool:
    """Whether ``name`` is the temporary name of an :func:`atomic_write_bytes` write."""
    return _TEMP.match(name) is not None


def _lock_nowait(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except OSError:
        return False


def remove_stale_temps(directory: Path, target: str | None = None,
                       min_age: float = 1.0) -> list[Path]:
    """Remove the temporary files that killed writes of :func:`atomic_write_bytes` left in
    ``directory`` (those of ``target`` only, when given); returns them.

    A temporary file is stale when no writer holds its lock; ``min_age`` seconds since its
    last change also guard the moment between its creation and its locking (0 when every
    writer of the folder holds another lock, as a run's writer does)."""
    removed = []
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return removed
    now = time.time()
    for entry in entries:
        match = _TEMP.match(entry.name)
        if not match or (target is not None and match.group("target") != target):
            continue
        try:
            if not entry.is_file(follow_symlinks=False):
                continue
            if now - entry.stat(follow_symlinks=False).st_mtime < min_age:
                continue
            fd = os.open(entry.path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
        except OSError:
            continue
        try:
            if _lock_nowait(fd):
                os.unlink(entry.path)
                removed.append(Path(entry.path))
        except OSError:
            pass
        finally:
            os.close(fd)
    return removed


def shown(path: str | Path) -> str:
    """A path as a message or page shows it: a relative path as given; an absolute one
    relative to the working directory when it lies under it (as a user there would type it),
    else as given."""
    text = str(path)
    if not os.path.isabs(text):
        return os.path.normpath(text)
    here = os.getcwd()
    try:
        inside = os.path.commonpath([here, text]) == here
    except ValueError:          # another drive
        return text
    return os.path.relpath(text, here) if inside else text
