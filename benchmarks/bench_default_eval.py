"""What evaluation costs a default run: runs that set only the algorithm, the iterations and
the topics, on KOS, 20 Newsgroups and NIPS, for gibbs, vb, ovb and sgrld.

Each run's evaluations are timed by the run itself (``eval_seconds`` of every line of
``metrics.jsonl``); the share is their sum over the wall time of the whole ``topictk train``
process. The curve itself (``perplexity_point`` at each evaluation) is shown so that one can
judge whether it still tells how training goes.

    python benchmarks/bench_default_eval.py --record
"""
from __future__ import annotations

import argparse

import harness as h

# corpora with test documents (document completion), small to large
CORPORA = ("uci_kos", "20news_gan2015", "uci_nips")                # harness.CORPORA
# iterations of a short but realistic run: sweeps, EM iterations, mini-batch updates
ITERATIONS = {"gibbs": 100, "vb": 20, "ovb": 300, "sgrld": 300}


def measure(args) -> list[dict]:
    rows = []
    for corpus in args.corpora:
        store = h.ensure_store(corpus)
        for algorithm in args.algorithms:
            out = h.WORK / "runs" / "default_eval" / f"{corpus}-{algorithm}"
            config = {"corpus": str(store), "output": str(out),
                      "model": {"topics": args.topics},
                      "inference": {"algorithm": algorithm,
                                    "iterations": ITERATIONS[algorithm]}}
            logfile = h.WORK / "logs" / f"de-{corpus}-{algorithm}.log"
            h.wait_for_quiet(1, args.quiet_margin, args.max_wait)
            res = h.train(config, out.with_suffix(".yaml"), logfile)
            if res["rc"] != 0:
                raise SystemExit(f"{corpus} {algorithm} failed:\n{h.tail(logfile)}")
            metrics = h.read_metrics(out)
            evals = sum(m["eval_seconds"] for m in metrics)
            row = {"corpus": corpus, "algorithm": algorithm, "wall": res["wall"],
                   "foreign": res["foreign"], "train": metrics[-1]["train_seconds"],
                   "eval": evals, "n_eval": len(metrics),
                   "curve": [(m["step"], m.get("perplexity_point")) for m in metrics],
                   "facts": h.store_facts(store)}
            h.log(f"{corpus} {algorithm}: eval {evals:.1f}s of wall {res['wall']:.1f}s "
                  f"({100 * evals / res['wall']:.1f} %)")
            rows.append(row)
    return rows


def report(args, rows: list[dict]) -> str:
    lines = ["# Evaluation cost of default runs", "", f"Command: `{h.command_line()}`", "",
             *h.machine_info(), "",
             ("Each run sets only `inference.algorithm`, `inference.iterations` "
              f"({', '.join(f'{a} {n}' for a, n in ITERATIONS.items())}) and `model.topics` "
              f"(K = {args.topics}); everything else is the default: evaluation every tenth "
              "of the run, on `evaluation.curve_docs: auto` test documents with a 10-sweep "
              "fold-in where the algorithm folds in by Gibbs sampling. Evaluation share = the "
              "sum of the run's `eval_seconds` over the wall time of its `topictk train` "
              "process."), ""]
    corpora = []
    for r in rows:
        if r["corpus"] not in [c for c, _ in corpora]:
            corpora.append((r["corpus"], r["facts"]))
    lines += ["| corpus | training documents | tokens | test documents |",
              "| --- | ---: | ---: | ---: |"]
    lines += [f"| {c} | {f['D']:,} | {f['N']:,} | {f['test_docs']:,} |" for c, f in corpora]
    lines += [""]
    table = [[r["corpus"], r["algorithm"], str(r["n_eval"]), h.fmt(r["train"], ".1f"),
              h.fmt(r["eval"], ".1f"), h.fmt(r["wall"], ".1f"),
              h.fmt(100 * r["eval"] / r["wall"], ".1f"), h.fmt(r["foreign"], ".2f")]
             for r in rows]
    lines += h.table(["corpus", "algorithm", "evaluations", "train s", "eval s", "wall s",
                      "eval % of wall", "other load (cores)"], table, "llrrrrrr")
    worst = max(rows, key=lambda r: r["eval"] / r["wall"])
    lines += ["", (f"Largest share: {100 * worst['eval'] / worst['wall']:.1f} % "
              f"({worst['corpus']}, {worst['algorithm']})."), "",
              "The curves (step: point perplexity on the curve's documents):", ""]
    for r in rows:
        points = ", ".join(f"{s}: {p:.0f}" for s, p in r["curve"] if p is not None)
        lines.append(f"- {r['corpus']} {r['algorithm']}: {points}")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpora", nargs="+", default=list(CORPORA), choices=list(CORPORA))
    parser.add_argument("--algorithms", nargs="+", default=list(ITERATIONS),
                        choices=list(ITERATIONS))
    parser.add_argument("--topics", type=int, default=50)
    h.add_common_options(parser)
    args = parser.parse_args()
    rows = measure(args)
    h.write_results(h.results_path("default_eval", args.record), report(args, rows))


if __name__ == "__main__":
    main()
