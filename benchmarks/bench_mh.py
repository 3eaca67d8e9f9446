"""Large K: topictk's Metropolis-Hastings samplers (``inference.sampler: mh``, LightLDA-style,
and ``warp``, WarpLDA-style) beside its SparseLDA sampler and tomotopy (LDAModel), one thread.

For every corpus and K the reference sampler (the first of ``--samplers``, SparseLDA) trains
``--reference-sweeps`` sweeps and the other topictk samplers train for the same training time
(``training.time_limit``, evaluation excluded) from the same random start, all logging held-out
perplexity every few sweeps, so perplexity is compared at equal time, not at equal sweeps (the
MH chains mix differently per sweep); the report gives the time at which each reaches the
reference's final perplexity. tomotopy trains a fixed number of sweeps; its counts are scored
by the same evaluator, ``topictk.score_topic_word`` (fold-in of the store's test documents with
the same alpha and settings as the topictk runs' evaluation), so every number is on the same
held-out tokens. Peak memory is the peak RSS of a training-only process (topictk: ``topictk
train`` of a few sweeps without evaluation; tomotopy: the worker's VmHWM read right after
training, before its counts are copied out).

Usage (from the repository root, with ``pip install -e . -r benchmarks/requirements.txt``)::

    python benchmarks/bench_mh.py --record                      # KOS, K = 1,000, 5,000, 10,000
    python benchmarks/bench_mh.py --corpora 20news_gan2015 uci_nips --topics 5000 10000
    python benchmarks/bench_mh.py --record --name mh_memory --corpora kos_x10 --topics 10000 \\
        --memory-only --memory-scored            # peak memory on KOS x 10, also when scoring
    python benchmarks/bench_mh.py --record --redraw mh mh_nips  # the figure from saved results
    python benchmarks/bench_mh.py --topics 1000 --seconds 20    # quick check
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import harness as h

NAME = "mh"
WORK = h.WORK / "mh"
ALPHA = 0.1
BETA = 0.01
ESTIMATOR = "gibbs"      # one estimator of theta for topictk and tomotopy (evaluation.fold_in)
FOLD_IN_SWEEPS = 20
FOLD_IN_BURN_IN = 10
# every run's in-training curve scores the same test documents with the same fold-in (left to
# `auto`, the number of documents would follow each run's evaluation spacing, and curves of
# different documents are not comparable)
CURVE_DOCS = 1000
CURVE_FOLD_IN_SWEEPS = 10


# --------------------------------------------------------------------------- workers
def _vm_hwm() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def worker_tomotopy(spec: dict) -> None:
    """Train tomotopy on the store's training documents; save its counts in store ids."""
    import numpy as np
    import tomotopy as tp

    import topictk

    store = topictk.open_store(spec["store"])
    train = store.train()
    V, K = store.n_words, int(spec["K"])
    doc_ptr, words = np.asarray(train.doc_ptr), np.asarray(train.words)
    vocab = store.vocab
    mdl = tp.LDAModel(tw=tp.TermWeight.ONE, min_cf=0, min_df=0, rm_top=0, k=K, alpha=ALPHA,
                      eta=BETA, seed=int(spec["seed"]))
    mdl.optim_interval = 0
    mdl.burn_in = 0
    for d in range(doc_ptr.size - 1):
        mdl.add_doc([vocab[w] for w in words[doc_ptr[d]:doc_ptr[d + 1]]])
    mdl.train(0, workers=1)
    began = time.perf_counter()
    mdl.train(int(spec["sweeps"]), workers=1)
    seconds = time.perf_counter() - began
    peak = _vm_hwm()
    index = {w: i for i, w in enumerate(vocab)}
    ids = np.array([index[w] for w in mdl.used_vocabs], dtype=np.int64)
    raw = np.array([mdl.get_topic_word_dist(k, normalize=False) for k in range(K)])
    nkw = np.zeros((V, K), dtype=np.int32)
    nkw[ids] = np.rint(raw - float(mdl.eta)).T.astype(np.int32)
    nk = np.asarray(mdl.get_count_by_topics(), dtype=np.int64)
    np.savez(spec["out"], nkw=nkw, nk=nk)
    Path(spec["info"]).write_text(json.dumps({"train_seconds": seconds, "peak": peak,
                                              "version": tp.__version__, "isa": tp.isa}))


