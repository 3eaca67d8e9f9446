"""TSV output. Every table topictk writes as TSV (``export``, ``topics``, ``infer``,
``compare``) is written by :func:`tsv_rows`, so that a field holding a tab, a line break or a
double quote (a vocabulary word read from a bag-of-words vocabulary file or a ``--vocab-list``,
a document id from a JSONL or CSV file) cannot shift the columns or split a row.

Such a field is quoted as CSV quotes one: between double quotes, a double quote inside written
twice. Every other field is written as it is, so that ordinary tables read the same as before;
Python's ``csv.reader(f, delimiter="\\t")`` (with ``newline=""``), pandas' ``read_csv(sep="\\t")``
and R's ``read.delim`` read the quoted fields back.
"""
from __future__ import annotations

from collections.abc import Iterable

_SPECIAL = ("\t", "\n", "\r", '"')


def tsv_field(value: object) -> str:
    """``value`` as one TSV field: as it is, or quoted when it holds a tab, a line break or a
    double quote."""
    text = str(value)
    if any(ch in text for ch in _SPECIAL):
        return '"' + text.replace('"', '""') + '"'
    return text


def tsv_rows(rows: Iterable[Iterable[object]]) -> str:
    """The rows as TSV text, each ended by a newline."""
    return "".join("\t".join(tsv_field(v) for v in row) + "\n" for row in rows)
