"""CSV and TSV input: one document per row, its text in one or more named columns, the other
columns its metadata (as JSONL fields are). Read with Python's ``csv`` module: quoted fields
may hold the delimiter and newlines; a byte-order mark is dropped; the delimiter is sniffed
from the start of a ``.csv`` file unless given."""
from __future__ import annotations

import csv
import io
import itertools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from topictk.corpus.readers import ReadStats, TextDocument, open_source
from topictk.errors import CorpusError, CorpusUsageError, UsageError
from topictk.limits import short

# the longest field read (the csv module's default, 128 KiB, is shorter than many documents);
# longer ones are nearly always a quote that is never closed, which makes the rest of the file
# one field, so the limit stays finite and the message points at the quotes
FIELD_LIMIT = 64 * 2**20
SNIFF_BYTES = 64 * 1024
SNIFF_DELIMITERS = ",;\t|"
DEFAULT_TEXT_COLUMN = "text"
MAX_LISTED = 20           # columns named in a message


@dataclass(frozen=True)
class TableOptions:
    """Which columns of a CSV/TSV file hold what: ``text_columns`` (joined by a newline, in
    this order), ``id_column`` (default: FILE:LINE) and the ``delimiter`` (default: tab for
    TSV, sniffed for CSV)."""

    text_columns: tuple[str, ...] = (DEFAULT_TEXT_COLUMN,)
    id_column: str | None = None
    delimiter: str | None = None


def check_table_options(table: TableOptions | None, fmt: str) -> None:
    """Refuse CSV/TSV column options given for input of another format."""
    if table is not None and fmt not in ("csv", "tsv"):
        raise UsageError(f"--text-column, --id-column and --delimiter describe CSV/TSV input, "
                         f"not {fmt} input; drop them, or give --format csv")


def parse_delimiter(value: str | None) -> str | None:
    """``--delimiter``: one character; ``tab`` or ``\\t`` for a tab."""
    if value is None:
        return None
    if value in ("tab", "\\t"):
        return "\t"
    if len(value) != 1 or value in "\"\r\n":
        raise CorpusUsageError(f"--delimiter must be one character (or tab); got {value!r}")
    return value


def _open_text(source: str) -> tuple[str, IO[str]]:
    """(name, text stream) of a file (``.gz`` allowed) or standard input: UTF-8 with an
    optional byte-order mark; undecodable bytes become surrogates, found per row."""
    name, raw = open_source(source)
    text = io.TextIOWrapper(raw, encoding="utf-8-sig", errors="surrogateescape", newline="")
    return name, text


def _delimiter(stream: IO[str], fmt: str,
               given: str | None) -> tuple[str, bool, Iterable[str]]:
    """The delimiter, whether it was guessed from the file, and the lines of ``stream`` from
    its start (a sniffed sample is read to the end of a line, then read again by the csv
    reader)."""
    if given is not None or fmt == "tsv":
        return given or "\t", False, stream
    sample = stream.read(SNIFF_BYTES)
    sample += stream.readline()
    lines = itertools.chain(io.StringIO(sample, newline=""), stream)
    try:
        return csv.Sniffer().sniff(sample, delimiters=SNIFF_DELIMITERS).delimiter, True, lines
    except csv.Error:
        return ",", False, lines


def _undecodable(cells: list[str]) -> bool:
    return any(any("\udc80" <= ch <= "\udcff" for ch in cell) for cell in cells)


def _shown(delimiter: str) -> str:
    return "tab" if delimiter == "\t" else repr(delimiter)


def _columns(name: str, header: list[str], opts: TableOptions,
             guessed: str | None = None) -> tuple[list[int], int | None]:
    """Indices of the text columns and of the id column, which must be in the header.
    ``guessed``: the delimiter, when it was sniffed; a column missing because the guess is
    wrong (the header split on another delimiter has it) is told as such."""
    index = {column: i for i, column in enumerate(header)}
    wanted = [*opts.text_columns, *([opts.id_column] if opts.id_column else [])]
    missing = [column for column in wanted if column not in index]
    if missing and guessed is not None:
        line = guessed.join(header)
        for other in SNIFF_DELIMITERS.replace(guessed, ""):
            cells = {cell.strip() for cell in next(csv.reader([line], delimiter=other), [])}
            if all(column in cells for column in wanted):
                raise CorpusUsageError(
                    f"{name}:1: no column {short(missing[0], 70)} when the rows are split on "
                    f"{_shown(guessed)}, the delimiter guessed from the start of the file; the "
                    f"header splits into its columns on {_shown(other)}: give --delimiter "
                    f"{'tab' if other == chr(9) else repr(other)}")
    if missing:
        option = "--id-column" if missing[0] == opts.id_column else "--text-column"
        has = ", ".join(short(column, 70) for column in header[:MAX_LISTED])
        more = f" and {len(header) - MAX_LISTED} more" if len(header) > MAX_LISTED else ""
        # one column: perhaps the guess split nothing; say what was guessed and what sets it
        split = (f", split on {_shown(guessed)}, the delimiter guessed from the start of the "
                 f"file (--delimiter sets it)" if guessed is not None and len(header) == 1
                 else "")
        raise CorpusUsageError(f"{name}:1: no column {short(missing[0], 70)}; the header (the "
                               f"first row{split}) has {has}{more}; name the column with "
                               f"{option}")
    return ([index[c] for c in opts.text_columns],
            index[opts.id_column] if opts.id_column else None)


