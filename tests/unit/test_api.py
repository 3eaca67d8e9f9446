"""The public Python API (``topictk.api``) gives the numbers the commands give: ``evaluate``
equals ``topictk evaluate --json``, ``infer`` equals ``topictk infer``, ``prepare`` writes the
store ``topictk prepare`` writes; topics and proportions are on the simplex."""
from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
import yaml

import topictk
from tests.integration._cli import EXAMPLE, fails, ok, write_config
from topictk import api
from topictk.errors import UsageError

TEXTS = [("A list comprehension builds a list from an iterable, with a for clause and an "
          "optional if clause."),
         ("The import statement finds a module, loads it and binds its name in the local "
          "namespace."),
         "zzz qqq unknownword",          # no word of the vocabulary: the prior mean
         "Exceptions raised inside a try clause are handled by the matching except clause."]


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    out = tmp_path_factory.mktemp("api") / "store"
    api.prepare(EXAMPLE, out)
    return out


@pytest.fixture(scope="module")
def gibbs_run(store, tmp_path_factory):
    """Collapsed Gibbs with saved samples (evaluate averages over them)."""
    tmp = tmp_path_factory.mktemp("gibbs")
    ok("train", "--config", write_config(tmp, store), "--quiet")
    return tmp / "run"


@pytest.fixture(scope="module")
def point_run(store, tmp_path_factory):
    """Collapsed Gibbs whose one saved sample is its final state: evaluate scores the point
    estimate."""
    tmp = tmp_path_factory.mktemp("point")
    cfg = write_config(tmp, store, inference={"iterations": 20, "burn_in": 19, "thin": 1},
                       evaluation={"fold_in_sweeps": 50, "fold_in_burn_in": 25})
    ok("train", "--config", cfg, "--quiet")
    return tmp / "run"


@pytest.fixture(scope="module")
def ovb_run(store, tmp_path_factory):
    """Online VB: scored by its own E-step, inferred by Gibbs fold-in."""
    tmp = tmp_path_factory.mktemp("ovb")
    cfg = write_config(tmp, store)
    data = yaml.safe_load(cfg.read_text())
    data["inference"] = {"algorithm": "ovb", "iterations": 8, "batch_size": 64}
    cfg.write_text(yaml.safe_dump(data))
    ok("train", "--config", cfg, "--quiet")
    return tmp / "run"


