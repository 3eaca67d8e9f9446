"""Collapsed Gibbs on a local Dask cluster against the in-process run.

Ways to run the same chain (AD-LDA with 6 chunks, K = 128) on KOS with every document
repeated R times (R = 10: 4.2 M training tokens; the table gives the exact counts):

* in-process, 1 thread (``training.threads: 1``)
* in-process, 2 threads (``training.threads: 2``)
* a local Dask cluster of W single-thread worker processes (``--dask-workers W``), for each W
  of ``--workers`` (1, 2 and 3: on this 2-core machine the third shares a core)

All give the same model (checked: the digests of model.npz's arrays must agree). The
runs alternate (one round = one run of each), so that the machine's load hits them alike;
throughput is training tokens × sweeps / train_seconds (the run's own clock, which leaves out
start-up, the cluster's start and evaluation), the median over rounds. For the cluster run
also: per-sweep wall split into the slowest shard's kernel time (word lists, sweep, count
change), the driver's sending of arrays, its adding of the total change and the rest (the
workers' merge and relay of the changes, transfers and scheduling), and bytes moved per sweep:
what the driver sends, and what the workers send to each other and to the driver (Dask's own
count of each worker's transfers).

Besides the report, ``--record`` writes results/dask.json (each run's per-sweep parts), which
``benchmarks/studies/dask_cost_model.py`` fits its constants to.

    python benchmarks/bench_dask.py --record                     # R = 10, 20 sweeps, 3 rounds
    python benchmarks/bench_dask.py --copies 2 --sweeps 5 --rounds 1   # quick check
"""
from __future__ import annotations

import argparse
import json
import statistics

import harness as h

NAME = "dask"
WORK = h.WORK / "dask"

CHUNKS = 6          # a shard for each of 1, 2 and 3 workers, the same chain for all
# the first sweeps hold the one-off costs (the shards sent out, each worker opening the
# store): the steady state is the full run less a run of the same chain stopped after them
FIRST = 5


def modes(workers: list[int]) -> list[tuple[str, dict, list[str]]]:
    """(label, training settings, options) of each run: in-process, 1 and 2 threads, then
    a local cluster of each size of ``workers``."""
    return [("in-process, 1 thread", {"threads": 1}, []),
            ("in-process, 2 threads", {"threads": 2}, []),
            *((f"Dask, {w} worker process{'es' if w > 1 else ''} × 1 thread", {"threads": 1},
               ["--dask-workers", str(w)]) for w in workers)]


def train_once(store, mode: int, args, name: str, sweeps: int) -> tuple[dict, dict]:
    """The last metrics line of a run of ``sweeps`` sweeps (evaluated once, at its end, so
    that no evaluation's traffic enters the counters) and its measured process."""
    label, training, options = modes(args.workers)[mode]
    cfg = {"corpus": str(store), "output": str(WORK / f"run.{name}"),
           "model": {"topics": args.topics, "alpha": 0.1, "beta": 0.01},
           "inference": {"algorithm": "gibbs", "iterations": sweeps, "chunks": CHUNKS,
                         "sparse": True},
           "training": {"seed": 0, "eval_every": sweeps, "checkpoint_every": 0,
                        **training},
           "evaluation": {"fold_in_sweeps": 2, "fold_in_burn_in": 1}}
    h.wait_for_quiet(2, args.quiet_margin, args.max_wait)
    log_path = WORK / "logs" / f"{name}.log"
    res = h.train(cfg, WORK / f"{name}.yaml", log_path, options=options)
    if res["rc"] != 0:
        raise SystemExit(f"{label} failed:\n{h.tail(log_path)}")
    return h.read_metrics(WORK / f"run.{name}")[-1], res


def run_once(store, mode: int, args, round_: int) -> dict:
    """The run of ``args.sweeps`` sweeps in ``mode``, and the same chain stopped after FIRST
    sweeps (whose counters, subtracted, leave the steady state)."""
    _, _, options = modes(args.workers)[mode]
    name = f"m{mode}.r{round_}"
    first, _ = train_once(store, mode, args, f"{name}.first", FIRST)
    last, res = train_once(store, mode, args, name, args.sweeps)
    return {"mode": mode, "first": first, "workers": int(options[1]) if options else 0,
            "wall": res["wall"], "foreign": res["foreign"],
            "train_seconds": last["train_seconds"], "tokens": last["tokens_seen"],
            "metrics": last, "digest": h.model_digest(WORK / f"run.{name}")}


