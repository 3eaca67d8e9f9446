"""Large K: how soon topictk's default config reaches tomotopy's held-out perplexity, one thread.

For every corpus and K, side by side in one run:

- tomotopy ``LDAModel`` trains ``--tomotopy-sweeps`` sweeps (60) at one thread; its counts are
  scored by topictk's evaluator (``topictk.score_topic_word``) with the fixed-point fold-in.
  That perplexity is the target, and its training seconds the reference time.
- topictk's default config (no sampler, schedule or block key: ``inference.sampler: auto``
  picks WarpLDA from K = 5,000) trains at ``training.threads: 1`` with the same alpha, beta and
  seed, its in-training curve scoring every test document by the same fixed-point fold-in
  every ``--eval-every`` sweeps (``evaluation.curve_docs: null``, so a point of the curve is the
  number ``topictk evaluate`` gives). It stops at the first evaluation at or below the target
  (a callback of ``topictk.train``), or after ``--max-sweeps``.
- the default before ``auto`` (``inference.sampler: null``, SparseLDA) the same way, for at
  most tomotopy's training time.

The time to quality is the training seconds (evaluation excluded) at that first evaluation;
the ratio is tomotopy's seconds over it. Each corpus's test documents are a few hundred, so
that the fixed-point fold-in at K = 10,000 can score a curve.

    python benchmarks/bench_default_route.py --record
    python benchmarks/bench_default_route.py --corpora uci_kos --topics 5000   # one cell
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import harness as h

NAME = "default_route"
WORK = h.WORK / NAME
ALPHA = 0.1
BETA = 0.01
ESTIMATOR = "fixed-point"
BENCH_MH = Path(__file__).resolve().with_name("bench_mh.py")


class Reached(Exception):
    """Raised by the training callback at the first evaluation at or below the target."""


# --------------------------------------------------------------------------- workers
def worker_score(spec: dict) -> None:
    """Point perplexity of tomotopy's counts, by the fixed-point fold-in."""
    import numpy as np

    import topictk

    store = topictk.open_store(spec["store"])
    counts = np.load(spec["model"])
    phi = ((counts["nkw"] + BETA) / (counts["nk"] + store.n_words * BETA)).T
    result = topictk.score_topic_word(store, phi, ALPHA, fold_in=ESTIMATOR, threads=2)
    Path(spec["out"]).write_text(json.dumps(result))


def worker_train(spec: dict) -> None:
    """``topictk.train`` of the config, stopped at the first evaluation at or below the
    target; the curve (sweep, training seconds, perplexity) written to ``spec["out"]``."""
    import topictk

    target = spec["target"]

    def stop_when_reached(record: dict) -> None:
        value = record.get("perplexity_point")
        if value is not None and target is not None and value <= target:
            raise Reached()

    try:
        topictk.train(spec["config"], force=True, progress=False, callback=stop_when_reached)
    except Reached:
        pass
    curve = [(m["step"], m["train_seconds"], m["perplexity_point"])
             for m in h.read_metrics(Path(spec["config"]["output"]))
             if m.get("perplexity_point") is not None]
    Path(spec["out"]).write_text(json.dumps(curve))


# --------------------------------------------------------------------------- orchestration
def config(store: Path, K: int, out: Path, a, *, sampler_key: bool,
           seconds: float | None) -> dict:
    """The default config at K topics, one thread, scored by the fixed-point fold-in on every
    test document; ``sampler_key``: with ``inference.sampler: null`` (the earlier default)."""
    inference = {"algorithm": "gibbs", "iterations": a.max_sweeps}
    if sampler_key:
        inference["sampler"] = None
    training = {"seed": a.seed, "threads": 1, "eval_every": a.eval_every,
                "checkpoint_every": 0}
    if seconds is not None:
        training["time_limit"] = seconds
    return {"corpus": str(store), "output": str(out),
            "model": {"topics": K, "alpha": ALPHA, "beta": BETA},
            "inference": inference, "training": training,
            "evaluation": {"fold_in": ESTIMATOR, "curve_docs": None}}


def run_curve(store: Path, K: int, name: str, a, target: float | None, *,
              sampler_key: bool = False, seconds: float | None = None) -> dict:
    base = WORK / name / f"K{K}"
    base.mkdir(parents=True, exist_ok=True)
    stem = "before" if sampler_key else "default"
    spec = {"config": config(store, K, base / stem, a, sampler_key=sampler_key,
                             seconds=seconds),
            "target": target, "out": str(base / f"{stem}-curve.json")}
    h.wait_for_quiet(1, a.quiet_margin, a.max_wait)
    res = h.run_measured([sys.executable, str(Path(__file__).resolve()), "_train",
                          json.dumps(spec)], base / f"{stem}.log")
    if res["rc"] != 0:
        raise SystemExit(f"topictk train failed:\n{h.tail(base / f'{stem}.log')}")
    curve = json.loads(Path(spec["out"]).read_text())
    reached = next(((s, t, p) for s, t, p in curve if target is not None and p <= target), None)
    last = h.read_metrics(base / stem)[-1]      # a stopped run has a checkpoint, no model
    return {"curve": curve, "reached": reached, "sweeps": last["step"],
            "train_seconds": last["train_seconds"], "foreign": res["foreign"]}