def worker_score(spec: dict) -> None:
    """Point perplexity of tomotopy's counts with ``topictk.score_topic_word``."""
    import numpy as np

    import topictk

    store = topictk.open_store(spec["store"])
    counts = np.load(spec["model"])
    phi = ((counts["nkw"] + BETA) / (counts["nk"] + store.n_words * BETA)).T
    result = topictk.score_topic_word(store, phi, ALPHA, sweeps=FOLD_IN_SWEEPS,
                                      burn_in=FOLD_IN_BURN_IN, seed=int(spec["seed"]),
                                      fold_in=ESTIMATOR)
    Path(spec["out"]).write_text(json.dumps(result))


# --------------------------------------------------------------------------- orchestration
def topictk_config(store: Path, K: int, sampler: str, out: Path, *, seconds: float | None,
                   iterations: int, eval_every: int, seed: int) -> dict:
    training = {"seed": seed, "threads": 1, "eval_every": eval_every, "checkpoint_every": 0}
    if seconds is not None:
        training["time_limit"] = seconds
    return {"corpus": str(store), "output": str(out),
            "model": {"topics": K, "alpha": ALPHA, "beta": BETA},
            "inference": {"algorithm": "gibbs", "iterations": iterations, "sampler": sampler,
                          "burn_in": iterations - 1, "thin": 1},
            "training": training,
            "evaluation": {"fold_in": ESTIMATOR,
                           "fold_in_sweeps": FOLD_IN_SWEEPS, "fold_in_burn_in": FOLD_IN_BURN_IN,
                           "curve_docs": CURVE_DOCS,
                           "curve_fold_in_sweeps": CURVE_FOLD_IN_SWEEPS}}


def _base(a, corpus: str, K: int) -> Path:
    """The runs of one cell, under the result's --name: two results measured at once never
    share a run directory."""
    return WORK / a.name / corpus / f"K{K}"


def _train(cfg: dict, base: Path, stem: str) -> dict:
    """``topictk train`` of ``cfg`` as ``base/stem`` (its config and log beside the run);
    the measured process, or the end of the script with the log's tail when it fails."""
    res = h.train(cfg, base / f"{stem}.yaml", base / f"{stem}.log")
    if res["rc"] != 0:
        raise SystemExit(f"topictk train failed:\n{h.tail(base / f'{stem}.log')}")
    return res


def probe_rate(store: Path, K: int, sampler: str, a, name: str) -> float:
    """Training seconds per sweep of ``sampler`` over its first ``--probe-sweeps`` sweeps
    (no evaluation), to space a timed run's evaluations."""
    base = _base(a, name, K)
    cfg = topictk_config(store, K, sampler, base / f"{sampler}-probe", seconds=None,
                         iterations=a.probe_sweeps, eval_every=0, seed=a.seed)
    _train(cfg, base, f"{sampler}-probe")
    import topictk

    run = topictk.load_run(base / f"{sampler}-probe")
    return run.train_seconds / run.step


