"""``inference.sampler: warp`` through ``topictk train`` (docs/algorithms.md §2.9): resumed
equals uninterrupted (z, n_k and both phases' streams come back from the checkpoint), one
thread equals two, the chain learns topics, and the settings and checkpoints it refuses."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from tests.integration._cli import (
    EXAMPLE,
    assert_same_run,
    assert_same_arrays,
    fails,
    metrics,
    model_arrays,
    ok,
    samples,
    write_config,
)
from topictk.api import open_store
from topictk.evaluation.coherence import top_words
from topictk.rundir.checkpoint import load_arrays

WARP = {"iterations": 40, "burn_in": 10, "thin": 10, "sampler": "warp"}


@pytest.mark.parametrize("stop", [15, 20])
def test_resumed_warp_chain_equals_uninterrupted(tmp_path, example_store, stop):
    """Stopped in the middle of the run, with z, n_k and both phases' streams in the
    checkpoint (at step 15 between two evaluations, at 20 on one)."""
    training = {"eval_every": 10, "checkpoint_every": 5}
    straight = write_config(tmp_path, example_store, name="straight.yaml",
                            output=str(tmp_path / "straight"), inference=WARP,
                            training=training)
    ok("train", "--config", straight, "-q")
    halves = write_config(tmp_path, example_store, name="halves.yaml",
                          output=str(tmp_path / "halves"), inference=WARP, training=training)
    ok("train", "--config", halves, "-q", "--set", f"inference.iterations={stop}")
    saved = load_arrays(tmp_path / "halves" / "checkpoints" / f"step-{stop:08d}.npz")[1]
    assert "prop" not in saved
    ok("train", "--config", halves, "--resume", "-q")
    assert_same_run(tmp_path / "straight", tmp_path / "halves", extra_evaluations=True)
    assert {m["sampler"] for m in metrics(tmp_path / "halves")} == {"warp"}


def test_checkpoints_hold_the_chain_and_samples_its_counts(tmp_path, example_store):
    """A checkpoint and the model hold z and n_k, no dense counts; a sample holds the
    non-zero n_kw counted from the z of its step, and no dense counts."""
    config = write_config(tmp_path, example_store, inference=WARP,
                          training={"eval_every": 40, "checkpoint_every": 40})
    ok("train", "--config", config, "-q")
    arrays = load_arrays(tmp_path / "run" / "checkpoints" / "step-00000040.npz")[1]
    assert {"z", "nk", "alpha"} <= set(arrays) and not {"ndk", "nkw", "prop"} & set(arrays)
    assert set(model_arrays(tmp_path / "run")[1]) == set(arrays)
    train = open_store(str(example_store)).train()
    nkw = np.zeros((int(np.max(train.words)) + 1, arrays["nk"].size), np.int64)
    np.add.at(nkw, (np.asarray(train.words), arrays["z"]), 1)
    last = samples(tmp_path / "run")[max(samples(tmp_path / "run"))]
    assert "nkw" not in last and "ndk" not in last
    ptr, topic, count = last["nkw_ptr"], last["nkw_topic"], last["nkw_count"]
    assert ptr[-1] == count.size == np.count_nonzero(nkw) and np.all(count > 0)
    for w in range(nkw.shape[0]):
        row = slice(ptr[w], ptr[w + 1])
        assert np.all(np.diff(topic[row]) > 0)
        assert np.array_equal(nkw[w, topic[row]], count[row])
    assert np.array_equal(nkw.sum(axis=0), arrays["nk"])


def test_a_checkpoint_of_the_earlier_kernel_is_refused(tmp_path, example_store):
    """A checkpoint holding the pending proposals of the earlier WarpLDA kernel cannot go on
    with this chain: resuming it fails in one line naming the file and the fix (not the
    generic one of a damaged checkpoint), and the run directory is left as it was; its topics
    are still evaluated."""
    from topictk.rundir.checkpoint import save_arrays

    config = write_config(tmp_path, example_store,
                          inference={**WARP, "iterations": 10, "burn_in": 2, "thin": 1},
                          training={"eval_every": 10, "checkpoint_every": 5})
    ok("train", "--config", config, "-q", "--set", "inference.iterations=5")
    path = tmp_path / "run" / "checkpoints" / "step-00000005.npz"
    header, arrays = load_arrays(path)
    arrays["prop"] = np.zeros((arrays["z"].size, 2), np.int32)
    save_arrays(path, header, arrays)
    before = path.read_bytes()
    message = fails(1, "train", "--config", config, "--resume")
    assert "pending proposals of the earlier inference.sampler = warp kernel" in message
    assert "train the run again from the start" in message and "step-00000005" in message
    assert len(message.strip().splitlines()) == 1 and "delete it" not in message
    assert path.read_bytes() == before
    # its topics are still read: evaluating the checkpoint works
    assert "perplexity" in ok("evaluate", tmp_path / "run", "--checkpoint", "5").stdout


@pytest.mark.parametrize("alpha", [0.1, "auto"])
def test_warp_one_thread_equals_two_threads(tmp_path, example_store, alpha):
    """Three chunks: the chain depends on the chunks only (asymmetric alpha when learnt)."""
    for threads in (1, 2):
        config = write_config(tmp_path, example_store, name=f"t{threads}.yaml",
                              output=str(tmp_path / f"t{threads}"),
                              model={"topics": 6, "alpha": alpha, "beta": 0.01},
                              inference={**WARP, "chunks": 3, "optimize_burn_in": 5,
                                         "optimize_interval": 5},
                              training={"threads": threads})
        ok("train", "--config", config, "-q")
    assert_same_run(tmp_path / "t1", tmp_path / "t2", extra_evaluations=True)
    assert np.isfinite(metrics(tmp_path / "t1")[-1]["perplexity_point"])


def test_warp_learns_topics(tmp_path, example_store):
    """The WarpLDA chain lowers held-out perplexity like the exact sampler does."""
    config = write_config(tmp_path, example_store,
                          inference={**WARP, "iterations": 60, "burn_in": 30},
                          training={"eval_every": 5, "checkpoint_every": 60})
    ok("train", "--config", config, "-q")
    perplexity = [m["perplexity_point"] for m in metrics(tmp_path / "run")]
    assert perplexity[-1] < 0.9 * perplexity[0]


def test_blocks_with_warp_is_a_config_error(tmp_path, example_store):
    config = write_config(tmp_path, example_store, inference={**WARP, "blocks": 2})
    assert "inference.blocks does not apply" in fails(2, "train", "--config", config)


def test_warp_steps_below_one_is_a_config_error(tmp_path, example_store):
    config = write_config(tmp_path, example_store, inference={**WARP, "mh_steps": 0})
    assert "inference.mh_steps must be an integer >= 1 or null; got 0" in fails(
        2, "train", "--config", config)


def test_more_topics_than_tokens_is_a_warning(tmp_path, example_store):
    config = write_config(tmp_path, example_store, model={"topics": 60000},
                          inference={**WARP, "iterations": 2, "burn_in": 1, "thin": 1},
                          training={"eval_every": 2, "checkpoint_every": 2})
    out = ok("train", "--config", config)
    assert "training tokens: most topics stay empty" in out.stderr
    assert np.isfinite(metrics(tmp_path / "run")[-1]["perplexity_point"])


def _driver(tmp_path, example_store):
    from topictk.corpus.store import CorpusStore
    from topictk.inference.gibbs.driver import GibbsDriver
    from topictk.inference.registry import load_config

    config = load_config(write_config(tmp_path, example_store, inference=WARP))
    return GibbsDriver(config, CorpusStore.open(example_store))


def _dense_counts(driver):
    """The dense counts' representation on the driver's corpus and schedule: the dense path
    that a WarpLDA chain's numbers are compared with, on the same z."""
    from topictk.inference.gibbs.counts import SparseLDACounts

    return SparseLDACounts(driver.counts.layout, driver.config.inference, driver.counts.steps,
                           driver.synced)


