"""Peak memory of ``topictk train`` (collapsed Gibbs) as the corpus grows.

The target of the Gibbs benchmark: peak RSS of ``train`` no more than the store size plus three
times the count arrays (n_dk, n_kw, n_k). A Python process that has started the ``topictk``
command already holds tens of MiB, more than that budget for a corpus as small as KOS, so this
script measures the same run on KOS replicated R times (R copies of every training document,
written as one UCI docword file, prepared with the same options), where the fixed part no
longer decides.

    python benchmarks/bench_gibbs_memory.py --copies 1 10 40 --record
    python benchmarks/bench_gibbs_memory.py --copies 1 2 --topics 16     # quick check

Each row is one ``topictk train`` subprocess (K = 128, 5 sweeps, no evaluation, checkpoint at
the end); peak RSS is that process's own VmHWM. The baseline is ``topictk train --help``: the
command with everything it imports before it chooses an algorithm.
"""
from __future__ import annotations

import argparse
import json
import sys

import harness as h

NAME = "gibbs_memory"
WORK = h.WORK / "gibbs_memory"


def measure(copies: int, K: int, sweeps: int, threads: int, chunks: int) -> dict:
    args = [str(h.replicated_kos(copies, WORK)), "--vocab",
            str(h.data_path("uci_kos", "vocab.kos.txt")),
            "--test-docs", "0.1", "--heldout-fraction", "0.2", "--seed", "0"]
    store = h.ensure_store(f"kos_x{copies}", args, out=WORK / f"store.x{copies}")
    facts = h.store_facts(store)
    name = f"x{copies}.K{K}.t{threads}"
    cfg = {"corpus": str(store), "output": str(WORK / f"run.{name}"),
           "model": {"topics": K, "alpha": 0.1, "beta": 0.01},
           "inference": {"algorithm": "gibbs", "iterations": sweeps, "chunks": chunks},
           "training": {"seed": 0, "threads": threads, "eval_every": 0, "checkpoint_every": 0}}
    res = h.train(cfg, WORK / f"{name}.yaml", WORK / "logs" / f"{name}.log")
    if res["rc"] != 0:
        raise SystemExit(f"topictk train failed:\n{h.tail(WORK / 'logs' / f'{name}.log')}")
    count_bytes = 4 * facts["D"] * K + 4 * facts["V"] * K + 8 * K
    return {"copies": copies, "K": K, "sweeps": sweeps, "threads": threads, "chunks": chunks,
            "train_documents": facts["D"], "train_tokens": facts["N"],
            "vocabulary": facts["V"], "store_bytes": facts["bytes"],
            "count_bytes": count_bytes, "target_bytes": facts["bytes"] + 3 * count_bytes,
            "peak_rss_bytes": res["maxrss"], "wall_seconds": res["wall"]}


def baseline_rss() -> int:
    """Peak RSS of ``topictk train --help``."""
    res = h.run_measured([*h.TOPICTK, "train", "--help"], WORK / "logs" / "baseline.log")
    return res["maxrss"]


def report(rows: list[dict], base: int, K: int) -> str:
    mib = 1 << 20
    lines = ["# Collapsed Gibbs: peak memory against corpus size", "",
             f"Measured {h.now_utc():%Y-%m-%d %H:%M} UTC by", "", "```bash", h.command_line(),
             "```", "", *h.machine_info(), "",
             "KOS (`uci_kos`) with every document repeated R times, prepared like the KOS "
             "store of the Gibbs benchmark (10 % test documents, 20 % of each held out); "
             f"`topictk train`, K = {K}, α = 0.1, β = 0.01, no evaluation. count arrays = "
             "n_dk (D×K int32) + n_kw (V×K int32) + n_k (K int64); target = store size on "
             f"disk + 3 × count arrays. Baseline (`topictk train --help`): "
             f"{base / mib:.0f} MiB.", ""]
    lines += h.table(
        ["R", "training docs", "training tokens", "threads (chunks)", "store MiB",
         "count arrays MiB", "target MiB", "peak RSS MiB", "peak ≤ target",
         "peak − baseline MiB"],
        [[r["copies"], f"{r['train_documents']:,}", f"{r['train_tokens']:,}",
          f"{r['threads']} ({r['chunks']})", h.mib(r["store_bytes"]), h.mib(r["count_bytes"]),
          h.mib(r["target_bytes"]), h.mib(r["peak_rss_bytes"]),
          "**yes**" if r["peak_rss_bytes"] <= r["target_bytes"] else "**no**",
          h.mib(r["peak_rss_bytes"] - base)] for r in rows], align="rrrlrrrrlr")
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--copies", nargs="+", type=int, default=[1, 10, 40])
    p.add_argument("--topics", type=int, default=128)
    p.add_argument("--sweeps", type=int, default=5)
    p.add_argument("--record", action="store_true",
                   help="write benchmarks/results/gibbs_memory.md (default: under work/)")
    args = p.parse_args(argv)
    rows = []
    for copies in args.copies:
        for threads, chunks in ((1, 1), (2, 2)):
            rows.append(measure(copies, args.topics, args.sweeps, threads, chunks))
            r = rows[-1]
            h.log(f"x{copies} t{threads}: peak {h.mib(r['peak_rss_bytes'])} MiB, target "
                  f"{h.mib(r['target_bytes'])} MiB")
    base = baseline_rss()
    (WORK / "results.json").write_text(json.dumps({"rows": rows, "baseline": base}, indent=1))
    text = report(rows, base, args.topics)
    sys.stdout.write(text)
    h.write_results(h.results_path(NAME, args.record), text)


if __name__ == "__main__":
    main()
