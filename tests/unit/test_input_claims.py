"""Inputs are checked for what they claim: a YAML key given twice, a bag-of-words header that
counts documents the data does not have, a document id given twice, a field that would shift
the columns of a TSV table, a manifest naming files outside its store, sweep values that are
one value, and the messages that name the cause (the sniffed delimiter, the --set option, a
folder given for a file)."""
from __future__ import annotations

import csv
import io
import json
import sys
from pathlib import Path

import pytest
import yaml

from topictk.config.loader import _Loader
from topictk.corpus import bags, readers, tables
from topictk.corpus.preprocess import stopword_words
from topictk.corpus.store import CorpusStore
from topictk.errors import ConfigError, CorpusError, CorpusUsageError, UsageError
from topictk.evaluation.tsv import tsv_rows
from topictk.inference.registry import load_config
from topictk.training.sweep import parse_sweep

CONFIG = """\
corpus: store
output: run
model:
  topics: 4
  alpha: 0.1
inference:
  algorithm: gibbs
  iterations: 20
training:
  seed: 1
"""


# ------------------------------------------------------------------ YAML keys given twice
@pytest.mark.parametrize("text, key, lines", [
    (CONFIG + "model:\n  topics: 9\n", "model", (3, 11)),
    (CONFIG.replace("  alpha: 0.1\n", "  alpha: 0.1\n  topics: 9\n"), "model.topics", (4, 6)),
    (CONFIG + "  seed: 2\n", "training.seed", (10, 11)),
    (CONFIG + "evaluation: {fold_in_sweeps: 10, fold_in_sweeps: 20}\n",
     "evaluation.fold_in_sweeps", (11, 11)),
    (CONFIG.replace("  topics: 4\n", "  topics: 4\n  05: a\n  5: b\n"), "model.5", (5, 6)),
])
def test_a_key_given_twice_is_refused_with_both_lines(tmp_path, text, key, lines):
    path = tmp_path / "exp.yaml"
    path.write_text(text, encoding="utf-8")
    where = f"lines {lines[0]} and {lines[1]}" if lines[0] != lines[1] else f"line {lines[0]}"
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert str(info.value) == f"{path}: key {key} appears twice ({where}); keep one"


def test_a_key_given_twice_in_a_list_item_is_refused():
    with pytest.raises(yaml.YAMLError, match=r"key a\[1\]\.x appears twice \(lines 3 and 4\)"):
        yaml.load("a:\n  - x: 1\n  - x: 2\n    x: 3\n", Loader=_Loader)


def test_a_merged_key_may_still_be_overridden():
    data = yaml.load("base: &b {x: 1, y: 2}\nc:\n  <<: *b\n  x: 3\n", Loader=_Loader)
    assert data["c"] == {"x": 3, "y": 2}


def test_a_key_given_twice_on_standard_input_is_refused(monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.StringIO(CONFIG + "model: {topics: 3}\n"))
    with pytest.raises(ConfigError, match=r"^<stdin>: key model appears twice \(lines 3 and "
                                          r"11\); keep one$"):
        load_config("-")


