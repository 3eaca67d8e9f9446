"""Readers for every input ``topictk prepare`` accepts.

Text inputs yield :class:`TextDocument` objects (an id, the raw text, metadata fields); UCI
bag-of-words input is read whole into a :class:`BagOfWords` (CSR counts plus its vocabulary).
Every error names the file and, where there is one, the line.
"""
from __future__ import annotations

import gzip
import json
import os
import re
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import numpy as np

from topictk.errors import CorpusError, CorpusUsageError
from topictk.limits import json_loads, short, text_lines

FORMATS = ("auto", "text", "dir", "jsonl", "csv", "tsv", "uci", "ldac", "mm")
BAG_FORMATS = ("uci", "ldac", "mm")        # bag-of-words input, each with its vocabulary file
# file name endings (after an optional .gz) -> format
SUFFIXES = {".jsonl": "jsonl", ".ndjson": "jsonl", ".csv": "csv", ".tsv": "tsv", ".tab": "tsv",
            ".lda-c": "ldac", ".ldac": "ldac", ".mm": "mm"}
COUNT_MAX = 2**31 - 1      # tokens of one word in one document (int32 counts)
# empty documents a bag-of-words header may count after the last document with an entry:
# this many, or this share of the documents, whichever is more (see check_document_count)
EMPTY_TAIL_MIN = 10
EMPTY_TAIL_SHARE = 0.01
BYTES_PER_TOKEN = 24       # what prepare holds per token at its peak (ids, split, CSR, copies)


def max_tokens() -> int:
    """The most tokens ``prepare`` can hold in this machine's physical memory."""
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 2**62
    return memory // BYTES_PER_TOKEN


@dataclass
class TextDocument:
    """One raw document: its id, text and any metadata fields, and where it came from
    (``FILE:LINE``, or a file) for messages."""

    id: str
    text: str
    meta: dict = field(default_factory=dict)
    origin: str = ""


@dataclass
class ReadStats:
    """What the readers skipped, for the prepare summary, and where: ``skipped_positions``
    are the input documents' positions (0-based, counting skipped ones) of those skipped, so
    that a ``--meta-file`` row per input document can still be matched."""

    skipped_undecodable: int = 0
    documents: int = 0                       # input documents met so far, skipped or not
    skipped_positions: list[int] = field(default_factory=list)

    def skip(self) -> None:
        self.skipped_undecodable += 1
        self.skipped_positions.append(self.documents)
        self.documents += 1


@dataclass
class BagOfWords:
    """Documents as CSR word counts over a fixed vocabulary (UCI docword input)."""

    indptr: np.ndarray   # (D + 1,) int64
    indices: np.ndarray  # (nnz,) int32, ascending inside a row
    counts: np.ndarray   # (nnz,) int32, >= 1
    vocab: list[str]
    source: str


def _format_of(source: str) -> str:
    if source == "-":
        return "text"
    path = Path(source)
    if path.is_dir():
        return "dir"
    name = path.name.lower().removesuffix(".gz")
    if name.startswith("docword."):
        return "uci"
    return SUFFIXES.get(Path(name).suffix, "text")


def detect_format(inputs: list[str]) -> str:
    """The input format, guessed from the names given on the command line; every input must
    have the same one (one format is read per command)."""
    formats = {source: _format_of(source) for source in inputs}
    kinds = sorted(set(formats.values()))
    if len(kinds) > 1:
        listed = ", ".join(f"{source} ({kind})" for source, kind in formats.items())
        raise CorpusUsageError(f"the inputs mix formats: {listed}; give inputs of one format, or "
                               f"--format to read them all one way")
    return kinds[0]


def _open_binary(path: Path) -> IO[bytes]:
    if not path.exists():
        raise CorpusUsageError(f"{path}: no such file; check the input path")
    if path.is_dir():
        raise CorpusUsageError(f"{path}: is a directory; use --format dir for a folder of "
                               f".txt files")
    if path.suffix == ".gz":
        return gzip.open(path, "rb")
    return open(path, "rb")


