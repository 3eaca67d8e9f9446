"""Per-topic diagnostics and junk flags (``topictk topics --diagnostics``) on 20 Newsgroups.

Two collapsed Gibbs runs on the 20 Newsgroups bydate store (harness.ensure_20news_bydate):
K = 100, alpha 0.1, beta 0.01, 500 sweeps, seeds 1 and 2, one thread; and a batch VB run
(40 EM iterations, seed 1) for an algorithm whose token counts are variational expected
counts. Each run is trained once and loaded afterwards.

Reported per run: the distribution of every diagnostic over the topics (percentiles), the
flagged topics with their top words, and the checks the flags are meant to pass: the topic(s)
of uuencoded binaries (top words that are letter runs of uuencoded lines: max, giz, bhj, qax
...) are flagged, and at most 5 % of the other topics are.

    python benchmarks/bench_diagnostics.py --record
"""
from __future__ import annotations

import argparse
import math
import time

import numpy as np

import harness as h
import topictk

NAME = "diagnostics"
WORK = h.WORK / "diagnostics"
# letter runs of uuencoded lines in this store (the tokeniser keeps runs of 3+ letters)
UUENCODE_WORDS = {"max", "giz", "bhj", "qax", "bxn", "okz", "nrhj", "biz", "tct", "fyn",
                  "wwiz", "chz", "rlk", "kjz", "fij", "ecs", "mcx", "ucs", "pmf", "wwm"}
UUENCODE_MIN = 4          # top-10 words of that kind that make a topic an uuencode topic
OTHER_FLAGGED_MAX = 0.05
RUNS = [("gibbs", 1), ("gibbs", 2), ("vb", 1)]
MEASURES = ("tokens", "doc_entropy", "eff_words", "corpus_kl", "top_doc_share", "word_length",
            "nonwords")


def ensure_run(store, algorithm: str, seed: int):
    if algorithm == "gibbs":
        out = WORK / f"gibbs-k100-s500-seed{seed}"
        inference = {"algorithm": "gibbs", "iterations": 500, "burn_in": 499, "thin": 1}
        every = 500
    else:
        out = WORK / f"vb-k100-seed{seed}"
        inference = {"algorithm": "vb", "iterations": 40}
        every = 40
    config = {"corpus": str(store), "output": str(out),
              "model": {"topics": 100, "alpha": 0.1, "beta": 0.01},
              "inference": inference,
              "training": {"seed": seed, "threads": 1, "eval_every": every,
                           "checkpoint_every": 0}}
    return h.train_once(config, WORK)


def summary_rows(table: list[dict]) -> list[list[str]]:
    rows = []
    for name in MEASURES:
        values = np.array([r[name] for r in table], dtype=float)
        pct = np.percentile(values, [0, 5, 50, 95, 100])
        rows.append([name, *(format(v, ".3g") for v in pct)])
    eff = np.exp([r["doc_entropy"] for r in table])
    rows.append(["exp(doc_entropy)", *(format(v, ".3g")
                                       for v in np.percentile(eff, [0, 5, 50, 95, 100]))])
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--record", action="store_true",
                        help="write benchmarks/results/diagnostics.md")
    args = parser.parse_args()
    store = h.ensure_20news_bydate()
    lines = ["# Per-topic diagnostics and junk flags on 20 Newsgroups", "",
             f"Command: `{h.command_line()}`", "", *h.machine_info(), "",
             "Store (made by `harness.ensure_20news_bydate()`):", "", "```",
             *h.news_commands(), "```", "",
             "Runs: K = 100, alpha 0.1, beta 0.01, one thread; collapsed Gibbs 500 sweeps "
             "(seeds 1, 2), batch VB 40 EM iterations (seed 1). The columns and the flag "
             "rules are those of docs/evaluate.md (`topics --diagnostics`).", ""]
    checks = []
    for algorithm, seed in RUNS:
        out = ensure_run(store, algorithm, seed)
        run = topictk.load_run(out)
        began = time.perf_counter()
        table = run.diagnostics()
        seconds = time.perf_counter() - began
        junk = [r for r in table
                if sum(w in UUENCODE_WORDS for w in r["words"]) >= UUENCODE_MIN]
        flagged = [r for r in table if r["flags"]]
        others = [r for r in flagged if r not in junk]
        junk_ok = bool(junk) and all(r["flags"] for r in junk)
        others_ok = len(others) <= OTHER_FLAGGED_MAX * (len(table) - len(junk))
        checks.append((out.name, junk_ok, others_ok))
        lines += [f"## {out.name} ({algorithm}, seed {seed})", "",
                  f"Diagnostics computed in {seconds:.1f} s. Distribution over the "
                  f"{len(table)} topics:", "",
                  *h.table(["measure", "min", "5 %", "median", "95 %", "max"],
                           summary_rows(table)), "",
                  f"Flagged: {len(flagged)} topics.", "",
                  *h.table(["topic", "flags", "tokens", "exp(H)", "top-10 share",
                            "non-words", "top words"],
                           [[r["topic"], ", ".join(r["flags"]), f"{r['tokens']:.0f}",
                             f"{math.exp(r['doc_entropy']):.1f}",
                             f"{r['top_doc_share']:.3f}", r["nonwords"], " ".join(r["words"])]
                            for r in flagged], "lllrrrl"), "",
                  f"Uuencode topics (>= {UUENCODE_MIN} of their top words are uuencode letter "
                  f"runs): {', '.join(str(r['topic']) for r in junk) or 'none'}; all flagged: "
                  f"{'yes' if junk_ok else 'NO'}. Other topics flagged: {len(others)} of "
                  f"{len(table) - len(junk)} (at most {OTHER_FLAGGED_MAX:.0%}: "
                  f"{'yes' if others_ok else 'NO'}).", ""]
    lines += ["## Checks", "",
              *h.table(["run", "uuencode topics flagged", "others flagged <= 5 %"],
                       [[name, "yes" if a else "NO", "yes" if b else "NO"]
                        for name, a, b in checks], "lll")]
    h.write_results(h.results_path(NAME, args.record), "\n".join(lines))


if __name__ == "__main__":
    main()
