"""Gibbs's default config against ``threads: 1``, on a quiet machine and beside another
CPU-bound process, with the default of before as the reference.

Runs of the same corpus and K side by side, alternating, for several rounds:

- ``default``: no thread or schedule key (``training.threads: auto``, the CPUs the process may
  use; ``inference.blocks: auto`` and ``block_sync: sweep``, the flowing partitioned
  schedule);
- ``default, threads: 1``: the same chain on one thread;
- ``before``: the defaults before (``blocks: null``, 2 blocks taking n_k at every epoch) at
  ``threads: 1`` (what a config without a threads key ran) and at ``threads: 2``.

Every round runs once on a quiet machine and once beside a competing process (``python -c
'while True: pass'`` at normal priority, started before the round and stopped after it).
Times are training seconds from the saved model (evaluation excluded). The default must save
the same model at any thread count; one ``topictk evaluate`` of each chain (the default
estimator, ``evaluation.fold_in: gibbs``, declared in the report) gives its held-out
perplexity.

    python benchmarks/bench_default_threads.py --rounds 5 --record
    python benchmarks/bench_default_threads.py --topics 1000 --sweeps 30 --rounds 2 \
        --name default_threads_k1000 --record
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import harness as h
import numpy as np
import yaml

# (name, inference keys beyond the defaults, training.threads or None for the default)
BEFORE = {"blocks": None, "block_sync": "epoch"}
VARIANTS = (("default", {}, None), ("default", {}, 1), ("before", BEFORE, 1),
            ("before", BEFORE, 2))
CONDITIONS = ("quiet", "busy")


def model_arrays(run_dir: Path) -> tuple[dict, dict]:
    """(header, every other array) of a run's ``model.npz``."""
    arrays, header = {}, {}
    with zipfile.ZipFile(run_dir / "model.npz") as zf:
        for name in sorted(zf.namelist()):
            value = np.load(io.BytesIO(zf.read(name)), allow_pickle=False)
            if name == "header.npy":
                header = json.loads(value.tobytes().decode("utf-8"))
            else:
                arrays[name] = value
    return header, arrays


def same_model(a: Path, b: Path) -> bool:
    (_, x), (_, y) = model_arrays(a), model_arrays(b)
    return x.keys() == y.keys() and all(np.array_equal(x[k], y[k]) for k in x)


def label(name: str, threads: int | None) -> str:
    return f"{name}, threads: {'auto' if threads is None else threads}"


def config(store: Path, out: Path, args, extra: dict, threads: int | None) -> dict:
    inference = {"algorithm": "gibbs", "iterations": args.sweeps,
                 "burn_in": args.sweeps - 1, "thin": 1, **extra}
    training = {"seed": 1, "eval_every": 0, "checkpoint_every": 0}
    if threads is not None:
        training["threads"] = threads
    return {"corpus": str(store), "output": str(out), "model": {"topics": args.topics},
            "inference": inference, "training": training}


@contextlib.contextmanager
def competitor(condition: str):
    """A CPU-bound process at normal priority for the ``busy`` condition, none when quiet."""
    proc = (subprocess.Popen([sys.executable, "-c", "while True: pass"])
            if condition == "busy" else None)
    try:
        yield
    finally:
        if proc is not None:
            proc.kill()
            proc.wait()


