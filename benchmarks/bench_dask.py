"""Collapsed Gibbs on a local Dask cluster against the in-process run.

Three ways to run the same chain (AD-LDA with 2 chunks, K = 128) on KOS with every document
repeated R times (R = 10: 3.1 M training tokens... see the table for the exact counts):

* in-process, 1 thread (``training.threads: 1``)
* in-process, 2 threads (``training.threads: 2``)
* a local Dask cluster of 2 single-thread worker processes (``--dask-workers 2``)

All three give the same model (checked: the digests of model.npz's arrays must agree). The
runs alternate (one round = one run of each), so that the machine's load hits them alike;
throughput is training tokens × sweeps / train_seconds (the run's own clock, which leaves out
start-up, the cluster's start and evaluation), the median over rounds. For the cluster run
also: per-sweep wall split into the slowest shard's kernel time (word lists, sweep, count
change), the driver's sending of n_kw, its merge and the rest (transfer back and scheduling),
and bytes moved per sweep (driver to workers and back).

    python benchmarks/bench_dask.py --record                     # R = 10, 20 sweeps, 3 rounds
    python benchmarks/bench_dask.py --copies 2 --sweeps 5 --rounds 1   # quick check
"""
from __future__ import annotations

import argparse
import hashlib
import statistics

import harness as h
import numpy as np

NAME = "dask"
WORK = h.WORK / "dask"

MODES = [("in-process, 1 thread", {"threads": 1}, []),
         ("in-process, 2 threads", {"threads": 2}, []),
         ("Dask, 2 worker processes × 1 thread", {"threads": 1}, ["--dask-workers", "2"])]


def model_digest(run_dir) -> str:
    """sha256 over the model's arrays (not its header, which holds the clock)."""
    digest = hashlib.sha256()
    with np.load(run_dir / "model.npz") as npz:
        for name in sorted(npz.files):
            if name != "header":
                digest.update(name.encode())
                digest.update(np.ascontiguousarray(npz[name]).tobytes())
    return digest.hexdigest()


def run_once(store, mode: int, args, round_: int) -> dict:
    label, training, options = MODES[mode]
    name = f"m{mode}.r{round_}"
    cfg = {"corpus": str(store), "output": str(WORK / f"run.{name}"),
           "model": {"topics": args.topics, "alpha": 0.1, "beta": 0.01},
           "inference": {"algorithm": "gibbs", "iterations": args.sweeps, "chunks": 2,
                         "sparse": True},
           "training": {"seed": 0, "eval_every": args.sweeps, "checkpoint_every": 0,
                        **training},
           "evaluation": {"fold_in_sweeps": 2, "fold_in_burn_in": 1}}
    path = h.write_config(WORK / f"{name}.yaml", cfg)
    h.wait_for_quiet(2, args.quiet_margin, args.max_wait)
    log_path = WORK / "logs" / f"{name}.log"
    res = h.run_measured([*h.TOPICTK, "train", "--config", str(path), "--force", "--quiet",
                          *options], log_path)
    if res["rc"] != 0:
        raise SystemExit(f"{label} failed:\n{h.tail(log_path)}")
    last = h.read_metrics(WORK / f"run.{name}")[-1]
    return {"mode": mode, "wall": res["wall"], "foreign": res["foreign"],
            "train_seconds": last["train_seconds"], "tokens": last["tokens_seen"],
            "metrics": last, "digest": model_digest(WORK / f"run.{name}")}


