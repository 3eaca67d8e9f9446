"""prepare --meta: document metadata as DMR features (numeric standardised, categorical
one-hot, intercept last), the encoding applied unchanged to test documents, and the edge
cases (missing fields, unseen categories, NaN, non-numeric values, one category)."""
from __future__ import annotations

import json
import logging
import shutil

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
    assert features["test"] == {"missing_values": 1, "unseen_categories": 1,
                                "missing_by_field": {"year": 1},
                                "unseen_by_field": {"party": 1},
                                "unseen_examples": {"party": ["c"]}}
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


def _prepare_text(tmp_path, meta_text: bytes | str, *args, n_docs=3):
    src = tmp_path / "docs.txt"
    src.write_text(f"{TEXT}\n" * n_docs)
    meta = tmp_path / "meta.tsv"
    if isinstance(meta_text, str):
        meta.write_text(meta_text)
    else:
        meta.write_bytes(meta_text)
    shutil.rmtree(tmp_path / "s", ignore_errors=True)    # each call prepares afresh
    return CliRunner().invoke(cli, ["prepare", str(src), "--meta-file", str(meta),
                                    "--test-docs", "0", "--out", str(tmp_path / "s"), *args])


def test_meta_file_rows_with_the_wrong_number_of_cells(tmp_path):
    result = _prepare_text(tmp_path, "doc\tyear\n1\t2000\n2\t2001\textra\n3\t2002\n", "--meta",
                           "year")
    assert result.exit_code == 1
    assert "line 3 has 3 tab-separated cells, the header has 2" in result.output
    assert "Traceback" not in result.output and not (tmp_path / "s").exists()
    result = _prepare_text(tmp_path, "doc\tyear\n1\t2000\n2\n3\t2002\n", "--meta", "year")
    assert result.exit_code == 1 and "line 3 has 1 tab-separated cells" in result.output


def test_meta_file_header_bom_duplicates_and_blank_lines(tmp_path):
    # a byte-order mark is not part of the first column's name; a blank line is no row
    result = _prepare_text(tmp_path, "\ufeffyear\tgroup\n2000\ta\n\n2001\tb\n2002\ta\n".encode(),
                           "--meta", "year,group")
    assert result.exit_code == 0, result.output
    X = CorpusStore.open(tmp_path / "s").features("train")
    np.testing.assert_allclose(X[:, 0] * np.std([2000, 2001, 2002]) + 2001, [2000, 2001, 2002])
    result = _prepare_text(tmp_path, "year\tyear\n1\t2\n1\t2\n1\t2\n", "--meta", "year")
    assert result.exit_code == 1 and "column 'year' appears twice" in result.output


def test_meta_options_that_cannot_be_meant(tmp_path):
    result = _prepare_text(tmp_path, "year\n1\n2\n3\n", "--meta", "year,year")
    assert result.exit_code == 2 and "field 'year' is named twice" in result.output
    result = _prepare_text(tmp_path, "year\n1\n2\n3\n")
    assert result.exit_code == 2 and "nothing uses it; add --meta" in result.output


def test_field_in_both_jsonl_and_meta_file_is_refused(tmp_path):
    src = tmp_path / "docs.jsonl"
    src.write_text("".join(json.dumps({"text": TEXT, "year": 2000 + d}) + "\n" for d in range(3)))
    meta = tmp_path / "meta.tsv"
    meta.write_text("year\tgroup\n1990\ta\n1991\tb\n1992\ta\n")
    runner = CliRunner()
    result = runner.invoke(cli, ["prepare", str(src), "--meta-file", str(meta), "--meta",
                                 "year,group", "--test-docs", "0", "--out", str(tmp_path / "s")])
    assert result.exit_code == 2
    assert "field 'year' is given both by this file and by the JSONL documents" in result.output
    # fields from both sources are fine when each comes from one of them
    result = runner.invoke(cli, ["prepare", str(src), "--meta-file", str(meta), "--meta",
                                 "group", "--test-docs", "0", "--out", str(tmp_path / "s")])
    assert result.exit_code == 0, result.output


def test_a_stray_text_value_makes_a_field_categorical_with_a_warning(tmp_path, caplog):
    records = [{"split": "train", "score": v} for v in (1, 2, "high", 3)]
    with caplog.at_level(logging.WARNING, logger="topictk"):
        result, out = _prepare(tmp_path, records, "--meta", "score")
    assert result.exit_code == 0, result.output
    assert CorpusStore.open(out).feature_names[:-1] == ["score=1", "score=2", "score=3",
                                                        "score=high"]
    messages = " ".join(r.message for r in caplog.records)
    assert "3 of 4 values are numbers but not all" in messages and "'high'" in messages
    assert "--meta score:num" in messages


def test_values_too_large_to_standardise(tmp_path):
    records = [{"split": "train", "id": f"d{i}", "size": v}
               for i, v in enumerate((1.7e308, 1.7e308, -1.7e308))]
    result, _ = _prepare(tmp_path, records, "--meta", "size")
    assert result.exit_code == 1
    assert "document d2: field 'size' = -1.7e+308 is too large" in result.output
    # large but representable values standardise without overflow
    records = [{"split": "train", "size": v} for v in (1e200, 2e200, 3e200)]
    result, out = _prepare(tmp_path, records, "--meta", "size")
    assert result.exit_code == 0, result.output
    np.testing.assert_allclose(CorpusStore.open(out).features("train")[:, 0],
                               np.array([-1, 0, 1]) / np.std([1, 2, 3]), rtol=1e-12)


