#!/usr/bin/env python3
"""Adding documents to a trained model (``topictk train --continue RUN --add STORE``) against
training from scratch, on 20 Newsgroups.

The 20 Newsgroups bydate documents (``bench_coherence.py``'s JSONL, made here when missing)
are split by a seeded draw: 80 % of the training documents with the whole test split make the
base store, the other 20 % the added store (both prepared with the same options as the bydate
store: ``--min-df 5 --max-df 0.5``). Then, collapsed Gibbs (SparseLDA, one thread, seed 1):

* base: N sweeps on the base store;
* continued: ``train --continue base --add added --set inference.iterations=M`` for every
  candidate M (the union store it writes holds the base's documents and the added ones, and
  the base's held-out tokens);
* from scratch: N sweeps on that union store (the same vocabulary and held-out tokens).

Every run is scored by ``topictk evaluate`` (document completion on every test document, the
final state: the configs save no posterior sample, so all runs are scored the same way). The
time compared is the training seconds of the M continued sweeps (the run's clock) against the
N sweeps from scratch; the whole ``train --continue`` command (union store, fold-in, sweeps,
evaluations) is timed too. Target: within 2 % of the from-scratch perplexity in at most half
its time; the table marks the smallest M that meets it.

Usage::

    python benchmarks/bench_add_docs.py --quick          # small: 3,000 + 750 documents, K = 20
    python benchmarks/bench_add_docs.py --record         # full size (a quiet machine)
"""
from __future__ import annotations

import argparse
import json
import shlex
from pathlib import Path

import numpy as np

import harness as h

NAME = "add_docs"
WORK = h.WORK / NAME
TARGET_PPL = 1.02
TARGET_TIME = 0.5
PREPARE = ["--min-df", "5", "--max-df", "0.5"]
FULL = {"topics": 50, "sweeps": 200, "more": [20, 40, 60, 100], "train_docs": None,
        "test_docs": None}
QUICK = {"topics": 20, "sweeps": 100, "more": [5, 10, 20, 30, 50], "train_docs": 3000,
         "test_docs": 750}


def split_documents(folder: Path, fraction: float, seed: int, train_docs: int | None,
                    test_docs: int | None) -> tuple[Path, Path, dict]:
    """base.jsonl (the training documents not drawn, and the test documents) and added.jsonl
    (a share ``fraction`` of the training documents, drawn with ``seed``); with ``train_docs``
    / ``test_docs``, a seeded subset of that many documents first. Store order is kept."""
    source = h.NEWS_JSONL
    if not source.exists():
        h.ensure_20news_bydate()
    records = [json.loads(line) for line in source.read_text(encoding="utf-8").splitlines()]
    rng = np.random.default_rng(seed)
    train = [r for r in records if r["split"] == "train"]
    test = [r for r in records if r["split"] == "test"]
    if train_docs is not None:
        train = [train[i] for i in np.sort(rng.permutation(len(train))[:train_docs])]
    if test_docs is not None:
        test = [test[i] for i in np.sort(rng.permutation(len(test))[:test_docs])]
    drawn = set(rng.permutation(len(train))[:round(fraction * len(train))].tolist())
    base = [r for i, r in enumerate(train) if i not in drawn] + test
    added = [r for i, r in enumerate(train) if i in drawn]
    folder.mkdir(parents=True, exist_ok=True)
    paths = folder / "base.jsonl", folder / "added.jsonl"
    for path, part in zip(paths, (base, added)):
        path.write_text("".join(json.dumps(r) + "\n" for r in part), encoding="utf-8")
    return *paths, {"base_train": len(train) - len(drawn), "added": len(drawn),
                    "test": len(test)}


def prepare(jsonl: Path, out: Path, *extra: str) -> Path:
    if (out / "manifest.json").exists():
        return out
    logfile = WORK / "logs" / f"prepare-{out.name}.log"
    res = h.run_measured([*h.TOPICTK, "prepare", str(jsonl), *PREPARE, *extra, "--out",
                          str(out), "--force"], logfile)
    if res["rc"] != 0:
        raise SystemExit(f"prepare {out.name} failed:\n{h.tail(logfile)}")
    return out


