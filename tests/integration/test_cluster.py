"""Training on a Dask cluster of real worker processes gives the chain of one machine with
the same AD-LDA chunks, bit for bit; a resumed run on a cluster of another size continues it;
bad cluster settings fail with one line."""
from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from tests.integration._cli import (
    EXAMPLE,
    lose_a_worker,
    assert_same_arrays,
    comparable_metrics,
    fails,
    metrics,
    model_arrays,
    ok,
    samples,
    write_config,
)

# AD-LDA with 5 chunks over 2 workers (shards of 3 and 2 chunks), the sampler chosen per
# sweep, alpha learnt (the driver gathers ndk for it), samples and checkpoints on the way
RUN = {"model": {"topics": 6, "alpha": "auto", "beta": 0.01},
       "inference": {"algorithm": "gibbs", "iterations": 24, "burn_in": 12, "thin": 4,
                     "chunks": 5, "sparse": "auto", "optimize_burn_in": 8,
                     "optimize_interval": 4},
       "training": {"seed": 5, "eval_every": 8, "checkpoint_every": 8, "keep_checkpoints": 5}}


def _checkpoints(run_dir):
    from topictk.rundir.checkpoint import load_arrays
    return {p.name: load_arrays(p) for p in sorted((run_dir / "checkpoints").glob("*.npz"))}


def _same_run(a, b) -> None:
    header_a, arrays_a = model_arrays(a)
    header_b, arrays_b = model_arrays(b)
    assert_same_arrays(arrays_a, arrays_b)
    for key in ("state", "streams", "corpus_id", "status"):
        assert header_a[key] == header_b[key], key
    assert comparable_metrics(a) == comparable_metrics(b)
    got_a, got_b = samples(a), samples(b)
    assert set(got_a) == set(got_b) and got_a
    for name in got_a:
        assert_same_arrays(got_a[name], got_b[name])


def _same_checkpoints(a, b) -> None:
    """The same checkpoints, with the same arrays and random streams."""
    for (name, (ha, aa)), (nb, (hb, ab)) in zip(_checkpoints(a).items(),
                                                _checkpoints(b).items()):
        assert name == nb
        assert ha["streams"] == hb["streams"]
        assert_same_arrays(aa, ab)


def _same_fold_ins_on_the_cluster(run, documents=EXAMPLE) -> None:
    """evaluate and infer of ``documents`` (their fold-ins on 2 workers) give the one-machine
    output."""
    here = json.loads(ok("evaluate", run, "--json").stdout)
    there = json.loads(ok("evaluate", run, "--json", "--dask-workers", "2").stdout)
    assert here == there
    here = ok("infer", run, documents).stdout
    there = ok("infer", run, documents, "--dask-workers", "2").stdout
    assert here == there and here


def _lost_in_piece(monkeypatch, piece, failing: int) -> dict:
    """Report a worker lost in the ``failing``-th map of ``piece`` over the workers (0:
    never); returns the count of its maps so far."""
    from topictk.inference import cluster
    original = cluster._map_once
    calls = {"n": 0}

    def flaky(on, task):
        if task.piece is piece:
            calls["n"] += 1
            if calls["n"] == failing:
                raise cluster.WorkerLost("a Dask worker was lost (simulated)")
        return original(on, task)

    monkeypatch.setattr(cluster, "_map_once", flaky)
    return calls


@pytest.fixture(scope="module")
def in_process(example_store, tmp_path_factory):
    directory = tmp_path_factory.mktemp("in-process")
    config = write_config(directory, example_store, **RUN)
    ok("train", "--config", config, "--quiet")
    return directory / "run"


def test_two_worker_processes_give_the_one_machine_chain(example_store, in_process, tmp_path):
    pytest.importorskip("distributed")
    config = write_config(tmp_path, example_store, **RUN)
    ok("train", "--config", config, "--dask-workers", "2", "--quiet")
    run = tmp_path / "run"
    _same_run(in_process, run)
    _same_checkpoints(in_process, run)
    _same_fold_ins_on_the_cluster(in_process)


