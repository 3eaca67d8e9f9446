"""Progress bars of the slow commands, on stderr: shown on a terminal (in a notebook, tqdm's
widget), nothing when stderr is a pipe or a file, or within :func:`quiet` (``-q``).

Every package may use it (it sits in the bottom layer of the import contracts): a command
opens a :func:`bar` over its units of work (runs, documents, chunks of documents) and
updates it; a fold-in deeper down counts its chunks on the bar the caller opened with
:func:`counting`, asking :func:`chunk_groups` how to cut them. A bar changes no number: the
work done is the same whether it is shown or not.
"""
from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from tqdm import tqdm

#: chunks a counted fold-in hands to its kernel at once, per thread (between two updates)
CHUNKS_PER_THREAD = 2
#: at most this many updates of a counted fold-in (fewer kernel calls on many small chunks)
MAX_UPDATES = 100

_show: ContextVar[bool | None] = ContextVar("topictk.progress.show", default=None)
_counted: ContextVar[tqdm | None] = ContextVar("topictk.progress.counted", default=None)


def is_terminal(stream) -> bool:
    """Whether ``stream`` is a terminal (False for a closed stream or one without isatty)."""
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def in_notebook() -> bool:
    """Whether this runs in a Jupyter kernel, whose stderr is no terminal but shows widgets."""
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return False
    try:
        shell = ipython.get_ipython()
    except Exception:       # an IPython half imported, or one without a shell
        return False
    return type(shell).__name__ == "ZMQInteractiveShell"


@contextmanager
def showing(show: bool | None) -> Iterator[None]:
    """Within the block, the bars whose caller leaves it open are shown (True), never shown
    (False), or shown on a terminal or in a notebook (None, the default)."""
    token = _show.set(show)
    try:
        yield
    finally:
        _show.reset(token)


def quiet(on: bool = True):
    """No bar is shown within the block when ``on`` (a command's ``-q``)."""
    return showing(False if on else _show.get())


def bar(total: int | None, *, desc: str | None, unit: str, initial: int = 0,
        show: bool | None = None, stream=None) -> tqdm:
    """A tqdm bar of ``total`` ``unit``s on ``stream`` (default stderr), at ``initial`` done,
    to update and close (or use as a context manager). ``show`` None: as :func:`showing`
    says (by default on a terminal or in a notebook; never within :func:`quiet`); True or
    False: as it says. A bar not shown is a disabled tqdm, which takes the same calls and
    writes nothing."""
    stream = sys.stderr if stream is None else stream
    notebook = stream is sys.stderr and in_notebook()
    if show is None:
        show = _show.get()
    if show is None:
        show = is_terminal(stream) or notebook
    if show and notebook:
        from tqdm.auto import tqdm as auto

        return auto(total=total, initial=initial, desc=desc, unit=unit, leave=False)
    return tqdm(total=total, initial=initial, desc=desc, unit=unit, file=stream,
                dynamic_ncols=True, leave=False, disable=not show)


@contextmanager
def counting(shown: tqdm | None) -> Iterator[None]:
    """Within the block, fold-ins count their work on ``shown`` (None: on nothing)."""
    token = _counted.set(None if shown is None or shown.disable else shown)
    try:
        yield
    finally:
        _counted.reset(token)


def counter() -> tqdm | None:
    """The bar fold-ins count their work on (:func:`counting`), None when none is shown."""
    return _counted.get()


def chunk_groups(n_chunks: int, threads: int) -> list[tuple[int, int]]:
    """How a fold-in of ``n_chunks`` chunks on ``threads`` threads cuts them into calls of its
    kernel: consecutive (first, end) ranges, a few chunks per thread each, at most
    ``MAX_UPDATES`` of them; one range of all when no bar counts them (:func:`counter`)."""
    if counter() is None or n_chunks <= 1:
        return [(0, n_chunks)]
    size = max(CHUNKS_PER_THREAD * max(int(threads), 1), -(-n_chunks // MAX_UPDATES))
    return [(c, min(c + size, n_chunks)) for c in range(0, n_chunks, size)]


def count(n: int) -> None:
    """``n`` more units (chunks, documents) done, on the bar that counts them (if any)."""
    shown = counter()
    if shown is not None:
        shown.update(n)
