"""CSV/TSV, LDA-C and Matrix Market input to ``prepare`` and ``infer``, and their errors."""
from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from tests.integration._cli import fails, ok, write_config
from topictk.cli import cli
from topictk.corpus import tables
from topictk.corpus.store import CorpusStore

CSV = ('\ufeffid,title,body,year,party\n'
       'a1,Python lists,"lists, tuples and dictionaries\nsets and lists",2001,x\n'
       'a2,Gardening,"roses, tomatoes; garden soil",2002,y\n'
       'a3,More python,"python lists ""dictionaries"" functions",2003,x\n'
       'a4,Soil,"garden soil, compost and roses",2004,y\n')
VOCAB = "lists\ntuples\ngarden\nsoil\nroses\npython\n"
# the same four documents as LDA-C (0-based ids) and as a Matrix Market file (1-based)
LDAC = "2 0:3 1:1\n3 2:1 3:2 4:1\n2 0:1 5:2\n3 2:1 3:1 4:2\n"
MM = ("%%MatrixMarket matrix coordinate real general\n% documents x words\n4 6 10\n"
      "1 1 3\n1 2 1\n2 3 1\n2 4 2\n2 5 1\n3 1 1\n3 6 2\n4 3 1\n4 4 1\n4 5 2\n")


@pytest.fixture
def files(tmp_path):
    (tmp_path / "docs.csv").write_text(CSV, encoding="utf-8")
    (tmp_path / "c.lda-c").write_text(LDAC)
    (tmp_path / "c.lda-c.vocab").write_text(VOCAB)
    (tmp_path / "c.mm").write_text(MM)
    (tmp_path / "vocab.txt").write_text(VOCAB)
    return tmp_path


def _prepare(*args) -> CorpusStore:
    out = args[args.index("--out") + 1]
    ok("prepare", *args, "--test-docs", "0", "--min-length", "2")
    return CorpusStore.open(out)


def _documents(store: CorpusStore) -> list[list[str]]:
    train = store.train()
    return [sorted(store.vocab[w] for w in train.words[train.doc_ptr[d]:train.doc_ptr[d + 1]])
            for d in range(train.n_docs)]


def test_csv_joins_text_columns_and_keeps_metadata(files):
    store = _prepare(files / "docs.csv", "--text-column", "title", "--text-column", "body",
                     "--id-column", "id", "--meta", "year,party:cat", "--out", files / "s")
    docs = _documents(store)
    assert docs[0] == sorted(["python", "lists", "lists", "tuples", "dictionaries", "sets",
                              "lists"])
    assert "dictionaries" in docs[2]            # a doubled quote inside a quoted field
    names = json.loads((files / "s" / "manifest.json").read_text())["features"]["names"]
    assert "year" in names and any(n.startswith("party") for n in names)


def test_tsv_by_suffix_and_sniffed_semicolons(files):
    (files / "docs.tsv").write_text("text\tyear\nroses garden\t1\nsoil garden\t2\n")
    assert _documents(_prepare(files / "docs.tsv", "--out", files / "t"))[0] == [
        "garden", "roses"]
    (files / "semi.csv").write_text('text;year\n"roses, garden";1\nsoil garden;2\n')
    assert _documents(_prepare(files / "semi.csv", "--out", files / "u"))[0] == [
        "garden", "roses"]


def test_csv_from_standard_input(files):
    result = CliRunner().invoke(cli, ["prepare", "-", "--format", "csv", "--text-column", "body",
                                      "--out", str(files / "v"), "--test-docs", "0"], input=CSV)
    assert result.exit_code == 0, result.stderr
    assert "4 train" in result.stdout


def test_missing_text_column_names_the_columns(files):
    message = fails(2, "prepare", files / "docs.csv", "--out", files / "s")
    assert message == (f"{files / 'docs.csv'}:1: no column 'text'; the header (the first row) "
                       f"has 'id', 'title', 'body', 'year', 'party'; name the column with "
                       f"--text-column")
    assert "--id-column" in fails(2, "prepare", files / "docs.csv", "--text-column", "body",
                                  "--id-column", "key", "--out", files / "s")


def test_ragged_row_names_its_line(files):
    # the row after a quoted field over two lines starts on line 4
    (files / "bad.csv").write_text('text,year\n"two\nlines",1\nthree,fields,here\n')
    message = fails(1, "prepare", files / "bad.csv", "--delimiter", ",", "--out", files / "s")
    assert message.startswith(f"{files / 'bad.csv'}:4: the row has 3 fields, the header 2")


