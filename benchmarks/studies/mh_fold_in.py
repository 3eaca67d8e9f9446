#!/usr/bin/env python3
"""``topictk evaluate`` of a run trained with ``inference.sampler: mh`` at large K: the MH
fold-in (docs/algorithms.md §2.7) against the dense Gibbs fold-in of the same topics.

One run is trained on KOS with the MH sampler (the store of ``bench_mh.py``), its one saved
sample being its final state. Then, side by side in this process, ``repeats`` times in turn:

* ``Run.evaluate()`` -- what ``topictk evaluate`` does for the run: the MH fold-in of every test
  document with the sample's counts (O(mh_steps) per token), the held-out perplexity, and the
  topic coherence and diversity (of the fewest top words, so that they cost little);
* ``score_topic_word(store, phi-hat, alpha)`` -- the same estimator with the dense Gibbs
  fold-in (the sparse-bucket draw of §11.2, O(K) per token when the prior's bucket is drawn)
  of the same phi-hat, the same sweeps and burn-in;
* ``load_run(...).topic_word()`` -- loading the run, to take it out of ``Run.evaluate()``.

Both score the same held-out tokens, so their perplexities differ by the Monte Carlo error of
the two fold-ins only. Results go to ``benchmarks/results/mh_fold_in.md`` (``--record``) or
``benchmarks/work/results/``.

Usage (from the repository root)::

    python benchmarks/studies/mh_fold_in.py --record --topics 5000 10000   # 40 sweeps each
    python benchmarks/studies/mh_fold_in.py --topics 1000 --sweeps 10      # quick check
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # benchmarks/: the harness

import harness as h  # noqa: E402

NAME = "mh_fold_in"
WORK = h.WORK / "mh_fold_in"
ALPHA = 0.1
BETA = 0.01
FOLD_IN_SWEEPS = 50      # the evaluation section's defaults, what `topictk evaluate` runs
FOLD_IN_BURN_IN = 25
# the fewest top words coherence allows, so that evaluate's time is its fold-in's and the
# loading (at K = 10,000, ten top words cost 6 s on the machine of the recorded results)
COHERENCE_TOP = 2


def train_run(store: Path, K: int, sweeps: int, seed: int) -> Path:
    """The mh run of K topics (trained once; reused when it is there)."""
    out = WORK / "runs" / f"kos-K{K}-mh-{sweeps}-s{seed}-c{COHERENCE_TOP}"
    if (out / "model.npz").exists():
        return out
    config = {
        "corpus": str(store), "output": str(out),
        "model": {"topics": K, "alpha": ALPHA, "beta": BETA},
        "inference": {"algorithm": "gibbs", "iterations": sweeps, "burn_in": sweeps - 1,
                      "thin": 1, "sampler": "mh"},
        "training": {"seed": seed, "threads": 1, "eval_every": sweeps,
                     "checkpoint_every": sweeps},
        "evaluation": {"fold_in_sweeps": FOLD_IN_SWEEPS, "fold_in_burn_in": FOLD_IN_BURN_IN,
                       "coherence_top": COHERENCE_TOP, "diversity_top": 1},
    }
    h.log(f"train mh K = {K}, {sweeps} sweeps")
    res = h.train(config, WORK / "configs" / f"{out.name}.yaml",
                  WORK / "logs" / f"train-{out.name}.log")
    if res["rc"] != 0:
        raise SystemExit(f"training failed:\n{h.tail(WORK / 'logs' / f'train-{out.name}.log')}")
    return out


def timed(fn) -> tuple[float, dict]:
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def measure(run_dir: Path, store: Path, repeats: int) -> dict:
    """The three timings, taking turns ``repeats`` times."""
    import topictk

    run = topictk.load_run(run_dir, threads=1)
    phi = run.topic_word()
    calls = {
        "mh": lambda: topictk.load_run(run_dir, threads=1).evaluate(),
        "dense": lambda: topictk.score_topic_word(
            store, phi, ALPHA, sweeps=FOLD_IN_SWEEPS, burn_in=FOLD_IN_BURN_IN, seed=0,
            threads=1),
        "load": lambda: {"K": topictk.load_run(run_dir, threads=1).topic_word().shape[0]},
    }
    rows = {name: [] for name in calls}
    results = {}
    for r in range(repeats):
        h.log(f"{run_dir.name}: repeat {r + 1}/{repeats}")
        for name, call in calls.items():
            seconds, results[name] = timed(call)
            rows[name].append(seconds)
    return {"seconds": rows, "results": results, "step": run.step}


LABELS = {"mh": "`Run.evaluate()`: load + MH fold-in + scoring",
          "dense": "`score_topic_word(...)`: dense fold-in + scoring",
          "load": "`load_run(...).topic_word()`: loading the run"}


def measure_fold_ins(run_dir: Path, repeats: int) -> dict:
    """The two fold-ins alone, through topictk's internals (a study may use them): the run's
    own fold-in of the test documents (MH, with its tables built from the sample's counts)
    and the Gibbs fold-in of phi-hat of the same counts, each with the plan of
    ``topictk evaluate`` (fresh streams every time)."""
    from topictk.evaluation.run import LoadedRun
    from topictk.inference.base import EvaluationSet, gibbs_fold_in
    from topictk.inference.sampled import evaluation_plan
    from topictk.state.counts import phi_hat

    run = LoadedRun(run_dir, None, 1)
    driver, state = run.driver, run.state
    sample = (run.samples() or [driver.sample(state)])[0]
    test = EvaluationSet.from_store(run.store)
    alpha = driver.sample_prior(state, sample, "test")
    phi = phi_hat(sample["nkw"], sample["nk"], state.beta)
    calls = {
        "mh": lambda: driver.fold_in(state, test.observed, evaluation_plan(driver, test, 0),
                                     prior=alpha, sample=sample),
        "dense": lambda: gibbs_fold_in(phi, alpha, test.observed.doc_ptr, test.observed.words,
                                       evaluation_plan(driver, test, 0)),
    }
    rows = {name: [] for name in calls}
    for r in range(repeats):
        h.log(f"{run_dir.name}: fold-ins alone, repeat {r + 1}/{repeats}")
        for name, call in calls.items():
            seconds, _ = timed(call)
            rows[name].append(seconds)
    return rows


def rows_of(K: int, data: dict) -> tuple[list, list]:
    """The table rows of one K, and its summary row."""
    sec, res = data["seconds"], data["results"]
    fast = {name: min(values) for name, values in sec.items()}
    rows = [[f"{K:,}", LABELS[name], " / ".join(f"{s:.2f}" for s in sec[name]),
             f"{fast[name]:.2f}", h.fmt(res[name].get("perplexity"), ".1f")]
            for name in LABELS]
    mh_fold = fast["mh"] - fast["load"]
    ppl_mh, ppl_dense = res["mh"]["perplexity"], res["dense"]["perplexity"]
    alone = data["alone"]
    rows += [[f"{K:,}", f"{name} fold-in alone (internals)", " / ".join(f"{s:.2f}" for s in
                                                                     alone[name]),
              f"{min(alone[name]):.2f}", "–"] for name in ("mh", "dense")]
    summary = [f"{K:,}", f"{min(alone['mh']):.2f}", f"{min(alone['dense']):.2f}",
               f"{min(alone['dense']) / min(alone['mh']):.1f}x", f"{mh_fold:.2f}",
               f"{(fast['dense'] + fast['load']) / fast['mh']:.1f}x",
               f"{ppl_mh:.1f}", f"{ppl_dense:.1f}", f"{abs(ppl_mh / ppl_dense - 1):.2%}"]
    return rows, summary


def report(store: Path, topics: list[int], sweeps: int, measured: dict, started,
           load: float) -> str:
    facts = h.store_facts(store)
    rows, summaries = [], []
    for K in topics:
        r, summary = rows_of(K, measured[K])
        rows += r
        summaries.append(summary)
    lines = [
        "# `topictk evaluate` of an mh run: MH fold-in against the dense fold-in",
        "",
        f"Generated by `benchmarks/studies/mh_fold_in.py`; command: `{h.command_line()}`.",
        "",
        f"- Date: {started:%Y-%m-%d %H:%M} UTC to {h.now_utc():%H:%M} UTC",
        *h.machine_info(),
        f"- Foreign load at the start (cores other processes kept busy, of 2): {load:.2f}",
        "",
        "## Method",
        "",
        f"- Corpus: `{h.prepare_command('uci_kos', store)}`: {facts['D']:,} training "
        f"documents, {facts['N']:,} training tokens, V = {facts['V']:,}, "
        f"{facts['test_docs']:,} test documents.",
        f"- Runs: `gibbs` with `inference.sampler: mh` (mh_steps 2, mh_rebuild 1), "
        f"alpha = {ALPHA}, beta = {BETA}, {sweeps} sweeps, one thread; the one saved sample "
        f"of each is its final state; `evaluation.coherence_top: {COHERENCE_TOP}` and "
        f"`diversity_top: 1`, so that coherence costs evaluate little.",
        f"- Fold-in: {FOLD_IN_SWEEPS} sweeps, {FOLD_IN_BURN_IN} discarded, one thread, for "
        f"both. The MH fold-in takes its tables from the sample's counts; the dense one draws "
        f"from phi-hat of the same counts (the Gibbs fold-in `topictk evaluate` ran for such "
        f"a run before, the sparse-bucket draw of algorithms.md §11.2).",
        "- The calls of one K take turns in one process; seconds of every repeat, then the "
        "fastest. `Run.evaluate()` is what `topictk evaluate` runs; `evaluate ratio` compares "
        "it with the dense fold-in's `score_topic_word` plus the same loading, and "
        "`evaluate - load` is what evaluate spends after loading (fold-in, scoring, "
        "coherence). The fold-ins alone are timed through topictk's internals: the run's "
        "`fold_in` of the test documents with its sample (MH, tables built included) and "
        "`gibbs_fold_in` with phi-hat of the same counts, both with evaluate's plan.",
        "",
        "## Summary",
        "",
        *h.table(["K", "MH fold-in s", "dense fold-in s", "fold-in ratio",
                  "evaluate - load s", "evaluate ratio", "ppl MH", "ppl dense",
                  "ppl difference"], summaries),
        "",
        "## Timings",
        "",
        *h.table(["K", "call", "seconds (each repeat)", "fastest s", "held-out ppl"], rows,
                 "llrrr"),
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--topics", type=int, nargs="+", default=[5000])
    parser.add_argument("--sweeps", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--record", action="store_true",
                        help="write benchmarks/results/mh_fold_in.md")
    args = parser.parse_args()
    started = h.now_utc()
    store = h.ensure_store("uci_kos")
    runs = {K: train_run(store, K, args.sweeps, args.seed) for K in args.topics}
    load = h.foreign_load()
    measured = {K: {**measure(runs[K], store, args.repeats),
                    "alone": measure_fold_ins(runs[K], args.repeats)} for K in args.topics}
    h.write_results(h.results_path(NAME, args.record),
                    report(store, args.topics, args.sweeps, measured, started, load))


if __name__ == "__main__":
    main()
