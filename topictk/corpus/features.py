"""Document metadata as regression features (docs/algorithms.md §9.1, DMR).

``prepare --meta year,party:cat`` keeps the named fields: numeric fields are standardised with
the training documents' mean and standard deviation, categorical fields are one-hot encoded over
the categories seen in training, and an always-1 intercept is appended as the last feature. The
encoding is saved in the manifest, so test documents (and later ``infer``) get the same columns.

Behaviour at the edges (each counted in the manifest):

* a field missing from a document: numeric -> the training mean (0 after standardising),
  categorical -> all zeros;
* a category not seen in training (test documents): all zeros;
* a field no training document has: an error naming the field;
* a non-numeric, NaN or infinite value in a field declared numeric (``:num``), or in a field
  of a trained model's encoding: an error naming the document; an undeclared field with both
  numbers and other values is categorical, with a warning naming a non-numeric value;
* a numeric value whose standardised feature is not a finite number (magnitudes near the
  largest float): an error naming the document and the field;
* a field with a single category or a constant numeric value: dropped with a warning (it
  carries nothing the intercept does not).

Categories are compared by :func:`category_key`: JSON numbers by value (1 and 1.0 are one
category), strings as written; a string that is not a training category but reads as a number
(or as true/false) is looked up by that value too, so a tab-separated ``1`` finds a JSON-trained
``1.0`` and ``True`` a JSON ``true``.
"""
from __future__ import annotations

import logging
import math
import re
from dataclasses import dataclass, field

import numpy as np

from topictk.corpus.timeslices import TimeSlices, document_times
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
        if kind not in ("auto", "num", "cat", "slice") and not _SPLINE.fullmatch(kind):
            raise UsageError(f"--meta {part}: the type after ':' must be num, cat, slice (the "
                             f"time slice of --time-column {name}) or splineN (a smooth basis "
                             f"of its time, N >= {MIN_SPLINE_DF} columns, e.g. spline5)")
        if any(name == other for other, _ in specs):
            raise UsageError(f"--meta {text}: field '{name}' is named twice; name each field once")
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


def category_key(value) -> str:
    """The category a metadata value stands for: JSON numbers by value (``1.0`` -> ``"1"``),
    JSON booleans as JSON writes them, everything else as its string."""
    if isinstance(value, bool):
        return "true" if value else "false"       # as JSON writes it
    if isinstance(value, float) and math.isfinite(value):
        return str(int(value)) if value.is_integer() and abs(value) < 2.0 ** 53 else repr(value)
    return str(value)


def _category_index(index: dict, value) -> int | None:
    """Column of ``value`` among a field's training categories (see :func:`category_key`)."""
    j = index.get(category_key(value))
    if j is None:
        j = index.get(str(value))
    if j is None and isinstance(value, str):
        number = _as_number(value)
        if number is not None:
            j = index.get(category_key(number))
        elif value.strip().lower() in ("true", "false"):
            j = index.get(value.strip().lower())
    return j