def test_cell_over_the_field_limit_is_one_line(files, monkeypatch):
    monkeypatch.setattr(tables, "FIELD_LIMIT", 1000)
    (files / "big.csv").write_text('text,year\nshort,1\n"' + "word " * 400 + '",2\n')
    message = fails(1, "prepare", files / "big.csv", "--out", files / "s")
    assert message.startswith(f"{files / 'big.csv'}:3: a field is longer than 1,000 characters")
    assert "check the quotes" in message


def test_unclosed_quote_names_the_row(files):
    (files / "open.csv").write_text('text,year\nfine,1\n"never closed,2\nmore,3\n')
    message = fails(1, "prepare", files / "open.csv", "--delimiter", ",", "--out", files / "s")
    assert message.startswith(f"{files / 'open.csv'}:3: not valid CSV")


def test_table_options_need_table_input(files):
    (files / "plain.txt").write_text("roses garden\n")
    assert "describe CSV/TSV input" in fails(2, "prepare", files / "plain.txt", "--text-column",
                                             "body", "--out", files / "s")
    assert "one character" in fails(2, "prepare", files / "docs.csv", "--delimiter", ";;",
                                    "--out", files / "s")


def test_ldac_and_matrix_market_read_the_same_documents(files):
    ldac = _documents(_prepare(files / "c.lda-c", "--out", files / "l"))
    mm = _documents(_prepare(files / "c.mm", "--out", files / "m"))
    assert ldac == mm
    assert ldac[0] == ["lists", "lists", "lists", "tuples"]


def test_ldac_pair_count_that_disagrees(files):
    (files / "bad.lda-c").write_text("2 0:1 1:1\n3 0:1 2:1\n")
    message = fails(1, "prepare", files / "bad.lda-c", "--vocab", files / "vocab.txt",
                    "--out", files / "s")
    assert message.startswith(f"{files / 'bad.lda-c'}:2: the line says 3 id:count pairs but "
                              f"has 2")


def test_ldac_id_out_of_range(files):
    (files / "bad.lda-c").write_text("1 0:1\n1 6:1\n")
    message = fails(1, "prepare", files / "bad.lda-c", "--vocab", files / "vocab.txt",
                    "--out", files / "s")
    assert message.startswith(f"{files / 'bad.lda-c'}:2: word id 6 outside 0..5")


def test_ldac_needs_a_vocabulary(files):
    (files / "alone").mkdir()
    (files / "alone" / "x.ldac").write_text(LDAC)
    assert "add --vocab FILE" in fails(2, "prepare", files / "alone" / "x.ldac",
                                       "--out", files / "s")


@pytest.mark.parametrize("size, line, expected", [
    ("4 6 11", 3, "the size line says 11 entries but the file has 10"),
    ("3 6 10", 11, "document id outside 1..3 (size line D)"),
    ("4 5 10", 10, "word id outside 1..5 (size line W)"),
])
def test_matrix_market_header_that_lies(files, size, line, expected):
    (files / "bad.mm").write_text(MM.replace("4 6 10", size))
    message = fails(1, "prepare", files / "bad.mm", "--out", files / "s")
    assert message.startswith(f"{files / 'bad.mm'}:{line}: {expected}")


def test_matrix_market_other_kinds_are_refused(files):
    (files / "sym.mm").write_text(MM.replace("real general", "real symmetric"))
    assert "is not a bag of words" in fails(1, "prepare", files / "sym.mm", "--out", files / "s")


def test_infer_reads_every_format_alike(files):
    _prepare(files / "c.lda-c", "--out", files / "store")
    config = write_config(files, files / "store", inference={"iterations": 4, "burn_in": 2})
    ok("train", "--config", config, "--quiet")
    run = files / "run"
    ldac = ok("infer", run, files / "c.lda-c").stdout.splitlines()
    mm = ok("infer", run, files / "c.mm").stdout.splitlines()
    assert [json.loads(x)["theta"] for x in ldac] == [json.loads(x)["theta"] for x in mm]
    table = ok("infer", run, files / "docs.csv", "--text-column", "body", "--id-column", "id",
               "--output-format", "tsv").stdout.splitlines()
    assert [row.split("\t")[0] for row in table[1:]] == ["a1", "a2", "a3", "a4"]
    theta = np.array([[float(x) for x in row.split("\t")[3:]] for row in table[1:]])
    assert np.allclose(theta.sum(axis=1), 1)
    message = fails(2, "infer", run, files / "docs.csv", "--out", files / "o.jsonl")
    assert "no column 'text'" in message and not (files / "o.jsonl").exists()
