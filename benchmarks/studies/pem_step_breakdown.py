"""Particle EM: where the time of one EM iteration goes, for one particle and for P particles
(docs/algorithms.md §10.3-10.4), and how many gamma updates each particle makes per document
against one particle's.

KOS, K = 20, alpha learnt, T = 1, seed 1, one thread, the configuration of ``bench_pem.py``.
Every EM iteration is timed in CPU seconds by part: each particle's E-step, the weighted
statistics pass, the M-step (phi and alpha, with alpha's statistic), the particle report
(distances) and the rest of the step (weights, bookkeeping). The gamma updates per document of
each particle are counted per iteration, as a plain mean over documents and weighted by each
document's distinct words (what the updates cost). A study, not a benchmark: it wraps the
driver's methods (the command line cannot time the parts of a step), so it may need adapting
when the driver changes.

    python benchmarks/studies/pem_step_breakdown.py --record
    python benchmarks/studies/pem_step_breakdown.py --iterations 6 --particles 1 2   # quick
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

NAME = "pem_step_breakdown"
PARTS = ("e_steps", "weighted_statistics", "m_step", "particle_report")
# iteration ranges (1-based, inclusive) the report averages over
PHASES = ((1, 2), (3, 10), (11, 25), (26, 50))


def _timed(record: dict, name: str, fn):
    def wrapper(*args, **kwargs):
        began = time.process_time()
        try:
            return fn(*args, **kwargs)
        finally:
            record[name] = record.get(name, 0.0) + time.process_time() - began
    return wrapper


def measure(P: int, store, args) -> list[dict]:
    """One run of P particles: per EM iteration, CPU seconds by part and every particle's
    gamma updates per document (plain and word-weighted means)."""
    import numpy as np

    from topictk.inference.variational import pem
    from topictk.inference.registry import load_config
    from topictk.streams import Streams

    raw = {"corpus": str(store), "output": str(h.WORK / "pem" / "breakdown-run"),
           "model": {"topics": args.topics, "alpha": "auto"},
           "inference": {"algorithm": "pem", "iterations": args.iterations, "particles": P,
                         "temperature": 1.0, "tol": 0},
           "training": {"seed": 1, "threads": 1}}
    driver = pem.PEMDriver(load_config(None, raw=raw), store, 1, streams=Streams(1))
    pairs = np.diff(driver.indptr).astype(np.float64)
    state = driver.init_state()
    record: dict = {}
    updates: list[tuple[float, float]] = []
    estep = pem.estep_particle

    def counted(*a, **kw):
        began = time.process_time()
        estep(*a, **kw)
        record["e_steps"] = record.get("e_steps", 0.0) + time.process_time() - began
        its = kw["iterations"].astype(np.float64)
        updates.append((float(its.mean()), float(its @ pairs / pairs.sum())))

    pem.estep_particle = counted
    for name in PARTS[1:]:
        setattr(driver, name, _timed(record, name, getattr(driver, name)))
    rows = []
    try:
        for t in range(args.iterations):
            record.clear()
            updates.clear()
            began = time.process_time()
            driver.step(state, t)
            total = time.process_time() - began
            rows.append({"total": total, **record,
                         "rest": total - sum(record.get(p, 0.0) for p in PARTS),
                         "updates": list(updates)})
    finally:
        pem.estep_particle = estep
    return rows


def phase_rows(runs: dict, args) -> list[list]:
    """Per phase and P: ms per iteration by part, ratio to P = 1, gamma updates."""
    out = []
    for first, last in PHASES:
        if first > args.iterations:
            break
        last = min(last, args.iterations)
        span = slice(first - 1, last)
        one = h.mean([r["total"] for r in runs[1][span]])
        for P, rows in runs.items():
            rows = rows[span]
            ms = {p: 1000 * h.mean([r.get(p, 0.0) for r in rows])
                  for p in (*PARTS, "rest", "total")}
            plain = [h.mean([r["updates"][q][0] for r in rows]) for q in range(P)]
            weighted = [h.mean([r["updates"][q][1] for r in rows]) for q in range(P)]
            out.append([f"{first}-{last}", P, *(h.fmt(ms[p], ".1f") for p in PARTS),
                        h.fmt(ms["rest"], ".1f"), h.fmt(ms["total"], ".1f"),
                        h.fmt(ms["total"] / 1000 / one, ".2f"),
                        h.fmt(ms["total"] / 1000 / one / P, ".2f"),
                        " ".join(h.fmt(u, ".2f") for u in plain),
                        " ".join(h.fmt(u, ".2f") for u in weighted)])
    return out


def report(runs: dict, args, load: float) -> str:
    header = ["iterations", "P", "E-steps ms", "weighted statistics ms", "M-step ms",
              "particle report ms", "rest ms", "total ms", "ratio to P = 1",
              "ratio / P", "updates per document, each particle",
              "word-weighted updates, each particle"]
    return "\n".join([
        "# Particle EM: the parts of an EM iteration", "",
        "Produced by:", "", "```", h.command_line(), "```", "", *h.machine_info(), "",
        (f"KOS, K = {args.topics}, alpha learnt, T = 1, seed 1, one thread, "
         f"{args.iterations} EM iterations per P, the runs one after the other; CPU "
         f"milliseconds per EM iteration averaged over the iterations of each row. "
         f"`E-steps`: every particle's E-step (for P = 1 it includes VB's statistics); "
         f"`weighted statistics`: the omega-weighted pass of all particles (none for "
         f"P = 1); `M-step`: phi and alpha with alpha's statistic; `particle report`: "
         f"best bound, weights summary and the particle distances; `rest`: weights, "
         f"bound and bookkeeping. `ratio / P` at most 1 meets the target. Updates: mean "
         f"gamma updates per document of each particle (particle 0 first), plain and "
         f"weighted by the document's distinct words. Other processes kept "
         f"{load:.2f} cores busy just before the runs (the machine has {os.cpu_count()})."),
        "", *h.table(header, phase_rows(runs, args)), ""])


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--iterations", type=int, default=50)
    parser.add_argument("--topics", type=int, default=20)
    parser.add_argument("--particles", nargs="+", type=int, default=[1, 4, 8])
    parser.add_argument("--record", action="store_true",
                        help="write benchmarks/results/pem_step_breakdown.md")
    args = parser.parse_args(argv)
    from topictk.api import open_store

    store = open_store(h.ensure_store("kos_default"))
    load = h.foreign_load(1.0)
    runs = {}
    for P in sorted({1, *args.particles}):
        h.log(f"P = {P}")
        runs[P] = measure(P, store, args)
    h.write_results(h.results_path(NAME, args.record), report(runs, args, load))


if __name__ == "__main__":
    main()