def _no_dense_counts(patch, driver):
    """Make any count of dense n_dk or n_kw fail the test."""
    def fail(state):
        pytest.fail("dense counts made")

    patch.setattr(driver, "counted", fail)
    patch.setattr(driver.counts, "dense", fail)


def test_sweeps_hold_no_dense_counts(tmp_path, example_store):
    """The start, the sweeps and the log joint make no n_dk or n_kw; reading them counts them
    from z."""
    driver = _driver(tmp_path, example_store)
    state = driver.init_state()
    assert state.ndk is None and state.nkw is None
    for t in range(3):
        driver.step(state, t)
        assert state.ndk is None and state.nkw is None
    assert np.isfinite(driver.objective(state))
    assert state.ndk is None and state.nkw is None      # the log joint needs no dense counts
    driver.counted(state).check_invariants(driver.doc_ptr, driver.words)
    driver.step(state, 3)
    assert state.ndk is None and state.nkw is None


def test_a_cluster_refuses_warp(tmp_path, example_store):
    """Refused before anything is sent to the cluster (the cluster object is not used)."""
    from topictk.errors import UsageError

    driver = _driver(tmp_path, example_store)
    with pytest.raises(UsageError, match="inference.sampler: warp does not run on a Dask "
                                         "cluster"):
        driver.use_cluster(object())


