"""Particle EM against one-particle EM and against plain VB restarted from the particles'
starts, keeping the best (the equal-cost baseline of any multi-start method).

For every corpus (KOS, 20 Newsgroups), K and seed: ``pem`` with P particles (docs/algorithms.md
§10: per-document particle weights at T = 1) for every P of ``--particles``, and unsmoothed VB
(``pem`` with one particle, which is VB exactly) from each particle's start
(``inference.particle_offset`` r = 0 .. max P - 1; r = 0 is the P = 1 run). Best-of-P restarts
keeps, of restarts 0 .. P - 1, the one of the highest final training bound and costs the sum of
their training times. Every run has alpha learnt, ``--iterations`` EM iterations and no early
stop, one thread, and is scored by topictk's evaluator at its end (held-out perplexity of the
store's held-out tokens, the same for every run).

Reported per (corpus, K, P), averaged over seeds: the final training objective (the bound of
each document's best particle, per token: for one particle the VB bound), held-out
perplexity, training seconds per EM iteration and in total, and on how many seeds P particles
beat one particle and beat best-of-P restarts on the objective. Targets (K = 20): P = 4 above
P = 1 on every seed; mean perplexity below P = 1 and below best-of-4 restarts; seconds per
iteration of P particles <= P x those of one::

    nice python benchmarks/bench_pem.py --record
    python benchmarks/bench_pem.py --corpora kos --topics 20 --seeds 1 --particles 1 4
    python benchmarks/bench_pem.py --record --report-only     # the tables of the runs so far

Runs are kept (``benchmarks/work/pem/results-ITERATIONS-PID.json``, one file per process) and
not measured again, so grids can be run in parts and side by side.

``--timing ROUNDS`` measures only the time per iteration, side by side: for every corpus and K
(default 20), each round trains P = 1, 2, 4, 8 (``--particles``) for ``--iterations`` EM
iterations with seed 1 and one thread, in increasing order in rounds 1, 3, ... and decreasing
order in rounds 2, 4, ..., and reports seconds per iteration (training seconds, evaluation
excluded, over the iterations), the ratio to P = 1 of the same round, and the cores other
processes kept busy during each run; then the means over rounds. Written to ``pem_timing.md``;
nothing is kept::

    nice python benchmarks/bench_pem.py --timing 3 --record
    python benchmarks/bench_pem.py --timing 1 --iterations 5 --corpora kos   # quick check
"""
from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402  (after the thread variables, which NumPy reads on import)
import json  # noqa: E402

import harness as h  # noqa: E402

NAME = "pem"
TIMING_NAME = "pem_timing"
WORK = h.WORK / "pem"
STORES = {"kos": "kos_default", "20news": "20news_gan2015"}
LABELS = {"kos": "KOS", "20news": "20 Newsgroups"}


def run_key(corpus: str, K: int, seed: int, kind: str, n: int) -> str:
    return f"{corpus}-K{K}-s{seed}-{kind}{n}"


def config(store, out, K: int, seed: int, iterations: int, particles: int,
           offset: int = 0) -> dict:
    return {"corpus": str(store), "output": str(out),
            "model": {"topics": K, "alpha": "auto"},
            "inference": {"algorithm": "pem", "iterations": iterations, "particles": particles,
                          "temperature": 1.0, "particle_offset": offset, "tol": 0},
            "training": {"seed": seed, "threads": 1, "eval_every": iterations,
                         "checkpoint_every": iterations, "keep_checkpoints": 1}}


def measure(store, key: str, cfg: dict, args) -> dict:
    """Train one run and read its final metrics."""
    h.wait_for_quiet(1, args.quiet_margin, args.max_wait)
    res = h.train(cfg, WORK / "configs" / f"{key}.yaml", WORK / "logs" / f"{key}.log")
    if res["rc"] != 0:
        raise SystemExit(f"{key} failed:\n{h.tail(WORK / 'logs' / f'{key}.log')}")
    last = h.read_metrics(cfg["output"])[-1]
    steps = int(last["step"])
    return {"objective": last["best_bound_per_token"], "perplexity": full_perplexity(key),
            "full_perplexity": True,
            "seconds": last["train_seconds"], "per_iteration": last["train_seconds"] / steps,
            "collapsed": last.get("particles_collapsed"),
            "distance": last.get("particle_distance_min"), "foreign": res["foreign"]}


