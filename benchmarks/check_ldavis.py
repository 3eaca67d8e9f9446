#!/usr/bin/env python3
"""The LDAvis export read by pyLDAvis: topictk's LDAvis JSON of a real run (20 Newsgroups,
K = 128, the collapsed Gibbs run of ``bench_report.py``) is turned into pyLDAvis's
``PreparedData``, rendered by pyLDAvis's own page and scripts (its bundled copies, from
``file://``) in headless Chromium, and checked:

* the page renders without a script error and makes no request outside the file system;
* it draws one circle per topic, numbered 1..K in the model's order (``topic.order`` is the
  identity: pyLDAvis does not reorder them);
* circle n is the model's topic n - 1: selecting it shows, at lambda = 1, the word with the
  largest phi of that topic (``topictk.load_run(RUN).topic_word()``) at the top of the bars,
  for every topic.

The JSON comes from ``topictk export RUN --what ldavis --out FILE``, or from ``--json FILE``.

Usage (a venv with ``pip install -e ".[test]" -r benchmarks/requirements.txt``)::

    python benchmarks/check_ldavis.py --record
    python benchmarks/check_ldavis.py --run RUN --json ldavis.json
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
from pathlib import Path

import harness as h
import numpy as np

import topictk

NAME = "ldavis"
WORK = h.WORK / "ldavis"
DEFAULT_RUN = h.WORK / "report" / "gibbs"
FIGURE = "ldavis-pyldavis.png"


def export_json(run: Path, out: Path) -> Path:
    out.parent.mkdir(parents=True, exist_ok=True)
    done = subprocess.run([*h.TOPICTK, "export", str(run), "--what", "ldavis", "--out",
                           str(out), "--force"], capture_output=True, text=True, cwd=h.REPO,
                          check=False)
    if done.returncode != 0:
        raise SystemExit(f"topictk export failed: {done.stderr.strip()}")
    return out


def pyldavis_page(data: dict, out: Path) -> Path:
    """pyLDAvis's own page for ``data``, its scripts and style from its bundled copies."""
    import pandas as pd
    import pyLDAvis
    from pyLDAvis import urls

    prepared = pyLDAvis.PreparedData(
        pd.DataFrame(data["mdsDat"]), pd.DataFrame(data["tinfo"]),
        pd.DataFrame(data["token.table"]), data["R"], data["lambda.step"], data["plot.opts"],
        data["topic.order"])
    fragment = pyLDAvis.prepared_data_to_html(
        prepared, d3_url=Path(urls.D3_LOCAL).as_uri(), ldavis_url=Path(urls.LDAVIS_LOCAL).as_uri(),
        ldavis_css_url=Path(urls.LDAVIS_CSS_LOCAL).as_uri(), template_type="simple",
        visid="ldavis")
    out.write_text("<!DOCTYPE html><html><head><meta charset='utf-8'></head><body>"
                   f"{fragment}</body></html>", encoding="utf-8")
    return out


