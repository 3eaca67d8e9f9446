"""Particle EM: the cost of P particles against one, with the runs interleaved iteration by
iteration inside one process (docs/algorithms.md §10.3-10.4).

``bench_pem.py --timing`` trains every P in its own process, one after the other; on a virtual
machine whose cores do not run at a steady speed (the same run varies by up to 1.4x from one
process to the next) its per-round ratios scatter widely. Here the drivers of every P live in
one process and take turns: EM iteration t of P = 1, 2, 4, 8, then iteration t + 1 in the
reverse order, and so on, each step timed in CPU seconds. Every P thus sees the same process,
the same memory placement and the same stretch of the machine's speed, and the ratio of the
summed times is the cost of the work itself. The chains are those of ``bench_pem.py`` (seed 1,
alpha learnt, T = 1, one thread, no early stop); each driver's step is exactly its step in a
``topictk train`` run. A study, not a benchmark: it drives the training steps itself (the
command line runs one configuration per process), so it may need adapting when the driver
changes.

    python benchmarks/studies/pem_interleaved.py --record
    python benchmarks/studies/pem_interleaved.py --corpora kos --iterations 10   # quick
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # benchmarks/: the harness

import harness as h  # noqa: E402

NAME = "pem_interleaved"
STORES = {"kos": "kos_default", "20news": "20news_gan2015"}
LABELS = {"kos": "KOS", "20news": "20 Newsgroups"}
# iteration ranges (1-based, inclusive) reported besides the whole run
PHASES = ((1, 10), (11, 25), (26, 50))


def drivers(store, particles: list[int], args) -> dict:
    """One particle-EM driver and its initial state per P, as ``topictk train`` builds them."""
    from topictk.inference.variational import pem
    from topictk.inference.registry import load_config
    from topictk.streams import Streams

    out = {}
    for P in particles:
        raw = {"corpus": str(store.path), "output": str(h.WORK / "pem" / "interleaved-run"),
               "model": {"topics": args.topics, "alpha": "auto"},
               "inference": {"algorithm": "pem", "iterations": args.iterations,
                             "particles": P, "temperature": 1.0, "tol": 0},
               "training": {"seed": 1, "threads": 1}}
        driver = pem.PEMDriver(load_config(None, raw=raw), store, 1, streams=Streams(1))
        out[P] = (driver, driver.init_state())
    return out


def measure(store, particles: list[int], args) -> dict[int, list[float]]:
    """CPU seconds of every EM iteration of every P, the P taking turns (the order reversed
    from one iteration to the next)."""
    runs = drivers(store, particles, args)
    times: dict[int, list[float]] = {P: [] for P in particles}
    for t in range(args.iterations):
        for P in (particles if t % 2 == 0 else particles[::-1]):
            driver, state = runs[P]
            began = time.process_time()
            driver.step(state, t)
            times[P].append(time.process_time() - began)
    return times


def reported_spans(iterations: int) -> list[tuple[int, int]]:
    """The whole run, then the phases that end within it (but one equal to the whole run)."""
    return [(1, iterations), *[(a, b) for a, b in PHASES
                               if b <= iterations and (a, b) != (1, iterations)]]


def ratio_rows(times: dict[int, list[float]], args) -> list[list]:
    """Per P: seconds per iteration and the ratio to P = 1 over the whole run and by phase."""
    spans = reported_spans(args.iterations)
    rows = []
    for P, values in times.items():
        row = [P, h.fmt(sum(values) / len(values), ".4f")]
        for first, last in spans:
            mine = sum(values[first - 1:last])
            one = sum(times[1][first - 1:last])
            row.append(h.fmt(mine / one, ".2f"))
        row.append(h.fmt(sum(values) / sum(times[1]) / P, ".2f"))
        rows.append(row)
    return rows


def report(results: dict, args, load: float) -> str:
    spans = reported_spans(args.iterations)
    header = ["P", "CPU s / iteration",
              *[f"ratio to P = 1, iterations {a}-{b}" for a, b in spans], "whole run / P"]
    lines = ["# Particle EM: P particles against one, interleaved in one process", "",
             "Produced by:", "", "```", h.command_line(), "```", "", *h.machine_info(), "",
             f"K = {args.topics}, alpha learnt, T = 1, seed 1, one thread, {args.iterations} "
             f"EM iterations; the drivers of P = {', '.join(map(str, args.particles))} in one "
             f"process, taking turns iteration by iteration (the order reversed every other "
             f"iteration); CPU seconds of each step. `whole run / P` at most 1 meets the "
             f"target (time per iteration of P particles at most P times one particle's). "
             f"Other processes kept {load:.2f} cores busy just before the runs (the machine "
             f"has 2)."]
    for corpus, (times, repeat) in results.items():
        for r, run in enumerate(times):
            lines += ["", f"## {LABELS[corpus]}, repetition {r + 1} of {repeat}", "",
                      *h.table(header, ratio_rows(run, args))]
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpora", nargs="+", choices=list(STORES), default=list(STORES))
    parser.add_argument("--iterations", type=int, default=50)
    parser.add_argument("--topics", type=int, default=20)
    parser.add_argument("--particles", nargs="+", type=int, default=[1, 2, 4, 8])
    parser.add_argument("--repeat", type=int, default=2,
                        help="independent repetitions per corpus (each in the same process)")
    parser.add_argument("--record", action="store_true",
                        help=f"write benchmarks/results/{NAME}.md")
    args = parser.parse_args(argv)
    args.particles = sorted({1, *args.particles})
    from topictk.api import open_store

    load = h.foreign_load(1.0)
    results = {}
    for corpus in args.corpora:
        store = open_store(h.ensure_store(STORES[corpus]))
        runs = []
        for r in range(args.repeat):
            h.log(f"{corpus}: repetition {r + 1}")
            runs.append(measure(store, args.particles, args))
        results[corpus] = (runs, args.repeat)
    h.write_results(h.results_path(NAME, args.record), report(results, args, load))


if __name__ == "__main__":
    main()
