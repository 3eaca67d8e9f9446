#!/usr/bin/env python3
"""Exports for people on 20 Newsgroups: what ``topictk topics`` heads a real run with, the
coherence cache (c_v asked twice), word-intrusion tasks, and the offline pyLDAvis page
(checked in headless Chromium with every request outside the file system refused).

The run is a collapsed Gibbs run, K = 100, 300 sweeps, seed 0, on the 20 Newsgroups bydate
store (``harness.ensure_20news_bydate``), trained once under ``benchmarks/work/people/`` with
one thread. Every timing is a separate ``topictk`` process; before the first calls the run's
``scores.json`` is deleted.

Usage::

    python benchmarks/bench_people.py --record
"""
from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import harness as h

NAME = "people"
WORK = h.WORK / NAME
TOPICS = 100
SWEEPS = 300


def ensure_run() -> Path:
    """The run, trained once (about 2 minutes with one thread)."""
    out = WORK / f"gibbs-k{TOPICS}-s{SWEEPS}"
    config = {"corpus": str(h.ensure_20news_bydate()), "output": str(out),
              "model": {"topics": TOPICS, "alpha": 0.1, "beta": 0.01},
              "inference": {"algorithm": "gibbs", "iterations": SWEEPS},
              "training": {"seed": 0, "threads": 1, "eval_every": "auto",
                           "checkpoint_every": 0}}
    return h.train_once(config, WORK)


def timed(name: str, *args) -> dict:
    res = h.run_measured([*h.TOPICTK, *map(str, args)], WORK / "logs" / f"{name}.log",
                         stdout_path=WORK / "logs" / f"{name}.out")
    if res["rc"] != 0:
        raise SystemExit(f"{name} failed:\n{h.tail(WORK / 'logs' / f'{name}.log')}")
    return res


def check_page(page: Path) -> dict:
    from playwright.sync_api import sync_playwright

    executable = shutil.which("chromium") or shutil.which("chromium-browser")
    found = {"errors": [], "outside": []}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, headless=True)
        tab = browser.new_page(viewport={"width": 1300, "height": 900})
        tab.on("pageerror", lambda e: found["errors"].append(str(e)))
        tab.route("**/*", lambda route: route.continue_()
                  if route.request.url.startswith("file://")
                  else (found["outside"].append(route.request.url), route.abort()))
        tab.goto(page.as_uri(), wait_until="load")
        ids = tab.eval_on_selector_all("#ldavis circle.dot", "els => els.map(e => e.id)")
        found["circles"] = len(ids)
        found["in_order"] = ids == [f"ldavis-topic{n}" for n in range(1, len(ids) + 1)]
        found["bars"] = tab.eval_on_selector_all("#ldavis text.terms", "els => els.length")
        browser.close()
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--record", action="store_true",
                        help="write benchmarks/results/people.md")
    args = parser.parse_args()
    run = ensure_run()
    (run / "scores.json").unlink(missing_ok=True)
    out = WORK / "out"
    out.mkdir(parents=True, exist_ok=True)

    rows = []
    res = timed("topics-before", "topics", run, "-n", "8")
    before = res["stdout"].splitlines()[0]
    rows.append(["topics (score not cached)", f"{res['wall']:.2f}"])
    res = timed("evaluate", "evaluate", run, "--json", "-q")
    rows.append(["evaluate (held-out perplexity computed)", f"{res['wall']:.2f}"])
    res = timed("evaluate-coherence-1", "evaluate", run, "--coherence", "all", "--json", "-q")
    first = json.loads(res["stdout"])
    rows.append(["evaluate --coherence all (perplexity read; c_v, c_npmi, c_uci, u_mass "
                 "computed)", f"{res['wall']:.2f}"])
    res = timed("evaluate-coherence-2", "evaluate", run, "--coherence", "all", "--json", "-q")
    second = json.loads(res["stdout"])
    rows.append(["evaluate --coherence all (everything read from scores.json)",
                 f"{res['wall']:.2f}"])
    res = timed("topics-after", "topics", run, "-n", "8")
    after = res["stdout"].splitlines()[0]
    rows.append(["topics (score cached)", f"{res['wall']:.2f}"])
    res = timed("intrusion", "export", run, "--what", "intrusion", "--format", "json", "--out",
                out / "tasks.json", "--key", out / "key.json", "--force")
    rows.append(["export --what intrusion (tasks and key)", f"{res['wall']:.2f}"])
    res = timed("ldavis", "export", run, "--what", "ldavis", "--out", out / "ldavis.json",
                "--html", out / "ldavis.html", "--force")
    rows.append(["export --what ldavis --html", f"{res['wall']:.2f}"])

    key = json.loads((out / "key.json").read_text(encoding="utf-8"))["key"]
    tasks = json.loads((out / "tasks.json").read_text(encoding="utf-8"))["tasks"]
    ranks = sorted(int(k["intruder_rank"]) for k in key)
    bottom = sum(k["rule"] == "bottom half" for k in key)
    page = check_page(out / "ldavis.html")

    lines = [f"# {NAME}: the score in `topics`, the coherence cache, intrusion tasks and the "
             "pyLDAvis page on 20 Newsgroups", "",
             f"Command: `{h.command_line()}`", "",
             f"Measured {h.now_utc():%Y-%m-%d %H:%M} UTC on:",
             *h.machine_info("pyLDAvis", "playwright"), "",
             f"Run: collapsed Gibbs, K = {TOPICS}, {SWEEPS} sweeps, seed 0, one thread, on the "
             f"20 Newsgroups bydate store (`{h.rel(run)}`). Wall seconds of one `topictk` "
             "process each, in this order, `scores.json` deleted before the first:", "",
             *h.table(["command", "wall s"], rows, "lr"), "",
             f"c_v (top {first['coherence']['top']}, training texts, windows of 110): "
             f"{first['c_v']:.4f} computed, {second['c_v']:.4f} read back; measures read from "
             f"the cache by the second call: {', '.join(second['coherence']['cached'])}. The "
             "compiled coherence kernel makes the four measures cheap on this corpus "
             "(docs/evaluate.md): the cache saves the difference of the two rows (counting "
             "windows), not the loading of the run; the large saving of scores.json is the "
             "held-out perplexity's (the first evaluate's row).", "",
             "First line of `topictk topics` before and after `evaluate`:", "", "```",
             before, after, "```", "",
             f"Intrusion: {len(key)} tasks; intruders drawn by the bottom-half rule: {bottom}, "
             f"by the top-50 fallback: {len(key) - bottom}; the intruder's rank in its topic "
             f"(1 + the words more probable): median {ranks[len(ranks) // 2]:,}, smallest "
             f"{ranks[0]:,}, of V = {h.store_facts(h.NEWS_STORE)['V']:,} words. The first "
             "three tasks and their keys:", "", "```",
             *(f"topic {t['topic']}: {' '.join(t['words'])}   [intruder {k['intruder']!r} at "
               f"{k['position']}, a top word of topic {k['source_topic']}]"
               for t, k in zip(tasks[:3], key[:3])), "```", "",
             f"pyLDAvis page: {(out / 'ldavis.html').stat().st_size:,} bytes "
             f"(JSON {(out / 'ldavis.json').stat().st_size:,}); in headless Chromium with "
             f"non-file requests refused: {page['circles']} circles, ids 1..K in the model's "
             f"order: {page['in_order']}, {page['bars']} bars, {len(page['errors'])} script "
             f"errors, {len(page['outside'])} requests outside file://."]
    h.write_results(h.results_path(NAME, args.record), "\n".join(lines))


if __name__ == "__main__":
    main()
