"""The hierarchical Dirichlet process (``model.family: hdp``, docs/algorithms.md §2.15) through
the command line: training records live K and the concentrations and evaluates with alpha_0 pi
as the fold-in prior, a resumed chain is the uninterrupted one, threads change no number (with
the SparseLDA, MH and WarpLDA samplers), a 2-worker Dask cluster gives the one-machine chain,
and on a planted corpus live K settles near the number of planted topics."""
from __future__ import annotations

import json

import numpy as np
import pytest

from tests.fixtures import planted_corpus, write_token_store
from tests.integration._cli import (assert_resumed_and_threaded_runs_equal, assert_same_run,
                                    lose_a_worker, model_arrays, ok, write_config)
from topictk.numbering import topic_number


def _config(tmp_path, store, name, **sections):
    model = {"family": "hdp", "topics": None, **sections.pop("model", {})}
    inference = {"iterations": 40, **sections.pop("inference", {})}
    training = {"eval_every": 20, "checkpoint_every": 20, **sections.pop("training", {})}
    return write_config(tmp_path, store, f"{name}.yaml", output=str(tmp_path / name),
                        model=model, inference=inference, training=training, **sections)


def test_trains_records_live_k_and_evaluates(example_store, tmp_path):
    """K_max is min(V, ceil(4 sqrt(307))) = 71 on the example corpus; every metrics line has
    live K (topics with tokens, at most K_max), alpha_0 and gamma; the state's alpha is
    alpha_0 pi, pi on the simplex; evaluate scores the run with that prior."""
    ok("train", "--config", _config(tmp_path, example_store, "h"), "-q")
    lines = [json.loads(x) for x in (tmp_path / "h" / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in lines] == [20, 40]
    for m in lines:
        assert 1 <= m["live_k"] <= 71 and m["alpha"] > 0 and m["gamma"] > 0
        assert np.isfinite(m["perplexity_point"])
    header, arrays = model_arrays(tmp_path / "h")
    assert arrays["pi"].shape == (71,)
    np.testing.assert_allclose(arrays["pi"].sum(), 1.0)
    np.testing.assert_allclose(arrays["alpha"], header["state"]["concentration"] * arrays["pi"])
    assert lines[-1]["live_k"] == np.count_nonzero(arrays["nk"])
    assert arrays["tables"].sum() > 0
    assert np.all((arrays["tables"] > 0) <= (arrays["nk"] > 0))
    line = next(x for x in ok("evaluate", tmp_path / "h").stdout.splitlines()
                if x.startswith("perplexity:"))
    assert 1 < float(line.split()[1]) < 1737, line


def test_resumed_equals_uninterrupted_and_threads_change_nothing(example_store, tmp_path):
    """The run cut back to its checkpoint at step 20 and resumed ends where the whole run ends
    (z, counts, pi, tables, alpha_0, gamma, every stream, the metrics); two AD-LDA chunks on
    two threads give the same run as on one."""
    assert_resumed_and_threaded_runs_equal(
        lambda name, **sections: _config(tmp_path, example_store, name, **sections), tmp_path)


@pytest.mark.parametrize("sampler", ["sparse", "mh", "warp"])
def test_live_k_settles_near_the_planted_k(tmp_path, sampler):
    """Five well-separated planted topics (95 % of each on 10 words of its own), 300
    documents, K_max = 20, the default start (every token in one of the first K_max / 4 = 5
    slots) and priors: after 600 sweeps the five largest topics hold at least 90 % of the
    tokens and live K is between 5 and 10, with every sampler (the MH and WarpLDA samplers
    propose from alpha_0 pi: with a flat prior every empty slot would take tokens). The lower
    bound: each planted topic needs a slot of its own. The upper: single-token moves cannot
    merge a planted topic split over two slots quickly, and slots are born and die with a few
    tokens each (on seeds 1-4 the run ends with 5 to 9 live, 91-100 % in the top five)."""
    planted = planted_corpus(4, n_topics=5, n_words=50, n_docs=300)
    store = write_token_store(tmp_path / "store", planted.docs, 50,
                              vocab=[f"w{i}" for i in range(50)])
    ok("train", "--config", write_config(
        tmp_path, store, "p.yaml", output=str(tmp_path / "p"),
        model={"family": "hdp", "max_topics": 20, "beta": 0.1},
        inference={"iterations": 600, "chunks": 1, "sampler": sampler},
        training={"seed": 4, "eval_every": 100}), "-q")
    _, arrays = model_arrays(tmp_path / "p")
    nk = np.sort(arrays["nk"])[::-1]
    assert nk[:5].sum() >= 0.9 * nk.sum(), nk
    assert 5 <= np.count_nonzero(nk) <= 10, nk


def test_split_merge_moves_let_the_chain_forget_a_start_in_every_slot(tmp_path):
    """The planted corpus of the test above started with every token spread over all 20
    slots: single-token moves leave the planted topics split over 12 live slots after 600
    sweeps (model.split_merge: 0; 12-14 on seeds 1-4), the top five holding 70 % of the
    tokens; ten split-merge moves after every sweep merge them back, to at most 8 live
    slots, the top five holding 90 % or more (7 on seeds 1 and 2)."""
    planted = planted_corpus(4, n_topics=5, n_words=50, n_docs=300)
    store = write_token_store(tmp_path / "store", planted.docs, 50,
                              vocab=[f"w{i}" for i in range(50)])
    live, share = {}, {}
    for moves in (0, 10):
        ok("train", "--config", write_config(
            tmp_path, store, f"s{moves}.yaml", output=str(tmp_path / f"s{moves}"),
            model={"family": "hdp", "max_topics": 20, "beta": 0.1, "initial_topics": 20,
                   "split_merge": moves},
            inference={"iterations": 600, "chunks": 1},
            training={"seed": 1, "eval_every": 100}), "-q")
        nk = np.sort(model_arrays(tmp_path / f"s{moves}")[1]["nk"])[::-1]
        live[moves], share[moves] = np.count_nonzero(nk), nk[:5].sum() / nk.sum()
    assert live[0] >= 11 and share[0] < 0.8, (live, share)
    assert live[10] <= 8 and share[10] >= 0.9, (live, share)


def test_a_binding_truncation_is_one_warning(tmp_path):
    """Five planted topics in K_max = 4 slots: every slot fills, which one warning line names
    (model.max_topics, the step, the live slots and a larger value); with K_max = 20 the
    five topics leave most slots empty and nothing is said."""
    planted = planted_corpus(4, n_topics=5, n_words=50, n_docs=300)
    store = write_token_store(tmp_path / "store", planted.docs, 50,
                              vocab=[f"w{i}" for i in range(50)])
    said = {}
    for k_max in (4, 20):
        out = ok("train", "--config", write_config(
            tmp_path, store, f"b{k_max}.yaml", output=str(tmp_path / f"b{k_max}"),
            model={"family": "hdp", "max_topics": k_max, "beta": 0.1},
            inference={"iterations": 150, "chunks": 1},
            training={"seed": 4, "eval_every": 50}))
        said[k_max] = [x for x in out.stderr.splitlines() if "binds" in x]
    assert len(said[4]) == 1, said
    assert "model.max_topics = 4 binds at step" in said[4][0] and "e.g. 8" in said[4][0]
    assert said[20] == []


def test_topics_lists_live_topics(tmp_path):
    """``topics`` lists the slots with tokens only, largest first under their slot numbers (a
    topic keeps its id from checkpoint to checkpoint), and no empty slot."""
    planted = planted_corpus(2, n_topics=3, n_words=30, n_docs=60)
    store = write_token_store(tmp_path / "store", planted.docs, 30,
                              vocab=[f"w{i}" for i in range(30)])
    ok("train", "--config", write_config(
        tmp_path, store, "t.yaml", output=str(tmp_path / "t"),
        model={"family": "hdp", "max_topics": 12}, inference={"iterations": 30, "chunks": 1},
        training={"eval_every": 0}), "-q")
    _, arrays = model_arrays(tmp_path / "t")
    live = np.flatnonzero(arrays["nk"])
    live = live[np.argsort(-arrays["nk"][live], kind="stable")]
    assert 0 < live.size < 12
    listed = json.loads(ok("topics", tmp_path / "t", "--format", "json").stdout)["topics"]
    assert [t["topic"] for t in listed] == [topic_number(k) for k in live]


def test_folds_in_by_mh_with_the_samples_alpha0_pi(example_store, tmp_path, monkeypatch):
    """``--fold-in mh`` (``evaluation.fold_in: mh``) folds the test documents in by MH (§2.7)
    with each saved sample's document prior alpha_0 pi, and scores the run as the Gibbs
    fold-in does: both estimate the same theta, and with 400 fold-in sweeps their
    perplexities differ by 0.24 % on seed 1 (0.7 % with 50: the example's 287 held-out tokens
    leave a short fold-in noisy), so 1.5 % is the bound."""
    from topictk.inference.gibbs import driver
    run = tmp_path / "h"
    ok("train", "--config", _config(tmp_path, example_store, "h",
                                    inference={"iterations": 60, "burn_in": 30, "thin": 10},
                                    training={"seed": 1},
                                    evaluation={"fold_in_sweeps": 400,
                                                "fold_in_burn_in": 200}), "-q")
    by_gibbs = json.loads(ok("evaluate", run, "--json").stdout)
    priors, real = [], driver.mh_fold_in

    def spy(nkw, nk, beta, alpha, *args, **kwargs):
        priors.append(np.array(alpha))
        return real(nkw, nk, beta, alpha, *args, **kwargs)

    monkeypatch.setattr(driver, "mh_fold_in", spy)
    by_mh = json.loads(ok("evaluate", run, "--json", "--fold-in", "mh").stdout)
    saved = [np.load(path)["a_alpha"] for path in sorted((run / "samples").glob("*.npz"))]
    assert by_mh["estimator"] == "mh" and by_mh["samples"] == len(saved) == 3
    assert len(priors) == 3
    for got, want in zip(priors, saved):
        np.testing.assert_array_equal(np.ravel(got), want)
        assert np.ptp(want) > 0                     # alpha_0 pi, not a symmetric prior
    assert abs(by_mh["perplexity"] / by_gibbs["perplexity"] - 1) < 0.015, (by_mh, by_gibbs)


@pytest.mark.parametrize("sampler", ["mh", "warp"])
def test_mh_and_warp_sample_the_hdp(example_store, tmp_path, sampler):
    """``inference.sampler: mh`` and ``warp`` sweep z with the prior alpha_0 pi (§2.7, §2.9):
    the run trains with that sampler, a resumed run is the uninterrupted one and two threads
    give the run of one."""
    def config_of(name, **sections):
        sections["inference"] = {"sampler": sampler, **sections.get("inference", {})}
        return _config(tmp_path, example_store, name, **sections)

    assert_resumed_and_threaded_runs_equal(config_of, tmp_path)
    lines = [json.loads(x) for x in (tmp_path / "one" / "metrics.jsonl").read_text().splitlines()]
    assert {m["sampler"] for m in lines} == {sampler}
    header, arrays = model_arrays(tmp_path / "one")
    np.testing.assert_allclose(arrays["alpha"], header["state"]["concentration"] * arrays["pi"])
    assert 1 <= lines[-1]["live_k"] < 71


def test_two_dask_workers_give_the_one_machine_chain(tmp_path, example_store):
    """AD-LDA with 3 chunks on a 2-worker local cluster: the shards sweep with alpha_0 pi and
    the split-merge moves, tables, weights and concentrations are drawn from the z and n_dk
    brought back after every sweep (the moved z sent out again), so the run (every array,
    stream, metric and sample) and its evaluation equal the run in one process."""
    pytest.importorskip("distributed")
    runs = []
    for name, args in (("here", ()), ("there", ("--dask-workers", "2"))):
        config = _config(tmp_path, example_store, name, model={"split_merge": 30},
                         inference={"iterations": 16, "burn_in": 8, "thin": 4, "chunks": 3},
                         training={"eval_every": 2, "checkpoint_every": 8})
        ok("train", "--config", config, "-q", *args)
        runs.append(tmp_path / name)
    assert_same_run(*runs, same_samples=True)
    lines = [json.loads(x) for x in (runs[1] / "metrics.jsonl").read_text().splitlines()]
    assert lines[-1]["live_k"] > 1
    assert sum(m["splits"] + m["merges"] for m in lines) > 0, lines
    here = json.loads(ok("evaluate", runs[0], "--json").stdout)
    there = json.loads(ok("evaluate", runs[0], "--json", "--dask-workers", "2").stdout)
    assert here == there


@pytest.mark.parametrize("method, failing_call", [("sweep", 7), ("gather", 5)])
def test_a_lost_worker_changes_nothing(tmp_path, example_store, monkeypatch, method,
                                       failing_call):
    """A worker reported lost in sweep 7, or while z and n_dk are brought back for the global
    draws after sweep 5 (the sweep is redone, then the draws are made once): the run is the
    one-machine run."""
    pytest.importorskip("distributed")
    sections = {"inference": {"iterations": 12, "burn_in": 6, "thin": 3, "chunks": 3},
                "training": {"eval_every": 6, "checkpoint_every": 6}}
    ok("train", "--config", _config(tmp_path, example_store, "here", **sections), "-q")
    calls = lose_a_worker(monkeypatch, method, failing_call)
    ok("train", "--config", _config(tmp_path, example_store, "there", **sections),
       "--dask-workers", "2", "-q")
    assert calls["n"] > failing_call
    assert_same_run(tmp_path / "here", tmp_path / "there", same_samples=True)


def test_a_run_saved_before_split_merge_resumes_without_the_moves(example_store, tmp_path):
    """A run whose saved config.yaml has no model.split_merge (trained before the moves)
    continues its own chain: resumed from its checkpoint at step 20 it ends where the run
    without moves ends, not where the default moves would take it."""
    from tests.fixtures import cut_back_run
    ok("train", "--config", _config(tmp_path, example_store, "old",
                                    model={"split_merge": 0}), "-q")
    ok("train", "--config", _config(tmp_path, example_store, "new"), "-q")
    cut_back_run(tmp_path / "old", tmp_path / "cut", 20)
    saved = tmp_path / "cut" / "config.yaml"
    lines = saved.read_text(encoding="utf-8").splitlines(keepends=True)
    saved.write_text("".join(x for x in lines if "split_merge" not in x), encoding="utf-8")
    ok("train", "--config", _config(tmp_path, example_store, "cut"), "--resume", "-q")
    assert_same_run(tmp_path / "old", tmp_path / "cut", same_samples=True)
    new, old = model_arrays(tmp_path / "new")[1], model_arrays(tmp_path / "old")[1]
    assert not np.array_equal(new["z"], old["z"])
