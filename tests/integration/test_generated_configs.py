"""Configs written by ``topictk config`` use what they configure: DMR learns its metadata
weights, a mini-batch run covers an epoch, and a run whose held-out curve rises says so."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
import yaml

from tests.integration._cli import ok, run
from topictk.cli import config as config_command
from topictk.config.template import GENERATED
from topictk.inference.registry import algorithm_names, get_driver
from topictk.rundir import checkpoint as ckpt

MINI_BATCH = [name for name in algorithm_names() if "batch_size" in get_driver(name).OPTIONS]
NEVER = "is never"          # the DMR warnings: "nu is never optimised / sampled"


def _generate(tmp_path, algorithm: str, *args) -> tuple[dict, str]:
    path = tmp_path / f"{algorithm}.yaml"
    ok("config", algorithm, *[str(a) for a in args], "--out", path, "--force")
    text = path.read_text(encoding="utf-8")
    return yaml.safe_load(text), str(path)


def _nu(run_dir) -> np.ndarray:
    return ckpt.load_arrays(run_dir / "model.npz")[1]["nu"]


@pytest.mark.parametrize("algorithm,hold", [("dmr-sem", "inference.optimize_burn_in=100000"),
                                            ("dmr-sgrld", "inference.nu_burn_in=100000")])
def test_generated_dmr_configs_learn_their_weights(algorithm, hold, tmp_path, meta_store):
    data, path = _generate(tmp_path, algorithm, "--corpus", meta_store, "--topics", "6")
    trained = run("train", "--config", path, "--out", tmp_path / "learnt", "-q")
    assert trained.exit_code == 0, trained.stderr
    assert NEVER not in trained.stderr
    # the same chain with nu held where it starts: the generated schedule moved it
    held = run("train", "--config", path, "--out", tmp_path / "held", "--set", hold, "-q")
    assert held.exit_code == 0 and NEVER in held.stderr
    assert not np.array_equal(_nu(tmp_path / "learnt"), _nu(tmp_path / "held"))
    assert data["inference"]["iterations"] == {"dmr-sem": 100, "dmr-sgrld": 2000}[algorithm]


@pytest.mark.parametrize("algorithm", MINI_BATCH)
def test_a_generated_mini_batch_config_covers_an_epoch(algorithm, tmp_path, example_store,
                                                       monkeypatch):
    own_inference = GENERATED.get(algorithm, {}).get("inference", {})
    batch = own_inference.get("batch_size", get_driver(algorithm).OPTIONS["batch_size"].default)
    own = own_inference.get("iterations", 100)
    epochs = GENERATED.get(algorithm, {}).get("epochs", 1)
    batches = GENERATED.get(algorithm, {}).get("batches")
    small, _ = _generate(tmp_path, algorithm, "--corpus", example_store)
    assert small["inference"]["iterations"] == own        # 307 documents: many epochs already
    assert small["inference"]["batch_size"] == batch
    documents = (own + 50) * batch + 1                     # more than those updates' documents
    monkeypatch.setattr(config_command, "store_counts",
                        lambda corpus: {"train_documents": documents})
    large, _ = _generate(tmp_path, algorithm, "--corpus", example_store)
    iterations, size = large["inference"]["iterations"], large["inference"]["batch_size"]
    assert size == (batch if batches is None else max(batch, math.ceil(documents / batches)))
    assert iterations == math.ceil(epochs * documents / size)
    assert iterations * size >= epochs * documents
    text = ok("config", algorithm).stdout        # no store: the comment says what an epoch is
    assert "one epoch is (training documents / batch_size) updates" in text


def test_batch_algorithms_keep_their_generated_iterations(tmp_path, example_store, monkeypatch):
    monkeypatch.setattr(config_command, "store_counts",
                        lambda corpus: {"train_documents": 1_000_000})
    for algorithm in ("gibbs", "vb", "cvb0"):
        data, _ = _generate(tmp_path, algorithm, "--corpus", example_store)
        assert data["inference"]["iterations"] == 100


def test_the_algorithms_with_values_of_their_own_write_them(tmp_path, example_store):
    """sgrld and dmr-sgrld train 2,000 updates, dlda-sgrld 600 of 32 documents, cvb has beta
    0.1, the exp-digamma VB family alpha 0.5 (hsvg with kappa 0.8); the others the shared
    values (docs/train.md says why)."""
    written = {}
    for algorithm in algorithm_names():
        data, _ = _generate(tmp_path, algorithm, "--corpus", example_store)
        written[algorithm] = (data["inference"]["iterations"], data["model"].get("beta"),
                              data["model"].get("alpha"), data["inference"].get("batch_size"),
                              data["inference"].get("kappa"))
    assert written["sgrld"][0] == written["dmr-sgrld"][0] == 2000
    assert written["dlda-sgrld"][0] == 600 and written["dlda-sgrld"][3] == 32
    assert written["cvb"][1] == 0.1
    assert {written[name][0] for name in algorithm_names()
            if name not in ("sgrld", "dmr-sgrld", "dlda-sgrld")} == {100}
    assert {written[name][1] for name in ("gibbs", "vb", "cvb0", "ovb")} == {0.01}
    assert {written[name][2] for name in ("vb", "ovb", "hsvg", "pem")} == {0.5}
    assert {written[name][2] for name in ("gibbs", "cvb", "cvb0")} == {0.1}
    assert written["hsvg"][4] == 0.8 and written["ovb"][4] == 0.7


def test_generated_mini_batch_values_at_the_size_of_20_newsgroups(tmp_path, example_store,
                                                                  monkeypatch):
    """11,257 training documents: online VB and hsvg train 20 epochs of at most 20 updates
    each, the deep LDA samplers 10 epochs (docs/train.md gives their scores against Gibbs);
    deep LDA's point perplexity runs at the last update only."""
    monkeypatch.setattr(config_command, "store_counts",
                        lambda corpus: {"train_documents": 11_257})
    written = {}
    for algorithm in MINI_BATCH:
        data, _ = _generate(tmp_path, algorithm, "--corpus", example_store)
        inference = data["inference"]
        written[algorithm] = (inference["iterations"], inference["batch_size"])
        if "point_perplexity" in inference:
            assert inference["point_perplexity"]["every"] == inference["iterations"]
    assert written == {"ovb": (400, 563), "hsvg": (400, 563), "sgrld": (2000, 64),
                       "dmr-sgrld": (2000, 64), "tlasgr": (563, 200), "tlfsgr": (563, 200),
                       "dlda-sgrld": (3518, 32)}


