"""The default schedule of the Gibbs drivers, the partitioned one (docs/algorithms.md §2.8),
through ``train``: threads never change the run, one block is the exact chain, a resumed run
equals an uninterrupted one, a run that saved ``inference.chunks: auto`` keeps its AD-LDA
chain when resumed, so does a run saved before ``inference.block_sync`` and ``blocks: auto``,
and the settings that do not fit together fail with one line.

The example corpus (13,000 tokens) is below the size from which the default cuts it in
blocks, so the tests that need the default's four blocks lower that size."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from tests.golden.cases import write_meta_corpus
from tests.integration._cli import (
    assert_same_arrays,
    comparable_metrics,
    fails,
    model_arrays,
    ok,
    samples,
    write_config,
)
from topictk.inference import base

SHORT = {"iterations": 30, "burn_in": 10, "thin": 10}


@pytest.fixture
def small_auto(monkeypatch):
    """The default's four blocks (blocks: null's two, chunks: auto's two chunks) on the example
    corpus."""
    monkeypatch.setattr(base, "AUTO_CHUNK_TOKENS", 1)


def _train(tmp_path: Path, store: Path, name: str, inference: dict, *args: str,
           **sections) -> Path:
    config = write_config(tmp_path, store, name=f"{name}.yaml", output=str(tmp_path / name),
                          inference={**SHORT, **inference}, **sections)
    ok("train", "--config", config, "-q", *args)
    return tmp_path / name


def _same_run(a: Path, b: Path) -> None:
    ha, arrays_a = model_arrays(a)
    hb, arrays_b = model_arrays(b)
    assert_same_arrays(arrays_a, arrays_b)
    assert ha["state"] == hb["state"] and ha["streams"] == hb["streams"]
    assert comparable_metrics(a) == comparable_metrics(b)
    sa, sb = samples(a), samples(b)
    assert list(sa) == list(sb) and sa
    for name in sa:
        assert_same_arrays(sa[name], sb[name])


def _z(run: Path) -> np.ndarray:
    return model_arrays(run)[1]["z"]


@pytest.mark.parametrize("sparse", [True, False], ids=["sparse", "dense"])
def test_default_blocks_at_one_and_two_threads_are_one_run(tmp_path, example_store,
                                                           small_auto, sparse):
    one = _train(tmp_path, example_store, "t1", {"sparse": sparse}, training={"threads": 1})
    two = _train(tmp_path, example_store, "t2", {"sparse": sparse}, training={"threads": 2})
    _same_run(one, two)
    # the default is four flowing blocks: neither the exact chain, nor AD-LDA with two chunks,
    # nor the same blocks taking n_k at every epoch
    explicit = _train(tmp_path, example_store, "b4", {"sparse": sparse, "blocks": 4,
                                                      "block_sync": "sweep"})
    _same_run(one, explicit)
    exact = _train(tmp_path, example_store, "exact", {"sparse": sparse, "chunks": 1})
    adlda = _train(tmp_path, example_store, "adlda", {"sparse": sparse, "chunks": "auto"})
    epoch = _train(tmp_path, example_store, "epoch", {"sparse": sparse, "block_sync": "epoch"})
    for other in (exact, adlda, epoch):
        assert not np.array_equal(_z(one), _z(other))


def test_run_saved_before_block_sync_resumes_its_own_chain(tmp_path, example_store,
                                                          small_auto):
    """A run of an earlier release saved ``blocks: null`` and ``sampler: null`` (then the
    defaults: 2 blocks, SparseLDA) and no ``block_sync`` (n_k at every epoch); resumed by its
    config, which sets none of them, it continues that chain."""
    before = {"blocks": None, "block_sync": "epoch", "sampler": None}
    straight = _train(tmp_path, example_store, "straight", before,
                      training={"checkpoint_every": 10})
    config = write_config(tmp_path, example_store, name="old.yaml",
                          output=str(tmp_path / "old"), inference=SHORT,
                          training={"checkpoint_every": 10})
    ok("train", "--config", config, "-q", "--set", "inference.iterations=20",
       "--set", "inference.blocks=null", "--set", "inference.block_sync=epoch",
       "--set", "inference.sampler=null")
    saved = tmp_path / "old" / "config.yaml"
    data = yaml.safe_load(saved.read_text())
    del data["inference"]["block_sync"]     # as an earlier release wrote it
    saved.write_text(yaml.safe_dump(data, sort_keys=False))
    resumed = ok("train", "--config", config, "--resume", "--set", "training.threads=2")
    assert "inference.block_sync: epoch" in resumed.stderr
    assert "inference.blocks: null, the default then" in resumed.stderr
    _same_run(straight, tmp_path / "old")
    # the same run resumed under today's defaults would have been another chain
    today = _train(tmp_path, example_store, "today", {}, training={"checkpoint_every": 10})
    assert not np.array_equal(_z(today), _z(straight))


def test_three_blocks_at_one_and_three_threads_are_one_run(tmp_path, example_store):
    one = _train(tmp_path, example_store, "t1", {"blocks": 3})
    three = _train(tmp_path, example_store, "t3", {"blocks": 3}, training={"threads": 3})
    _same_run(one, three)


def test_one_block_is_the_exact_chain(tmp_path, example_store):
    _same_run(_train(tmp_path, example_store, "blocks", {"blocks": 1}),
              _train(tmp_path, example_store, "chunks", {"chunks": 1}))


def test_dmr_default_blocks_at_one_and_two_threads_are_one_run(tmp_path, small_auto):
    """DMR's sweeps (a prior per document) by the default schedule."""
    corpus = write_meta_corpus(tmp_path / "meta.jsonl")
    store = tmp_path / "store"
    ok("prepare", corpus, "--out", store, "--meta", "group,score")
    inference = {"algorithm": "dmr-sem", "optimize_burn_in": 4, "optimize_interval": 5}
    one = _train(tmp_path, store, "t1", inference, model={"topics": 6, "alpha": 0.1,
                                                          "beta": 0.01})
    two = _train(tmp_path, store, "t2", inference, model={"topics": 6, "alpha": 0.1,
                                                          "beta": 0.01},
                 training={"threads": 2})
    _same_run(one, two)