def test_three_worker_processes_relay_the_counts_and_give_the_one_machine_chain(
        example_store, in_process, tmp_path):
    """Three shards: the workers add their changes in a tree ((0 + 1) + 2) and hand the total
    down one (0 -> 1, 0 -> 2); every copy of n_kw stays the driver's, so the run is the
    one-machine run. The driver sends no n_kw after the shards went out: what it sends per
    sweep is the sweep's settings, far less than a copy of n_kw per worker."""
    pytest.importorskip("distributed")
    config = write_config(tmp_path, example_store, **RUN)
    ok("train", "--config", config, "--dask-workers", "3", "--quiet")
    run = tmp_path / "run"
    _same_run(in_process, run)
    last = metrics(run)[-1]
    header, arrays = model_arrays(run)
    nkw_bytes = arrays["nkw"].nbytes
    sweeps = RUN["inference"]["iterations"]
    # the one-off distribution (z, ndk and n_kw to each of 3 shards, again after each
    # gather that alpha's update made stale) is all the n_kw that goes out
    assert last["cluster_bytes_sent"] < 3 * nkw_bytes * (1 + sweeps // 4) + 2**20
    assert last["cluster_bytes_workers"] > 0


def test_resume_on_a_cluster_of_another_size_continues_the_chain(example_store, in_process,
                                                                   tmp_path):
    pytest.importorskip("distributed")
    first = {**RUN, "inference": {**RUN["inference"], "iterations": 16}}
    config = write_config(tmp_path, example_store, **first)
    ok("train", "--config", config, "--dask-workers", "2", "--quiet")
    ok("train", "--config", config, "--resume", "--dask-workers", "1", "--quiet",
       "--set", "inference.iterations=24")
    _same_run(in_process, tmp_path / "run")


def test_unreachable_scheduler_fails_within_the_timeout(example_store, tmp_path):
    pytest.importorskip("distributed")
    config = write_config(tmp_path, example_store, training={"cluster_timeout": 1},
                          inference={"chunks": 2})
    message = fails(1, "train", "--config", config, "--scheduler", "tcp://127.0.0.1:9")
    assert "cannot reach the Dask scheduler at tcp://127.0.0.1:9 within 1 s" in message
    assert not (tmp_path / "run" / "model.npz").exists()


@pytest.mark.parametrize("args, expected", [
    (["--dask-workers", "2", "--scheduler", "tcp://h:1"], "exclude each other"),
    (["--scheduler", "nonsense"], "--scheduler 'nonsense' names no port"),
])
def test_bad_cluster_options(example_store, tmp_path, args, expected):
    config = write_config(tmp_path, example_store)
    text = config.read_text(encoding="utf-8")     # keys every algorithm takes
    config.write_text(text.replace("  burn_in: 20\n", "").replace("  thin: 10\n", ""),
                      encoding="utf-8")
    message = fails(2, "train", "--config", config, *args)
    assert expected in message


def test_an_algorithm_off_the_cluster_names_those_on_it(example_store, tmp_path, monkeypatch):
    """Every algorithm runs on a cluster today; one that did not would be refused in one line
    naming those that do."""
    from topictk.inference.dlda.driver import DLDAGibbsDriver
    monkeypatch.setattr(DLDAGibbsDriver, "traits", DLDAGibbsDriver.traits.but(cluster=False))
    message = fails(2, "train", "--config", _deep_gibbs_config(tmp_path, example_store),
                    "--dask-workers", "2")
    assert message.startswith(
        "training.dask_workers: inference.algorithm dlda-gibbs does not run on a Dask cluster; "
        "the algorithms that do: cvb, cvb0, dlda-sgrld, dmr-sem, dmr-sgrld, dtm-sgld, gibbs, "
        "hsvg, ovb, pem, sgrld, tlasgr, tlfsgr, vb (")


def test_evaluate_refuses_the_cluster_for_other_algorithms(example_store, tmp_path,
                                                           monkeypatch):
    """Every algorithm's runs are evaluated and applied on a cluster today; a run of one that
    were not would be refused in one line naming those that are."""
    from topictk.inference.dlda.driver import DLDAGibbsDriver
    ok("train", "--config", _deep_gibbs_config(tmp_path, example_store), "--quiet")
    monkeypatch.setattr(DLDAGibbsDriver, "traits",
                        DLDAGibbsDriver.traits.but(cluster_fold_in=False))
    message = fails(2, "evaluate", tmp_path / "run", "--dask-workers", "2")
    assert message == ("--dask-workers: dlda-gibbs runs are evaluated on one machine; the "
                       "algorithms whose runs are evaluated on a Dask cluster: cvb, cvb0, "
                       "dlda-sgrld, dmr-sem, dmr-sgrld, dtm-sgld, gibbs, hsvg, ovb, pem, "
                       "sgrld, tlasgr, tlfsgr, vb")
    assert "dlda-gibbs runs are applied to new documents on one machine" in fails(
        2, "infer", tmp_path / "run", EXAMPLE, "--dask-workers", "2")


def test_without_dask_the_options_name_the_extra(example_store, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)     # import distributed fails
    config = write_config(tmp_path, example_store, inference={"chunks": 2})
    message = fails(2, "train", "--config", config, "--dask-workers", "2")
    assert message == 'training.dask_workers needs Dask, an optional extra: pip install ' \
                      '"topictk[dask]"'


def test_a_worker_that_finds_another_store_is_named(example_store, tmp_path):
    from topictk.corpus.store import CorpusStore
    from topictk.inference.cluster import _check_worker
    store = CorpusStore.open(example_store)
    import topictk
    assert _check_worker(str(example_store), store.corpus_id, topictk.__version__) is None
    problem = _check_worker(str(example_store), "0" * 64, topictk.__version__)
    assert "finds another corpus at" in problem and str(example_store) in problem
    assert "cannot open the corpus store" in _check_worker(str(tmp_path), store.corpus_id,
                                                           topictk.__version__)
    assert "runs topictk" in _check_worker(str(example_store), store.corpus_id, "0.0.0")


def test_count_changes_travel_in_their_smaller_form():
    from topictk.inference.gibbs.shards import add_change, change_nbytes, encode_change
    rng = np.random.default_rng(0)
    for density, kind in ((0.01, "sparse"), (0.9, "dense")):
        change = (rng.random((500, 8)) < density) * rng.integers(-3, 4, (500, 8))
        change = change.astype(np.int32)
        encoded = encode_change(change)
        assert encoded[0] == kind
        # one byte a value (they fit in int8), and a sparse change one more for its gap
        assert encoded[-1].dtype == np.int8
        assert change_nbytes(encoded) <= (2 * np.count_nonzero(change) + 4 * 2 if
                                          kind == "sparse" else change.size)
        target = np.ones((500, 8), dtype=np.int32)
        add_change(target, encoded)
        assert np.array_equal(target, 1 + change)


def _train_killing_a_worker(distributed, config, workers: int, started) -> tuple:
    """``topictk train --config CONFIG`` on a local cluster of ``workers`` worker processes,
    the first of them killed (SIGKILL) once ``started()`` is true: (the run's exit status, its
    stderr, every remaining worker's count of shards still held)."""
    with distributed.LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                  dashboard_address=":0", silence_logs=logging.CRITICAL) as local, \
            distributed.Client(local) as client:
        pids = client.run(os.getpid)
        proc = subprocess.Popen([sys.executable, "-m", "topictk", "train", "--config",
                                 str(config), "--scheduler", local.scheduler_address, "--quiet"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 120
        while not started():
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.01)
        os.kill(pids[min(pids)], signal.SIGKILL)
        _, err = proc.communicate(timeout=300)
        # the workers, which outlive the run, hold none of its shards any more
        held = client.run(lambda: len(__import__("topictk.inference.cluster",
                                                 fromlist=["_RESIDENT"])._RESIDENT))
    return proc.returncode, err, held


def test_a_worker_killed_mid_run_changes_nothing(example_store, tmp_path):
    """A worker process killed in the middle of the run: the driver goes back to the last
    state it held whole, sends the shards out again and redoes the sweeps since then; the
    run completes with the model of the uninterrupted one-machine run."""
    distributed = pytest.importorskip("distributed")
    run = {**RUN, "inference": {**RUN["inference"], "iterations": 200, "burn_in": 100,
                                "thin": 20, "optimize_interval": 10},
           "training": {**RUN["training"], "eval_every": 20, "checkpoint_every": 50}}
    reference = write_config(tmp_path, example_store, name="reference.yaml",
                             output=str(tmp_path / "reference"), **run)
    ok("train", "--config", reference, "--quiet")
    config = write_config(tmp_path, example_store, **run)
    metrics_path = tmp_path / "run" / "metrics.jsonl"
    returncode, err, held = _train_killing_a_worker(
        distributed, config, 2, lambda: metrics_path.exists() and metrics_path.read_text().strip())
    assert returncode == 0, err
    # the sweeps since the last gather redone, or none when the kill came right after one
    assert "a Dask worker was lost" in err
    assert held and set(held.values()) == {0}
    _same_run(tmp_path / "reference", tmp_path / "run")


def _free_port() -> int:
    import socket
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_for_metrics(proc, run_dir, lines: int, timeout: float = 120) -> None:
    """Until the run has written ``lines`` evaluations (the process still running)."""
    path = run_dir / "metrics.jsonl"
    deadline = time.monotonic() + timeout
    while not (path.exists() and path.read_text(encoding="utf-8").count("\n") >= lines):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.02)


