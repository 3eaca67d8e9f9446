"""The input readers on generated and damaged input: any input either reads correctly or is
refused with one of topictk's own errors, never another exception."""
from __future__ import annotations

import gzip
import json
import tempfile
from pathlib import Path

import numpy as np
from hypothesis import strategies as st

from tests.properties._props import damaged, quick_and_long
from topictk.corpus.prepare import PrepareOptions, prepare
from topictk.corpus.readers import ReadStats, read_jsonl, read_lines, read_uci
from topictk.errors import TopictkError

# ---------------------------------------------------------------- text

_LINE_BYTES = st.one_of(
    st.text(max_size=40).map(lambda t: t.encode("utf-8", "surrogatepass")),
    st.binary(max_size=40),
    st.sampled_from([b"\xef\xbb\xbfword", b"\xff\xfeh\x00i\x00", b"caf\xe9", b"\x00", b"\r",
                     b"a\rb\rc", b"  \t "]))

TEXT_INPUT = st.tuples(st.lists(_LINE_BYTES, max_size=8),
                       st.sampled_from([b"\n", b"\r\n", b"\r"]),
                       st.booleans(),                           # gzip it
                       st.sampled_from(["strict", "skip"]),
                       st.one_of(st.none(), st.integers(0, 400)))   # cut the file here


def check_text(example) -> None:
    lines, newline, gz, errors, cut = example
    raw = newline.join(lines)
    data = gzip.compress(raw, mtime=0) if gz else raw
    if cut is not None:
        data = data[:cut]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / ("docs.txt.gz" if gz else "docs.txt")
        path.write_bytes(data)
        stats = ReadStats()
        try:
            docs = list(read_lines(str(path), errors, stats))
        except TopictkError:
            return
    if cut is None and errors == "strict":
        # read correctly: the text itself, line by line
        assert "".join(d.text for d in docs) == raw.decode("utf-8")
    if errors == "skip":
        assert len(docs) + stats.skipped_undecodable == stats.documents


test_text_reader, test_text_reader_long = quick_and_long(check_text, TEXT_INPUT)

# ---------------------------------------------------------------- JSONL

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-10**6, 10**6)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                max_size=3),
    max_leaves=8)

_RECORD = st.fixed_dictionaries(
    {}, optional={"text": st.one_of(st.text(max_size=30), _JSON), "id": _JSON,
                  "year": _JSON, "party": st.text(max_size=6)})

_JSONL_LINE = st.one_of(
    _RECORD.map(lambda r: json.dumps(r).encode()),
    _RECORD.map(lambda r: json.dumps(r).encode()),
    _JSON.map(lambda v: json.dumps(v).encode()),
    st.integers(1, 3000).map(lambda n: b'{"text": "a", "m": ' + b"[" * n + b"]" * n + b"}"),
    st.binary(max_size=30),
    st.sampled_from([b"", b"   ", b"{", b'{"text": "x"', b'{"text": NaN}', b"[]"]))

JSONL_INPUT = st.tuples(st.lists(_JSONL_LINE, max_size=6), st.sampled_from(["strict", "skip"]),
                        st.one_of(st.none(), st.integers(0, 300)))


def check_jsonl(example) -> None:
    lines, errors, cut = example
    data = b"\n".join(lines)
    if cut is not None:
        data = data[:cut]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "docs.jsonl"
        path.write_bytes(data)
        try:
            docs = list(read_jsonl(str(path), errors, ReadStats()))
        except TopictkError:
            return
    if cut is None and errors == "strict" and not any(b"\n" in line for line in lines):
        # every line read is a JSON object with a string text field, taken as it was; a line
        # of white space only (as str.strip has it: \x1c too, which bytes.strip keeps) is
        # skipped
        records = [json.loads(line) for line in lines if line.decode("utf-8").strip()]
        assert [d.text for d in docs] == [r["text"] for r in records]
        assert [d.meta for d in docs] == [{k: v for k, v in r.items() if k != "text"}
                                          for r in records]


test_jsonl_reader, test_jsonl_reader_long = quick_and_long(check_jsonl, JSONL_INPUT)

# ---------------------------------------------------------------- UCI