def open_source(source: str) -> tuple[str, IO[bytes]]:
    """(name, byte stream) of a file (``.gz`` allowed) or of standard input (``-``)."""
    if source == "-":
        return "<stdin>", sys.stdin.buffer
    return source, _open_binary(Path(source))


def _looks_utf16(raw: bytes) -> bool:
    """UTF-16 text: a byte-order mark, or NUL bytes between the letters (on one side of every
    pair), which would otherwise be called binary."""
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        return True
    body = raw.rstrip(b"\r\n")
    if len(body) < 2 or body.count(0) * 3 < len(body):
        return False
    even, odd = body[0::2].count(0), body[1::2].count(0)
    return min(even, odd) * 4 <= max(even, odd)


def _decode(raw: bytes, where: str, errors: str, stats: ReadStats) -> str | None:
    if _looks_utf16(raw):
        if errors == "skip":
            stats.skip()
            return None
        raise CorpusError(f"{where}: looks like UTF-16 text (a byte-order mark or NUL bytes "
                          f"between the letters); convert the file to UTF-8, e.g. with "
                          f"'iconv -f UTF-16 -t UTF-8'")
    if b"\x00" in raw:
        if errors == "skip":
            stats.skip()
            return None
        raise CorpusError(f"{where}: looks like a binary file (NUL byte); give a text file, "
                          f"or --encoding-errors skip to skip such lines")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        if errors == "skip":
            stats.skip()
            return None
        raise CorpusError(f"{where}: not valid UTF-8; convert the file to UTF-8, or use "
                          f"--encoding-errors skip to count and skip such lines") from None


# a line ended by \r\n, \n or a carriage return alone, or the last one of a file
_CR_LINE = re.compile(rb"[^\r\n]*(?:\r\n|\n|\r|$)")


def _numbered_lines(source: str) -> Iterator[tuple[str, int, bytes]]:
    """(name, line number, raw line) of a file (``.gz`` allowed) or of standard input (``-``),
    closing the file and naming it when it cannot be read to the end."""
    name, stream = open_source(source)
    try:
        lineno = 0
        for raw in stream:
            # a carriage return alone ends a line too (old Mac files, some exports), as in
            # Python's universal newlines: the file is not one long document
            for part in _CR_LINE.findall(raw) if b"\r" in raw else (raw,):
                if not part:
                    continue
                lineno += 1
                yield name, lineno, part
    except (OSError, EOFError) as exc:
        raise CorpusError(f"{name}: cannot be read ({exc}); check that the file is "
                          f"complete") from None
    finally:
        if stream is not sys.stdin.buffer:
            stream.close()


def read_lines(source: str, errors: str, stats: ReadStats) -> Iterator[TextDocument]:
    """One document per line of a file (``.gz`` allowed) or of standard input (``-``)."""
    for name, lineno, raw in _numbered_lines(source):
        text = _decode(raw, f"{name}:{lineno}", errors, stats)
        if text is not None:
            stats.documents += 1
            yield TextDocument(id=f"{name}:{lineno}", text=text, origin=f"{name}:{lineno}")


def read_directory(directory: str, errors: str, stats: ReadStats) -> Iterator[TextDocument]:
    """One document per ``.txt`` file in a directory (recursively), in sorted path order;
    files and folders whose names start with a dot (``.ipynb_checkpoints``, editors' backups)
    are not documents and are skipped."""
    root = Path(directory)
    files = sorted(p for p in root.rglob("*.txt") if p.is_file()
                   and not any(part.startswith(".") for part in p.relative_to(root).parts))
    if not files:
        raise CorpusUsageError(f"{root}: no .txt files found (hidden files and folders are "
                               f"skipped); give a folder of .txt files, or files with one "
                               f"document per line")
    for path in files:
        text = _decode(path.read_bytes(), str(path), errors, stats)
        if text is not None:
            stats.documents += 1
            yield TextDocument(id=str(path.relative_to(root)), text=text, origin=str(path))