def _newest_checkpoint(run_dir):
    from topictk.rundir.checkpoint import list_checkpoints, load_arrays
    step, path = list_checkpoints(run_dir / "checkpoints")[-1]
    return step, load_arrays(path)[0]


def _resumed_equals_uninterrupted(example_store, tmp_path, run: dict, step: int,
                                  where: tuple = ()) -> None:
    """The interrupted run resumed to ``step`` + 4 (on one machine, or with the options
    ``where``) is the uninterrupted run on one machine."""
    end = step + 4
    config = tmp_path / "exp.yaml"
    ok("train", "--config", config, "--resume", "--quiet", *where, "--set",
       f"inference.iterations={end}")
    reference = write_config(tmp_path, example_store, name="reference.yaml",
                             output=str(tmp_path / "reference"),
                             **{**run, "inference": {**run["inference"], "iterations": end}})
    ok("train", "--config", reference, "--quiet")
    _same_run(tmp_path / "reference", tmp_path / "run")


def _dask_processes(workers: int) -> tuple[str, list]:
    """A scheduler and ``workers`` single-thread workers, each a process of its own on
    127.0.0.1: the scheduler's address and the processes (the scheduler first)."""
    address = f"tcp://127.0.0.1:{_free_port()}"
    processes = [subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_scheduler",
                                   "--host", "127.0.0.1", "--port", address.rsplit(":", 1)[1],
                                   "--dashboard-address", ":0"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    processes += [subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_worker",
                                    address, "--nthreads", "1", "--no-nanny"],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                  for _ in range(workers)]
    return address, processes


