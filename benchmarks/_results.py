"""One benchmark's section of ``benchmarks/RESULTS.md``.

Every benchmark script owns one ``## `` section of the shared file. :func:`replace_section`
re-reads the file, replaces that section (from its heading to the next ``## `` heading, or to
an end marker inside it) or appends it, and renames a temporary file over the original -- all
under an exclusive lock on ``RESULTS.md.lock``, so two scripts that finish at the same moment
cannot drop each other's update, and a reader never sees half a file.
"""
from __future__ import annotations

import fcntl
import os
from pathlib import Path

TITLE = "# topictk benchmarks\n"


def _splice(current: str, heading: str, text: str, keep: str | None,
            end_marker: str | None) -> str:
    lines = current.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if line.rstrip() == heading), None)
    body = text.rstrip("\n") + "\n"
    if start is None:
        head = current.rstrip("\n")
        return (head + "\n\n" if head else "") + body
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")),
               len(lines))
    if end_marker is not None:
        marker = next((i for i in range(start, end) if lines[i].rstrip() == end_marker), None)
        if marker is not None:   # what follows the marker is kept byte for byte
            return "".join(lines[:start]) + body + "".join(lines[marker + 1:])
    if keep is not None:
        kept = next((i for i in range(start, end) if lines[i].rstrip() == keep), None)
        if kept is not None:
            body = body + "\n" + "".join(lines[kept:end]).rstrip("\n") + "\n"
    tail = "".join(lines[end:]).lstrip("\n")
    return "".join(lines[:start]) + body + ("\n" + tail if tail else "")


def replace_section(path: Path, heading: str, text: str, *, keep: str | None = None,
                    end_marker: str | None = None) -> None:
    """Put ``text`` (which starts with the line ``heading``) in place of the section
    ``heading`` of ``path``, or append it; every other section is left byte for byte.

    ``keep``: a line inside the old section from which its remaining lines (hand-written notes)
    are kept after the new text. ``end_marker``: a line inside the section where it ends (the
    lines after it, up to the next heading, are not this script's).
    """
    path = Path(path)
    with open(path.with_name(path.name + ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        current = path.read_text(encoding="utf-8") if path.exists() else TITLE
        new = _splice(current, heading, text, keep, end_marker)
        tmp = path.with_name(f"{path.name}.tmp{os.getpid()}")
        tmp.write_text(new, encoding="utf-8")
        os.replace(tmp, path)
