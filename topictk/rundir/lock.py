"""One writer per run directory: an advisory lock held for the whole of ``topictk train``.

The lock is ``fcntl.flock`` on ``.topictk.lock`` in the run directory. The operating system
releases it when its holder exits, however it exits (a process killed by SIGKILL included), so
a lock is never left behind: the next writer simply takes it. While it is held the file names
the holder (process id, host, start time), which a refused writer reports; it is emptied when
the lock is released, so a run directory looks the same before and after a command that
changed nothing. Readers (``evaluate``, ``topics``, ``infer``) take no lock: every file they
read is replaced atomically (``model.npz``, checkpoints, samples) or appended line by line
(``metrics.jsonl``, whose reader stops at a partial last line).

``flock`` is not reliable on some network file systems (older NFS); there a second writer may
not be stopped.
"""
from __future__ import annotations

import datetime as _dt
import fcntl
import json
import os
import socket
import time
from pathlib import Path

from topictk.errors import TopictkError

LOCK_FILE = ".topictk.lock"


class RunLockedError(TopictkError):
    """Another process is writing the run directory."""


def _holder(fd: int) -> dict:
    """What the lock file says about its holder; it may take the holder a moment to write it."""
    for _ in range(20):
        try:
            text = os.pread(fd, 4096, 0).decode("utf-8", "replace").strip()
        except OSError:
            return {}
        if text:
            try:
                data = json.loads(text)
                return data if isinstance(data, dict) else {}
            except json.JSONDecodeError:
                pass
        time.sleep(0.01)
    return {}


class RunLock:
    """The writer's lock of ``run_dir``: ``with RunLock(run_dir):`` creates the directory if it
    has to (and removes it again on exit if nothing but the lock file was put in it), takes the
    lock or raises :class:`RunLockedError` at once, and releases it on exit."""

    def __init__(self, run_dir: str | Path):
        self.run_dir = Path(run_dir)
        self.path = self.run_dir / LOCK_FILE
        self._fd: int | None = None
        self._created: list[Path] = []

    def __enter__(self):
        self.acquire()
        return self

    def __exit__(self, *exc) -> bool:
        self.release()
        return False

    def acquire(self) -> None:
        missing = []
        folder = self.run_dir
        while not folder.exists() and folder != folder.parent:
            missing.append(folder)
            folder = folder.parent
        if self.run_dir.exists() and not self.run_dir.is_dir():
            return      # not a folder: the output checks say so, and nothing is written here
        try:
            self.run_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise TopictkError(f"{self.run_dir}: cannot create the run directory "
                               f"({exc.strerror or exc}); choose another output") from None
        self._created = missing             # deepest first
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
        except OSError as exc:
            self._remove_created()
            raise TopictkError(f"{self.path}: cannot open the run's lock file "
                               f"({exc.strerror or exc}); check the folder's permissions or "
                               f"choose another output") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = _holder(fd)
            os.close(fd)
            who = (f"process {holder.get('pid', '?')} on host {holder.get('host', '?')}, "
                   f"since {holder.get('since', '?')}") if holder else "another process"
            raise RunLockedError(f"{self.run_dir}: another topictk process is writing this run "
                                 f"({who}); wait for it to finish or stop it, or choose "
                                 f"another output") from None
        self._fd = fd
        since = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
        record = json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "since": since})
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, (record + "\n").encode("utf-8"), 0)
        except OSError:
            pass        # the lock holds without its note; a refused writer names no process

    def release(self) -> None:
        if self._fd is None:
            return
        try:
            os.ftruncate(self._fd, 0)
        except OSError:
            pass
        fcntl.flock(self._fd, fcntl.LOCK_UN)
        os.close(self._fd)
        self._fd = None
        if self._created:
            try:
                if [p.name for p in self.run_dir.iterdir()] == [LOCK_FILE]:
                    self.path.unlink()
            except OSError:
                pass
            self._remove_created()

    def _remove_created(self) -> None:
        for folder in self._created:
            try:
                folder.rmdir()      # only if empty
            except OSError:
                break
        self._created = []