def test_auto_picks_warp_from_its_k_and_old_auto_runs_keep_their_sampler(
        tmp_path, example_store, monkeypatch):
    """From WARP_FROM_K ``sampler: auto`` is the warp chain, below it today's default chain;
    a run trained with auto before auto could pick warp (dense counts in its checkpoint)
    resumes with the sampler it had, bit for bit as if never stopped."""
    from topictk.inference.gibbs import driver as gibbs

    monkeypatch.setattr(gibbs, "WARP_FROM_K", 8)
    short = {"iterations": 12, "burn_in": 6, "thin": 6}
    training = {"eval_every": 6, "checkpoint_every": 6}
    runs = {}
    for name, topics, sampler in (("default6", 6, None), ("auto6", 6, "auto"),
                                  ("auto8", 8, "auto"), ("warp8", 8, "warp")):
        config = write_config(tmp_path, example_store, name=f"{name}.yaml",
                              output=str(tmp_path / name), model={"topics": topics},
                              inference={**short, "sampler": sampler}, training=training)
        ok("train", "--config", config, "-q")
        runs[name] = tmp_path / name
    assert_same_arrays(model_arrays(runs["default6"])[1], model_arrays(runs["auto6"])[1])
    assert_same_arrays(model_arrays(runs["auto8"])[1], model_arrays(runs["warp8"])[1])
    assert {m["sampler"] for m in metrics(runs["auto8"])} == {"warp"}
    # an auto run of K = 8 trained while auto meant SparseLDA there, then resumed
    monkeypatch.setattr(gibbs, "WARP_FROM_K", 100)
    for name in ("old", "old-halves"):
        config = write_config(tmp_path, example_store, name=f"{name}.yaml",
                              output=str(tmp_path / name), model={"topics": 8},
                              inference={**short, "sampler": "auto"},
                              training={"eval_every": 6, "checkpoint_every": 3})
        ok("train", "--config", config, "-q", *(["--set", "inference.iterations=9"]
                                               if name == "old-halves" else []))
    monkeypatch.setattr(gibbs, "WARP_FROM_K", 8)
    ok("train", "--config", tmp_path / "old-halves.yaml", "--resume", "-q")
    assert_same_run(tmp_path / "old", tmp_path / "old-halves", extra_evaluations=True)
    assert {m["sampler"] for m in metrics(tmp_path / "old-halves")} == {"sparse"}


def test_dmr_sem_auto_never_picks_warp():
    from topictk.inference.dmr import driver as dmr
    from topictk.inference.gibbs import driver as gibbs

    inference = {"sampler": "auto"}
    assert gibbs.resolved_sampler(inference, gibbs.WARP_FROM_K) == "warp"
    assert gibbs.resolved_sampler(inference, gibbs.WARP_FROM_K - 1) is None
    for topics in (gibbs.MH_FROM_K, 10**6):
        assert gibbs.resolved_sampler(inference, topics, dmr.DMRSEMDriver.WARP) == "mh"
    for topics in (gibbs.WARP_FROM_K, gibbs.MH_FROM_K - 1):
        assert gibbs.resolved_sampler(inference, topics, dmr.DMRSEMDriver.WARP) is None


@pytest.fixture(scope="module")
def protocol_b_store(tmp_path_factory):
    """The example corpus with 20 % of every training document held out (Protocol B)."""
    out = tmp_path_factory.mktemp("warp-b") / "store"
    ok("prepare", EXAMPLE, "--out", out, "--heldout-train-fraction", "0.2")
    return out


