"""The whole pipeline through the command line: prepare -> train -> evaluate -> topics."""
from __future__ import annotations

import json
import math
import subprocess
import sys

import numpy as np
import yaml

from tests.integration._cli import (
    EXAMPLE,
    REPO,
    comparable_metrics,
    metrics,
    model_arrays,
    ok,
    write_config,
)
from topictk.numbering import topic_row


def test_prepare_train_evaluate_topics(tmp_path):
    store = tmp_path / "store"
    out = ok("prepare", EXAMPLE, "--out", store, "--seed", "0")
    assert out.stdout.splitlines() == [
        f"corpus store: {store}",
        "documents:    307 train, 34 test (341 read; empty after filtering: 0 train, 0 test "
        "dropped)",
        *out.stdout.splitlines()[2:4],
        "split:        seed 0, test docs 0.1, held-out fraction 0.2",
    ]
    manifest = json.loads((store / "manifest.json").read_text())
    V = manifest["counts"]["vocabulary"]
    assert out.stdout.splitlines()[2] == f"vocabulary:   {V:,} words"
    assert V > 1000

    config = write_config(tmp_path, store, inference={"iterations": 60, "burn_in": 30, "thin": 10})
    trained = ok("train", "--config", config, "-q")
    run_dir = tmp_path / "run"
    assert trained.stdout.startswith(f"{run_dir}: step 60, point perplexity ")
    assert sorted(p.name for p in run_dir.iterdir()) == [
        ".topictk.lock", "checkpoints", "config.yaml", "metrics.jsonl", "model.npz", "samples",
        "topictk-run.json"]
    assert (run_dir / ".topictk.lock").read_text() == ""    # emptied when released
    assert [s["step"] for s in metrics(run_dir)] == [10, 20, 30, 40, 50, 60]
    assert sorted(p.name for p in (run_dir / "samples").iterdir()) == [
        "step-00000040.npz", "step-00000050.npz", "step-00000060.npz"]
    header, arrays = model_arrays(run_dir)
    assert header["status"] == "completed" and header["state"]["step"] == 60
    assert header["state"]["sample_steps"] == [40, 50, 60]
    assert arrays["nkw"].shape == (V, 6)
    assert arrays["nk"].sum() == manifest["counts"]["train_tokens"]

    evaluated = ok("evaluate", run_dir, "--json")
    result = json.loads(evaluated.stdout)
    for key in ("perplexity", "umass", "npmi", "diversity"):
        assert isinstance(result[key], float) and math.isfinite(result[key]), key
    assert 1 < result["perplexity"] < V
    assert result["heldout_tokens"] == manifest["counts"]["test_heldout_tokens"]
    assert result["samples"] == 3 and result["step"] == 60 and result["topics"] == 6
    assert result["umass"] < 0 and -1 <= result["npmi"] <= 1 and 0 < result["diversity"] <= 1
    # evaluation is deterministic
    assert json.loads(ok("evaluate", run_dir, "--json").stdout) == result
    text = ok("evaluate", run_dir).stdout
    ppl, held = result["perplexity"], result["heldout_tokens"]
    assert f"perplexity:  {ppl:.3f}  ({held:,} held-out tokens, 3 sample(s))" in text

    # topics: text, tsv, json agree with one another and with the model
    as_json = json.loads(ok("topics", run_dir, "--top", "5", "--format", "json").stdout)["topics"]
    assert [t["topic"] for t in as_json] == [1, 2, 3, 4, 5, 6]       # numbered from 1
    vocab = (store / "vocab.txt").read_text(encoding="utf-8").splitlines()
    phi = (arrays["nkw"] + 0.01) / (arrays["nk"] + V * 0.01)          # (V, K)
    for t in as_json:
        probs = [w["probability"] for w in t["words"]]
        assert len(probs) == 5 and probs == sorted(probs, reverse=True)
        k = topic_row(t["topic"], 6)
        top = np.argsort(-phi[:, k], kind="stable")[:5]
        assert [w["word"] for w in t["words"]] == [vocab[i] for i in top]
        np.testing.assert_allclose(probs, phi[top, k], rtol=1e-12)
    tsv = ok("topics", run_dir, "--top", "5", "--format", "tsv").stdout.splitlines()
    assert tsv[0] == "topic\trank\tword\tprobability"
    assert len(tsv) == 1 + 6 * 5
    first = tsv[1].split("\t")
    assert first[:3] == ["1", "1", as_json[0]["words"][0]["word"]]       # topic 1, rank 1
    assert float(first[3]) == float(f"{as_json[0]['words'][0]['probability']:.6g}")
    score, blank, *lines = ok("topics", run_dir, "--top", "3").stdout.splitlines()
    assert score.startswith("held-out perplexity") and blank == ""
    assert len(lines) == 6
    w = as_json[2]["words"]
    assert lines[2] == "  3  " + " ".join(f"{x['word']}({x['probability']:.3f})" for x in w[:3])