def _missing(meta: dict, name: str) -> bool:
    return name not in meta or meta[name] is None or meta[name] == ""


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
            elif f["type"] == "slice":
                names.extend(f"{f['name']}={c}" for c in f["time"]["labels"])
            elif f["type"] == "spline":
                names.extend(f"{f['name']}~s{j + 1}" for j in range(f["df"]))
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
        """(n, F) float64 features and what was filled in: the totals ``missing_values`` and
        ``unseen_categories``, the same per field (``missing_by_field``, ``unseen_by_field``)
        and up to three unseen values per field (``unseen_examples``); ``fixed`` as in
        :func:`_numeric`."""
        n, F = len(metas), len(self.names)
        X = np.zeros((n, F))
        X[:, -1] = 1.0
        missing: dict[str, int] = {}
        unseen: dict[str, int] = {}
        examples: dict[str, list[str]] = {}
        col = 0
        for f in self.fields:
            name = f["name"]
            if f["type"] == "num":
                for i, meta in enumerate(metas):
                    if _missing(meta, name):
                        missing[name] = missing.get(name, 0) + 1
                        continue
                    x = _numeric(meta[name], name, ids[i], where, fixed)
                    X[i, col] = (x - f["mean"]) / f["std"]
                    if not math.isfinite(X[i, col]):
                        raise CorpusError(f"{where}: document {ids[i]}: field '{name}' = "
                                          f"{meta[name]!r} is too large for the field's "
                                          f"encoding (training mean {f['mean']:.6g}, standard "
                                          f"deviation {f['std']:.6g}); fix the value")
                col += 1
            elif f["type"] == "slice":
                slices = TimeSlices.from_json(f["time"]).index(metas, ids, where)
                X[np.arange(n), col + slices] = 1.0
                col += len(f["time"]["labels"])
            elif f["type"] == "spline":
                if n:
                    kind, times = document_times(name, metas, ids, where)
                    if kind != f["kind"]:
                        raise CorpusUsageError(f"{where}: field '{name}' holds "
                                               f"{kind}s; the store's times are {f['kind']}s")
                    X[:, col:col + f["df"]] = spline_basis(times, f)
                col += f["df"]
            else:
                index = {c: j for j, c in enumerate(f["categories"])}
                for i, meta in enumerate(metas):
                    if _missing(meta, name):
                        missing[name] = missing.get(name, 0) + 1
                        continue
                    j = _category_index(index, meta[name])
                    if j is None:
                        unseen[name] = unseen.get(name, 0) + 1
                        seen = examples.setdefault(name, [])
                        value = str(meta[name])
                        if len(seen) < 3 and value not in seen:
                            seen.append(value)
                    else:
                        X[i, col + j] = 1.0
                col += len(f["categories"])
        return X, {"missing_values": sum(missing.values()),
                   "unseen_categories": sum(unseen.values()),
                   "missing_by_field": missing, "unseen_by_field": unseen,
                   "unseen_examples": examples}


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


def _mean_std(values: np.ndarray) -> tuple[float, float]:
    """Mean and standard deviation, computed on values scaled to at most 1 in magnitude so
    that large values do not overflow the squares."""
    scale = float(np.max(np.abs(values)))
    if scale == 0.0:
        return 0.0, 0.0
    scaled = values / scale
    return float(scaled.mean()) * scale, float(scaled.std()) * scale


def fit_encoding(specs: list[tuple[str, str]], metas: list[dict], ids: list[str],
                 where: str, time_slices: TimeSlices | None = None) -> FeatureEncoding:
    """Choose the columns from the training documents' metadata; a field of type ``slice``
    is one column per slice of ``time_slices`` (``prepare --time-column``), 1 in its
    document's slice."""
    encoding = FeatureEncoding()
    available = sorted({str(k) for m in metas for k in m})
    for name, kind in specs:
        if kind == "slice" or _SPLINE.fullmatch(kind):
            if time_slices is None or time_slices.field != name:
                raise CorpusUsageError(f"{where}: --meta {name}:{kind} encodes the time of "
                                       f"--time-column {name}: add --time-column {name}")
        if _SPLINE.fullmatch(kind):
            df = int(kind[len("spline"):] or DEFAULT_SPLINE_DF)
            if df < MIN_SPLINE_DF:
                raise UsageError(f"--meta {name}:{kind}: a smooth basis needs at least "
                                 f"{MIN_SPLINE_DF} columns (spline{MIN_SPLINE_DF})")
            time_kind, times = document_times(name, metas, ids, where)
            encoding.fields.append(spline_field(name, time_kind, times, df))
            continue
        if kind == "slice":
            encoding.fields.append({"name": name, "type": "slice", "time": time_slices.spec()})
            continue
        present = [(i, m[name]) for i, m in enumerate(metas) if not _missing(m, name)]
        if not present:
            raise CorpusUsageError(f"{where}: --meta {name}: no training document has the field "
                                   f"'{name}'; fields present: {', '.join(available) or 'none'}")
        if kind == "auto":
            text = [(i, v) for i, v in present if _as_number(v) is None]
            kind = "cat" if text else "num"
            if text and len(text) < len(present):
                i, v = text[0]
                log.warning("--meta %s: %d of %d values are numbers but not all (document "
                            "%s: %r), so the field is categorical; declare --meta %s:num to "
                            "have each non-number reported, or --meta %s:cat to keep the "
                            "categories", name, len(present) - len(text), len(present),
                            ids[i], v, name, name)
        if kind == "num":
            values = np.array([_numeric(v, name, ids[i], where) for i, v in present])
            mean, std = _mean_std(values)       # finite: both at most the largest |value|
            if std == 0.0:
                log.warning("--meta %s: every training document has the same value; the field "
                            "is dropped (the intercept carries it)", name)
                encoding.dropped.append(name)
                continue
            encoding.fields.append({"name": name, "type": "num", "mean": mean, "std": std})
        else:
            categories = sorted({category_key(v) for _, v in present})
            if len(categories) == 1:
                log.warning("--meta %s: only one category (%s); the field is dropped (the "
                            "intercept carries it)", name, categories[0])
                encoding.dropped.append(name)
                continue
            encoding.fields.append({"name": name, "type": "cat", "categories": categories})
    return encoding


