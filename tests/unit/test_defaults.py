"""The defaults a config with only algorithm, iterations and topics gets: the chunk count that
lets threads work without changing the numbers, the evaluation schedule of the in-training
curve, and the step sizes of the online algorithms."""
from __future__ import annotations

import json

import numpy as np
import pytest

from tests.fixtures import planted_corpus, write_token_store
from topictk.inference import base
from topictk.inference.base import EvaluationSet, resolve_blocks, resolve_chunks, take_documents
from topictk.inference.registry import get_driver, load_config
from topictk.streams import Streams
from topictk.training.run import train


def _store(tmp_path, n_docs: int, n_test: int = 0, mean_length: float = 80, seed: int = 3):
    corpus = planted_corpus(seed, n_docs=n_docs + n_test, mean_length=mean_length)
    train_docs, test_docs = corpus.docs[:n_docs], corpus.docs[n_docs:]
    half = [len(d) // 2 for d in test_docs]
    return write_token_store(tmp_path / "store", train_docs, 50,
                             test_observed=[d[:h] for d, h in zip(test_docs, half)],
                             test_heldout=[d[h:] for d, h in zip(test_docs, half)])


def _config(store, tmp_path, algorithm: str, iterations: int = 10, **sections):
    raw = {"corpus": str(store), "output": str(tmp_path / "run"),
           "model": {"topics": 5, **sections.get("model", {})},
           "inference": {"algorithm": algorithm, "iterations": iterations,
                         **sections.get("inference", {})},
           "training": dict(sections.get("training", {})),
           "evaluation": dict(sections.get("evaluation", {}))}
    return load_config(None, raw=raw)


# ---------------------------------------------------------------- chunks and threads
def test_auto_chunks_depend_on_the_corpus_size_only():
    assert resolve_chunks("auto", base.AUTO_CHUNK_TOKENS - 1) == 1
    assert resolve_chunks("auto", base.AUTO_CHUNK_TOKENS) == base.AUTO_CHUNKS == 2
    assert resolve_chunks("auto", 10**9) == 2
    assert resolve_chunks(7, 10) == 7


def test_auto_blocks_depend_on_the_corpus_size_only():
    """``blocks: auto`` (the default) grows with the corpus; null is the earlier default."""
    assert resolve_blocks("auto", base.AUTO_CHUNK_TOKENS - 1) == 1
    assert resolve_blocks("auto", base.AUTO_CHUNK_TOKENS) == base.AUTO_BLOCKS == 4
    assert resolve_blocks("auto", (1 << 22) - 1) == 4
    assert resolve_blocks("auto", 1 << 22) == 8
    assert resolve_blocks("auto", 1 << 25) == resolve_blocks("auto", 10**10) == 16
    assert resolve_blocks(None, base.AUTO_CHUNK_TOKENS - 1) == 1
    assert resolve_blocks(None, 10**10) == base.EARLIER_BLOCKS == 2
    assert resolve_blocks(3, 10) == 3


@pytest.fixture(scope="module")
def big_store(tmp_path_factory):
    """A planted corpus just over AUTO_CHUNK_TOKENS training tokens, with test documents."""
    store = _store(tmp_path_factory.mktemp("big"), n_docs=900, n_test=60)
    tokens = json.loads((store / "manifest.json").read_text())["counts"]["train_tokens"]
    assert tokens >= base.AUTO_CHUNK_TOKENS
    return store


@pytest.mark.parametrize("algorithm, explicit, count", [
    ("gibbs", {"blocks": 4, "block_sync": "sweep"}, 4), ("cvb0", {"chunks": 2}, 2)])
def test_default_chunks_use_two_threads_and_give_the_same_chain(big_store, tmp_path,
                                                               algorithm, explicit, count):
    """With inference.chunks (and blocks) left out, two threads both get blocks (Gibbs: the
    flowing partitioned schedule, 4 blocks) or a chunk (CVB0: AD-LDA), and 1 and 2 threads give
    the chain of the count given explicitly, bit for bit."""
    states = {}
    for name, threads, inference in (("t1", 1, {}), ("t2", 2, {}), ("c2", 1, explicit)):
        config = _config(big_store, tmp_path, algorithm, inference=inference)
        assert config.inference.chunks == (inference.get("chunks") if algorithm == "gibbs"
                                           else inference.get("chunks", "auto"))
        driver = get_driver(algorithm)(config, _open(big_store), threads, streams=Streams(4))
        assert driver.n_chunks == count
        state = driver.init_state()
        for t in range(3):
            driver.step(state, t)
        states[name] = driver.state_to_arrays(state)[1]
    for other in ("t2", "c2"):
        assert states[other].keys() == states["t1"].keys()
        for key, value in states["t1"].items():
            np.testing.assert_array_equal(states[other][key], value, err_msg=key)


def _open(path):
    from topictk.corpus.store import CorpusStore
    return CorpusStore.open(path)


def test_default_chunks_on_a_small_corpus_are_the_exact_chain(tmp_path, caplog):
    store = _store(tmp_path, n_docs=50)
    config = _config(store, tmp_path, "gibbs")
    driver = get_driver("gibbs")(config, _open(store), 2, streams=Streams(4))
    assert driver.n_chunks == 1
    assert not [r for r in caplog.records if r.levelname == "WARNING"]


def test_explicit_chunks_below_threads_still_warn(tmp_path, caplog):
    store = _store(tmp_path, n_docs=50)
    config = _config(store, tmp_path, "gibbs", inference={"chunks": 1})
    get_driver("gibbs")(config, _open(store), 2, streams=Streams(4))
    assert any("set inference.chunks >= threads" in r.getMessage() for r in caplog.records)


# ---------------------------------------------------------------- evaluation schedule
def test_eval_every_auto_is_a_tenth_of_the_iterations(tmp_path):
    store = _store(tmp_path, n_docs=50, n_test=10)
    assert _config(store, tmp_path, "gibbs", 200).training.eval_every == 20
    assert _config(store, tmp_path, "gibbs", 7).training.eval_every == 1
    explicit = _config(store, tmp_path, "gibbs", 200, training={"eval_every": 3})
    assert explicit.training.eval_every == 3


def test_curve_docs_auto_depends_on_the_store_alone(big_store, tmp_path):
    # 900 training documents: 2 % is 18, raised to the floor of 50, whatever the algorithm,
    # the iterations, the evaluation schedule or the curve's fold-in: every run of the store
    # is estimated on the same test documents
    runs = [("gibbs", 100, {}), ("gibbs", 10, {}), ("vb", 100, {}), ("ovb", 50, {}),
            ("gibbs", 100, {"evaluation": {"curve_fold_in_sweeps": None}}),
            ("gibbs", 300, {"training": {"eval_every": 7}})]
    assert {_config(big_store, tmp_path, algorithm, iterations, **sections)
            .evaluation.curve_docs for algorithm, iterations, sections in runs} == {50}
    # an explicit value is kept
    assert _config(big_store, tmp_path, "gibbs", 100,
                   evaluation={"curve_docs": 7}).evaluation.curve_docs == 7


def test_curve_docs_auto_is_clamped(tmp_path, monkeypatch):
    from topictk.config import loader
    store = _store(tmp_path, n_docs=50, n_test=10)
    counts = {"vocabulary": 50, "train_documents": 100_000, "test_documents": 5_000,
              "train_tokens": 2_000_000, "test_observed_tokens": 100_000}
    monkeypatch.setattr(loader, "_store_counts", lambda corpus: counts)
    # 2 % of 100,000 training documents: 2000 -> the cap, for every run
    assert _config(store, tmp_path, "gibbs", 100).evaluation.curve_docs == 1000
    assert _config(store, tmp_path, "ovb", 10,
                   inference={"batch_size": 8}).evaluation.curve_docs == 1000
    # 2 % of 11,314 (20 Newsgroups' training documents): 226 of its 7,532 test documents
    counts.update(train_documents=11_314, test_documents=7_532)
    assert _config(store, tmp_path, "gibbs", 30).evaluation.curve_docs == 226
    assert _config(store, tmp_path, "gibbs", 300).evaluation.curve_docs == 226
    # never more than the test documents, never fewer than 50 unless there are fewer
    counts.update(train_documents=200, test_documents=30)
    assert _config(store, tmp_path, "gibbs", 100).evaluation.curve_docs == 30
    counts.update(test_documents=500)
    assert _config(store, tmp_path, "gibbs", 100).evaluation.curve_docs == 50


def test_curve_docs_resolve_the_same_on_a_cluster(tmp_path):
    """A run on a cluster scores the curve on the documents the same run scores in process
    (its numbers may not depend on where it runs), an explicit number included."""
    store = _store(tmp_path, n_docs=50, n_test=10)
    here = _config(store, tmp_path, "gibbs", inference={"chunks": 2})
    there = _config(store, tmp_path, "gibbs", training={"dask_workers": 1},
                    inference={"chunks": 2})
    assert there.evaluation.curve_docs == here.evaluation.curve_docs
    assert _config(store, tmp_path, "gibbs", training={"dask_workers": 1},
                   inference={"chunks": 2},
                   evaluation={"curve_docs": 5}).evaluation.curve_docs == 5


def test_curve_subset_is_spread_evenly_and_exact(tmp_path):
    store = _open(_store(tmp_path, n_docs=20, n_test=10))
    test = EvaluationSet.from_store(store)
    sub = test.curve(4, (6, 3))
    assert sub.n_docs == 4 and sub.fold_in == (6, 3)
    rows = [0, 2, 5, 7]          # floor(i * 10 / 4)
    for part, whole in ((sub.observed, test.observed), (sub.heldout, test.heldout)):
        for i, r in enumerate(rows):
            a, b = part.indptr[i], part.indptr[i + 1]
            c, d = whole.indptr[r], whole.indptr[r + 1]
            np.testing.assert_array_equal(part.indices[a:b], whole.indices[c:d])
            np.testing.assert_array_equal(part.counts[a:b], whole.counts[c:d])
    a, b = sub.observed.doc_ptr[1], sub.observed.doc_ptr[2]
    c, d = test.observed.doc_ptr[2], test.observed.doc_ptr[3]
    np.testing.assert_array_equal(sub.observed.words[a:b], test.observed.words[c:d])
    assert test.curve(None, None).n_docs == 10
    assert test.curve(50, None).n_docs == 10
    empty = take_documents(test.heldout, np.zeros(0, dtype=np.int64))
    assert empty.n_docs == 0 and empty.indices.size == 0


def test_curve_is_cheaper_and_evaluate_still_scores_everything(tmp_path):
    """The in-training curve scores its subset with the short fold-in (so its numbers differ
    from a run whose curve is the full evaluation), while ``evaluate`` of both runs gives the
    same perplexity on every held-out token."""
    from topictk.api import load_run
    store = _store(tmp_path, n_docs=200, n_test=40)
    results = {}
    for name, evaluation in (("curve", {"curve_docs": 10}),
                             ("full", {"curve_docs": None, "curve_fold_in_sweeps": None})):
        raw = {"corpus": str(store), "output": str(tmp_path / name), "model": {"topics": 5},
               "inference": {"algorithm": "gibbs", "iterations": 6},
               "training": {"seed": 2, "checkpoint_every": 0}, "evaluation": evaluation}
        train(load_config(None, raw=raw), quiet=True)
        metrics = [json.loads(line)
                   for line in (tmp_path / name / "metrics.jsonl").read_text().splitlines()]
        assert [m["step"] for m in metrics] == [1, 2, 3, 4, 5, 6]
        assert all("eval_seconds" in m for m in metrics)
        results[name] = (metrics[-1]["perplexity_point"],
                         load_run(tmp_path / name).evaluate()["perplexity"])
    assert results["curve"][0] != results["full"][0]
    assert results["curve"][1] == results["full"][1]


# ---------------------------------------------------------------- step sizes
def test_tau0_auto_is_the_batches_of_an_epoch(big_store, tmp_path):
    from topictk.inference.variational.ovb import TAU0_MAX, resolve_tau0
    assert resolve_tau0("auto", 176) == 176.0
    assert resolve_tau0("auto", 0) == 1.0
    assert resolve_tau0("auto", 51_000) == TAU0_MAX == 1024.0
    assert resolve_tau0(5, 176) == 5.0
    for algorithm in ("ovb", "hsvg"):
        config = _config(big_store, tmp_path, algorithm)
        assert config.inference.tau0 == "auto" and config.inference.kappa == 0.7
        driver = get_driver(algorithm)(config, _open(big_store), 1, streams=Streams(4))
        assert driver.tau0 == 900 // 64
        explicit = _config(big_store, tmp_path, algorithm, inference={"tau0": 3})
        assert get_driver(algorithm)(explicit, _open(big_store), 1,
                                     streams=Streams(4)).tau0 == 3.0


def test_sgrld_step_defaults(tmp_path):
    """epsilon_t = a (1 + t/b)^-c with the measured defaults (a, b, c) = (0.01, 100, 0.55)."""
    store = _store(tmp_path, n_docs=50)
    step = _config(store, tmp_path, "sgrld").inference.step
    assert (step["a"], step["b"], step["c"]) == (0.01, 100.0, 0.55)
    # dmr-sgrld (which needs metadata to configure) shares the options
    from topictk.inference.dmr.driver import DMRSGRLDDriver
    from topictk.inference.sgrld.driver import SGRLDDriver
    assert DMRSGRLDDriver.OPTIONS["step"] is SGRLDDriver.OPTIONS["step"]
