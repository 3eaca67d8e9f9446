"""The MH sampler with a prior per document (``dmr-sem`` with ``inference.sampler: mh``) and the
MH fold-in of runs trained with it, through the command line (docs/algorithms.md §2.7, §9.2):
train, evaluate and infer on the example corpus with made-up covariates, resumed equals
uninterrupted, the fold-in equals its NumPy twin, and runs of the other samplers keep the
Gibbs fold-in."""
from __future__ import annotations

import json

import numpy as np
import pytest

from tests.integration._cli import (
    EXAMPLE,
    REPO,
    assert_same_arrays,
    comparable_metrics,
    fails,
    metrics,
    model_arrays,
    ok,
    write_config,
)
from tests.reference import mh as ref
from topictk.corpus.store import CorpusStore
from topictk.inference.gibbs import driver as gibbs
from topictk.inference.base import INFER_CHUNK_DOCS, chunk_bounds_by_docs
from topictk.state.dmr import document_alpha
from topictk.streams import infer_key, make_stream

DMR_SEM = REPO / "configs" / "example_dmr_sem.yaml"
SHORT = ["inference.iterations=24", "inference.burn_in=12", "inference.thin=4",
         "inference.optimize_burn_in=8", "inference.optimize_interval=8",
         "training.eval_every=8", "training.checkpoint_every=8", "evaluation.fold_in_sweeps=10",
         "evaluation.fold_in_burn_in=5", "inference.sampler=mh", "inference.chunks=2",
         "evaluation.fold_in=mh"]


def _sets(items: list[str]) -> list[str]:
    return [part for item in items for part in ("--set", item)]


@pytest.fixture(scope="module")
def dmr_mh_run(tmp_path_factory, meta_store):
    run = tmp_path_factory.mktemp("mh-dmr") / "run"
    ok("train", "--config", DMR_SEM, "--out", run, "-q", "--set", f"corpus={meta_store}",
       *_sets(SHORT))
    return run


class FoldInSpy:
    """Counts the MH fold-ins of the driver while the real one runs."""

    def __init__(self, monkeypatch):
        self.calls = 0
        real = gibbs.mh_fold_in

        def spy(*args, **kwargs):
            self.calls += 1
            return real(*args, **kwargs)

        monkeypatch.setattr(gibbs, "mh_fold_in", spy)


def test_dmr_sem_trains_with_mh_and_learns(dmr_mh_run):
    records = metrics(dmr_mh_run)
    assert {m["sampler"] for m in records} == {"mh"}
    assert records[-1]["perplexity_point"] < records[0]["perplexity_point"]
    _, arrays = model_arrays(dmr_mh_run)
    assert np.all(np.isfinite(arrays["nu"])) and arrays["nu"][:, :-1].any()   # nu was fitted