#: ``--meta FIELD:splineN``: a cubic B-spline basis of the time with N columns (default 5)
_SPLINE = re.compile(r"spline\d*")
DEFAULT_SPLINE_DF = 5
MIN_SPLINE_DF = 3
SPLINE_DEGREE = 3


def spline_field(name: str, kind: str, times: np.ndarray, df: int) -> dict:
    """The encoding of a smooth basis of time: cubic B-splines on df - 3 interior knots
    equally spaced between the training documents' earliest and latest times (df + 1
    functions, which sum to 1 at every time; the first is left out, the intercept carries
    it), so df columns."""
    lo, hi = float(times.min()), float(times.max())
    if hi == lo:
        raise CorpusUsageError(f"--meta {name}:spline{df}: every training document has the "
                               f"same time; a basis of time needs more than one")
    inner = np.linspace(lo, hi, df - SPLINE_DEGREE + 2)[1:-1]
    knots = np.r_[[lo] * (SPLINE_DEGREE + 1), inner, [hi] * (SPLINE_DEGREE + 1)]
    return {"name": name, "type": "spline", "df": df, "kind": kind, "degree": SPLINE_DEGREE,
            "knots": knots.tolist()}


def spline_basis(times: np.ndarray, f: dict) -> np.ndarray:
    """(n, df) the basis of ``times`` (:func:`spline_field`); a time outside the training
    documents' range takes the basis of the nearest end (constant beyond it)."""
    from scipy.interpolate import BSpline
    knots = np.asarray(f["knots"])
    x = np.clip(times, knots[0], knots[-1])
    return BSpline.design_matrix(x, knots, f["degree"]).toarray()[:, 1:]


def run_encoding(store, choice: str, columns: int = DEFAULT_SPLINE_DF) -> FeatureEncoding | None:
    """How a DMR run's features are made (``model.features``, docs/algorithms.md §9.1): the
    encoding ``prepare --meta`` saved in the store (``store``; None without one), or one of
    the store's time slices (``prepare --time-column``), each with the intercept: one column
    per slice (``slice``), or a cubic B-spline basis of ``columns`` columns on the span the
    slices cover (``spline``; the slices' edges, not the documents, place its knots, so
    documents added to the store later leave them where they are)."""
    if choice == "store":
        spec = store.manifest.get("features")
        return None if spec is None else FeatureEncoding.from_json(spec)
    time = store.manifest.get("time")
    if time is None:
        raise CorpusUsageError(f"{store.path}: model.features: {choice} makes the features from "
                               f"the store's time slices, and it has none; prepare the corpus "
                               f"with --time-column FIELD, or set model.features: store")
    if choice == "slice":
        return FeatureEncoding(fields=[{"name": time["field"], "type": "slice",
                                        "time": TimeSlices.from_json(time).spec()}])
    span = np.array([time["edges"][0], time["edges"][-1]], dtype=np.float64)
    return FeatureEncoding(fields=[spline_field(time["field"], time["kind"], span,
                                                int(columns))])