def run_topictk_curve(store: Path, facts: dict, K: int, sampler: str, a, name: str, *,
                      seconds: float | None, iterations: int) -> dict:
    base = _base(a, name, K)
    every = a.eval_every
    if seconds is not None and a.evaluations:
        # about --evaluations evaluations over the budget, whatever the sampler's speed
        every = max(1, round(seconds / probe_rate(store, K, sampler, a, name) / a.evaluations))
    cfg = topictk_config(store, K, sampler, base / f"{sampler}-curve", seconds=seconds,
                         iterations=iterations, eval_every=every, seed=a.seed)
    h.wait_for_quiet(1, a.quiet_margin, a.max_wait)
    res = _train(cfg, base, f"{sampler}-curve")
    metrics = h.read_metrics(base / f"{sampler}-curve")
    last = metrics[-1]
    scored, _ = h.evaluate(base / f"{sampler}-curve", base / f"{sampler}-evaluate.log")
    return {"curve": [(m["step"], m["train_seconds"], m["perplexity_point"]) for m in metrics],
            "sweeps": last["step"], "train_seconds": last["train_seconds"], "every": every,
            "tokens_per_s": facts["N"] * last["step"] / last["train_seconds"],
            "perplexity": last["perplexity_point"], "foreign": res["foreign"],
            "perplexity_all": None if scored is None else scored["perplexity"]}


def run_topictk_memory(store: Path, K: int, sampler: str, a, name: str) -> int:
    base = _base(a, name, K)
    cfg = topictk_config(store, K, sampler, base / f"{sampler}-memory", seconds=None,
                         iterations=a.memory_sweeps, eval_every=0, seed=a.seed)
    res = _train(cfg, base, f"{sampler}-memory")
    return res["maxrss"]


def run_topictk_memory_scored(store: Path, K: int, sampler: str, a, name: str) -> dict:
    """Peak RSS of a training run that evaluates once, after its last sweep (the curve's
    documents and fold-in), and of ``topictk evaluate`` of it (every test document, coherence),
    with the seconds each evaluation took, and of ``topictk topics`` of it."""
    base = _base(a, name, K)
    run = base / f"{sampler}-memory-scored"
    cfg = topictk_config(store, K, sampler, run, seconds=None, iterations=a.memory_sweeps,
                         eval_every=a.memory_sweeps, seed=a.seed)
    res = _train(cfg, base, f"{sampler}-memory-scored")
    scored, ev = h.evaluate(run, base / f"{sampler}-memory-evaluate.log")
    if scored is None:
        raise SystemExit(f"topictk evaluate failed:\n"
                         f"{h.tail(base / f'{sampler}-memory-evaluate.log')}")
    shown = h.run_measured([*h.TOPICTK, "topics", str(run), "--top", "10"],
                           base / f"{sampler}-memory-topics.log")
    if shown["rc"] != 0:
        raise SystemExit(f"topictk topics failed:\n"
                         f"{h.tail(base / f'{sampler}-memory-topics.log')}")
    return {"peak_scored": res["maxrss"], "peak_evaluate": ev["maxrss"],
            "peak_topics": shown["maxrss"], "topics_seconds": shown["wall"],
            "eval_seconds": h.read_metrics(run)[-1]["eval_seconds"],
            "evaluate_seconds": ev["wall"], "perplexity_all": scored["perplexity"]}


def run_tomotopy(store: Path, facts: dict, K: int, a, name: str) -> dict:
    base = _base(a, name, K)
    base.mkdir(parents=True, exist_ok=True)
    spec = {"store": str(store), "K": K, "sweeps": a.tomotopy_sweeps, "seed": a.seed,
            "out": str(base / "tomotopy.npz"), "info": str(base / "tomotopy.json")}
    h.wait_for_quiet(1, a.quiet_margin, a.max_wait)
    res = h.run_measured([sys.executable, str(Path(__file__).resolve()), "_tomotopy",
                          json.dumps(spec)], base / "tomotopy.log")
    if res["rc"] != 0:
        raise SystemExit(f"tomotopy failed:\n{h.tail(base / 'tomotopy.log')}")
    info = json.loads((base / "tomotopy.json").read_text())
    score = {"store": str(store), "model": spec["out"], "seed": a.seed,
             "out": str(base / "tomotopy-score.json")}
    res2 = h.run_measured([sys.executable, str(Path(__file__).resolve()), "_score",
                           json.dumps(score)], base / "tomotopy-score.log")
    ppl = (json.loads((base / "tomotopy-score.json").read_text())["perplexity"]
           if res2["rc"] == 0 else None)
    return {"sweeps": a.tomotopy_sweeps, "train_seconds": info["train_seconds"],
            "tokens_per_s": facts["N"] * a.tomotopy_sweeps / info["train_seconds"],
            "perplexity": ppl, "peak": info["peak"], "version": info["version"],
            "isa": info["isa"], "foreign": res["foreign"]}