def test_a_point_perplexity_at_the_last_update_only_leaves_the_score(tmp_path, example_store):
    """Deep LDA's score is its persistent test chain's, which the point perplexities do not
    touch: the generated every = iterations scores as every evaluation's would, and its NaN
    points between are no rising curve."""
    data, path = _generate(tmp_path, "tlasgr", "--corpus", example_store, "--topics", "5")
    assert data["inference"]["point_perplexity"]["every"] == data["inference"]["iterations"]
    scores, warnings = [], []
    for name, every in (("last", None), ("each", "0")):
        extra = [] if every is None else ["--set", f"inference.point_perplexity.every={every}"]
        trained = run("train", "--config", path, "--out", tmp_path / name, "--set",
                      "inference.iterations=80", "--set", "training.seed=3", "-q", *extra)
        assert trained.exit_code == 0, trained.stderr
        warnings.append(trained.stderr)
        shown = json.loads(ok("evaluate", tmp_path / name, "--json", "-q").stdout)
        scores.append(shown["perplexity"])
    assert scores[0] == scores[1] and math.isfinite(scores[0])
    assert "perplexity rose" not in warnings[0]


def test_a_rising_held_out_curve_is_reported(tmp_path, example_store):
    # online VB with many topics and a small alpha (0.1, not the generated 0.5) for this small
    # corpus: the curve is best early, then rises
    _, path = _generate(tmp_path, "ovb", "--corpus", example_store, "--topics", "40")
    trained = run("train", "--config", path, "--out", tmp_path / "rises",
                  "--set", "inference.iterations=300", "--set", "model.alpha=0.1")
    assert trained.exit_code == 0, trained.stderr
    warnings = [line for line in trained.stderr.splitlines() if "perplexity rose" in line]
    assert len(warnings) == 1 and warnings[0].startswith(f"topictk: {tmp_path / 'rises'}: ")
    shown = ok("evaluate", tmp_path / "rises").stdout
    assert [line for line in shown.splitlines() if line.startswith("curve:")]
    # the same run stopped at its best does not warn
    calm = run("train", "--config", path, "--out", tmp_path / "calm",
                "--set", "inference.iterations=60", "--set", "model.alpha=0.1")
    assert calm.exit_code == 0 and "perplexity rose" not in calm.stderr
    assert not [line for line in ok("evaluate", tmp_path / "calm").stdout.splitlines()
                if line.startswith("curve:")]