def test_resumed_default_run_equals_uninterrupted(tmp_path, example_store, small_auto):
    straight = _train(tmp_path, example_store, "straight", {},
                      training={"checkpoint_every": 10})
    config = write_config(tmp_path, example_store, name="halves.yaml",
                          output=str(tmp_path / "halves"), inference=SHORT,
                          training={"checkpoint_every": 10})
    ok("train", "--config", config, "-q", "--set", "inference.iterations=20")
    ok("train", "--config", config, "-q", "--resume", "--set", "training.threads=2")
    _same_run(straight, tmp_path / "halves")


def test_run_saved_with_chunks_auto_resumes_its_own_chain(tmp_path, example_store, small_auto):
    """A run of an earlier release saved ``chunks: auto`` (AD-LDA, then the default) and no
    ``blocks``; resumed by its config, which sets neither, it continues with AD-LDA."""
    straight = _train(tmp_path, example_store, "straight", {"chunks": "auto"},
                      training={"checkpoint_every": 10})
    config = write_config(tmp_path, example_store, name="old.yaml",
                          output=str(tmp_path / "old"), inference=SHORT,
                          training={"checkpoint_every": 10})
    ok("train", "--config", config, "-q", "--set", "inference.iterations=20",
       "--set", "inference.chunks=auto")
    saved = tmp_path / "old" / "config.yaml"
    data = yaml.safe_load(saved.read_text())
    del data["inference"]["blocks"]         # as an earlier release wrote it
    saved.write_text(yaml.safe_dump(data, sort_keys=False))
    resumed = ok("train", "--config", config, "--resume")
    assert "the run samples by AD-LDA chunks (inference.chunks: auto)" in resumed.stderr
    _same_run(straight, tmp_path / "old")


@pytest.mark.parametrize("inference, args, expected", [
    ({"chunks": 2, "blocks": 2}, [],
     "inference.chunks = 2 and inference.blocks = 2 choose two different parallel schedules; "
     "set one of them and leave the other out ("),
    ({"chunks": "auto", "blocks": 1}, [],
     "inference.chunks = auto and inference.blocks = 1 choose two different parallel "
     "schedules"),
    ({"blocks": 0}, [], "inference.blocks must be"),
    ({"sampler": "mh", "blocks": 2}, [],
     "inference.blocks does not apply to the Metropolis-Hastings sampler (inference.sampler), "
     "which runs AD-LDA chunks; set inference.chunks instead ("),
    ({}, ["--dask-workers", "2"],
     "training.dask_workers: a Dask cluster runs AD-LDA chunks, not the default partitioned "
     "schedule (inference.blocks); set inference.chunks (e.g. 2, the same chain on one "
     "machine) to train on a cluster ("),
])
def test_schedules_that_do_not_fit_fail_with_one_line(tmp_path, example_store, inference, args,
                                                      expected):
    config = write_config(tmp_path, example_store, inference={**SHORT, **inference})
    message = fails(2, "train", "--config", config, *args)
    assert message.startswith(expected), message
    assert not (tmp_path / "run").exists()


def test_threads_beyond_the_blocks_are_named(tmp_path, example_store):
    config = write_config(tmp_path, example_store, inference={**SHORT, "blocks": 1},
                          training={"threads": 2})
    out = ok("train", "--config", config, "-q")
    assert ("topictk: training.threads = 2 but inference.blocks = 1: only 1 thread(s) can "
            "work; set inference.blocks >= threads") in out.stderr