def test_jsonl_on_standard_input(tmp_path):
    lines = "".join(json.dumps({"text": TEXT, "year": 2000 + d}) + "\n" for d in range(3))
    (tmp_path / "docs.jsonl").write_text(lines)
    runner = CliRunner()
    piped = runner.invoke(cli, ["prepare", "--format", "jsonl", "-", "--meta", "year",
                                "--test-docs", "0", "--out", str(tmp_path / "a")], input=lines)
    assert piped.exit_code == 0, piped.output
    named = runner.invoke(cli, ["prepare", str(tmp_path / "docs.jsonl"), "--meta", "year",
                                "--test-docs", "0", "--out", str(tmp_path / "b")])
    assert named.exit_code == 0, named.output
    np.testing.assert_array_equal(CorpusStore.open(tmp_path / "a").features("train"),
                                  CorpusStore.open(tmp_path / "b").features("train"))


def test_damaged_feature_array_is_refused(tmp_path):
    records = [{"split": "train", "year": y} for y in (1, 2, 3)]
    _, out = _prepare(tmp_path, records, "--meta", "year")
    from topictk.errors import CorpusError
    original = np.load(out / "train_features.npy")
    for value in (np.nan, 1e300):           # not finite, or finite but not what prepare wrote
        X = original.copy()
        X[0, 0] = value
        np.save(out / "train_features.npy", X)
        with pytest.raises(CorpusError, match="train_features.npy: content differs from "
                                              "manifest.json"):
            CorpusStore.open(out).features("train")
    np.save(out / "train_features.npy", original)
    np.testing.assert_array_equal(CorpusStore.open(out).features("train"), original)


def test_category_keys():
    from topictk.corpus.features import category_key
    assert [category_key(v) for v in (1, 1.0, "1.0", 2.5, True, "a")] == [
        "1", "1", "1.0", "2.5", "true", "a"]


def test_meta_file_rows_of_skipped_documents_are_dropped_with_them(tmp_path):
    """Row i of --meta-file describes input document i, undecodable ones included: skipping a
    document drops its row, so the other rows stay with their documents."""
    src = tmp_path / "docs.txt"
    lines = [f"{TEXT} one".encode(), b"\xff\xfe bad", f"{TEXT} two".encode(),
             f"{TEXT} three".encode()]
    src.write_bytes(b"\n".join(lines) + b"\n")
    meta = tmp_path / "meta.tsv"
    meta.write_text("year\n2001\n1999\n2002\n2003\n")
    runner = CliRunner()
    result = runner.invoke(cli, ["prepare", str(src), "--meta-file", str(meta), "--meta", "year",
                                 "--encoding-errors", "skip", "--test-docs", "0",
                                 "--out", str(tmp_path / "s")])
    assert result.exit_code == 0, result.output
    X = CorpusStore.open(tmp_path / "s").features("train")
    years = np.array([2001, 2002, 2003])
    np.testing.assert_allclose(X[:, 0], (years - years.mean()) / years.std())
    meta.write_text("year\n2001\n2002\n2003\n")           # one row per surviving document
    result = runner.invoke(cli, ["prepare", str(src), "--meta-file", str(meta), "--meta", "year",
                                 "--encoding-errors", "skip", "--test-docs", "0",
                                 "--out", str(tmp_path / "t")])
    assert result.exit_code == 1
    assert "has 3 rows but the input has 4 documents (1 of them skipped" in result.output


def test_repeated_meta_options(tmp_path):
    records = [{"split": "train", "a": v, "b": 10 - v} for v in (1, 2, 3)]
    result, out = _prepare(tmp_path, records, "--meta", "a", "--meta", "b")
    assert result.exit_code == 0, result.output
    assert CorpusStore.open(out).feature_names == ["a", "b", "(intercept)"]
    result = _prepare_text(tmp_path, "a\n1\n2\n3\n", "--meta", "a", "--meta-file",
                           str(tmp_path / "other.tsv"))
    assert result.exit_code == 2 and "--meta-file is given 2 times" in result.output


def test_boolean_categories_match_their_spellings(tmp_path):
    records = [{"split": "train", "flag": v} for v in (True, False, True)]
    result, out = _prepare(tmp_path, records, "--meta", "flag")
    assert result.exit_code == 0, result.output
    store = CorpusStore.open(out)
    assert store.feature_names == ["flag=false", "flag=true", "(intercept)"]
    from topictk.corpus.features import FeatureEncoding
    X, stats = FeatureEncoding.from_json(store.manifest["features"]).encode(
        [{"flag": True}, {"flag": "true"}, {"flag": "True"}, {"flag": "false"}, {"flag": "yes"}],
        list("abcde"), "m")
    np.testing.assert_array_equal(X[:, :2], [[0, 1], [0, 1], [0, 1], [1, 0], [0, 0]])
    assert stats["unseen_examples"] == {"flag": ["yes"]}
