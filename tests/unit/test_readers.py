"""The input readers on small files whose documents are known: line-per-document text, JSON
lines and UCI bag-of-words."""
from __future__ import annotations

import json

import numpy as np

from topictk.corpus.readers import ReadStats, read_jsonl, read_lines, read_uci


def test_lines_are_documents_named_by_their_line_number(tmp_path):
    source = tmp_path / "docs.txt"
    source.write_text("first document\nsecond one\n\nfourth\n")
    stats = ReadStats()
    docs = list(read_lines(str(source), "strict", stats))
    assert [d.id for d in docs] == [f"{source}:{n}" for n in (1, 2, 3, 4)]
    assert [d.text.strip() for d in docs] == ["first document", "second one", "", "fourth"]
    assert stats.documents == 4


def test_jsonl_skips_blank_lines_and_names_documents_by_line(tmp_path):
    source = tmp_path / "docs.jsonl"
    source.write_text(json.dumps({"text": "alpha beta", "year": 1999}) + "\n"
                      "\n"
                      "   \n"
                      + json.dumps({"text": "gamma", "id": "g"}) + "\n"
                      + json.dumps({"text": "delta"}) + "\n")
    stats = ReadStats()
    docs = list(read_jsonl(str(source), "strict", stats))
    assert [d.text for d in docs] == ["alpha beta", "gamma", "delta"]
    assert [d.id for d in docs] == ["docs.jsonl:1", "g", "docs.jsonl:5"]
    assert docs[0].meta == {"year": 1999}
    assert stats.documents == 3


def test_uci_docword_becomes_zero_based_csr(tmp_path):
    """UCI ids are 1-based and the triples may come in any order; the CSR rows are documents
    0..D-1 with ascending word ids, and a document without entries is an empty row."""
    (tmp_path / "vocab.toy.txt").write_text("apple\nbanana\ncherry\ndate\n")
    docword = tmp_path / "docword.toy.txt"
    # D = 3 (document 2 has no entry), W = 4, NNZ = 4
    docword.write_text("3\n4\n4\n3 2 5\n1 4 1\n1 1 2\n3 1 7\n")
    bag = read_uci(str(docword), str(tmp_path / "vocab.toy.txt"))
    np.testing.assert_array_equal(bag.indptr, [0, 2, 2, 4])
    np.testing.assert_array_equal(bag.indices, [0, 3, 0, 1])
    np.testing.assert_array_equal(bag.counts, [2, 1, 7, 5])
    assert bag.vocab == ["apple", "banana", "cherry", "date"]
