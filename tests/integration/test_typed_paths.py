"""Which folder each path is relative to, and paths in messages as the user typed them: a
config's corpus and output against the config's folder, --out and a config on standard input
against the working directory, topictk config --corpus as typed (or relative to --out FILE)."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from tests.integration._cli import fails, ok
from topictk.cli import cli

SMALL = ["--set", "inference.iterations=4", "--set", "inference.burn_in=2", "-q"]


def _config(path: Path, corpus: str, output: str = "runs/a") -> Path:
    """A small Gibbs config at ``path`` whose corpus and output are written as given."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {"corpus": corpus, "output": output,
            "model": {"topics": 3},
            "inference": {"algorithm": "gibbs", "iterations": 4, "burn_in": 2},
            "training": {"seed": 1, "eval_every": 2}}
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


@pytest.fixture
def layout(tmp_path, example_store, monkeypatch):
    """tmp/exp/a.yaml names the store relative to tmp/exp; the working directory is
    tmp/work, a folder beside exp."""
    exp, work = tmp_path / "exp", tmp_path / "work"
    work.mkdir()
    config = _config(exp / "a.yaml", os.path.relpath(example_store, exp))
    monkeypatch.chdir(work)
    return tmp_path, config


def test_a_config_in_another_folder_resolves_its_paths_against_that_folder(layout):
    root, _ = layout
    outcome = ok("train", "--config", "../exp/a.yaml", *SMALL)
    assert (root / "exp" / "runs" / "a" / "model.npz").is_file()
    assert not (root / "work" / "runs").exists()
    # the run as reached from the working directory: the config's folder as typed, then output
    assert outcome.stdout.startswith("../exp/runs/a: step 4")


def test_out_is_relative_to_the_working_directory(layout):
    root, _ = layout
    outcome = ok("train", "--config", "../exp/a.yaml", "--out", "mine/run", *SMALL)
    assert (root / "work" / "mine" / "run" / "model.npz").is_file()
    assert not (root / "exp" / "mine").exists()
    assert outcome.stdout.startswith("mine/run: step 4")
    saved = yaml.safe_load((root / "work" / "mine" / "run" / "config.yaml").read_text())
    assert saved["output"] == "."           # the run can be moved


def test_a_run_s_own_config_trains_it_where_it_is_named_as_typed(layout):
    ok("train", "--config", "../exp/a.yaml", "--out", "mine", *SMALL)
    outcome = ok("train", "--config", "mine/config.yaml", "--force", "-q")
    assert outcome.stdout.startswith("mine: step 4")


def test_errors_about_the_run_directory_name_it_as_typed(layout):
    root, _ = layout
    (root / "work" / "notarun").mkdir()
    (root / "work" / "notarun" / "notes.txt").write_text("mine")
    message = fails(2, "train", "--config", "../exp/a.yaml", "--out", "notarun", *SMALL)
    assert message.startswith("notarun: holds files that are not a topictk run")
    ok("train", "--config", "../exp/a.yaml", *SMALL)
    message = fails(2, "train", "--config", "../exp/a.yaml", *SMALL)
    assert message.startswith("../exp/runs/a: output directory already holds a run")


def test_errors_about_the_store_name_it_as_typed(layout):
    root, _ = layout
    _config(root / "exp" / "b.yaml", "missing")
    message = fails(2, "train", "--config", "../exp/b.yaml", *SMALL)
    assert message.startswith("../exp/missing: ") and str(root) not in message


def test_a_sweep_names_its_runs_as_typed(layout):
    outcome = ok("train", "--config", "../exp/a.yaml", "--out", "k", "--sweep",
                 "model.topics=2,3", *SMALL)
    assert [line.split(":")[0] for line in outcome.stdout.splitlines()] == [
        "k/model.topics=2", "k/model.topics=3"]