def check_in_browser(page_path: Path, top_words: list[str], figure: Path | None) -> dict:
    from playwright.sync_api import sync_playwright

    executable = shutil.which("chromium") or shutil.which("chromium-browser")
    if executable is None:
        raise SystemExit("chromium not found: install Debian's chromium package")
    found = {"errors": [], "outside": [], "mismatch": []}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, headless=True)
        tab = browser.new_page(viewport={"width": 1250, "height": 900})
        tab.on("pageerror", lambda e: found["errors"].append(str(e)))
        tab.on("console", lambda m: m.type == "error" and found["errors"].append(m.text))
        tab.route("**/*", lambda route: route.continue_()
                  if route.request.url.startswith("file://")
                  else (found["outside"].append(route.request.url), route.abort()))
        tab.goto(page_path.as_uri(), wait_until="load")
        labels = tab.eval_on_selector_all("#ldavis circle.dot", "els => els.map(e => e.id)")
        found["circles"] = len(labels)
        found["numbers_in_order"] = labels == [f"ldavis-topic{n}"
                                               for n in range(1, len(top_words) + 1)]
        for n, word in enumerate(top_words, start=1):
            tab.evaluate(f"() => document.getElementById('ldavis-topic').value = {n}")
            tab.dispatch_event("#ldavis-topic", "keyup")
            tab.wait_for_timeout(30)
            shown = tab.eval_on_selector_all("#ldavis text.terms", "els => els.map(e => "
                                             "[e.textContent, e.getBoundingClientRect().y])")
            first = min(shown, key=lambda item: item[1])[0] if shown else None
            if first != word:
                found["mismatch"].append((n, word, first))
        if figure is not None:
            tab.evaluate("() => document.getElementById('ldavis-topic').value = 1")
            tab.dispatch_event("#ldavis-topic", "keyup")
            tab.wait_for_timeout(800)
            figure.parent.mkdir(parents=True, exist_ok=True)
            tab.screenshot(path=str(figure))
        browser.close()
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", type=Path, default=DEFAULT_RUN,
                        help="the run (default: bench_report.py's Gibbs run)")
    parser.add_argument("--json", type=Path, default=None,
                        help="check this LDAvis JSON instead of exporting it")
    parser.add_argument("--record", action="store_true",
                        help="write benchmarks/results/ldavis.md and the figure")
    args = parser.parse_args()
    if not (args.run / "model.npz").exists():
        raise SystemExit(f"{args.run}: no trained run; run benchmarks/bench_report.py first")
    source = args.json or export_json(args.run, WORK / "ldavis.json")
    data = json.loads(Path(source).read_text(encoding="utf-8"))
    run = topictk.load_run(args.run)
    vocab = run.vocabulary
    phi = run.topic_word()
    top_words = [vocab[int(np.argmax(row))] for row in phi]
    page = pyldavis_page(data, WORK / "pyldavis.html")
    figure = h.figure_path(FIGURE, args.record)
    found = check_in_browser(page, top_words, figure)
    h.log(f"{found['circles']} circles, {len(found['mismatch'])} mismatches, "
          f"{len(found['errors'])} errors, {len(found['outside'])} requests outside")
    text = render(args, source, data, found, figure, len(top_words))
    h.log(f"wrote {h.write_results(h.results_path(NAME, args.record), text)}")


def render(args, source, data, found, figure, K) -> str:
    ok = (not found["errors"] and not found["outside"] and not found["mismatch"]
          and found["circles"] == K and found["numbers_in_order"]
          and data["topic.order"] == list(range(1, K + 1)))
    rows = [["circles drawn", f"{found['circles']} of {K}"],
            ["circle ids 1..K in the model's order", str(found["numbers_in_order"])],
            ["topic.order is the identity", str(data["topic.order"] == list(range(1, K + 1)))],
            ["topics whose top bar at λ = 1 is the model's top word",
             f"{K - len(found['mismatch'])} of {K}"],
            ["script errors", str(len(found["errors"]))],
            ["requests outside file://", str(len(found["outside"]))]]
    lines = [f"# {NAME}: topictk's LDAvis export read and rendered by pyLDAvis", "",
             f"Command: `{h.command_line()}`", "", f"Checked {h.now_utc():%Y-%m-%d %H:%M} UTC on:",
             *h.machine_info("pyLDAvis", "pandas", "playwright"), "",
             (f"Run: `{h.rel(args.run)}` (K = {K}); JSON: `{h.rel(source)}` "
             f"({Path(source).stat().st_size:,} bytes); rendered by "
             "`pyLDAvis.prepared_data_to_html` "
             "with pyLDAvis's bundled d3 and LDAvis scripts in headless Chromium."), "",
             *h.table(["check", "result"], rows, "lr"), "",
             f"Result: **{'pass' if ok else 'FAIL'}**."]
    if found["mismatch"]:
        lines += ["", "Mismatches (LDAvis topic, expected word, shown): "
                  + ", ".join(map(str, found["mismatch"][:10]))]
    if found["errors"]:
        lines += ["", "Errors: " + "; ".join(found["errors"][:5])]
    lines += ["", f"Figure: [{h.rel(figure)}](../../{h.rel(figure)})."]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
