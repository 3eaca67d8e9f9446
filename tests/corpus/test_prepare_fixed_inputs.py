"""prepare --split-field (a JSONL field fixes the test documents) and --vocab-list (a fixed
vocabulary given in advance)."""
from __future__ import annotations

import json

import numpy as np
from click.testing import CliRunner

from topictk.cli import cli
from topictk.corpus.store import CorpusStore


def _jsonl(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def test_split_field_fixes_test_documents(tmp_path):
    records = [{"text": f"apple banana cherry {'durian ' * (i % 3)}", "split": s, "id": str(i)}
               for i, s in enumerate(["train", "test", "train", "train", "test", "train"])]
    src = _jsonl(tmp_path / "docs.jsonl", records)
    out = tmp_path / "store"
    result = CliRunner().invoke(cli, ["prepare", str(src), "--split-field", "split",
                                      "--out", str(out)])
    assert result.exit_code == 0, result.output
    store = CorpusStore.open(out)
    assert (out / "test_ids.txt").read_text().split() == ["1", "4"]
    assert (out / "train_ids.txt").read_text().split() == ["0", "2", "3", "5"]
    assert store.manifest["split"]["split_field"] == "split"
    assert store.test_observed().n_docs == 2


def test_split_field_bad_value_is_refused(tmp_path):
    records = [{"text": "apple banana cherry", "split": "train"},
               {"text": "apple banana cherry", "split": "validation", "id": "doc-7"}]
    src = _jsonl(tmp_path / "docs.jsonl", records)
    out = tmp_path / "store"
    result = CliRunner().invoke(cli, ["prepare", str(src), "--split-field", "split",
                                      "--out", str(out)])
    assert result.exit_code == 1
    assert "doc-7" in result.output and "'validation'" in result.output
    assert "'train' or 'test'" in result.output
    assert not out.exists()


def test_split_field_needs_jsonl(tmp_path):
    src = tmp_path / "docs.txt"
    src.write_text("apple banana cherry\n")
    result = CliRunner().invoke(cli, ["prepare", str(src), "--split-field", "split",
                                      "--out", str(tmp_path / "s")])
    assert result.exit_code == 2
    assert "--split-field needs JSONL input" in result.output


def test_vocab_list_fixes_vocabulary_and_order(tmp_path):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("zebra\napple\nmango\nunused\n")
    src = tmp_path / "docs.txt"
    src.write_text("apple zebra kiwi apple\nmango kiwi zebra\nkiwi kiwi\napple mango\n")
    out = tmp_path / "store"
    result = CliRunner().invoke(cli, ["prepare", str(src), "--vocab-list", str(vocab),
                                      "--test-docs", "0", "--out", str(out)])
    assert result.exit_code == 0, result.output
    store = CorpusStore.open(out)
    assert store.vocab == ["zebra", "apple", "mango", "unused"]
    train = store.train()
    # "kiwi" is not in the list: dropped; the third document is then empty and dropped
    assert train.n_docs == 3
    np.testing.assert_array_equal(train.words, [1, 0, 1, 2, 0, 1, 2])
    assert store.manifest["counts"]["empty_documents_dropped"]["train"] == 1
    # listed words that no training document has are kept, and said so
    assert "1 of 4 words never occur in the training documents (unused)" in result.output


def test_vocab_list_with_duplicates_or_empty_lines_is_refused(tmp_path):
    src = tmp_path / "docs.txt"
    src.write_text("apple zebra\n")
    for content, message, where in (("apple\nzebra\napple\n", "repeats line 1", "vocab.txt:3"),
                                    ("apple\n\nzebra\n", "empty line", "vocab.txt:2")):
        vocab = tmp_path / "vocab.txt"
        vocab.write_text(content)
        result = CliRunner().invoke(cli, ["prepare", str(src), "--vocab-list", str(vocab),
                                          "--out", str(tmp_path / "store")])
        assert result.exit_code == 1
        assert message in result.output, result.output
        assert where in result.output, result.output
        assert not (tmp_path / "store").exists()


def test_vocab_list_cannot_be_combined_with_filters(tmp_path):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("apple\n")
    src = tmp_path / "docs.txt"
    src.write_text("apple\n")
    result = CliRunner().invoke(cli, ["prepare", str(src), "--vocab-list", str(vocab),
                                      "--vocab-size", "10", "--out", str(tmp_path / "s")])
    assert result.exit_code == 2
    assert "--vocab-list fixes the vocabulary" in result.output
