"""Choosing K on 20 Newsgroups: the "Scores against K" panel of ``topictk report`` over a sweep
of collapsed Gibbs runs, K = 10, 20, 50, 100, 200 and seeds 1, 2, 3.

Steps (each skipped when its output is there, so a rerun resumes):

1. the 20 Newsgroups bydate store (:func:`harness.ensure_20news_bydate`);
2. ``topictk train --sweep model.topics=... --sweep training.seed=... --resume`` (one run at a
   time, one thread each; finished runs are skipped);
3. a reference store from the wiki25 sample (``../shared/data/wiki25_tomotopy``: 25 English
   Wikipedia articles, one paragraph per document, nothing held out);
4. ``topictk report SWEEP --reference WIKI25`` and a screenshot of its K panel taken in
   headless chromium (``docs/images/k-panel-20news.png`` with ``--record``);
5. the table of the panel's numbers per K (mean and min-max over the seeds).

    python benchmarks/bench_kpanel.py --record            # the recorded run (~15 min)
    python benchmarks/bench_kpanel.py --topics 10,20 --seeds 1,2 --sweeps 60   # a smoke run
"""
from __future__ import annotations

import argparse
import json
import lzma
import re
import shutil
import sys
import time
from pathlib import Path

import harness as h

NAME = "kpanel"
WORK = h.WORK / "kpanel"
WIKI = h.WORK / "stores" / "wiki25_paragraphs"
SCREENSHOT = h.REPO / "docs" / "images" / "k-panel-20news.png"


