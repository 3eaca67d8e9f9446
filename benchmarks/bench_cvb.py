"""Teh, Newman & Welling (2007), Figures 1-2, qualitatively: held-out log-probability per token
of collapsed Gibbs, batch VB, CVB (and CVB0) on KOS (K = 8) and NIPS (K = 40) with alpha = beta
= 0.1 and Protocol B (10% of every training document's tokens held out, scored with that
document's own training state; ALGORITHMS.md §11.1, §13.2).

What must hold: CVB > VB at convergence, collapsed Gibbs best, CVB converging in fewer
iterations than Gibbs.

    python benchmarks/bench_cvb.py --record                 # the recorded run (about 15 minutes)
    python benchmarks/bench_cvb.py --quick --datasets kos   # a smoke run

Every run is ``topictk train`` (one process per run); the curve is the Protocol B point value
of its ``metrics.jsonl`` (``--evals`` evaluations per run), the Gibbs value averaged over its
saved samples comes from ``Run.evaluate()``. Writes benchmarks/work/cvb/results.json, the
report ``cvb.md`` and the plot ``variational_cvb.png``.
"""
from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import harness as h
import numpy as np

import topictk

NAME = "cvb"
WORK = h.WORK / "cvb"
DATASETS = {"kos": {"store": "kos_protocol_b", "topics": 8},
            "nips": {"store": "nips_protocol_b", "topics": 40}}
# iterations per algorithm (full run; --quick divides them by 25)
ITERATIONS = {
    "kos": {"gibbs": 600, "vb": 100, "cvb": 150, "cvb0": 150},
    "nips": {"gibbs": 400, "vb": 50, "cvb": 120, "cvb0": 120},
}
CONVERGED_WITHIN = 0.01     # nats per token below the run's final value


