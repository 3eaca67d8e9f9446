"""``topictk train --sweep``: one run per setting, every setting checked before any training,
resumable as a whole; ``compare`` on the sweep's folder."""
from __future__ import annotations

import json

import pytest
import yaml

from tests.integration._cli import (
    assert_same_arrays,
    fails,
    model_arrays,
    ok,
    snapshot,
    write_config,
)
from topictk.training.sweep import folder_name, parse_sweep, split_values

SHORT = {"inference": {"iterations": 20, "burn_in": 10, "thin": 5},
         "training": {"seed": 5, "eval_every": 10, "checkpoint_every": 10,
                      "keep_checkpoints": 5}}


def test_sweep_trains_the_cartesian_product_into_named_folders(tmp_path, example_store):
    config = write_config(tmp_path, example_store, **SHORT)
    out = ok("train", "--config", config, "--sweep", "model.topics=3,5",
             "--sweep", "training.seed=1,2", "--quiet", "--out", tmp_path / "k").stdout
    names = ["model.topics=3,training.seed=1", "model.topics=3,training.seed=2",
             "model.topics=5,training.seed=1", "model.topics=5,training.seed=2"]
    assert sorted(p.name for p in (tmp_path / "k").iterdir()) == names
    assert len(out.splitlines()) == 4
    for name in names:
        saved = (tmp_path / "k" / name / "config.yaml").read_text()
        topics, seed = (int(part.split("=")[1]) for part in name.split(","))
        assert f"topics: {topics}\n" in saved and f"seed: {seed}\n" in saved
        assert (tmp_path / "k" / name / "model.npz").is_file()
    rows = json.loads(ok("compare", tmp_path / "k", "--format", "json").stdout)["runs"]
    assert sorted(r["run"] for r in rows) == names
    assert {r["run"]: r["topics"] for r in rows} == {n: n.split(",")[0][-1] for n in names}


def test_sweep_resume_finishes_unfinished_runs_and_skips_finished_ones(tmp_path,
                                                                       example_store):
    config = write_config(tmp_path, example_store, **SHORT)
    sweep = ("train", "--config", config, "--sweep", "model.topics=3,4,5", "--quiet")
    ok(*sweep)
    root = tmp_path / "run"
    finished, cut, fresh = (root / f"model.topics={k}" for k in (3, 4, 5))
    whole = model_arrays(cut)[1]
    # stopped after its first checkpoint
    (cut / "model.npz").unlink()
    (cut / "checkpoints" / "step-00000020.npz").unlink()
    (cut / "samples" / "step-00000020.npz").unlink()
    # stopped before its first checkpoint: only the marker and its config
    for path in [*fresh.rglob("*.npz"), fresh / "metrics.jsonl"]:
        path.unlink()
    before = snapshot(finished)
    message = fails(2, *sweep)
    assert "already holds a run" in message and "--resume" in message
    out = ok(*sweep, "--resume").stdout.splitlines()
    assert out[0] == f"{finished}: finished; skipped"
    assert snapshot(finished) == before
    assert_same_arrays(model_arrays(cut)[1], whole)
    assert (fresh / "model.npz").is_file()
    assert all(line.endswith("skipped") for line in ok(*sweep, "--resume").stdout.splitlines())


@pytest.mark.parametrize("spec, expected", [
    ("model.topicz=3,5", "did you mean 'topics'? allowed: alpha, beta, family, "
     "residual_topic, seed_file, seed_mode, seed_weight, seed_words, topics"),
    ("model.topics=3,0", "model.topics must be an integer in [1, 1000000]; got 0 "
                         "(--sweep model.topics=0)"),
    ("inference.sparse=true,maybe",
     "inference.sparse must be true, false or auto"),
    ("output=a,b", "the sweep names the output of every run"),
    ("model.topics", "--sweep expects section.key=value1,value2"),
    ("model.topics=3,3", "a value is given twice"),
])
def test_a_bad_sweep_is_refused_before_any_training(tmp_path, example_store, spec, expected):
    config = write_config(tmp_path, example_store, **SHORT)
    message = fails(2, "train", "--config", config, "--sweep", spec, "--quiet")
    assert expected in message
    assert not (tmp_path / "run").exists()


def test_folder_names_are_safe_on_every_file_system():
    assert folder_name((("model.topics", "50"),)) == "model.topics=50"
    assert (folder_name((("model.layers", "[8, 4]"), ("training.seed", "1.")))
            == "model.layers=%5B8%2C%204%5D,training.seed=1%2E")
    assert folder_name((("a.b", 'x/y\\z:*?"<>|é'),)) == (
        "a.b=x%2Fy%5Cz%3A%2A%3F%22%3C%3E%7C%C3%A9")


def test_values_are_split_on_commas_outside_brackets_and_quotes():
    assert split_values("10,20, 50") == ["10", "20", "50"]
    assert split_values("[8,4],[16,8,4]") == ["[8,4]", "[16,8,4]"]
    assert split_values("'a,b',c") == ["'a,b'", "c"]
    assert parse_sweep(["model.layers=[8,4],[4]"]) == [("model.layers", ["[8,4]", "[4]"])]


def test_values_that_differ_only_in_case_are_refused(tmp_path, example_store):
    config = write_config(tmp_path, example_store, **SHORT)
    message = fails(2, "train", "--config", config, "--sweep", "inference.sparse=auto,AUTO")
    assert "differ only in case" in message
    assert not (tmp_path / "run").exists()


def test_sweep_of_layers_trains_deep_models(tmp_path, example_store):
    config = tmp_path / "deep.yaml"
    config.write_text(yaml.safe_dump({
        "corpus": str(example_store), "output": str(tmp_path / "run"),
        "model": {"family": "dlda", "layers": [4]},
        "inference": {"algorithm": "dlda-gibbs", "iterations": 2, "burn_in": 1,
                      "point_perplexity": {"iterations": 2, "last": 1, "thin": 1,
                                           "every": 100}},
        "training": {"seed": 1, "eval_every": 2, "checkpoint_every": 0}}))
    ok("train", "--config", config, "--sweep", "model.layers=[4],[4,2]", "--quiet")
    names = sorted(p.name for p in (tmp_path / "run").iterdir())
    assert names == ["model.layers=%5B4%2C2%5D", "model.layers=%5B4%5D"]
    rows = json.loads(ok("compare", tmp_path / "run", "--format", "json").stdout)["runs"]
    assert sorted(r["topics"] for r in rows) == ["4", "4-2"]