def test_a_config_on_standard_input_resolves_against_the_working_directory(layout,
                                                                           example_store):
    root, _ = layout
    text = yaml.safe_dump({"corpus": os.path.relpath(example_store, root / "work"),
                           "output": "piped", "model": {"topics": 3},
                           "inference": {"algorithm": "gibbs", "iterations": 4, "burn_in": 2}})
    result = CliRunner().invoke(cli, ["train", "--config", "-", "-q"], input=text)
    assert result.exit_code == 0, (result.stderr, result.exception)
    assert result.stdout.startswith("piped: step 4")
    assert (root / "work" / "piped" / "model.npz").is_file()


def test_config_corpus_is_written_as_typed(layout, example_store):
    root, _ = layout
    typed = os.path.relpath(example_store, root / "work")
    assert yaml.safe_load(ok("config", "gibbs", "--corpus", typed).stdout)["corpus"] == typed
    absolute = str(example_store)
    assert yaml.safe_load(ok("config", "gibbs", "--corpus", absolute).stdout)["corpus"] == absolute


def test_config_out_writes_the_corpus_relative_to_the_file(layout, example_store):
    root, _ = layout
    typed = os.path.relpath(example_store, root / "work")
    (root / "work" / "sub").mkdir()
    assert ok("config", "gibbs", "--corpus", typed, "--out", "sub/c.yaml", "-k", "3").stdout == ""
    saved = yaml.safe_load((root / "work" / "sub" / "c.yaml").read_text())
    assert saved["corpus"] == os.path.relpath(example_store, root / "work" / "sub")
    assert saved["corpus"] != typed
    outcome = ok("train", "--config", "sub/c.yaml", *SMALL)
    assert outcome.stdout.startswith("sub/runs/gibbs: step 4")
    message = fails(2, "config", "gibbs", "--corpus", typed, "--out", "sub/c.yaml")
    assert message == "sub/c.yaml: exists; add --force to replace it, or choose another --out"
    ok("config", "vb", "--corpus", typed, "--out", "sub/c.yaml", "--force")
    assert yaml.safe_load((root / "work" / "sub" / "c.yaml").read_text())[
        "inference"]["algorithm"] == "vb"


def test_the_report_names_runs_as_typed(layout):
    root, _ = layout
    ok("train", "--config", "../exp/a.yaml", "--out", "r1", *SMALL)
    ok("train", "--config", "../exp/a.yaml", *SMALL)
    ok("report", "r1", "../exp/runs/a", "-o", "page.html", "-q")
    page = (root / "work" / "page.html").read_text()
    assert '<a href="#run-0">r1</a>' in page
    assert '<a href="#run-1">../exp/runs/a</a>' in page


def test_resuming_names_the_run_as_typed(layout):
    root, _ = layout
    ok("train", "--config", "../exp/a.yaml", "--out", "mine", "--set",
       "training.checkpoint_every=2", *SMALL)
    outcome = ok("train", "--config", "mine/config.yaml", "--resume", "--set",
                 "inference.iterations=6")
    assert "resuming mine from step 4" in outcome.stderr
    assert str(root) not in outcome.stderr + outcome.stdout



def test_the_report_and_seed_file_errors_show_paths_under_the_working_directory_relative(
        layout, tmp_path, monkeypatch):
    root, _ = layout
    monkeypatch.chdir(root)
    ok("train", "--config", "exp/a.yaml", "--out", "r1", *SMALL)
    ok("report", "r1", "-o", "page.html", "-q")
    assert '<a href="#run-0">r1</a>' in (root / "page.html").read_text()
    (root / "exp" / "seeds.txt").write_text("sport\n", encoding="utf-8")
    message = fails(2, "train", "--config", "exp/a.yaml", "--out", "r2",
                    "--set", "model.seed_file=seeds.txt", *SMALL)
    assert message.startswith("exp/seeds.txt:1: label 'sport' has no words"), message


def test_shown_paths(tmp_path, monkeypatch):
    from topictk._fileio import shown

    inside, outside = tmp_path / "work", tmp_path / "elsewhere"
    (inside / "store").mkdir(parents=True)
    monkeypatch.chdir(inside)
    assert shown(inside / "store") == "store"
    assert shown(str(outside / "store")) == str(outside / "store")    # not ../elsewhere/...
    assert shown("a/../b") == "b"
