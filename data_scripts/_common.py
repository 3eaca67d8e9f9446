"""Helpers shared by the scripts in ``data_scripts/``.

Not a command-line script itself. It provides:

* ``DataError`` / ``UsageError``: exceptions that the scripts turn into a one-line message
  on stderr and exit status 1 (bad input data, failed download) or 2 (bad command line);
* ``ArgumentParser``: an ``argparse.ArgumentParser`` whose errors are one line long;
* ``AtomicFile``: an output file written under a temporary name in the destination
  directory and moved into place with ``os.replace`` only on success;
* ``run_main``: runs a script's ``main`` function and maps exceptions to exit statuses.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, Any, NoReturn, final

EXIT_DATA_ERROR = 1
EXIT_USAGE_ERROR = 2


class DataError(Exception):
    """The input data (a file, a download) is not what was expected: exit status 1."""


class UsageError(Exception):
    """The command line asks for something impossible (e.g. a missing input file): exit status 2."""


def one_line(message: object) -> str:
    """Collapse a message to a single line."""
    return " ".join(str(message).split())


class ArgumentParser(argparse.ArgumentParser):
    """``argparse.ArgumentParser`` that reports usage errors on a single stderr line."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE_ERROR, f"{self.prog}: error: {one_line(message)} (see --help)\n")


def require_input_file(path: Path) -> None:
    """Raise ``UsageError`` unless ``path`` names an existing regular file."""
    if not path.exists():
        raise UsageError(f"{path}: no such file")
    if not path.is_file():
        raise UsageError(f"{path}: expected a regular file")


@final
class AtomicFile:
    """A file created next to ``path`` under a temporary name.

    ``commit()`` closes it and renames it to ``path`` (atomic on POSIX); ``discard()`` closes and
    deletes it. Used as a context manager it commits on success and discards on any exception.
    """

    def __init__(self, path: Path | str, mode: str = "w", encoding: str | None = "utf-8") -> None:
        self.path = Path(path)
        parent = self.path.parent
        if not parent.is_dir():
            raise UsageError(f"{self.path}: output directory {parent} does not exist")
        if self.path.is_dir():      # found now, not at the rename after all the work
            raise UsageError(f"{self.path}: is a directory; give the output file's name")
        try:
            fd, tmp = tempfile.mkstemp(dir=parent, prefix=f".{self.path.name}.", suffix=".tmp")
        except OSError as exc:
            raise UsageError(
                f"{self.path}: cannot create a file in {parent} ({exc.strerror or exc})"
            ) from None
        self.tmp_path = Path(tmp)
        if "b" in mode:
            self.file: IO[Any] = os.fdopen(fd, mode)
        else:
            self.file = os.fdopen(fd, mode, encoding=encoding, newline="\n")
        self._done = False

    def commit(self) -> Path:
        if not self._done:
            self._done = True
            self.file.close()
            try:
                os.chmod(self.tmp_path, 0o666 & ~_umask())
                os.replace(self.tmp_path, self.path)
            except BaseException:
                self.tmp_path.unlink(missing_ok=True)
                raise
        return self.path

    def discard(self) -> None:
        if not self._done:
            self._done = True
            try:
                self.file.close()
            finally:
                self.tmp_path.unlink(missing_ok=True)

    def __enter__(self) -> AtomicFile:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            self.commit()
        else:
            self.discard()


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def run_main(
    prog: str, main: Callable[[Sequence[str] | None], int], argv: Sequence[str] | None
) -> int:
    """Call ``main(argv)`` and return its exit status.

    ``DataError``, ``UsageError`` and ``OSError`` are reported on a single stderr line.
    """
    try:
        return main(argv)
    except UsageError as exc:
        print(f"{prog}: error: {one_line(exc)}", file=sys.stderr)
        return EXIT_USAGE_ERROR
    except DataError as exc:
        print(f"{prog}: error: {one_line(exc)}", file=sys.stderr)
        return EXIT_DATA_ERROR
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader of stdout went away (e.g. `| head`): stop quietly.
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        return EXIT_DATA_ERROR
    except OSError as exc:  # e.g. disk full while writing an output file
        print(f"{prog}: error: {one_line(exc)}", file=sys.stderr)
        return EXIT_DATA_ERROR
