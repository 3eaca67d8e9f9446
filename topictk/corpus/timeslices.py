"""Time slices of documents: ``prepare --time-column FIELD --time-bins RULE`` (docs/prepare.md,
"Time slices").

A document's time is its metadata field FIELD (a JSONL field, a CSV/TSV column, or a column of
``--meta-file``): a number (``1994``, ``17.5``) or a date in ISO 8601 form (``2008-03``,
``2008-03-14``, ``2008-03-14T09:30:00``). RULE turns times into slices, numbered from 0 in time
order:

* ``year``: one slice per calendar year that occurs (dates; or whole numbers, read as years);
* ``month``: one slice per calendar month that occurs (dates only);
* ``width:N``: N slices of equal width between the earliest and the latest time;
* ``edges:E0,E1,...,EN``: N slices [E0, E1), ..., [EN-1, EN] (numbers, or dates when the
  times are dates).

The rule is fitted on every document read (training and test: time is an axis, not something
learned), and the held-out choice of test documents is then drawn slice by slice
(:func:`topictk.corpus.splits.choose_test_documents`), so that every slice has its share of
test documents. Every document needs a time, and every time a slice: anything else is an
error naming the document and the fix.
"""
from __future__ import annotations

import datetime as dt
import math
import re
from dataclasses import dataclass

import numpy as np

from topictk.errors import CorpusUsageError, UsageError

RULES = ("year", "month", "width", "edges")

_DATE = re.compile(r"^(\d{4})(?:-(\d{2})(?:-(\d{2})(?:[T ](\d{2}):(\d{2})(?::(\d{2}(?:\.\d+)?))?"
                   r"(?:Z|[+-]\d{2}:?\d{2})?)?)?)?$")


@dataclass(frozen=True)
class Rule:
    """A parsed ``--time-bins`` value: its kind and, for width and edges, its parameter."""

    kind: str
    count: int | None = None
    edges: tuple[str, ...] | None = None

    @classmethod
    def parse(cls, text: str | None) -> Rule:
        """``year`` (the default, None), ``month``, ``width:N`` or ``edges:E0,E1,...``."""
        text = (text or "year").strip()
        kind, _, arg = text.partition(":")
        if kind not in RULES:
            raise UsageError(f"--time-bins {text}: the rule must be year, month, width:N or "
                             f"edges:E0,E1,... (e.g. edges:1,32,61)")
        if kind in ("year", "month"):
            if arg:
                raise UsageError(f"--time-bins {text}: {kind} takes no value; write {kind}")
            return cls(kind)
        if kind == "width":
            if not arg.isdigit() or int(arg) < 1:
                raise UsageError(f"--time-bins {text}: width needs a whole number of slices "
                                 f">= 1, e.g. width:12")
            return cls(kind, count=int(arg))
        edges = tuple(e.strip() for e in arg.split(","))
        if len(edges) < 2 or not all(edges):
            raise UsageError(f"--time-bins {text}: edges needs two or more comma-separated "
                             f"values, e.g. edges:1,32,61")
        return cls(kind, edges=edges)