def run_tomotopy(store: Path, K: int, name: str, a) -> dict:
    base = WORK / name / f"K{K}"
    base.mkdir(parents=True, exist_ok=True)
    spec = {"store": str(store), "K": K, "sweeps": a.tomotopy_sweeps, "seed": a.seed,
            "out": str(base / "tomotopy.npz"), "info": str(base / "tomotopy.json")}
    h.wait_for_quiet(1, a.quiet_margin, a.max_wait)
    res = h.run_measured([sys.executable, str(BENCH_MH), "_tomotopy", json.dumps(spec)],
                         base / "tomotopy.log")
    if res["rc"] != 0:
        raise SystemExit(f"tomotopy failed:\n{h.tail(base / 'tomotopy.log')}")
    info = json.loads((base / "tomotopy.json").read_text())
    score = {"store": str(store), "model": spec["out"], "out": str(base / "tomotopy-score.json")}
    scored = h.run_measured([sys.executable, str(Path(__file__).resolve()), "_score",
                             json.dumps(score)], base / "tomotopy-score.log")
    if scored["rc"] != 0:
        raise SystemExit(f"scoring tomotopy failed:\n{h.tail(base / 'tomotopy-score.log')}")
    result = json.loads((base / "tomotopy-score.json").read_text())
    return {"sweeps": a.tomotopy_sweeps, "train_seconds": info["train_seconds"],
            "perplexity": result["perplexity"], "estimator": result.get("estimator"),
            "version": info["version"], "isa": info["isa"], "foreign": res["foreign"]}


def run_cell(store: Path, K: int, name: str, a) -> dict:
    h.log(f"{name} K={K} tomotopy")
    tomotopy = run_tomotopy(store, K, name, a)
    target = tomotopy["perplexity"]
    h.log(f"{name} K={K} default (target {target:.1f})")
    row = {"tomotopy": tomotopy, "default": run_curve(store, K, name, a, target)}
    if not a.skip_before:
        h.log(f"{name} K={K} before")
        row["before"] = run_curve(store, K, name, a, target, sampler_key=True,
                                  seconds=tomotopy["train_seconds"])
    return row


# --------------------------------------------------------------------------- report
def _reach_cells(r: dict, reference: float) -> list[str]:
    if r["reached"] is None:
        last = r["curve"][-1] if r["curve"] else None
        where = "" if last is None else f" (last: sweep {last[0]}, {last[2]:,.1f})"
        return [f"not within {r['sweeps']} sweeps, {r['train_seconds']:.1f} s{where}", "–"]
    sweep, seconds, ppl = r["reached"]
    return [f"sweep {sweep}, {seconds:.1f} s ({ppl:,.1f})", f"{reference / seconds:.1f}×"]