def config_for(store: Path, algorithm: str, topics: int, iterations: int, seed: int,
               threads: int, evals: int, output: Path) -> dict:
    inference = {"algorithm": algorithm, "iterations": iterations}
    if algorithm == "gibbs":
        inference.update(burn_in=iterations // 2, thin=max(1, iterations // 20))
    else:
        inference["tol"] = 0            # run every iteration; convergence is measured here
    return {"corpus": str(store), "output": str(output),
            "model": {"topics": topics, "alpha": 0.1, "beta": 0.1}, "inference": inference,
            "training": {"seed": seed, "threads": threads,
                         "eval_every": max(1, iterations // evals), "checkpoint_every": 0}}


def run(name: str, store: Path, algorithm: str, iterations: int, seed: int, threads: int,
        evals: int) -> dict:
    tag = f"{name}-{algorithm}-s{seed}-i{iterations}"
    cfg = config_for(store, algorithm, DATASETS[name]["topics"], iterations, seed, threads,
                     evals, WORK / "runs" / tag)
    res = h.train(cfg, WORK / "configs" / f"{tag}.yaml", WORK / "logs" / f"{tag}.log")
    if res["rc"] != 0:
        raise SystemExit(f"{tag}: topictk train failed:\n{h.tail(WORK / 'logs' / f'{tag}.log')}")
    trained = topictk.load_run(cfg["output"])
    curve = [{"iteration": m["step"], "log_prob": -math.log(m["perplexity_train_heldout_point"]),
              "train_seconds": m["train_seconds"]}
             for m in trained.metrics() if "perplexity_train_heldout_point" in m]
    final = curve[-1]["log_prob"]
    averaged, n_samples = None, 0
    if algorithm == "gibbs":     # theta-hat and phi-hat averaged over the saved samples
        result = trained.evaluate(threads=threads)
        averaged = -math.log(result["perplexity_train_heldout"])
        n_samples = len(list((Path(cfg["output"]) / "samples").glob("*.npz")))
    converged_at = next(c["iteration"] for c in curve if c["log_prob"] >= final - CONVERGED_WITHIN)
    return {"dataset": name, "algorithm": algorithm, "seed": seed, "iterations": iterations,
            "curve": curve, "final": final, "final_averaged": averaged, "samples": n_samples,
            "converged_at": converged_at, "train_seconds": trained.train_seconds,
            "seconds_per_iteration": trained.train_seconds / iterations,
            "process_wall": res["wall"], "foreign": res["foreign"]}


def table(results: list[dict]) -> list[str]:
    rows = []
    for name in DATASETS:
        for algorithm in ("gibbs", "cvb", "cvb0", "vb"):
            sel = [r for r in results if r["dataset"] == name and r["algorithm"] == algorithm]
            if not sel:
                continue
            final = [r["final"] for r in sel]
            avg = [r["final_averaged"] for r in sel if r["final_averaged"] is not None]
            spread = f" ± {h.sd(final):.4f}" if len(sel) > 1 else ""
            rows.append([f"{name} ({DATASETS[name]['topics']})", algorithm,
                         f"{h.mean(final):.4f}{spread}", f"{h.mean(avg):.4f}" if avg else "—",
                         f"{'/'.join(str(r['converged_at']) for r in sel)} "
                         f"(of {sel[0]['iterations']})",
                         f"{h.mean(r['seconds_per_iteration'] for r in sel):.3f}", len(sel)])
    return h.table(["corpus (K)", "algorithm", "held-out log p / token (point)",
                    "Gibbs averaged over samples", "iterations to within 0.01 of final",
                    "s / iteration", "runs"], rows, align="lllllll")


def plot(results: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colours = {"gibbs": "tab:green", "cvb": "tab:blue", "cvb0": "tab:cyan", "vb": "tab:red"}
    names = [name for name in DATASETS if any(r["dataset"] == name for r in results)]
    fig, axes = plt.subplots(1, len(names), figsize=(5.5 * len(names), 4))
    for ax, name in zip(np.atleast_1d(axes), names):
        first = min(r["seed"] for r in results if r["dataset"] == name)
        for r in results:
            if r["dataset"] != name:
                continue
            xs = [c["iteration"] for c in r["curve"]]
            ys = [c["log_prob"] for c in r["curve"]]
            ax.plot(xs, ys, color=colours[r["algorithm"]], alpha=0.8,
                    label=r["algorithm"] if r["seed"] == first else None)
            if r["final_averaged"] is not None:
                ax.scatter([xs[-1]], [r["final_averaged"]], color=colours["gibbs"], marker="*",
                           s=80, label="gibbs, averaged samples" if r["seed"] == first else None)
        ax.set_xscale("log")
        ax.set_xlabel("iteration")
        ax.set_ylabel("held-out log-probability per token")
        ax.set_title(f"{name.upper()}, K = {DATASETS[name]['topics']}, Protocol B 90/10")
        finals = [r["final"] for r in results if r["dataset"] == name]
        ax.set_ylim(min(finals) - 0.4, max(finals) + 0.1)
        ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def report(results: list[dict], wall: float, figure: Path, started) -> str:
    lines = ["# Variational family: CVB vs VB vs collapsed Gibbs (Teh, Newman & Welling 2007)",
             "", f"Measured {started:%Y-%m-%d %H:%M} UTC ({wall / 60:.1f} min) by", "",
             "```bash", h.command_line(), "```", "", *h.machine_info("matplotlib"), "",
             "Protocol B (`prepare --test-docs 0 --heldout-train-fraction 0.1`), α = β = 0.1; "
             "every run is `topictk train` with one thread. Point values: the last "
             "`perplexity_train_heldout_point` of the run's `metrics.jsonl`; Gibbs averaged over "
             "its saved samples (second half of the run): `perplexity_train_heldout` of "
             "`topictk evaluate`. \"Iterations to within 0.01\" is the first evaluated iteration "
             "whose point value is within 0.01 nats of the run's final value.", "",
             *table(results), "", f"![held-out log-probability per iteration]"
             f"({Path('..') / figure.parent.name / figure.name})"]
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=list(DATASETS))
    parser.add_argument("--algorithms", nargs="+", default=["gibbs", "vb", "cvb", "cvb0"],
                        choices=["gibbs", "vb", "cvb", "cvb0"])
    parser.add_argument("--seeds", type=int, nargs="+", default=None,
                        help="initialisation seeds (default: 0 1 for kos, 0 for nips)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--evals", type=int, default=30,
                        help="evaluations per run (the points of each curve; 30)")
    parser.add_argument("--quick", action="store_true", help="1/25 of the iterations")
    parser.add_argument("--record", action="store_true",
                        help="write benchmarks/results/cvb.md and the figure (default: work/)")
    args = parser.parse_args(argv)
    started, began = h.now_utc(), time.perf_counter()
    results = []
    for name in args.datasets:
        store = h.ensure_store(DATASETS[name]["store"])
        seeds = args.seeds if args.seeds is not None else ([0, 1] if name == "kos" else [0])
        for seed in seeds:
            for algorithm in args.algorithms:
                iterations = ITERATIONS[name][algorithm]
                if args.quick:
                    iterations = max(4, iterations // 25)
                r = run(name, store, algorithm, iterations, seed, args.threads, args.evals)
                results.append(r)
                h.log(f"{name} seed {seed} {algorithm:5s} final {r['final']:.4f} (averaged "
                      f"{r['final_averaged']}) converged at {r['converged_at']} "
                      f"{r['train_seconds']:.1f}s")
    wall = time.perf_counter() - began
    (WORK / "results.json").write_text(json.dumps({"results": results, "wall_seconds": wall},
                                                  indent=1))
    figure = h.figure_path("variational_cvb.png", args.record)
    plot(results, figure)
    text = report(results, wall, figure, started)
    print(text)
    h.write_results(h.results_path(NAME, args.record), text)


if __name__ == "__main__":
    main()