def full_perplexity(key: str) -> float:
    """``topictk evaluate`` of a kept run: the held-out perplexity of every held-out token of
    the store (the in-training point scores only the curve's subset of test documents)."""
    result, _ = h.evaluate(WORK / "runs" / key, WORK / "logs" / f"{key}-evaluate.log")
    if result is None:
        raise SystemExit(f"evaluate {key} failed:\n{h.tail(WORK / 'logs' / f'{key}-evaluate.log')}")
    return result["perplexity"]


def rescore(results: dict, iterations: int) -> None:
    """Replace the perplexity of every kept run measured before runs were scored on every
    held-out token (entries without ``full_perplexity``) by ``topictk evaluate``'s; kept in a
    file that :func:`load_results` reads last."""
    saved = WORK / f"results-{iterations}-rescored.json"
    done = json.loads(saved.read_text()) if saved.exists() else {}
    for key, entry in sorted(results.items()):
        if entry.get("full_perplexity") or key in done:
            continue
        h.log(f"evaluate {key}")
        done[key] = {**entry, "perplexity": full_perplexity(key), "full_perplexity": True,
                     "point_perplexity": entry["perplexity"]}
        saved.write_text(json.dumps(done, indent=1))


def cell_runs(corpus: str, K: int, seed: int, args) -> list[tuple[str, dict]]:
    """The runs of one (corpus, K, seed), cheapest first: restarts 0-3, P = 2, 4, restarts
    beyond 3, then the larger P."""
    store = h.ensure_store(STORES[corpus])
    top = max(args.particles)
    jobs = []
    for r in range(min(top, 4)):
        jobs.append((run_key(corpus, K, seed, "vb", r), {"particles": 1, "offset": r}))
    for P in sorted(p for p in args.particles if 1 < p <= 4):
        jobs.append((run_key(corpus, K, seed, "pem", P), {"particles": P}))
    for r in range(4, top):
        jobs.append((run_key(corpus, K, seed, "vb", r), {"particles": 1, "offset": r}))
    for P in sorted(p for p in args.particles if p > 4):
        jobs.append((run_key(corpus, K, seed, "pem", P), {"particles": P}))
    return [(key, config(store, WORK / "runs" / key, K, seed, args.iterations, **kw))
            for key, kw in jobs]


def summary(results: dict, corpus: str, K: int, args) -> list[list]:
    """Rows of one (corpus, K) table over the seeds that finished."""
    rows = []
    for P in args.particles:
        done = [s for s in args.seeds
                if run_key(corpus, K, s, "pem" if P > 1 else "vb", P if P > 1 else 0)
                in results
                and all(run_key(corpus, K, s, "vb", r) in results for r in range(P))]
        if not done:
            continue
        pem = [results[run_key(corpus, K, s, "pem" if P > 1 else "vb", P if P > 1 else 0)]
               for s in done]
        one = [results[run_key(corpus, K, s, "vb", 0)] for s in done]
        best = []
        for s in done:
            restarts = [results[run_key(corpus, K, s, "vb", r)] for r in range(P)]
            pick = max(restarts, key=lambda r: r["objective"])
            best.append({**pick, "seconds": sum(r["seconds"] for r in restarts)})
        wins_one = sum(a["objective"] > b["objective"] for a, b in zip(pem, one))
        wins_best = sum(a["objective"] > b["objective"] for a, b in zip(pem, best))
        rows.append([P, len(done),
                     h.fmt(h.mean([r["objective"] for r in pem]), ".4f"),
                     h.fmt(h.mean([r["objective"] for r in best]), ".4f"),
                     f"{wins_one}/{len(done)}", f"{wins_best}/{len(done)}",
                     h.fmt(h.mean([r["perplexity"] for r in pem]), ".1f"),
                     h.fmt(h.mean([r["perplexity"] for r in best]), ".1f"),
                     h.fmt(h.mean([r["per_iteration"] for r in pem]), ".3f"),
                     h.fmt(h.mean([r["per_iteration"] for r in pem])
                           / h.mean([r["per_iteration"] for r in one]), ".2f"),
                     h.fmt(h.mean([r["seconds"] for r in pem]), ".1f"),
                     h.fmt(h.mean([r["seconds"] for r in best]), ".1f"),
                     h.fmt(h.mean([r["collapsed"] or 0 for r in pem]), ".1f"),
                     h.fmt(h.mean([r["foreign"] for r in pem]), ".2f")])
    return rows


