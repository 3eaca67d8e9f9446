"""Every algorithm on a local Dask cluster of 2 worker processes against the in-process run
with 2 threads, on real corpora: the same model and the same evaluation, and the time.

For each algorithm of ``topictk algorithms`` one config (below: its corpus, K, steps and
chunks) is trained twice with the same seed, in-process with ``training.threads: 2`` and with
``--dask-workers 2`` (one thread each), and the in-process run is evaluated twice, on one
machine and with ``evaluate --dask-workers 2``. Reported: whether the two models are the same
(sha256 over every array of model.npz but the header, which holds the clock), whether the two
evaluations are the same (the whole JSON of ``evaluate --json``), and each run's
``train_seconds`` (its own clock: training steps, not the start-up, the cluster's start or the
evaluations). The corpora: KOS (the LDA and deep-LDA algorithms), the 2008 political blogs
with their rating and blog as metadata (DMR) and with their day binned into months (the
dynamic topic model).

    python benchmarks/bench_dask_families.py --record
    python benchmarks/bench_dask_families.py --algorithms cvb pem        # a few
"""
from __future__ import annotations

import argparse
import json

import harness as h

NAME = "dask_families"
WORK = h.WORK / NAME
MONTHS = "edges:1,32,61,92,122,153,183,214,245,275,306,336,367"

LDA = {"topics": 64, "alpha": 0.1, "beta": 0.01}
DEEP = {"family": "dlda", "layers": [64, 32]}
MINI = {"batch_size": 256, "chunk_docs": 16}
DEEP_LOCAL = {"local_burn_in": 10, "local_samples": 5,
              "point_perplexity": {"iterations": 20, "last": 10, "thin": 1, "every": 0}}
# algorithm: (corpus, model, inference)
CASES = {
    "gibbs": ("kos", LDA, {"iterations": 60, "burn_in": 40, "thin": 10, "chunks": 4}),
    "cvb0": ("kos", LDA, {"iterations": 30, "chunks": 4, "tol": 0}),
    "cvb": ("kos", LDA, {"iterations": 20, "chunks": 4, "tol": 0}),
    "vb": ("kos", LDA, {"iterations": 15, "chunks": 4, "tol": 0}),
    "pem": ("kos", LDA, {"iterations": 8, "particles": 2, "chunks": 4, "tol": 0}),
    "ovb": ("kos", LDA, {"iterations": 60, "batch_size": 256, "chunks": 4}),
    "hsvg": ("kos", LDA, {"iterations": 60, **MINI}),
    "sgrld": ("kos", LDA, {"iterations": 60, "burn_in": 30, "thin": 10, **MINI}),
    "tlasgr": ("kos", DEEP, {"iterations": 30, "burn_in": 15, **MINI, **DEEP_LOCAL}),
    "tlfsgr": ("kos", DEEP, {"iterations": 30, "burn_in": 15, **MINI, **DEEP_LOCAL}),
    "dlda-sgrld": ("kos", DEEP, {"iterations": 30, "burn_in": 15, **MINI, **DEEP_LOCAL}),
    "dlda-gibbs": ("kos", DEEP, {"iterations": 20, "burn_in": 10, "chunks": 4,
                                 "point_perplexity": DEEP_LOCAL["point_perplexity"]}),
    "dmr-sem": ("blogs-meta", {"family": "dmr", "topics": 20, "alpha": 0.1, "beta": 0.01},
                {"iterations": 60, "burn_in": 40, "thin": 10, "chunks": 4,
                 "optimize_burn_in": 20, "optimize_interval": 20}),
    "dmr-sgrld": ("blogs-meta", {"family": "dmr", "topics": 20, "alpha": 0.1, "beta": 0.01},
                  {"iterations": 60, "burn_in": 30, "thin": 10, **MINI}),
    "dtm-sgld": ("blogs-months", {"family": "dtm", "topics": 20},
                 {"iterations": 30, "lda_sweeps": 10, "burn_in": 10}),
}
CORPORA = {"kos": "KOS", "blogs-meta": "2008 political blogs (rating, blog)",
           "blogs-months": "2008 political blogs by month"}


