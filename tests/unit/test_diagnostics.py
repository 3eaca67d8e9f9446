"""Per-topic diagnostics (topictk.evaluation.diagnostics) on tiny cases computed by hand or by
a plain NumPy twin, and the junk flags on a made-up junk topic."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

from topictk.evaluation import diagnostics as dg

VOCAB = ["apple", "banana", "cherry", "date"]
PHI = np.array([[0.4, 0.3, 0.2, 0.1],
                [0.7, 0.1, 0.1, 0.1],
                [0.25, 0.25, 0.25, 0.25]])
FREQ = np.array([10.0, 5.0, 5.0, 0.0])          # "date" never occurs in the training documents


def _table(counts: np.ndarray, phi=PHI, freq=FREQ, vocab=VOCAB, split: int = 5, **kw):
    # the counts given in two blocks, as document_topic_blocks gives them
    return dg.topic_diagnostics(phi, [counts[:split], counts[split:]], freq, vocab, **kw)


def test_tokens_and_document_entropy_by_hand():
    counts = np.zeros((7, 3))
    counts[:4, 0] = [2, 2, 0, 0]        # topic 1: two documents, equal: entropy ln 2
    counts[:, 1] = [1, 1, 1, 1, 4, 0, 0]  # topic 2: p = (1, 1, 1, 1, 4) / 8
    counts[6, 2] = 5                    # topic 3: one document: entropy 0
    table = _table(counts)
    assert [r["tokens"] for r in table] == [4.0, 8.0, 5.0]
    p = np.array([1, 1, 1, 1, 4]) / 8
    assert table[0]["doc_entropy"] == pytest.approx(math.log(2))
    assert table[1]["doc_entropy"] == pytest.approx(-(p * np.log(p)).sum())
    assert table[2]["doc_entropy"] == pytest.approx(0.0, abs=1e-12)
    assert [r["topic"] for r in table] == [1, 2, 3]          # numbered from 1


def test_effective_words_and_corpus_distance_by_hand():
    table = _table(np.ones((7, 3)))
    assert table[0]["eff_words"] == pytest.approx(1 / (0.16 + 0.09 + 0.04 + 0.01))
    assert table[2]["eff_words"] == pytest.approx(4.0)
    # KL over the words that occur (date left out, phi renormalised over the other three)
    p = np.array([0.5, 0.25, 0.25])
    for row, phi in zip(table, PHI):
        q = phi[:3] / phi[:3].sum()
        assert row["corpus_kl"] == pytest.approx(float((q * np.log(q / p)).sum()))
    # a topic that is the corpus's own distribution is at distance 0
    same = _table(np.ones((7, 1)), phi=np.array([[0.5, 0.25, 0.25, 0.0]]))
    assert same[0]["corpus_kl"] == pytest.approx(0.0, abs=1e-12)


def test_top_document_share_is_that_of_the_ten_largest_documents():
    rng = np.random.default_rng(3)
    counts = rng.integers(0, 9, size=(25, 3)).astype(float)
    counts[7, 1] = counts[8, 1] = counts[20, 1] = 30          # ties do not change the sum
    table = _table(counts, split=11)
    for k, row in enumerate(table):
        column = np.sort(counts[:, k])[::-1]
        assert row["top_doc_share"] == pytest.approx(column[:dg.TOP_DOCS].sum() / column.sum())


def test_word_length_and_nonwords_judge_the_top_ten_words():
    vocab = [f"w{i}" for i in range(12)]
    vocab[0], vocab[1], vocab[2] = "bhj", "giz", "encyclopaedia"
    phi = np.linspace(2.0, 1.0, 12)[None, :]
    phi /= phi.sum()
    freq = np.ones(12)
    row = dg.topic_diagnostics(phi, [np.ones((3, 1))], freq, vocab, shown=12)[0]
    top10 = vocab[:10]
    assert row["words"] == vocab                       # shown: 12 words
    assert row["word_length"] == pytest.approx(np.mean([len(w) for w in top10]))
    # bhj (no vowel) and w3..w9 (digits); the 11th and 12th words are not judged
    assert row["nonwords"] == 8


@pytest.mark.parametrize("word, junk", [("bhj", True), ("nrhj", True), ("g9v", True),
                                        ("a" * dg.LONG_WORD, True), ("max", False),
                                        ("rhythm", False), ("straße", False),
                                        ("nhl", True), ("шкл", False)])
def test_nonword_spellings(word, junk):
    assert dg.is_nonword(word) is junk


def _corpus_with_junk():
    """50 documents, 3 topics over 18 words: two ordinary topics spread over all documents and
    a third of vowel-less letter runs (as uuencoded lines give) in documents 0 and 1 only."""
    words = ["space", "orbit", "launch", "moon", "rocket", "nasa", "game", "team", "season",
             "player", "goal", "coach", "bhj", "qpz", "nrhj", "wwm", "bxn", "tct"]
    phi = np.full((3, 18), 1e-6)
    phi[0, :6] = 1.0
    phi[1, 6:12] = 1.0
    phi[2, 12:] = 1.0
    phi /= phi.sum(axis=1, keepdims=True)
    counts = np.zeros((50, 3))
    counts[:, 0] = 20
    counts[:, 1] = 15
    counts[:2, 2] = 400
    freq = counts.sum(axis=0) @ phi
    return phi, counts, freq, words


def test_a_junk_topic_is_flagged_by_both_rules_and_the_others_by_none():
    phi, counts, freq, words = _corpus_with_junk()
    table = dg.topic_diagnostics(phi, [counts], freq, words)
    assert table[2]["flags"] == [dg.FLAG_FEW_DOCUMENTS, dg.FLAG_NONWORDS]
    assert table[0]["flags"] == table[1]["flags"] == []


def test_few_documents_needs_both_a_high_top_share_and_a_low_entropy():
    phi, _, freq, words = _corpus_with_junk()
    counts = np.ones((200, 3))
    # a topic whose 5 largest documents hold 57 % of its tokens, the rest spread over 195
    # documents: e^H = 49.5 effective documents, more than FEW_DOCS_EFFECTIVE
    counts[:, 2] = 2
    counts[:5, 2] = 100
    table = dg.topic_diagnostics(phi, [counts], freq, words)
    assert table[2]["top_doc_share"] > dg.FEW_DOCS_SHARE
    assert math.exp(table[2]["doc_entropy"]) > dg.FEW_DOCS_EFFECTIVE
    assert dg.FLAG_FEW_DOCUMENTS not in table[2]["flags"]
    # a topic of 30 tokens in 30 documents: e^H = 30, but its top 10 hold a third
    counts[:, 1] = 0
    counts[:30, 1] = 1
    table = dg.topic_diagnostics(phi, [counts], freq, words)
    assert math.exp(table[1]["doc_entropy"]) < dg.FEW_DOCS_EFFECTIVE
    assert table[1]["flags"] == []


def test_formats_name_every_column_and_flag():
    phi, counts, freq, words = _corpus_with_junk()
    table = dg.topic_diagnostics(phi, [counts], freq, words)
    text = dg.format_diagnostics(table, "text").splitlines()
    assert text[0].startswith("# topic: topic number;")
    assert text[1].split() == ["topic", *dg.NUMBER_FORMATS, "flags", "words"]
    assert text[4].split()[0] == "3" and "few documents,non-words" in text[4]
    assert text[2].split()[8] == "-"                     # no flag: a dash in the flags column
    tsv = [line.split("\t") for line in dg.format_diagnostics(table, "tsv").splitlines()]
    assert tsv[0] == ["topic", *dg.NUMBER_FORMATS, "flags", "words"]
    assert tsv[3][0] == "3" and tsv[3][-2] == "few documents,non-words"
    assert tsv[3][-1] == " ".join(words[12:] + words[:4])   # ties by word id
    data = json.loads(dg.format_diagnostics(table, "json"))
    assert set(data["columns"]) == set(dg.COLUMNS) | {"words"}
    assert data["topics"][2]["flags"] == ["few documents", "non-words"]
