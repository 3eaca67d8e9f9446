"""Suggested labels and representative documents on 20 Newsgroups (bydate), K = 100.

The collapsed Gibbs run of bench_coherence.py (K = 100, 300 sweeps, seed 0, one thread; trained
there once, or here if missing) on the 20 Newsgroups bydate store. Measured:

- suggested labels (``Run.labels(suggest=True)``: from the sampler's z, as for every
  Gibbs-family run), seconds, and how many topics got an adjacent pair;
- the 5 representative documents of all 100 topics (``Run.representative_docs``);
- ``prepare --snippets 200`` against the same prepare without it: seconds and store size.

    python benchmarks/bench_labels.py --record

Writes benchmarks/work/labels/ (the snippet stores) and the report ``labels.md``.
"""
from __future__ import annotations

import argparse
import shutil
import time
from pathlib import Path

import harness as h
import topictk
from bench_coherence import ensure_run

NAME = "labels"
WORK = h.WORK / "labels"


def timed(fn):
    began = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - began


def store_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.iterdir() if p.is_file())


def prepare_pair() -> list[dict]:
    """The bydate store prepared without and with --snippets 200: seconds and bytes."""
    rows = []
    for name, extra in (("plain", []), ("snippets-200", ["--snippets", "200"])):
        out = WORK / name
        shutil.rmtree(out, ignore_errors=True)
        log = WORK / f"prepare-{name}.log"
        res = h.run_measured([*h.TOPICTK, "prepare", str(h.NEWS_JSONL), *h.NEWS_PREPARE,
                              *extra, "--out", str(out)], log)
        if res["rc"] != 0:
            raise SystemExit(f"prepare failed:\n{h.tail(log)}")
        rows.append({"name": name, "seconds": res["wall"], "bytes": store_bytes(out)})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--record", action="store_true", help="write the results file")
    args = parser.parse_args()
    WORK.mkdir(parents=True, exist_ok=True)
    h.ensure_20news_bydate()
    _, run_dir = ensure_run(100, 300, 0)
    run = topictk.load_run(run_dir)
    labels, t_labels = timed(lambda: run.labels(suggest=True))
    docs, t_docs = timed(lambda: [run.representative_docs(k, 5) for k in range(100)])
    pairs = sum(" / " in (label or "") for label in labels)
    prepared = prepare_pair()
    facts = h.store_facts(h.NEWS_STORE)
    N, D = facts["N"], facts["D"]
    lines = ["# Suggested labels and representative documents (20 Newsgroups, K = 100)", "",
             "Command: `python benchmarks/bench_labels.py --record`", "",
             *h.machine_info(), "",
             f"Run: collapsed Gibbs, K = 100, 300 sweeps, seed 0 (bench_coherence.py), on the "
             f"bydate store: {D:,} training documents, {N:,} training tokens.", "",
             "| step | seconds |", "| --- | ---: |",
             f"| suggested labels, Run.labels(suggest=True) (pairs among {N:,} tokens) "
             f"| {t_labels:.2f} |",
             f"| 5 representative documents of each of 100 topics | {t_docs:.2f} |", "",
             f"Topics with an adjacent pair (seen at least twice): {pairs} of 100.", "",
             "| prepare of the bydate JSONL | seconds | store bytes |", "| --- | ---: | ---: |",
             *(f"| {r['name']} | {r['seconds']:.1f} | {r['bytes']:,} |" for r in prepared),
             "",
             f"Snippets add {prepared[1]['bytes'] - prepared[0]['bytes']:,} bytes "
             f"({(prepared[1]['bytes'] - prepared[0]['bytes']) / D:.0f} per training "
             f"document).", "",
             "## The first 20 suggested labels", "",
             "| topic | suggested label |", "| ---: | --- |",
             *(f"| {k + 1} | {labels[k]} |" for k in range(20)), "",
             "## Topic 1's representative documents (share theta_dk from the counts)", "",
             *(f"- {d['document']}: {d['share']:.3f}" for d in docs[0]), ""]
    text = "\n".join(lines)
    print(text)
    if args.record:
        (h.REPO / "benchmarks" / "results" / f"{NAME}.md").write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