def store(corpus: str):
    """The prepared store of ``corpus``, made once."""
    if corpus == "kos":
        return h.ensure_store("uci_kos")
    d = h.data_path("stm_poliblog5k")
    args = [str(d / "docword.poliblog5k.txt.gz"), "--vocab", str(d / "vocab.poliblog5k.txt"),
            "--meta-file", str(d / "metadata.tsv"), "--test-docs", "0.1",
            "--heldout-fraction", "0.2", "--seed", "0"]
    if corpus == "blogs-meta":
        args += ["--meta", "rating,blog"]
    else:
        args += ["--time-column", "day", "--time-bins", MONTHS]
    return h.ensure_store(f"poliblog-{corpus}", args, out=WORK / "stores" / corpus)


def train(algorithm: str, where: str, options: list[str], threads: int, args) -> dict:
    """One training run of ``algorithm``'s case: its train_seconds and model digest."""
    corpus, model, inference = CASES[algorithm]
    out = WORK / f"run.{algorithm}.{where}"
    config = {"corpus": str(store(corpus)), "output": str(out), "model": model,
              "inference": {"algorithm": algorithm, **inference},
              "training": {"seed": 1, "threads": threads, "checkpoint_every": 0}}
    if model.get("family") not in ("dlda", "dmr"):
        config["evaluation"] = {"fold_in_sweeps": 20, "fold_in_burn_in": 10}
    h.wait_for_quiet(2, args.quiet_margin, args.max_wait)
    log_path = WORK / "logs" / f"{algorithm}.{where}.log"
    res = h.train(config, WORK / f"{algorithm}.{where}.yaml", log_path, options=options)
    if res["rc"] != 0:
        raise SystemExit(f"{algorithm} {where} failed:\n{h.tail(log_path)}")
    last = h.read_metrics(out)[-1]
    return {"run": out, "train_seconds": last["train_seconds"], "digest": h.model_digest(out)}


def run_case(algorithm: str, args) -> dict:
    here = train(algorithm, "threads", [], 2, args)
    there = train(algorithm, "workers", ["--dask-workers", "2"], 1, args)
    local, _ = h.evaluate(here["run"], WORK / "logs" / f"{algorithm}.evaluate.log")
    remote, _ = h.evaluate(here["run"], WORK / "logs" / f"{algorithm}.evaluate-dask.log",
                           "--dask-workers", "2")
    row = {"algorithm": algorithm, "corpus": CORPORA[CASES[algorithm][0]],
           "steps": CASES[algorithm][2]["iterations"],
           "threads_s": here["train_seconds"], "workers_s": there["train_seconds"],
           "same_model": here["digest"] == there["digest"],
           "same_evaluation": local is not None and local == remote,
           "perplexity": None if local is None else local.get("perplexity")}
    h.log(f"{algorithm}: {row['threads_s']:.1f} s / {row['workers_s']:.1f} s, same model "
          f"{row['same_model']}, same evaluation {row['same_evaluation']}")
    return row


def report(rows: list[dict]) -> str:
    yes = {True: "yes", False: "**no**"}
    lines = [f"# Every algorithm on 2 Dask workers against 2 threads ({h.now_utc():%Y-%m-%d %H:%M} "
             f"UTC)", "", f"`{h.command_line()}`", "", *h.machine_info(), "",
             __doc__.split("\n\n")[1].replace("\n", " ").replace("``", "`")
             .replace("(below: ", "(the script's CASES: "), "",
             *h.table(["algorithm", "corpus", "steps", "2 threads s", "2 workers s",
                       "workers ÷ threads time", "same model", "same evaluation",
                       "held-out perplexity"],
                      [[r["algorithm"], r["corpus"], r["steps"], f"{r['threads_s']:.1f}",
                        f"{r['workers_s']:.1f}", f"{r['workers_s'] / r['threads_s']:.2f}",
                        yes[r["same_model"]], yes[r["same_evaluation"]],
                        h.fmt(r["perplexity"])] for r in rows])]
    same = all(r["same_model"] and r["same_evaluation"] for r in rows)
    lines += ["", f"Every model and every evaluation the same on the cluster: "
                  f"**{'yes' if same else 'no'}**."]
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--algorithms", nargs="+", default=list(CASES), choices=list(CASES))
    h.add_common_options(p)
    args = p.parse_args(argv)
    rows = [run_case(algorithm, args) for algorithm in args.algorithms]
    path = h.results_path(NAME, args.record)
    h.write_results(path, report(rows))
    path.with_suffix(".json").write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
