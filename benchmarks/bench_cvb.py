"""Teh, Newman & Welling (2007), Figures 1-2, qualitatively: held-out log-probability per token
of collapsed Gibbs, batch VB, CVB (and CVB0) on KOS (K = 8) and NIPS (K = 40) with alpha = beta
= 0.1 and Protocol B (10% of every training document's tokens held out, scored with that
document's own training state; ALGORITHMS.md §11.1, §13.2).

What must hold: CVB > VB at convergence, collapsed Gibbs best, CVB converging in fewer
iterations than Gibbs.

    python benchmarks/bench_cvb.py                       # the recorded run (about 15 minutes)
    python benchmarks/bench_cvb.py --quick               # a smoke run

Writes benchmarks/work/variational/cvb_results.json and benchmarks/variational_cvb.png and
prints the Markdown table of benchmarks/RESULTS.md ("## Variational family"). Every number
comes from topictk's own drivers and its Protocol B scorer (``train_heldout_probabilities``).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from topictk.corpus.prepare import PrepareOptions, prepare  # noqa: E402
from topictk.corpus.store import CorpusStore  # noqa: E402
from topictk.inference.perplexity import perplexity_from_probabilities  # noqa: E402
from topictk.inference.registry import (
    get_driver,  # noqa: E402
    load_config,  # noqa: E402
)
from topictk.streams import Streams  # noqa: E402

DATA = ROOT.parent / "shared" / "data"
WORK = ROOT / "benchmarks" / "work" / "variational"
DATASETS = {
    "kos": {"docword": DATA / "uci_kos" / "docword.kos.txt.gz",
            "vocab": DATA / "uci_kos" / "vocab.kos.txt", "topics": 8},
    # the filtered UCI NIPS (words with count > 20); its 1,350-document training file
    "nips": {"docword": DATA / "uci_nips_filtered_giuseppedib" / "docword.train.txt.gz",
             "vocab": DATA / "uci_nips_filtered_giuseppedib" / "vocab.filtered.txt",
             "topics": 40},
}
# iterations per algorithm (full run / --quick)
ITERATIONS = {
    "kos": {"gibbs": 600, "vb": 100, "cvb": 150, "cvb0": 150},
    "nips": {"gibbs": 400, "vb": 50, "cvb": 120, "cvb0": 120},
}
SCHEDULE = sorted({1, 2, 3, 4, 5, 6, 8, 10, 12, 15, 20, 25, 30, 35, 40, 50, 60, 70, 80, 100,
                   120, 150, 200, 250, 300, 350, 400, 500, 600})
CONVERGED_WITHIN = 0.01     # nats per token below the run's final value


def store_for(name: str) -> Path:
    path = WORK / f"{name}_protocol_b"
    if not (path / "manifest.json").exists():
        spec = DATASETS[name]
        prepare([str(spec["docword"])], path,
                PrepareOptions(format="uci", vocab=str(spec["vocab"]), test_docs=0,
                               heldout_train_fraction=0.1, seed=0, force=True))
    return path


def config_for(store: Path, algorithm: str, topics: int, iterations: int):
    inference = {"algorithm": algorithm, "iterations": iterations}
    if algorithm == "gibbs":
        inference.update(burn_in=iterations // 2, thin=max(1, iterations // 20))
    else:
        inference["tol"] = 0            # run every iteration; convergence is measured here
    raw = {"corpus": str(store), "output": str(WORK / "unused"),
           "model": {"topics": topics, "alpha": 0.1, "beta": 0.1}, "inference": inference,
           "training": {"threads": 1}}
    return load_config(None, raw=raw)


def run(store: Path, algorithm: str, topics: int, iterations: int, seed: int,
        threads: int) -> dict:
    config = config_for(store, algorithm, topics, iterations)
    corpus = CorpusStore.open(store)
    held = corpus.train_heldout()
    streams = Streams(seed)
    driver = get_driver(algorithm)(config, corpus, threads, streams=streams)
    state = driver.init_state()
    curve, samples, train_seconds = [], [], 0.0
    schedule = [s for s in SCHEDULE if s < iterations] + [iterations]
    for t in range(iterations):
        began = time.perf_counter()
        info = driver.step(state, t)
        train_seconds += time.perf_counter() - began
        if info.collect_sample:
            samples.append({k: np.array(v, copy=True) for k, v in driver.sample(state).items()})
        if t + 1 in schedule:
            p = driver.train_heldout_probabilities(state, [], held)      # point estimate
            ppl, _ = perplexity_from_probabilities(p, held.counts)
            curve.append({"iteration": t + 1, "log_prob": -float(np.log(ppl)),
                          "train_seconds": train_seconds})
    final = curve[-1]["log_prob"]
    averaged = None
    if samples:                     # Gibbs: theta-hat and phi-hat averaged over the samples
        p = driver.train_heldout_probabilities(state, samples, held)
        averaged = -float(np.log(perplexity_from_probabilities(p, held.counts)[0]))
    converged_at = next(c["iteration"] for c in curve if c["log_prob"] >= final - CONVERGED_WITHIN)
    return {"algorithm": algorithm, "seed": seed, "iterations": iterations, "curve": curve,
            "final": final, "final_averaged": averaged, "samples": len(samples),
            "converged_at": converged_at, "train_seconds": train_seconds,
            "seconds_per_iteration": train_seconds / iterations}


def table(results: list[dict]) -> str:
    lines = ["| corpus (K) | algorithm | held-out log p / token (point) | Gibbs averaged over "
             "samples | iterations to within 0.01 of final | s / iteration | runs |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for name in DATASETS:
        for algorithm in ("gibbs", "cvb", "cvb0", "vb"):
            rows = [r for r in results if r["dataset"] == name and r["algorithm"] == algorithm]
            if not rows:
                continue
            final = np.array([r["final"] for r in rows])
            avg = [r["final_averaged"] for r in rows if r["final_averaged"] is not None]
            conv = [r["converged_at"] for r in rows]
            spi = np.mean([r["seconds_per_iteration"] for r in rows])
            sd = f" ± {final.std(ddof=1):.4f}" if len(rows) > 1 else ""
            avg_text = f"{np.mean(avg):.4f}" if avg else "—"
            lines.append(f"| {name} ({DATASETS[name]['topics']}) | {algorithm} | "
                         f"{final.mean():.4f}{sd} | {avg_text} | "
                         f"{'/'.join(map(str, conv))} (of {rows[0]['iterations']}) | "
                         f"{spi:.3f} | {len(rows)} |")
    return "\n".join(lines)


def plot(results: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colours = {"gibbs": "tab:green", "cvb": "tab:blue", "cvb0": "tab:cyan", "vb": "tab:red"}
    names = [name for name in DATASETS if any(r["dataset"] == name for r in results)]
    fig, axes = plt.subplots(1, len(names), figsize=(5.5 * len(names), 4))
    for ax, name in zip(np.atleast_1d(axes), names):
        for r in results:
            if r["dataset"] != name:
                continue
            xs = [c["iteration"] for c in r["curve"]]
            ys = [c["log_prob"] for c in r["curve"]]
            ax.plot(xs, ys, color=colours[r["algorithm"]], alpha=0.8,
                    label=r["algorithm"] if r["seed"] == 0 else None)
            if r["final_averaged"] is not None:
                ax.scatter([xs[-1]], [r["final_averaged"]], color=colours["gibbs"], marker="*",
                           s=80, label="gibbs, averaged samples" if r["seed"] == 0 else None)
        ax.set_xscale("log")
        ax.set_xlabel("iteration")
        ax.set_ylabel("held-out log-probability per token")
        ax.set_title(f"{name.upper()}, K = {DATASETS[name]['topics']}, Protocol B 90/10")
        finals = [r["final"] for r in results if r["dataset"] == name]
        ax.set_ylim(min(finals) - 0.4, max(finals) + 0.1)
        ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=list(DATASETS))
    parser.add_argument("--seeds", type=int, nargs="+", default=None,
                        help="initialisation seeds (default: 0 1 for kos, 0 for nips)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--quick", action="store_true", help="a few iterations only")
    parser.add_argument("--from-results", nargs="+", metavar="JSON", default=None,
                        help="run nothing: merge saved results files (e.g. one run per "
                             "dataset) into cvb_results.json, redraw the plot, print the table")
    args = parser.parse_args()
    WORK.mkdir(parents=True, exist_ok=True)
    if args.from_results:
        results = [r for f in args.from_results for r in json.loads(Path(f).read_text())["results"]]
        (WORK / "cvb_results.json").write_text(json.dumps({"results": results}, indent=1))
        plot(results, ROOT / "benchmarks" / "variational_cvb.png")
        print(table(results))
        return
    results = []
    began = time.perf_counter()
    for name in args.datasets:
        store = store_for(name)
        seeds = args.seeds if args.seeds is not None else ([0, 1] if name == "kos" else [0])
        for seed in seeds:
            for algorithm, iterations in ITERATIONS[name].items():
                if args.quick:
                    iterations = max(4, iterations // 25)
                r = run(store, algorithm, DATASETS[name]["topics"], iterations, seed,
                        args.threads)
                r["dataset"] = name
                results.append(r)
                print(f"{name} seed {seed} {algorithm:5s} final {r['final']:.4f} "
                      f"(averaged {r['final_averaged']}) converged at {r['converged_at']} "
                      f"{r['train_seconds']:.1f}s", flush=True)
    out = WORK / ("cvb_results_quick.json" if args.quick else "cvb_results.json")
    out.write_text(json.dumps({"results": results, "wall_seconds": time.perf_counter() - began},
                              indent=1))
    if not args.quick:
        plot(results, ROOT / "benchmarks" / "variational_cvb.png")
    print(table(results))


if __name__ == "__main__":
    main()