def per_sweep(run: dict, sweeps: int) -> dict:
    """A cluster run's per-sweep parts (seconds, bytes) in the steady state: its counters less
    those of the same chain stopped after FIRST sweeps, per sweep between; and the bytes per
    sweep over the whole run (``moved_all``: the one-off distribution spread over the
    sweeps)."""
    m, f = run["metrics"], run["first"]
    n = sweeps - FIRST

    def d(key: str) -> float:
        return (m.get(key, 0) - f.get(key, 0)) / n

    return {"wall": d("train_seconds"), "compute": d("cluster_compute_seconds"),
            "lists": d("cluster_lists_seconds"), "sweep": d("cluster_sweep_seconds"),
            "change": d("cluster_change_seconds"), "send": d("cluster_send_seconds"),
            "merge": d("cluster_merge_seconds"), "peak": m.get("cluster_worker_peak_rss", 0),
            "sent": d("cluster_bytes_sent"), "received": d("cluster_bytes_received"),
            "workers": d("cluster_bytes_workers"),
            "overhead": 1 - d("cluster_compute_seconds") / d("train_seconds"),
            "moved_all": (m["cluster_bytes_sent"] + m["cluster_bytes_received"]
                          + m.get("cluster_bytes_workers", 0)) / sweeps}


def summary(rows: list[dict], args) -> dict:
    """Per mode: the median throughput and, for cluster runs, the median per-sweep parts."""
    out = []
    for m, (label, _, options) in enumerate(modes(args.workers)):
        runs = [r for r in rows if r["mode"] == m]
        entry = {"label": label, "workers": runs[0]["workers"],
                 "rate": statistics.median(r["tokens"] / r["train_seconds"] for r in runs),
                 "steady_rate": statistics.median(
                     (r["tokens"] - r["first"]["tokens_seen"])
                     / (r["train_seconds"] - r["first"]["train_seconds"]) for r in runs),
                 "train_seconds": [r["train_seconds"] for r in runs],
                 "foreign": [r["foreign"] for r in runs]}
        if options:
            parts = [per_sweep(r, args.sweeps) for r in runs]
            entry["per_sweep"] = {k: statistics.median(p[k] for p in parts) for k in parts[0]}
        out.append(entry)
    return {"sweeps": args.sweeps, "topics": args.topics, "chunks": CHUNKS, "modes": out}