def time_to_reach(curve, target: float) -> float | None:
    """Training seconds at the first evaluation with perplexity <= target."""
    for _, seconds, ppl in curve:
        if ppl <= target:
            return seconds
    return None


def _reach(curve, target: float, reference_seconds: float) -> str:
    t = time_to_reach(curve, target)
    return "not reached" if t is None else f"{t:.1f} s ({t / reference_seconds:.2f})"


def corpus_store(name: str) -> tuple[Path, str]:
    """The store of ``name`` (a registered corpus, or ``kos_x10``: UCI KOS with every
    document written 10 times) and its prepare command as a user would type it."""
    if name != "kos_x10":
        store = h.ensure_store(name)
        return store, h.prepare_command(name, store)
    corpus = h.replicated_kos(10, WORK)
    args = [str(corpus), "--vocab", str(h.data_path("uci_kos", "vocab.kos.txt")),
            "--test-docs", "0.1", "--heldout-fraction", "0.2", "--seed", "0"]
    store = h.ensure_store(name, args)
    shown = [a.replace(str(h.DATA), "../shared/data").replace(str(h.REPO) + "/", "")
             for a in args]
    return store, " ".join(["topictk", "prepare", *shown, "--out", h.rel(store)])


def memory_bound(facts: dict) -> int:
    """The issue's memory allowance: 3 x the store plus the non-zero counts, the non-zero
    n_dk and n_kw bounded by the training tokens each (8 bytes per (topic, count) pair)."""
    return 3 * facts["bytes"] + 2 * 8 * facts["N"]


def results_file(run_name: str, corpus: str) -> Path:
    """Where the raw results of ``--name`` on a corpus are kept (for ``--redraw``)."""
    return WORK / f"results-{run_name}-{corpus}.json"


def run_corpus(name: str, a) -> dict:
    """Every sampler of ``a.samplers`` (and tomotopy) at every K on corpus ``name``: the
    first sampler is the reference; with ``--seconds`` every sampler trains that long,
    otherwise the reference trains ``--reference-sweeps`` sweeps and the others as long as
    it took (equal training time)."""
    store, command = corpus_store(name)
    facts = h.store_facts(store)
    rows: dict = {}
    for K in a.topics:
        row = rows.setdefault(K, {})
        budget = a.seconds
        for sampler in a.samplers:
            h.log(f"{name} K={K} {sampler}")
            if not a.memory_only:
                sweeps = a.reference_sweeps if budget is None else 100_000
                row[sampler] = run_topictk_curve(store, facts, K, sampler, a, name,
                                                 seconds=budget, iterations=sweeps)
                budget = row[sampler]["train_seconds"] if budget is None else budget
            else:
                row[sampler] = {}
            row[sampler]["peak"] = run_topictk_memory(store, K, sampler, a, name)
            if a.memory_only and a.memory_scored:
                row[sampler].update(run_topictk_memory_scored(store, K, sampler, a, name))
        if a.tomotopy_sweeps > 0 and not a.memory_only:
            h.log(f"{name} K={K} tomotopy")
            row["tomotopy"] = run_tomotopy(store, facts, K, a, name)
        results_file(a.name, name).write_text(json.dumps(rows, indent=1))
    return {"facts": facts, "command": command, "rows": rows}


def topics_cells(r: dict) -> str:
    """The `topictk topics` cells (peak MiB | seconds); dashes for results saved before they
    were measured."""
    if "peak_topics" not in r:
        return "– | –"
    return f"{h.mib(r['peak_topics'])} | {r['topics_seconds']:.1f}"


