"""Topic labels: the labels file (parse errors name file:line), precedence (file > seed
label > suggestion), atomic writes that never replace a user's file, suggested labels from
adjacent pairs, representative documents, and the store's snippets."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from topictk.corpus.prepare import PrepareOptions, prepare, snippet_of
from topictk.corpus.store import CorpusStore
from topictk.errors import ConfigError, UsageError
from topictk.evaluation import topic_docs
from topictk.evaluation.labels import (WRITTEN_BY, default_labels, labels_for_runs,
                                       read_labels, run_labels, write_labels)


def _file(tmp_path: Path, text: str, name: str = "labels.tsv") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


# ----------------------------------------------------------------------------- the file
def test_labels_file_is_read_by_topic_number_from_one(tmp_path):
    path = _file(tmp_path, "# mine\ntopic\tlabel\n\n3\tspace  flight\n1\tcars\n")
    assert read_labels(path, 4) == {2: "space flight", 0: "cars"}


@pytest.mark.parametrize("text, line, words", [
    ("1\tcars\n5\tboats\n", 2, "topic 5 does not exist"),
    ("1\tcars\n# c\n1\tvans\n", 3, "labelled again (first on line 1)"),
    ("0\tnone\n", 1, "topic 0 does not exist"),
    ("x\tcars\n", 1, "'x' is not a whole number"),
    ("1 cars\n", 1, "no tab between topic and label"),
    ("2\t  \n", 1, "empty label"),
])
def test_a_bad_line_is_one_error_naming_file_and_line(tmp_path, text, line, words):
    path = _file(tmp_path, text)
    with pytest.raises(ConfigError) as err:
        read_labels(path, 4)
    message = str(err.value)
    assert message.startswith(f"{path}:{line}: ") and words in message
    assert "\n" not in message


def test_a_file_not_utf8_names_the_line(tmp_path):
    path = tmp_path / "labels.tsv"
    path.write_bytes(b"1\tcars\n2\tb\xe9teaux\n")
    with pytest.raises(ConfigError, match=r"labels.tsv:2: not UTF-8"):
        read_labels(path, 4)


# ----------------------------------------------------------------------------- precedence
def test_file_overrides_seed_label_which_overrides_suggestion(tmp_path):
    config = {"model": {"topics": 4, "seed_words": {"space": ["nasa", "orbit"],
                                                    "hockey": ["puck", "goal"]}}}
    assert default_labels(config, 4) == {0: "space", 1: "hockey"}
    suggested = {k: f"suggested {k}" for k in range(4)}
    labels = run_labels(tmp_path, config, 4, suggested=suggested)    # no labels.tsv yet
    assert [(l.text, l.source) for l in labels] == [
        ("space", "seed"), ("hockey", "seed"), ("suggested 2", "suggested"),
        ("suggested 3", "suggested")]
    _file(tmp_path, "2\tice hockey\n4\tcars\n")
    labels = run_labels(tmp_path, config, 4, suggested=suggested)
    assert [(l.text, l.source) for l in labels] == [
        ("space", "seed"), ("ice hockey", "file"), ("suggested 2", "suggested"),
        ("cars", "file")]
    other = _file(tmp_path, "1\tastronomy\n", "other.tsv")       # --labels FILE
    labels = run_labels(tmp_path, config, 4, other)
    assert [l and (l.text, l.source) for l in labels] == [
        ("astronomy", "file"), ("hockey", "seed"), None, None]
    assert default_labels({"model": {"topics": 4}}, 4) == {}


def test_labels_of_several_runs_are_given_run_by_run(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    assert labels_for_runs([f"{b}=b.tsv"], [a, b]) == {b: Path("b.tsv")}
    assert labels_for_runs(["x.tsv"], [a]) == {a: Path("x.tsv")}
    with pytest.raises(UsageError, match="say whose labels"):
        labels_for_runs(["x.tsv"], [a, b])
    with pytest.raises(UsageError, match="is not one of the runs"):
        labels_for_runs([f"{tmp_path / 'c'}=x.tsv"], [a, b])


# ----------------------------------------------------------------------------- writing
def test_written_atomically_with_the_first_line_and_rewritten_freely(tmp_path):
    path = tmp_path / "labels.tsv"
    write_labels(path, {2: "space\tflight", 0: "cars"})
    text = path.read_text(encoding="utf-8")
    assert text == f"{WRITTEN_BY}\n1\tcars\n3\tspace flight\n"
    assert read_labels(path, 3) == {0: "cars", 2: "space flight"}
    write_labels(path, {0: "trucks"})           # topictk's own file: no --force needed
    assert read_labels(path, 3) == {0: "trucks"}
    assert [p.name for p in tmp_path.iterdir()] == ["labels.tsv"]    # no temporary left


def test_a_users_file_is_replaced_only_with_force(tmp_path):
    path = _file(tmp_path, "# my own labels\n1\tcars\n")
    before = path.read_bytes()
    with pytest.raises(UsageError, match="topictk did not write.*--force"):
        write_labels(path, {0: "trucks"})
    assert path.read_bytes() == before
    write_labels(path, {0: "trucks"}, force=True)
    assert read_labels(path, 2) == {0: "trucks"}
    folder = tmp_path / "dir.tsv"
    folder.mkdir()
    with pytest.raises(UsageError, match="not a regular file"):
        write_labels(folder, {0: "x"}, force=True)


# ----------------------------------------------------------------------------- suggestions
def test_adjacent_pairs_count_pairs_inside_a_document_of_one_topic():
    # documents [5 6 7 | 5 6 | 6 5 5 6] with words 5 6 the pair, 7 noise
    doc_ptr = np.array([0, 3, 5, 9])
    words = np.array([5, 6, 7, 5, 6, 6, 5, 5, 6])
    z = np.array([0, 0, 0, 0, 0, 1, 1, 0, 0])
    pairs = topic_docs.adjacent_pairs(doc_ptr, words, z, 2, 8)
    # topic 0: (5, 6) three times (the last across topics 1->0 does not count: 6|5 is
    # topic 1 then 1, 5 5 is one word twice); (6, 7) once
    assert pairs[0] == (5, 6, 3)
    assert pairs[1] is None                     # (6, 5) once only: below MIN_PAIR_COUNT


def test_adjacent_pairs_do_not_cross_documents():
    doc_ptr = np.array([0, 2, 4, 5, 6])
    words = np.array([4, 1, 2, 4, 1, 2])        # 1|2 twice, each across a boundary
    z = np.zeros(6, dtype=np.int64)
    assert topic_docs.adjacent_pairs(doc_ptr, words, z, 1, 5) == [None]
    doc_ptr = np.array([0, 2, 4, 6])
    words = np.array([1, 2, 1, 2, 1, 2])
    assert topic_docs.adjacent_pairs(doc_ptr, words, z, 1, 5) == [(1, 2, 3)]


def test_equal_counts_take_the_lower_word_ids():
    doc_ptr = np.array([0, 2, 4, 6, 8])
    words = np.array([3, 4, 3, 4, 1, 2, 1, 2])
    z = np.zeros(8, dtype=np.int64)
    assert topic_docs.adjacent_pairs(doc_ptr, words, z, 1, 5) == [(1, 2, 2)]


TEXTS = ["the space shuttle launch from orbit went well",
         "nasa said the space shuttle is ready for orbit",
         "a space shuttle crew trained with nasa",
         "the ice hockey team scored a goal in the final period",
         "ice hockey goal keeper stopped the puck",
         "hockey fans watched the puck cross the goal line"] * 2


@pytest.fixture(scope="module")
def tiny_store(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("tiny")
    source = folder / "docs.txt"
    source.write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    out = folder / "store"
    prepare([str(source)], out, PrepareOptions(test_docs=0, snippets=20, stopwords="english"))
    return out


def _stub_run(store: CorpusStore, z=None, theta=None, ndk=None):
    """A loaded run as the functions read it: the store, a state and the topics."""
    V = store.n_words
    vocab = store.vocab
    space = {"space", "shuttle", "orbit", "nasa", "launch", "crew", "ready"}
    phi = np.full((2, V), 1e-3)
    for w, word in enumerate(vocab):
        phi[0 if word in space else 1, w] = 1.0
    phi /= phi.sum(axis=1, keepdims=True)
    state = SimpleNamespace()
    if z is not None:
        state.z = z
    if ndk is not None:
        state.ndk, state.alpha = ndk, np.full(2, 0.1)
    if theta is not None:
        state.theta = lambda: theta
    driver = SimpleNamespace(traits=SimpleNamespace(features=False),
                             features_of=lambda documents: None,
                             document_prior=lambda s, f: np.atleast_2d(s.alpha))
    return SimpleNamespace(store=store, state=state, driver=driver, topic_word=lambda: phi)


def test_suggested_label_is_the_known_pair_then_top_words(tiny_store):
    store = CorpusStore.open(tiny_store)
    train = store.train()
    D = train.doc_ptr.size - 1
    # theta puts the space documents in topic 0: argmax theta phi assigns their words
    theta = np.array([[0.9, 0.1] if "space" in TEXTS[i % 6] else [0.1, 0.9]
                      for i in range(D)])
    run = _stub_run(store, theta=theta)
    labels, how = topic_docs.run_suggestions(run)
    assert labels[0].startswith("space shuttle / ")
    assert labels[1].startswith("ice hockey / ")
    assert "argmax_k theta_dk phi_kw" in how
    # a sampler's z is used as it is: every token in topic 1 puts the pair there
    words = np.asarray(train.words)
    run = _stub_run(store, z=np.ones(words.size, dtype=np.int32))
    labels, how = topic_docs.run_suggestions(run)
    assert "z" in how and " / " not in labels[0] and labels[1].startswith("space shuttle /")


def test_bag_of_words_store_suggests_top_words_only(tiny_store):
    store = CorpusStore.open(tiny_store)
    store.manifest["source"]["format"] = "uci"          # as a docword store says
    run = _stub_run(store, z=np.zeros(store.train().words.size, dtype=np.int32))
    labels, how = topic_docs.run_suggestions(run)
    assert " / " not in labels[0] and "no adjacent pairs" in how


# ----------------------------------------------------------------------------- documents
def test_representative_documents_with_snippets_ties_by_index(tiny_store):
    store = CorpusStore.open(tiny_store)
    D = store.train().doc_ptr.size - 1
    ndk = np.zeros((D, 2), dtype=np.int32)
    ndk[:, 1] = 5
    ndk[[4, 1, 7], 0] = 5       # documents 1, 4 and 7 tie on topic 0
    ndk[[4, 1, 7], 1] = 0
    run = _stub_run(store, ndk=ndk)
    training = topic_docs.training_theta(run)
    assert "n_dk + alpha" in training.theta_source
    docs = topic_docs.representative_docs(store, training, 0, 3)
    assert [d["index"] for d in docs] == [1, 4, 7]
    assert docs[0]["share"] == pytest.approx(5.1 / 5.2)
    ids = store.document_ids("train")
    assert [d["document"] for d in docs] == [ids[1], ids[4], ids[7]]
    assert docs[0]["snippet"] == snippet_of(TEXTS[1], 20) == "nasa said the space"


def test_store_snippets_verify_and_old_stores_have_none(tiny_store, tmp_path):
    from topictk.corpus.store import verify_store

    store = CorpusStore.open(tiny_store)
    assert store.has_snippets and store.manifest["snippets"]["characters"] == 20
    assert store.verify() > 0
    verify_store(str(tiny_store))
    source = tmp_path / "docs.txt"
    source.write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    plain = tmp_path / "plain"
    prepare([str(source)], plain, PrepareOptions(test_docs=0))
    opened = CorpusStore.open(plain)
    assert not opened.has_snippets and opened.snippets([0]) is None
    assert not (plain / "train_snippet_text.npy").exists()


def test_a_changed_snippet_is_caught(tiny_store, tmp_path):
    import shutil

    from topictk.errors import CorpusError

    copy = tmp_path / "store"
    shutil.copytree(tiny_store, copy)
    path = copy / "train_snippet_text.npy"
    data = bytearray(path.read_bytes())
    data[-1] ^= 1
    path.write_bytes(bytes(data))
    with pytest.raises(CorpusError, match="train_snippet_text.npy: content differs"):
        CorpusStore.open(copy).snippets([0])


def test_snippet_of_collapses_space_and_cuts_characters():
    assert snippet_of("  a\tb\n\nc\x00d  é" * 3, 9) == "a b cd é"