def test_a_key_given_twice_in_set_is_refused(tmp_path):
    path = tmp_path / "exp.yaml"
    path.write_text(CONFIG, encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_config(path, ["model={topics: 3, topics: 5}"])
    assert str(info.value) == "--set model={topics: 3, topics: 5}: key topics appears twice; " \
                              "keep one"


# ------------------------------------------------------------------ --set values
@pytest.mark.parametrize("override, expected", [
    ("model.topics=abc", "got 'abc' (--set model.topics=abc)"),
    ("model.topcs=3", "unknown key 'model.topcs' (--set model.topcs=3)"),
    ("model={topics: x}", "got 'x' (--set model={topics: x})"),
    ("inference.algorithm=gibs", "got 'gibs' (--set inference.algorithm=gibs)"),
])
def test_an_error_in_a_set_value_names_the_set_option(tmp_path, override, expected):
    path = tmp_path / "exp.yaml"
    path.write_text(CONFIG, encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_config(path, [override])
    assert expected in str(info.value)
    assert str(path) not in str(info.value)


def test_a_check_of_two_keys_names_the_file_and_the_set_option(tmp_path):
    path = tmp_path / "exp.yaml"
    path.write_text(CONFIG, encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_config(path, ["inference.burn_in=30"])
    assert str(info.value).endswith(f"({path} with --set inference.burn_in=30)")


# ------------------------------------------------------------------ sweep values
@pytest.mark.parametrize("spec, first, second", [
    ("model.topics=5,05", "5", "05"), ("model.topics=1e1,10", "1e1", "10"),
    ("model.alpha=0.10,0.1", "0.10", "0.1"), ("model.topics=4,5.0,5", "5.0", "5"),
    ("inference.sparse=true,True", "true", "True"),
])
def test_sweep_values_equal_once_parsed_are_refused(spec, first, second):
    with pytest.raises(UsageError) as info:
        parse_sweep([spec])
    assert str(info.value) == (f"--sweep {spec}: {first} and {second} are the same value; "
                               f"give each value once")


def test_sweep_values_that_differ_are_kept():
    assert parse_sweep(["model.topics=5,50", "inference.sparse=true,1"]) == [
        ("model.topics", ["5", "50"]), ("inference.sparse", ["true", "1"])]


# ------------------------------------------------------------------ bag-of-words headers
def _bag(tmp_path: Path, n_docs_header: int, last_doc: int = 6) -> tuple[Path, Path]:
    entries = [(d, w, 1) for d in range(1, last_doc + 1) for w in (1, 2)]
    mm = tmp_path / "c.mm"
    mm.write_text("%%MatrixMarket matrix coordinate real general\n% a comment\n"
                  f"{n_docs_header} 3 {len(entries)}\n"
                  + "".join(f"{d} {w} {c}\n" for d, w, c in entries))
    uci = tmp_path / "docword.c.txt"
    uci.write_text(f"{n_docs_header}\n3\n{len(entries)}\n"
                   + "".join(f"{d} {w} {c}\n" for d, w, c in entries))
    vocab = tmp_path / "c.vocab"
    vocab.write_text("alpha\nbeta\ngamma\n")
    return mm, uci


def test_a_header_counting_phantom_documents_is_refused(tmp_path):
    mm, uci = _bag(tmp_path, 1_000_000)
    vocab = str(tmp_path / "c.vocab")
    with pytest.raises(CorpusError) as info:
        bags.read_mm(str(mm), vocab)
    assert str(info.value) == (f"{mm}:3: the size line says D = 1,000,000 documents but the "
                               f"entries name documents 1..6 only, so 999,994 would be empty; "
                               f"write the real document count, 6, on line 3")
    with pytest.raises(CorpusError, match=r":1: the header says D = 1,000,000 documents"):
        readers.read_uci(str(uci), vocab)


def test_a_header_may_count_a_few_empty_documents_at_the_end(tmp_path):
    mm, uci = _bag(tmp_path, 6 + readers.EMPTY_TAIL_MIN)
    vocab = str(tmp_path / "c.vocab")
    assert bags.read_mm(str(mm), vocab).indptr.size == 6 + readers.EMPTY_TAIL_MIN + 1
    assert readers.read_uci(str(uci), vocab).indptr.size == 6 + readers.EMPTY_TAIL_MIN + 1
    mm, uci = _bag(tmp_path, 7 + readers.EMPTY_TAIL_MIN)
    with pytest.raises(CorpusError, match="documents but the entries name documents 1..6"):
        bags.read_mm(str(mm), vocab)


def test_a_size_line_must_count_the_entries(tmp_path):
    mm, _ = _bag(tmp_path, 6)
    mm.write_text(mm.read_text().replace("6 3 12", "6 3 13"))
    with pytest.raises(CorpusError, match=r"c\.mm:3: the size line says 13 entries but the "
                                          r"file has 12"):
        bags.read_mm(str(mm), str(tmp_path / "c.vocab"))


# ------------------------------------------------------------------ document ids
def test_an_id_given_twice_is_refused_with_file_and_both_lines():
    with pytest.raises(CorpusError) as info:
        readers.distinct_ids(["a", "b", "a"], ["d.csv:2", "d.csv:3", "d.csv:4"])
    assert str(info.value) == ("d.csv: document id 'a' appears twice (lines 2 and 4); give "
                               "each document its own id, or --duplicate-ids rename to number "
                               "the repeats (a~2, ...)")
    with pytest.raises(CorpusError, match=r"appears twice \(x/1\.txt and y/1\.txt\)"):
        readers.distinct_ids(["1.txt", "1.txt"], ["x/1.txt", "y/1.txt"])


def test_repeated_ids_are_renamed_in_input_order_on_request():
    ids = ["a", "b", "a", "a~2", "a", "b"]
    renamed = readers.distinct_ids(ids, [f"f:{i}" for i in range(6)], "rename")
    assert renamed == ["a", "b", "a~3", "a~2", "a~4", "b~2"]
    assert len(set(renamed)) == len(renamed)


def test_an_id_with_a_line_break_is_refused():
    with pytest.raises(CorpusError, match=r"^f\.jsonl:2: document id 'a\\nb' holds a line "
                                          r"break"):
        readers.distinct_ids(["x", "a\nb"], ["f.jsonl:1", "f.jsonl:2"], "rename")


# ------------------------------------------------------------------ TSV output
def test_tsv_fields_with_tabs_line_breaks_and_quotes_are_quoted():
    rows = [["word", "p"], ["tab\there", 1], ["line\nbreak", 2], ["car\rriage", 3],
            ['say "hi"', 4], ["plain", 0.5]]
    text = tsv_rows(rows)
    assert text.startswith("word\tp\n\"tab\there\"\t1\n")
    assert list(csv.reader(io.StringIO(text, newline=""), delimiter="\t")) == [
        [str(v) for v in row] for row in rows]


# ------------------------------------------------------------------ manifest array names
@pytest.mark.parametrize("name", ["../../etc/x", "/etc/x", "sub/x", ".hidden", "a..b", "",
                                  "..", "x\\y"])
def test_a_manifest_array_name_outside_the_store_is_refused(tmp_path, name):
    store = tmp_path / "store"
    store.mkdir()
    (store / "outside.npy").write_bytes(b"")
    manifest = {"format": "topictk-corpus", "format_version": 1, "counts": {},
                "arrays": {name: {"shape": [0], "dtype": "int32", "sha256": "0"}}}
    (store / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(CorpusError) as info:
        CorpusStore.open(store)
    assert str(info.value).startswith(f"{store / 'manifest.json'}: array name ")
    assert "is not a plain file name inside the store" in str(info.value)


# ------------------------------------------------------------------ CSV delimiter
def test_a_wrongly_sniffed_delimiter_is_named_with_the_option(tmp_path):
    path = tmp_path / "docs.csv"
    path.write_text("id,text\n1,the words; 'alpha'; and beta\n2,gamma delta\n")
    stats = readers.ReadStats()
    with pytest.raises(CorpusUsageError) as info:
        list(tables.read_table(str(path), "csv", "strict", stats, tables.TableOptions()))
    assert str(info.value) == (f"{path}:1: no column 'text' when the rows are split on ';', the "
                               f"delimiter guessed from the start of the file; the header "
                               f"splits into its columns on ',': give --delimiter ','")
    docs = list(tables.read_table(str(path), "csv", "strict", stats,
                                  tables.TableOptions(delimiter=",")))
    assert [d.text for d in docs] == ["the words; 'alpha'; and beta", "gamma delta"]


# ------------------------------------------------------------------ a folder for a file
def test_a_folder_given_as_stop_words_is_called_a_folder(tmp_path):
    with pytest.raises(CorpusUsageError) as info:
        stopword_words(str(tmp_path), default_on=True)
    assert str(info.value) == (f"--stopwords {tmp_path}: is a folder; give 'english', 'none' "
                               f"or a file with one word per line")
