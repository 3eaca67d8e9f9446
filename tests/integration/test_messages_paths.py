"""A path given where a corpus store or a run belongs, that is not one, is answered with a fix
that works: each test follows the fix the message gives and checks that it is accepted."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

import topictk
from tests.integration._cli import EXAMPLE, fails, ok, write_config
from topictk.errors import UsageError

NEW_STORE = ("create one with 'topictk prepare INPUT --out NEW_FOLDER' (a folder that does not "
             "exist yet) and set corpus to NEW_FOLDER")


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory, example_store) -> Path:
    folder = tmp_path_factory.mktemp("messages")
    config = write_config(folder, example_store, inference={"iterations": 20, "burn_in": 10})
    ok("train", "--config", config, "-q")
    return folder / "run"


def _set_corpus(config: Path, corpus) -> None:
    data = yaml.safe_load(config.read_text(encoding="utf-8"))
    data["corpus"] = str(corpus)
    config.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")


def _follow_new_store(tmp_path: Path, config: Path) -> None:
    """Do what the message says: prepare a store in a new folder, point corpus at it, train."""
    ok("prepare", EXAMPLE, "--out", tmp_path / "NEW_FOLDER")
    _set_corpus(config, tmp_path / "NEW_FOLDER")
    ok("train", "--config", config, "-q")


@pytest.mark.parametrize("where", ["root", "parent", "home", "working directory"])
def test_a_folder_that_cannot_be_a_store_is_not_offered_to_prepare(where, tmp_path,
                                                                   example_store, monkeypatch):
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    corpus = {"root": "/", "parent": "..", "home": str(Path.home()),
              "working directory": str(work)}[where]
    config = write_config(tmp_path, example_store)
    _set_corpus(config, corpus)
    message = fails(2, "train", "--config", config)
    shown = (tmp_path / corpus).resolve()        # as the config's folder resolves it
    assert message == (f"{shown}: is a folder but not a corpus store (no manifest.json); set "
                       f"corpus to a corpus store, or {NEW_STORE}")
    fails(2, "prepare", EXAMPLE, "--out", shown)        # why prepare --out there is not offered
    _follow_new_store(tmp_path, config)


def test_a_missing_store_inside_a_run_is_not_offered_to_prepare(tmp_path, trained_run,
                                                                example_store):
    inside = trained_run / "store"
    config = write_config(tmp_path, example_store)
    _set_corpus(config, inside)
    message = fails(2, "train", "--config", config)
    assert message == (f"{inside}: no corpus store here, and none can be prepared inside the run "
                       f"directory {trained_run}; set corpus to a corpus store, or {NEW_STORE}")
    fails(2, "prepare", EXAMPLE, "--out", inside)
    _follow_new_store(tmp_path, config)


@pytest.mark.parametrize("given", ["run", "model.npz"])
def test_a_run_given_as_corpus_names_its_own_store(given, tmp_path, trained_run, example_store):
    wrong = trained_run if given == "run" else trained_run / given
    config = write_config(tmp_path, example_store)
    _set_corpus(config, wrong)
    message = fails(2, "train", "--config", config)
    what = ("is a run directory" if given == "run"
            else f"is a file of the run directory {trained_run}")
    assert message == (f"{wrong}: {what}, not a corpus store; the run was trained on the store "
                       f"{example_store}: set corpus to {example_store}")
    _set_corpus(config, example_store)
    ok("train", "--config", config, "-q")


def test_a_run_whose_store_is_gone_given_as_corpus(tmp_path):
    store = tmp_path / "store"
    ok("prepare", EXAMPLE, "--out", store)
    first = write_config(tmp_path, store, inference={"iterations": 10, "burn_in": 5})
    ok("train", "--config", first, "-q")
    store.rename(tmp_path / "moved")
    second = write_config(tmp_path, tmp_path / "run", name="second.yaml",
                          output=str(tmp_path / "second"))
    message = fails(2, "train", "--config", second)
    assert message == (f"{tmp_path / 'run'}: is a run directory, not a corpus store; set corpus "
                       f"to a corpus store, or {NEW_STORE}")
    _set_corpus(second, tmp_path / "moved")
    ok("train", "--config", second, "-q")


def test_a_file_of_a_store_given_as_corpus_names_the_store(tmp_path, example_store):
    config = write_config(tmp_path, example_store)
    _set_corpus(config, example_store / "manifest.json")
    message = fails(2, "train", "--config", config)
    assert message == (f"{example_store / 'manifest.json'}: is a file of the corpus store "
                       f"{example_store}; set corpus to the folder {example_store}")
    _set_corpus(config, example_store)
    ok("train", "--config", config, "-q")


def _load_run_error(path) -> str:
    with pytest.raises(UsageError) as caught:
        topictk.load_run(path)
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_load_run_of_a_missing_path_says_it_does_not_exist(tmp_path, trained_run):
    missing = tmp_path / "no-such-run"
    assert _load_run_error(missing) == (f"{missing}: does not exist; give the output directory "
                                        f"of 'topictk train' (a folder holding config.yaml)")
    assert topictk.load_run(trained_run).topic_word().shape[0] == 6


def test_load_run_of_a_file_of_a_run_names_the_run(trained_run):
    given = trained_run / "model.npz"
    assert _load_run_error(given) == (f"{given}: is a file of the run directory {trained_run}; "
                                      f"give the folder {trained_run}")
    assert topictk.load_run(trained_run).topic_word().shape[0] == 6


def test_load_run_of_another_file(tmp_path):
    assert _load_run_error(EXAMPLE) == (f"{EXAMPLE}: is a file, not a run directory; give the "
                                        f"output directory of 'topictk train'")


def test_load_run_of_a_store_says_it_is_a_store(tmp_path, example_store):
    assert _load_run_error(example_store) == (
        f"{example_store}: is a corpus store, not a run directory; train a run on it (corpus: "
        f"{example_store} in the config of 'topictk train') and give that run's output "
        f"directory")
    config = write_config(tmp_path, example_store, inference={"iterations": 10, "burn_in": 5})
    ok("train", "--config", config, "-q")
    assert topictk.load_run(tmp_path / "run").topic_word().shape[0] == 6
