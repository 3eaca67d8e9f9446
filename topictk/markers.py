"""How topictk recognises its own folders: by a marker it wrote, never by file names alone.

- A **run** holds ``topictk-run.json`` (format ``topictk-run``, a format version, a run id).
- A **corpus store** holds ``manifest.json`` whose format is ``topictk-corpus`` (with a format
  version and the corpus id).
- A folder that a topictk write leaves beside its target while it works (a store being
  written, a store being replaced) holds ``topictk-partial.json``: the operation, the target's
  name and the writer. Clean-up removes a folder only when it carries that marker for that
  operation and that target.

Folders other projects keep (a browser extension's ``manifest.json``, a machine-learning
project's ``config.yaml`` beside ``checkpoints/``, a dot-folder named like a temporary store)
carry none of these, and topictk never replaces or deletes them. The rules for folders that
earlier releases wrote before a marker existed sit with their writers
(:func:`topictk.rundir.guard.is_run`, :func:`topictk.corpus.store.is_store_folder`).
"""
from __future__ import annotations

import json
import os
import socket
from pathlib import Path

RUN_MARKER = "topictk-run.json"
RUN_FORMAT = "topictk-run"
STORE_MANIFEST = "manifest.json"
STORE_FORMAT = "topictk-corpus"
PARTIAL_MARKER = "topictk-partial.json"
PARTIAL_FORMAT = "topictk-partial"

# a marker is a few hundred bytes and a manifest a few kilobytes; a larger file of that name
# is someone else's, and is not read into memory to find out
_MAX_MARKER_BYTES = 4 << 20


def read_marker_file(path: Path, fmt: str) -> dict | None:
    """The JSON mapping in ``path`` when it is a topictk marker of format ``fmt``, else None
    (missing, unreadable, too large, not JSON, or another format)."""
    path = Path(path)
    try:
        if not path.is_file() or path.stat().st_size > _MAX_MARKER_BYTES:
            return None
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):
        return None
    if not isinstance(data, dict) or data.get("format") != fmt:
        return None
    return data


def has_run_marker(folder: Path) -> bool:
    return read_marker_file(Path(folder) / RUN_MARKER, RUN_FORMAT) is not None


def has_store_manifest(folder: Path) -> bool:
    return read_marker_file(Path(folder) / STORE_MANIFEST, STORE_FORMAT) is not None


def write_partial_marker(folder: Path, operation: str, target: str) -> None:
    """Mark ``folder`` as left by ``operation`` on ``target`` (a name in the same parent
    folder) while it works: what clean-up of that operation may later remove."""
    data = {"format": PARTIAL_FORMAT, "format_version": 1, "operation": operation,
            "target": target, "pid": os.getpid(), "host": socket.gethostname()}
    with open(Path(folder) / PARTIAL_MARKER, "x", encoding="utf-8") as f:
        f.write(json.dumps(data) + "\n")
        f.flush()
        os.fsync(f.fileno())


def is_partial_of(folder: Path, operation: str, target: str) -> bool:
    """Whether ``folder`` carries the marker of ``operation`` on ``target``."""
    data = read_marker_file(Path(folder) / PARTIAL_MARKER, PARTIAL_FORMAT)
    return (data is not None and data.get("operation") == operation
            and data.get("target") == target)
