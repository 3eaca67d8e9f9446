"""Declared layout of a saved state, and the one reader and writer of every state class.

A state class lists what it saves in ``SCHEMA``: its arrays (dtype, shape in symbols such as
``("D", "K")``, whether they may be absent) and its header values (int, float, bool, a float
that may be NaN, a list of ints). :func:`to_arrays` writes a state as a JSON header and named
arrays, :func:`from_arrays` reads them back, checking every dtype and shape against the sizes of
the corpus and the model, and a per-class ``SCHEMA_VERSION``: a checkpoint written by a newer
layout, or one that lacks a field, fails with a message naming that field; one written by an
older layout is first brought up to date by the migrations declared for its class
(:mod:`topictk.state.migrations`).

Lists of arrays (deep LDA's layers) are saved as ``name_1 ... name_L``; their shapes are given
by a function of the sizes.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Mapping

import numpy as np

from topictk.state.migrations import migrate

Shape = tuple  # of ints and size symbols


@dataclass(frozen=True)
class Array:
    """An array of the state: ``dtype``, ``shape`` (ints and size symbols)."""

    dtype: str
    shape: Shape
    optional: bool = False


@dataclass(frozen=True)
class ArrayList:
    """A list of arrays saved as ``name_1 ... name_n``; ``shapes(sizes)`` gives their shapes."""

    dtype: str
    shapes: Callable[[Mapping[str, Any]], list[Shape]]
    optional: bool = False


@dataclass(frozen=True)
class Value:
    """A header value: ``int``, ``float``, ``bool``, ``"nan-float"`` (NaN saved as null) or
    ``"ints"`` (a list of ints)."""

    kind: Any


STEP = {"step": Value(int), "sample_steps": Value("ints")}


class SchemaError(ValueError):
    """A saved state that does not fit the declared layout (the message names the field)."""


def _to_json(kind, value):
    if kind == "nan-float":
        return None if value is None or not math.isfinite(value) else float(value)
    if kind == "ints":
        return [int(v) for v in value]
    return kind(value)


def _from_json(kind, value):
    if kind == "nan-float":
        return float("nan") if value is None else float(value)
    if kind == "ints":
        return [int(v) for v in value]
    return kind(value)


def to_arrays(state) -> tuple[dict, dict[str, np.ndarray]]:
    """The header (JSON values, with ``schema``: the layout's version) and the named arrays of
    ``state``; absent optional arrays are left out."""
    cls = type(state)
    header: dict[str, Any] = {"schema": cls.SCHEMA_VERSION}
    arrays: dict[str, np.ndarray] = {}
    for name, spec in cls.SCHEMA.items():
        value = getattr(state, name)
        if isinstance(spec, Value):
            header[name] = _to_json(spec.kind, value)
        elif value is None:
            continue
        elif isinstance(spec, ArrayList):
            for index, item in enumerate(value, start=1):
                arrays[f"{name}_{index}"] = item
        else:
            arrays[name] = value
    return header, arrays


def _shape(shape: Shape, sizes: Mapping[str, Any]) -> tuple[int, ...]:
    return tuple(int(sizes[d]) if isinstance(d, str) else int(d) for d in shape)


def _array(name: str, data: np.ndarray, dtype: str, expected: tuple[int, ...],
           symbols: Shape | None = None) -> np.ndarray:
    array = np.ascontiguousarray(data, dtype=dtype)
    if array.shape != expected:
        what = f" ({', '.join(map(str, symbols))})" if symbols else ""
        raise SchemaError(f"array {name} has shape {array.shape}, expected {expected}{what} "
                          f"for this corpus and model")
    return array


def from_arrays(cls, header: Mapping[str, Any], arrays: Mapping[str, np.ndarray],
                sizes: Mapping[str, Any]):
    """The ``cls`` state saved as ``header`` and ``arrays`` (see :func:`to_arrays`), its arrays
    checked against ``sizes`` (symbol -> int). A header without ``schema`` is version 1; an
    older version is migrated first (the migrations declared for the class's name)."""
    version = header.get("schema", 1)
    if not isinstance(version, int) or not 1 <= version <= cls.SCHEMA_VERSION:
        raise SchemaError(f"header field schema is {version!r}; this release reads "
                          f"{cls.__name__} versions 1 to {cls.SCHEMA_VERSION}")
    header, arrays = migrate(cls.__name__, version, cls.SCHEMA_VERSION, header, arrays, sizes)
    fields: dict[str, Any] = {}
    for name, spec in cls.SCHEMA.items():
        if isinstance(spec, Value):
            if name not in header:
                raise SchemaError(f"header field {name} is missing")
            try:
                fields[name] = _from_json(spec.kind, header[name])
            except (TypeError, ValueError):
                raise SchemaError(f"header field {name} is {header[name]!r}, not "
                                  f"{getattr(spec.kind, '__name__', spec.kind)}") from None
        elif isinstance(spec, ArrayList):
            if f"{name}_1" not in arrays:
                if not spec.optional:
                    raise SchemaError(f"array {name}_1 is missing")
                fields[name] = None
                continue
            shapes = spec.shapes(sizes)
            missing = [f"{name}_{i}" for i in range(1, len(shapes) + 1)
                       if f"{name}_{i}" not in arrays]
            if missing:
                raise SchemaError(f"array {missing[0]} is missing")
            fields[name] = [_array(f"{name}_{i}", arrays[f"{name}_{i}"], spec.dtype,
                                   _shape(shape, sizes))
                            for i, shape in enumerate(shapes, start=1)]
        elif name not in arrays:
            if not spec.optional:
                raise SchemaError(f"array {name} is missing")
            fields[name] = None
        else:
            fields[name] = _array(name, arrays[name], spec.dtype, _shape(spec.shape, sizes),
                                  spec.shape)
    return cls.restore(fields)


class Saved:
    """Mixin of a state dataclass with a declared layout: ``SCHEMA`` (field -> Array, ArrayList
    or Value) and ``SCHEMA_VERSION``. ``restore`` builds the state from the checked fields
    (override it for fields derived from others)."""

    SCHEMA: ClassVar[dict[str, Any]] = {}
    SCHEMA_VERSION: ClassVar[int] = 1

    @classmethod
    def restore(cls, fields: dict[str, Any]):
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in fields.items() if k in names})