def report(rows: list[dict], facts: dict, args) -> str:
    sweeps = args.sweeps
    by_mode = {m: [r for r in rows if r["mode"] == m] for m in range(len(MODES))}
    rate = {m: statistics.median(r["tokens"] / r["train_seconds"] for r in rs)
            for m, rs in by_mode.items()}
    digests = {r["digest"] for r in rows}
    lines = ["# Collapsed Gibbs on a local Dask cluster", "",
             f"Measured {h.now_utc():%Y-%m-%d %H:%M} UTC by", "", "```bash", h.command_line(),
             "```", "", *h.machine_info("dask", "distributed"), "",
             f"KOS with every document repeated {args.copies} times (10 % test documents): "
             f"{facts['D']:,} training documents, {facts['N']:,} training tokens, V = "
             f"{facts['V']:,}. Gibbs (SparseLDA), K = {args.topics}, `inference.chunks: 2`, "
             f"{sweeps} sweeps, {args.rounds} round(s) of the three runs in turn; median "
             f"throughput over rounds (tokens × sweeps / the run's train_seconds). "
             f"Same model from every run: **{'yes' if len(digests) == 1 else 'NO'}**.", ""]
    base1, base2 = rate[0], rate[1]
    lines += h.table(
        ["run", "M tokens/s (median)", "× 1 thread", "of 2 threads", "runs (train s)",
         "other processes' load (cores)"],
        [[MODES[m][0], f"{rate[m] / 1e6:.2f}", f"{rate[m] / base1:.2f}",
          f"{100 * rate[m] / base2:.0f} %",
          ", ".join(f"{r['train_seconds']:.1f}" for r in by_mode[m]),
          ", ".join(f"{r['foreign']:.1f}" for r in by_mode[m])]
         for m in range(len(MODES))])
    cluster = by_mode[2]
    per = []
    for r in cluster:
        m = r["metrics"]
        per.append({"wall": m["train_seconds"] / sweeps,
                    "compute": m["cluster_compute_seconds"] / sweeps,
                    "lists": m["cluster_lists_seconds"] / sweeps,
                    "sweep": m["cluster_sweep_seconds"] / sweeps,
                    "change": m["cluster_change_seconds"] / sweeps,
                    "send": m["cluster_send_seconds"] / sweeps,
                    "merge": m["cluster_merge_seconds"] / sweeps,
                    "peak": m.get("cluster_worker_peak_rss", 0),
                    "sent": m["cluster_bytes_sent"] / sweeps,
                    "received": m["cluster_bytes_received"] / sweeps})
    med = {k: statistics.median(p[k] for p in per) for k in per[0]}
    nkw = 4 * facts["V"] * args.topics
    lines += ["", "Per sweep of the cluster run (medians over rounds; bytes include the one-off "
              "distribution of z and n_dk before the first sweep, spread over the sweeps):", ""]
    lines += h.table(
        ["wall s", "slowest shard: lists + sweep + change s", "driver send s",
         "driver merge s", "rest: transfer back + scheduling s", "MiB sent", "MiB received",
         "n_kw MiB"],
        [[f"{med['wall']:.3f}",
          f"{med['compute']:.3f} = {med['lists']:.3f} + {med['sweep']:.3f} + "
          f"{med['change']:.3f}", f"{med['send']:.3f}", f"{med['merge']:.3f}",
          f"{med['wall'] - med['compute'] - med['merge'] - med['send']:.3f}",
          f"{med['sent'] / 2**20:.2f}", f"{med['received'] / 2**20:.2f}",
          f"{nkw / 2**20:.2f}"]])
    lines += ["", "The slowest shard's kernel time in its parts: building the SparseLDA word "
              "lists from the received n_kw, the sweep of its chunks, and computing and "
              "encoding its change of n_kw. Driver send: copying n_kw to every worker "
              "(serialisation and transfer). The rest of the wall is waiting for the results "
              "(their transfer back) and Dask's scheduling."]
    shard_bytes = 4 * facts["N"] / 2 + 4 * facts["D"] * args.topics / 2
    lines += ["", f"Peak RSS of a worker process (largest reported, median over rounds): "
              f"{med['peak'] / 2**20:.0f} MiB; its shard's state (z and n_dk of half the "
              f"corpus) is {shard_bytes / 2**20:.0f} MiB and one copy of n_kw "
              f"{nkw / 2**20:.1f} MiB; the rest is the Python process with topictk, NumPy "
              f"and Dask loaded, and the memory-mapped store pages it read (shared with the "
              f"page cache)."]
    lines += ["", "Other processes' load: the cores that processes other than the run kept busy "
              "while it ran (from /proc/stat); on this 2-core machine any load above 0 takes "
              "CPU from the runs that need 2 cores first.", "",
              f"Targets: 2 worker processes ≥ 1.6 × one thread: "
              f"**{'met' if rate[2] >= 1.6 * base1 else 'not met'}** "
              f"({rate[2] / base1:.2f}×); ≥ 90 % of 2 in-process threads: "
              f"**{'met' if rate[2] >= 0.9 * base2 else 'not met'}** "
              f"({100 * rate[2] / base2:.0f} %)."]
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--copies", type=int, default=10, help="KOS copies (10)")
    p.add_argument("--topics", type=int, default=128)
    p.add_argument("--sweeps", type=int, default=20)
    p.add_argument("--rounds", type=int, default=3)
    h.add_common_options(p)
    args = p.parse_args(argv)
    corpus = h.replicated_kos(args.copies, WORK)
    store = h.ensure_store(f"kos_x{args.copies}",
                           [str(corpus), "--vocab", str(h.data_path("uci_kos", "vocab.kos.txt")),
                            "--test-docs", "0.1", "--heldout-fraction", "0.2", "--seed", "0"],
                           out=WORK / f"store.x{args.copies}")
    facts = h.store_facts(store)
    rows = []
    for round_ in range(args.rounds):
        for mode in range(len(MODES)):
            rows.append(run_once(store, mode, args, round_))
            r = rows[-1]
            h.log(f"round {round_} {MODES[mode][0]}: {r['train_seconds']:.1f} s, "
                  f"{r['tokens'] / r['train_seconds'] / 1e6:.2f} M tokens/s")
    h.write_results(h.results_path(NAME, args.record), report(rows, facts, args))


if __name__ == "__main__":
    main()
