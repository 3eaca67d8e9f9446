"""``inference.sampler: mh`` through ``topictk train`` (docs/algorithms.md §2.7): resumed
equals uninterrupted (the tables rebuilt from the saved table_z), one thread equals two, the
config checks and the warning for more topics than tokens."""
from __future__ import annotations

import numpy as np
import pytest

from tests.integration._cli import (
    assert_same_run,
    assert_same_arrays,
    fails,
    metrics,
    model_arrays,
    ok,
    write_config,
)
from topictk.rundir.checkpoint import load_arrays


@pytest.mark.parametrize("rebuild", [1, 3])
def test_resumed_mh_chain_equals_uninterrupted(tmp_path, example_store, rebuild):
    """Stopped at step 20, which with mh_rebuild = 3 is inside an interval: the tables of
    step 18 come back from the checkpoint's table_z."""
    inference = {"iterations": 40, "burn_in": 10, "thin": 10, "sampler": "mh",
                 "mh_rebuild": rebuild}
    training = {"eval_every": 10, "checkpoint_every": 10}
    straight = write_config(tmp_path, example_store, name="straight.yaml",
                            output=str(tmp_path / "straight"), inference=inference,
                            training=training)
    ok("train", "--config", straight, "-q")
    halves = write_config(tmp_path, example_store, name="halves.yaml",
                          output=str(tmp_path / "halves"), inference=inference,
                          training=training)
    ok("train", "--config", halves, "-q", "--set", "inference.iterations=20")
    saved = load_arrays(tmp_path / "halves" / "checkpoints" / "step-00000020.npz")[1]
    assert ("table_z" in saved) == (rebuild > 1), sorted(saved)
    ok("train", "--config", halves, "--resume", "-q")
    assert_same_run(tmp_path / "straight", tmp_path / "halves")
    assert {m["sampler"] for m in metrics(tmp_path / "halves")} == {"mh"}


def test_mh_one_thread_equals_two_threads(tmp_path, example_store):
    for threads in (1, 2):
        config = write_config(tmp_path, example_store, name=f"t{threads}.yaml",
                              output=str(tmp_path / f"t{threads}"),
                              inference={"iterations": 20, "burn_in": 10, "thin": 10,
                                         "chunks": 3, "sampler": "mh"},
                              training={"threads": threads})
        ok("train", "--config", config, "-q")
    assert_same_run(tmp_path / "t1", tmp_path / "t2")
    assert np.isfinite(metrics(tmp_path / "t1")[-1]["perplexity_point"])


def test_mh_learns_topics(tmp_path, example_store):
    """The MH chain lowers held-out perplexity like the exact sampler does."""
    config = write_config(tmp_path, example_store,
                          inference={"iterations": 60, "burn_in": 30, "thin": 10,
                                     "sampler": "mh"},
                          training={"eval_every": 5, "checkpoint_every": 60})
    ok("train", "--config", config, "-q")
    perplexity = [m["perplexity_point"] for m in metrics(tmp_path / "run")]
    assert perplexity[-1] < 0.9 * perplexity[0]


@pytest.mark.parametrize("key,value,message", [
    ("mh_steps", 0, "inference.mh_steps must be an integer >= 1 or null; got 0"),
    ("mh_rebuild", 9, "inference.mh_rebuild must be an integer in [1, 8] or null; got 9"),
    ("sampler", "alias", ("inference.sampler must be one of sparse, dense, mh, warp, auto or "
                         "null; got 'alias'")),
])
def test_bad_mh_settings_are_config_errors(tmp_path, example_store, key, value, message):
    config = write_config(tmp_path, example_store,
                          inference={"sampler": "mh", key: value})
    assert message in fails(2, "train", "--config", config)


def test_more_topics_than_tokens_is_a_warning(tmp_path, example_store):
    config = write_config(tmp_path, example_store, model={"topics": 60000},
                          inference={"iterations": 2, "burn_in": 1, "thin": 1,
                                     "sampler": "mh"},
                          training={"eval_every": 2, "checkpoint_every": 2})
    out = ok("train", "--config", config)
    assert "training tokens: most topics stay empty" in out.stderr
    assert np.isfinite(metrics(tmp_path / "run")[-1]["perplexity_point"])


def test_auto_is_the_default_below_the_crossover_and_mh_from_it(tmp_path, example_store,
                                                                 monkeypatch):
    """Below MH_FROM_K ``sampler: auto`` runs exactly today's default chain; from it, mh."""
    from topictk.inference.gibbs import driver as gibbs
    monkeypatch.setattr(gibbs, "MH_FROM_K", 8)
    runs = {}
    for name, topics, sampler in (("default", 6, None), ("auto6", 6, "auto"),
                                  ("auto8", 8, "auto"), ("mh8", 8, "mh")):
        config = write_config(tmp_path, example_store, name=f"{name}.yaml",
                              output=str(tmp_path / name), model={"topics": topics},
                              inference={"iterations": 6, "burn_in": 3, "thin": 3,
                                         "sampler": sampler},
                              training={"eval_every": 3, "checkpoint_every": 6})
        ok("train", "--config", config, "-q")
        runs[name] = tmp_path / name
    assert_same_arrays(model_arrays(runs["default"])[1], model_arrays(runs["auto6"])[1])
    assert {m["sampler"] for m in metrics(runs["auto6"])} == {"sparse"}
    assert_same_arrays(model_arrays(runs["auto8"])[1], model_arrays(runs["mh8"])[1])
    assert {m["sampler"] for m in metrics(runs["auto8"])} == {"mh"}