def _train_until(config, address: str, done) -> subprocess.Popen:
    """``topictk train`` of ``config`` on the scheduler at ``address``, started and left
    running once ``done()`` is true (within 120 s, the run still going)."""
    proc = subprocess.Popen([sys.executable, "-m", "topictk", "train", "--config", str(config),
                             "--scheduler", address, "--quiet"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not done():
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.005)
    return proc


# a long run (interrupted long before its end) on the example corpus
LONG = {**RUN, "inference": {**RUN["inference"], "iterations": 100000},
        "training": {**RUN["training"], "checkpoint_every": 1000, "keep_checkpoints": 2}}


def test_a_lost_scheduler_stops_the_run_with_a_checkpoint(example_store, tmp_path):
    """The scheduler (a process of its own, with a worker process) killed mid-run: the run
    stops within the timeout, exit 1, one line, with a checkpoint of the last step whose whole
    state the driver held; resumed on one machine, the run is the uninterrupted one."""
    pytest.importorskip("distributed")
    address, (scheduler, *workers) = _dask_processes(1)
    # z and ndk gathered at the evaluations only (alpha fixed): killed after the sample of
    # step 20, the driver holds the whole state of step 16
    run = {**LONG, "model": {**LONG["model"], "alpha": 0.5},
           "training": {**LONG["training"], "cluster_timeout": 5, "eval_every": 16}}
    config = write_config(tmp_path, example_store, **run)
    try:
        proc = _train_until(config, address,
                            (tmp_path / "run" / "samples" / "step-00000020.npz").exists)
        scheduler.kill()
        killed = time.monotonic()
        _, err = proc.communicate(timeout=60)
        waited = time.monotonic() - killed
    finally:
        for p in (scheduler, *workers):
            p.kill()
            p.wait()
    assert proc.returncode == 1, err
    last = err.strip().splitlines()[-1]
    assert last.startswith(f"topictk: error: lost the connection to the Dask scheduler at "
                           f"{address}") or "has had no worker" in last, err
    assert "; the run stopped with a checkpoint of step " in last
    assert waited < 30, waited
    step, header = _newest_checkpoint(tmp_path / "run")
    assert step == 16 and header["status"] == "interrupted"
    assert last.endswith(f"checkpoint of step {step}; continue it with --resume, on any "
                         f"cluster or none")
    _resumed_equals_uninterrupted(example_store, tmp_path, run, step)


def test_ctrl_c_stops_the_workers_and_writes_a_checkpoint(example_store, tmp_path):
    """Ctrl-C at the terminal (SIGINT to the whole process group: the driver and its local
    workers) in the middle of a run on 2 worker processes: exit 130 within seconds, no worker
    process left, a checkpoint of the step under way; resumed, the run is the uninterrupted
    one."""
    pytest.importorskip("distributed")
    psutil = pytest.importorskip("psutil")
    config = write_config(tmp_path, example_store, **LONG)
    proc = subprocess.Popen([sys.executable, "-m", "topictk", "train", "--config", str(config),
                             "--dask-workers", "2", "--quiet"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        _wait_for_metrics(proc, tmp_path / "run", 2)
        children = psutil.Process(proc.pid).children(recursive=True)
        os.killpg(proc.pid, signal.SIGINT)
        stopped = time.monotonic()
        _, err = proc.communicate(timeout=60)
        waited = time.monotonic() - stopped
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, err
    assert waited < 15, waited
    assert len(children) >= 2
    _, alive = psutil.wait_procs(children, timeout=5)
    assert not alive, alive
    step, header = _newest_checkpoint(tmp_path / "run")
    assert step >= 16 and header["status"] == "interrupted"
    assert err.strip().splitlines()[-1] == (f"topictk: SIGINT received: stopped at step {step}, "
                                            f"checkpoint written; continue with --resume")
    _resumed_equals_uninterrupted(example_store, tmp_path, LONG, step)


@pytest.mark.parametrize("method, failing_call", [("sweep", 11), ("gather", 2)])
def test_a_lost_worker_at_any_point_changes_nothing(example_store, in_process, tmp_path,
                                                      monkeypatch, method, failing_call):
    """A worker reported lost in sweep 11 (the sweeps since the gather at step 8 are redone),
    or while ndk is brought back for the alpha update of step 12 (redone up to that update,
    which is then made once): the run is the one-machine run."""
    pytest.importorskip("distributed")
    calls = lose_a_worker(monkeypatch, method, failing_call)
    config = write_config(tmp_path, example_store, **RUN)
    ok("train", "--config", config, "--dask-workers", "2", "--quiet")
    assert calls["n"] > failing_call
    _same_run(in_process, tmp_path / "run")


def test_workers_lost_again_and_again_change_nothing(example_store, in_process, tmp_path,
                                                    monkeypatch):
    """Workers reported lost in sweeps 5, 6 (the redo of 5), 15 and 23: each loss goes back
    to the last whole state and redoes the sweeps since; the run is the one-machine run."""
    pytest.importorskip("distributed")
    calls = lose_a_worker(monkeypatch, "sweep", (5, 6, 15, 23))
    config = write_config(tmp_path, example_store, **RUN)
    ok("train", "--config", config, "--dask-workers", "2", "--quiet")
    assert calls["n"] > 23
    _same_run(in_process, tmp_path / "run")


def test_a_killed_driver_resumes_on_the_cluster_with_the_same_numbers(example_store, tmp_path):
    """The driver killed (SIGKILL) mid-run on a scheduler and two workers started as
    processes of their own: ``train --resume`` on the same cluster continues from the newest
    checkpoint, and the run is the uninterrupted one on one machine."""
    pytest.importorskip("distributed")
    address, cluster = _dask_processes(2)
    run = {**LONG, "training": {**LONG["training"], "checkpoint_every": 8}}
    config = write_config(tmp_path, example_store, **run)
    checkpoints = tmp_path / "run" / "checkpoints"
    try:
        proc = _train_until(config, address,
                            lambda: len(list(checkpoints.glob("*.npz"))) >= 2)
        proc.kill()
        proc.communicate(timeout=30)
        step, _ = _newest_checkpoint(tmp_path / "run")
        assert step >= 16
        _resumed_equals_uninterrupted(example_store, tmp_path, run, step,
                                      where=("--scheduler", address))
    finally:
        for p in cluster:
            p.kill()
            p.wait()


# DMR by stochastic EM: 5 chunks over the workers, nu updated before sweeps 8, 12, 16 and 20
# (each update gathers n_dk and sends every shard its documents' new prior rows), samples,
# checkpoints and evaluations on the way
DMR = {"model": {"family": "dmr", "topics": 6, "alpha": 0.2, "beta": 0.05},
       "inference": {"algorithm": "dmr-sem", "iterations": 24, "burn_in": 12, "thin": 4,
                     "chunks": 5, "sparse": "auto", "optimize_burn_in": 6,
                     "optimize_interval": 4},
       "training": {"seed": 7, "eval_every": 8, "checkpoint_every": 8, "keep_checkpoints": 5}}


@pytest.mark.parametrize("workers, failing", [(2, ()), (3, ()), (2, (7, 13, 14))])
def test_dmr_sem_on_workers_gives_the_one_machine_chain(meta_store, tmp_path, monkeypatch,
                                                        workers, failing):
    """dmr-sem on 2 and 3 worker processes, and on 2 with workers reported lost in sweeps 7,
    13 and 14 (the redo of 13): the one-machine chain, nu's updates included."""
    pytest.importorskip("distributed")
    here = tmp_path / "here"
    here.mkdir()
    ok("train", "--config", write_config(here, meta_store, **DMR), "--quiet")
    calls = lose_a_worker(monkeypatch, "sweep", failing) if failing else {"n": 0}
    ok("train", "--config", write_config(tmp_path, meta_store, **DMR), "--dask-workers",
       str(workers), "--quiet")
    assert calls["n"] >= (24 if failing else 0)
    _same_run(here / "run", tmp_path / "run")
    _, arrays = model_arrays(tmp_path / "run")
    assert np.abs(arrays["nu"][:, :-1]).max() > 0      # nu learnt from the features
    if workers == 3:    # the fold-ins with every test document's prior row, and infer's
        _same_fold_ins_on_the_cluster(here / "run", meta_store.parent / "meta.jsonl")


# Mini-batch samplers: each mini-batch's chunks (5 of 8 documents) cut into one piece per
# worker; samples, checkpoints and evaluations on the way
MINIBATCH = {
    "sgrld": {"algorithm": "sgrld", "iterations": 12, "batch_size": 40, "chunk_docs": 8,
              "burn_in": 6, "thin": 3},
    "hsvg": {"algorithm": "hsvg", "iterations": 12, "batch_size": 40, "chunk_docs": 8,
             "tau0": 4.0},
    # online VB: the E-step of each mini-batch in 4 blocks, one piece each, statistics added
    # pairwise among the workers ((0 + 1) + (2 + 3)), as one machine adds them
    "ovb": {"algorithm": "ovb", "iterations": 12, "batch_size": 40, "chunks": 4, "tau0": 4.0},
    # batch VB: the E-step over the corpus in 3 blocks, warm and best starts from gamma
    "vb": {"algorithm": "vb", "iterations": 8, "chunks": 3, "best_iterations": 3,
           "best_every": 2, "tol": 0},
    # CVB0: 3 chunks over 2 shards (of 2 and 1 chunks), fields refreshed (worker to worker)
    # every 4 steps, the convergence check (which gathers m_dk) every 3
    "cvb0": {"algorithm": "cvb0", "iterations": 14, "chunks": 3, "refresh_every": 4,
             "check_every": 3, "tol": 1e-9},
    # CVB: the same, with the variance fields beside the means (its check: the bound)
    "cvb": {"algorithm": "cvb", "iterations": 14, "chunks": 3, "refresh_every": 4,
            "check_every": 3, "tol": 1e-9},
    # particle EM: 3 particles, the E-steps and weighted statistics in 3 blocks, annealed
    # from T = 2 to 1 (the tempered kernel, then VB's)
    "pem": {"algorithm": "pem", "iterations": 8, "particles": 3, "chunks": 3,
            "anneal_from": 2.0, "anneal_steps": 4, "tol": 0},
}


def _minibatch_config(directory, store, algorithm: str):
    import yaml
    config = write_config(directory, store, training={"seed": 3, "eval_every": 6,
                                                      "checkpoint_every": 6,
                                                      "keep_checkpoints": 3})
    data = yaml.safe_load(config.read_text(encoding="utf-8"))
    data["inference"] = MINIBATCH[algorithm]
    config.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return config


@pytest.mark.parametrize("algorithm", sorted(MINIBATCH))
def test_minibatch_local_steps_on_two_workers_give_the_one_machine_run(
        example_store, tmp_path, algorithm):
    """sgrld and hsvg run each mini-batch's local Gibbs chains on the workers (integer
    statistics), ovb the blocks of its E-step (float statistics added in block order): the
    run is the one-machine run with the same blocks, bit for bit."""
    pytest.importorskip("distributed")
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    here = _minibatch_config(tmp_path / "a", example_store, algorithm)
    there = _minibatch_config(tmp_path / "b", example_store, algorithm)
    ok("train", "--config", here, "--quiet")
    ok("train", "--config", there, "--dask-workers", "2", "--quiet")
    a, b = tmp_path / "a" / "run", tmp_path / "b" / "run"
    header_a, arrays_a = model_arrays(a)
    header_b, arrays_b = model_arrays(b)
    assert_same_arrays(arrays_a, arrays_b)
    assert header_a["streams"] == header_b["streams"]
    assert comparable_metrics(a) == comparable_metrics(b)
    _same_checkpoints(a, b)
    sent = [m.get("cluster_bytes_sent", 0) for m in metrics(b)]
    assert sent and max(sent) > 0                 # the work did go to the workers
    # on 2 workers: sgrld's and hsvg's Gibbs fold-ins (hsvg's with its own weights), the
    # others' own deterministic fold-ins cut into blocks of documents
    _same_fold_ins_on_the_cluster(a)


@pytest.mark.parametrize("algorithm", ["ovb", "sgrld"])
def test_arrays_every_worker_needs_are_sent_once_and_relayed(example_store, tmp_path,
                                                              monkeypatch, algorithm):
    """With the relay of shared arrays on (from 2 workers here; RELAY_FROM), a mini-batch's
    rows go from the driver to one worker and down a tree to the other two: the one-machine
    run, and the driver sends less than when it sends every worker its copy."""
    pytest.importorskip("distributed")
    from topictk.inference import cluster
    runs_ = {}
    for name, relay_from in (("here", None), ("direct", 100), ("relayed", 2)):
        (tmp_path / name).mkdir()
        config = _minibatch_config(tmp_path / name, example_store, algorithm)
        if relay_from is None:
            ok("train", "--config", config, "--quiet")
        else:
            monkeypatch.setattr(cluster, "RELAY_FROM", relay_from)
            ok("train", "--config", config, "--dask-workers", "3", "--quiet")
        runs_[name] = tmp_path / name / "run"
    for name in ("direct", "relayed"):
        assert_same_arrays(model_arrays(runs_["here"])[1], model_arrays(runs_[name])[1])
        assert comparable_metrics(runs_["here"]) == comparable_metrics(runs_[name])
    sent = {name: metrics(runs_[name])[-1]["cluster_bytes_sent"]
            for name in ("direct", "relayed")}
    between = metrics(runs_["relayed"])[-1]["cluster_bytes_workers"]
    assert sent["relayed"] < sent["direct"] and between > 0


def test_a_worker_killed_while_the_rows_are_relayed_changes_nothing(example_store, tmp_path):
    """sgrld on 4 worker processes (so each update's rows go down the relay tree,
    RELAY_FROM) with one of them killed mid-run: the update under way is done again on the
    three left, and the run is the one-machine run."""
    distributed = pytest.importorskip("distributed")
    import yaml
    from topictk.inference import cluster
    assert cluster.RELAY_FROM <= 4
    reference = _minibatch_config(tmp_path, example_store, "sgrld")
    data = yaml.safe_load(reference.read_text(encoding="utf-8"))
    data["inference"].update(iterations=300, burn_in=150, thin=50)
    data["training"].update(eval_every=100, checkpoint_every=100)
    config = tmp_path / "there.yaml"
    config.write_text(yaml.safe_dump({**data, "output": str(tmp_path / "there")},
                                     sort_keys=False), encoding="utf-8")
    reference.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    ok("train", "--config", reference, "--quiet")
    checkpoints = tmp_path / "there" / "checkpoints"
    returncode, err, _ = _train_killing_a_worker(
        distributed, config, 4, lambda: checkpoints.exists() and any(checkpoints.glob("*.npz")))
    assert returncode == 0, err
    assert metrics(tmp_path / "there")[-1]["cluster_bytes_workers"] > 0    # relayed
    assert_same_arrays(model_arrays(tmp_path / "run")[1], model_arrays(tmp_path / "there")[1])
    assert comparable_metrics(tmp_path / "run") == comparable_metrics(tmp_path / "there")


def test_a_lost_worker_during_a_minibatch_update_changes_nothing(example_store, tmp_path,
                                                                 monkeypatch):
    """A worker reported lost in the fifth mini-batch update: its local statistics are
    computed again and the run is the one-machine run."""
    pytest.importorskip("distributed")
    from topictk.inference import minibatch
    calls = _lost_in_piece(monkeypatch, minibatch.local_statistics_piece, 5)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    ok("train", "--config", _minibatch_config(tmp_path / "a", example_store, "sgrld"), "--quiet")
    ok("train", "--config", _minibatch_config(tmp_path / "b", example_store, "sgrld"),
       "--dask-workers", "2", "--quiet")
    assert calls["n"] == 13
    assert_same_arrays(model_arrays(tmp_path / "a" / "run")[1],
                       model_arrays(tmp_path / "b" / "run")[1])


def test_a_lost_worker_during_the_particles_e_steps_changes_nothing(example_store, tmp_path,
                                                                    monkeypatch):
    """A worker reported lost in the fourth iteration of particle EM on 3 workers: its blocks
    are computed again from the gamma the driver holds, and the run is the one-machine run."""
    pytest.importorskip("distributed")
    from topictk.inference.variational import pem
    calls = _lost_in_piece(monkeypatch, pem.particle_blocks_piece, 4)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    ok("train", "--config", _minibatch_config(tmp_path / "a", example_store, "pem"), "--quiet")
    ok("train", "--config", _minibatch_config(tmp_path / "b", example_store, "pem"),
       "--dask-workers", "3", "--quiet")
    assert calls["n"] == 9
    a, b = tmp_path / "a" / "run", tmp_path / "b" / "run"
    assert_same_arrays(model_arrays(a)[1], model_arrays(b)[1])
    assert comparable_metrics(a) == comparable_metrics(b)


# DMR by SGRLD and SGLD: 5 chunks of 8 documents per mini-batch of 40, nu moving from the
# third update (its gradient from the g_dk rows the workers return), samples on the way
DMR_SGRLD = {"model": {"family": "dmr", "topics": 6, "alpha": 0.2, "beta": 0.05},
             "inference": {"algorithm": "dmr-sgrld", "iterations": 12, "batch_size": 40,
                           "chunk_docs": 8, "burn_in": 6, "thin": 3, "nu_burn_in": 2},
             "training": {"seed": 3, "eval_every": 6, "checkpoint_every": 6,
                          "keep_checkpoints": 3}}


@pytest.mark.parametrize("workers, failing", [(2, 0), (3, 0), (2, 5)])
def test_dmr_sgrld_on_workers_gives_the_one_machine_run(meta_store, tmp_path, monkeypatch,
                                                        workers, failing):
    """dmr-sgrld's local chains on 2 and 3 workers (each chunk with its documents' prior rows;
    the documents' rows of g-bar come back in chunk order), and on 2 with a worker reported
    lost in the fifth update: the one-machine run, nu included."""
    pytest.importorskip("distributed")
    from topictk.inference import minibatch
    here = tmp_path / "here"
    here.mkdir()
    ok("train", "--config", write_config(here, meta_store, **DMR_SGRLD), "--quiet")
    calls = _lost_in_piece(monkeypatch, minibatch.local_statistics_piece, failing)
    ok("train", "--config", write_config(tmp_path, meta_store, **DMR_SGRLD), "--dask-workers",
       str(workers), "--quiet")
    assert calls["n"] == 12 + bool(failing)
    a, b = here / "run", tmp_path / "run"
    header_a, arrays_a = model_arrays(a)
    header_b, arrays_b = model_arrays(b)
    assert_same_arrays(arrays_a, arrays_b)
    assert header_a["streams"] == header_b["streams"]
    assert comparable_metrics(a) == comparable_metrics(b)
    assert max(m.get("cluster_bytes_sent", 0) for m in metrics(b)) > 0
    assert np.abs(arrays_b["nu"][:, :-1]).max() > 0     # nu moved with the features
    if workers == 3:
        _same_fold_ins_on_the_cluster(a, meta_store.parent / "meta.jsonl")


# The deep-LDA SG-MCMC samplers: each mini-batch of 40 documents in 5 chunks of 8, two
# layers, test-chain evaluations and checkpoints on the way
DEEP = {"model": {"family": "dlda", "layers": [6, 3], "eta": "auto"},
        "inference": {"iterations": 8, "burn_in": 4, "batch_size": 40, "chunk_docs": 8,
                      "local_burn_in": 4, "local_samples": 3,
                      "point_perplexity": {"iterations": 4, "last": 2, "thin": 1,
                                           "every": 4}},
        "training": {"seed": 3, "eval_every": 2, "checkpoint_every": 4,
                     "keep_checkpoints": 3}}


@pytest.mark.parametrize("algorithm, workers, failing", [
    ("tlasgr", 2, 0), ("tlasgr", 3, 0), ("tlasgr", 2, 5), ("tlfsgr", 2, 0),
    ("dlda-sgrld", 3, 0)])
def test_deep_lda_local_chains_on_workers_give_the_one_machine_run(
        example_store, tmp_path, monkeypatch, algorithm, workers, failing):
    """TLASGR, TLFSGR and SGRLD for deep LDA run each mini-batch's local chains on 2 and 3
    workers (each chunk with its own stream; integer statistics added among the workers, the
    documents' q sums in chunk order), and on 2 with a worker reported lost in the fifth
    update: the one-machine run, checkpoints and the test chain's perplexity included."""
    pytest.importorskip("distributed")
    from topictk.inference.dlda import driver
    here = tmp_path / "here"
    here.mkdir()
    ok("train", "--config", _deep_config(here, example_store, algorithm=algorithm,
                                         **DEEP["inference"]), "--quiet")
    calls = _lost_in_piece(monkeypatch, driver.deep_local_piece, failing)
    ok("train", "--config", _deep_config(tmp_path, example_store, algorithm=algorithm,
                                         **DEEP["inference"]),
       "--dask-workers", str(workers), "--quiet")
    assert calls["n"] == 8 + bool(failing)
    a, b = here / "run", tmp_path / "run"
    header_a, arrays_a = model_arrays(a)
    header_b, arrays_b = model_arrays(b)
    assert_same_arrays(arrays_a, arrays_b)
    assert header_a["streams"] == header_b["streams"]
    assert comparable_metrics(a) == comparable_metrics(b)
    assert any("perplexity" in m for m in metrics(b))
    _same_checkpoints(a, b)
    assert max(m.get("cluster_bytes_sent", 0) for m in metrics(b)) > 0
    if workers == 3:    # evaluate's point chains and infer's chains on 2 workers
        _same_fold_ins_on_the_cluster(a)


def _deep_config(directory, store, **inference):
    """A deep-LDA run of DEEP's model and training with ``inference``."""
    import yaml
    path = write_config(directory, store, training=DEEP["training"])
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    data.pop("evaluation")
    data.update(model=DEEP["model"], inference=inference)
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def _deep_gibbs_config(directory, store):
    """dlda-gibbs, two layers, 5 chunks; the persistent test chain advances at every second
    iteration, checkpoints every fourth."""
    return _deep_config(directory, store, algorithm="dlda-gibbs", iterations=8, burn_in=4,
                        chunks=5, point_perplexity=DEEP["inference"]["point_perplexity"])


@pytest.mark.parametrize("workers, method, failing, error", [
    (3, None, 0, None), (2, "downward", 5, "WorkerLost"), (2, "upward", 3, "WorkerLost"),
    (2, "upward", 8, "ClusterLost")])
def test_deep_lda_batch_gibbs_on_workers_gives_the_one_machine_run(
        example_store, tmp_path, monkeypatch, workers, method, failing, error):
    """dlda-gibbs with its documents' theta and c on 2 and 3 workers: the one-machine run,
    checkpoints and the test chain's perplexity included; a worker reported lost in the fifth
    downward or the third upward pass changes nothing (the iterations since the driver last
    held theta and c are redone); the cluster lost in the eighth iteration stops the run with a
    checkpoint of the iteration whose whole state the driver held (the fourth; the test chain
    advanced at the sixth is not advanced again), and the run resumed on one machine is the
    uninterrupted one."""
    pytest.importorskip("distributed")
    from topictk.inference import cluster
    from topictk.inference.dlda import shards
    here = tmp_path / "here"
    here.mkdir()
    ok("train", "--config", _deep_gibbs_config(here, example_store), "--quiet")
    calls = {"n": 0}
    if method:
        original = getattr(shards.ShardedDeepGibbs, method)

        def flaky(self, *args, **kwargs):
            calls["n"] += 1
            if calls["n"] == failing:
                raise getattr(cluster, error)("lost (simulated)")
            return original(self, *args, **kwargs)

        monkeypatch.setattr(shards.ShardedDeepGibbs, method, flaky)
    config = _deep_gibbs_config(tmp_path, example_store)
    if error == "ClusterLost":
        message = fails(1, "train", "--config", config, "--dask-workers", str(workers),
                        "--quiet")
        assert message.startswith("lost (simulated); the run stopped with a checkpoint of "
                                  "step 4;"), message
        monkeypatch.setattr(shards.ShardedDeepGibbs, method, original)
        ok("train", "--config", config, "--resume", "--quiet")
    else:
        ok("train", "--config", config, "--dask-workers", str(workers), "--quiet")
        assert calls["n"] >= failing
        _same_checkpoints(here / "run", tmp_path / "run")
    a, b = here / "run", tmp_path / "run"
    header_a, arrays_a = model_arrays(a)
    header_b, arrays_b = model_arrays(b)
    assert_same_arrays(arrays_a, arrays_b)
    assert header_a["streams"] == header_b["streams"]
    assert comparable_metrics(a) == comparable_metrics(b)
    assert any("perplexity" in m for m in metrics(b))
    if workers == 3:
        _same_fold_ins_on_the_cluster(a)


def _cvb0_config(directory, store, algorithm: str = "cvb0", **inference):
    import yaml
    config = _minibatch_config(directory, store, algorithm)
    data = yaml.safe_load(config.read_text(encoding="utf-8"))
    data["inference"].update(inference)
    config.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return config


def test_cvb0_resumed_on_a_cluster_of_another_size_continues_the_run(example_store, tmp_path):
    """8 CVB0 steps on 2 workers, resumed on 1 worker to 14 (the shards cut anew): the model
    of the one-machine run, as is a one-chunk run (whose fields come back whole)."""
    pytest.importorskip("distributed")
    for name in ("a", "b", "c", "d"):
        (tmp_path / name).mkdir()
    ok("train", "--config", _cvb0_config(tmp_path / "a", example_store), "--quiet")
    config = _cvb0_config(tmp_path / "b", example_store, iterations=8)
    ok("train", "--config", config, "--dask-workers", "2", "--quiet")
    ok("train", "--config", config, "--resume", "--dask-workers", "1", "--quiet",
       "--set", "inference.iterations=14")
    assert_same_arrays(model_arrays(tmp_path / "a" / "run")[1],
                       model_arrays(tmp_path / "b" / "run")[1])
    ok("train", "--config", _cvb0_config(tmp_path / "c", example_store, chunks=1), "--quiet")
    ok("train", "--config", _cvb0_config(tmp_path / "d", example_store, chunks=1),
       "--dask-workers", "2", "--quiet")
    assert_same_arrays(model_arrays(tmp_path / "c" / "run")[1],
                       model_arrays(tmp_path / "d" / "run")[1])


@pytest.mark.parametrize("algorithm", ["cvb0", "cvb"])
@pytest.mark.parametrize("method, failing_call", [("sweep", 7), ("refresh", 2), ("gather", 3)])
def test_a_lost_worker_in_a_cvb_run_changes_nothing(example_store, tmp_path, monkeypatch,
                                                    algorithm, method, failing_call):
    """A worker reported lost in the seventh iteration, in the second recomputation of the
    fields (step 8) or in the third gathering of mu (the convergence check of step 9, or a
    checkpoint): the steps since the driver last held the whole state are redone, and the run
    is the one-machine run (for CVB, variance fields included)."""
    pytest.importorskip("distributed")
    from topictk.inference import cluster
    from topictk.inference.variational import cvb_shards
    original = getattr(cvb_shards.ShardedCVB, method)
    calls = {"n": 0}

    def flaky(self, *args, **kwargs):
        if method != "gather" or self.stale:
            calls["n"] += 1
            if calls["n"] == failing_call:
                raise cluster.WorkerLost("a Dask worker was lost (simulated)")
        return original(self, *args, **kwargs)

    monkeypatch.setattr(cvb_shards.ShardedCVB, method, flaky)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    ok("train", "--config", _cvb0_config(tmp_path / "a", example_store, algorithm), "--quiet")
    ok("train", "--config", _cvb0_config(tmp_path / "b", example_store, algorithm),
       "--dask-workers", "2", "--quiet")
    assert calls["n"] > failing_call
    a, b = tmp_path / "a" / "run", tmp_path / "b" / "run"
    assert_same_arrays(model_arrays(a)[1], model_arrays(b)[1])
    assert comparable_metrics(a) == comparable_metrics(b)
    _same_checkpoints(a, b)


@pytest.mark.parametrize("algorithm, target, failing_call, step", [
    # ovb: the driver holds the whole state; the step that fails opens the second epoch (its
    # keys drawn from the main stream before the E-step); the seventh call is the fold-in of
    # the evaluation after step 6
    ("ovb", "cluster._map_once", 9, 7),
    ("cvb0", "cvb_shards.ShardedCVB.sweep", 7, 6),     # mu and m_dk last gathered at step 6
])
def test_a_cluster_lost_mid_step_leaves_a_checkpoint_to_resume(example_store, tmp_path,
                                                               monkeypatch, algorithm, target,
                                                               failing_call, step):
    """The cluster gone in the middle of a step: exit 1 with one line and a checkpoint of the
    last step whose whole state the driver held; resumed on one machine, the run is the
    uninterrupted one."""
    pytest.importorskip("distributed")
    from topictk.inference import cluster
    from topictk.inference.variational import cvb_shards
    *path, name = target.split(".")
    owner = {"cluster": cluster, "cvb_shards": cvb_shards}[path[0]]
    for attribute in path[1:]:
        owner = getattr(owner, attribute)
    original = getattr(owner, name)
    calls = {"n": 0}

    def lost(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == failing_call:
            raise cluster.ClusterLost("lost the connection to the cluster (simulated)")
        return original(*args, **kwargs)

    monkeypatch.setattr(owner, name, lost)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    here = _minibatch_config(tmp_path / "a", example_store, algorithm)
    there = _minibatch_config(tmp_path / "b", example_store, algorithm)
    ok("train", "--config", here, "--quiet")
    message = fails(1, "train", "--config", there, "--dask-workers", "2", "--quiet")
    assert message == (f"lost the connection to the cluster (simulated); the run stopped with "
                       f"a checkpoint of step {step}; continue it with --resume, on any "
                       f"cluster or none")
    monkeypatch.setattr(owner, name, original)
    ok("train", "--config", there, "--resume", "--quiet")
    a, b = tmp_path / "a" / "run", tmp_path / "b" / "run"
    assert_same_arrays(model_arrays(a)[1], model_arrays(b)[1])
    assert model_arrays(a)[0]["streams"] == model_arrays(b)[0]["streams"]
    assert comparable_metrics(a) == comparable_metrics(b)



@pytest.mark.parametrize("algorithm", ["vb", "pem", "sgrld", "hsvg", "tlasgr", "dlda-sgrld"])
def test_the_cluster_lost_in_the_eighth_step_of_any_family_resumes_to_its_numbers(
        example_store, tmp_path, monkeypatch, algorithm):
    """The cluster lost at the first work the eighth step sends to it (the driver holds the
    whole state between these algorithms' steps): exit 1 with a checkpoint of step 7, and the
    run resumed on one machine is the uninterrupted one, streams and metrics included."""
    pytest.importorskip("distributed")
    from topictk.inference import cluster
    from topictk.inference.registry import get_driver
    driver = get_driver(algorithm)
    original_step, original_map = driver.step, cluster._map_once
    now = {"t": -1}

    def step(self, state, t):
        now["t"] = t
        return original_step(self, state, t)

    def lost(on, task):
        if now["t"] == 7:
            raise cluster.ClusterLost("lost the connection to the cluster (simulated)")
        return original_map(on, task)

    monkeypatch.setattr(driver, "step", step)
    monkeypatch.setattr(cluster, "_map_once", lost)
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
    if algorithm in MINIBATCH:
        here = _minibatch_config(tmp_path / "a", example_store, algorithm)
        there = _minibatch_config(tmp_path / "b", example_store, algorithm)
    else:
        here, there = (_deep_config(tmp_path / name, example_store, algorithm=algorithm,
                                    **DEEP["inference"]) for name in ("a", "b"))
    ok("train", "--config", here, "--quiet")
    message = fails(1, "train", "--config", there, "--dask-workers", "2", "--quiet")
    assert message == ("lost the connection to the cluster (simulated); the run stopped with "
                       "a checkpoint of step 7; continue it with --resume, on any cluster or "
                       "none")
    monkeypatch.setattr(cluster, "_map_once", original_map)
    ok("train", "--config", there, "--resume", "--quiet")
    a, b = tmp_path / "a" / "run", tmp_path / "b" / "run"
    assert_same_arrays(model_arrays(a)[1], model_arrays(b)[1])
    assert model_arrays(a)[0]["streams"] == model_arrays(b)[0]["streams"]
    assert comparable_metrics(a) == comparable_metrics(b)


@pytest.mark.parametrize("algorithm", ["cvb", "pem", "tlasgr", "dlda-gibbs"])
def test_one_worker_gives_the_one_machine_run(example_store, tmp_path, algorithm):
    """A cluster of one worker process runs every shard or piece there: the one-machine
    run, as two and three workers give it."""
    pytest.importorskip("distributed")
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
    if algorithm in MINIBATCH:
        here, there = (_minibatch_config(tmp_path / name, example_store, algorithm)
                       for name in ("a", "b"))
    elif algorithm == "dlda-gibbs":
        here, there = (_deep_gibbs_config(tmp_path / name, example_store) for name in "ab")
    else:
        here, there = (_deep_config(tmp_path / name, example_store, algorithm=algorithm,
                                    **DEEP["inference"]) for name in ("a", "b"))
    ok("train", "--config", here, "--quiet")
    ok("train", "--config", there, "--dask-workers", "1", "--quiet")
    a, b = tmp_path / "a" / "run", tmp_path / "b" / "run"
    assert_same_arrays(model_arrays(a)[1], model_arrays(b)[1])
    assert model_arrays(a)[0]["streams"] == model_arrays(b)[0]["streams"]
    assert comparable_metrics(a) == comparable_metrics(b)


def test_a_merge_among_the_workers_gives_the_drivers_numbers():
    """map_merge with on_workers merges the pieces' results on the workers: a float sum in a
    chain in piece order, bit for bit the driver's sequential sum (which a pairwise grouping
    of the same floats is not), and an integer sum in a pairwise tree, equal to the driver's;
    the driver then receives the merged result only."""
    pytest.importorskip("distributed")
    from dataclasses import replace

    from topictk.inference.cluster import Cluster, ClusterTask, map_merge

    def noisy(seed: int, part: int) -> np.ndarray:
        """Floats over 16 orders of magnitude: their sum depends on the order of the additions
        (a function local to the test travels to the workers by value)."""
        rng = np.random.default_rng([seed, part])
        return rng.standard_normal(2000) * 10.0 ** rng.integers(-8, 8, 2000)

    floats = ClusterTask(noisy, cut=lambda n: list(range(7)), context=3,
                         merge=lambda a, b: a + b, exact=False)
    counts = replace(floats, piece=lambda seed, part: (noisy(seed, part) * 1e3).astype(
        np.int64), exact=True)
    merged = {}
    with Cluster(workers=2) as cluster:
        for name, task in (("floats", floats), ("counts", counts)):
            here = map_merge(cluster, task)
            received = cluster.bytes_received
            there = map_merge(cluster, replace(task, on_workers=True))
            assert cluster.bytes_received - received == there.nbytes    # the total only
            assert here.dtype == there.dtype and here.tobytes() == there.tobytes(), name
            merged[name] = here
    pieces = [noisy(3, part) for part in range(7)]
    sequential = pieces[0]
    for piece in pieces[1:]:
        sequential = sequential + piece
    pairwise = (((pieces[0] + pieces[1]) + (pieces[2] + pieces[3]))
                + ((pieces[4] + pieces[5]) + pieces[6]))
    assert merged["floats"].tobytes() == sequential.tobytes()
    assert pairwise.tobytes() != sequential.tobytes()       # so the order was kept
    # a float sum declared to follow tree_reduce (online VB's blocks): the workers' pairwise
    # tree is the driver's tree_reduce, bit for bit
    from topictk.inference.cluster import tree_reduce
    assert tree_reduce(pieces, np.add).tobytes() == pairwise.tobytes()
    with Cluster(workers=2) as cluster:
        there = map_merge(cluster, replace(floats, exact=True, on_workers=True))
    assert there.tobytes() == pairwise.tobytes()
