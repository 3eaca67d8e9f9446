"""Large K: tokens per second of the WarpLDA sampler (``inference.sampler: warp``,
docs/algorithms.md §2.9) beside the Metropolis-Hastings sampler (``mh``) and SparseLDA
(``sparse``), one thread, through ``topictk train``; and, with ``--reach``, the training time
WarpLDA takes to reach the held-out perplexity SparseLDA has after a number of sweeps.

Speed: every sampler trains ``--sweeps`` sweeps from the same random start with one
evaluation at the end (excluded from the training time the run logs); tokens/s = training
tokens x sweeps / training seconds. Reach: SparseLDA trains ``--reach-sweeps`` sweeps,
evaluated every tenth of them; WarpLDA trains for at most the same training time, evaluated
every ``--reach-every`` sweeps; the report gives the first evaluation at which WarpLDA's
held-out perplexity is at or below SparseLDA's last, and that time's share of SparseLDA's.
The machine's load (``os.getloadavg``) and the cores other processes kept busy are logged per
run, because the machine is shared.

    python benchmarks/studies/warp_speed.py --record
    python benchmarks/studies/warp_speed.py --topics 1000 --sweeps 5        # quick
    python benchmarks/studies/warp_speed.py --reach 5000 --reach-sweeps 200 --record
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # benchmarks/: the harness

import harness as h  # noqa: E402

NAME = "warp_speed"
WORK = h.WORK / "warp"
SAMPLERS = ("warp", "mh", "sparse")


def _config(store: Path, out: Path, topics: int, sampler: str, sweeps: int,
            every: int) -> dict:
    return {"corpus": str(store), "output": str(out),
            "model": {"topics": topics, "alpha": 0.1, "beta": 0.01},
            "inference": {"algorithm": "gibbs", "iterations": sweeps, "burn_in": sweeps - 1,
                          "thin": 1, "sampler": sampler},
            "training": {"seed": 0, "threads": 1, "eval_every": every,
                         "checkpoint_every": sweeps},
            "evaluation": {"fold_in_sweeps": 20, "fold_in_burn_in": 10}}


def _train(store: Path, corpus: str, topics: int, sampler: str, sweeps: int, every: int,
           args) -> tuple[dict, list[dict]]:
    """One measured run: (the process's measures with the load before it, its metrics)."""
    h.wait_for_quiet(1, args.quiet_margin, args.max_wait)
    load = os.getloadavg()[0]
    tag = f"{corpus}-K{topics}-{sampler}-{sweeps}"
    out = WORK / "runs" / tag
    res = h.train(_config(store, out, topics, sampler, sweeps, every),
                  WORK / "configs" / f"{tag}.yaml", WORK / "logs" / f"{tag}.log")
    if res["rc"] != 0:
        raise SystemExit(f"{tag} failed:\n{h.tail(WORK / 'logs' / f'{tag}.log')}")
    res["load"] = load
    return res, h.read_metrics(out)


def speed(args, store: Path, corpus: str, n_tokens: int) -> list[list]:
    rows = []
    for topics in args.topics:
        for sampler in args.samplers:
            res, records = _train(store, corpus, topics, sampler, args.sweeps, args.sweeps, args)
            seconds = records[-1]["train_seconds"]
            rate = n_tokens * args.sweeps / seconds
            h.log(f"{corpus} K={topics} {sampler}: {rate / 1e6:.2f} M tokens/s")
            rows.append([corpus, f"{topics:,}", sampler, args.sweeps, f"{seconds:.1f}",
                         f"{rate / 1e6:.2f} M", h.fmt(records[-1].get("perplexity_point")),
                         h.mib(res["maxrss"]), f"{res['load']:.2f}",
                         f"{res['foreign']:.2f}"])
    return rows


def reach(args, store: Path, corpus: str) -> list[str]:
    """The reach report of K = ``args.reach``: both curves and the time to SparseLDA's end."""
    topics, sweeps = args.reach, args.reach_sweeps
    _, sparse = _train(store, corpus, topics, "sparse", sweeps, max(1, sweeps // 10), args)
    target, budget = sparse[-1]["perplexity_point"], sparse[-1]["train_seconds"]
    warp_sweeps = args.reach_max_sweeps
    _, warp = _train(store, corpus, topics, "warp", warp_sweeps, args.reach_every, args)
    hit = next((m for m in warp if m["perplexity_point"] <= target), None)
    lines = [f"## Time to SparseLDA's perplexity after {sweeps} sweeps ({corpus}, K = "
             f"{topics:,})", "",
             f"SparseLDA: {sweeps} sweeps in {budget:.1f} s, held-out perplexity {target:.1f}. "
             + (f"WarpLDA reaches it at sweep {hit['step']}, {hit['train_seconds']:.1f} s: "
                f"{hit['train_seconds'] / budget:.2f} of SparseLDA's time." if hit else
                f"WarpLDA does not reach it in {warp_sweeps} sweeps "
                f"({warp[-1]['train_seconds']:.1f} s)."), ""]
    for name, records in (("sparse", sparse), ("warp", warp)):
        points = ", ".join(f"({m['step']}, {m['train_seconds']:.1f}, "
                           f"{m['perplexity_point']:.0f})" for m in records)
        lines.append(f"- {name} (sweep, training s, perplexity): {points}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", nargs="+", default=["uci_kos"])
    parser.add_argument("--topics", type=int, nargs="+", default=[1000, 5000, 10000])
    parser.add_argument("--samplers", nargs="+", default=list(SAMPLERS), choices=SAMPLERS)
    parser.add_argument("--sweeps", type=int, default=20)
    parser.add_argument("--reach", type=int, default=None, metavar="K",
                        help="measure the time to SparseLDA's perplexity at this K instead")
    parser.add_argument("--reach-sweeps", type=int, default=200)
    parser.add_argument("--reach-every", type=int, default=20)
    parser.add_argument("--reach-max-sweeps", type=int, default=600)
    h.add_common_options(parser)
    args = parser.parse_args()
    began = h.now_utc()
    name = NAME if args.reach is None else f"{NAME}_reach"
    lines = [f"# WarpLDA at large K: {'speed' if args.reach is None else 'time to perplexity'}",
             "", f"Generated by `benchmarks/studies/warp_speed.py`; command: "
             f"`{h.command_line()}`.", ""]
    body = []
    for corpus in args.corpus:
        store = h.ensure_store(corpus)
        facts = h.store_facts(store)
        lines.append(f"- {corpus}: `{h.prepare_command(corpus, store)}`: {facts['D']:,} "
                     f"training documents, {facts['N']:,} training tokens, V = {facts['V']:,}")
        if args.reach is None:
            body += speed(args, store, corpus, facts["N"])
        else:
            body += [""] + reach(args, store, corpus)
    lines += [f"- Date: {began:%Y-%m-%d %H:%M} UTC to {h.now_utc():%H:%M} UTC",
              *h.machine_info(),
              "- alpha = 0.1, beta = 0.01, seed 0, one thread, `inference.chunks` auto (2 "
              "chunks on these corpora), `mh_steps` 2; perplexity: point estimate, fold-in of "
              "the store's test documents (20 sweeps, 10 burn-in).",
              "- load: 1-minute load average before the run; contention: cores other "
              "processes kept busy during it (2 cores).", ""]
    if args.reach is None:
        lines += h.table(["corpus", "K", "sampler", "sweeps", "train s", "tokens/s",
                          "held-out ppl", "peak RSS MiB", "load", "contention"], body,
                         "llrrrrrrrr")
    else:
        lines += body
    h.write_results(h.results_path(name, args.record), "\n".join(lines))


if __name__ == "__main__":
    main()