def read_jsonl(source: str, errors: str, stats: ReadStats,
               text_field: str = "text") -> Iterator[TextDocument]:
    """One JSON object per line of a file (``.gz`` allowed) or of standard input (``-``):
    ``text`` is the document, every other field is metadata."""
    for name, lineno, raw in _numbered_lines(source):
        where = f"{name}:{lineno}"
        line = _decode(raw, where, errors, stats)
        if line is None or not line.strip():
            continue
        try:
            record = json_loads(line)
        except json.JSONDecodeError as exc:
            raise CorpusError(f"{where}: not valid JSON ({exc.msg}); each line must be one "
                              f"JSON object") from None
        if not isinstance(record, dict):
            raise CorpusError(f"{where}: expected a JSON object with a '{text_field}' field")
        default_id = f"{Path(name).name if source != '-' else name}:{lineno}"
        yield record_document(record, where, default_id, stats, text_field)


def record_document(record: dict, where: str, default_id: str, stats: ReadStats,
                    text_field: str = "text", id_field: str | None = None,
                    unit: str = "line") -> TextDocument:
    """The document of one record (a JSONL line, or a record given in memory): its
    ``text_field`` is the text, every other field metadata; the id is ``id_field``'s value,
    else an ``id`` or ``doc_id`` field, else ``default_id``. ``record`` is consumed (its text
    field removed); ``unit`` names a record in the message about a missing text."""
    text = record.pop(text_field, None)
    if not isinstance(text, str):
        raise CorpusError(f"{where}: missing or non-string '{text_field}' field; every "
                          f"{unit} needs the document text in '{text_field}'")
    if id_field is not None:
        if record.get(id_field) is None:
            raise CorpusError(f"{where}: no '{id_field}' field, the id asked for; every {unit} "
                              f"needs its id in '{id_field}'")
        doc_id = str(record[id_field])
    else:
        doc_id = str(record.get("id", record.get("doc_id", default_id)))
    stats.documents += 1
    return TextDocument(id=doc_id, text=text, meta=record, origin=where)


DUPLICATE_IDS = ("refuse", "rename")
RENAMED = "{id}~{n}"          # the n-th document with one id, renamed (n >= 2)


def distinct_ids(ids: list[str], origins: list[str], duplicates: str = "refuse") -> list[str]:
    """``ids`` checked to name one document each, as the store's id files and every export
    use them: an id given twice is refused (naming it and both places), or with
    ``duplicates="rename"`` the second is renamed ``ID~2``, the third ``ID~3`` and so on, in
    input order, skipping names another document has. An id holding a line break is refused:
    the store writes ids one per line."""
    seen: dict[str, int] = {}
    for i, doc_id in enumerate(ids):
        if "\n" in doc_id or "\r" in doc_id:
            raise CorpusError(f"{origins[i]}: document id {short(doc_id)} holds a line break; "
                              f"ids are written one per line: remove it from the id")
        if doc_id in seen and duplicates != "rename":
            first, second = origins[seen[doc_id]], origins[i]
            file_a, _, line_a = first.rpartition(":")
            file_b, _, line_b = second.rpartition(":")
            where = (f"{file_a}: document id {short(doc_id)} appears twice (lines {line_a} and "
                     f"{line_b})" if file_a == file_b and file_a else
                     f"document id {short(doc_id)} appears twice ({first} and {second})")
            raise CorpusError(f"{where}; give each document its own id, or --duplicate-ids "
                              f"rename to number the repeats "
                              f"({RENAMED.format(id=doc_id, n=2)}, ...)")
        seen.setdefault(doc_id, i)
    if len(seen) == len(ids):
        return ids
    taken = set(ids)
    count: dict[str, int] = {}
    renamed = []
    for doc_id in ids:
        n = count.get(doc_id, 0) + 1
        if n == 1:
            count[doc_id] = 1
            renamed.append(doc_id)
            continue
        while RENAMED.format(id=doc_id, n=n) in taken:
            n += 1
        count[doc_id] = n
        new = RENAMED.format(id=doc_id, n=n)
        taken.add(new)
        renamed.append(new)
    return renamed


