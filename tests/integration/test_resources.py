"""Bounded resources: a run that would not fit in the memory allowed is refused before
anything is written, with an estimate close to what it really holds; running out of memory
anyway says which run and what to change; local Dask workers are bounded by the machine,
and a scheduler address is checked whole before any connection, the messages naming the
command's own options and the real cause."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

from tests.integration._cli import REPO, fails, ok, write_config
from topictk import limits

# SparseLDA named: the default at this K (sampler: auto) is WarpLDA's, which fits
BIG = {"model": {"topics": 20000}, "inference": {"chunks": 2, "sampler": "sparse"}}


def test_a_run_the_dense_count_let_through_is_refused_before_anything_is_written(
        example_store, tmp_path, monkeypatch):
    """K = 20,000 on the example corpus: its dense arrays alone (what the check counted) fit
    in 400 MiB, but the counts, SparseLDA's lists and the evaluation's phi-hat do not."""
    from topictk.config.loader import _store_counts, dense_arrays
    counts = _store_counts(str(example_store))
    assert limits.dense_bytes(dense_arrays({"topics": 20000}, counts)) < 400 * 2**20
    monkeypatch.setenv("TOPICTK_MEMORY_LIMIT", "400M")
    config = write_config(tmp_path, example_store, **BIG)
    message = fails(2, "train", "--config", config)
    assert message.startswith("model.topics = 20000 needs about 876 MiB of memory (phi-hat "
                              "2 x 1,737 x 20,000 x 8 B = 530 MiB")
    assert "more than the 400 MiB allowed (the TOPICTK_MEMORY_LIMIT=400M setting); lower " \
           "model.topics, choose inference.sampler: warp" in message
    assert not (tmp_path / "run").exists()
    ok("train", "--config", config, "--quiet", "--set", "model.topics=6")   # a cheap run
    ok("train", "--config", config, "--quiet", "--force", "--set", "inference.sampler=warp",
       "--set", "inference.iterations=4", "--set", "inference.burn_in=2",
       "--set", "inference.thin=1", "--set", "training.eval_every=2")


def test_the_limit_is_the_smallest_of_memory_ulimit_and_cgroup(monkeypatch):
    import resource
    monkeypatch.delenv("TOPICTK_MEMORY_LIMIT", raising=False)
    monkeypatch.setattr(limits, "available_memory", lambda: 8 * 2**30)
    monkeypatch.setattr(limits, "_cgroup_room", lambda: None)
    monkeypatch.setattr(resource, "getrlimit", lambda which: (resource.RLIM_INFINITY,) * 2)
    assert limits.memory_limit() == (8 * 2**30, "memory available")
    size = limits._own_usage("VmSize")
    monkeypatch.setattr(resource, "getrlimit", lambda which: (
        (size + 2**30, size + 2**30) if which == resource.RLIMIT_AS
        else (resource.RLIM_INFINITY,) * 2))
    room, source = limits.memory_limit()
    assert room <= 2**30 and source.endswith("(ulimit -v)")
    monkeypatch.setattr(limits, "_cgroup_room", lambda: 2**29)
    assert limits.memory_limit()[1].endswith("memory cgroup (memory.max)")
    assert "more than the 512 MiB allowed (the room left in this process's memory cgroup " \
           "(memory.max))" in limits.memory_shortfall([("x", (2**27,), 8)])


def test_the_estimate_is_close_to_the_memory_a_run_grows_by(example_store, tmp_path):
    """Trained in a process of its own: its peak resident memory grows by the estimate, give
    or take a third (the arrays, not the interpreter, dominate at K = 8,000)."""
    config = write_config(tmp_path, example_store, model={"topics": 8000},
                          inference={"iterations": 2, "burn_in": 1, "thin": 1, "chunks": 2,
                                     "sampler": "sparse"},
                          training={"eval_every": 2, "checkpoint_every": 2})
    script = textwrap.dedent(f"""
        from topictk.inference.registry import load_config
        from topictk.training.run import train
        config = load_config({str(config)!r})
        with open("/proc/self/status") as f:
            before = next(int(l.split()[1]) * 1024 for l in f if l.startswith("VmRSS:"))
        train(config, quiet=True)
        # VmHWM, not getrusage's ru_maxrss: the latter keeps the peak of the process this
        # one was started from (vfork), which in a long test run is far above ours
        with open("/proc/self/status") as f:
            peak = next(int(l.split()[1]) * 1024 for l in f if l.startswith("VmHWM:"))
        print(config.memory_estimate, peak - before)
    """)
    out = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True,
                         text=True, timeout=120, check=True).stdout
    estimate, grown = map(int, out.split())
    assert estimate > 200 * 2**20
    assert 0.75 < grown / estimate < 1.33, (estimate, grown)


def test_running_out_of_memory_names_the_run_its_estimate_and_the_fix(
        example_store, tmp_path, monkeypatch):
    from topictk.inference.gibbs.driver import GibbsDriver

    def too_large(self, state):
        return np.empty((2**36, 2**10))         # numpy's _ArrayMemoryError

    monkeypatch.setattr(GibbsDriver, "objective", too_large)
    config = write_config(tmp_path, example_store)
    message = fails(1, "train", "--config", config)
    assert message.startswith(f"{tmp_path / 'run'}: training K = 6: out of memory "
                              f"(estimated at about ")
    assert "allowed by the" in message
    assert message.endswith("lower model.topics, choose inference.sampler: warp (no K x V or "
                            "D x K arrays), set training.eval_every: 0 (no phi-hat during "
                            "training), or free memory and train again (with --resume from "
                            "its last checkpoint, if it has one)")
    monkeypatch.undo()
    ok("train", "--config", config, "--quiet", "--force")
    monkeypatch.setattr("topictk.evaluation.run.evaluate_loaded",
                        lambda run, left_to_right, **options: np.empty((2**36, 2**10)))
    message = fails(1, "evaluate", tmp_path / "run")
    assert message.startswith(f"{tmp_path / 'run'}: evaluating K = 6: out of memory (")
    assert message.endswith("; free memory and evaluate again, or evaluate on a machine with "
                            "more")


def test_local_workers_are_bounded_by_the_cores_and_the_memory(example_store, tmp_path,
                                                               monkeypatch):
    config = write_config(tmp_path, example_store, inference={"chunks": 2})
    cap = limits.max_threads()
    message = fails(2, "train", "--config", config, "--dask-workers", "1000")
    assert message == (f"--dask-workers: 1,000 worker processes are more than this machine "
                       f"can run (at most {cap}: {limits.cores()} cores x 4 single-thread "
                       f"workers); give at most {cap}, or --scheduler to use a cluster of "
                       f"more machines")
    assert fails(2, "train", "--config", config, "--set", "training.dask_workers=1000"
                 ).startswith("training.dask_workers: 1,000 worker processes are more")
    assert fails(2, "evaluate", tmp_path / "run", "--dask-workers", "1000").startswith(
        "--dask-workers: 1,000 worker processes")
    monkeypatch.setenv("TOPICTK_MEMORY_LIMIT", "250M")
    assert "(at most 2: 250 MiB of memory (TOPICTK_MEMORY_LIMIT=250M setting) at 100 MiB a " \
           "worker)" in fails(2, "train", "--config", config, "--dask-workers", "3")
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("address, problem", [
    ("foo://127.0.0.1:8786", "'foo://127.0.0.1:8786' has the scheme 'foo', which Dask does "
                             "not connect by; use one of tcp://, tls://, ws://, wss://, ucx://"),
    ("tcp://127.0.0.1:99999", "'tcp://127.0.0.1:99999' has the port '99999', which is not a "
                              "port number from 1 to 65535"),
    ("tcp://127.0.0.1:0", "has the port '0', which is not a port number"),
    ("tcp://127.0.0.1:-1", "has the port '-1', which is not a port number"),
    ("tcp://host:http", "has the port 'http', which is not a port number"),
    ("tcp://127.0.0.1", "names no port; add the scheduler's port"),
    ("tcp://:8786", "names no host"),
])
def test_a_scheduler_address_is_checked_whole_before_connecting(example_store, tmp_path,
                                                                 address, problem):
    config = write_config(tmp_path, example_store, inference={"chunks": 2})
    assert problem in fails(2, "train", "--config", config, "--scheduler", address)
    assert fails(2, "train", "--config", config, "--set", f"training.scheduler={address}"
                 ).startswith(f"training.scheduler '{address}' ")
    assert fails(2, "evaluate", tmp_path / "run", "--scheduler", address).startswith(
        f"--scheduler '{address}' ")
    assert not (tmp_path / "run").exists()


def test_evaluate_on_a_cluster_names_its_own_option_and_work(example_store, tmp_path):
    pytest.importorskip("distributed")
    config = write_config(tmp_path, example_store, training={"cluster_timeout": 1})
    ok("train", "--config", config, "--quiet")
    message = fails(1, "evaluate", tmp_path / "run", "--scheduler", "tcp://127.0.0.1:9")
    assert message.startswith("cannot reach the Dask scheduler at tcp://127.0.0.1:9 within 1 s")
    assert message.endswith("start it with 'dask scheduler' or correct --scheduler")


class _Client:
    def __init__(self, status):
        self.status = status


def test_a_lost_scheduler_is_reported_as_such_not_as_a_lost_worker():
    """Work lost because the scheduler went away (the client is reconnecting and does not
    get through within the timeout) stops with the scheduler named, at the first loss."""
    from topictk.inference.cluster import Cluster, ClusterLost, WorkerLost, with_recovery
    cluster = Cluster.__new__(Cluster)
    cluster.client, cluster.timeout, cluster.scheduler = _Client("connecting"), 0.2, "tcp://s:1"
    cluster.work = "evaluating run"
    tries = []

    def attempt():
        tries.append(1)
        raise WorkerLost("a Dask worker was lost during the fold-in (CommClosedError)")

    cluster.client.status = "running"           # connected: check_connected lets it try
    with pytest.raises(ClusterLost) as info:
        with_recovery(cluster, "again", lambda: (setattr(cluster.client, "status",
                                                         "connecting"), attempt())[1])
    assert str(info.value) == ("lost the connection to the Dask scheduler at tcp://s:1 while "
                               "evaluating run")
    assert tries == [1]