def run_config(store: Path, out: Path, topics: int, sweeps: int) -> dict:
    """Collapsed Gibbs, no saved sample (the final state is scored), one curve point at the
    end (its clock is the run's training seconds)."""
    return {"corpus": str(store), "output": str(out),
            "model": {"topics": topics, "alpha": 0.1, "beta": 0.01},
            "inference": {"algorithm": "gibbs", "iterations": sweeps,
                          "burn_in": sweeps - 1, "thin": sweeps},
            "training": {"seed": 1, "threads": 1, "eval_every": sweeps,
                         "checkpoint_every": sweeps, "keep_checkpoints": 1},
            "evaluation": {"curve_docs": 500}}


def train_seconds(run_dir: Path) -> float:
    return float(h.read_metrics(run_dir)[-1]["train_seconds"])


def perplexity(run_dir: Path) -> float:
    scored, res = h.evaluate(run_dir, WORK / "logs" / f"evaluate-{run_dir.name}.log")
    if scored is None:
        raise SystemExit(f"evaluate {run_dir.name} failed:\n"
                         f"{h.tail(WORK / 'logs' / f'evaluate-{run_dir.name}.log')}")
    return float(scored["perplexity"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="a small subset (3,000 training and 750 test documents, K = 20, "
                             "N = 100, M in 5, 10, 20, 30, 50)")
    parser.add_argument("--topics", type=int, help="K (full: 50)")
    parser.add_argument("--sweeps", type=int, help="N, the base and from-scratch sweeps")
    parser.add_argument("--more", help="the candidate M, comma-separated")
    parser.add_argument("--fraction", type=float, default=0.2,
                        help="share of the training documents added (0.2)")
    h.add_common_options(parser)
    args = parser.parse_args()
    setting = dict(QUICK if args.quick else FULL)
    for key in ("topics", "sweeps"):
        if getattr(args, key) is not None:
            setting[key] = getattr(args, key)
    if args.more:
        setting["more"] = [int(m) for m in args.more.split(",")]
    K, N = setting["topics"], setting["sweeps"]
    folder = WORK / ("quick" if args.quick else "full")
    base_jsonl, added_jsonl, counts = split_documents(folder, args.fraction, 0,
                                                      setting["train_docs"],
                                                      setting["test_docs"])
    base_store = prepare(base_jsonl, folder / "base-store", "--split-field", "split")
    added_store = prepare(added_jsonl, folder / "added-store", "--test-docs", "0")
    base = h.train_once(run_config(base_store, folder / f"base-k{K}-n{N}", K, N), folder)
    rows, union = [], None
    for more in setting["more"]:
        out = folder / f"continued-k{K}-n{N}-m{more}"
        h.wait_for_quiet(1, args.quiet_margin, args.max_wait)
        cmd = [*h.TOPICTK, "train", "--continue", str(base), "--add", str(added_store),
               "--out", str(out), "--set", f"inference.iterations={more}", "--force", "-q"]
        res = h.run_measured(cmd, WORK / "logs" / f"continue-m{more}.log")
        if res["rc"] != 0:
            raise SystemExit(f"continue failed:\n{h.tail(WORK / 'logs' / f'continue-m{more}.log')}")
        union = union or out / "corpus"
        rows.append({"M": more, "wall": res["wall"], "foreign": res["foreign"],
                     "seconds": train_seconds(out) - train_seconds(base),
                     "ppl": perplexity(out)})
    h.wait_for_quiet(1, args.quiet_margin, args.max_wait)
    scratch_config = run_config(union, folder / f"scratch-k{K}-n{N}", K, N)
    scratch_res = h.train(scratch_config, folder / "scratch.yaml",
                          WORK / "logs" / "scratch.log")
    if scratch_res["rc"] != 0:
        raise SystemExit(f"from-scratch training failed:\n{h.tail(WORK / 'logs' / 'scratch.log')}")
    scratch = Path(scratch_config["output"])
    scratch_ppl, scratch_seconds = perplexity(scratch), train_seconds(scratch)
    base_ppl = perplexity(base)
    best = next((r["M"] for r in rows if r["ppl"] <= TARGET_PPL * scratch_ppl
                 and r["seconds"] <= TARGET_TIME * scratch_seconds), None)
    facts = json.loads((union / "manifest.json").read_text())["union"]
    table = h.table(
        ["run", "sweeps", "held-out perplexity", "vs scratch", "train s", "vs scratch",
         "command wall s", "meets target"],
        [["base (80 %)", N, h.fmt(base_ppl, ".1f"), h.fmt(base_ppl / scratch_ppl, ".3f"),
          h.fmt(train_seconds(base), ".1f"), "", "", ""],
         *[[f"continued, M = {r['M']}", f"{N} + {r['M']}", h.fmt(r["ppl"], ".1f"),
            h.fmt(r["ppl"] / scratch_ppl, ".3f"), h.fmt(r["seconds"], ".1f"),
            h.fmt(r["seconds"] / scratch_seconds, ".2f"), h.fmt(r["wall"], ".1f"),
            "yes" if r["ppl"] <= TARGET_PPL * scratch_ppl
            and r["seconds"] <= TARGET_TIME * scratch_seconds else "no"] for r in rows],
         ["from scratch (union)", N, h.fmt(scratch_ppl, ".1f"), "1.000",
          h.fmt(scratch_seconds, ".1f"), "1.00", h.fmt(scratch_res["wall"], ".1f"), ""]])
    continue_shown = shlex.join(["topictk", "train", "--continue", h.rel(base), "--add",
                                 h.rel(added_store), "--out", h.rel(folder / "continued-m<M>"),
                                 "--set", "inference.iterations=<M>"])
    text = "\n".join([
        "# Adding documents to a trained model (20 Newsgroups)",
        "",
        f"Recorded {h.now_utc():%Y-%m-%d %H:%M} UTC with `{h.command_line()}`"
        + (" (the small size: not the full-size timing)." if args.quick else "."),
        "",
        *h.machine_info(),
        "",
        f"Documents: {counts['base_train']:,} training documents in the base store with its "
        f"{counts['test']:,} test documents, {counts['added']:,} added "
        f"({facts['added_tokens']:,} tokens, {facts['new_words']:,} words new to the base's "
        f"vocabulary with {facts['new_word_tokens']:,} tokens). Collapsed Gibbs (SparseLDA), "
        f"K = {K}, alpha 0.1, beta 0.01, one thread, seed 1; held-out perplexity by `topictk "
        f"evaluate` (the final state, every test document).",
        "",
        "Commands:",
        "",
        "```",
        *h.news_commands(),
        f"# then {h.rel(base_jsonl)} / {h.rel(added_jsonl)}: the seeded 80/20 split of the "
        f"training documents (this script)",
        f"topictk prepare {h.rel(base_jsonl)} {' '.join(PREPARE)} --split-field split --out "
        f"{h.rel(base_store)}",
        f"topictk prepare {h.rel(added_jsonl)} {' '.join(PREPARE)} --test-docs 0 --out "
        f"{h.rel(added_store)}",
        continue_shown,
        "```",
        "",
        *table,
        "",
        (f"Smallest M that meets the target (perplexity within {TARGET_PPL - 1:.0%} of the "
         f"from-scratch run's in at most {TARGET_TIME:.0%} of its training seconds): "
         f"**M = {best}**." if best is not None else
         "No candidate M meets the target (perplexity within 2 % of the from-scratch run's in "
         "at most half its training seconds)."),
        "",
        "`train s` is the training clock of the sweeps each run made (the continued runs: "
        "their M sweeps over the union); `command wall s` is the whole `train --continue` "
        "command: the union store written and verified, the fold-in of the added documents, "
        "the sweeps and the end-of-run evaluation.",
    ])
    h.write_results(h.results_path(NAME, args.record), text)


if __name__ == "__main__":
    main()
