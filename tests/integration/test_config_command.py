"""``topictk config`` and ``topictk algorithms``: generated configs that train, bundled
examples, and the errors."""
from __future__ import annotations

import subprocess
import sys

import pytest
import yaml
from click.testing import CliRunner

from tests.golden.cases import write_meta_corpus
from tests.integration._cli import REPO, fails, ok
from topictk.cli import cli
from topictk.config.schema import TRAINING
from topictk.inference.registry import algorithm_names, get_driver


@pytest.fixture(scope="module")
def meta_store(tmp_path_factory):
    """The example corpus with two made-up covariates, for the DMR algorithms."""
    work = tmp_path_factory.mktemp("meta")
    corpus = write_meta_corpus(work / "meta.jsonl")
    ok("prepare", corpus, "--meta", "group,score", "--out", work / "store")
    return work / "store"


def _train_from_stdin(text: str, *args: str):
    result = CliRunner().invoke(cli, ["train", "--config", "-", *args], input=text)
    assert result.exit_code == 0, (result.stdout, result.stderr, result.exception)
    return result


@pytest.mark.parametrize("algorithm", algorithm_names())
def test_generated_config_trains_for_every_algorithm(algorithm, tmp_path, example_store,
                                                     meta_store, time_store, monkeypatch):
    store = {"dmr": meta_store, "dtm": time_store}.get(get_driver(algorithm).traits.family,
                                                      example_store)
    text = ok("config", algorithm, "--corpus", store, "--topics", "4").stdout
    monkeypatch.chdir(tmp_path)
    result = _train_from_stdin(text, "--set", "inference.iterations=4", "--quiet")
    run_dir = tmp_path / "runs" / algorithm         # relative to the working directory
    assert result.stdout.startswith(f"runs/{algorithm}: step 4")     # named as the config has it
    saved = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert saved["inference"]["algorithm"] == algorithm


def test_a_shell_pipe_trains(tmp_path, example_store):
    command = (f"{sys.executable} -m topictk config gibbs --corpus {example_store} --topics 3 | "
               f"{sys.executable} -m topictk train --config - --quiet "
               f"--set inference.iterations=3")
    done = subprocess.run(command, shell=True, check=False, cwd=tmp_path, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "runs" / "gibbs" / "config.yaml").is_file()


def test_every_key_is_shown_with_its_default_and_meaning():
    text = ok("config", "sgrld").stdout
    data = yaml.safe_load(text)
    driver = get_driver("sgrld")
    assert data["inference"]["step"]["c"] == driver.OPTIONS["step"]["c"].default
    assert set(data["training"]) == set(TRAINING)
    assert f"# {TRAINING['threads'].help} [{TRAINING['threads'].describe()}]" in text
    assert "# epsilon_t decay c" in text and "[a number in (0.5, 1]]" in text


def test_a_changed_default_is_followed(monkeypatch):
    """The text comes from the declarations, not from a copy of them."""
    options = dict(get_driver("ovb").OPTIONS)
    options["tau0"] = type(options["tau0"])("float", 17.5, low=0, help="delay")
    monkeypatch.setattr(get_driver("ovb"), "OPTIONS", options)
    data = yaml.safe_load(ok("config", "ovb").stdout)
    assert data["inference"]["tau0"] == 17.5


def test_deep_lda_config_has_one_layer_of_k():
    data = yaml.safe_load(ok("config", "tlasgr", "--topics", "7").stdout)
    assert data["model"]["family"] == "dlda" and data["model"]["layers"] == [7]


def test_without_corpus_the_loader_says_what_is_missing(tmp_path, monkeypatch):
    text = ok("config", "vb").stdout
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["train", "--config", "-"], input=text)
    assert result.exit_code == 2
    assert result.stderr.strip() == ("topictk: error: corpus is required: a path, the corpus "
                                     "store, as written by topictk prepare --out STORE (<stdin>)")


def test_unknown_algorithm_gets_a_close_match():
    message = fails(2, "config", "hsgv")
    assert "got 'hsgv'; did you mean 'hsvg'?" in message
    assert "gibbs" in message


def test_bundled_example_is_printed():
    text = ok("config", "--example", "gibbs").stdout
    assert text == (REPO / "configs" / "example_gibbs.yaml").read_text(encoding="utf-8")
    assert ok("config", "--example", "dmr-sem").stdout.startswith("#")


def test_unknown_example_lists_the_names():
    message = fails(2, "config", "--example", "gibs")
    assert "did you mean 'gibbs'?" in message and "20news_dlda_tlasgr_128" in message


def test_example_and_algorithm_exclude_each_other():
    assert "--example NAME" in fails(2, "config", "gibbs", "--example", "gibbs")
    assert "give an ALGORITHM" in fails(2, "config")


def test_algorithms_lists_the_declared_facts():
    lines = ok("algorithms").stdout.splitlines()
    assert lines[0].split()[:6] == ["algorithm", "model", "family", "threads", "resume",
                                    "cluster"]
    rows = {line.split()[0]: line.split() for line in lines[1:]}
    assert sorted(rows) == algorithm_names()
    assert rows["gibbs"][1:6] == ["lda", "sampled", "yes", "yes", "yes"]
    assert rows["tlasgr"][1:6] == ["dlda", "mini-batch", "yes", "yes", "yes"]
    assert "Hoffman, Blei & Bach 2010" in " ".join(rows["ovb"])


def test_config_from_stdin_names_stdin_in_errors(tmp_path, example_store):
    text = ok("config", "gibbs", "--corpus", example_store).stdout
    text = text.replace("  seed: 0", "  seed: -1")
    result = CliRunner().invoke(cli, ["train", "--config", "-"], input=text)
    assert result.exit_code == 2
    assert "training.seed must be an integer >= 0; got -1 (<stdin>)" in result.stderr


def test_the_examples_are_package_data():
    """The package's configs/ folder is the repository's, and the wheel ships its YAML files
    (checked by hand with a non-editable install; this keeps the two declarations)."""
    from topictk.config.template import EXAMPLES

    assert EXAMPLES.resolve() == (REPO / "configs").resolve()
    assert EXAMPLES.parent.name == "topictk"
    pyproject = (REPO / "pyproject.toml").read_text()
    declared = pyproject.split("[tool.setuptools.package-data]")[1].split("\n[")[0]
    assert 'topictk = ["configs/*.yaml"]' in declared


def test_a_sweep_reads_its_config_from_stdin_once(tmp_path, example_store, monkeypatch):
    text = ok("config", "gibbs", "--corpus", example_store, "--topics", "3").stdout
    monkeypatch.chdir(tmp_path)
    _train_from_stdin(text, "--set", "inference.iterations=2", "--quiet",
                      "--sweep", "training.seed=1,2")
    assert sorted(p.name for p in (tmp_path / "runs" / "gibbs").iterdir()) == [
        "training.seed=1", "training.seed=2"]
