"""NumPy twin of topictk/inference/_changes.pyx: an integer count change new - old, dense in
the smallest signed integer type that holds its values, or sparse as one-byte gaps (a gap over
MAX_GAP bridged by entries of value 0) and values; whichever is fewer bytes."""
from __future__ import annotations

import numpy as np

MAX_GAP = 255


def int_type(values: np.ndarray) -> np.dtype:
    lo, hi = (int(values.min()), int(values.max())) if values.size else (0, 0)
    for dtype in (np.int8, np.int16, np.int32):
        info = np.iinfo(dtype)
        if info.min <= lo and hi <= info.max:
            return np.dtype(dtype)
    return np.dtype(np.int64)


def encode(new: np.ndarray, old: np.ndarray) -> tuple:
    change = new.astype(np.int64) - old
    flat = change.reshape(-1)
    where = np.flatnonzero(flat)
    values = flat[where]
    dtype = int_type(values)
    gaps = np.diff(where, prepend=-1)
    bridges = (gaps - 1) // MAX_GAP
    n = where.size + int(bridges.sum())
    if n * (1 + dtype.itemsize) >= flat.size * dtype.itemsize:
        return ("dense", change.shape, flat.astype(dtype))
    kept = np.cumsum(bridges + 1) - 1
    out_gaps = np.full(n, MAX_GAP, dtype=np.uint8)
    out_gaps[kept] = gaps - MAX_GAP * bridges
    out_values = np.zeros(n, dtype=dtype)
    out_values[kept] = values
    return ("sparse", change.shape, out_gaps, out_values)


def add(target: np.ndarray, encoded: tuple) -> None:
    flat = target.reshape(-1)
    if encoded[0] == "dense":
        flat += encoded[2]
    else:
        flat[np.cumsum(encoded[2], dtype=np.int64) - 1] += encoded[3]
