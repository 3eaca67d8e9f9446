"""Documents held in memory (``topictk.prepare(texts=...)``): strings, mappings with a text
field and metadata fields, or the rows of a data frame.

Every document becomes the record a line of JSONL input would be and is read by the JSONL
reader's own :func:`topictk.corpus.readers.record_document`, so that a store prepared from
documents in memory is the store prepared from the same documents in a file. Strings are
records with a text only (a plain text file's lines, whose documents carry no metadata).

A data frame is anything with ``columns`` and ``itertuples`` (pandas' duck type; pandas is
not needed): each row is a record of its columns. Its rows are read one at a time, as are the
items of any other iterable, so a generator of documents is never held whole.

Ids: a record's ``id_column`` value, else its ``id`` or ``doc_id`` field (as in JSONL), else
the document's position in the input counted from 0, so that ``texts[int(id)]`` is the
document (``df.iloc[int(id)]`` for a data frame).
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from topictk.corpus.readers import ReadStats, TextDocument, record_document
from topictk.corpus.tables import DEFAULT_TEXT_COLUMN
from topictk.errors import CorpusError, CorpusUsageError, UsageError
from topictk.limits import short

#: the format ``prepare`` records for documents given in memory
FORMAT = "memory"
#: how messages and the store's manifest name documents given in memory
NAME = "texts"
MAX_LISTED = 20           # columns named in a message


def check_format(option: str) -> str:
    """The format of documents given in memory: FORMAT; a ``format`` option, which says how
    to read files, is refused."""
    if option != "auto":
        raise UsageError(f"format={option!r} says how to read input files; documents given in "
                         f"memory ({NAME}=) are read as records: drop format")
    return FORMAT


def is_data_frame(obj: Any) -> bool:
    """Whether ``obj`` looks like a data frame: named columns and rows by ``itertuples``."""
    return hasattr(obj, "columns") and callable(getattr(obj, "itertuples", None))


@dataclass
class InMemory:
    """Documents held in memory, and which field holds the text (``text_column``) and which
    the id (``id_column``, optional) of each record or row."""

    documents: Any
    text_column: str = DEFAULT_TEXT_COLUMN
    id_column: str | None = None

    def __post_init__(self):
        docs = self.documents
        if isinstance(docs, (str, bytes, Mapping)) or not (isinstance(docs, Iterable)
                                                           or is_data_frame(docs)):
            what = ("one string" if isinstance(docs, str) else
                    "one mapping" if isinstance(docs, Mapping) else type(docs).__name__)
            raise CorpusUsageError(f"{NAME}: got {what}; give a list (or any iterable) of "
                                   f"documents, each a string or a mapping with a "
                                   f"'{self.text_column}' field, or a data frame")
        if not isinstance(self.text_column, str) or (self.id_column is not None
                                                     and not isinstance(self.id_column, str)):
            raise CorpusUsageError(f"{NAME}: text_column and id_column are column names "
                                   f"(strings); got {self.text_column!r} and "
                                   f"{self.id_column!r}")

    @property
    def kind(self) -> str:
        """``dataframe`` or ``records`` (iterables of strings or mappings), as the manifest
        records the input."""
        return "dataframe" if is_data_frame(self.documents) else "records"

    def read(self, stats: ReadStats) -> Iterator[TextDocument]:
        """Every document in order, read as a JSONL record is."""
        frame = is_data_frame(self.documents)
        unit = "row" if frame else "record"
        records = _rows(self.documents, self.text_column, self.id_column) if frame else \
            _items(self.documents, self.text_column)
        for i, record in enumerate(records):
            where = f"{NAME}[{i}]"
            yield record_document(_json_record(record, where), where, str(i), stats,
                                  self.text_column, self.id_column, unit)


def _items(documents: Iterable, text_column: str) -> Iterator[dict]:
    """Each item as a record: a string as its text alone, a mapping as a copy."""
    for i, item in enumerate(documents):
        if isinstance(item, str):
            yield {text_column: item}
        elif isinstance(item, Mapping):
            yield dict(item)
        else:
            raise CorpusError(f"{NAME}[{i}]: is {type(item).__name__}, not a document; every "
                              f"document is a string, or a mapping with a '{text_column}' field "
                              f"and metadata fields")


def _rows(frame, text_column: str, id_column: str | None) -> Iterator[dict]:
    """Each row of a data frame as a record of its columns, which must hold the text (and
    id) column and name each column once."""
    columns = [str(c) for c in frame.columns]
    listed = ", ".join(short(c, 70) for c in columns[:MAX_LISTED])
    more = f" and {len(columns) - MAX_LISTED} more" if len(columns) > MAX_LISTED else ""
    for option, column in (("text_column", text_column), ("id_column", id_column)):
        if column is not None and column not in columns:
            raise CorpusUsageError(f"{NAME}: the data frame has no column {short(column, 70)} "
                                   f"(its columns: {listed}{more}); name the column with "
                                   f"{option}=")
    twice = sorted({c for c in columns if columns.count(c) > 1})
    if twice:
        raise CorpusUsageError(f"{NAME}: the data frame has more than one column named "
                               f"{short(twice[0], 70)}; rename the columns so that each name "
                               f"is one column")
    for values in frame.itertuples(index=False, name=None):
        yield dict(zip(columns, values))


def _json_record(record: dict, where: str) -> dict:
    """``record`` with the values a JSONL line can hold: NumPy scalars as Python numbers, a
    missing value (NaN, pandas' NA and NaT) as null, as a JSONL export of the same data
    writes them; anything else that JSON cannot hold is refused, naming the field."""
    return {str(key): _json_value(value, where, str(key)) for key, value in record.items()}


def _json_value(value: Any, where: str, key: str) -> Any:
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        return None if math.isnan(value) else float(value)
    if type(value).__name__ in ("NAType", "NaTType"):      # pandas' missing values
        return None
    item = getattr(value, "item", None)
    if callable(item) and type(value).__module__ == "numpy":  # a NumPy scalar
        return _json_value(item(), where, key)
    if isinstance(value, Mapping):
        return {str(k): _json_value(v, where, f"{key}.{k}") for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_value(v, where, key) for v in value]
    raise CorpusError(f"{where}: field {short(key, 70)} holds a {type(value).__name__}; a "
                      f"document's fields are strings, numbers, booleans, null, lists or "
                      f"mappings of them (as in JSONL): convert the field, e.g. to a string")
