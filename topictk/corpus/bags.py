"""Bag-of-words files other topic-model tools write, each with a vocabulary file (one word per
line, line i is word id i):

* LDA-C (Blei's lda-c; gensim's BleiCorpus; the ``lda`` package): one document per line,
  ``N id:count id:count ...`` with N pairs and 0-based word ids;
* Matrix Market coordinate files (gensim's MmCorpus): a ``%%MatrixMarket matrix coordinate``
  banner, ``%`` comments, a size line ``documents words entries``, then ``doc word count``
  lines with 1-based ids.

Both are checked as UCI docword input is: a header or count that disagrees with the body (a
Matrix Market size line must count the entries exactly, and its documents as the entries name
them, see ``readers.check_document_count``), ids out of range and counts that are not positive
integers are refused, naming the file and line.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from topictk.corpus.readers import (
    COUNT_MAX,
    BagOfWords,
    EntryWording,
    _check_entries,
    _check_memory,
    check_document_count,
    _to_csr,
    entry_triples,
    input_vocab_path,
    read_vocab,
    read_whole,
)
from topictk.errors import CorpusError

# vocabulary files other tools write beside a corpus file NAME: gensim's BleiCorpus NAME.vocab,
# the lda package's NAME-without-suffix.tokens, or a vocab.txt
VOCAB_SUFFIXES = (".vocab", ".tokens")


def find_vocab(path: Path) -> Path | None:
    """The vocabulary beside a bag-of-words file: ``NAME.vocab``, ``STEM.vocab``,
    ``STEM.tokens`` or ``vocab.txt``."""
    stem = path.name.removesuffix(".gz")
    stem = stem.rsplit(".", 1)[0] if "." in stem else stem
    candidates = [path.with_name(path.name + ".vocab")]
    candidates += [path.with_name(stem + suffix) for suffix in VOCAB_SUFFIXES]
    candidates.append(path.with_name("vocab.txt"))
    return next((c for c in candidates if c.is_file()), None)


def _vocabulary(path: Path, vocab_path: str | None, what: str) -> list[str]:
    """The words of the vocabulary of a ``what`` input (given, or found beside it)."""
    return read_vocab(input_vocab_path(path, vocab_path, find_vocab,
                                       f"{what} input needs its vocabulary (one word per "
                                       f"line); add --vocab FILE"))


def _read(path: Path) -> bytes:
    """The whole file, refused when it is cut short or binary."""
    return read_whole(path, "a text bag-of-words file")


def _int(text: bytes, path: Path, line: int, what: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise CorpusError(f"{path}:{line}: {what} must be an integer; got "
                          f"{text[:40].decode('utf-8', 'replace')!r}") from None


def read_ldac(source: str, vocab_path: str | None) -> BagOfWords:
    """Read an LDA-C file (``N id:count ...`` per document, 0-based ids) and its vocabulary."""
    path = Path(source)
    vocab = _vocabulary(path, vocab_path, "LDA-C")
    lines = _read(path).splitlines()
    while lines and not lines[-1].strip():
        lines.pop()
    docs, words, counts = [], [], []
    for lineno, line in enumerate(lines, start=1):
        fields = line.split()
        if not fields:
            raise CorpusError(f"{path}:{lineno}: empty line; every line is one document, "
                              f"'N id:count ...' (0 for an empty document)")
        n = _int(fields[0], path, lineno, "the first number (pairs that follow)")
        if n != len(fields) - 1:
            raise CorpusError(f"{path}:{lineno}: the line says {n} id:count pairs but has "
                              f"{len(fields) - 1}; the file is damaged or not LDA-C")
        for pair in fields[1:]:
            word, colon, count = pair.partition(b":")
            if not colon:
                raise CorpusError(f"{path}:{lineno}: {pair[:40].decode('utf-8', 'replace')!r} "
                                  f"is not an id:count pair")
            word_id = _int(word, path, lineno, "a word id")
            if not 0 <= word_id < len(vocab):
                raise CorpusError(f"{path}:{lineno}: word id {word_id} outside 0..{len(vocab) - 1}"
                                  f" (the vocabulary's {len(vocab)} words); give the vocabulary "
                                  f"that belongs to this file")
            value = _int(count, path, lineno, "a count")
            if not 1 <= value <= COUNT_MAX:
                raise CorpusError(f"{path}:{lineno}: count {value} must be a positive integer "
                                  f"of at most {COUNT_MAX:,}")
            docs.append(lineno)
            words.append(word_id + 1)
            counts.append(value)
    doc_ids, word_ids = np.array(docs, dtype=np.int64), np.array(words, dtype=np.int64)
    counts = np.array(counts, dtype=np.int64)
    _check_memory(path, counts, lines=doc_ids)
    indptr, indices, counts = _to_csr(path, doc_ids, word_ids, counts, len(lines))
    return BagOfWords(indptr=indptr, indices=indices, counts=counts, vocab=vocab,
                      source=str(path))


def _mm_header(raw: bytes, path: Path) -> tuple[int, int, int, int, bytes]:
    """(D, W, NNZ, line of the first entry, body) of a Matrix Market coordinate file."""
    lines = raw.split(b"\n")
    banner = lines[0].split() if lines else []
    if len(banner) < 5 or banner[0].lower() != b"%%matrixmarket":
        raise CorpusError(f"{path}:1: expected the banner '%%MatrixMarket matrix coordinate "
                          f"real general' of a Matrix Market file")
    kind = [b.lower() for b in banner[1:5]]
    if kind[:2] != [b"matrix", b"coordinate"] or kind[2] not in (b"real", b"integer") \
            or kind[3] != b"general":
        raise CorpusError(f"{path}:1: a {' '.join(b.decode('utf-8', 'replace') for b in kind)} "
                          f"Matrix Market file is not a bag of words; give a 'matrix coordinate "
                          f"real general' (or integer) file, documents as rows")
    at = 1
    while at < len(lines) and (not lines[at].strip() or lines[at].lstrip().startswith(b"%")):
        at += 1
    size = lines[at].split() if at < len(lines) else []
    if len(size) != 3:
        raise CorpusError(f"{path}:{at + 1}: expected the size line 'documents words entries'")
    n_docs, n_words, nnz = (_int(s, path, at + 1, "the size line") for s in size)
    return n_docs, n_words, nnz, at + 2, b"\n".join(lines[at + 1:])


_MM_ENTRIES = EntryWording(
    not_numbers="{path}: entry lines must be 'document word count' numbers",
    not_triples="{path}: the entries hold {size} numbers, not a multiple of 3; every entry "
                "line must be 'document word count'",
    wrong_count="{path}:{line}: the size line says {nnz} entries but the file has {rows}; the "
                "file is truncated or its header is wrong")


def read_mm(source: str, vocab_path: str | None) -> BagOfWords:
    """Read a Matrix Market coordinate file (documents as rows, 1-based ids) and its
    vocabulary."""
    path = Path(source)
    vocab = _vocabulary(path, vocab_path, "Matrix Market")
    n_docs, n_words, nnz, first, body = _mm_header(_read(path), path)
    triples = entry_triples(body, np.float64, nnz, path, _MM_ENTRIES, line=first - 1)
    whole = np.all(triples == np.floor(triples), axis=1)
    if not whole.all():
        line = first + int(np.argmin(whole))
        raise CorpusError(f"{path}:{line}: ids and counts must be whole numbers (word counts)")
    docs, words = triples[:, 0].astype(np.int64), triples[:, 1].astype(np.int64)
    counts = triples[:, 2].astype(np.int64)
    _check_entries(path, docs, words, counts, n_docs, n_words, first_line=first,
                  header="size line")
    check_document_count(path, n_docs, int(docs.max()) if docs.size else 0, line=first - 1,
                         header="size line")
    if len(vocab) != n_words:
        raise CorpusError(f"{path}:{first - 1}: the size line says {n_words} words but the "
                          f"vocabulary has {len(vocab)}; give the vocabulary that belongs to "
                          f"this file")
    _check_memory(path, counts, first_line=first)
    indptr, indices, counts = _to_csr(path, docs, words, counts, n_docs)
    return BagOfWords(indptr=indptr, indices=indices, counts=counts, vocab=vocab,
                      source=str(path))
