"""``topictk.prepare(texts=...)``: documents held in memory (strings, records, a data frame)
give the store a file of the same documents gives; only the manifest's ``source`` differs."""
from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import numpy as np
import pytest

import topictk
from tests.golden.cases import EXAMPLE
from topictk.errors import CorpusError, CorpusUsageError, UsageError

LINES = EXAMPLE.read_text(encoding="utf-8").splitlines()


def _records() -> list[dict]:
    """The example corpus as records with an id and two metadata fields."""
    return [{"text": line, "id": f"doc{i}", "group": "abc"[i % 3], "score": (i * 7 % 11) / 10}
            for i, line in enumerate(LINES)]


def _write_jsonl(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def _store_files(store: Path) -> dict[str, bytes]:
    """Every file of a store, the manifest without its ``source``."""
    files = {p.name: p.read_bytes() for p in sorted(store.iterdir()) if p.is_file()}
    manifest = json.loads(files.pop("manifest.json"))
    files["manifest.json"] = json.dumps({k: v for k, v in manifest.items() if k != "source"},
                                        sort_keys=True).encode()
    return files


def assert_same_store(a: Path, b: Path, *, ids: bool = True, meta: bool = True) -> None:
    fa, fb = _store_files(a), _store_files(b)
    left_out = ([] if ids else ["train_ids.txt", "test_ids.txt"]) + \
        ([] if meta else ["train_meta.jsonl", "test_meta.jsonl"])
    for files in (fa, fb):
        for name in left_out:
            files.pop(name, None)
    assert sorted(fa) == sorted(fb)
    assert any(name.endswith(".npy") for name in fa)
    for name in fa:
        assert fa[name] == fb[name], f"{name} differs"


class FrameLike:
    """The least a data frame must offer: ``columns`` and ``itertuples``."""

    def __init__(self, columns: dict[str, list]):
        self.columns = list(columns)
        self._values = list(columns.values())

    def itertuples(self, index: bool = True, name: str | None = "Pandas"):
        assert index is False and name is None
        return zip(*self._values)


def test_strings_give_the_store_of_a_text_file(tmp_path):
    from_file = topictk.prepare(EXAMPLE, tmp_path / "file")
    from_texts = topictk.prepare(texts=list(LINES), out=tmp_path / "texts")
    assert_same_store(tmp_path / "file", tmp_path / "texts", ids=False)
    assert from_texts["corpus_id"] == from_file["corpus_id"]
    assert from_texts["source"] == {"inputs": ["texts"], "format": "memory"}
    # ids: the position from 0, so texts[int(id)] is the document
    store = topictk.open_store(tmp_path / "texts")
    ids = store.document_ids("train") + store.document_ids("test")
    assert sorted(ids, key=int) == [str(i) for i in range(len(LINES))]


def test_a_generator_is_read_as_the_list(tmp_path):
    topictk.prepare(texts=list(LINES), out=tmp_path / "list")
    topictk.prepare(texts=(line for line in LINES), out=tmp_path / "gen")
    assert_same_store(tmp_path / "list", tmp_path / "gen")


def test_records_give_the_store_of_a_jsonl_file(tmp_path):
    records = _records()
    kept = json.loads(json.dumps(records))
    source = _write_jsonl(tmp_path / "docs.jsonl", records)
    topictk.prepare(source, tmp_path / "file", meta="group:cat,score")
    manifest = topictk.prepare(texts=records, out=tmp_path / "texts", meta="group:cat,score")
    assert_same_store(tmp_path / "file", tmp_path / "texts")
    assert "features" in manifest and (tmp_path / "texts" / "train_meta.jsonl").exists()
    assert records == kept          # the caller's records are not consumed


def test_a_pandas_data_frame_gives_the_store_of_its_jsonl_export(tmp_path):
    import pandas as pd
    records = _records()
    frame = pd.DataFrame(records)
    topictk.prepare(_write_jsonl(tmp_path / "docs.jsonl", records), tmp_path / "file",
                    meta="group:cat,score")
    topictk.prepare(texts=frame, out=tmp_path / "frame", meta="group:cat,score")
    assert_same_store(tmp_path / "file", tmp_path / "frame")
    # other column names, told by text_column and id_column: the same documents and ids
    renamed = frame.rename(columns={"text": "body", "id": "key"})
    topictk.prepare(texts=renamed, out=tmp_path / "renamed", text_column="body",
                    id_column="key", meta="group:cat,score")
    for name in ("train_indptr.npy", "train_indices.npy", "train_counts.npy",
                 "train_features.npy", "test_obs_words.npy", "train_ids.txt", "vocab.txt"):
        assert ((tmp_path / "renamed" / name).read_bytes()
                == (tmp_path / "frame" / name).read_bytes()), name


def test_any_object_with_columns_and_itertuples_is_a_data_frame(tmp_path):
    records = _records()
    columns = {key: [r[key] for r in records] for key in records[0]}
    topictk.prepare(texts=records, out=tmp_path / "records", meta="group:cat,score")
    topictk.prepare(texts=FrameLike(columns), out=tmp_path / "frame", meta="group:cat,score")
    assert_same_store(tmp_path / "records", tmp_path / "frame")


def test_numpy_values_and_missing_values_are_written_as_json(tmp_path):
    texts = [{"text": line, "n": np.int64(i), "x": np.float32(0.5) if i % 2 else math.nan}
             for i, line in enumerate(LINES[:40])]
    topictk.prepare(texts=texts, out=tmp_path / "s", test_docs=0)
    meta = topictk.open_store(tmp_path / "s").metadata("train")
    assert meta[0] == {"n": 0, "x": None} and meta[1] == {"n": 1, "x": 0.5}


def test_csv_columns_by_text_column_and_id_column(tmp_path):
    source = tmp_path / "docs.csv"
    with open(source, "w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["key", "body"])
        writer.writerows([f"k{i}", line] for i, line in enumerate(LINES[:60]))
    topictk.prepare(source, tmp_path / "csv", text_column="body", id_column="key")
    topictk.prepare(texts=[{"text": line, "id": f"k{i}"} for i, line in enumerate(LINES[:60])],
                    out=tmp_path / "texts")
    # a CSV row's id column is no metadata, a record's id field is (as in JSONL)
    assert_same_store(tmp_path / "csv", tmp_path / "texts", meta=False)


@pytest.mark.parametrize("texts", [["how do I sort a list of numbers " * 20], ["a text"]])
def test_texts_given_as_inputs_are_told_to_use_texts(tmp_path, texts):
    """A list of texts given as the first argument names no file: the message says so and
    names texts=, also for a text too long to be a file name (no OSError)."""
    with pytest.raises(CorpusUsageError) as caught:
        topictk.prepare(texts, tmp_path / "store")
    message = str(caught.value)
    assert "no such file or folder; prepare's first argument names input files: give " \
           "documents held in memory as texts=" in message
    assert len(message) < 200 and not (tmp_path / "store").exists()


@pytest.mark.parametrize("call, error, message", [
    (dict(), UsageError, "give input files (the first argument) or documents in memory "
                         "(texts=), not neither"),
    (dict(inputs=EXAMPLE, texts=["a text"]), UsageError, "not both"),
    (dict(texts="one text"), CorpusUsageError, "texts: got one string; give a list"),
    (dict(texts={"text": "a"}), CorpusUsageError, "texts: got one mapping"),
    (dict(texts=["a text", 3]), CorpusError, "texts[1]: is int, not a document"),
    (dict(texts=[{"body": "a text"}]), CorpusError,
     "texts[0]: missing or non-string 'text' field; every record needs"),
    (dict(texts=[{"text": "a text"}], id_column="key"), CorpusError,
     "texts[0]: no 'key' field, the id asked for"),
    (dict(texts=FrameLike({"body": ["a"]})), CorpusUsageError,
     "texts: the data frame has no column 'text' (its columns: 'body'); name the column "
     "with text_column="),
    (dict(texts=FrameLike({"text": ["a"], "x": [Path("p")]})), CorpusError,
     "texts[0]: field 'x' holds a PosixPath"),
    (dict(texts=["a text"], format="text"), UsageError, "format='text' says how to read"),
])
def test_one_line_errors(tmp_path, call, error, message):
    with pytest.raises(error) as caught:
        topictk.prepare(out=tmp_path / "store", **call)
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)
    assert not (tmp_path / "store").exists()