@pytest.mark.parametrize("saved", [False, True], ids=["current-state", "saved-samples"])
def test_samples_score_as_the_dense_path_without_dense_counts(tmp_path, protocol_b_store,
                                                               saved):
    """A WarpLDA sample (non-zero counts) is scored with the numbers of the dense path, bit
    for bit: the held-out perplexity of the test documents and Protocol B, for the current
    state and for saved samples; the log joint equals the dense formula's to rounding. None
    of it leaves dense counts on the state."""
    from topictk.corpus.store import CorpusStore
    from topictk.inference.base import EvaluationSet
    from topictk.inference.gibbs.driver import GibbsDriver
    from topictk.inference.registry import load_config
    from topictk.inference.sampled import SampledDriver
    from topictk.state.counts import dense_counts

    config = load_config(write_config(tmp_path, protocol_b_store, inference=WARP,
                                      model={"topics": 12}))
    store = CorpusStore.open(protocol_b_store)
    driver = GibbsDriver(config, store)
    state = driver.init_state()
    kept = []
    for t in range(6):
        driver.step(state, t)
        kept.append(driver.sample(state))
    samples = kept[-3:] if saved else None
    assert all("nkw_ptr" in s and "ndk_ptr" in s for s in kept)
    test = EvaluationSet.from_store(store)
    sparse = driver.heldout_probabilities(state, samples, test, 3)
    protocol_b = driver.train_heldout_probabilities(state, samples, store.train_heldout())
    objective = driver.objective(state)
    assert state.ndk is None and state.nkw is None
    dense = SampledDriver.averaged_fold_in(driver, state, samples, test, "test", 3)
    assert np.array_equal(sparse, dense) and np.all(np.isfinite(sparse))
    # the dense formulas: the driver of a count state, samples with dense n_dk
    dense_samples = [{k: v for k, v in s.items() if not k.startswith("ndk")}
                     | {"ndk": dense_counts(s, "ndk", driver.K)} for s in samples or []]
    driver.counted(state)
    warp, driver.counts = driver.counts, _dense_counts(driver)
    try:
        want_b = driver.train_heldout_probabilities(state, dense_samples or None,
                                                    store.train_heldout())
        want_objective = driver.objective(state)
    finally:
        driver.counts = warp
    assert np.array_equal(protocol_b, want_b) and np.all(np.isfinite(protocol_b))
    assert objective == pytest.approx(want_objective, rel=1e-12)


def test_top_words_and_topic_quality_without_dense_counts(tmp_path, example_store,
                                                         monkeypatch):
    """A WarpLDA chain's top words come from its non-zero counts in the order of a stable
    argsort of phi-hat (the words without a count last, by id), also when n reaches V, with
    phi-hat's values; `topictk topics` prints the same as from phi-hat, and the topic
    quality `topictk evaluate` reports from them equals the one from phi-hat."""
    from topictk.evaluation.coherence import quality_of_top_words, top_words, topic_quality
    from topictk.evaluation.topics import render_topics

    driver = _driver(tmp_path, example_store)
    state = driver.init_state()
    for t in range(4):
        driver.step(state, t)
    vocab = driver.store.vocab
    with monkeypatch.context() as patch:
        _no_dense_counts(patch, driver)
        got = {n: driver.ranked_words(state, n) for n in (10, 25, driver.V)}
        printed = {fmt: render_topics(driver, state, vocab, top=12, fmt=fmt)
                   for fmt in ("json", "tsv")}
    assert state.ndk is None and state.nkw is None
    phi = driver.topic_word(state)
    for n, (top, probabilities) in got.items():
        np.testing.assert_array_equal(top, top_words(phi, n))
        np.testing.assert_array_equal(probabilities, np.take_along_axis(phi, top, axis=1))
    driver.counts, warp = _dense_counts(driver), driver.counts   # the same state from phi-hat
    try:
        for fmt, text in printed.items():
            assert text == render_topics(driver, driver.counted(state), vocab, top=12, fmt=fmt)
    finally:
        driver.counts = warp
    train = driver.store.train()
    top = got[25][0]
    assert quality_of_top_words(top, train.indptr, train.indices, driver.V, 10, 25) == \
        topic_quality(driver.topic_word(state), train.indptr, train.indices, 10, 25)


