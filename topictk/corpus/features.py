"""Document metadata as regression features (ALGORITHMS.md §9.1, DMR).

``prepare --meta year,party:cat`` keeps the named fields: numeric fields are standardised with
the training documents' mean and standard deviation, categorical fields are one-hot encoded over
the categories seen in training, and an always-1 intercept is appended as the last feature. The
encoding is saved in the manifest, so test documents (and later ``infer``) get the same columns.

Behaviour at the edges (each counted in the manifest):

* a field missing from a document: numeric -> the training mean (0 after standardising),
  categorical -> all zeros;
* a category not seen in training (test documents): all zeros;
* a field no training document has: an error naming the field;
* a non-numeric, NaN or infinite value in a numeric field: an error naming the document;
* a field with a single category or a constant numeric value: dropped with a warning (it
  carries nothing the intercept does not).
"""
from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field

import numpy as np

from topictk.errors import CorpusError, CorpusUsageError, UsageError

log = logging.getLogger("topictk")

INTERCEPT = "(intercept)"


def parse_meta_option(text: str) -> list[tuple[str, str]]:
    """``year,party:cat,score:num`` -> [(name, kind)] with kind in auto/num/cat."""
    specs = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        name, _, kind = part.partition(":")
        kind = kind or "auto"
        if kind not in ("auto", "num", "cat"):
            raise UsageError(f"--meta {part}: the type after ':' must be num or cat")
        specs.append((name, kind))
    if not specs:
        raise UsageError("--meta needs at least one field name")
    return specs


def _as_number(value) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            return None
    return None


@dataclass
class FeatureEncoding:
    """How metadata fields become feature columns; JSON-serialisable for the manifest."""

    fields: list[dict] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)

    @property
    def names(self) -> list[str]:
        names = []
        for f in self.fields:
            if f["type"] == "num":
                names.append(f["name"])
            else:
                names.extend(f"{f['name']}={c}" for c in f["categories"])
        return names + [INTERCEPT]

    def to_json(self) -> dict:
        return {"fields": self.fields, "dropped": self.dropped, "names": self.names}

    @classmethod
    def from_json(cls, data: dict) -> "FeatureEncoding":
        return cls(fields=list(data["fields"]), dropped=list(data.get("dropped", [])))

    def encode(self, metas: list[dict], ids: list[str], where: str,
               fixed: bool = False) -> tuple[np.ndarray, dict]:
        """(n, F) float64 features and the counts of filled-in and unseen values; ``fixed``
        as in :func:`_numeric`."""
        n, F = len(metas), len(self.names)
        X = np.zeros((n, F))
        X[:, -1] = 1.0
        missing = unseen = 0
        col = 0
        for f in self.fields:
            name = f["name"]
            if f["type"] == "num":
                for i, meta in enumerate(metas):
                    if name not in meta or meta[name] is None or meta[name] == "":
                        missing += 1
                        continue
                    x = _numeric(meta[name], name, ids[i], where, fixed)
                    X[i, col] = (x - f["mean"]) / f["std"]
                col += 1
            else:
                index = {c: j for j, c in enumerate(f["categories"])}
                for i, meta in enumerate(metas):
                    if name not in meta or meta[name] is None or meta[name] == "":
                        missing += 1
                        continue
                    j = index.get(str(meta[name]))
                    if j is None:
                        unseen += 1
                    else:
                        X[i, col + j] = 1.0
                col += len(f["categories"])
        return X, {"missing_values": missing, "unseen_categories": unseen}


def _numeric(value, name: str, doc_id: str, where: str, fixed: bool = False) -> float:
    """``value`` as a finite float, or a CorpusError naming the document; ``fixed``: the
    field's type is settled (a trained model's encoding), so only the value can change."""
    x = _as_number(value)
    if x is None:
        fix = ("fix the value: the model was trained with the field as a number" if fixed else
               f"fix the value or declare the field categorical with --meta {name}:cat")
        raise CorpusError(f"{where}: document {doc_id}: field '{name}' = {value!r} is not a "
                          f"number; {fix}")
    if not math.isfinite(x):
        raise CorpusError(f"{where}: document {doc_id}: field '{name}' = {value!r} is not a "
                          f"finite number; fix or remove the value")
    return x


def fit_encoding(specs: list[tuple[str, str]], metas: list[dict], ids: list[str],
                 where: str) -> FeatureEncoding:
    """Choose the columns from the training documents' metadata."""
    encoding = FeatureEncoding()
    available = sorted({k for m in metas for k in m})
    for name, kind in specs:
        present = [(i, m[name]) for i, m in enumerate(metas)
                   if name in m and m[name] is not None and m[name] != ""]
        if not present:
            raise CorpusUsageError(f"{where}: --meta {name}: no training document has the field "
                                   f"'{name}'; fields present: {', '.join(available) or 'none'}")
        if kind == "auto":
            kind = "num" if all(_as_number(v) is not None for _, v in present) else "cat"
        if kind == "num":
            values = np.array([_numeric(v, name, ids[i], where) for i, v in present])
            std = float(values.std())
            if std == 0.0:
                log.warning("--meta %s: every training document has the same value; the field "
                            "is dropped (the intercept carries it)", name)
                encoding.dropped.append(name)
                continue
            encoding.fields.append({"name": name, "type": "num", "mean": float(values.mean()),
                                    "std": std})
        else:
            categories = sorted({str(v) for _, v in present})
            if len(categories) == 1:
                log.warning("--meta %s: only one category (%s); the field is dropped (the "
                            "intercept carries it)", name, categories[0])
                encoding.dropped.append(name)
                continue
            encoding.fields.append({"name": name, "type": "cat", "categories": categories})
    return encoding


def read_meta_file(path: str) -> list[dict]:
    """A tab-separated metadata file with a header row; row i belongs to input document i."""
    import csv
    from pathlib import Path

    file = Path(path)
    if not file.exists():
        raise CorpusUsageError(f"{file}: metadata file not found")
    try:
        with open(file, encoding="utf-8", newline="") as f:
            reader = csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
            rows = [dict(r) for r in reader]
    except UnicodeDecodeError:
        raise CorpusError(f"{file}: metadata file is not valid UTF-8") from None
    if not rows:
        raise CorpusUsageError(f"{file}: metadata file has no rows")
    return rows