def test_evaluate_and_infer_of_an_mh_run_fold_in_by_mh(dmr_mh_run, tmp_path, monkeypatch):
    spy = FoldInSpy(monkeypatch)
    result = json.loads(ok("evaluate", dmr_mh_run, "--json").stdout)
    assert np.isfinite(result["perplexity"]) and result["samples"] == 3
    assert spy.calls == 3                                  # one fold-in per saved sample
    again = json.loads(ok("evaluate", dmr_mh_run, "--json", "--threads", "2").stdout)
    assert again["perplexity"] == result["perplexity"]
    lines = EXAMPLE.read_text(encoding="utf-8").splitlines()[:3]
    docs = [{"text": lines[0] + " zzunknownword", "group": "b", "score": 0.3},
            {"text": "zzunknown qqnothing", "group": "a", "score": 0.1},
            {"text": lines[2], "group": "c", "score": 0.9}]
    (tmp_path / "new.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    calls = spy.calls
    out = ok("infer", dmr_mh_run, tmp_path / "new.jsonl", "--seed", "3")
    assert spy.calls > calls
    rows = [json.loads(line) for line in out.stdout.splitlines()]
    theta = np.array([r["theta"] for r in rows])
    np.testing.assert_allclose(theta.sum(axis=1), 1.0, rtol=1e-9)
    assert rows[1]["tokens"] == 0                          # unknown words dropped, as before
    assert "no word of the model's vocabulary" in out.stderr


def test_infer_of_an_mh_run_equals_the_twin(dmr_mh_run, meta_store):
    """``Run.doc_topic`` of the training documents (the infer path, its streams keyed by the
    chunks of INFER_CHUNK_DOCS) equals tests/reference/mh.py::fold_in_theta with the model's
    counts and alpha_d = exp(x_d^T nu)."""
    import topictk

    theta = topictk.load_run(dmr_mh_run).doc_topic(sweeps=3, burn_in=1, seed=4)
    _, model = model_arrays(dmr_mh_run)
    store = CorpusStore.open(meta_store)
    train = store.train()
    doc_ptr, words = np.asarray(train.doc_ptr), np.asarray(train.words)
    alpha = document_alpha(np.asarray(store.features("train")), model["nu"])
    bounds = chunk_bounds_by_docs(doc_ptr.size - 1, INFER_CHUNK_DOCS)
    rngs = [np.random.Generator(make_stream(4, infer_key(c))) for c in range(bounds.size - 1)]
    want = ref.fold_in_theta(model["nkw"], model["nk"], 0.01, alpha, doc_ptr, words, 2, 3, 1,
                             bounds, rngs)
    np.testing.assert_array_equal(theta, want)


def test_resumed_dmr_sem_mh_chain_equals_uninterrupted(tmp_path, meta_store):
    """Stopped at step 16: inside an mh_rebuild interval of 3 (tables of step 15), after the
    nu update of sweep 16 and before that of sweep 24."""
    sets = _sets([*SHORT, "inference.mh_rebuild=3"])
    straight, halves = tmp_path / "straight", tmp_path / "halves"
    ok("train", "--config", DMR_SEM, "--out", straight, "-q", "--set",
       f"corpus={meta_store}", *sets)
    ok("train", "--config", DMR_SEM, "--out", halves, "-q", "--set", f"corpus={meta_store}",
       *sets, "--set", "inference.iterations=16")
    ok("train", "--config", DMR_SEM, "--out", halves, "-q", "--resume", "--set",
       f"corpus={meta_store}", *sets)
    ha, arrays_a = model_arrays(straight)
    hb, arrays_b = model_arrays(halves)
    assert_same_arrays(arrays_a, arrays_b)
    assert ha["state"] == hb["state"] and ha["streams"] == hb["streams"]
    assert comparable_metrics(straight) == comparable_metrics(halves)


def test_dmr_sem_mh_settings_are_checked(tmp_path, meta_store):
    message = fails(2, "train", "--config", DMR_SEM, "--out", tmp_path / "run", "--set",
                    f"corpus={meta_store}", "--set", "inference.sampler=mh", "--set",
                    "inference.chunks=null", "--set", "inference.blocks=2")
    assert "inference.blocks does not apply to the Metropolis-Hastings sampler" in message
    message = fails(2, "train", "--config", DMR_SEM, "--out", tmp_path / "run", "--set",
                    f"corpus={meta_store}", "--set", "inference.mh_steps=0")
    assert "inference.mh_steps must be an integer >= 1 or null; got 0" in message


def test_runs_of_the_exact_samplers_keep_the_gibbs_fold_in(tmp_path, example_store,
                                                           monkeypatch):
    config = write_config(tmp_path, example_store,
                          inference={"iterations": 6, "burn_in": 3, "thin": 3,
                                     "sampler": "sparse"},
                          training={"eval_every": 3, "checkpoint_every": 6})
    spy = FoldInSpy(monkeypatch)
    ok("train", "--config", config, "-q")
    ok("evaluate", tmp_path / "run", "--json")
    assert spy.calls == 0


@pytest.mark.parametrize("fold_in,used", [("gibbs", False), ("mh", True)])
def test_evaluation_fold_in_chooses_the_fold_in(tmp_path, example_store, monkeypatch,
                                                fold_in, used):
    """``evaluation.fold_in`` picks the fold-in of the curve and of evaluate, whatever the
    sampler (here auto resolving to mh); it may change when a run is resumed."""
    monkeypatch.setattr(gibbs, "MH_FROM_K", 8)
    config = write_config(tmp_path, example_store, model={"topics": 8},
                          inference={"iterations": 6, "burn_in": 3, "thin": 3,
                                     "sampler": "auto"},
                          training={"eval_every": 2, "checkpoint_every": 2},
                          evaluation={"fold_in": fold_in})
    spy = FoldInSpy(monkeypatch)
    ok("train", "--config", config, "-q", "--set", "inference.iterations=4")
    during = spy.calls                      # the in-training curve
    ok("evaluate", tmp_path / "run", "--json")
    assert (during > 0 and spy.calls > during) == used
    assert (spy.calls == 0) == (not used)
    other, before = ("gibbs" if used else "mh"), spy.calls
    ok("train", "--config", config, "-q", "--resume", "--set", f"evaluation.fold_in={other}")
    assert (spy.calls > before) == (other == "mh")


def test_dmr_sem_refuses_warp_naming_the_key(tmp_path, meta_store):
    """WarpLDA's document proposal assumes one prior for every document (§2.9)."""
    err = fails(2, "train", "--config", DMR_SEM, "--out", tmp_path / "run", "--set",
                f"corpus={meta_store}", "--set", "inference.sampler=warp")
    assert "inference.sampler: warp" in err and "dmr-sem" in err
    assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("protocol_b", [False, True])
def test_warp_runs_fold_in_by_mh_from_their_sparse_samples(tmp_path, example_store, monkeypatch,
                                                           protocol_b):
    """A WarpLDA run's samples hold sparse counts (n_dk too on a Protocol B store); evaluate
    folds in by MH from them, one fold-in per sample, the same at any thread count."""
    store = example_store
    if protocol_b:
        store = tmp_path / "store-b"
        ok("prepare", EXAMPLE, "--out", store, "--test-docs", "0",
           "--heldout-train-fraction", "0.1")
    config = write_config(tmp_path, store,
                          inference={"iterations": 6, "burn_in": 3, "thin": 3,
                                     "sampler": "warp"},
                          training={"eval_every": 3, "checkpoint_every": 6},
                          evaluation={"fold_in": "mh"})
    ok("train", "--config", config, "-q")
    spy = FoldInSpy(monkeypatch)
    result = json.loads(ok("evaluate", tmp_path / "run", "--json").stdout)
    key = "perplexity_train_heldout" if protocol_b else "perplexity"
    assert np.isfinite(result[key]) and result.get("samples", 1) == 1
    assert spy.calls == (0 if protocol_b else 1)    # Protocol B mixes the samples' own n_dk
    again = json.loads(ok("evaluate", tmp_path / "run", "--json", "--threads", "2").stdout)
    assert again[key] == result[key]
