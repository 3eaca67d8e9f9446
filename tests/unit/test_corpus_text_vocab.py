"""Tokenisation and vocabulary selection (topictk/corpus/text.py, vocab.py, prepare.py)."""
from __future__ import annotations

import unicodedata

import numpy as np
import pytest

from topictk.corpus.prepare import PrepareOptions, prepare
from topictk.corpus.store import CorpusStore
from topictk.corpus.text import tokenize
from topictk.corpus.vocab import document_frequency, select_vocabulary, vocab_hash
from topictk.errors import UsageError


# ------------------------------------------------------------------------ tokenisation
def test_tokenize_keeps_lowercased_runs_of_unicode_letters():
    text = "Straße, ÉCOLE & naïve café—Δέλτα! Москва 東京タワー"
    assert tokenize(text, 1) == ["straße", "école", "naïve", "café", "δέλτα", "москва",
                                 "東京タワー"]


def test_tokenize_splits_on_digits_underscores_and_punctuation():
    assert tokenize("__init__ x2y abc123def it's e-mail foo_bar", 1) == [
        "init", "x", "y", "abc", "def", "it", "s", "e", "mail", "foo", "bar"]


def test_tokenize_min_length_counts_characters():
    assert tokenize("a an ant ants ÄÖÜ", 3) == ["ant", "ants", "äöü"]
    assert tokenize("a an ant", 1) == ["a", "an", "ant"]
    assert tokenize("a an ant", 4) == []
    assert tokenize("", 3) == []


def test_tokenize_one_word_whatever_the_normal_form():
    composed = "Naïve café résumé Zürich"
    decomposed = unicodedata.normalize("NFD", composed)
    assert decomposed != composed
    assert tokenize(decomposed) == tokenize(composed) == ["naïve", "café", "résumé", "zürich"]


def test_tokenize_keeps_combining_marks_inside_words():
    # vowel signs and viramas are marks (Mc, Mn), not letters: without them the words of
    # Indic and Thai scripts fall apart into single letters
    assert tokenize("हिन्दी भाषा का इतिहास") == ["हिन्दी", "भाषा", "इतिहास"]
    assert tokenize("ภาษาไทย สวัสดี", 1) == ["ภาษาไทย", "สวัสดี"]
    assert tokenize("𑀅𑀲𑁄𑀓 brahmi") == ["𑀅𑀲𑁄𑀓", "brahmi"]    # marks above U+FFFF
    # a mark with no letter before it starts no word
    assert tokenize("\u0301abc x\u0301yz", 1) == ["abc", "x\u0301yz"]


# --------------------------------------------------------------------------- vocabulary
NAMES = ["apple", "banana", "cherry", "date", "elder", "fig"]
DOCS = [np.array(d) for d in ([0, 0, 0, 1, 2], [0, 1, 3], [0, 1, 2, 4], [1, 5, 5, 5, 5])]
# document frequency:  apple 3, banana 4, cherry 2, date 1, elder 1, fig 1
# corpus frequency:    apple 5, banana 4, cherry 2, date 1, elder 1, fig 4


def _select(**kwargs):
    df, cf = document_frequency(DOCS, len(NAMES))
    keep = select_vocabulary(NAMES, df, cf, len(DOCS), **kwargs)
    return [NAMES[i] for i in keep]


def test_document_and_corpus_frequency():
    df, cf = document_frequency(DOCS, len(NAMES))
    np.testing.assert_array_equal(df, [3, 4, 2, 1, 1, 1])
    np.testing.assert_array_equal(cf, [5, 4, 2, 1, 1, 4])


def test_order_is_corpus_frequency_descending_then_alphabetical():
    # banana and fig tie at 4 (banana first), date/elder tie at 1 (alphabetical)
    assert _select() == ["apple", "banana", "fig", "cherry", "date", "elder"]


def test_min_df_as_count_and_as_share():
    assert _select(min_df=2) == ["apple", "banana", "cherry"]
    assert _select(min_df=3) == ["apple", "banana"]
    # a share of the 4 documents: 0.5 -> at least 2 documents, 0.8 -> at least 3.2
    assert _select(min_df=0.5) == ["apple", "banana", "cherry"]
    assert _select(min_df=0.8) == ["banana"]


def test_max_df_as_share_and_as_count():
    assert _select(max_df=1.0) == _select()                 # 1.0 = no limit
    assert _select(max_df=0.75) == ["apple", "fig", "cherry", "date", "elder"]
    assert _select(max_df=0.5) == ["fig", "cherry", "date", "elder"]
    assert _select(max_df=2) == ["fig", "cherry", "date", "elder"]       # a count above 1
    assert _select(max_df=3) == ["apple", "fig", "cherry", "date", "elder"]


def test_vocab_size_keeps_the_most_frequent_and_stopwords_are_removed():
    assert _select(vocab_size=3) == ["apple", "banana", "fig"]
    assert _select(stopwords=frozenset({"apple", "fig"})) == ["banana", "cherry", "date", "elder"]
    assert _select(stopwords=frozenset({"apple"}), vocab_size=2, min_df=2) == ["banana", "cherry"]


def test_vocab_hash_is_the_sha256_of_vocab_txt():
    import hashlib
    assert vocab_hash(["b", "a"]) == hashlib.sha256(b"b\na\n").hexdigest()


# ----------------------------------------------------------- vocabulary through prepare
def _prepare(tmp_path, lines, name="store", **options):
    src = tmp_path / f"{name}.txt"
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    opts = PrepareOptions(test_docs=0, **options)
    prepare([str(src)], tmp_path / name, opts)
    return CorpusStore.open(tmp_path / name)


def test_prepare_tokenises_filters_and_orders_the_vocabulary(tmp_path):
    store = _prepare(tmp_path, ["The Zebra and the zebra ate.", "An apple, and ZEBRA apples",
                                "Île île x yy"])
    # "the", "and", "an" are English stop words; "x", "yy" are shorter than 3 letters
    assert store.vocab == ["zebra", "île", "apple", "apples", "ate"]
    train = store.train()
    words = [store.vocab[w] for w in train.words]
    assert words == ["zebra", "zebra", "ate", "apple", "zebra", "apples", "île", "île"]
    assert store.manifest["counts"]["train_tokens"] == 8


def test_prepare_stopword_options(tmp_path):
    lines = ["the cat sat on the mat", "the dog"]
    assert "the" not in _prepare(tmp_path, lines, "english").vocab
    assert _prepare(tmp_path, lines, "none", stopwords="none").vocab[0] == "the"
    stop = tmp_path / "stop.txt"
    stop.write_text("CAT\nmat\n", encoding="utf-8")
    assert _prepare(tmp_path, lines, "file", stopwords=str(stop)).vocab == [
        "the", "dog", "sat"]


@pytest.mark.parametrize("field,value,message", [
    ("min_df", 1.5, "--min-df must be a share in \\(0, 1\\) or a whole count >= 1; got 1.5"),
    ("min_df", 0, "--min-df"),
    ("max_df", 0, "--max-df must be a share in \\(0, 1\\] or a count >= 1; got 0"),
    ("vocab_size", 0, "--vocab-size must be >= 1; got 0"),
    ("heldout_fraction", 1.0, "--heldout-fraction must be in \\(0, 1\\); got 1.0"),
    ("test_docs", 2.5, "--test-docs must be a share in \\[0, 1\\) or a whole count; got 2.5"),
    ("min_length", 0, "--min-length must be >= 1; got 0"),
])
def test_prepare_options_are_checked_before_reading(field, value, message):
    with pytest.raises(UsageError, match=message):
        PrepareOptions(**{field: value}).check()