HEADER = ["P", "seeds", "objective P", "objective best-of-P VB", "P > 1 particle",
          "P > best-of-P", "perplexity P", "perplexity best-of-P VB", "s / iteration P",
          "ratio to P = 1", "train s P", "train s best-of-P VB", "collapsed", "contention P"]


def report(results: dict, args) -> str:
    lines = ["# Particle EM against one particle and best-of-P restarted VB", "",
             "Produced by:", "", "```", h.command_line(), "```", "",
             *h.machine_info(), "",
             (f"{args.iterations} EM iterations, alpha learnt, 1 thread, no early stop; "
             "objective = final bound of each document's best particle per training token "
             "(the VB bound for one particle); perplexity = held-out perplexity of the "
             "store's held-out tokens at the end; best-of-P VB = of unsmoothed VB restarted "
             "from particles 0 .. P - 1's starts, the run of the highest objective, its "
             "perplexity, and the summed training time of the P restarts. `P > 1 particle`, "
             "`P > best-of-P`: seeds on which P particles end at a higher objective. "
             "`collapsed`: mean count of particles within 1e-3 mean total variation of an "
             "earlier one at the end. `contention P`: cores other processes kept busy during "
             "the P-particle runs (the machine has 2; the timings are wall seconds)."), ""]
    for corpus in args.corpora:
        for K in args.topics:
            rows = summary(results, corpus, K, args)
            if rows:
                lines += [f"## {LABELS[corpus]}, K = {K}", "", *h.table(HEADER, rows), ""]
    return "\n".join(lines)


def timing_run(corpus: str, K: int, P: int, rnd: int, args) -> dict:
    """Train one timing run: seconds per EM iteration and the contention during it."""
    store = h.ensure_store(STORES[corpus])
    key = f"timing-{corpus}-K{K}-P{P}"
    cfg = config(store, WORK / "runs" / key, K, 1, args.iterations, P)
    before = h.wait_for_quiet(1, args.quiet_margin, args.max_wait)
    res = h.train(cfg, WORK / "configs" / f"{key}.yaml", WORK / "logs" / f"{key}.log")
    if res["rc"] != 0:
        raise SystemExit(f"{key} failed:\n{h.tail(WORK / 'logs' / f'{key}.log')}")
    last = h.read_metrics(cfg["output"])[-1]
    per_iteration = last["train_seconds"] / int(last["step"])
    h.log(f"round {rnd + 1} {corpus} K = {K} P = {P}: {per_iteration:.4f} s / iteration "
          f"(other processes: {res['foreign']:.2f} cores)")
    return {"per_iteration": per_iteration, "foreign": res["foreign"], "before": before}


def timing_rounds(corpus: str, K: int, args) -> list[dict]:
    """``args.timing`` rounds of every P, the order reversed in every other round."""
    rounds = []
    for rnd in range(args.timing):
        order = sorted(args.particles, reverse=bool(rnd % 2))
        runs = {P: timing_run(corpus, K, P, rnd, args) for P in order}
        rounds.append({"order": order, "runs": runs})
    return rounds


def timing_tables(rounds: list[dict], particles: list[int]) -> list[str]:
    """Per round: seconds per iteration, ratio to P = 1 and contention of every P; then the
    means over rounds, and whether the mean ratio is at most P."""
    ps = sorted(particles)
    header = ["round", "order", *(f"s / it P = {P}" for P in ps),
              *(f"ratio P = {P}" for P in ps if P > 1), *(f"load P = {P}" for P in ps)]
    rows = []
    for i, rnd in enumerate(rounds):
        runs = rnd["runs"]
        base = runs[1]["per_iteration"]
        rows.append([i + 1, " ".join(map(str, rnd["order"])),
                     *(h.fmt(runs[P]["per_iteration"], ".4f") for P in ps),
                     *(h.fmt(runs[P]["per_iteration"] / base, ".2f") for P in ps if P > 1),
                     *(h.fmt(runs[P]["foreign"], ".2f") for P in ps)])
    mean = {P: h.mean([r["runs"][P]["per_iteration"] for r in rounds]) for P in ps}
    ratio = {P: h.mean([r["runs"][P]["per_iteration"] / r["runs"][1]["per_iteration"]
                        for r in rounds]) for P in ps}
    rows.append(["mean", "", *(h.fmt(mean[P], ".4f") for P in ps),
                 *(h.fmt(ratio[P], ".2f") for P in ps if P > 1),
                 *(h.fmt(h.mean([r["runs"][P]["foreign"] for r in rounds]), ".2f")
                   for P in ps)])
    target = ", ".join(f"P = {P}: {ratio[P]:.2f} {'<=' if ratio[P] <= P else '>'} {P}"
                       for P in ps if P > 1)
    return [*h.table(header, rows), "",
            f"Mean ratio of the seconds per iteration to P = 1's (target: at most P): "
            f"{target}."]


