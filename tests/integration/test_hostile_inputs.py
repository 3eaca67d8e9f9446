"""Inputs that claim what they are not, through the command line: each is refused with one
line naming the file (or option) and a fix, and the fix, followed, works."""
from __future__ import annotations

import csv
import io
import json
import random
from pathlib import Path

import pytest

from tests.integration._cli import EXAMPLE, fails, ok, write_config

SHORT = {"inference": {"iterations": 6, "burn_in": 2, "thin": 2},
         "training": {"checkpoint_every": 0, "eval_every": 3}}


def test_a_config_key_given_twice_is_refused_until_one_is_kept(tmp_path, example_store):
    config = write_config(tmp_path, example_store, **SHORT)
    lines = config.read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if line.strip().startswith("topics:"))
    lines.insert(at + 1, "  topics: 9")
    config.write_text("\n".join(lines) + "\n")
    message = fails(2, "train", "--config", config, "-q")
    assert message == f"{config}: key model.topics appears twice (lines {at + 1} and " \
                      f"{at + 2}); keep one"
    del lines[at + 1]
    config.write_text("\n".join(lines) + "\n")
    ok("train", "--config", config, "-q")


def test_a_bad_set_value_names_the_set_option(tmp_path, example_store):
    config = write_config(tmp_path, example_store, **SHORT)
    message = fails(2, "train", "--config", config, "--set", "model.topics=six", "-q")
    assert message == ("model.topics must be an integer in [1, 1000000]; got 'six' "
                       "(--set model.topics=six)")
    ok("train", "--config", config, "--set", "model.topics=6", "-q")


def test_sweep_values_that_are_one_value_are_refused(tmp_path, example_store):
    config = write_config(tmp_path, example_store, **SHORT)
    message = fails(2, "train", "--config", config, "--sweep", "model.topics=5,05", "-q")
    assert message == ("--sweep model.topics=5,05: 5 and 05 are the same value; give each "
                       "value once")
    assert not (tmp_path / "run").exists()
    ok("train", "--config", config, "--sweep", "model.topics=5", "-q")
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == ["model.topics=5"]


def _matrix_market(tmp_path: Path, n_docs_header: int) -> tuple[Path, Path]:
    rng = random.Random(3)
    entries = [(d, w, rng.randint(1, 4)) for d in range(1, 61)
               for w in sorted(rng.sample(range(1, 31), 8))]
    mm = tmp_path / "corpus.mm"
    mm.write_text("%%MatrixMarket matrix coordinate real general\n"
                  f"{n_docs_header} 30 {len(entries)}\n"
                  + "".join(f"{d} {w} {c}\n" for d, w, c in entries))
    vocab = tmp_path / "corpus.vocab"
    vocab.write_text("".join(f"word{i}\n" for i in range(30)))
    return mm, vocab


def test_a_size_line_claiming_phantom_documents_is_refused(tmp_path):
    mm, vocab = _matrix_market(tmp_path, 1_000_000)
    message = fails(1, "prepare", mm, "--vocab", vocab, "--out", tmp_path / "store")
    assert message == (f"{mm}:2: the size line says D = 1,000,000 documents but the entries "
                       f"name documents 1..60 only, so 999,940 would be empty; write the real "
                       f"document count, 60, on line 2")
    assert not (tmp_path / "store").exists()
    lines = mm.read_text().splitlines(keepends=True)
    lines[1] = lines[1].replace("1000000", "60")
    mm.write_text("".join(lines))
    out = ok("prepare", mm, "--vocab", vocab, "--out", tmp_path / "store")
    assert "54 train, 6 test (60 read; empty after filtering: 0 train, 0 test dropped)" \
        in out.stdout


def test_a_document_id_given_twice_is_refused_or_renamed_on_request(tmp_path):
    table = tmp_path / "docs.csv"
    rows = [("d1", "python classes define methods"), ("d2", "modules import functions"),
            ("d1", "strings format values"), ("d3", "lists hold items in order")]
    table.write_text("id,text\n" + "".join(f"{i},{t}\n" for i, t in rows))
    message = fails(1, "prepare", table, "--id-column", "id", "--test-docs", "0",
                    "--out", tmp_path / "store")
    assert message == (f"{table}: document id 'd1' appears twice (lines 2 and 4); give each "
                       f"document its own id, or --duplicate-ids rename to number the repeats "
                       f"(d1~2, ...)")
    assert not (tmp_path / "store").exists()
    ok("prepare", table, "--id-column", "id", "--test-docs", "0", "--duplicate-ids", "rename",
       "--out", tmp_path / "store")
    assert (tmp_path / "store" / "train_ids.txt").read_text().split() == ["d1", "d2", "d1~2",
                                                                           "d3"]


def test_a_jsonl_id_given_twice_is_refused(tmp_path):
    lines = tmp_path / "docs.jsonl"
    lines.write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in
                             [("a", "alpha beta gamma"), ("b", "delta epsilon"),
                              ("a", "zeta theta iota")]))
    message = fails(1, "prepare", lines, "--out", tmp_path / "store")
    assert message.startswith(f"{lines}: document id 'a' appears twice (lines 1 and 3)")


def _tsv(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text, newline=""), delimiter="\t"))