@st.composite
def uci_input(draw):
    n_docs = draw(st.integers(0, 5))
    n_words = draw(st.integers(1, 6))
    pairs = draw(st.lists(st.tuples(st.integers(1, max(n_docs, 1)), st.integers(1, n_words)),
                          unique=True, max_size=12)) if n_docs else []
    counts = [draw(st.integers(1, 9)) for _ in pairs]
    body = "".join(f"{d} {w} {c}\n" for (d, w), c in zip(pairs, counts, strict=True))
    docword = f"{n_docs}\n{n_words}\n{len(pairs)}\n{body}".encode()
    vocab = "".join(f"w{i}\n" for i in range(n_words)).encode()
    target = draw(st.sampled_from(["none", "docword", "docword", "vocab"]))
    if target == "docword":
        docword = draw(damaged(docword))
    elif target == "vocab":
        vocab = draw(damaged(vocab))
    return n_docs, n_words, dict(zip(pairs, counts, strict=True)), docword, vocab, target


def check_uci(example) -> None:
    n_docs, n_words, entries, docword, vocab, target = example
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "docword.x.txt").write_bytes(docword)
        (Path(tmp) / "vocab.x.txt").write_bytes(vocab)
        try:
            bag = read_uci(str(Path(tmp) / "docword.x.txt"), None)
        except TopictkError:
            assert target != "none", "an intact file is read"
            return
    assert bag.indptr[0] == 0 and np.all(np.diff(bag.indptr) >= 0)
    assert bag.indices.size == bag.counts.size == bag.indptr[-1]
    assert np.all(bag.counts >= 1) and np.all((bag.indices >= 0) & (bag.indices < len(bag.vocab)))
    if target == "none":
        got = {(d + 1, int(w) + 1): int(c) for d in range(bag.indptr.size - 1)
               for w, c in zip(bag.indices[bag.indptr[d]:bag.indptr[d + 1]],
                               bag.counts[bag.indptr[d]:bag.indptr[d + 1]], strict=True)}
        assert got == entries and bag.indptr.size - 1 == n_docs
        assert bag.vocab == [f"w{i}" for i in range(n_words)]


test_uci_reader, test_uci_reader_long = quick_and_long(check_uci, uci_input())

# ---------------------------------------------------------------- prepare, end to end

_WORDS = st.lists(st.sampled_from(["apple", "banana", "cherry", "date", "elder", "fig", "the"]),
                  min_size=1, max_size=12).map(lambda words: " ".join(words).encode())

PREPARE_INPUT = st.tuples(st.lists(st.one_of(_WORDS, _WORDS, _LINE_BYTES), max_size=12),
                          st.sampled_from(["text", "jsonl"]),
                          st.sampled_from(["strict", "skip"]),
                          st.sampled_from([None, 0.3, 2.0]),          # test docs
                          st.sampled_from([1, 2, 0.5]))               # min df


PREPARED: list[int] = []       # stores written, so that a test can see some are


def check_prepare(example) -> None:
    lines, fmt, errors, test_docs, min_df = example
    with tempfile.TemporaryDirectory() as tmp:
        if fmt == "jsonl":
            data = b"\n".join(json.dumps({"text": line.decode("utf-8", "replace")}).encode()
                              if i % 3 else line for i, line in enumerate(lines))
            path = Path(tmp) / "docs.jsonl"
        else:
            data = b"\n".join(lines)
            path = Path(tmp) / "docs.txt"
        path.write_bytes(data)
        opts = PrepareOptions(format=fmt, encoding_errors=errors, test_docs=test_docs,
                              min_df=min_df, min_length=1)
        try:
            manifest = prepare([str(path)], str(Path(tmp) / "store"), opts)
        except TopictkError:
            return
        counts = manifest["counts"]
        assert counts["train_documents"] + counts["test_documents"] >= 1
        PREPARED.append(counts["train_documents"])


test_prepare, test_prepare_long = quick_and_long(check_prepare, PREPARE_INPUT, quick_examples=60)


def test_prepare_examples_write_stores():
    """The generated inputs are not all refused: the property above also sees stores."""
    PREPARED.clear()
    test_prepare()
    assert len(PREPARED) >= 5
