"""Checkpoints and saved models: one ``.npz`` per file, written atomically and versioned.

A checkpoint holds the algorithm's state arrays plus a JSON header (format version,
algorithm, sizes, corpus id, step, every random stream's state, the training clock). Writes
go to a temporary file in the same directory, are fsynced and renamed, so a run killed at any
moment leaves the last complete checkpoint readable.
"""
from __future__ import annotations

import json
import re
import zipfile
from pathlib import Path

import numpy as np

from topictk._fileio import atomic_write_bytes
from topictk.errors import CheckpointError
from topictk.limits import json_loads, short

CHECKPOINT_FORMAT = "topictk-checkpoint"
CHECKPOINT_VERSION = 1
_NAME = re.compile(r"^step-(\d+)\.npz$")


def save_arrays(path: Path, header: dict, arrays: dict[str, np.ndarray]) -> None:
    """Write ``arrays`` and ``header`` to ``path`` atomically (uncompressed npz)."""
    header = dict(header)
    header["format"] = CHECKPOINT_FORMAT
    header["format_version"] = CHECKPOINT_VERSION
    payload = {f"a_{k}": np.asarray(v) for k, v in arrays.items()}
    payload["header"] = np.frombuffer(json.dumps(header, sort_keys=True).encode("utf-8"),
                                      dtype=np.uint8)
    atomic_write_bytes(path, lambda f: _write_npz(f, payload))


def _write_npz(f, payload: dict[str, np.ndarray]) -> None:
    """An uncompressed .npz (what ``np.savez`` writes, read back by ``np.load``) written from
    the arrays' own memory: ``np.savez`` copies each array through 16 MiB chunk buffers when
    the target is a zip member, a transient as large as the biggest count array's chunk."""
    with zipfile.ZipFile(f, mode="w", compression=zipfile.ZIP_STORED, allowZip64=True) as zf:
        for name, array in payload.items():
            array = np.asarray(array)
            if not array.flags.c_contiguous:
                array = array.copy(order="C")
            with zf.open(f"{name}.npy", mode="w", force_zip64=True) as member:
                np.lib.format.write_array_header_2_0(
                    member, np.lib.format.header_data_from_array_1_0(array))
                if array.size:
                    member.write(memoryview(array).cast("B"))


# what to do about a damaged checkpoint that ``train --resume`` was reading
RESUME_FIX = "delete it to fall back to an earlier checkpoint, or train again without --resume"


def load_arrays(path: Path, fix: str = RESUME_FIX) -> tuple[dict, dict[str, np.ndarray]]:
    """Read a file written by :func:`save_arrays`; any damage raises :class:`CheckpointError`
    whose message ends with ``fix``, what the user can do about it where the file was read."""
    path = Path(path)
    if not path.exists():
        raise CheckpointError(f"{path}: not found; {fix}")
    try:
        # open the file here: np.load leaks its own handle when a damaged zip fails to open
        with open(path, "rb") as f:
            data = np.load(f, allow_pickle=False)
            if not isinstance(data, np.lib.npyio.NpzFile):
                raise ValueError("not an npz archive")
            with data:
                header = json_loads(bytes(data["header"]).decode("utf-8"))
                arrays = {k[2:]: data[k] for k in data.files if k.startswith("a_")}
    except MemoryError:
        raise CheckpointError(f"{path}: corrupt (an array larger than memory); {fix}") from None
    except Exception as exc:    # noqa: BLE001
        # damage reaches many parsers: the zip reader (BadZipFile, EOFError, a CRC mismatch),
        # NumPy's array headers (ValueError, SyntaxError, tokenize.TokenError), the JSON
        # header; whichever one fails, the file is damaged
        kind = type(exc).__name__
        raise CheckpointError(f"{path}: truncated or corrupt ({kind}); {fix}") from None
    if not isinstance(header, dict):
        raise CheckpointError(f"{path}: truncated or corrupt (header); {fix}")
    if header.get("format") != CHECKPOINT_FORMAT:
        raise CheckpointError(f"{path}: not a topictk checkpoint; {fix}")
    if header.get("format_version") != CHECKPOINT_VERSION:
        raise CheckpointError(f"{path}: checkpoint format version {header.get('format_version')} "
                              f"is not {CHECKPOINT_VERSION}; train again with this version")
    named = _NAME.match(path.name)
    if named is not None:
        # a checkpoint (or sample) copied or renamed over another step's would continue or
        # score the wrong step without a word
        state = header.get("state")
        step = state.get("step") if isinstance(state, dict) else header.get("step")
        if step is not None and step != int(named.group(1)):
            raise CheckpointError(f"{path}: holds step {short(step)}, not the step "
                                  f"{int(named.group(1))} its name says (copied or renamed "
                                  f"over it); {fix}")
    return header, arrays


def read_header(path: Path) -> dict | None:
    """The header of a file written by :func:`save_arrays`, without reading its arrays, or
    None when ``path`` is not one (missing, damaged, another format)."""
    try:
        with open(path, "rb") as f:
            data = np.load(f, allow_pickle=False)
            if not isinstance(data, np.lib.npyio.NpzFile):
                return None
            with data:
                header = json_loads(bytes(data["header"]).decode("utf-8"))
    except Exception:   # noqa: BLE001 - any damage means "not a checkpoint topictk can open"
        return None
    if not isinstance(header, dict) or header.get("format") != CHECKPOINT_FORMAT:
        return None
    return header


def checkpoint_path(directory: Path, step: int) -> Path:
    return Path(directory) / f"step-{step:08d}.npz"


def list_checkpoints(directory: Path) -> list[tuple[int, Path]]:
    """(step, path) of every checkpoint in ``directory``, oldest first."""
    directory = Path(directory)
    if not directory.is_dir():
        return []
    found = []
    for path in directory.iterdir():
        match = _NAME.match(path.name)
        if match:
            found.append((int(match.group(1)), path))
    return sorted(found)


def prune_checkpoints(directory: Path, keep: int) -> None:
    """Delete all but the ``keep`` newest checkpoints."""
    for _, path in list_checkpoints(directory)[:-keep]:
        try:
            path.unlink()
        except OSError:
            pass
