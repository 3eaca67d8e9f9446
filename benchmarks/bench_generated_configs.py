"""Generated configs on 20 Newsgroups: every algorithm's ``topictk config ALGORITHM --corpus
STORE --topics K``, trained as it stands (only ``training.seed`` set), scored by ``topictk
evaluate``, against collapsed Gibbs' generated config at the same K: is each within 10 %?

One store serves every algorithm: the 20 Newsgroups bydate documents (headers, quotes and
signatures removed, ``--min-df 5 --max-df 0.5``, the published train/test split) with the
newsgroup as a categorical covariate, which the DMR algorithms use and the others ignore.
``--quick`` uses a seeded subset (2,000 training and 500 test documents) and K = 10, for a
shared machine; the recorded run is the full one.

    python benchmarks/bench_generated_configs.py --record            # full: every algorithm
    python benchmarks/bench_generated_configs.py --quick              # a few minutes
"""
from __future__ import annotations

import argparse
import hashlib
import json
import statistics
from pathlib import Path

import numpy as np
import yaml

import harness as h

NAME = "generated_configs"
WORK = h.WORK / NAME
BOUND = 1.10
PREPARE = ["--split-field", "split", "--min-df", "5", "--max-df", "0.5", "--meta", "group:cat"]
FULL = {"topics": 20, "train_docs": None, "test_docs": None}
QUICK = {"topics": 10, "train_docs": 2000, "test_docs": 500}
# the lines of a run's log worth a column: the warnings about what a config leaves unused
WATCHED = ("never", "perplexity rose", "larger than the corpus")


def algorithms() -> list[str]:
    """Every algorithm of ``topictk algorithms``, Gibbs first (the reference)."""
    res = h.run_measured([*h.TOPICTK, "algorithms"], WORK / "logs" / "algorithms.log",
                         stdout_path=WORK / "logs" / "algorithms.txt")
    names = [line.split()[0] for line in res["stdout"].splitlines()[1:] if line.strip()]
    return ["gibbs", *[n for n in names if n != "gibbs"]]


def subset(train_docs: int | None, test_docs: int | None, seed: int = 0) -> Path:
    """The 20 Newsgroups JSONL, or a seeded subset of it (store order kept)."""
    if not h.NEWS_JSONL.exists():
        h.ensure_20news_bydate()
    if train_docs is None and test_docs is None:
        return h.NEWS_JSONL
    out = WORK / f"20news-{train_docs}-{test_docs}.jsonl"
    if out.exists():
        return out
    lines = h.NEWS_JSONL.read_text(encoding="utf-8").splitlines()
    rng = np.random.default_rng(seed)
    kept = []
    for split, count in (("train", train_docs), ("test", test_docs)):
        part = [i for i, line in enumerate(lines) if json.loads(line)["split"] == split]
        if count is not None and count < len(part):
            part = [part[i] for i in np.sort(rng.permutation(len(part))[:count])]
        kept += part
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("".join(lines[i] + "\n" for i in sorted(kept)), encoding="utf-8")
    return out


def store(size: dict) -> Path:
    source = subset(size["train_docs"], size["test_docs"])
    out = WORK / "stores" / source.stem
    return h.ensure_store(out.name, [str(source), *PREPARE], out=out)


def generated(algorithm: str, corpus: Path, topics: int) -> tuple[Path, dict]:
    """``topictk config ALGORITHM --corpus STORE --topics K --out FILE``: the file, its data."""
    path = WORK / "configs" / f"{algorithm}-k{topics}-{corpus.name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    res = h.run_measured([*h.TOPICTK, "config", algorithm, "--corpus", str(corpus),
                          "--topics", str(topics), "--out", str(path), "--force"],
                         WORK / "logs" / f"config-{path.stem}.log")
    if res["rc"] != 0:
        raise SystemExit(f"topictk config {algorithm} failed:\n"
                         f"{h.tail(WORK / 'logs' / f'config-{path.stem}.log')}")
    return path, yaml.safe_load(path.read_text(encoding="utf-8"))