def _records(name: str, reader) -> Iterator[tuple[int, list[str]]]:
    """(line the record starts on, its cells) of every record; a csv error names the line
    on which the record it was met in starts."""
    line = 1
    while True:
        try:
            cells = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            raise _csv_error(name, line, exc) from None
        yield line, cells
        line = reader.line_num + 1


def _header(name: str, records: Iterator[tuple[int, list[str]]]) -> list[str]:
    _, header = next(records, (1, None))
    if header is None:
        raise CorpusUsageError(f"{name}: empty; a CSV/TSV input needs a header row naming its "
                               f"columns")
    if _undecodable(header):
        raise CorpusError(f"{name}:1: not valid UTF-8; convert the file to UTF-8")
    header = [column.strip() for column in header]
    seen: set[str] = set()
    for column in header:
        if column in seen:
            raise CorpusError(f"{name}:1: column {column!r} appears twice in the header; name "
                              f"each column once")
        seen.add(column)
    return header


def read_table(source: str, fmt: str, errors: str, stats: ReadStats,
               opts: TableOptions) -> Iterator[TextDocument]:
    """One document per row of a CSV (``fmt`` "csv") or TSV ("tsv") file with a header row."""
    name, stream = _open_text(source)
    previous = csv.field_size_limit(FIELD_LIMIT)
    try:
        delimiter, sniffed, lines = _delimiter(stream, fmt, opts.delimiter)
        reader = csv.reader(lines, delimiter=delimiter, strict=True)
        yield from _rows(name, _records(name, reader), errors, stats, opts,
                         delimiter if sniffed else None)
    except OSError as exc:
        raise CorpusError(f"{name}: cannot be read ({exc}); check that the file is "
                          f"complete") from None
    finally:
        csv.field_size_limit(previous)
        if source != "-":
            stream.close()


def _csv_error(name: str, line: int, exc: csv.Error) -> CorpusError:
    if "field larger than field limit" in str(exc):
        return CorpusError(f"{name}:{line}: a field is longer than {FIELD_LIMIT:,} characters, "
                           f"the most a cell may hold; most likely a quote opened on or after "
                           f"this line is never closed: check the quotes")
    return CorpusError(f"{name}:{line}: not valid CSV ({exc}); check the quotes of this row "
                       f"(a quote inside a quoted field is written twice: \"\")")


def _rows(name: str, records: Iterator[tuple[int, list[str]]], errors: str, stats: ReadStats,
          opts: TableOptions, guessed: str | None = None) -> Iterator[TextDocument]:
    header = _header(name, records)
    text_at, id_at = _columns(name, header, opts, guessed)
    skip = set(text_at) | ({id_at} if id_at is not None else set())
    for start, cells in records:
        if not cells:
            continue                    # a blank line is no row
        if len(cells) != len(header):
            raise CorpusError(f"{name}:{start}: the row has {len(cells)} fields, the header "
                              f"{len(header)}; quote fields that hold the delimiter, and give "
                              f"every row one field per column")
        if _undecodable(cells):
            if errors == "skip":
                stats.skip()
                continue
            raise CorpusError(f"{name}:{start}: not valid UTF-8; convert the file to UTF-8, "
                              f"or use --encoding-errors skip to count and skip such rows")
        text = "\n".join(cells[i] for i in text_at if cells[i])
        doc_id = cells[id_at] if id_at is not None else f"{Path(name).name}:{start}"
        meta = {header[i]: cell for i, cell in enumerate(cells) if i not in skip and cell}
        stats.documents += 1
        yield TextDocument(id=doc_id, text=text, meta=meta, origin=f"{name}:{start}")
