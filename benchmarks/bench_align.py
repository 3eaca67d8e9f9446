"""Did two runs find the same topics? ``topictk compare --align`` on 20 Newsgroups, K = 50.

Three runs on the 2,000-word 20 Newsgroups store (``20news_gan2015``): collapsed Gibbs with
seeds 1 and 2, and online VB with seed 1. ``topictk compare A B --align --format json``
matches the topics of B to those of A by least Jensen-Shannon distance (docs/algorithms.md
§11.7); reported: the median matched distance of Gibbs against Gibbs (another seed) and of
Gibbs against OVB, with the quartiles, and the time of the alignment command.

    python benchmarks/bench_align.py --record            # the recorded run
    python benchmarks/bench_align.py --sweeps 50 --updates 100   # a smoke run

Writes benchmarks/work/align/ (stores, runs, logs) and the report ``align.md``.
"""
from __future__ import annotations

import argparse
import json
import statistics
import time

import harness as h

NAME = "align"
WORK = h.WORK / "align"
TOPICS = 50
ALPHA, BETA = 0.1, 0.01


def gibbs_config(store, seed: int, sweeps: int) -> dict:
    return {"corpus": str(store), "output": str(WORK / "runs" / f"gibbs-s{seed}"),
            "model": {"topics": TOPICS, "alpha": ALPHA, "beta": BETA},
            "inference": {"algorithm": "gibbs", "iterations": sweeps,
                          "burn_in": sweeps - 1, "thin": 1},
            "training": {"seed": seed, "threads": 1, "eval_every": sweeps,
                         "checkpoint_every": 0}}


def ovb_config(store, seed: int, updates: int) -> dict:
    return {"corpus": str(store), "output": str(WORK / "runs" / f"ovb-s{seed}"),
            "model": {"topics": TOPICS, "alpha": ALPHA, "beta": BETA},
            "inference": {"algorithm": "ovb", "iterations": updates, "batch_size": 256,
                          "tau0": 64.0, "kappa": 0.7},
            "training": {"seed": seed, "threads": 1, "eval_every": updates,
                         "checkpoint_every": 0}}


def train(config: dict, tag: str, args) -> dict:
    h.wait_for_quiet(1, args.quiet_margin, args.max_wait)
    res = h.train(config, WORK / "configs" / f"{tag}.yaml", WORK / "logs" / f"{tag}.log")
    if res["rc"] != 0:
        raise SystemExit(f"{tag}: training failed:\n{h.tail(WORK / 'logs' / f'{tag}.log')}")
    h.log(f"{tag}: trained in {res['wall']:.0f} s")
    return res


def align(a: str, b: str) -> dict:
    """``topictk compare RUN_A RUN_B --align --format json``: the alignment and its time."""
    log = WORK / "logs" / f"align-{a}-{b}.log"
    res = h.run_measured([*h.TOPICTK, "compare", str(WORK / "runs" / a), str(WORK / "runs" / b),
                          "--align", "--format", "json"], log,
                         stdout_path=log.with_suffix(".json"))
    if res["rc"] != 0:
        raise SystemExit(f"compare --align {a} {b} failed:\n{h.tail(log)}")
    result = json.loads(res["stdout"])["alignments"][0]
    distances = sorted(p["distance"] for p in result["pairs"])
    q1, _, q3 = statistics.quantiles(distances, n=4)
    return {"a": a, "b": b, "median": result["median_distance"], "q1": q1, "q3": q3,
            "min": distances[0], "max": distances[-1],
            "below_0.5": sum(d < 0.5 for d in distances), "pairs": len(distances),
            "seconds": res["wall"],
            "best": sorted(result["pairs"], key=lambda p: p["distance"])[:3]}


def report(args, store, alignments: list[dict], runs: dict, started) -> str:
    facts = h.store_facts(store)
    lines = [(f"# `topictk compare --align`: Gibbs against Gibbs and against OVB, 20 Newsgroups "
             f"K = {TOPICS}"), "",
             f"Measured {started:%Y-%m-%d %H:%M} UTC by", "", "```bash", h.command_line(), "```",
             "", *h.machine_info(), "",
             (f"Store: {h.prepare_command('20news_gan2015', store)} ({facts['D']:,} training "
             f"documents, {facts['N']:,} tokens, V = {facts['V']:,}). α = {ALPHA}, β = {BETA}, "
             f"one thread. Gibbs: {args.sweeps} sweeps (SparseLDA), seeds 1 and 2; OVB: "
             f"{args.updates} mini-batches of 256 documents (τ0 = 64, κ = 0.7), seed 1. Each "
             f"pair is aligned by `topictk compare A B --align --format json`: the topics of B "
             f"matched one to one to those of A at the least total Jensen-Shannon distance "
             f"(base 2: 0 = the same distribution, 1 = no word in common; "
             f"docs/algorithms.md §11.7)."), ""]
    lines += h.table(["A", "B", "median distance", "quartiles", "min – max",
                      "pairs below 0.5", "compare --align (s)"],
                     [[a["a"], a["b"], f"**{a['median']:.3f}**", f"{a['q1']:.3f} – {a['q3']:.3f}",
                       f"{a['min']:.3f} – {a['max']:.3f}", f"{a['below_0.5']} of {a['pairs']}",
                       f"{a['seconds']:.1f}"] for a in alignments])
    lines += ["", "Training time of the runs (wall seconds of `topictk train`, evaluation "
                  "included): " + ", ".join(f"{k} {v['wall']:.0f}" for k, v in runs.items())
              + ".", "", ("The best-matched pairs of each alignment (topic of A, topic of B, "
              "distance, top words):"), ""]
    for a in alignments:
        for p in a["best"]:
            lines.append(f"- {a['a']} {p['topic_a']} ↔ {a['b']} {p['topic_b']} "
                         f"({p['distance']:.3f}): {' '.join(p['words_a'])} | "
                         f"{' '.join(p['words_b'])}")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sweeps", type=int, default=1000, help="Gibbs sweeps (1000)")
    parser.add_argument("--updates", type=int, default=2000,
                        help="OVB mini-batch updates (2000, about 45 passes)")
    h.add_common_options(parser)
    args = parser.parse_args()
    started = h.now_utc()
    began = time.perf_counter()
    store = h.ensure_store("20news_gan2015")
    runs = {"gibbs-s1": train(gibbs_config(store, 1, args.sweeps), "gibbs-s1", args),
            "gibbs-s2": train(gibbs_config(store, 2, args.sweeps), "gibbs-s2", args),
            "ovb-s1": train(ovb_config(store, 1, args.updates), "ovb-s1", args)}
    alignments = [align("gibbs-s1", "gibbs-s2"), align("gibbs-s1", "ovb-s1")]
    for a in alignments:
        h.log(f"{a['a']} ~ {a['b']}: median {a['median']:.3f}")
    text = report(args, store, alignments, runs, started)
    h.write_results(h.results_path(NAME, args.record), text)
    h.log(f"done in {(time.perf_counter() - began) / 60:.1f} min")


if __name__ == "__main__":
    main()