def test_metrics_record_the_documented_fields(tmp_path, example_store):
    config = write_config(tmp_path, example_store, inference={"iterations": 20, "burn_in": 10,
                                                             "thin": 5})
    ok("train", "--config", config, "-q")
    records = metrics(tmp_path / "run")
    manifest = json.loads((example_store / "manifest.json").read_text())
    tokens = manifest["counts"]["train_tokens"]
    docs = manifest["counts"]["train_documents"]
    assert [(r["step"], r["tokens_seen"], r["documents_seen"]) for r in records] == [
        (10, 10 * tokens, 10 * docs), (20, 20 * tokens, 20 * docs)]
    for r in records:
        assert r["train_seconds"] > 0 and r["eval_seconds"] >= 0
        assert math.isfinite(r["perplexity_point"]) and r["log_joint_per_token"] < 0
        assert r["fallbacks"] == 0
    # the log joint rises as the chain leaves its random start
    assert records[1]["log_joint_per_token"] > records[0]["log_joint_per_token"]


def test_same_seed_same_run_and_other_seed_another(tmp_path, example_store):
    runs = {}
    for name, seed in (("a", 5), ("b", 5), ("c", 6)):
        config = write_config(tmp_path, example_store, name=f"{name}.yaml",
                              output=str(tmp_path / name), training={"seed": seed},
                              inference={"iterations": 20, "burn_in": 10, "thin": 5})
        ok("train", "--config", config, "-q")
        runs[name] = (model_arrays(tmp_path / name)[1], comparable_metrics(tmp_path / name))
    for key in runs["a"][0]:
        assert np.array_equal(runs["a"][0][key], runs["b"][0][key])
    assert runs["a"][1] == runs["b"][1]
    assert not np.array_equal(runs["a"][0]["z"], runs["c"][0]["z"])
    assert runs["a"][1] != runs["c"][1]


def test_python_m_topictk_help():
    proc = subprocess.run([sys.executable, "-m", "topictk", "--help"], capture_output=True,
                          text=True, cwd=REPO, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("Usage: topictk [OPTIONS] COMMAND [ARGS]...")
    for command in ("prepare", "train", "evaluate", "topics"):
        assert f"  {command} " in proc.stdout
    assert proc.stderr == ""
    version = subprocess.run([sys.executable, "-m", "topictk", "--version"], capture_output=True,
                             text=True, cwd=REPO, timeout=120)
    from topictk import __version__
    assert version.stdout.strip() == f"topictk, version {__version__}"


def test_every_command_has_help():
    for command in ("prepare", "train", "evaluate", "topics"):
        out = ok(command, "--help").stdout
        assert out.startswith(f"Usage: cli {command} [OPTIONS]") or out.startswith(
            f"Usage: topictk {command} [OPTIONS]")


def test_resolved_config_of_a_cli_run(tmp_path, example_store):
    config = write_config(tmp_path, example_store, inference={"iterations": 10, "burn_in": 5,
                                                             "thin": 5})
    ok("train", "--config", config, "-q", "--set", "model.topics=3", "--set", "model.beta=1e-2")
    written = yaml.safe_load((tmp_path / "run" / "config.yaml").read_text())
    assert written["model"] == {"family": "lda", "topics": 3, "alpha": 0.1, "beta": 0.01}
    assert written["corpus"] == str(example_store.resolve())
    # threads: auto (the default) is recorded as the number the run used
    from topictk.limits import available_cores
    assert written["training"]["threads"] == available_cores()
    assert written["inference"]["sampler"] == "auto" and written["inference"]["blocks"] == "auto"