def report(rows: list[dict], facts: dict, args) -> str:
    sweeps = args.sweeps
    got = summary(rows, args)["modes"]
    digests = {r["digest"] for r in rows}
    lines = ["# Collapsed Gibbs on a local Dask cluster", "",
             f"Measured {h.now_utc():%Y-%m-%d %H:%M} UTC by", "", "```bash", h.command_line(),
             "```", "", *h.machine_info("dask", "distributed"), "",
             f"KOS with every document repeated {args.copies} times (10 % test documents): "
             f"{facts['D']:,} training documents, {facts['N']:,} training tokens, V = "
             f"{facts['V']:,}. Gibbs (SparseLDA), K = {args.topics}, `inference.chunks: "
             f"{CHUNKS}`, {sweeps} sweeps, {args.rounds} round(s) of the runs in turn; median "
             f"throughput over rounds (tokens × sweeps / the run's train_seconds). "
             f"Same model from every run: **{'yes' if len(digests) == 1 else 'NO'}**.", ""]
    base1, base2 = got[0]["rate"], got[1]["rate"]
    lines += h.table(
        ["run", "M tokens/s (median)", "× 1 thread", "of 2 threads",
         f"steady M tokens/s (sweeps {FIRST + 1}–{sweeps})", "of 2 threads, steady",
         "runs (train s)", "other processes' load (cores)"],
        [[g["label"], f"{g['rate'] / 1e6:.2f}", f"{g['rate'] / base1:.2f}",
          f"{100 * g['rate'] / base2:.0f} %", f"{g['steady_rate'] / 1e6:.2f}",
          f"{100 * g['steady_rate'] / got[1]['steady_rate']:.0f} %",
          ", ".join(f"{t:.1f}" for t in g["train_seconds"]),
          ", ".join(f"{f:.1f}" for f in g["foreign"])] for g in got])
    nkw = 4 * facts["V"] * args.topics
    lines += ["", f"Per sweep of the cluster runs in the steady state (sweeps {FIRST + 1} to "
              f"{sweeps}: each run's counters less those of the same chain stopped after "
              f"{FIRST} sweeps; medians over rounds); the last column is all the bytes of the "
              f"run per sweep, the one-off distribution of z, n_dk and n_kw included:", ""]
    rows_out = []
    for g in got[2:]:
        med = g["per_sweep"]
        per_token = (med["sent"] + med["received"] + med["workers"]) / facts["N"]
        rows_out.append([
            g["workers"], f"{med['wall']:.3f}",
            f"{med['compute']:.3f} = {med['lists']:.3f} + {med['sweep']:.3f} + "
            f"{med['change']:.3f}", f"{med['send']:.3f}", f"{med['merge']:.3f}",
            f"{med['wall'] - med['compute'] - med['merge'] - med['send']:.3f}",
            f"{100 * med['overhead']:.1f} %",
            f"{med['sent'] / 2**20:.2f}", f"{med['received'] / 2**20:.2f}",
            f"{med['workers'] / 2**20:.2f}", f"{per_token:.2f}",
            f"{med['moved_all'] / facts['N']:.2f}"])
    lines += h.table(
        ["workers", "wall s", "slowest shard: lists + sweep + change s", "driver send s",
         "driver add s", "rest: merge, relay, transfers, scheduling s", "overhead",
         "MiB driver sent", "MiB driver received", "MiB between workers", "bytes / token",
         "bytes / token, whole run"], rows_out)
    lines += ["", f"n_kw is {nkw / 2**20:.2f} MiB. The slowest shard's kernel time in its "
              "parts: building the SparseLDA word lists from its copy of n_kw, the sweep of "
              "its chunks, and computing and encoding its change of n_kw. Driver send: the "
              "one-off copies of the shards' state. Driver add: adding the total change to "
              "its n_kw. The rest of the wall is the workers adding up and handing down the "
              "changes, the transfers and Dask's scheduling. Overhead: the share of the wall "
              "that is not the slowest shard's kernel time. Bytes / token: all of it (the "
              "driver's sending and receiving, and the merge operands and totals the workers "
              "send each other), per training token and sweep."]
    two = next((g for g in got[2:] if g["workers"] == 2), None)
    if two is not None:
        med = two["per_sweep"]
        per_token = med["moved_all"] / facts["N"]
        shard_bytes = 4 * facts["N"] / 2 + 4 * facts["D"] * args.topics / 2
        lines += ["", f"Peak RSS of a worker process of the 2-worker run (largest reported, "
                  f"median over rounds): {med['peak'] / 2**20:.0f} MiB; its shard's state (z "
                  f"and n_dk of half the corpus) is {shard_bytes / 2**20:.0f} MiB and a copy of "
                  f"n_kw {nkw / 2**20:.1f} MiB; the rest is the Python process with topictk, "
                  f"NumPy and Dask loaded, and the memory-mapped store pages it read (shared "
                  f"with the page cache)."]
        lines += ["", "Other processes' load: the cores that processes other than the run kept "
                  "busy while it ran (from /proc/stat); on this 2-core machine any load above 0 "
                  "takes CPU from the runs that need 2 cores first.", "",
                  f"Targets (2 workers): ≥ 0.9 × two in-process threads: "
                  f"**{'met' if two['rate'] >= 0.9 * base2 else 'not met'}** "
                  f"({two['rate'] / base2:.2f}×); bytes per token per sweep ≤ 1.0 (whole run): "
                  f"**{'met' if per_token <= 1.0 else 'not met'}** ({per_token:.2f}); cluster "
                  f"overhead ≤ 5 % of a sweep: "
                  f"**{'met' if med['overhead'] <= 0.05 else 'not met'}** "
                  f"({100 * med['overhead']:.1f} %)."]
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--copies", type=int, default=10, help="KOS copies (10)")
    p.add_argument("--topics", type=int, default=128)
    p.add_argument("--sweeps", type=int, default=20)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--workers", type=int, nargs="+", default=[1, 2, 3],
                   help="the local cluster sizes to run (1 2 3)")
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
        for mode, (label, _, _) in enumerate(modes(args.workers)):
            rows.append(run_once(store, mode, args, round_))
            r = rows[-1]
            h.log(f"round {round_} {label}: {r['train_seconds']:.1f} s, "
                  f"{r['tokens'] / r['train_seconds'] / 1e6:.2f} M tokens/s")
    path = h.results_path(NAME, args.record)
    h.write_results(path, report(rows, facts, args))
    data = {**summary(rows, args), "copies": args.copies,
            "corpus": {k: v for k, v in facts.items() if k != "path"}}
    path.with_suffix(".json").write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