def measure(args) -> dict:
    store = h.ensure_store(args.corpus)
    runs = {(c, label(n, t)): [] for c in CONDITIONS for n, _, t in VARIANTS}
    for r in range(args.rounds):
        for condition in CONDITIONS:
            order = VARIANTS if r % 2 == 0 else VARIANTS[::-1]
            h.wait_for_quiet(2, args.quiet_margin, args.max_wait)
            with competitor(condition):
                for name, extra, threads in order:
                    key = label(name, threads)
                    tag = f"{name}-{'auto' if threads is None else threads}"
                    out = h.WORK / "runs" / "default_threads" / f"{condition}-{tag}"
                    logfile = h.WORK / "logs" / f"dt-{condition}-{tag}.log"
                    res = h.train(config(store, out, args, extra, threads),
                                  out.with_suffix(".yaml"), logfile)
                    if res["rc"] != 0:
                        raise SystemExit(f"{key} failed:\n{h.tail(logfile)}")
                    header, _ = model_arrays(out)
                    res["train"] = header["clock"]["train_seconds"]
                    saved = yaml.safe_load((out / "config.yaml").read_text())
                    res["threads_used"] = saved["training"]["threads"]
                    runs[(condition, key)].append(res)
                    h.log(f"round {r + 1} {condition} {key}: train {res['train']:.2f}s "
                          f"cpu {res['cpu']:.1f}s foreign {res['foreign']:.2f}")
    base = h.WORK / "runs" / "default_threads"
    # each chain's multi-threaded run (the default's threads: auto) against its one thread
    same = {name: same_model(base / f"quiet-{name}-{many}", base / f"quiet-{name}-1")
            for name, many in (("default", "auto"), ("before", "2"))}
    perplexity = {}
    for name in ("default", "before"):
        result, _ = h.evaluate(base / f"quiet-{name}-1",
                               h.WORK / "logs" / f"dt-eval-{name}.log", "--threads", "2")
        perplexity[name] = result
    return {"store": h.store_facts(store), "runs": runs, "same": same,
            "perplexity": perplexity}


def _ratios(runs: dict, condition: str, slow: str, fast: str) -> list[float]:
    return [s["train"] / f["train"]
            for s, f in zip(runs[(condition, slow)], runs[(condition, fast)])]


def report(args, data: dict) -> str:
    runs, facts = data["runs"], data["store"]
    lines = ["# Default threads and schedule: Gibbs quiet and beside another process", "",
             f"Command: `{h.command_line()}`", "", *h.machine_info(), "",
             (f"Corpus `{args.corpus}` (D = {facts['D']:,} training documents, "
              f"N = {facts['N']:,} tokens, V = {facts['V']:,}; {facts['test_docs']:,} test "
              f"documents), K = {args.topics}, {args.sweeps} sweeps, seed 1, no evaluation "
              f"during training; {args.rounds} rounds, the runs alternating (order reversed "
              f"every other round). `busy`: a `python -c 'while True: pass'` at normal "
              f"priority ran beside the round. `default` sets no thread or schedule key; "
              f"`before` is the earlier default (`inference.blocks: null` = 2 blocks, "
              f"`block_sync: epoch`)."), ""]
    rows = []
    for (condition, key), rs in runs.items():
        train = [r["train"] for r in rs]
        rows.append([condition, key, str(rs[0]["threads_used"]), h.fmt(h.mean(train), ".2f"),
                     f"{min(train):.2f}–{max(train):.2f}",
                     h.fmt(h.mean([r["cpu"] for r in rs]), ".1f"),
                     h.fmt(h.mean([r["foreign"] for r in rs]), ".2f")])
    lines += h.table(["machine", "run", "threads used", "train s (mean)", "train s (range)",
                      "CPU s", "other load (cores)"], rows, "llrrrrr")
    lines += ["", "Per round (each ratio from runs of the same round):", ""]
    for condition in CONDITIONS:
        for slow, fast, what in (
                (label("default", 1), label("default", None), "default against threads: 1"),
                (label("before", 1), label("before", 2), "before: 2 threads against 1"),
                (label("before", 1), label("default", None),
                 "default against the default before (1 thread)")):
            ratios = _ratios(runs, condition, slow, fast)
            lines.append(f"- {condition}, {what}: " + ", ".join(f"{x:.2f}×" for x in ratios)
                         + f" (mean {h.mean(ratios):.2f}×)")
    lines += ["", *(f"- {name}: model at 2 threads identical to 1 thread, byte for byte: "
                    f"{'yes' if same else 'NO'}" for name, same in data["same"].items())]
    for name, result in data["perplexity"].items():
        if result:
            lines.append(f"- held-out perplexity of `{name}` ({result.get('estimator')} "
                         f"fold-in, `topictk evaluate`): {result['perplexity']:.2f}")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", default="20news_gan2015")
    parser.add_argument("--topics", type=int, default=128)
    parser.add_argument("--sweeps", type=int, default=60)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--name", default="default_threads",
                        help="results file name (default_threads)")
    h.add_common_options(parser)
    args = parser.parse_args()
    data = measure(args)
    h.write_results(h.results_path(args.name, args.record), report(args, data))


if __name__ == "__main__":
    main()