def test_tsv_output_keeps_its_columns_for_a_word_with_a_tab(tmp_path):
    """A vocabulary file may hold a word with a tab or a double quote (bag-of-words input
    takes its words as they are); every TSV table quotes such a field."""
    rng = random.Random(5)
    words = ["tab\tword", 'quo"te', *(f"w{i}" for i in range(10))]
    entries = [(d, w, rng.randint(1, 5)) for d in range(1, 41)
               for w in sorted(rng.sample(range(1, 13), 7))]
    docword = tmp_path / "docword.odd.txt"
    docword.write_text(f"40\n12\n{len(entries)}\n"
                       + "".join(f"{d} {w} {c}\n" for d, w, c in entries))
    (tmp_path / "vocab.odd.txt").write_text("\n".join(words) + "\n")
    store = tmp_path / "store"
    ok("prepare", docword, "--out", store)
    config = write_config(tmp_path, store, model={"topics": 2}, **SHORT)
    ok("train", "--config", config, "-q")
    run = tmp_path / "run"

    topics = _tsv(ok("topics", run, "--format", "tsv", "--top", "12").stdout)
    assert {len(row) for row in topics} == {4}
    assert {row[2] for row in topics[1:]} == set(words)
    phi = _tsv(ok("export", run, "--what", "topic-words").stdout)
    assert {len(row) for row in phi} == {3}
    assert sorted(row[0] for row in phi[1:]) == sorted(words)
    theta = _tsv(ok("export", run, "--what", "doc-topics").stdout)
    assert {len(row) for row in theta} == {4}


def test_infer_tsv_keeps_an_id_with_a_tab(tmp_path, example_store):
    config = write_config(tmp_path, example_store, **SHORT)
    ok("train", "--config", config, "-q")
    new = tmp_path / "new.jsonl"
    new.write_text(json.dumps({"id": "first\tdoc", "text": "python classes define methods"})
                   + "\n" + json.dumps({"id": 'say "two"', "text": "modules import"}) + "\n")
    rows = _tsv(ok("infer", tmp_path / "run", new, "--output-format", "tsv",
                   "--sweeps", "4", "--burn-in", "2").stdout)
    assert [row[0] for row in rows] == ["id", "first\tdoc", 'say "two"']
    assert {len(row) for row in rows} == {3 + 6}


def test_a_manifest_naming_a_file_outside_the_store_is_refused(tmp_path):
    store = tmp_path / "store"
    ok("prepare", EXAMPLE, "--out", store)
    manifest_path = store / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    secret = tmp_path / "secret.npy"
    (store / "train_words.npy").replace(secret)
    manifest["arrays"]["../secret"] = manifest["arrays"].pop("train_words")
    manifest_path.write_text(json.dumps(manifest))
    message = fails(1, "prepare", "--verify", store)
    assert message == (f"{manifest_path}: array name '../secret' is not a plain file name "
                       f"inside the store (letters, digits, '_', '-' and '.', no folder, no "
                       f"leading dot); the manifest was modified: prepare the corpus again "
                       f"with --force")
    ok("prepare", EXAMPLE, "--out", store, "--force")
    assert "verified" in ok("prepare", "--verify", store).stdout


def test_a_sniffed_delimiter_is_named_and_the_option_fixes_it(tmp_path):
    table = tmp_path / "docs.csv"
    table.write_text("id,text\n1,the words; 'python'; and classes\n2,modules import functions\n"
                     "3,strings format values\n")
    message = fails(2, "prepare", table, "--test-docs", "0", "--out", tmp_path / "store")
    assert message == (f"{table}:1: no column 'text' when the rows are split on ';', the "
                       f"delimiter guessed from the start of the file; the header splits into "
                       f"its columns on ',': give --delimiter ','")
    ok("prepare", table, "--test-docs", "0", "--delimiter", ",", "--out", tmp_path / "store")


def test_a_folder_given_as_stop_words_is_called_a_folder(tmp_path):
    folder = tmp_path / "stop"
    folder.mkdir()
    message = fails(2, "prepare", EXAMPLE, "--stopwords", folder, "--out", tmp_path / "store")
    assert message == (f"--stopwords {folder}: is a folder; give 'english', 'none' or a file "
                       f"with one word per line")
    words = folder / "words.txt"
    words.write_text("python\n")
    ok("prepare", EXAMPLE, "--stopwords", words, "--out", tmp_path / "store")


@pytest.mark.parametrize("separator", ["\u2028", "\u2029", "\x0c", "\x85", "\x1e"])
def test_a_word_holding_a_line_separator_keeps_every_word_id(tmp_path, separator):
    """Vocabulary files are read line by line at '\\n' only: a word holding another character
    that str.splitlines() splits at stays one word, and every later word keeps its id (or the
    store would name wrong words, and infer would map new documents onto wrong ids)."""
    words = [f"odd{separator}word", *(f"w{i}" for i in range(11))]
    entries = [(d, w, 1 + (d * w) % 4) for d in range(1, 31) for w in range(1, 13)
               if (d + w) % 3]
    docword = tmp_path / "docword.sep.txt"
    docword.write_text(f"30\n12\n{len(entries)}\n"
                       + "".join(f"{d} {w} {c}\n" for d, w, c in entries), encoding="utf-8")
    (tmp_path / "vocab.sep.txt").write_text("\n".join(words) + "\n", encoding="utf-8")
    store = tmp_path / "store"
    ok("prepare", docword, "--out", store, "--test-docs", "0.2")
    ok("prepare", "--verify", store)
    from topictk.corpus.store import CorpusStore
    vocab = CorpusStore.open(store).vocab
    assert words[0] in vocab and set(vocab) <= set(words)
