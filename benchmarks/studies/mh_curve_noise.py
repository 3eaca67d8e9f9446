#!/usr/bin/env python3
"""How much of the large-K "reaches" cell of ``bench_mh.py`` is evaluation noise.

``bench_mh.py`` reports the training time at which the ``warp`` chain's in-training curve
first reaches the perplexity SparseLDA's curve shows after 200 sweeps. Each curve point is one
evaluation: ``evaluation.curve_docs`` = 1,000 test documents, a 10-sweep fold-in whose draws
are keyed by the step. Both the target and the crossing therefore carry two kinds of noise:

* the fold-in's Monte Carlo error, for one state;
* the chain's: the topics of one sweep against those of the next.

For one seed, in this process, one thread: SparseLDA (``inference.sampler: sparse``) sweeps
``--reference-sweeps`` times and the last ``--states`` states, ``--every`` sweeps apart, are
each scored ``--repeats`` times with the curve's evaluation under different fold-in streams
(``pass_index``); then ``warp`` from the same random start, its states every
``--warp-every`` sweeps up to ``--warp-sweeps`` scored the same way. The report gives, per
scored state, the training seconds, the mean and the standard deviation over the repeats, and
from them: the fold-in's standard deviation (pooled over states), the chain's (of the means of
SparseLDA's last states), and the first ``warp`` state whose mean is at or below the mean of
SparseLDA's last state, as a share of SparseLDA's training time.

Usage (from the repository root, with the store of ``bench_mh.py``)::

    python benchmarks/studies/mh_curve_noise.py --record --seeds 3 4      # about 5 min a seed
    python benchmarks/studies/mh_curve_noise.py --reference-sweeps 40 --warp-sweeps 100
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # benchmarks/: the harness

import harness as h  # noqa: E402

NAME = "mh_curve_noise"
WORK = h.WORK / "mh_curve_noise"
ALPHA = 0.1          # bench_mh.py's settings
BETA = 0.01
CURVE_DOCS = 1000
CURVE_FOLD_IN_SWEEPS = 10


def make_driver(store_path: Path, K: int, sampler: str, seed: int, **inference):
    """A one-thread Gibbs driver of ``bench_mh.py``'s settings and its config; ``inference``:
    further ``inference`` keys (e.g. ``mh_steps``)."""
    from topictk.corpus.store import CorpusStore
    from topictk.inference.gibbs.driver import GibbsDriver
    from topictk.inference.registry import load_config

    config = load_config(None, raw={
        "corpus": str(store_path), "output": str(WORK / "unused"),
        "model": {"topics": K, "alpha": ALPHA, "beta": BETA},
        "inference": {"algorithm": "gibbs", "iterations": 100000, "sampler": sampler,
                      **inference},
        "training": {"seed": seed, "threads": 1},
        "evaluation": {"curve_docs": CURVE_DOCS,
                       "curve_fold_in_sweeps": CURVE_FOLD_IN_SWEEPS}})
    return GibbsDriver(config, CorpusStore.open(store_path)), config


def scored_chain(store_path: Path, K: int, sampler: str, seed: int, sweeps: int,
                 scored: list[int], repeats: int) -> list[dict]:
    """Sweep ``sampler`` ``sweeps`` times; score the states after the ``scored`` sweeps
    ``repeats`` times each (fold-in streams keyed by passes 10^6 r + sweep)."""
    from topictk.inference.base import EvaluationSet
    from topictk.inference.perplexity import heldout_perplexity
    from topictk.training.run import curve_set

    driver, config = make_driver(store_path, K, sampler, seed)
    test = curve_set(EvaluationSet.from_store(driver.store), config.evaluation)
    state = driver.init_state()
    seconds, rows = 0.0, []
    for t in range(sweeps):
        began = time.perf_counter()
        driver.step(state, t)
        seconds += time.perf_counter() - began
        if t + 1 in scored:
            values = [heldout_perplexity(driver, state, test, None,
                                         pass_index=10**6 * r + t + 1)["perplexity"]
                      for r in range(repeats)]
            rows.append({"sweep": t + 1, "seconds": seconds, "values": values})
            h.log(f"{sampler} sweep {t + 1}: {np.mean(values):.1f} +- {np.std(values, ddof=1):.1f}")
    return rows


def summary(reference: list[dict], warp: list[dict]) -> dict:
    """The fold-in's pooled sd, the chain's sd of SparseLDA's state means, the target and the
    first warp state at or below it."""
    pooled = float(np.sqrt(np.mean([np.var(r["values"], ddof=1) for r in reference + warp])))
    means = [float(np.mean(r["values"])) for r in reference]
    target = means[-1]
    total = reference[-1]["seconds"]
    first = next((w for w in warp if np.mean(w["values"]) <= target), None)
    single = next((w for w in warp if w["values"][0] <= reference[-1]["values"][0]), None)
    return {"fold_in_sd": pooled, "chain_sd": float(np.std(means, ddof=1)),
            "target": target, "reference_seconds": total,
            "reaches_mean": None if first is None else first["seconds"] / total,
            "reaches_mean_sweep": None if first is None else first["sweep"],
            "reaches_single": None if single is None else single["seconds"] / total}


def report(results: dict, args) -> str:
    lines = [f"# {NAME}: evaluation noise in the large-K reach of bench_mh.py", "",
             f"Generated by `benchmarks/studies/mh_curve_noise.py`; command: `{h.command_line()}`.",
             f"- Date: {h.now_utc():%Y-%m-%d %H:%M} UTC", *h.machine_info(), "", "## Method", "",
             f"- KOS (the store of `bench_mh.py`), K = {args.topics}, alpha = {ALPHA}, beta = "
             f"{BETA}, one thread, in one process: SparseLDA (`sampler: sparse`) "
             f"{args.reference_sweeps} sweeps, its last {args.states} states "
             f"{args.every} sweeps apart scored; then `warp` from the same random start, its "
             f"states every {args.warp_every} sweeps to {args.warp_sweeps} scored.",
             f"- A score: the in-training curve's evaluation ({CURVE_DOCS} test documents, "
             f"{CURVE_FOLD_IN_SWEEPS}-sweep fold-in), {args.repeats} times per state with "
             "different fold-in streams; mean and sd over those.",
             "- Fold-in sd: pooled over every scored state. Chain sd: of the means of "
             "SparseLDA's scored states (its curve is flat there).",
             "- Reaches (mean): seconds of the first `warp` state whose mean is at or below "
             "the mean of SparseLDA's last state, over SparseLDA's seconds. Reaches (one "
             "score): the same with the first score of each state only, as `bench_mh.py` "
             "measures it (its fold-in streams differ from the benchmark's, so its values "
             "do too).", "",
             "| seed | fold-in sd | chain sd | SparseLDA last (mean) | SparseLDA s | reaches "
             "(mean) | at warp sweep | reaches (one score) |",
             "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    def fmt(x):
        return "not reached" if x is None else f"{x:.2f}"

    for seed, res in results.items():
        s = res["summary"]
        lines.append(f"| {seed} | {s['fold_in_sd']:.1f} | {s['chain_sd']:.1f} | "
                     f"{s['target']:.1f} | {s['reference_seconds']:.1f} | "
                     f"{fmt(s['reaches_mean'])} | {s['reaches_mean_sweep'] or '-'} | "
                     f"{fmt(s['reaches_single'])} |")
    for seed, res in results.items():
        lines += ["", f"### seed {seed}", "", "| sampler | sweep | s | mean | sd |",
                  "| --- | ---: | ---: | ---: | ---: |"]
        for name in ("sparse", "warp"):
            for r in res[name]:
                lines.append(f"| {name} | {r['sweep']} | {r['seconds']:.1f} | "
                             f"{np.mean(r['values']):.1f} | {np.std(r['values'], ddof=1):.1f} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[3])
    parser.add_argument("--topics", type=int, default=5000)
    parser.add_argument("--reference-sweeps", type=int, default=200)
    parser.add_argument("--states", type=int, default=6)
    parser.add_argument("--every", type=int, default=10)
    parser.add_argument("--warp-sweeps", type=int, default=600)
    parser.add_argument("--warp-every", type=int, default=25)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--record", action="store_true",
                        help=f"write benchmarks/results/{NAME}.md")
    args = parser.parse_args()
    store = h.ensure_store("uci_kos")
    reference_scored = [args.reference_sweeps - i * args.every
                        for i in reversed(range(args.states))]
    warp_scored = list(range(args.warp_every, args.warp_sweeps + 1, args.warp_every))
    results = {}
    for seed in args.seeds:
        ref = scored_chain(store, args.topics, "sparse", seed, args.reference_sweeps,
                           reference_scored, args.repeats)
        warp = scored_chain(store, args.topics, "warp", seed, args.warp_sweeps, warp_scored,
                            args.repeats)
        results[seed] = {"sparse": ref, "warp": warp, "summary": summary(ref, warp)}
        h.log(json.dumps(results[seed]["summary"]))
    WORK.mkdir(parents=True, exist_ok=True)
    (WORK / "results.json").write_text(json.dumps(results, indent=1), encoding="utf-8")
    h.write_results(h.results_path(NAME, args.record), report(results, args))


if __name__ == "__main__":
    main()
