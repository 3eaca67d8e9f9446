"""prepare --meta: document metadata as DMR features (numeric standardised, categorical
one-hot, intercept last), the encoding applied unchanged to test documents, and the edge
cases (missing fields, unseen categories, NaN, non-numeric values, one category)."""
from __future__ import annotations

import json
import logging

import numpy as np
import pytest
from click.testing import CliRunner

from topictk.cli import cli
from topictk.corpus.store import CorpusStore

TEXT = "apple banana cherry durian elder fig grape"


def _prepare(tmp_path, records, *args):
    src = tmp_path / "docs.jsonl"
    src.write_text("".join(json.dumps(dict(r, text=TEXT)) + "\n" for r in records))
    out = tmp_path / "store"
    result = CliRunner().invoke(cli, ["prepare", str(src), "--split-field", "split",
                                      "--out", str(out), *args])
    return result, out


def test_encoding_fitted_on_training_documents_and_applied_to_test(tmp_path):
    records = [
        {"split": "train", "year": 2000, "party": "a"},
        {"split": "train", "year": 2002, "party": "b"},
        {"split": "train", "year": "2004", "party": "a"},
        {"split": "test", "year": 2006, "party": "b"},
        {"split": "test", "year": 2002, "party": "c"},      # unseen category
        {"split": "test", "party": "a"},                     # year missing
    ]
    result, out = _prepare(tmp_path, records, "--meta", "year,party")
    assert result.exit_code == 0, result.output
    store = CorpusStore.open(out)
    assert store.feature_names == ["year", "party=a", "party=b", "(intercept)"]
    mean, std = 2002.0, np.std([2000, 2002, 2004])
    np.testing.assert_allclose(store.features("train"), [
        [(2000 - mean) / std, 1, 0, 1], [0, 0, 1, 1], [(2004 - mean) / std, 1, 0, 1]])
    np.testing.assert_allclose(store.features("test"), [
        [(2006 - mean) / std, 0, 1, 1], [0, 0, 0, 1], [0, 1, 0, 1]])
    features = store.manifest["features"]
    assert features["test"] == {"missing_values": 1, "unseen_categories": 1}
    assert "unseen test categories 1" in result.output


def test_forced_types(tmp_path):
    records = [{"split": "train", "code": 1}, {"split": "train", "code": 2},
               {"split": "test", "code": 3}]
    result, out = _prepare(tmp_path, records, "--meta", "code:cat")
    assert result.exit_code == 0, result.output
    assert CorpusStore.open(out).feature_names == ["code=1", "code=2", "(intercept)"]


@pytest.mark.parametrize("value, message", [("abc", "is not a number"),
                                            ("nan", "is not a finite number"),
                                            ("inf", "is not a finite number")])
def test_bad_numeric_values_are_refused(tmp_path, value, message):
    records = [{"split": "train", "year": 2000, "id": "d0"},
               {"split": "train", "year": value, "id": "d1"},
               {"split": "test", "year": 2001, "id": "d2"}]
    result, out = _prepare(tmp_path, records, "--meta", "year:num")
    assert result.exit_code == 1
    assert "document d1" in result.output and message in result.output
    assert "Traceback" not in result.output and not out.exists()


def test_field_no_document_has(tmp_path):
    records = [{"split": "train", "year": 1}, {"split": "test", "year": 2}]
    result, out = _prepare(tmp_path, records, "--meta", "party")
    assert result.exit_code == 2
    assert "no training document has the field 'party'" in result.output
    assert "fields present:" in result.output and "year" in result.output


def test_single_category_is_dropped_with_a_warning(tmp_path, caplog):
    records = [{"split": "train", "lang": "en", "year": 1},
               {"split": "train", "lang": "en", "year": 2},
               {"split": "test", "lang": "en", "year": 3}]
    with caplog.at_level(logging.WARNING, logger="topictk"):
        result, out = _prepare(tmp_path, records, "--meta", "lang,year")
    assert result.exit_code == 0, result.output
    store = CorpusStore.open(out)
    assert store.feature_names == ["year", "(intercept)"]
    assert store.manifest["features"]["dropped"] == ["lang"]
    assert any("only one category" in r.message for r in caplog.records)


def test_meta_file_rows_must_match_documents(tmp_path):
    src = tmp_path / "docs.txt"
    src.write_text(f"{TEXT}\n{TEXT}\n{TEXT}\n")
    meta = tmp_path / "meta.tsv"
    meta.write_text("doc\tyear\n1\t2000\n2\t2001\n")
    result = CliRunner().invoke(cli, ["prepare", str(src), "--meta-file", str(meta), "--meta",
                                      "year", "--out", str(tmp_path / "s")])
    assert result.exit_code == 1
    assert "has 2 rows but the input has 3 documents" in result.output


def test_meta_file_with_uci_input(tmp_path):
    docword = tmp_path / "docword.x.txt"
    docword.write_text("4\n3\n6\n1 1 2\n1 2 1\n2 3 4\n3 1 1\n4 2 2\n4 3 1\n")
    (tmp_path / "vocab.x.txt").write_text("apple\nbanana\ncherry\n")
    meta = tmp_path / "meta.tsv"
    meta.write_text("doc\tgroup\n1\tx\n2\ty\n3\tx\n4\ty\n")
    out = tmp_path / "store"
    result = CliRunner().invoke(cli, ["prepare", str(docword), "--meta-file", str(meta),
                                      "--meta", "group", "--test-docs", "1", "--out", str(out)])
    assert result.exit_code == 0, result.output
    store = CorpusStore.open(out)
    X = np.vstack([store.features("train"), store.features("test")])
    assert X.shape == (4, 3)
    np.testing.assert_array_equal(np.sort(X[:, :2].sum(axis=1)), [1, 1, 1, 1])
    np.testing.assert_array_equal(X[:, 2], 1)
