"""``topictk evaluate --left-to-right``: the left-to-right estimator (docs/algorithms.md §11.3)
beside
document completion, for every kind of run it applies to."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
import yaml

from tests.integration._cli import fails, ok, run, write_config


@pytest.fixture(scope="module")
def gibbs_run(tmp_path_factory, example_store):
    directory = tmp_path_factory.mktemp("l2r")
    config = write_config(directory, example_store, training={"eval_every": 0})
    ok("train", "--config", config, "--quiet")
    return directory / "run"


def test_evaluate_left_to_right(gibbs_run):
    first = json.loads(ok("evaluate", gibbs_run, "--json", "--left-to-right",
                          "--particles", "3").stdout)
    assert first["left_to_right_particles"] == 3 and first["left_to_right_samples"] == 2
    ppl, completion = first["perplexity_left_to_right"], first["perplexity"]
    assert np.isfinite(ppl) and ppl > 1
    # the two estimators score the same model on the same tokens: close, not equal
    assert ppl != completion and abs(math.log(ppl / completion)) < 0.25
    again = json.loads(ok("evaluate", gibbs_run, "--json", "--left-to-right", "--particles",
                          "3", "--threads", "2").stdout)
    assert again["perplexity_left_to_right"] == ppl
    plain = json.loads(ok("evaluate", gibbs_run, "--json").stdout)
    assert "perplexity_left_to_right" not in plain and plain["perplexity"] == completion
    text = ok("evaluate", gibbs_run, "--left-to-right", "--particles", "3").stdout
    assert f"left-to-right perplexity: {ppl:.3f}  (3 particles, 2 sample(s))" in text


def test_particles_without_the_estimator_is_a_usage_error(gibbs_run):
    message = fails(2, "evaluate", gibbs_run, "--particles", "5")
    assert "--left-to-right" in message
    outcome = run("evaluate", gibbs_run, "--left-to-right", "--particles", "0")
    assert outcome.exit_code == 2 and "'--particles': 0 is not in the range" in outcome.stderr


def family_config(directory, store, model: dict, inference: dict):
    """``write_config``'s experiment with its model and inference sections replaced."""
    config = write_config(directory, store, training={"eval_every": 0, "checkpoint_every": 0})
    data = yaml.safe_load(config.read_text())
    data["model"], data["inference"] = model, inference
    config.write_text(yaml.safe_dump(data, sort_keys=False))
    return config


LDA = {"topics": 6, "alpha": 0.1, "beta": 0.01}
POINT = {"iterations": 4, "last": 2, "thin": 1, "every": 100}
FAMILIES = {
    "vb": ({**LDA, "alpha": "auto"}, {"algorithm": "vb", "iterations": 5}),
    "cvb0": (LDA, {"algorithm": "cvb0", "iterations": 5}),
    "ovb": (LDA, {"algorithm": "ovb", "iterations": 10, "batch_size": 32}),
    "hsvg": (LDA, {"algorithm": "hsvg", "iterations": 10, "batch_size": 32}),
    "sgrld": (LDA, {"algorithm": "sgrld", "iterations": 20, "batch_size": 64, "burn_in": 10,
                    "samples": 3}),
    "pem": ({**LDA, "alpha": "auto"}, {"algorithm": "pem", "iterations": 5, "particles": 2}),
    "dlda-gibbs, one layer": ({"family": "dlda", "layers": [6]},
                              {"algorithm": "dlda-gibbs", "iterations": 4, "burn_in": 2,
                               "point_perplexity": POINT}),
}


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_every_family_with_a_dirichlet_theta_is_scored(tmp_path, example_store, name):
    """Each algorithm hands the estimator its phi-hat and alpha (§11.3): the left-to-right
    perplexity is finite and near the document-completion one of the same run."""
    config = family_config(tmp_path, example_store, *FAMILIES[name])
    ok("train", "--config", config, "--quiet")
    result = json.loads(ok("evaluate", tmp_path / "run", "--json", "--left-to-right",
                           "--particles", "2").stdout)
    ppl = result["perplexity_left_to_right"]
    assert np.isfinite(ppl) and abs(math.log(ppl / result["perplexity"])) < 0.3, result


def test_deep_network_is_refused_with_the_reason(tmp_path, example_store):
    config = family_config(tmp_path, example_store, {"family": "dlda", "layers": [6, 3]},
                           {"algorithm": "dlda-gibbs", "iterations": 4, "burn_in": 2,
                            "point_perplexity": POINT})
    ok("train", "--config", config, "--quiet")
    message = fails(2, "evaluate", tmp_path / "run", "--left-to-right")
    assert "2-layer" in message and "Dirichlet prior on theta" in message
    ok("evaluate", tmp_path / "run")                 # the default estimator still works
