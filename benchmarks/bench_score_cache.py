#!/usr/bin/env python3
"""The scores cache (``scores.json``) on 20 Newsgroups: the first ``topictk compare`` and
``topictk report`` of two runs score them (evaluate's protocol on all 7,484 test documents);
the second reads the cache. Target: the second call at least 10x faster than the first.

The runs are one collapsed Gibbs chain stopped after 30 and after 300 sweeps (K = 100, the
default 10 saved samples over the second half of each run), trained
once under ``benchmarks/work/score_cache/`` on the 20 Newsgroups bydate store prepared from
``../shared/data/20news_bydate_raw`` as docs/reproducing.md says (``bench_coherence.py``'s
store, made here when missing). Also recorded: each run's held-out perplexity (evaluate) and its
last in-training estimate, with the curve documents each run used.

Every timing is a separate ``topictk`` process; before the first call of each pair the runs'
``scores.json`` are deleted. The script waits for a 1-minute load average below ``--load``.

Usage::

    python benchmarks/bench_score_cache.py --record
    python benchmarks/bench_score_cache.py --rounds 1          # quick check (work/results)
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
from pathlib import Path

import harness as h

NAME = "score_cache"
WORK = h.WORK / NAME
STORE = h.NEWS_STORE
TOPICS = 100
SWEEPS = (30, 300)
TARGET = 10.0


def ensure_run(sweeps: int) -> Path:
    """The chain stopped after ``sweeps`` sweeps (seed 1; the default samples: 10, spread over
    the second half, which evaluate averages over)."""
    config = {"corpus": str(STORE), "output": str(WORK / f"gibbs-k{TOPICS}-s{sweeps}"),
              "model": {"topics": TOPICS, "alpha": 0.1, "beta": 0.01},
              "inference": {"algorithm": "gibbs", "iterations": sweeps},
              "training": {"seed": 1, "threads": 1, "eval_every": "auto",
                           "checkpoint_every": 0}}
    return h.train_once(config, WORK)


def timed(args: list[str], label: str) -> dict:
    logfile = WORK / "logs" / f"{label}.log"
    res = h.run_measured([*h.TOPICTK, *args], logfile)
    if res["rc"] != 0:
        raise SystemExit(f"{label} failed:\n{h.tail(logfile)}")
    res["load"] = os.getloadavg()[0]
    return res


def clear_cache(runs: list[Path]) -> None:
    for run in runs:
        (run / "scores.json").unlink(missing_ok=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    h.add_common_options(parser)
    parser.add_argument("--rounds", type=int, default=3,
                        help="first/second pairs per command (3); the medians are reported")
    parser.add_argument("--load", type=float, default=1.5,
                        help="wait for a 1-minute load average below this before timing")
    args = parser.parse_args()
    store = h.ensure_20news_bydate()
    runs = [ensure_run(s) for s in SWEEPS]
    page = WORK / "report.html"
    commands = {"compare": ["compare", *map(str, runs), "--format", "json", "-q"],
                "report": ["report", *map(str, runs), "--out", str(page), "--force", "-q"]}
    timings: dict[str, dict[str, list[dict]]] = {c: {"first": [], "second": []}
                                                   for c in commands}
    loads = []
    for i in range(args.rounds):
        for command, argv in commands.items():
            loads.append(h.wait_for_low_load(args.load, 600.0, poll=20.0))
            clear_cache(runs)
            timings[command]["first"].append(timed(argv, f"{command}-first-{i}"))
            timings[command]["second"].append(timed(argv, f"{command}-second-{i}"))
    compared = json.loads(_compare_json(commands["compare"]))
    text = render(store, runs, timings, compared, loads, args)
    h.write_results(h.results_path(NAME, args.record), text)


def _compare_json(argv: list[str]) -> str:
    import subprocess

    done = subprocess.run([*h.TOPICTK, *argv], capture_output=True, text=True, check=True)
    return done.stdout


def render(store: Path, runs: list[Path], timings, compared: dict, loads, args) -> str:
    facts = h.store_facts(store)
    rows = []
    speedups = []
    for command, pair in timings.items():
        first = statistics.median(r["wall"] for r in pair["first"])
        second = statistics.median(r["wall"] for r in pair["second"])
        speedups.append(first / second)
        rows.append([f"`{command}` of the 2 runs", f"{first:.2f}", f"{second:.2f}",
                     f"{first / second:.1f}x"])
    scores = []
    for row in compared["runs"]:
        run = Path(row["path"])
        metrics = h.read_metrics(run)
        last = metrics[-1] if metrics else {}
        config = _yaml(run / "config.yaml")
        scores.append([row["run"], str(row["iterations"]), f"{row['perplexity']:.1f}",
                       h.fmt(last.get("perplexity_point"), ".1f"),
                       str(config["evaluation"]["curve_docs"])])
    ok = all(s >= TARGET for s in speedups)
    return "\n".join([
        "# Scores cache: first and second `compare` and `report`",
        "",
        f"Recorded {h.now_utc():%Y-%m-%d %H:%M} UTC with `{h.command_line()}`.",
        "",
        *h.machine_info(),
        f"- 1-minute load average before each timed pair: "
        f"{', '.join(f'{x:.2f}' for x in loads)} (waited for < {args.load})",
        "",
        f"Store: 20 Newsgroups bydate ({facts['D']:,} training documents, {facts['N']:,} "
        f"tokens, {facts['V']:,} words, {facts['test_docs']:,} test documents), prepared by",
        "",
        "```bash",
        *h.news_commands(),
        "```",
        "",
        f"Runs: one collapsed Gibbs chain (K = {TOPICS}, alpha 0.1, beta 0.01, seed 1, the "
        "default 10 saved samples over the second half, which evaluate averages over) stopped "
        f"after {SWEEPS[0]} and after {SWEEPS[1]} sweeps; evaluate's "
        "protocol: document completion on every test document, Gibbs fold-in 50 sweeps (25 "
        "burn-in).",
        "",
        "## Wall time, separate processes (s, median of "
        f"{args.rounds})",
        "",
        "First: the runs' `scores.json` deleted, so both runs are scored. Second: the same "
        "command again, reading `scores.json`. `report` still loads each model and draws its "
        "topic maps, which the cache does not skip.",
        "",
        *h.table(["command", "first", "second", "speed-up"], rows),
        "",
        f"Target: the second call at least {TARGET:.0f}x faster: "
        + ("**met**." if ok else "**not met**."),
        "",
        "## The numbers shown",
        "",
        "`compare` and `report` show evaluate's held-out perplexity; the last in-training "
        "estimate (metrics.jsonl) is on the curve documents only, with a 10-sweep fold-in.",
        "",
        *h.table(["run", "sweeps", "held-out perplexity (evaluate)",
                  "last in-training estimate", "curve documents"], scores),
        "",
    ])


def _yaml(path: Path) -> dict:
    import yaml

    return yaml.safe_load(path.read_text())


if __name__ == "__main__":
    main()