def run_one(algorithm: str, corpus: Path, topics: int, seed: int) -> dict:
    """Train the generated config with ``training.seed`` (reused when its model is there) and
    score it: perplexity, wall seconds of training, the watched log lines."""
    config, data = generated(algorithm, corpus, topics)
    # the run is reused only for the same generated text (a changed generator trains anew)
    digest = hashlib.sha256(config.read_bytes()).hexdigest()[:8]
    run_dir = WORK / "runs" / f"{config.stem}-{digest}-s{seed}"
    logfile = WORK / "logs" / f"train-{run_dir.name}.log"
    wall = None
    if not (run_dir / "model.npz").exists():
        h.log(f"train {run_dir.name}")
        res = h.run_measured([*h.TOPICTK, "train", "--config", str(config), "--out",
                              str(run_dir), "--set", f"training.seed={seed}", "--force"],
                             logfile)
        if res["rc"] != 0:
            raise SystemExit(f"training {run_dir.name} failed:\n{h.tail(logfile)}")
        wall = res["wall"]
    scored, _ = h.evaluate(run_dir, WORK / "logs" / f"evaluate-{run_dir.name}.log")
    if scored is None:
        raise SystemExit(f"evaluate {run_dir.name} failed")
    text = logfile.read_text(encoding="utf-8") if logfile.exists() else ""
    warnings = [line for line in text.splitlines() if any(w in line for w in WATCHED)]
    return {"perplexity": float(scored["perplexity"]), "wall": wall,
            "iterations": data["inference"]["iterations"], "warnings": warnings}


def short_warning(line: str) -> str:
    """A watched log line from its watched words on (the run's path left out), cut short."""
    at = min(line.find(w) for w in WATCHED if w in line)
    return line[max(0, line.rfind(": ", 0, at) + 2):][:90]


def report(rows: list[dict], size: dict, corpus: Path, seeds: list[int], args) -> str:
    facts = h.store_facts(corpus)
    gibbs = next(r for r in rows if r["algorithm"] == "gibbs")["perplexity"]
    lines = [f"# Generated configs on 20 Newsgroups{' (quick)' if args.quick else ''}", "",
             f"Command: `{h.command_line()}`", "", *h.machine_info(), "",
             f"Store: {facts['D']:,} training documents, {facts['test_docs']:,} test "
             f"documents, {facts['V']:,} words, {facts['N']:,} training tokens "
             f"(`topictk prepare JSONL {' '.join(PREPARE)}`"
             f"{', a seeded subset' if size['train_docs'] else ''}). K = {size['topics']}; "
             f"every config as `topictk config ALGORITHM --corpus STORE --topics "
             f"{size['topics']}` writes it, trained with `--set training.seed=S` only "
             f"(seeds {', '.join(map(str, seeds))}; the mean is shown) and scored by "
             f"`topictk evaluate`. Bound: {BOUND - 1:.0%} above Gibbs.", ""]
    table = []
    for r in rows:
        ratio = r["perplexity"] / gibbs
        table.append([r["algorithm"], r["iterations"], h.fmt(r["perplexity"]),
                      f"{ratio:.3f}", "yes" if ratio <= BOUND else "**no**",
                      h.fmt(r["wall"], ".0f"), "; ".join(sorted(set(r["warnings"])))[:160]
                      or "–"])
    lines += h.table(["algorithm", "iterations", "perplexity", "vs Gibbs", "within 10 %",
                      "train s", "warnings"], table, "lrrrlrl")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    h.add_common_options(parser)
    parser.add_argument("--quick", action="store_true",
                        help="2,000 training and 500 test documents, K = 10")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1], metavar="S",
                        help="training seeds of every algorithm (the mean is reported)")
    parser.add_argument("--algorithms", nargs="+", metavar="NAME",
                        help="only these (Gibbs is always trained: it is the reference)")
    args = parser.parse_args()
    size = QUICK if args.quick else FULL
    corpus = store(size)
    names = algorithms()
    if args.algorithms:
        names = ["gibbs", *[n for n in names if n in args.algorithms and n != "gibbs"]]
    rows = []
    for algorithm in names:
        runs = [run_one(algorithm, corpus, size["topics"], seed) for seed in args.seeds]
        walls = [r["wall"] for r in runs if r["wall"] is not None]
        rows.append({"algorithm": algorithm, "iterations": runs[0]["iterations"],
                     "perplexity": statistics.mean(r["perplexity"] for r in runs),
                     "wall": statistics.mean(walls) if walls else None,
                     "warnings": [short_warning(w) for r in runs for w in r["warnings"]]})
        h.log(f"{algorithm}: {rows[-1]['perplexity']:.1f}")
    h.write_results(h.results_path(NAME, args.record),
                    report(rows, size, corpus, args.seeds, args))


if __name__ == "__main__":
    main()