def run_features(store, encoding: FeatureEncoding, choice: str, part: str) -> np.ndarray | None:
    """(D, F) the features of the store's ``part`` ("train" or "test") under a run's
    ``encoding`` (:func:`run_encoding`): the store's own array for ``store``, else the
    documents' slices or times encoded."""
    if choice == "store":
        return store.features(part)
    ids = store.document_ids(part)
    if choice == "slice":
        X = np.zeros((len(ids), len(encoding.names)))
        X[np.arange(len(ids)), store.slices(part)] = 1.0
        X[:, -1] = 1.0
        return X
    X, _ = encoding.encode(store.metadata(part) or [{} for _ in ids], ids,
                           str(store.path / f"{part}_meta.jsonl"), fixed=True)
    return X


def read_meta_file(path: str) -> list[dict]:
    """A tab-separated metadata file with a header row; row i belongs to input document i."""
    import csv
    from pathlib import Path

    file = Path(path)
    if not file.exists():
        raise CorpusUsageError(f"{file}: metadata file not found")
    try:
        # utf-8-sig: a byte-order mark is not part of the first column's name
        with open(file, encoding="utf-8-sig", newline="") as f:
            reader = csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
            header = next(reader, None)
            lines = list(reader)
    except UnicodeDecodeError:
        raise CorpusError(f"{file}: metadata file is not valid UTF-8") from None
    except csv.Error as exc:
        raise CorpusError(f"{file}: cannot be read as tab-separated values ({exc})") from None
    if header is None or not any(lines):
        raise CorpusUsageError(f"{file}: metadata file has no rows")
    names = [h.strip() for h in header]
    seen = set()
    for name in names:
        if not name:
            raise CorpusError(f"{file}: line 1: the header has an empty column name; name "
                              f"every column")
        if name in seen:
            raise CorpusError(f"{file}: line 1: column '{name}' appears twice in the header; "
                              f"name each column once")
        seen.add(name)
    rows = []
    for lineno, cells in enumerate(lines, start=2):
        if not cells:
            continue        # a blank line is no row
        if len(cells) != len(names):
            raise CorpusError(f"{file}: line {lineno} has {len(cells)} tab-separated cells, the "
                              f"header has {len(names)}; give every row one cell per column "
                              f"(an empty cell for a missing value)")
        rows.append(dict(zip(names, cells)))
    return rows


def rows_for_documents(rows: list[dict], n_read: int, skipped: list[int],
                       file: str) -> list[dict]:
    """The ``--meta-file`` rows of the documents read: row i describes input document i, the
    documents skipped as undecodable (positions ``skipped``) included, and their rows dropped."""
    total = n_read + len(skipped)
    if len(rows) != total:
        also = f" ({len(skipped)} of them skipped as undecodable)" if skipped else ""
        raise CorpusError(f"{file}: has {len(rows)} rows but the input has {total} "
                          f"documents{also}; row i must describe input document i")
    if skipped:
        drop = set(skipped)
        rows = [r for i, r in enumerate(rows) if i not in drop]
    return rows


def merge_meta_file(rows: list[dict], metas: list[dict] | None, fields: list[str],
                    file: str) -> list[dict]:
    """Each document's fields from its ``--meta-file`` row and its JSONL record together; a
    field among ``fields`` that both give is refused (which one should count is not clear)."""
    if metas:
        header = rows[0].keys()
        for name in fields:
            if name in header and any(name in m for m in metas):
                raise CorpusUsageError(f"{file}: field '{name}' is given both by this file and by "
                                       f"the JSONL documents; keep it in one of them")
    return [dict(r, **(metas[i] if metas else {})) for i, r in enumerate(rows)]
