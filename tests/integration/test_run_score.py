"""The run's score where people read runs: ``topictk topics`` heads its topics with
``evaluate``'s held-out perplexity (cached, or computed with ``--score``), the Python API ranks
runs as ``compare`` does, and gensim's coherence measures are cached like the perplexity."""
from __future__ import annotations

import json
import warnings

import pytest

import topictk
from tests.integration._cli import ok
from tests.integration.test_score_cache import _train
from topictk.evaluation import coherence_cache
from topictk.evaluation import run as run_module
from topictk.evaluation.scores import protocol_line
from topictk.rundir.layout import SCORES_FILE


@pytest.fixture(scope="module")
def chain(tmp_path_factory, example_store):
    """One chain (the same seed and settings) stopped after 30 and after 300 sweeps."""
    folder = tmp_path_factory.mktemp("ranked")
    return {"short": _train(folder, example_store, 30), "long": _train(folder, example_store, 300)}


def test_topics_shows_evaluates_score_only_once_computed(example_store, tmp_path):
    run = _train(tmp_path, example_store, 20)
    text = ok("topics", run, "-n", "3").stdout
    first = text.splitlines()[0]
    assert first.startswith("held-out perplexity: not computed (evaluate: document completion")
    assert f"'topictk evaluate {run}' computes it, or add --score" in first
    assert text.splitlines()[2].startswith("  1  ")                # then the topics
    assert not (run / SCORES_FILE).exists()                       # nothing was computed
    data = json.loads(ok("topics", run, "--format", "json").stdout)
    assert data["score"]["perplexity"] is None and data["score"]["computed"] is False
    assert data["topics"][0]["topic"] == 1
    # the in-training estimate is never shown as the score
    last = json.loads((run / "metrics.jsonl").read_text().splitlines()[-1])
    assert f"{last['perplexity_point']:,.1f}" not in first

    evaluated = json.loads(ok("evaluate", run, "--json").stdout)
    first = ok("topics", run, "-n", "3").stdout.splitlines()[0]
    config = topictk.load_run(run).config
    assert first == (f"held-out perplexity {evaluated['perplexity']:,.1f} "
                     f"({protocol_line(config)}; {evaluated['heldout_tokens']:,} held-out "
                     f"tokens)")
    score = json.loads(ok("topics", run, "--format", "json").stdout)["score"]
    assert score["perplexity"] == evaluated["perplexity"] and score["cached"] is True
    # TSV stays a table
    assert ok("topics", run, "--format", "tsv").stdout.startswith("topic\trank\tword")


def test_topics_score_line_names_the_estimator(example_store, tmp_path):
    gibbs = _train(tmp_path, example_store, 20)
    fixed = _train(tmp_path, example_store, 20, name="fixed",
                   evaluation={"fold_in": "fixed-point"})
    for run, estimator, how in ((gibbs, "gibbs", "gibbs fold-in 20 sweeps"),
                                (fixed, "fixed-point",
                                 "fixed-point fold-in (tol 1e-06, at most 500 updates)")):
        data = json.loads(ok("topics", run, "--format", "json", "--score", "-q").stdout)
        assert data["score"]["estimator"] == estimator
        assert how in data["score"]["protocol"]
        first = ok("topics", run, "-n", "3").stdout.splitlines()[0]
        assert how in first
        evaluated = json.loads(ok("evaluate", run, "--json").stdout)
        assert evaluated["estimator"] == estimator
        lines = ok("evaluate", run).stdout.splitlines()
        assert lines[1].startswith("perplexity:  ")
        assert lines[2].startswith(f"estimator:   theta by the {estimator} fold-in ")
        assert data["score"]["perplexity"] == evaluated["perplexity"]
    # the same chain (a fold-in draws nothing from the chain's streams), scored two ways
    assert (topictk.load_run(gibbs).topic_word().tobytes()
            == topictk.load_run(fixed).topic_word().tobytes())
    asked = json.loads(ok("evaluate", gibbs, "--json", "--fold-in", "fixed-point").stdout)
    assert asked["perplexity"] == json.loads(ok("evaluate", fixed, "--json").stdout)[
        "perplexity"]


def test_topics_score_computes_and_caches(example_store, tmp_path, monkeypatch):
    run = _train(tmp_path, example_store, 20)
    score = json.loads(ok("topics", run, "--format", "json", "--score", "-q").stdout)["score"]
    assert score["computed"] is True and score["cached"] is False
    assert (run / SCORES_FILE).is_file()

    def fail(*args, **kwargs):
        raise AssertionError("scored again")

    monkeypatch.setattr(run_module, "score_loaded", fail)
    assert json.loads(ok("evaluate", run, "--json").stdout)["perplexity"] == score["perplexity"]


def test_api_ranks_runs_as_compare_and_evaluate(chain):
    truth = {name: json.loads(ok("evaluate", path, "--json").stdout)["perplexity"]
             for name, path in chain.items()}
    by_evaluate = [str(chain[n]) for n in sorted(chain, key=truth.get)]
    compared = json.loads(ok("compare", chain["short"], chain["long"], "--format",
                             "json").stdout)
    assert [r["path"] for r in compared["runs"]] == by_evaluate
    with warnings.catch_warnings():
        warnings.simplefilter("error")                  # no warning: one store, one protocol
        records = topictk.compare_runs([chain["short"], chain["long"]], quiet=True)
    assert [str(r["path"]) for r in records] == by_evaluate
    assert [r["perplexity"] for r in records] == sorted(truth.values())
    short = next(r for r in records if r["label"] == "s30")
    assert (short["algorithm"], short["topics"], short["seed"], short["iterations"]) == \
        ("gibbs", 8, 4, 30)
    assert short["protocol"] == compared["protocol"]
    # the folder of the runs gives the same order
    assert [str(r["path"]) for r in topictk.compare_runs(chain["long"].parent, quiet=True)] \
        == by_evaluate


def test_api_warns_when_the_runs_are_scored_differently(chain, tmp_path, example_store):
    other = _train(tmp_path, example_store, 30, name="other",
                   evaluation={"fold_in_sweeps": 12})
    with pytest.warns(UserWarning, match="scored differently: evaluation.fold_in_sweeps"):
        records = topictk.compare_runs([chain["short"], other], quiet=True)
    assert all(r["perplexity_comparable"] is False for r in records)


def test_coherence_is_cached_and_read_back(chain, monkeypatch):
    run = chain["short"]
    first = json.loads(ok("evaluate", run, "--coherence", "c_v,c_npmi", "--json").stdout)
    assert first["coherence"]["cached"] == []

    def fail(*args, **kwargs):
        raise AssertionError("coherence computed again")

    monkeypatch.setattr(run_module, "gensim_coherence", fail)
    again = json.loads(ok("evaluate", run, "--coherence", "c_npmi,c_v", "--json").stdout)
    assert again["c_v"] == first["c_v"] and again["c_npmi"] == first["c_npmi"]
    assert again["coherence"]["per_topic"] == first["coherence"]["per_topic"]
    assert sorted(again["coherence"]["cached"]) == ["c_npmi", "c_v"]
    records = topictk.compare_runs(run, coherence="c_v", quiet=True)
    assert records[0]["c_v"] == first["c_v"]
    # another top-N is another number: computed
    key = coherence_cache.coherence_key(run, topictk.load_run(run).config, None, "c_v", 5, None)
    assert key["protocol"]["top"] == 5
    with pytest.raises(AssertionError, match="computed again"):
        run_module.evaluate_run(run, coherence="c_v", recompute=True)