def settings(sweeps: int) -> dict:
    """The experiment config of every run: collapsed Gibbs, alpha 0.1, beta 0.01, half the
    sweeps burn-in, a sample every 25 sweeps after it."""
    return {"corpus": str(h.NEWS_STORE), "output": str(WORK / "run"),
            "model": {"topics": 10, "alpha": 0.1, "beta": 0.01},
            "inference": {"algorithm": "gibbs", "iterations": sweeps,
                          "burn_in": sweeps // 2, "thin": min(25, max(1, sweeps // 4))},
            "training": {"seed": 1, "threads": 1, "eval_every": "auto",
                         "checkpoint_every": max(sweeps // 5, 1)}}


def train_sweep(topics: str, seeds: str, sweeps: int) -> tuple[Path, list[str]]:
    out = WORK / f"sweep-s{sweeps}"
    config = h.write_config(WORK / f"sweep-s{sweeps}.yaml", settings(sweeps))
    cmd = [*h.TOPICTK, "train", "--config", str(config), "--sweep", f"model.topics={topics}",
           "--sweep", f"training.seed={seeds}", "--out", str(out), "--quiet"]
    if out.is_dir():
        cmd.append("--resume")          # finished runs are skipped, stopped ones resumed
    h.log(f"train the sweep into {h.rel(out)}")
    res = h.run_measured(cmd, WORK / "logs" / f"train-s{sweeps}.log")
    if res["rc"] != 0:
        raise SystemExit(f"training failed:\n{h.tail(WORK / 'logs' / f'train-s{sweeps}.log')}")
    shown = " ".join(c if c != str(config) else h.rel(config) for c in cmd[3:])
    return out, [f"topictk {shown.replace(str(out), h.rel(out))}"]


def ensure_wiki() -> tuple[Path, list[str]]:
    """The reference store: every paragraph of the wiki25 articles a document (the raw text,
    TAB-separated paragraphs), English stop words removed, no test documents."""
    text = WIKI.parent / "wiki25_paragraphs.txt"
    args = ["--format", "text", "--stopwords", "english", "--test-docs", "0"]
    commands = ["xzcat ../shared/data/wiki25_tomotopy/sample_raw.txt.xz | tr '\\t' '\\n' "
                f"| grep -v '^\\s*$' > {h.rel(text)}",
                f"topictk prepare {h.rel(text)} {' '.join(args)} --out {h.rel(WIKI)}"]
    if (WIKI / "manifest.json").exists():
        return WIKI, commands
    raw = lzma.decompress(h.data_path("wiki25_tomotopy", "sample_raw.txt.xz").read_bytes())
    paragraphs = [p.strip() for line in raw.decode("utf-8").splitlines()
                  for p in line.split("\t") if p.strip()]
    text.parent.mkdir(parents=True, exist_ok=True)
    text.write_text("\n".join(paragraphs) + "\n", encoding="utf-8")
    h.ensure_store("wiki25_paragraphs", [str(text), *args], out=WIKI)
    return WIKI, commands


def screenshot(page_file: Path, out: Path) -> int:
    """The K panel of the report page as a PNG, taken in headless chromium; its size."""
    from playwright.sync_api import sync_playwright

    executable = next(filter(None, map(shutil.which, ("chromium", "chromium-browser"))))
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, headless=True)
        page = browser.new_page(viewport={"width": 1000, "height": 900})
        page.goto(page_file.resolve().as_uri())
        out.parent.mkdir(parents=True, exist_ok=True)
        page.locator("#k-panel").screenshot(path=str(out))
        browser.close()
    return out.stat().st_size


#: the panel's measures as its charts name them
TITLES = {"perplexity": "held-out perplexity", "npmi": "NPMI (training corpus)",
          "umass": "UMass (training corpus)", "reference_npmi": "NPMI (reference corpus)",
          "diversity": "topic diversity", "inverted_rbo": "inverted RBO",
          "stability": "stability across seeds"}


def page_data(page_file: Path) -> dict:
    """The numbers of the page's K panel (its ``k-panel-data`` JSON)."""
    text = page_file.read_text(encoding="utf-8")
    found = re.search(r'<script type="application/json" id="k-panel-data">(.*?)</script>',
                      text, re.S)
    if found is None:
        raise SystemExit(f"{page_file}: no Scores against K panel in the page")
    return json.loads(found.group(1))


def cell(groups: list[dict], x, digits: str) -> str:
    """"mean (min–max)" of the group at ``x``, or "–"."""
    g = next((g for g in groups if g["x"] == x), None)
    if g is None:
        return "–"
    return f"{g['mean']:{digits}} ({g['low']:{digits}}–{g['high']:{digits}})"


def report_and_results(sweep: Path, commands: list[str], args, train_wall: float) -> None:
    wiki, wiki_commands = ensure_wiki()
    page = WORK / f"report-s{args.sweeps}.html"
    cmd = [*h.TOPICTK, "report", str(sweep), "--reference", str(wiki), "--out", str(page),
           "--force", "--quiet"]
    h.log("report (scores every run once: evaluate's fold-in on all test documents)")
    first = h.run_measured(cmd, WORK / "logs" / "report-1.log")
    if first["rc"] != 0:
        raise SystemExit(f"report failed:\n{h.tail(WORK / 'logs' / 'report-1.log')}")
    h.log("report again (scores cached)")
    second = h.run_measured(cmd, WORK / "logs" / "report-2.log")
    panel = page_data(page)
    compared = WORK / "compare.json"
    h.run_measured([*h.TOPICTK, "compare", str(sweep), "--format", "json"],
                   WORK / "logs" / "compare.log", stdout_path=compared)
    trained: dict[int, list[float]] = {}
    for row in json.loads(compared.read_text())["runs"]:
        trained.setdefault(int(row["topics"]), []).append(float(row["train_seconds"]))
    figure = WORK / f"k-panel-s{args.sweeps}.png"
    h.log("plot --k-panel (scores cached: the panel's own work and the figure)")
    plotted = h.run_measured([*h.TOPICTK, "plot", str(sweep), "--k-panel", "--reference",
                              str(wiki), "--out", str(figure), "--force", "--quiet"],
                             WORK / "logs" / "plot.log")
    shot = SCREENSHOT if args.record else h.figure_path("k-panel-20news.png", False)
    size = screenshot(page, shot)
    h.log(f"screenshot {h.rel(shot)}: {size / 1024:.0f} KiB")
    digits = {"perplexity": ".0f", "umass": ".1f", "npmi": ".3f", "reference_npmi": ".3f",
              "diversity": ".3f", "inverted_rbo": ".3f", "stability": ".3f"}
    xs = panel["x_values"]
    rows = [[f"{TITLES[m]} ({'lower' if m == 'perplexity' else 'higher'} is better)",
             *(cell(panel["summary"][m], x, digits[m]) for x in xs)]
            for m in panel["measures"]]
    ref = panel["reference"]
    seeds = ", ".join(str(s) for s in panel["seeds"])
    lines = [
        "# Scores against K on 20 Newsgroups: collapsed Gibbs, K = "
        f"{', '.join(str(x) for x in xs)}, seeds {seeds}",
        "", f"Measured {h.now_utc():%Y-%m-%d %H:%M} UTC by", "", "```bash",
        f"python benchmarks/bench_kpanel.py{' --record' if args.record else ''} "
        f"--topics {args.topics} --seeds {args.seeds} --sweeps {args.sweeps}", "```", "",
        *h.machine_info(), "", "Commands it runs:", "", "```bash", *h.news_commands(),
        *commands, *wiki_commands,
        f"topictk report {h.rel(sweep)} --reference {h.rel(wiki)} --out {h.rel(page)}",
        "```", "",
        f"Every run: collapsed Gibbs (`gibbs`, sparse), α = 0.1, β = 0.01, {args.sweeps} sweeps "
        f"(burn-in {args.sweeps // 2}, a sample every {min(25, max(1, args.sweeps // 4))} "
        "after it), one thread, eval_every auto; one run trained at a time.",
        "", "What the numbers are (the panel's own line):", "", f"> {panel['line']}", "",
        "Each cell: mean over the seeds (min–max); stability: over the pairs of seeds.", "",
        *h.table(["measure", *(f"K = {x}" for x in xs)], rows), "",
        f"Reference: {ref['name']}, {ref['documents']:,} documents (paragraphs), "
        f"{ref['windows']:,} windows of 10 tokens; {ref['present']:,} of the runs' "
        f"{ref['words']:,} distinct top words are in it; missing, for example: "
        f"{', '.join(ref['missing'][:15])}.", "",
        "Training seconds per run (one thread, evaluation excluded; mean over the seeds): "
        + ", ".join(f"K = {k}: {h.mean(v):.0f} s" for k, v in sorted(trained.items()))
        + f"; this invocation trained for {train_wall / 60:.1f} min (0: every run was there "
        f"already). `report` {first['wall']:.0f} s the first time (evaluate's fold-in on "
        f"{len(panel['runs'])} runs, then cached in scores.json), {second['wall']:.0f} s the "
        f"second; `plot --k-panel` (scores cached: loading the runs, top words, RBO, the "
        f"reference windows, {sum(len(s['pairs']) for s in panel['stability'])} alignments, "
        f"the figure) {plotted['wall']:.0f} s. Screenshot: `{h.rel(shot)}` "
        f"({size / 1024:.0f} KiB).",
    ]
    out = h.write_results(h.results_path(NAME, args.record), "\n".join(lines))
    h.log(f"wrote {h.rel(out)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", default="10,20,50,100,200")
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--sweeps", type=int, default=500)
    parser.add_argument("--train-only", action="store_true")
    parser.add_argument("--record", action="store_true",
                        help="write benchmarks/results/kpanel.md and the docs screenshot")
    args = parser.parse_args()
    h.ensure_20news_bydate()
    started = time.time()
    sweep, commands = train_sweep(args.topics, args.seeds, args.sweeps)
    train_wall = time.time() - started
    if args.train_only:
        return
    report_and_results(sweep, commands, args, train_wall)


if __name__ == "__main__":
    sys.exit(main())