def no_documents_message(inputs: list[str], stats: ReadStats) -> str:
    """Why an input gave no document: empty, or every document skipped as undecodable."""
    where = ", ".join(inputs)
    if stats.skipped_undecodable:
        return (f"{where}: no documents left: every one ({stats.skipped_undecodable}) was "
                f"skipped as undecodable (--encoding-errors skip); convert the input to UTF-8 "
                f"text")
    return f"{where}: no documents found; the input is empty"


def read_text_documents(inputs: list[str], fmt: str, errors: str,
                        stats: ReadStats) -> Iterator[TextDocument]:
    """The documents of every input in order, read as ``fmt`` ("dir", "jsonl" or "text")."""
    for source in inputs:
        if fmt == "dir":
            yield from read_directory(source, errors, stats)
        elif fmt == "jsonl":
            yield from read_jsonl(source, errors, stats)
        else:
            yield from read_lines(source, errors, stats)


def read_vocab(path: Path) -> list[str]:
    """A vocabulary file: one word per line, line i is word id i (1-based in UCI files); no
    empty line (other than at the end) and no word twice."""
    with _open_binary(path) as stream:
        try:
            raw = stream.read()
        except (OSError, EOFError) as exc:
            raise CorpusError(f"{path}: cannot be read ({exc}); check that the vocabulary file "
                              f"is complete") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise CorpusError(f"{path}: vocabulary is not valid UTF-8; convert it to UTF-8") from None
    words = [line.strip() for line in text_lines(text)]
    while words and not words[-1]:
        words.pop()
    if not words:
        raise CorpusUsageError(f"{path}: vocabulary file is empty")
    check_distinct_words(words, path, "vocabulary")
    return words


def check_distinct_words(words: list[str], path: Path, what: str) -> None:
    """Every line of a word list holds a word, and no word twice (line i is word i)."""
    seen: dict[str, int] = {}
    for lineno, word in enumerate(words, start=1):
        if not word:
            raise CorpusError(f"{path}:{lineno}: empty line in the {what}; every line must hold "
                              f"one word (remove the line)")
        if word in seen:
            raise CorpusError(f"{path}:{lineno}: '{word}' repeats line {seen[word]}; each word "
                              f"must appear once")
        seen[word] = lineno