def timing_report(tables: dict, args) -> str:
    lines = ["# Particle EM: time per iteration of P particles against one", "",
             "Produced by:", "", "```", h.command_line(), "```", "",
             *h.machine_info(), "",
             (f"Each round trains P = {', '.join(map(str, sorted(args.particles)))} one after "
              f"the other (increasing P in odd-numbered rounds, decreasing in even-numbered "
              f"ones), {args.iterations} EM iterations each, seed 1, alpha learnt, "
              f"temperature 1, 1 thread, no early stop. `s / it`: training seconds "
              f"(evaluation excluded) per EM iteration; `ratio`: to P = 1 of the same round; "
              f"`load`: cores other processes kept busy during the run (the machine has "
              f"{os.cpu_count()}); the mean row averages the rounds' ratios."), ""]
    for (corpus, K), rounds in tables.items():
        lines += [f"## {LABELS[corpus]}, K = {K}", "",
                  *timing_tables(rounds, args.particles), ""]
    return "\n".join(lines)


def timing(args) -> None:
    """The side-by-side timing mode (module docstring)."""
    if 1 not in args.particles:
        args.particles = [1, *args.particles]
    tables = {}
    for corpus in args.corpora:
        for K in args.topics or [20]:
            tables[(corpus, K)] = timing_rounds(corpus, K, args)
            h.write_results(h.results_path(TIMING_NAME, args.record),
                            timing_report(tables, args))


def load_results(iterations: int) -> dict:
    """Every run measured so far with this number of iterations: each process writes its own
    file, so that two grids can run at once."""
    results = {}
    for path in sorted(WORK.glob(f"results-{iterations}*.json")):
        results.update(json.loads(path.read_text()))
    return results


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpora", nargs="+", choices=list(STORES), default=list(STORES))
    parser.add_argument("--topics", nargs="+", type=int,
                        help="numbers of topics (default 20 50; with --timing 20)")
    parser.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3, 4, 5])
    parser.add_argument("--particles", nargs="+", type=int, default=[1, 2, 4, 8])
    parser.add_argument("--iterations", type=int, default=50)
    parser.add_argument("--report-only", action="store_true",
                        help="write the report from the runs measured so far, run nothing")
    parser.add_argument("--rescore", action="store_true",
                        help="score the kept runs on every held-out token (topictk evaluate) "
                             "where they were scored on the curve's subset, then report")
    parser.add_argument("--timing", type=int, metavar="ROUNDS",
                        help="only time the iterations of every P side by side, in ROUNDS "
                             "alternating rounds (writes pem_timing.md)")
    h.add_common_options(parser)
    args = parser.parse_args(argv)
    if args.timing is not None:
        if args.timing < 1:
            parser.error("--timing needs at least one round")
        timing(args)
        return
    args.topics = args.topics or [20, 50]
    if 1 not in args.particles:
        args.particles = [1, *args.particles]
    results = load_results(args.iterations)
    saved = WORK / f"results-{args.iterations}-{os.getpid()}.json"
    mine = {}
    if args.rescore:
        rescore(results, args.iterations)
        results = load_results(args.iterations)
    if args.report_only or args.rescore:
        h.write_results(h.results_path(NAME, args.record), report(results, args))
        return
    for K in args.topics:
        for corpus in args.corpora:
            for seed in args.seeds:
                for key, cfg in cell_runs(corpus, K, seed, args):
                    if key in results:
                        continue
                    h.log(key)
                    results[key] = mine[key] = measure(cfg["corpus"], key, cfg, args)
                    saved.parent.mkdir(parents=True, exist_ok=True)
                    saved.write_text(json.dumps(mine, indent=1))
                h.write_results(h.results_path(NAME, args.record), report(results, args))


if __name__ == "__main__":
    main()
