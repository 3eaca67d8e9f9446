"""prepare's preprocessing: --token-pattern, --case, --stopwords english+FILE,
--list-stopwords, --lemmatize, --phrases; recorded in the manifest and reapplied by infer."""
from __future__ import annotations

import json
import math
import sys

import numpy as np
import pytest

from tests.integration._cli import fails, ok, write_config
from topictk.corpus import phrases as phrase_rules
from topictk.corpus.prepare import PrepareOptions, prepare
from topictk.corpus.preprocess import Preprocessing
from topictk.corpus.stopwords import ENGLISH_STOPWORDS
from topictk.corpus.store import CorpusStore, verify_store
from topictk.errors import CorpusError, UsageError
from topictk.evaluation.infer import documents_from_texts, read_new_documents


def _lines(path, texts):
    path.write_text("".join(t + "\n" for t in texts), encoding="utf-8")
    return path


def _jsonl(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def _store(tmp_path, texts, name="store", **options):
    src = _lines(tmp_path / f"{name}.txt", texts)
    opts = PrepareOptions(test_docs=0, **options)
    prepare([str(src)], tmp_path / name, opts)
    return CorpusStore.open(tmp_path / name)


def _train_words(store):
    vocab = store.vocab
    train = store.train()
    return [[vocab[w] for w in train.words[train.doc_ptr[d]:train.doc_ptr[d + 1]]]
            for d in range(train.n_docs)]


# ------------------------------------------------------------------------ token pattern
def test_token_pattern_makes_the_tokens(tmp_path):
    texts = ["mp3 players and c++ code", "mp3 files for c++ compilers"]
    default = _store(tmp_path, texts, "default")
    assert "mp3" not in default.vocab and "c++" not in default.vocab
    store = _store(tmp_path, texts, "pattern", token_pattern=r"[a-z0-9+]+", min_length=2)
    assert {"mp3", "c++", "players", "compilers"} <= set(store.vocab)
    assert store.manifest["preprocessing"]["token_pattern"] == r"[a-z0-9+]+"
    # matched in the text as written, then folded: a pattern may look at case
    capitals = _store(tmp_path, ["Alpha beta Gamma delta"], "caps", token_pattern=r"[A-Z]\w+")
    assert sorted(capitals.vocab) == ["alpha", "gamma"]


@pytest.mark.parametrize("pattern, says", [("(a)b+", "has a capturing group"),
                                           ("a*", "matches the empty string"),
                                           (r"\b", "matches the empty string"),
                                           ("[a-", "not a regular expression")])
def test_bad_token_pattern_is_refused_in_one_line(tmp_path, pattern, says):
    src = _lines(tmp_path / "docs.txt", ["apple banana"])
    message = fails(2, "prepare", src, "--token-pattern", pattern, "--out", tmp_path / "s")
    assert message.startswith(f"--token-pattern {pattern!r}: {says}")
    assert "(?:" in message                 # the fix
    assert not (tmp_path / "s").exists()


def test_a_non_capturing_group_is_accepted():
    assert Preprocessing(token_pattern=r"(?:ab)+c").tokens("ababc abc xbc") == ["ababc", "abc"]


# --------------------------------------------------------------------------------- case
def test_case_keep_keeps_spellings_apart_and_stop_words_still_match(tmp_path):
    texts = ["Apple apple The the APPLE", "apple Apple The"]
    folded = _store(tmp_path, texts, "fold")
    assert folded.vocab == ["apple"]
    kept = _store(tmp_path, texts, "keep", case="keep")
    assert sorted(kept.vocab) == ["APPLE", "Apple", "apple"]    # The/the are stop words
    assert kept.manifest["preprocessing"]["case"] == "keep"


# --------------------------------------------------------------------------- stop words
def test_stopwords_file_replaces_and_english_plus_file_extends(tmp_path):
    words = _lines(tmp_path / "mine.txt", ["banana", "Cherry"])
    texts = ["the apple banana cherry", "apple banana cherry the"]
    replaced = _store(tmp_path, texts, "replace", stopwords=str(words))
    assert sorted(replaced.vocab) == ["apple", "the"]
    extended = _store(tmp_path, texts, "extend", stopwords=f"english+{words}")
    assert extended.vocab == ["apple"]
    record = extended.manifest["preprocessing"]["stopwords"]
    assert record["list"] == f"english+{words}"
    assert record["size"] == len(ENGLISH_STOPWORDS) + 2 and "words" not in record
    small = replaced.manifest["preprocessing"]["stopwords"]
    assert small["words"] == ["banana", "cherry"] and small["size"] == 2
    assert small["sha256"] != record["sha256"]


def test_english_plus_a_missing_file_is_refused(tmp_path):
    src = _lines(tmp_path / "docs.txt", ["apple banana"])
    message = fails(2, "prepare", src, "--stopwords", f"english+{tmp_path / 'nope.txt'}",
                    "--out", tmp_path / "s")
    assert message.startswith(f"{tmp_path / 'nope.txt'}: stop-word file not found")


def test_list_stopwords_prints_the_list(tmp_path):
    out = ok("prepare", "--list-stopwords").stdout
    assert out.splitlines() == sorted(ENGLISH_STOPWORDS)
    words = _lines(tmp_path / "mine.txt", ["zymurgy"])
    extended = ok("prepare", "--list-stopwords", "--stopwords", f"english+{words}").stdout
    assert extended.splitlines() == sorted(ENGLISH_STOPWORDS | {"zymurgy"})
    assert ok("prepare", "--list-stopwords", "--stopwords", str(words)).stdout == "zymurgy\n"
    message = fails(2, "prepare", "--list-stopwords", words, "--out", tmp_path / "s")
    assert message.startswith("--list-stopwords prints the stop-word list only")


# ---------------------------------------------------------------------------- lemmas
def test_lemmatize_replaces_words_by_their_lemmas(tmp_path):
    texts = ["houses mice running", "house mouse runs"]
    store = _store(tmp_path, texts, "lemma", lemmatize="en")
    assert sorted(store.vocab) == ["house", "mouse", "run"]
    record = store.manifest["preprocessing"]["lemmatize"]
    assert record["language"] == "en" and record["lemmatizer"] == "simplemma"
    from importlib.metadata import version
    assert record["version"] == version("simplemma")
    # German nouns come back capitalised; folding applies to the lemma too
    assert Preprocessing(lemmatize="de").tokens("Häuser häuser") == ["haus", "haus"]


def test_lemmatize_without_simplemma_says_how_to_install(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "simplemma", None)     # import simplemma fails
    src = _lines(tmp_path / "docs.txt", ["apple banana"])
    message = fails(2, "prepare", src, "--lemmatize", "en", "--out", tmp_path / "s")
    assert message == '--lemmatize needs the simplemma package: pip install "topictk[lemma]"'


def test_lemmatize_unknown_language_is_refused(tmp_path):
    src = _lines(tmp_path / "docs.txt", ["apple banana"])
    message = fails(2, "prepare", src, "--lemmatize", "klingon", "--out", tmp_path / "s")
    assert message.startswith("--lemmatize klingon: not a language simplemma knows")


# ---------------------------------------------------------------------------- phrases
def test_npmi_of_pairs_and_triples_by_hand():
    names = ["new", "york", "city", "the", "cat"]
    docs = [np.array(d, dtype=np.int32) for d in
            ([0, 1, 2, 3, 4], [0, 1, 2, 4, 3], [0, 1, 4, 3, 2], [3, 4, 0, 1, 4])]
    found = {tuple(names[w] for w in ids): (count, npmi)
             for ids, count, npmi in phrase_rules.learn(docs, names, frozenset({"the"}), 2, -1)}
    n = 20
    p = {"new": 4 / n, "york": 4 / n, "city": 3 / n, "cat": 5 / n}
    npmi2 = math.log((4 / n) / (p["new"] * p["york"])) / -math.log(4 / n)
    assert found[("new", "york")] == (4, pytest.approx(npmi2))
    npmi3 = math.log((2 / n) / (p["new"] * p["york"] * p["city"])) / (-2 * math.log(2 / n))
    assert found[("new", "york", "city")] == (2, pytest.approx(npmi3))
    # a pair with a stop word is never a phrase; its count alone would make it one
    assert not any("the" in (words[0], words[-1]) for words in found)
    # york city occurs twice, york cat twice (and below min count 3 neither would be)
    assert ("york", "city") in found
    strict = phrase_rules.learn(docs, names, frozenset({"the"}), 3, -1)
    assert [tuple(names[w] for w in ids) for ids, _, _ in strict] == [("new", "york")]


def test_join_reads_left_to_right_triples_first():
    triples = {("new", "york", "times"): "new_york_times"}
    pairs = {("new", "york"): "new_york", ("york", "times"): "york_times"}
    assert phrase_rules.join("new york times new york york times new".split(), triples,
                             pairs) == ["new_york_times", "new_york", "york_times", "new"]


FILLER = ("alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike "
          "november oscar papa quebec romeo sierra tango").split()


def _filler(i: int, n: int = 3) -> list[str]:
    """``n`` words for document ``i``, in an order that varies from document to document."""
    return [FILLER[(i * (7 + 2 * k) + 3 * k) % len(FILLER)] for k in range(n)]


def _phrase_corpus():
    """'new york' in many training documents; 'deep learning' in test documents only."""
    records = []
    for i in range(30):
        a, b, c = _filler(i)
        records.append({"id": f"tr{i}", "split": "train",
                        "text": f"trips to {a} new york {b} and deep {c}"})
    for i in range(12):
        a, b, c = _filler(i + 30)
        records.append({"id": f"te{i}", "split": "test",
                        "text": f"{a} deep learning in new york {b} deep learning {c}"})
    return records


def test_phrases_are_learned_on_the_training_documents_only(tmp_path):
    src = _jsonl(tmp_path / "docs.jsonl", _phrase_corpus())
    out = tmp_path / "store"
    prepare([str(src)], out, PrepareOptions(split_field="split", phrases=True,
                                            phrase_min_count=5, phrase_threshold=0.3))
    store = CorpusStore.open(out)
    record = store.manifest["preprocessing"]["phrases"]
    learned = [p["words"] for p in record["list"]]
    assert ["new", "york"] in learned
    # 12 test documents say 'deep learning' twice each: frequent, but in test documents only
    assert ["deep", "learning"] not in learned
    assert "deep_learning" not in store.vocab
    assert record["learned_on"] == "train" and record["min_count"] == 5
    vocab = store.vocab
    test_words = {vocab[w] for part in (store.test_observed(), store.test_heldout())
                  for w in part.indices}
    assert "new_york" in test_words and "new" not in test_words
    assert all("new_york" in doc for doc in _train_words(store))
    assert verify_store(out)["arrays"] == len(store.manifest["arrays"])


def test_phrases_may_hold_a_stop_word_inside_not_at_an_end(tmp_path):
    # "the navy spoke" is as frequent as "secretary the navy", but starts with a stop word
    texts = [" ".join([_filler(i)[0], "secretary the navy spoke", *_filler(i)[1:]])
             for i in range(10)]
    store = _store(tmp_path, texts, "navy", phrases=True, phrase_min_count=5,
                   phrase_threshold=0.3)
    learned = [tuple(p["words"]) for p in store.manifest["preprocessing"]["phrases"]["list"]]
    assert ("secretary", "the", "navy") in learned
    assert not [p for p in learned if p[0] in ENGLISH_STOPWORDS or p[-1] in ENGLISH_STOPWORDS]
    assert "secretary_the_navy" in store.vocab


def test_vocabulary_filters_apply_after_joining(tmp_path):
    texts = [f"{_filler(i)[0]} new york {_filler(i)[1]}" for i in range(10)] + [
        "new shoes", "old york"]
    store = _store(tmp_path, texts, "filters", phrases=True, phrase_min_count=5,
                   phrase_threshold=0.3, min_df=2)
    # 'new' and 'york' are left in one document each once joined: below --min-df 2
    assert "new_york" in store.vocab
    assert "new" not in store.vocab and "york" not in store.vocab


def test_phrases_are_the_same_on_every_run(tmp_path):
    src = _jsonl(tmp_path / "docs.jsonl", _phrase_corpus())
    opts = dict(split_field="split", phrases=True, phrase_min_count=3, phrase_threshold=0.0)
    a = prepare([str(src)], tmp_path / "a", PrepareOptions(**opts))
    b = prepare([str(src)], tmp_path / "b", PrepareOptions(**opts))
    assert a["preprocessing"] == b["preprocessing"] and a["corpus_id"] == b["corpus_id"]


@pytest.mark.parametrize("args, says", [
    (["--phrases", "--phrase-min-count", "0"], "--phrase-min-count must be >= 1"),
    (["--phrases", "--phrase-threshold", "1.5"], "--phrase-threshold must be a normalised"),
    (["--case", "keep", "--format", "uci"], "--case keep shape(s) the tokens of text")])
def test_bad_phrase_and_bag_options_are_refused(tmp_path, args, says):
    src = _lines(tmp_path / "docs.txt", ["apple banana"])
    assert fails(2, "prepare", src, *args, "--out", tmp_path / "s").startswith(says)


# --------------------------------------------------------------------- infer reapplies
def test_infer_reapplies_phrases_lemmas_and_pattern(tmp_path):
    records = _phrase_corpus()
    for record in records:
        record["text"] += " mp3"                # a token of the pattern, not of the default
    src = _jsonl(tmp_path / "docs.jsonl", records)
    out = tmp_path / "store"
    prepare([str(src)], out, PrepareOptions(split_field="split", phrases=True, lemmatize="en",
                                            phrase_min_count=5, phrase_threshold=0.3,
                                            token_pattern=r"[A-Za-z]+\d?", case="fold"))
    store = CorpusStore.open(out)
    index = {w: i for i, w in enumerate(store.vocab)}
    text = "Trips to New York and MP3 zebras"      # trips: lemma trip
    expected = [index[w] for w in ("trip", "new_york", "mp3")]
    by_api = documents_from_texts([text], store)
    assert by_api.words.tolist() == expected
    assert by_api.unknown.tolist() == [2]          # 'and' (a stop word), 'zebra' (unknown)
    doc = _lines(tmp_path / "new.txt", [text])
    by_file = read_new_documents([str(doc)], store)
    assert by_file.words.tolist() == expected


def test_a_store_without_the_section_tokenises_as_before():
    old = {"options": {"min_length": 4}}
    prep = Preprocessing.of_store(old, "old-store")
    assert prep.tokens("New York has cats and dogs") == ["york", "cats", "dogs"]


def test_a_lemmatised_store_without_simplemma_says_how_to_install(tmp_path, monkeypatch):
    store = _store(tmp_path, ["houses mice", "mice houses"], "lemma", lemmatize="en")
    monkeypatch.setitem(sys.modules, "simplemma", None)
    with pytest.raises(UsageError, match=r'lemma: was prepared with --lemmatize, which needs '
                                         r'the simplemma package: pip install "topictk\[lemma\]"'):
        documents_from_texts(["houses"], store)


def test_another_simplemma_version_is_warned_about(tmp_path, caplog):
    store = _store(tmp_path, ["houses mice", "mice houses"], "lemma", lemmatize="en")
    manifest = json.loads(json.dumps(store.manifest))
    manifest["preprocessing"]["lemmatize"]["version"] = "0.1"
    assert Preprocessing.of_store(manifest, "old").tokens("Houses") == ["house"]
    assert "old was lemmatised by simplemma 0.1" in caplog.text


@pytest.mark.parametrize("damage", [{"case": "upper"}, {"token_pattern": "(x)"},
                                    {"lemmatize": "en"}, {"phrases": {"list": [{}]}},
                                    {"min_length": "three"}])
def test_a_damaged_preprocessing_section_is_named(damage):
    manifest = {"preprocessing": {"token_pattern": None, "case": "fold", "min_length": 3,
                                  "lemmatize": None, "phrases": None, **damage}}
    with pytest.raises(CorpusError, match=r"^store: manifest.json's preprocessing section is "
                                          r"damaged \(.*\); prepare the corpus again"):
        Preprocessing.of_store(manifest, "store")


def test_the_infer_command_joins_phrases_in_new_text(tmp_path):
    src = _jsonl(tmp_path / "docs.jsonl", _phrase_corpus())
    store = tmp_path / "store"
    ok("prepare", src, "--split-field", "split", "--phrases", "--phrase-min-count", "5",
       "--phrase-threshold", "0.3", "--lemmatize", "en", "--out", store)
    vocab = CorpusStore.open(store).vocab
    assert "new_york" in vocab and "new" not in vocab and "york" not in vocab
    ok("train", "--config", write_config(tmp_path, store, inference={"iterations": 4,
                                                                     "burn_in": 2, "thin": 1},
                                         training={"checkpoint_every": 2}), "--quiet")
    new = _lines(tmp_path / "new.txt", ["Trips to New York", "new   york  NEW YORK houses"])
    out = ok("infer", tmp_path / "run", new, "--output-format", "tsv").stdout.splitlines()
    rows = [dict(zip(out[0].split("\t"), line.split("\t"))) for line in out[1:]]
    # joined: 'trip' (the lemma of trips) and 'new_york' known; without the phrases 'new'
    # and 'york' would be two unknown tokens each time
    assert [(r["tokens"], r["unknown"]) for r in rows] == [("2", "0"), ("2", "1")]
