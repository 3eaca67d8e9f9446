"""The CSV/TSV, LDA-C and Matrix Market readers on generated and damaged input: an intact
file reads back exactly what was written; a damaged one is read or refused with one of
topictk's own errors, never another exception."""
from __future__ import annotations

import csv
import io
import tempfile
from pathlib import Path

import numpy as np
from hypothesis import strategies as st

from tests.properties._props import damaged, quick_and_long
from topictk.corpus.bags import read_ldac, read_mm
from topictk.corpus.readers import ReadStats
from topictk.corpus.tables import TableOptions, read_table
from topictk.errors import TopictkError

# ---------------------------------------------------------------- CSV / TSV

_CELL = st.text(alphabet=st.characters(blacklist_categories=("Cs",),
                                       blacklist_characters="\x00"), max_size=12)
_SPECIAL = st.sampled_from(['a,b', 'say "hi"', "two\nlines", "cr\rlf\r\n", "tab\there", ";|", ""])


@st.composite
def table_input(draw):
    n_columns = draw(st.integers(1, 4))
    header = [f"c{i}" for i in range(n_columns)]
    rows = draw(st.lists(st.lists(_CELL | _SPECIAL, min_size=n_columns, max_size=n_columns),
                         max_size=6))
    delimiter = draw(st.sampled_from([",", "\t", ";", "|"]))
    out = io.StringIO(newline="")
    # the writer quotes a field with a line break only if the break is in its line
    # terminator: a lone \r in a field of a \n-terminated file would end the record
    terminator, quoting = draw(st.sampled_from([("\r\n", csv.QUOTE_MINIMAL),
                                                ("\n", csv.QUOTE_ALL)]))
    csv.writer(out, delimiter=delimiter, lineterminator=terminator, quoting=quoting
               ).writerows([header, *rows])
    data = ("\ufeff" if draw(st.booleans()) else "") + out.getvalue()
    raw = data.encode("utf-8")
    intact = draw(st.booleans())
    if not intact:
        raw = draw(damaged(raw))
    texts = draw(st.lists(st.sampled_from(header), min_size=1, max_size=2, unique=True))
    return header, rows, delimiter, raw, intact, texts


def check_table(example) -> None:
    header, rows, delimiter, raw, intact, texts = example
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "docs.csv"
        path.write_bytes(raw)
        opts = TableOptions(text_columns=tuple(texts), delimiter=delimiter)
        try:
            docs = list(read_table(str(path), "csv", "strict", ReadStats(), opts))
        except TopictkError:
            assert not intact, "an intact file is read"
            return
    if intact:
        at = [header.index(t) for t in texts]
        assert [d.text for d in docs] == ["\n".join(r[i] for i in at if r[i]) for r in rows]
        assert [d.meta for d in docs] == [{h: c for h, c in zip(header, r, strict=True)
                                           if h not in texts and c} for r in rows]


test_table_reader, test_table_reader_long = quick_and_long(check_table, table_input())

# ---------------------------------------------------------------- LDA-C


def _bag_entries(bag) -> dict:
    return {(d, int(w)): int(c) for d in range(bag.indptr.size - 1)
            for w, c in zip(bag.indices[bag.indptr[d]:bag.indptr[d + 1]],
                            bag.counts[bag.indptr[d]:bag.indptr[d + 1]], strict=True)}


def _check_bag(bag, n_words: int) -> None:
    assert bag.indptr[0] == 0 and np.all(np.diff(bag.indptr) >= 0)
    assert bag.indices.size == bag.counts.size == bag.indptr[-1]
    assert np.all(bag.counts >= 1) and np.all((bag.indices >= 0) & (bag.indices < n_words))


@st.composite
def bag_input(draw):
    n_docs = draw(st.integers(1, 5))
    n_words = draw(st.integers(1, 6))
    pairs = draw(st.lists(st.tuples(st.integers(0, n_docs - 1), st.integers(0, n_words - 1)),
                          unique=True, max_size=12))
    entries = {pair: draw(st.integers(1, 9)) for pair in pairs}
    vocab = "".join(f"w{i}\n" for i in range(n_words)).encode()
    damage = draw(st.sampled_from(["none", "file", "file", "vocab"]))
    return n_docs, n_words, entries, vocab, damage, draw(st.data())


def check_ldac(example) -> None:
    n_docs, _n_words, entries, vocab, damage, data = example
    lines = []
    for d in range(n_docs):
        row = sorted((w, c) for (doc, w), c in entries.items() if doc == d)
        lines.append(" ".join([str(len(row)), *(f"{w}:{c}" for w, c in row)]))
    raw = ("\n".join(lines) + "\n").encode()
    if damage == "file":
        raw = data.draw(damaged(raw))
    elif damage == "vocab":
        vocab = data.draw(damaged(vocab))
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "c.lda-c").write_bytes(raw)
        (Path(tmp) / "c.lda-c.vocab").write_bytes(vocab)
        try:
            bag = read_ldac(str(Path(tmp) / "c.lda-c"), None)
        except TopictkError:
            assert damage != "none", "an intact file is read"
            return
    _check_bag(bag, len(bag.vocab))
    if damage == "none":
        assert _bag_entries(bag) == entries and bag.indptr.size - 1 == n_docs


test_ldac_reader, test_ldac_reader_long = quick_and_long(check_ldac, bag_input())

# ---------------------------------------------------------------- Matrix Market


def check_mm(example) -> None:
    n_docs, n_words, entries, vocab, damage, data = example
    body = "".join(f"{d + 1} {w + 1} {c}{'.0' if c % 2 else ''}\n"
                   for (d, w), c in entries.items())
    raw = (f"%%MatrixMarket matrix coordinate real general\n% written by a test\n"
           f"{n_docs} {n_words} {len(entries)}\n{body}").encode()
    if damage == "file":
        raw = data.draw(damaged(raw))
    elif damage == "vocab":
        vocab = data.draw(damaged(vocab))
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "c.mm").write_bytes(raw)
        (Path(tmp) / "vocab.txt").write_bytes(vocab)
        try:
            bag = read_mm(str(Path(tmp) / "c.mm"), None)
        except TopictkError:
            assert damage != "none", "an intact file is read"
            return
    _check_bag(bag, len(bag.vocab))
    if damage == "none":
        assert _bag_entries(bag) == entries and bag.indptr.size - 1 == n_docs


test_mm_reader, test_mm_reader_long = quick_and_long(check_mm, bag_input())