def find_uci_vocab(docword: Path) -> Path | None:
    """``vocab.NAME.txt`` (or ``vocab.txt``) beside ``docword.NAME.txt[.gz]``, if present."""
    name = docword.name
    for suffix in (".txt.gz", ".txt", ".gz"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
            break
    stem = name[len("docword."):] if name.startswith("docword.") else name
    for candidate in (docword.with_name(f"vocab.{stem}.txt"), docword.with_name("vocab.txt")):
        if candidate.is_file():
            return candidate
    return None


def read_whole(path: Path, kind: str) -> bytes:
    """Every byte of a file (``.gz`` allowed), refused when it is cut short or holds a NUL
    byte (``kind`` names the text file expected there)."""
    with _open_binary(path) as stream:
        try:
            raw = stream.read()
        except (OSError, EOFError) as exc:
            raise CorpusError(f"{path}: cannot be read ({exc}); the file looks truncated") from None
    if b"\x00" in raw:
        raise CorpusError(f"{path}: looks like a binary file, not {kind}")
    return raw


@dataclass(frozen=True)
class EntryWording:
    """How a bag-of-words format words the three refusals of its entry lines, as templates
    of ``path``, ``size`` (the numbers read), ``rows`` (the entries they make), ``nnz`` (the
    entries the header says) and ``line`` (the header's line)."""

    not_numbers: str
    not_triples: str
    wrong_count: str


def entry_triples(body: bytes, dtype: type, nnz: int, path: Path, wording: EntryWording,
                  line: int = 0) -> np.ndarray:
    """The (nnz, 3) ``doc word count`` rows of the whitespace-separated numbers of ``body``,
    refused (in the format's ``wording``) when one is no number, when they do not make whole
    rows, or when the rows are not the header's ``nnz``."""
    try:
        values = np.array(body.split(), dtype=dtype)
    except ValueError:
        raise CorpusError(wording.not_numbers.format(path=path)) from None
    if values.size % 3:
        raise CorpusError(wording.not_triples.format(path=path, size=values.size))
    triples = values.reshape(-1, 3)
    if triples.shape[0] != nnz:
        raise CorpusError(wording.wrong_count.format(path=path, rows=triples.shape[0], nnz=nnz,
                                                     line=line))
    return triples


_UCI_ENTRIES = EntryWording(
    not_numbers="{path}: body lines must be 'docID wordID count' integers",
    not_triples="{path}: body has {size} numbers, not a multiple of 3; every line must be "
                "'docID wordID count'",
    wrong_count="{path}: header says NNZ = {nnz} but the body has {rows} entries; the file is "
                "truncated or its header is wrong")


def input_vocab_path(path: Path, vocab_path: str | None, find: Callable[[Path], Path | None],
                     missing: str) -> Path:
    """The vocabulary file of the bag-of-words input ``path``: ``vocab_path`` when given,
    else the one ``find`` finds beside it; refuses an input that does not exist and one
    without a vocabulary (``missing`` says what to do)."""
    if not path.exists():
        raise CorpusUsageError(f"{path}: no such file; check the input path")
    found = Path(vocab_path) if vocab_path else find(path)
    if found is None:
        raise CorpusUsageError(f"{path}: {missing}")
    return found


def _parse_docword(path: Path) -> tuple[int, int, np.ndarray]:
    """The header's D and W and the body's ``doc word count`` rows (1-based ids) of a UCI
    docword file, whose row count must be the header's NNZ."""
    raw = read_whole(path, "a UCI docword text file")
    head = raw.split(b"\n", 3)
    if len(head) < 3:
        raise CorpusError(f"{path}: expected three header lines (D, W, NNZ) of a UCI docword file")
    try:
        n_docs, n_words, nnz = (int(head[i].strip()) for i in range(3))
    except ValueError:
        raise CorpusError(f"{path}: the first three lines must be the integers D, W and NNZ "
                          f"of a UCI docword file") from None
    body = head[3] if len(head) > 3 else b""
    return n_docs, n_words, entry_triples(body, np.int64, nnz, path, _UCI_ENTRIES)


def _check_entries(path: Path, docs: np.ndarray, word_ids: np.ndarray, counts: np.ndarray,
                   n_docs: int, n_words: int, *, first_line: int = 4,
                   header: str = "header") -> None:
    """Ids within the header's D and W, counts positive and within int32; errors name the
    first offending line (entry i on line ``first_line + i``)."""
    nnz = docs.size
    if nnz and (docs.min() < 1 or docs.max() > n_docs):
        line = first_line + int(np.argmax((docs < 1) | (docs > n_docs)))
        raise CorpusError(f"{path}:{line}: document id outside 1..{n_docs} ({header} D); the "
                          f"header disagrees with the body")
    if nnz and (word_ids.min() < 1 or word_ids.max() > n_words):
        line = first_line + int(np.argmax((word_ids < 1) | (word_ids > n_words)))
        raise CorpusError(f"{path}:{line}: word id outside 1..{n_words} ({header} W); the header "
                          f"disagrees with the body")
    if nnz and counts.min() < 1:
        line = first_line + int(np.argmax(counts < 1))
        raise CorpusError(f"{path}:{line}: counts must be positive integers")
    if nnz and counts.max() > COUNT_MAX:
        line = first_line + int(np.argmax(counts > COUNT_MAX))
        raise CorpusError(f"{path}:{line}: count {int(counts.max())} is more than {COUNT_MAX:,} "
                          f"tokens of one word in one document; the file is damaged")


def check_document_count(path: Path, n_docs: int, last: int, *, line: int = 1,
                         header: str = "header") -> None:
    """Refuse a header whose document count D runs far beyond ``last``, the largest document
    id of the entries. Documents after it would be empty: a few are allowed (some writers
    count the empty documents at the end of their corpus, gensim's MmCorpus among them), at
    most EMPTY_TAIL_MIN or EMPTY_TAIL_SHARE of ``last``, whichever is more; more would be
    phantom documents the split draws test documents from, then drops as empty."""
    allowed = last + max(EMPTY_TAIL_MIN, int(last * EMPTY_TAIL_SHARE))
    if n_docs > allowed:
        raise CorpusError(f"{path}:{line}: the {header} says D = {n_docs:,} documents but the "
                          f"entries name documents 1..{last:,} only, so {n_docs - last:,} would "
                          f"be empty; write the real document count, {last}, on line {line}")


def _check_memory(path: Path, counts: np.ndarray, *, first_line: int = 4,
                  lines: np.ndarray | None = None) -> None:
    """Refuse a file with more tokens than this machine can hold (entry i on line
    ``first_line + i``, or on ``lines[i]``)."""
    total = int(counts.sum())
    if total > max_tokens():
        at = int(np.argmax(counts))
        line = int(lines[at]) if lines is not None else first_line + at
        raise CorpusError(f"{path}: {total:,} tokens would need about "
                          f"{total * BYTES_PER_TOKEN / 2**30:.0f} GiB of memory, more than this "
                          f"machine has; check the counts (the largest, {int(counts.max()):,}, "
                          f"is on line {line})")


def _to_csr(path: Path, docs: np.ndarray, word_ids: np.ndarray, counts: np.ndarray,
            n_docs: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(indptr, indices, counts) of the 1-based rows, words ascending in each document; a
    (document, word) pair listed twice is refused."""
    order = np.lexsort((word_ids, docs))
    docs, word_ids, counts = docs[order] - 1, word_ids[order] - 1, counts[order]
    if docs.size > 1:
        dup = (docs[1:] == docs[:-1]) & (word_ids[1:] == word_ids[:-1])
        if dup.any():
            raise CorpusError(f"{path}: document {int(docs[1:][dup][0]) + 1} lists word "
                              f"{int(word_ids[1:][dup][0]) + 1} twice; each pair must appear once")
    indptr = np.zeros(n_docs + 1, dtype=np.int64)
    np.add.at(indptr, docs + 1, 1)
    np.cumsum(indptr, out=indptr)
    return indptr, word_ids.astype(np.int32), counts.astype(np.int32)


def read_uci(docword: str, vocab_path: str | None, *,
             check_documents: bool = True) -> BagOfWords:
    """Read a UCI ``docword`` file (three header lines D, W, NNZ, then ``doc word count``).
    The header's D may not run far beyond the documents of the entries
    (:func:`check_document_count`); ``check_documents=False`` leaves that to the caller
    (the two parts of an imported split are checked together)."""
    path = Path(docword)
    vpath = input_vocab_path(path, vocab_path, find_uci_vocab,
                             "UCI input needs its vocabulary; add --vocab vocab.NAME.txt")
    vocab = read_vocab(vpath)
    n_docs, n_words, triples = _parse_docword(path)
    docs, word_ids, counts = triples[:, 0], triples[:, 1], triples[:, 2]
    _check_entries(path, docs, word_ids, counts, n_docs, n_words)
    if check_documents:
        check_document_count(path, n_docs, int(docs.max()) if docs.size else 0)
    if len(vocab) != n_words:
        raise CorpusError(f"{vpath}: vocabulary has {len(vocab)} words but {path} says W = "
                          f"{n_words}; give the vocabulary that belongs to this file")
    _check_memory(path, counts)
    indptr, indices, counts = _to_csr(path, docs, word_ids, counts, n_docs)
    return BagOfWords(indptr=indptr, indices=indices, counts=counts, vocab=vocab,
                      source=str(path))
