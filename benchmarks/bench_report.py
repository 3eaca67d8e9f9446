#!/usr/bin/env python3
"""``topictk report`` against its targets on 20 Newsgroups: four runs with K = 128 (collapsed
Gibbs, online VB, SGRLD, batch VB; short runs, since what the report costs does not depend on how
long training ran), reported together.

Measured:

* the wall time of ``topictk report RUN1 RUN2 RUN3 RUN4 --out report.html --force`` as a
  separate process (median of ``--rounds``; target <= 5 s);
* the size of the page (target <= 2 MB);
* the first render in headless Chromium (Debian's ``chromium`` driven by Playwright): the page
  opened from ``file://`` in a fresh tab, its first contentful paint and its load event
  (after the script has drawn the bar charts) from the browser's own timing API, median of
  ``--loads`` (target <= 1 s).

With ``--record`` it also writes the screenshot of the page shown in docs/report.md
(``docs/images/report-20news.png``: a Gibbs topic selected, lambda = 0.6).

Usage (a venv with ``pip install -e ".[test]" -r benchmarks/requirements.txt``)::

    python benchmarks/bench_report.py --record
    python benchmarks/bench_report.py --rounds 1 --loads 1          # quick check
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
from pathlib import Path

import harness as h

NAME = "report"
WORK = h.WORK / "report"
CORPUS = "20news_gan2015"
TOPICS = 128
SCREENSHOT = h.REPO / "docs" / "images" / "report-20news.png"

# short runs: (name, inference section, training.eval_every)
RUNS = [
    ("gibbs", {"algorithm": "gibbs", "iterations": 40, "burn_in": 30, "thin": 5}, 5),
    ("ovb", {"algorithm": "ovb", "iterations": 150, "batch_size": 256}, 15),
    ("sgrld", {"algorithm": "sgrld", "iterations": 150, "batch_size": 256, "burn_in": 100,
               "samples": 5}, 15),
    ("vb", {"algorithm": "vb", "iterations": 20}, 2),
]


def train_runs(store: Path) -> list[Path]:
    """The four runs, trained once (kept under benchmarks/work/report/)."""
    runs = []
    for name, inference, every in RUNS:
        out = WORK / name
        runs.append(out)
        if (out / "model.npz").exists():
            continue
        config = {"corpus": str(store), "output": str(out),
                  "model": {"topics": TOPICS, "alpha": 0.1, "beta": 0.01},
                  "inference": inference,
                  "training": {"seed": 1, "threads": 1, "eval_every": every,
                               "checkpoint_every": 1000},
                  "evaluation": {"fold_in_sweeps": 20, "fold_in_burn_in": 10}}
        h.log(f"train {name}, K = {TOPICS}")
        res = h.train(config, WORK / f"{name}.yaml", WORK / "logs" / f"train-{name}.log")
        if res["rc"] != 0:
            logfile = WORK / "logs" / f"train-{name}.log"
            raise SystemExit(f"training {name} failed:\n{h.tail(logfile)}")
    return runs


def time_report(runs: list[Path], page: Path, rounds: int, args) -> list[dict]:
    results = []
    for i in range(rounds):
        h.wait_for_quiet(1, args.quiet_margin, args.max_wait)
        res = h.run_measured([*h.TOPICTK, "report", *map(str, runs), "--out", str(page),
                              "--force"], WORK / "logs" / f"report-{i}.log")
        if res["rc"] != 0:
            raise SystemExit(f"report failed:\n{h.tail(WORK / 'logs' / f'report-{i}.log')}")
        results.append(res)
    return results


def browser_timings(page_path: Path, loads: int, screenshot: Path | None) -> list[dict]:
    """First contentful paint and load event (ms) of ``loads`` fresh tabs; a screenshot of
    the last when ``screenshot``."""
    from playwright.sync_api import sync_playwright

    executable = shutil.which("chromium") or shutil.which("chromium-browser")
    if executable is None:
        raise SystemExit("chromium not found: install Debian's chromium package")
    timings = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, headless=True)
        for _ in range(loads):
            tab = browser.new_page(viewport={"width": 1200, "height": 900})
            requests: list[str] = []
            tab.on("request", lambda r, seen=requests: seen.append(r.url))
            tab.goto(page_path.as_uri(), wait_until="load")
            timing = tab.evaluate(
                "() => { const n = performance.getEntriesByType('navigation')[0]; "
                "const p = performance.getEntriesByName('first-contentful-paint')[0]; "
                "return {load: n.loadEventEnd, paint: p ? p.startTime : null}; }")
            timing["requests"] = len(requests)
            timings.append(timing)
            if screenshot is not None and len(timings) == loads:
                _screenshot(tab, screenshot)
            tab.close()
        browser.close()
    return timings


def _screenshot(tab, path: Path) -> None:
    run = tab.locator("#run-0")
    shares = tab.evaluate("() => JSON.parse(document.getElementById('report-data')"
                          ".textContent).runs[0].share")
    largest = max(range(len(shares)), key=shares.__getitem__)
    run.locator(f"svg.map circle.topic[data-topic='{largest}']").focus()
    tab.keyboard.press("Enter")                           # smaller circles may cover it
    slider = run.locator("input.lambda")
    slider.focus()
    for _ in range(40):                                   # 1.00 -> 0.60
        tab.keyboard.press("ArrowLeft")
    tab.evaluate("() => document.activeElement.blur()")
    tab.set_viewport_size({"width": 1200, "height": 1000})
    bottom = tab.evaluate("() => { const b = document.querySelector('#run-0 .topic-view')"
                          ".getBoundingClientRect(); return b.bottom + window.scrollY + 16; }")
    path.parent.mkdir(parents=True, exist_ok=True)
    tab.screenshot(path=str(path), full_page=True,
                   clip={"x": 0, "y": 0, "width": 1200, "height": bottom})


def render(runs, store, reports, size, timings, screenshot) -> str:
    walls = [r["wall"] for r in reports]
    cpus = [r["cpu"] for r in reports]
    paints = [t["paint"] for t in timings if t["paint"] is not None]
    loads = [t["load"] for t in timings]
    facts = h.store_facts(store)
    rows = [["report of 4 runs, wall (s)", f"{statistics.median(walls):.2f}",
             f"{min(walls):.2f}–{max(walls):.2f}", "≤ 5"],
            ["report of 4 runs, CPU (s)", f"{statistics.median(cpus):.2f}",
             f"{min(cpus):.2f}–{max(cpus):.2f}", ""],
            ["report, peak RSS (MiB)", h.mib(max(r["maxrss"] for r in reports)), "", ""],
            ["page size (bytes)", f"{size:,}", "", "≤ 2,000,000"],
            ["first contentful paint (ms)", f"{statistics.median(paints):.0f}" if paints
             else "–", f"{min(paints):.0f}–{max(paints):.0f}" if paints else "", "≤ 1000"],
            ["load event, bars drawn (ms)", f"{statistics.median(loads):.0f}",
             f"{min(loads):.0f}–{max(loads):.0f}", "≤ 1000"],
            ["requests made by the page", str(max(t["requests"] for t in timings)), "",
             "1 (itself)"]]
    lines = [f"# {NAME}: `topictk report` of four K = {TOPICS} runs on 20 Newsgroups", "",
             f"Command: `{h.command_line()}`", "", f"Measured {h.now_utc():%Y-%m-%d %H:%M} UTC on:",
             *h.machine_info("playwright"), "",
             f"Store: `{CORPUS}` ({facts['D']:,} training documents, {facts['N']:,} tokens, "
             f"vocabulary {facts['V']:,}); runs (short, K = {TOPICS}): "
             + ", ".join(f"`{p.name}`" for p in runs) + ".", "",
             ("The report command is timed as its own process "
             f"(`topictk report {' '.join(p.name for p in runs)} --out report.html --force`, "
             f"{len(reports)} rounds, other processes keeping "
             f"{min(r['foreign'] for r in reports):.2f}–{max(r['foreign'] for r in reports):.2f} "
             "of the 2 cores busy meanwhile); the page is opened in fresh tabs of headless "
             "Chromium from `file://` "
             f"({len(timings)} loads), timings from the browser's navigation and paint entries."),
             "", *h.table(["what", "median", "range", "target"], rows, "lrrr")]
    if screenshot:
        lines += ["", f"Screenshot: [{h.rel(screenshot)}](../../{h.rel(screenshot)})."]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="timed report commands (5)")
    parser.add_argument("--loads", type=int, default=5, help="page loads in Chromium (5)")
    h.add_common_options(parser)
    args = parser.parse_args()
    store = h.ensure_store(CORPUS)
    runs = train_runs(store)
    page = WORK / "report.html"
    reports = time_report(runs, page, args.rounds, args)
    screenshot = SCREENSHOT if args.record else None
    timings = browser_timings(page, args.loads, screenshot)
    text = render(runs, store, reports, os.path.getsize(page), timings, screenshot)
    path = h.write_results(h.results_path(NAME, args.record), text)
    h.log(f"wrote {path}")


if __name__ == "__main__":
    main()