def corpus_report(name: str, done: dict, a) -> list[str]:
    facts, rows = done["facts"], done["rows"]
    ref = a.samplers[0]
    out = [f"## {name}", "",
           (f"`{done['command']}`: {facts['D']:,} training documents, {facts['N']:,} training "
            f"tokens, V = {facts['V']:,}; store {h.mib(facts['bytes'])} MiB on disk; memory "
            f"allowance 3 x store + 8 bytes x (N + N) = {h.mib(memory_bound(facts))} MiB."), ""]
    if a.memory_only and a.memory_scored:
        out += ["| K | sampler | training MiB | share of allowance | training that evaluates "
                "MiB | its evaluation s | `topictk evaluate` MiB | its s | `topictk topics` MiB | "
                "its s | perplexity |",
                "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
        for K, row in rows.items():
            for sampler in a.samplers:
                r = row[sampler]
                out.append(f"| {K:,} | {sampler} | {h.mib(r['peak'])} | "
                           f"{r['peak'] / memory_bound(facts):.2f} | {h.mib(r['peak_scored'])} | "
                           f"{r['eval_seconds']:.1f} | {h.mib(r['peak_evaluate'])} | "
                           f"{r['evaluate_seconds']:.1f} | {topics_cells(r)} | "
                           f"{r['perplexity_all']:.1f} |")
        return out + [""]
    if a.memory_only:
        out += ["| K | sampler | peak RSS MiB | share of allowance |",
                "| ---: | --- | ---: | ---: |"]
        for K, row in rows.items():
            for sampler in a.samplers:
                peak = row[sampler]["peak"]
                out.append(f"| {K:,} | {sampler} | {h.mib(peak)} | "
                           f"{peak / memory_bound(facts):.2f} |")
        return out + [""]
    out += ["| K | sampler | sweeps | train s | tokens/s | x tomotopy | curve ppl | "
            f"reaches {ref}'s at | within 1 % at | all test docs ppl | peak RSS MiB | "
            "contention |",
            "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for K, row in rows.items():
        tomo = row.get("tomotopy")
        for sampler in (*a.samplers, "tomotopy"):
            r = row.get(sampler)
            if r is None:
                continue
            speed = (f"{r['tokens_per_s'] / tomo['tokens_per_s']:.1f}" if tomo else "–")
            reach = near = "–"
            if sampler in a.samplers and sampler != ref:
                reach, near = (_reach(r["curve"], row[ref]["perplexity"] * f,
                                      row[ref]["train_seconds"]) for f in (1.0, 1.01))
            curve_ppl = r["perplexity"] if sampler != "tomotopy" else None
            whole = r.get("perplexity_all", r["perplexity"])
            out.append(f"| {K:,} | {sampler} | {r['sweeps']} | {r['train_seconds']:.1f} | "
                       f"{r['tokens_per_s'] / 1e6:.2f} M | {speed} | "
                       f"{h.fmt(curve_ppl, '.1f')} | {reach} | {near} | {h.fmt(whole, '.1f')} | "
                       f"{h.mib(r.get('peak'))} | {r['foreign']:.2f} |")
    out += ["", "Perplexity against training time, (sweep, training s, perplexity):", ""]
    for K, row in rows.items():
        for sampler in a.samplers:
            points = ", ".join(f"({s}, {t:.1f}, {p:.0f})" for s, t, p in row[sampler]["curve"])
            out.append(f"- K = {K:,}, {sampler}: {points}")
    return out + [""]


def report(done: dict, a, began) -> str:
    ref = a.samplers[0]
    budget = (f"train {a.seconds:g} s of training time each" if a.seconds is not None else
              f"train as long as {ref} takes for {a.reference_sweeps} sweeps (equal training "
              "time)")
    out = ["# Metropolis-Hastings samplers at large K: topictk mh and warp vs SparseLDA vs "
           "tomotopy", "",
           f"Generated by `benchmarks/bench_mh.py`; command: `{h.command_line()}`.", "",
           f"- Date: {began:%Y-%m-%d %H:%M} UTC to {h.now_utc():%H:%M} UTC",
           *h.machine_info("tomotopy"),
           f"- estimator: {ESTIMATOR} (theta of every test document by the {ESTIMATOR} "
           f"fold-in, evaluation.fold_in of the topictk runs) for topictk and for tomotopy; "
           "docs/evaluate.md, 'Two estimators of theta for document completion'", "",
           "## Method", ""]
    if a.memory_only:
        out += [(f"- alpha = {ALPHA}, beta = {BETA}, seed {a.seed}, one thread, samplers "
                 f"{', '.join(a.samplers)} with their defaults (`mh_steps: 2`, chunks auto)."),
                (f"- Peak RSS: the VmHWM of a `topictk train` process of {a.memory_sweeps} sweeps "
                 "from a random start without evaluation, which saves a sample (the whole "
                 "process: interpreter, store, chain, checkpoint)."),
                ("- Allowance: 3 x the store on disk plus 8 bytes (an int32 topic and an int32 "
                 "count) per non-zero document-topic and word-topic count, the non-zeros "
                 "bounded by the training tokens N each.")]
        if a.memory_scored:
            out.append(f"- Training that evaluates: the same run evaluating once after its last "
                       f"sweep ({CURVE_DOCS} test documents, {CURVE_FOLD_IN_SWEEPS}-sweep "
                       "fold-in, log joint); `topictk evaluate`: of that run (every test "
                       f"document, {FOLD_IN_SWEEPS}-sweep fold-in, coherence and diversity); "
                       "`topictk topics`: of that run, 10 words per topic; seconds are the "
                       "evaluation's (metrics) and the commands' (wall).")
        out.append("")
        for name, part in done.items():
            out += corpus_report(name, part, a)
        return "\n".join(out) + "\n"
    out += [
           (f"- alpha = {ALPHA}, beta = {BETA}, seed {a.seed}, one thread. topictk's samplers "
            f"({', '.join(a.samplers)}) {budget}, from the same random start; the reference "
            f"evaluates every {a.eval_every} sweeps, the others about {a.evaluations} times "
            f"(their sweeps between evaluations are set from a {a.probe_sweeps}-sweep probe of "
            "their speed); mh and warp use the default `mh_steps: 2`. "
            f"tomotopy trains {a.tomotopy_sweeps} sweeps."),
           (f"- Curve perplexity: every topictk run's in-training evaluation scores the same "
            f"{CURVE_DOCS} test documents (`evaluation.curve_docs`) with a {CURVE_FOLD_IN_SWEEPS}"
            "-sweep fold-in; `reaches` is the training time of the first evaluation at or below "
            "the reference's last one (and within 1 % of it), with its share of the reference's "
            "time. All test docs: point estimate from the final counts, fold-in of every test "
            f"document ({FOLD_IN_SWEEPS} sweeps, {FOLD_IN_BURN_IN} burn-in; `topictk evaluate` "
            "for topictk, `topictk.score_topic_word` for tomotopy's counts after its "
            "sweeps) on the same tokens."),
           ("- tokens/s = training tokens x sweeps / training seconds (from a random start: "
            "the early sweeps of SparseLDA are its slowest)."),
           (f"- Peak RSS: a separate `topictk train` of {a.memory_sweeps} sweeps without "
            "evaluation (the whole process); tomotopy: the worker's VmHWM right after "
            "training. `contention`: cores other processes kept busy during the run (2 cores)."),
           ""]
    for name, part in done.items():
        out += corpus_report(name, part, a)
    return "\n".join(out) + "\n"


def draw_curves(rows_of: dict, samplers: list[str], path: Path) -> Path:
    """Held-out perplexity (curve documents) against training seconds: one panel per corpus
    and K, one line per sampler, the reference's last value dotted."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(rows_of)
    topics = sorted({int(K) for rows in rows_of.values() for K in rows})
    fig, axes = plt.subplots(len(names), len(topics), figsize=(4.2 * len(topics),
                                                                3.2 * len(names)),
                             squeeze=False, layout="constrained")
    for i, name in enumerate(names):
        rows = {int(K): row for K, row in rows_of[name].items()}
        for j, K in enumerate(topics):
            ax = axes[i][j]
            row = rows.get(K, {})
            for sampler in samplers:
                curve = row.get(sampler, {}).get("curve")
                if curve:
                    ax.plot([c[1] for c in curve], [c[2] for c in curve], marker=".",
                            label=sampler)
            if row.get(samplers[0], {}).get("perplexity"):
                ax.axhline(row[samplers[0]]["perplexity"], color="grey", linestyle=":",
                           linewidth=1)
            ax.set_title(f"{name}, K = {K:,}", fontsize=9)
            ax.set_xlabel("training seconds")
            ax.set_ylabel("held-out perplexity")
            ax.legend(fontsize=8)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main(argv=None) -> None:
    if len(sys.argv) > 2 and sys.argv[1] in ("_tomotopy", "_score"):
        spec = json.loads(sys.argv[2])
        (worker_tomotopy if sys.argv[1] == "_tomotopy" else worker_score)(spec)
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpora", nargs="+", default=["uci_kos"],
                        help="registered corpora (harness.CORPORA) or kos_x10 (uci_kos)")
    parser.add_argument("--topics", type=int, nargs="+", default=[1000, 5000, 10000])
    parser.add_argument("--samplers", nargs="+", default=["sparse", "mh", "warp"],
                        help="inference.sampler values; the first is the reference "
                             "(sparse mh warp)")
    parser.add_argument("--reference-sweeps", type=int, default=200,
                        help="sweeps of the reference sampler; the others train as long (200)")
    parser.add_argument("--seconds", type=float, default=None,
                        help="train every sampler this long instead")
    parser.add_argument("--eval-every", type=int, default=10,
                        help="sweeps between evaluations of the reference run (10)")
    parser.add_argument("--evaluations", type=int, default=20,
                        help="evaluations of every timed run, spaced by the sampler's speed "
                             "over --probe-sweeps sweeps (20; 0: every --eval-every sweeps)")
    parser.add_argument("--probe-sweeps", type=int, default=5)
    parser.add_argument("--tomotopy-sweeps", type=int, default=10, help="0: no tomotopy")
    parser.add_argument("--memory-sweeps", type=int, default=3)
    parser.add_argument("--memory-only", action="store_true",
                        help="peak memory of training runs only (e.g. kos_x10)")
    parser.add_argument("--memory-scored", action="store_true",
                        help="with --memory-only: also of a training run that evaluates and of "
                             "topictk evaluate")
    parser.add_argument("--name", default=NAME, help="results file name (mh)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--redraw", nargs="+", metavar="NAME",
                        help="only draw the figure from the saved results of these --name runs "
                             "(benchmarks/work/mh/results-NAME-CORPUS.json), every corpus of "
                             "each")
    h.add_common_options(parser)
    a = parser.parse_args(argv)
    figure = h.figure_path(f"{a.name}_ppl_vs_time.png", a.record)
    if a.redraw:
        rows = {path.stem.split("-", 2)[2]: json.loads(path.read_text())
                for run_name in a.redraw
                for path in sorted(WORK.glob(f"results-{run_name}-*.json"))}
        if not rows:
            raise SystemExit(f"no saved results of {', '.join(a.redraw)} in {WORK}")
        print(draw_curves(rows, a.samplers, figure))
        return
    began = h.now_utc()
    done = {name: run_corpus(name, a) for name in a.corpora}
    h.write_results(h.results_path(a.name, a.record), report(done, a, began))
    if not a.memory_only:
        draw_curves({name: part["rows"] for name, part in done.items()}, a.samplers, figure)


if __name__ == "__main__":
    main()
