"""Every default resolves the same whether a run trains in process or on a Dask cluster: the
same config gives the same metrics, line for line, on one machine and on a local cluster of
two worker processes."""
from __future__ import annotations

import pytest

from tests.integration._cli import EXAMPLE, metrics, ok, write_config

# fields of a metrics line that depend on the machine and the moment, not on the chain:
# wall-clock seconds (training, evaluation, and the cluster's send, compute and merge
# times), and the cluster's own traffic and worker memory, which a run in process does not
# have; everything else (steps, counts, perplexities, log joint, the sampler, fallbacks)
# must be equal
TIMING = {"train_seconds", "eval_seconds"}


def _chain_fields(line: dict) -> dict:
    return {key: value for key, value in line.items()
            if key not in TIMING and not key.startswith("cluster_")}


@pytest.fixture(scope="module")
def half_test_store(tmp_path_factory):
    """The example corpus with half of its documents held out for testing (170): enough
    that ``evaluation.curve_docs: auto`` scores a part of them, not all."""
    out = tmp_path_factory.mktemp("half-test") / "store"
    ok("prepare", EXAMPLE, "--out", out, "--test-docs", "0.5")
    return out


# defaults left to resolve: evaluation.curve_docs and curve_fold_in_sweeps, eval_every auto,
# the sampler (sparse: auto); AD-LDA chunks are named, as a cluster run must
RUN = {"model": {"topics": 6, "alpha": 0.1, "beta": 0.01},
       "inference": {"algorithm": "gibbs", "iterations": 12, "burn_in": 6, "thin": 3,
                     "chunks": 3, "sparse": "auto"},
       "training": {"seed": 3, "eval_every": "auto", "checkpoint_every": 6}}


def test_a_cluster_run_records_the_metrics_of_the_same_run_in_process(half_test_store,
                                                                      tmp_path):
    pytest.importorskip("distributed")
    here, there = tmp_path / "here", tmp_path / "there"
    here.mkdir()
    there.mkdir()
    ok("train", "--config", write_config(here, half_test_store, **RUN), "--quiet")
    ok("train", "--config", write_config(there, half_test_store, **RUN), "--quiet",
       "--dask-workers", "2")
    import yaml
    resolved = [yaml.safe_load((d / "run" / "config.yaml").read_text()) for d in (here, there)]
    for config in resolved:
        config["training"].pop("dask_workers")
        config.pop("output")
    assert resolved[0] == resolved[1]
    assert 0 < resolved[0]["evaluation"]["curve_docs"] < 170    # a part of the test set
    lines_here, lines_there = metrics(here / "run"), metrics(there / "run")
    assert len(lines_here) == len(lines_there) > 1
    for a, b in zip(lines_here, lines_there):
        assert _chain_fields(a) == _chain_fields(b)
        assert "perplexity_point" in a