def report(done: dict, a, began: str) -> str:
    lines = ["# Time to quality at large K: topictk's default config against tomotopy", "",
             f"Generated by `benchmarks/bench_default_route.py`; command: `{h.command_line()}`",
             "", f"- Date: {began:%Y-%m-%d %H:%M} UTC to {h.now_utc():%H:%M} UTC",
             *h.machine_info("tomotopy"),
             f"- alpha = {ALPHA}, beta = {BETA}, seed {a.seed}, one thread everywhere "
             f"(`training.threads: 1`; tomotopy `workers=1`).",
             f"- Estimator on both sides: `{ESTIMATOR}` fold-in (docs/evaluation.md), every "
             f"test document of the store, point estimate of the topics; tomotopy's counts "
             f"scored by `topictk.score_topic_word(..., fold_in=\"{ESTIMATOR}\")`, topictk's "
             f"runs by their in-training curve with `evaluation.curve_docs: null` (the "
             f"number `topictk evaluate` gives).",
             f"- topictk evaluates every {a.eval_every} sweeps and stops at the first "
             f"evaluation at or below tomotopy's perplexity; the time is training seconds at "
             f"that evaluation (evaluation excluded). `before` is the default before "
             f"`inference.sampler: auto` (SparseLDA), given at most tomotopy's time.", ""]
    for name, part in done.items():
        f = part["facts"]
        lines += [f"## {name}", "", f"`{part['command']}`: {f['D']:,} training documents, "
                  f"{f['N']:,} training tokens, V = {f['V']:,}, {f['test_docs']:,} test "
                  f"documents", ""]
        rows = []
        for K, row in part["rows"].items():
            tp = row["tomotopy"]
            cells = [f"{int(K):,}", f"{tp['sweeps']} sweeps, {tp['train_seconds']:.1f} s",
                     f"{tp['perplexity']:,.1f}"]
            cells += _reach_cells(row["default"], tp["train_seconds"])
            if "before" in row:
                cells += _reach_cells(row["before"], tp["train_seconds"])
            rows.append(cells)
        header = ["K", "tomotopy", "tomotopy perplexity (target)",
                  "default (auto = warp): reached at", "sooner than tomotopy"]
        if any("before" in r for r in part["rows"].values()):
            header += ["before (SparseLDA): reached at", "sooner than tomotopy"]
        lines += h.table(header, rows, "r" * len(header)) + [""]
        for K, row in part["rows"].items():
            for key in ("default", "before"):
                if key in row:
                    curve = ", ".join(f"({s}, {t:.1f}, {p:,.0f})" for s, t, p in row[key]["curve"])
                    lines.append(f"- K = {int(K):,}, {key} (sweep, training s, perplexity): "
                                 f"{curve}")
        lines.append("")
    return "\n".join(lines) + "\n"


def draw_curves(done: dict, path: Path) -> Path:
    """Held-out perplexity (fixed-point fold-in, every test document) against training seconds,
    one panel per corpus and K: the default's and the earlier default's curves, tomotopy's
    60-sweep model as a point at its training time and its perplexity as a dotted line."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(done)
    topics = sorted({int(K) for part in done.values() for K in part["rows"]})
    fig, axes = plt.subplots(len(names), len(topics), figsize=(4.4 * len(topics),
                                                                3.3 * len(names)),
                             squeeze=False, layout="constrained")
    for i, name in enumerate(names):
        rows = {int(K): row for K, row in done[name]["rows"].items()}
        for j, K in enumerate(topics):
            ax = axes[i][j]
            row = rows.get(K)
            if row is None:
                ax.set_visible(False)
                continue
            for key, text in (("default", "default (auto: warp)"),
                              ("before", "before (SparseLDA)")):
                curve = row.get(key, {}).get("curve")
                if curve:
                    ax.plot([c[1] for c in curve], [c[2] for c in curve], marker=".",
                            label=text)
            tp = row["tomotopy"]
            ax.axhline(tp["perplexity"], color="grey", linestyle=":", linewidth=1)
            ax.plot([tp["train_seconds"]], [tp["perplexity"]], marker="s", color="black",
                    linestyle="none", label=f"tomotopy, {tp['sweeps']} sweeps")
            ax.set_xscale("log")
            ax.set_title(f"{name}, K = {K:,}", fontsize=9)
            ax.set_xlabel("training seconds, one thread (log)")
            ax.set_ylabel("held-out perplexity (fixed-point)")
            ax.legend(fontsize=7)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main(argv=None) -> None:
    if len(sys.argv) > 2 and sys.argv[1] in ("_score", "_train"):
        spec = json.loads(sys.argv[2])
        (worker_score if sys.argv[1] == "_score" else worker_train)(spec)
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpora", nargs="+",
                        default=["uci_kos", "20news_docs", "nips12_docs"])
    parser.add_argument("--topics", type=int, nargs="+", default=[5000, 10000])
    parser.add_argument("--tomotopy-sweeps", type=int, default=60)
    parser.add_argument("--eval-every", type=int, default=20)
    parser.add_argument("--max-sweeps", type=int, default=600)
    parser.add_argument("--skip-before", action="store_true",
                        help="leave out the earlier default (SparseLDA)")
    parser.add_argument("--seed", type=int, default=0)
    h.add_common_options(parser)
    a = parser.parse_args(argv)
    began = h.now_utc()
    done = {}
    for name in a.corpora:
        store = h.ensure_store(name)
        rows = {}
        for K in a.topics:
            rows[K] = run_cell(store, K, name, a)
            (WORK / f"results-{name}.json").write_text(json.dumps(rows, indent=1))
            done[name] = {"facts": h.store_facts(store),
                          "command": h.prepare_command(name, store), "rows": rows}
            # written after every cell: a long run stopped early keeps what it measured
            h.write_results(h.results_path(NAME, a.record), report(done, a, began))
            print(draw_curves(done, h.figure_path(f"{NAME}.png", a.record)))


if __name__ == "__main__":
    main()