def test_infer_without_dense_counts(tmp_path, example_store, monkeypatch):
    """`topictk infer`'s fold-in of a WarpLDA chain, with its current topics or a saved
    sample's, reads the non-zero counts and gives the dense path's proportions bit for bit."""
    from topictk.inference.base import FoldInPlan

    driver = _driver(tmp_path, example_store)
    state = driver.init_state()
    for t in range(4):
        driver.step(state, t)
    sample = driver.sample(state)
    n_docs = 40
    doc_ptr = driver.doc_ptr[:n_docs + 1].copy()
    words = driver.words[:doc_ptr[-1]].copy()

    def both():
        documents = SimpleNamespace(doc_ptr=doc_ptr, words=words)
        plan = FoldInPlan.for_infer(n_docs, sweeps=8, burn_in=4, seed=3, threads=2)
        return (driver.infer_proportions(state, doc_ptr, words, None, sweeps=8, burn_in=4,
                                         seed=3, threads=2),
                driver.fold_in(state, documents, plan, prior=state.alpha, sample=sample))

    with monkeypatch.context() as patch:
        _no_dense_counts(patch, driver)
        got = both()
    driver.counted(state)
    driver.counts, warp = _dense_counts(driver), driver.counts   # the dense path: phi-hat
    try:
        want = both()
    finally:
        driver.counts = warp
    for g, w in zip(got, want):
        assert np.all(np.isfinite(g))
        np.testing.assert_array_equal(g, w)


def test_word_counts_are_counted_once_per_sweep(tmp_path, example_store, monkeypatch):
    """The non-zero n_kw of z are counted once between two sweeps, whatever reads them
    (`topictk infer`'s blocks, the top words, a sample, the log joint), and counted again
    from the new z after a sweep."""
    import topictk.inference.gibbs.warp as warp

    driver = _driver(tmp_path, example_store)
    state = driver.init_state()
    driver.step(state, 0)
    counted = []
    real = warp.sparse_counts
    monkeypatch.setattr(warp, "sparse_counts", lambda *a: counted.append(a[-1]) or real(*a))
    doc_ptr, words = driver.doc_ptr[:31].copy(), driver.words[:driver.doc_ptr[30]].copy()
    for first in (0, 1):                          # two blocks of documents of topictk infer
        driver.infer_proportions(state, doc_ptr, words, None, sweeps=4, burn_in=2, seed=1,
                                 first_chunk=first)
    driver.ranked_words(state, 5)
    driver.sample(state)
    driver.objective(state)
    assert counted.count("nkw") == 1
    driver.step(state, 1)
    top, _ = driver.ranked_words(state, 5)
    assert counted.count("nkw") == 2
    np.testing.assert_array_equal(top, top_words(driver.topic_word(state), 5))


def test_learnt_alpha_without_dense_counts(tmp_path, example_store, monkeypatch):
    """model.alpha: auto on a WarpLDA chain: Minka's update reads the non-zero n_dk of z and
    gives the dense update's alpha bit for bit."""
    from topictk.corpus.store import CorpusStore
    from topictk.inference.gibbs.driver import GibbsDriver
    from topictk.inference.hyper import minka_alpha
    from topictk.inference.registry import load_config

    config = load_config(write_config(tmp_path, example_store,
                                      model={"topics": 6, "alpha": "auto", "beta": 0.01},
                                      inference={**WARP, "optimize_burn_in": 2,
                                                 "optimize_interval": 2}))
    driver = GibbsDriver(config, CorpusStore.open(example_store))
    state = driver.init_state()
    for t in range(3):
        driver.step(state, t)
    before = state.alpha.copy()
    with monkeypatch.context() as patch:
        _no_dense_counts(patch, driver)
        patch.setattr(driver.counts, "sync", lambda state: pytest.fail("dense counts made"))
        driver.step(state, 3)                       # sweep 4: the update is due
    assert state.ndk is None and not np.array_equal(state.alpha, before)
    # the same z with alpha before the update: the dense update from counted n_dk
    updated, state.alpha = state.alpha, before
    np.testing.assert_array_equal(updated, minka_alpha(driver.counted(state).ndk, before))