def parse_time(value) -> tuple[str, float] | None:
    """(``number`` or ``date``, a float on the time axis) of a metadata value, or None when it
    is neither. Dates are days since 0001-01-01 (proleptic Gregorian), fractions for a time
    of day; a bare ``YYYY`` string is the number YYYY."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return ("number", float(value)) if math.isfinite(value) else None
    text = str(value).strip()
    try:
        number = float(text)
    except ValueError:
        number = None
    if number is not None:
        return ("number", number) if math.isfinite(number) else None
    match = _DATE.match(text)
    if match is None:
        return None
    year, month, day, hour, minute, second = match.groups()
    try:
        date = dt.date(int(year), int(month or 1), int(day or 1))
    except ValueError:
        return None
    seconds = int(hour or 0) * 3600 + int(minute or 0) * 60 + float(second or 0)
    if seconds >= 86400:
        return None
    return "date", date.toordinal() + seconds / 86400.0


def _date_of(t: float) -> dt.date:
    return dt.date.fromordinal(int(math.floor(t)))


def _label(t: float, kind: str) -> str:
    """A time as written: a date as its ISO day, a whole number without a decimal point."""
    if kind == "date":
        return _date_of(t).isoformat()
    return str(int(t)) if t.is_integer() and abs(t) < 2.0 ** 53 else f"{t:g}"


@dataclass
class TimeSlices:
    """The slices of a store: each slice s holds the times in [edges[s], edges[s + 1]) (the
    last one closed), named ``labels[s]``."""

    field: str
    rule: str
    kind: str                   # the times' kind: number or date
    edges: list[float]
    labels: list[str]

    @classmethod
    def fit(cls, field: str, rule_text: str | None, metas: list[dict] | None,
            ids: list[str], where: str) -> tuple[TimeSlices, np.ndarray]:
        """The slices ``rule_text`` makes of the documents' times, and each document's slice
        (int32)."""
        rule = Rule.parse(rule_text)
        kind, times = document_times(field, metas, ids, where)
        if rule.kind == "month" and kind != "date":
            raise CorpusUsageError(f"{where}: --time-bins month needs dates in field "
                                   f"'{field}' (e.g. 2008-03-14); its values are numbers: use "
                                   f"year, width:N or edges:...")
        if rule.kind in ("year", "month"):
            edges, labels = _calendar(rule.kind, kind, times, field, ids, where)
        elif rule.kind == "width":
            lo, hi = float(times.min()), float(times.max())
            step = (hi - lo) / rule.count
            edges = [lo + step * i for i in range(rule.count)] + [hi]
            if step == 0:
                edges = [lo, hi]
            labels = _interval_labels(edges, kind)
        else:
            edges = _edges(rule.edges, kind, field, rule_text)
            labels = _interval_labels(edges, kind)
        slices = cls(field, rule_text or "year", kind, edges, labels)
        return slices, slices.index_times(times, ids, where)

    def index_times(self, times: np.ndarray, ids: list[str], where: str) -> np.ndarray:
        """The slice of every time; a time outside the edges is an error naming its document."""
        edges = np.asarray(self.edges)
        index = np.searchsorted(edges, times, side="right") - 1
        index[times == edges[-1]] = len(self.labels) - 1      # the last slice is closed
        outside = (index < 0) | (index >= len(self.labels))
        rule = Rule.parse(self.rule).kind
        if rule in ("year", "month"):
            # a calendar slice is its period only: a time in a period between two slices
            # (no document of the store fell in it) belongs to none
            outside |= np.array([outside[d] or _period(t, self.kind, rule) != self.labels[s]
                                 for d, (t, s) in enumerate(zip(times.tolist(), index))],
                                dtype=bool)
        if outside.any():
            d = int(np.flatnonzero(outside)[0])
            time = f"'{self.field}' = {_label(float(times[d]), self.kind)}"
            fix = (f"its {rule} is none of the store's slices ({', '.join(self.labels[:6])}"
                   f"{', ...' if len(self.labels) > 6 else ''}): prepare the corpus with a "
                   f"document of that {rule}, or with --time-bins edges:..."
                   if rule in ("year", "month") else
                   f"outside the slices' edges {_label(self.edges[0], self.kind)} to "
                   f"{_label(self.edges[-1], self.kind)}; widen --time-bins edges:...")
            raise CorpusUsageError(f"{where}: document {ids[d]} has {time}, {fix} "
                                   f"({int(outside.sum())} document(s) without a slice)")
        return index.astype(np.int32)

    def index(self, metas: list[dict] | None, ids: list[str], where: str) -> np.ndarray:
        """The slice of every document of ``metas`` (a split's documents, after filtering)."""
        if not ids:
            return np.zeros(0, dtype=np.int32)
        kind, times = document_times(self.field, metas, ids, where)
        if kind != self.kind:
            raise CorpusUsageError(f"{where}: field '{self.field}' holds {kind}s, the store's "
                                   f"times are {self.kind}s; give the documents times of the "
                                   f"store's kind")
        return self.index_times(times, ids, where)

    def spec(self) -> dict:
        """What places a time in the slices (:meth:`from_json` reads it back): ``edges`` on
        the time axis (numbers; dates as days since 0001-01-01), ``edge_labels`` as written."""
        return {"field": self.field, "rule": self.rule, "kind": self.kind,
                "edges": [float(e) for e in self.edges],
                "edge_labels": [_label(e, self.kind) for e in self.edges],
                "labels": self.labels}

    def to_json(self, train: np.ndarray, test: np.ndarray) -> dict:
        """The manifest's record: :meth:`spec` with the documents per slice of each split."""
        n = len(self.labels)
        return dict(self.spec(), train_documents=np.bincount(train, minlength=n).tolist(),
                    test_documents=np.bincount(test, minlength=n).tolist())

    @classmethod
    def from_json(cls, record: dict) -> TimeSlices:
        """The slices a store's manifest records (:meth:`to_json`), to place new documents."""
        return cls(record["field"], record["rule"], record["kind"],
                   [float(e) for e in record["edges"]], list(record["labels"]))


def _period(t: float, kind: str, rule: str) -> str:
    """The name of the calendar year or month of a time (a number is its year)."""
    if kind == "number":
        return str(int(t)) if t == math.floor(t) else ""
    date = _date_of(t)
    return f"{date.year}" if rule == "year" else f"{date.year}-{date.month:02d}"


def _interval_labels(edges: list[float], kind: str) -> list[str]:
    """``[a, b)`` for every slice, the last one ``[a, b]``."""
    n = len(edges) - 1
    return [f"[{_label(a, kind)}, {_label(b, kind)}{']' if s == n - 1 else ')'}"
            for s, (a, b) in enumerate(zip(edges[:-1], edges[1:]))]


def document_times(field: str, metas: list[dict] | None, ids: list[str], where: str
                   ) -> tuple[str, np.ndarray]:
    """The kind (number or date) and the times of every document; a missing, unreadable or
    mixed value is an error naming the document."""
    if metas is None:
        raise CorpusUsageError(f"{where}: --time-column {field} needs document metadata: JSONL "
                               f"fields, CSV/TSV columns or a --meta-file")
    kinds, times = set(), np.empty(len(metas))
    for d, meta in enumerate(metas):
        value = (meta or {}).get(field)
        if value is None or value == "":
            raise CorpusUsageError(f"{where}: document {ids[d]} has no '{field}' value; "
                                   f"--time-column needs a time for every document")
        parsed = parse_time(value)
        if parsed is None:
            raise CorpusUsageError(f"{where}: document {ids[d]} has '{field}' = {value!r}, "
                                   f"neither a number nor an ISO date (e.g. 2008-03-14)")
        kinds.add(parsed[0])
        times[d] = parsed[1]
        if len(kinds) > 1:
            raise CorpusUsageError(f"{where}: field '{field}' mixes numbers and dates "
                                   f"(document {ids[d]}: {value!r}); give every document "
                                   f"the same kind of time")
    return (kinds.pop() if kinds else "number"), times


def _calendar(rule: str, kind: str, times: np.ndarray, field: str, ids: list[str],
              where: str) -> tuple[list[float], list[str]]:
    """Edges and labels of the calendar years (or months) that occur, in order."""
    if kind == "number":                # year of whole numbers
        bad = np.flatnonzero(times != np.floor(times))
        if bad.size:
            d = int(bad[0])
            raise CorpusUsageError(f"{where}: document {ids[d]} has '{field}' = "
                                   f"{_label(float(times[d]), kind)}; --time-bins year reads "
                                   f"numbers as years and needs whole ones: use width:N or "
                                   f"edges:...")
        years = np.unique(times).astype(np.int64)
        starts = [float(y) for y in years]
        ends = [float(y + 1) for y in years]
        labels = [str(y) for y in years]
    else:
        keys = sorted({(d.year, d.month if rule == "month" else 1)
                       for d in map(_date_of, times.tolist())})
        starts, ends, labels = [], [], []
        for year, month in keys:
            start = dt.date(year, month, 1)
            if rule == "year":
                end = dt.date(year + 1, 1, 1)
                labels.append(f"{year}")
            else:
                end = dt.date(year + (month == 12), month % 12 + 1, 1)
                labels.append(f"{year}-{month:02d}")
            starts.append(float(start.toordinal()))
            ends.append(float(end.toordinal()))
    # each period's start, then the last one's end: a period no document falls in lies
    # inside the slice before it, which holds none of its times
    return starts + [ends[-1]], labels


def _edges(values: tuple[str, ...], kind: str, field: str, text: str | None) -> list[float]:
    """The numbers of ``edges:...``, of the times' kind, strictly ascending."""
    edges = []
    for value in values:
        parsed = parse_time(value)
        if parsed is None or parsed[0] != kind:
            raise UsageError(f"--time-bins {text}: edge {value!r} is not a "
                             f"{'date' if kind == 'date' else 'number'}, as the times of "
                             f"field '{field}' are")
        edges.append(parsed[1])
    if any(b <= a for a, b in zip(edges[:-1], edges[1:])):
        raise UsageError(f"--time-bins {text}: the edges must be in ascending order, each "
                         f"larger than the one before")
    return edges
