"""Bad input through the command line (docs/index.md, "Commands"): exit code 2 for usage and
config errors, 1 for data errors, always one ``topictk: error:`` line naming the file or key and
the fix, never a traceback, and an existing output directory left exactly as it was."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from tests.integration._cli import (
    EXAMPLE,
    assert_same_arrays,
    fails,
    model_arrays,
    ok,
    run,
    snapshot,
    write_config,
)
from topictk.errors import CorpusUsageError
from topictk.inference.registry import algorithm_names


# ------------------------------------------------------------------------- prepare
@pytest.fixture
def existing_store(tmp_path) -> Path:
    """An existing store at --out; failing ``prepare --force`` runs must leave it untouched."""
    out = tmp_path / "store"
    ok("prepare", EXAMPLE, "--out", out)
    return out


def _prepare_fails(code: int, existing: Path, *args) -> str:
    before = snapshot(existing)
    message = fails(code, "prepare", *args, "--out", existing, "--force")
    assert snapshot(existing) == before
    assert sorted(p.name for p in existing.parent.iterdir() if p.name.startswith(".")) == []
    return message


def test_empty_input_file(tmp_path, existing_store):
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    message = _prepare_fails(2, existing_store, empty)
    assert message == f"{empty}: no documents found; the input is empty"


def test_missing_input_file(tmp_path, existing_store):
    message = _prepare_fails(2, existing_store, tmp_path / "nope.txt")
    assert message == f"{tmp_path / 'nope.txt'}: no such file; check the input path"


def test_binary_file(tmp_path, existing_store):
    binary = tmp_path / "data.txt"
    binary.write_bytes(b"some text line\n\x00\x01\x02\xff binary\n")
    message = _prepare_fails(1, existing_store, binary)
    assert message.startswith(f"{binary}:2: looks like a binary file (NUL byte)")
    assert "--encoding-errors skip" in message


def test_non_utf8_file_names_file_and_line(tmp_path, existing_store):
    latin = tmp_path / "latin1.txt"
    text = "first line is fine\nsecond one too\ncaf\u00e9 cr\u00e8me\n"
    latin.write_bytes(text.encode("latin-1"))
    message = _prepare_fails(1, existing_store, latin)
    assert message == (f"{latin}:3: not valid UTF-8; convert the file to UTF-8, or use "
                       f"--encoding-errors skip to count and skip such lines")


def test_encoding_errors_skip_counts_and_skips(tmp_path):
    mixed = tmp_path / "mixed.txt"
    mixed.write_bytes(b"python classes define methods\n"
                      b"caf\xe9 cr\xe8me latin one\n"
                      b"modules import functions\n"
                      b"\x00\x00 binary junk\n"
                      b"strings format values\n")
    out = ok("prepare", mixed, "--out", tmp_path / "store", "--encoding-errors", "skip",
             "--test-docs", "0")
    assert "skipped:      2 undecodable lines/files" in out.stdout
    assert "documents:    3 train, 0 test (3 read;" in out.stdout
    manifest = json.loads((tmp_path / "store" / "manifest.json").read_text())
    assert manifest["counts"]["undecodable_skipped"] == 2
    vocab = (tmp_path / "store" / "vocab.txt").read_text().split()
    assert "latin" not in vocab and "binary" not in vocab and "python" in vocab
    ids = (tmp_path / "store" / "train_ids.txt").read_text().split()
    assert [i.rsplit(":", 1)[1] for i in ids] == ["1", "3", "5"]


def _uci(tmp_path: Path, name: str, header: tuple[int, int, int], body: list[str],
         vocab: list[str]) -> Path:
    (tmp_path / f"vocab.{name}.txt").write_text("\n".join(vocab) + "\n")
    path = tmp_path / f"docword.{name}.txt"
    path.write_text("\n".join(str(x) for x in header) + "\n" + "\n".join(body) + "\n")
    return path


def test_uci_header_nnz_disagrees_with_body(tmp_path, existing_store):
    path = _uci(tmp_path, "nnz", (2, 3, 3), ["1 1 2", "1 2 1", "2 3 4", "2 1 1"],
                ["ant", "bee", "cat"])
    message = _prepare_fails(1, existing_store, path)
    assert message == (f"{path}: header says NNZ = 3 but the body has 4 entries; the file is "
                       f"truncated or its header is wrong")


def test_uci_document_id_beyond_d(tmp_path, existing_store):
    path = _uci(tmp_path, "docid", (2, 3, 3), ["1 1 2", "3 2 1", "2 3 4"], ["ant", "bee", "cat"])
    message = _prepare_fails(1, existing_store, path)
    assert message == (f"{path}:5: document id outside 1..2 (header D); the header disagrees "
                       f"with the body")


@pytest.mark.parametrize("name, words", [
    ("short", ["ant", "bee"]),
    # longer than W: every id is in range, but the file belongs to another vocabulary (the
    # NIPS folder ships the full and the filtered one side by side)
    ("long", ["ant", "bee", "cat", "dog"]),
])
def test_uci_vocabulary_length_must_be_w(tmp_path, existing_store, name, words):
    path = _uci(tmp_path, name, (2, 3, 3), ["1 1 2", "1 2 1", "2 3 4"], words)
    message = _prepare_fails(1, existing_store, path)
    vocab = tmp_path / f"vocab.{name}.txt"
    assert message == (f"{vocab}: vocabulary has {len(words)} words but {path} says W = 3; "
                       f"give the vocabulary that belongs to this file")


@pytest.mark.parametrize("words, line, problem", [
    (["ant", "", "cat"], 2, "empty line in the vocabulary"),
    (["ant", "bee", "ant"], 3, "'ant' repeats line 1"),
])
def test_uci_vocabulary_lines_are_distinct_words(tmp_path, existing_store, words, line,
                                                  problem):
    path = _uci(tmp_path, "dup", (2, 3, 3), ["1 1 2", "1 2 1", "2 3 4"], words)
    message = _prepare_fails(1, existing_store, path)
    assert message.startswith(f"{tmp_path / 'vocab.dup.txt'}:{line}: {problem}")


def test_uci_count_beyond_int32_or_memory(tmp_path, existing_store):
    path = _uci(tmp_path, "big", (2, 3, 3), ["1 1 2", "1 2 4294967298", "2 3 4"],
                ["ant", "bee", "cat"])
    message = _prepare_fails(1, existing_store, path)
    assert message == (f"{path}:5: count 4294967298 is more than 2,147,483,647 tokens of one "
                       f"word in one document; the file is damaged")
    # each count fits, but together they would not fit in any machine's memory (4.4 TiB):
    # refused before expanding them into tokens
    body = [f"{d} {w} 2000000000" for d in (1, 2) for w in range(1, 51)]
    body[7] = "1 8 2000000001"
    path = _uci(tmp_path, "huge", (2, 50, 100), body, [f"w{i}" for i in range(50)])
    message = _prepare_fails(1, existing_store, path)
    assert message == (f"{path}: 200,000,000,001 tokens would need about 4470 GiB of memory, "
                       f"more than this machine has; check the counts (the largest, "
                       f"2,000,000,001, is on line 11)")


def test_missing_docword_is_not_a_vocabulary_problem(tmp_path, existing_store):
    path = tmp_path / "docword.nosuch.txt"
    message = _prepare_fails(2, existing_store, path)
    assert message == f"{path}: no such file; check the input path"


def test_uci_without_vocabulary(tmp_path, existing_store):
    path = tmp_path / "docword.lonely.txt"
    path.write_text("1\n1\n1\n1 1 1\n")
    message = _prepare_fails(2, existing_store, path)
    assert message == f"{path}: UCI input needs its vocabulary; add --vocab vocab.NAME.txt"


def test_uci_input_that_is_fine(tmp_path):
    path = _uci(tmp_path, "fine", (3, 3, 5), ["1 1 2", "1 2 1", "2 3 4", "2 1 1", "3 2 2"],
                ["ant", "bee", "cat"])
    out = ok("prepare", path, "--out", tmp_path / "store", "--test-docs", "0")
    assert "documents:    3 train, 0 test (3 read;" in out.stdout
    assert "tokens:       10 train, 0 test observed, 0 test held out" in out.stdout
    # corpus frequency: cat 4, ant 3, bee 3 (ties alphabetical)
    assert (tmp_path / "store" / "vocab.txt").read_text().split() == ["cat", "ant", "bee"]


def test_standard_input_one_document_per_line(tmp_path):
    from click.testing import CliRunner

    from topictk.cli import cli

    text = "python classes define methods\nmodules import functions\n\nstrings format values\n"
    result = CliRunner().invoke(cli, ["prepare", "-", "--out", str(tmp_path / "store"),
                                      "--test-docs", "0"], input=text)
    assert result.exit_code == 0, result.stderr
    assert "documents:    3 train, 0 test (4 read; empty after filtering: 1 train" in result.stdout
    ids = (tmp_path / "store" / "train_ids.txt").read_text().split()
    assert ids == ["<stdin>:1", "<stdin>:2", "<stdin>:4"]


def test_documents_empty_after_filtering_are_dropped_and_counted(tmp_path):
    text = tmp_path / "docs.txt"
    text.write_text("the and of it\n"                        # only stop words
                    "python classes define methods\n"
                    "a b c 1 2 3 !!!\n"                     # nothing of 3+ letters
                    "modules import functions and classes\n"
                    "strings format values\n")
    out = ok("prepare", text, "--out", tmp_path / "store", "--test-docs", "0")
    assert ("documents:    3 train, 0 test (5 read; empty after filtering: 2 train, 0 test "
            "dropped)") in out.stdout
    manifest = json.loads((tmp_path / "store" / "manifest.json").read_text())
    assert manifest["counts"]["empty_documents_dropped"] == {"train": 2, "test": 0}
    ids = (tmp_path / "store" / "train_ids.txt").read_text().split()
    assert [i.rsplit(":", 1)[1] for i in ids] == ["2", "4", "5"]


def test_every_document_empty_after_filtering(tmp_path, existing_store):
    text = tmp_path / "stop.txt"
    text.write_text("the and of\nit is a\n")
    message = _prepare_fails(2, existing_store, text, "--test-docs", "0")
    assert message.startswith(f"{text}: no word survives the vocabulary filters")
    assert "relax them" in message


def test_existing_out_without_force(existing_store):
    before = snapshot(existing_store)
    message = fails(2, "prepare", EXAMPLE, "--out", existing_store, "--seed", "4")
    assert message == (f"{existing_store}: output directory exists; choose another --out or "
                       f"add --force to replace it")
    assert snapshot(existing_store) == before


def test_bad_option_values_are_usage_errors(tmp_path, existing_store):
    message = _prepare_fails(2, existing_store, EXAMPLE, "--heldout-fraction", "1.5")
    assert message == "--heldout-fraction must be in (0, 1); got 1.5"
    outcome = run("prepare", EXAMPLE, "--out", tmp_path / "x", "--format", "pdf")
    assert outcome.exit_code == 2 and "Invalid value for '--format'" in outcome.stderr
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("args, expected", [
    (["--seed", "-1"], "--seed must be >= 0; got -1"),
    (["--test-docs", "nan"], "--test-docs must be a finite number; got nan"),
    (["--test-docs", "inf"], "--test-docs must be a finite number; got inf"),
    (["--min-df", "nan"], "--min-df must be a finite number; got nan"),
    (["--stopwords", "english", "--vocab-list", EXAMPLE],
     "--vocab-list fixes the vocabulary; drop --min-df, --max-df, --vocab-size and --stopwords "
     "(leave out of the list the words to drop)"),
    (["--vocab", EXAMPLE], "--vocab names the vocabulary of bag-of-words input (UCI, LDA-C, "
                           "Matrix Market), not of text input; to fix the vocabulary of text "
                           "use --vocab-list"),
    (["--test-docs", "60"], "--test-docs 60 leaves no training document (the input has 60 "
                            "documents); give a smaller share or count"),
])
def test_option_values_and_combinations_refused(tmp_path, existing_store, args, expected):
    small = tmp_path / "small.txt"
    small.write_text("".join(f"python class object number {i % 7} string value\n"
                             for i in range(60)))
    assert _prepare_fails(2, existing_store, small, *args) == expected


def test_options_an_imported_split_or_split_field_would_ignore(tmp_path, existing_store):
    (tmp_path / "vocab.toy.txt").write_text("ant\nbee\n")
    for name in ("toy", "obs", "held"):
        (tmp_path / f"docword.{name}.txt").write_text("1\n2\n2\n1 1 2\n1 2 1\n")
    docword = tmp_path / "docword.toy.txt"
    split = ["--test-observed", tmp_path / "docword.obs.txt",
             "--test-heldout", tmp_path / "docword.held.txt"]
    for extra, given in ((["--test-docs", "0.2"], "--test-docs"),
                         (["--heldout-fraction", "0.5"], "--heldout-fraction")):
        message = _prepare_fails(2, existing_store, docword, *split, *extra)
        assert message == (f"{given} cannot be used with the imported split (--test-observed/"
                           f"--test-heldout), which already fixes the test set; drop {given}")
    message = _prepare_fails(2, existing_store, docword, "--vocab-list", tmp_path / "vocab.toy.txt")
    assert message.startswith("--vocab-list fixes the vocabulary of text input; UCI input comes "
                              "with its own (--vocab)")
    jsonl = tmp_path / "docs.jsonl"
    jsonl.write_text('{"text": "python class object", "part": "train"}\n'
                     '{"text": "python class string", "part": "test"}\n')
    message = _prepare_fails(2, existing_store, jsonl, "--split-field", "part", "--test-docs", "1")
    assert message == ("--test-docs cannot be used with --split-field part, which already fixes "
                       "the test set; drop --test-docs")
    # the held-out share still applies to the documents the field chose
    ok("prepare", jsonl, "--split-field", "part", "--heldout-fraction", "0.5",
       "--out", tmp_path / "fielded")


def test_splits_with_nothing_to_score_warn(tmp_path):
    outcome = ok("prepare", EXAMPLE, "--test-docs", "0.0001", "--out", tmp_path / "s")
    assert "--test-docs 0.0001 of" in outcome.stderr
    assert "rounds to no test document" in outcome.stderr
    outcome = ok("prepare", EXAMPLE, "--heldout-fraction", "0.001", "--out", tmp_path / "h")
    assert ("--heldout-fraction 0.001 holds out no token of the 34 test document(s) (each has "
            "fewer than 1/0.001 tokens): there will be nothing to score" in outcome.stderr)
    assert "nothing to score" not in ok("prepare", EXAMPLE, "--out", tmp_path / "d").stderr


def test_inputs_of_mixed_formats_are_refused(tmp_path, existing_store):
    jsonl = tmp_path / "docs.jsonl"
    jsonl.write_text('{"text": "python class object"}\n')
    message = _prepare_fails(2, existing_store, EXAMPLE, jsonl)
    assert message == (f"the inputs mix formats: {EXAMPLE} (text), {jsonl} (jsonl); give inputs "
                       f"of one format, or --format to read them all one way")
    # --format reads them all one way, as asked
    ok("prepare", EXAMPLE, jsonl, "--format", "text", "--out", tmp_path / "as_text")


def test_stopword_and_vocabulary_files_that_cannot_be_read(tmp_path, existing_store):
    folder = tmp_path / "words"
    folder.mkdir()
    message = _prepare_fails(2, existing_store, EXAMPLE, "--stopwords", folder)
    assert message.startswith(f"--stopwords {folder}: is a folder; give 'english', 'none' or "
                              f"a file")
    latin1 = tmp_path / "stop.txt"
    latin1.write_bytes(b"caf\xe9\n")
    message = _prepare_fails(1, existing_store, EXAMPLE, "--stopwords", latin1)
    assert message == f"{latin1}: stop-word file is not valid UTF-8; convert it to UTF-8"
    path = _uci(tmp_path, "gz", (1, 2, 2), ["1 1 2", "1 2 1"], ["ant", "bee"])
    fake_gz = tmp_path / "vocab.gz"
    fake_gz.write_text("ant\nbee\n")
    message = _prepare_fails(1, existing_store, path, "--vocab", fake_gz)
    assert message.startswith(f"{fake_gz}: cannot be read (")
    assert message.endswith("check that the vocabulary file is complete")


def test_force_replaces_corpus_stores_only(tmp_path, existing_store, monkeypatch):
    victim = tmp_path / "victim"
    victim.mkdir()
    data = victim / "mydata.txt"
    shutil.copy(EXAMPLE, data)
    before = snapshot(victim)
    message = fails(2, "prepare", data, "--out", victim, "--force")
    assert message == (f"{victim}: exists and is not a topictk corpus store; --force replaces "
                       f"corpus stores only: choose another --out, or remove it yourself")
    assert snapshot(victim) == before
    a_file = tmp_path / "afile"
    a_file.write_text("hi\n")
    fails(2, "prepare", EXAMPLE, "--out", a_file, "--force")
    assert a_file.read_text() == "hi\n"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []
    # a store holding the input, and the working directory, are not replaced either
    shutil.copy(EXAMPLE, existing_store / "input.txt")
    message = fails(2, "prepare", existing_store / "input.txt", "--out", existing_store, "--force")
    assert message == (f"{existing_store}: holds the input {existing_store / 'input.txt'}, which "
                       f"--force would delete; choose another --out")
    monkeypatch.chdir(existing_store)
    message = fails(2, "prepare", EXAMPLE, "--out", ".", "--force")
    assert message == (".: is the working directory or contains it; run prepare from another "
                       "directory or choose another --out")
    assert (existing_store / "input.txt").exists()
    # an empty directory and a damaged store (a manifest that does not parse) are replaced
    empty = tmp_path / "empty"
    empty.mkdir()
    ok("prepare", EXAMPLE, "--out", empty, "--force")
    (empty / "manifest.json").write_text("{")
    ok("prepare", EXAMPLE, "--out", empty, "--force")


def test_directory_input_skips_hidden_files_and_folders(tmp_path):
    docs = tmp_path / "docs"
    (docs / ".ipynb_checkpoints").mkdir(parents=True)
    (docs / "a.txt").write_text("python class object\n")
    (docs / ".b.txt").write_text("editor backup words\n")
    (docs / ".ipynb_checkpoints" / "a-checkpoint.txt").write_text("checkpoint copy words\n")
    ok("prepare", docs, "--test-docs", "0", "--out", tmp_path / "s")
    assert (tmp_path / "s" / "train_ids.txt").read_text() == "a.txt\n"


def test_debug_shows_the_exception(tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    outcome = run("--debug", "prepare", empty, "--out", tmp_path / "s")
    assert isinstance(outcome.exception, CorpusUsageError)
    assert "no documents found" in str(outcome.exception)


# --------------------------------------------------------------------------- train
@pytest.fixture
def trained(tmp_path, example_store) -> tuple[Path, Path]:
    """A finished small run: (config file, run directory)."""
    config = write_config(tmp_path, example_store,
                          inference={"iterations": 20, "burn_in": 10, "thin": 5},
                          training={"checkpoint_every": 10})
    ok("train", "--config", config, "-q")
    return config, tmp_path / "run"


def _train_fails(code: int, run_dir: Path, *args) -> str:
    before = snapshot(run_dir)
    message = fails(code, "train", *args)
    assert snapshot(run_dir) == before, "the existing run directory was modified"
    return message


@pytest.mark.parametrize("override,expected", [
    ("model.topcs=5", "unknown key 'model.topcs' ({set}); did you mean 'topics'? allowed: "
                      "alpha, beta, family, residual_topic, seed_file, seed_mode, "
                      "seed_weight, seed_words, topics"),
    ("inference.burnin=5", "unknown key 'inference.burnin' ({set}); did you mean 'burn_in'?"),
    ("model.alpha=-0.1", "model.alpha must be a number > 0 or auto; got -0.1 ({set})"),
    ("model.topics=0", "model.topics must be an integer in [1, 1000000]; got 0 ({set})"),
    ("inference.burn_in=20", "inference.burn_in must be < inference.iterations (20); got 20 "
                             "({config} with {set})"),
    ("training.threads=0", "training.threads must be an integer >= 1 or auto; got 0 ({set})"),
])
def test_config_errors_via_set(trained, override, expected):
    config, run_dir = trained
    message = _train_fails(2, run_dir, "--config", config, "--resume", "--set", override)
    # a value from --set is blamed on it, not on the config file
    assert message.startswith(expected.format(config=config, set=f"--set {override}"))


def test_config_errors_in_the_file(tmp_path, trained):
    _, run_dir = trained
    data = yaml.safe_load((tmp_path / "exp.yaml").read_text())
    data["model"]["alpah"] = 0.5
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(data))
    message = _train_fails(2, run_dir, "--config", bad, "--resume")
    assert message.startswith(f"unknown key 'model.alpah' ({bad}); did you mean 'alpha'?")
    data["model"].pop("alpah")
    data["inference"]["algorithm"] = "gibs"
    bad.write_text(yaml.safe_dump(data))
    message = _train_fails(2, run_dir, "--config", bad, "--resume")
    assert message == (f"inference.algorithm must be one of {', '.join(algorithm_names())}; "
                       f"got 'gibs' ({bad}); did you mean 'gibbs'?")
    message = _train_fails(2, run_dir, "--config", tmp_path / "nothing.yaml")
    assert message == f"{tmp_path / 'nothing.yaml'}: config file not found"


def test_missing_corpus_store(tmp_path):
    config = write_config(tmp_path, tmp_path / "no-store")
    message = fails(2, "train", "--config", config)
    assert message == (f"{tmp_path / 'no-store'}: no corpus store here; create it with "
                       f"'topictk prepare INPUT --out {tmp_path / 'no-store'}'")
    assert not (tmp_path / "run").exists()


def test_existing_run_without_resume_or_force(trained):
    config, run_dir = trained
    message = _train_fails(2, run_dir, "--config", config)
    assert message == (f"{run_dir}: output directory already holds a run; add --resume to "
                       f"continue it, --force to replace it, or choose another output")


def test_force_replaces_a_run(trained):
    config, run_dir = trained
    ok("train", "--config", config, "-q", "--force", "--set", "inference.iterations=10",
       "--set", "inference.burn_in=5")
    assert sorted(p.name for p in (run_dir / "checkpoints").iterdir()) == ["step-00000010.npz"]
    assert [json.loads(x)["step"] for x in (run_dir / "metrics.jsonl").read_text().split("\n")
            if x] == [10]


def test_resume_with_changed_topics_is_refused_naming_both(trained):
    config, run_dir = trained
    message = _train_fails(2, run_dir, "--config", config, "--resume", "--set", "model.topics=9")
    assert message == (f"{run_dir / 'checkpoints' / 'step-00000020.npz'}: has model.topics = 6, "
                       f"the config says 9; use a new output directory")


def test_resume_with_another_algorithm_is_refused_naming_both(tmp_path, trained, example_store):
    """Needs a second registered algorithm that accepts a config with only its defaults; the
    unit test in tests/unit/test_checkpoint.py covers the check whatever is registered."""
    from topictk.errors import ConfigError
    from topictk.inference.registry import load_config

    _, run_dir = trained

    def raw(name):
        return {"corpus": str(example_store), "output": str(run_dir),
                "model": {"topics": 6, "alpha": 0.1, "beta": 0.01},
                "inference": {"algorithm": name, "iterations": 30}}

    others = []
    for name in algorithm_names():
        try:
            if name != "gibbs":
                load_config(None, raw=raw(name))
                others.append(name)
        except ConfigError:
            pass
    if not others:
        pytest.skip("no second algorithm accepts a config of defaults")
    config = tmp_path / "other-algorithm.yaml"
    config.write_text(yaml.safe_dump(raw(others[0])))
    message = _train_fails(2, run_dir, "--config", config, "--resume")
    assert message == (f"{run_dir / 'checkpoints' / 'step-00000020.npz'}: was trained with "
                       f"inference.algorithm = gibbs, the config says {others[0]}; use a new "
                       f"output directory")


def test_resume_with_another_corpus_is_refused(trained, other_store):
    config, run_dir = trained
    message = _train_fails(2, run_dir, "--config", config, "--resume", "--set",
                           f"corpus={other_store}")
    assert message == (f"{run_dir / 'checkpoints' / 'step-00000020.npz'}: was trained on another "
                       f"corpus than {other_store} (corpus id differs); point corpus at the "
                       f"store it was trained on")


def test_evaluate_with_another_corpus_is_refused(trained, other_store):
    _, run_dir = trained
    data = yaml.safe_load((run_dir / "config.yaml").read_text())
    data["corpus"] = str(other_store)
    (run_dir / "config.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    before = snapshot(run_dir)
    message = fails(2, "evaluate", run_dir, "--json")
    assert message.startswith(f"{run_dir / 'model.npz'}: was trained on another corpus than "
                              f"{other_store}")
    message = fails(2, "topics", run_dir)
    assert "was trained on another corpus" in message
    assert snapshot(run_dir) == before


@pytest.mark.parametrize("damage", ["truncate", "garbage"])
def test_damaged_checkpoint_on_resume(trained, damage):
    config, run_dir = trained
    latest = run_dir / "checkpoints" / "step-00000020.npz"
    data = latest.read_bytes()
    latest.write_bytes(data[: len(data) // 3] if damage == "truncate" else b"\x00garbage" * 50)
    message = _train_fails(1, run_dir, "--config", config, "--resume", "--set",
                           "inference.iterations=30")
    assert message.startswith(f"{latest}: truncated or corrupt (")
    assert message.endswith("delete it to fall back to an earlier checkpoint, or train again "
                            "without --resume")
    # following the advice works: the earlier checkpoint resumes
    latest.unlink()
    out = ok("train", "--config", config, "-q", "--resume", "--set", "inference.iterations=30")
    assert out.stdout.startswith(f"{run_dir}: step 30")


def _damage(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 3])


def test_damaged_final_model_advises_resume_or_retraining(trained):
    """evaluate, topics and infer read model.npz: deleting it does not help, resuming from
    the last checkpoint writes it again."""
    _, run_dir = trained
    model, run_config = run_dir / "model.npz", run_dir / "config.yaml"
    _, before = model_arrays(run_dir)
    _damage(model)
    fix = (f"resume the run from its last checkpoint with 'topictk train --config {run_config} "
           f"--resume', which writes it again, or pick a checkpoint with --checkpoint STEP "
           f"(available: 10, 20)")
    for args in (("evaluate", run_dir), ("topics", run_dir), ("infer", run_dir, EXAMPLE)):
        message = fails(1, *args)
        assert message.startswith(f"{model}: truncated or corrupt (") and message.endswith(fix)
        assert "delete it" not in message
    # following the advice works and gives the model back
    ok("train", "--config", run_config, "-q", "--resume")
    assert_same_arrays(model_arrays(run_dir)[1], before)
    ok("evaluate", run_dir, "--json")
    # without checkpoints only training again helps
    shutil.rmtree(run_dir / "checkpoints")
    _damage(model)
    message = fails(1, "evaluate", run_dir)
    assert message.endswith(f"; train the run again with 'topictk train --config {run_config} "
                            f"--force'")


def test_damaged_checkpoint_named_by_step_advises_another(trained):
    _, run_dir = trained
    path = run_dir / "checkpoints" / "step-00000010.npz"
    _damage(path)
    for command in ("evaluate", "topics"):
        message = fails(1, command, run_dir, "--checkpoint", "10")
        assert message.startswith(f"{path}: truncated or corrupt (")
        assert message.endswith("; choose another step with --checkpoint (available: 20) or "
                                "omit --checkpoint to use the final model")
    ok("evaluate", run_dir, "--checkpoint", "20", "--json")
    (run_dir / "model.npz").unlink()
    message = fails(1, "evaluate", run_dir, "--checkpoint", "10")
    assert message.endswith("; choose another step with --checkpoint (available: 20)")


def test_damaged_sample_advises_training_again(trained):
    _, run_dir = trained
    sample = min((run_dir / "samples").iterdir())
    _damage(sample)
    run_config = run_dir / "config.yaml"
    for args in ((), ("--checkpoint", "20")):
        message = fails(1, "evaluate", run_dir, *args)
        assert message.startswith(f"{sample}: truncated or corrupt (")
        assert message.endswith(f"; samples are only saved during training; train the run "
                                f"again with 'topictk train --config {run_config} --force'")
    ok("train", "--config", run_config, "-q", "--force")
    ok("evaluate", run_dir, "--json")


def test_resume_without_checkpoint(tmp_path, example_store):
    config = write_config(tmp_path, example_store)
    message = fails(2, "train", "--config", config, "--resume")
    assert message == (f"{tmp_path / 'run' / 'checkpoints'}: no checkpoint to resume from; "
                       f"train without --resume")


def test_evaluate_errors(tmp_path, trained):
    message = fails(2, "evaluate", tmp_path)
    assert message == (f"{tmp_path}: not a run directory (no config.yaml); give the output "
                       f"directory of 'topictk train'")
    _, run_dir = trained
    outcome = run("evaluate", run_dir, "--checkpoint", "-1")
    assert outcome.exit_code == 2 and "-1 is not in the range x>=0" in outcome.stderr
    message = fails(2, "evaluate", run_dir, "--checkpoint", "15")
    assert message == (f"{run_dir / 'checkpoints' / 'step-00000015.npz'}: no checkpoint at step "
                       f"15; available: 10, 20")
    (run_dir / "model.npz").unlink()
    message = fails(1, "evaluate", run_dir)
    assert message.startswith(f"{run_dir / 'model.npz'}: no final model; the run has not finished")
    # a chosen checkpoint still evaluates
    result = json.loads(ok("evaluate", run_dir, "--checkpoint", "10", "--json").stdout)
    assert result["step"] == 10 and result["model"] == "step-00000010.npz"


def test_evaluate_with_missing_store(trained, tmp_path):
    _, run_dir = trained
    data = yaml.safe_load((run_dir / "config.yaml").read_text())
    data["corpus"] = str(tmp_path / "gone")
    (run_dir / "config.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    message = fails(2, "evaluate", run_dir)
    assert message.startswith(f"{run_dir / 'config.yaml'}: corpus {tmp_path / 'gone'}: no "
                              f"corpus store there")


@pytest.mark.parametrize("args, expected", [
    (("train",), "Missing option '--config' / '-c' (or --continue RUN --add STORE); see '"),
    (("evaluate", "--nope", "x"), "No such option '--nope'"),
    (("evaluate", "README.md"), "Invalid value for 'RUN_DIR': Directory 'README.md' is a file"),
    (("prepare", "--vocab", "{tmp}", "x", "--out", "y"),
     "Invalid value for '--vocab': File '{tmp}' is a directory; see '"),
    (("topics", "x", "--top", "many"), "Invalid value for '--top'"),
])
def test_a_bad_option_or_argument_is_one_line(tmp_path, monkeypatch, args, expected):
    monkeypatch.chdir(Path(__file__).resolve().parents[2])
    args = [a.format(tmp=tmp_path) for a in args]
    message = fails(2, *args)
    assert message.startswith(expected.format(tmp=tmp_path))
    assert message.endswith(f" {args[0]} --help'")