def test_import_topictk_loads_no_kernel():
    code = ("import sys, topictk; topictk.__all__; import topictk.api; "
            "print(sorted(m for m in sys.modules if m.startswith('topictk')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "['topictk', 'topictk.api']"
    assert topictk.load_run is api.load_run
    with pytest.raises(AttributeError):
        topictk.no_such_name  # noqa: B018


def test_prepare_writes_the_store_the_command_writes(store, tmp_path):
    ok("prepare", EXAMPLE, "--out", tmp_path / "cli")
    from_cli = api.open_store(tmp_path / "cli")
    from_api = api.open_store(store)
    assert from_api.corpus_id == from_cli.corpus_id
    assert from_api.vocab == from_cli.vocab
    with pytest.raises(UsageError, match="unknown option.*test_doc"):
        api.prepare(EXAMPLE, tmp_path / "x", test_doc=0.2)


@pytest.mark.parametrize("fixture", ["gibbs_run", "ovb_run"])
def test_run_facts(fixture, request, store):
    path = request.getfixturevalue(fixture)
    run = api.load_run(path)
    assert run.algorithm == run.config.inference.algorithm == fixture.split("_")[0]
    assert run.vocabulary == api.open_store(store).vocab
    phi = run.topic_word()
    assert phi.shape == (6, len(run.vocabulary))
    assert np.all(phi >= 0)
    np.testing.assert_allclose(phi.sum(axis=1), 1.0, rtol=0, atol=1e-12)
    records = [json.loads(line) for line in (path / "metrics.jsonl").read_text().splitlines()]
    assert run.metrics() == records
    assert run.step == records[-1]["step"] == run.config.inference.iterations
    assert run.train_seconds > 0 and run.tokens_seen > 0
    assert run.status == "completed"
    assert repr(run).startswith(f"Run({str(path)!r}, {run.algorithm}, K = 6")


@pytest.mark.parametrize("fixture", ["gibbs_run", "ovb_run"])
def test_evaluate_equals_the_command(fixture, request):
    path = request.getfixturevalue(fixture)
    from_cli = json.loads(ok("evaluate", path, "--json").stdout)
    assert api.load_run(path).evaluate() == from_cli
    assert from_cli["perplexity"] > 1


def test_evaluate_of_a_checkpoint_and_left_to_right(gibbs_run):
    from_cli = json.loads(ok("evaluate", gibbs_run, "--json", "--checkpoint", "20",
                             "--left-to-right", "--particles", "3").stdout)
    run = api.load_run(gibbs_run, checkpoint=20)
    assert run.step == 20
    assert run.evaluate(left_to_right=3) == from_cli


def _cli_theta(path, tmp_path, *options) -> np.ndarray:
    lines = tmp_path / "docs.txt"
    lines.write_text("".join(t + "\n" for t in TEXTS), encoding="utf-8")
    out = ok("infer", path, lines, "--output-format", "tsv", *options).stdout.splitlines()
    return np.array([[float(x) for x in row.split("\t")[3:]] for row in out[1:]])


@pytest.mark.parametrize("fixture", ["gibbs_run", "ovb_run"])
def test_infer_equals_the_command(fixture, request, tmp_path):
    path = request.getfixturevalue(fixture)
    run = api.load_run(path)
    theta = run.infer(TEXTS)
    assert theta.shape == (len(TEXTS), 6)
    np.testing.assert_array_equal(theta, _cli_theta(path, tmp_path))
    np.testing.assert_allclose(theta.sum(axis=1), 1.0, rtol=0, atol=1e-12)
    other = run.infer([{"text": t} for t in TEXTS], sweeps=30, burn_in=10, seed=4, threads=2)
    np.testing.assert_array_equal(other, _cli_theta(path, tmp_path, "--sweeps", "30",
                                                    "--burn-in", "10", "--seed", "4"))
    # Gibbs folds in by sampling; online VB by its deterministic E-step, which no seed moves
    assert np.array_equal(other, theta) == (fixture == "ovb_run")


def test_doc_topic_folds_in_the_training_documents(gibbs_run, store):
    run = api.load_run(gibbs_run)
    theta = run.doc_topic()
    train = api.open_store(store).train()
    assert theta.shape == (train.n_docs, 6)
    np.testing.assert_allclose(theta.sum(axis=1), 1.0, rtol=0, atol=1e-12)
    # the training documents' own text, inferred as new documents, gets the same rows: the
    # store keeps each document's tokens in text order
    lines = EXAMPLE.read_text(encoding="utf-8").splitlines()
    ids = (store / "train_ids.txt").read_text().splitlines()      # FILE:LINE
    texts = [lines[int(i.rsplit(":", 1)[1]) - 1] for i in ids]
    np.testing.assert_array_equal(theta, run.infer(texts))
    assert not np.array_equal(run.doc_topic(seed=99), theta)


def test_doc_topic_of_the_test_documents_and_fold_in_of_any_topics(point_run, store):
    run = api.load_run(point_run)       # one phi-hat, no saved samples to average over
    test = api.open_store(store).test_observed()
    theta = run.doc_topic(split="test")
    assert theta.shape == (test.n_docs, 6)
    # the same fold-in over the run's own topics and alpha, from anywhere: the same rows
    alpha, seed = float(run.config.model.alpha), run.config.training.seed
    np.testing.assert_array_equal(api.fold_in(store, run.topic_word(), alpha, seed=seed), theta)
    # other topics, other rows; training documents on request
    flat = np.ones_like(run.topic_word())
    assert not np.array_equal(api.fold_in(store, flat, alpha, seed=seed), theta)
    np.testing.assert_array_equal(api.fold_in(store, run.topic_word(), alpha, split="train",
                                              seed=seed), run.doc_topic())
    with pytest.raises(ValueError, match="split must be 'train' or 'test'"):
        run.doc_topic(split="held-out")


def test_score_topic_word_is_the_point_evaluation(point_run, store):
    run = api.load_run(point_run)
    expected = run.evaluate()
    assert expected["samples"] == 1 and run.config.training.seed == 5
    got = api.score_topic_word(store, run.topic_word(), 0.1, seed=5, coherence=True)
    for key in ("perplexity", "heldout_tokens", "umass", "npmi", "diversity"):
        assert got[key] == expected[key], key
    assert api.score_topic_word(str(store), run.topic_word() * 3, np.full(6, 0.1),
                                seed=5)["perplexity"] == pytest.approx(expected["perplexity"])


def test_fixed_point_fold_in_is_declared_cached_apart_and_matches_score_topic_word(
        point_run, store):
    """A run scored with gibbs, then asked for fixed-point, is scored again (not the cached
    gibbs number), and each result names its estimator; score_topic_word's fold_in= gives the
    same fixed-point number for the same topics."""
    run = api.load_run(point_run)
    gibbs = run.evaluate()
    assert gibbs["estimator"] == "gibbs"
    fixed = run.evaluate(fold_in="fixed-point")
    assert fixed["estimator"] == "fixed-point"
    assert fixed["perplexity"] != gibbs["perplexity"]
    again = run.evaluate(fold_in="fixed-point")
    assert again == fixed                                 # now from the cache, same number
    assert run.evaluate() == gibbs                        # the gibbs entry is kept
    from_cli = json.loads(ok("evaluate", point_run, "--json", "--fold-in",
                             "fixed-point").stdout)
    assert from_cli == fixed
    got = api.score_topic_word(store, run.topic_word(), 0.1, fold_in="fixed-point")
    assert got["estimator"] == "fixed-point"
    assert got["perplexity"] == fixed["perplexity"]
    assert api.score_topic_word(store, run.topic_word(), 0.1, seed=5)["estimator"] == "gibbs"
    with pytest.raises(UsageError, match="fold_in must be one of gibbs, fixed-point"):
        api.score_topic_word(store, run.topic_word(), 0.1, fold_in="mh")


def test_fixed_point_scores_below_the_gibbs_fold_in_on_the_example(point_run, store):
    """The expected direction (docs/evaluate.md, 'Two estimators of theta'): on a real model
    of the example corpus the fixed-point theta gives a lower document-completion perplexity
    than the Gibbs fold-in's, whatever the fold-in's seed, and the two are not equal."""
    phi = api.load_run(point_run).topic_word()
    fixed = api.score_topic_word(store, phi, 0.1, fold_in="fixed-point")["perplexity"]
    gibbs = [api.score_topic_word(store, phi, 0.1, seed=seed)["perplexity"]
             for seed in range(3)]
    assert all(fixed < g for g in gibbs), (fixed, gibbs)
    # deterministic: no seed, same number at 1 and 2 threads
    assert api.score_topic_word(store, phi, 0.1, fold_in="fixed-point",
                                threads=2)["perplexity"] == fixed


def test_score_topic_word_averages_samples_as_evaluate_does(gibbs_run, store):
    """A run's saved samples, given as a list, are scored as ``topictk evaluate`` scores
    them: probabilities averaged over the samples."""
    run = api.load_run(gibbs_run)
    expected = run.evaluate()
    steps = sorted(int(p.stem.split("-")[1]) for p in (gibbs_run / "samples").glob("*.npz"))
    assert len(steps) == expected["samples"] == 2
    phis = []
    for step in steps:
        sample = np.load(gibbs_run / "samples" / f"step-{step:08d}.npz")
        nkw = sample["a_nkw"] if "a_nkw" in sample.files else sample[sample.files[0]]
        phis.append(((nkw + 0.01) / (nkw.sum(axis=0) + nkw.shape[0] * 0.01)).T)
    got = api.score_topic_word(store, phis, 0.1, sweeps=10, burn_in=5, seed=5)
    assert got["samples"] == 2
    assert got["perplexity"] == pytest.approx(expected["perplexity"], rel=1e-9)
    with pytest.raises(UsageError, match="2 priors for 1 topic_word samples"):
        api.score_topic_word(store, [phis[0]], [0.1, 0.1])


def test_bad_input(tmp_path, gibbs_run, store):
    with pytest.raises(UsageError, match="not a run directory"):
        api.load_run(tmp_path)
    run = api.load_run(gibbs_run)
    with pytest.raises(UsageError, match="document 2: give a text"):
        run.infer(["text", 3])
    with pytest.raises(UsageError, match="--sweeps must be larger than --burn-in"):
        run.infer(TEXTS, sweeps=5, burn_in=5)
    with pytest.raises(UsageError, match=r"\(K, V\) with V = "):
        api.score_topic_word(store, np.ones((3, 4)), 0.1)
    assert "no checkpoint at step 7" in fails(2, "evaluate", gibbs_run, "--checkpoint", "7")
    with pytest.raises(UsageError, match="no checkpoint at step 7"):
        api.load_run(gibbs_run, checkpoint=7)
