"""The hierarchical Dirichlet process (``model.family: hdp``) against fixed-K LDA and against
tomotopy's ``HDPModel``, side by side in one run: held-out perplexity, whether live K forgets
its start, and tokens/s.

Corpora: 20 Newsgroups (``20news_gan2015``: Cong et al.'s split, 11,284 training and 7,502 test
documents) and KOS (``uci_kos``: 10 % test documents), prepared by ``harness.ensure_store``.

quality: held-out perplexity by document completion (``topictk evaluate``: a Gibbs fold-in of
every test document's observed part, its held-out part scored, averaged over the run's saved
samples) of topictk's HDP (model defaults, seed 1), topictk's LDA at K = 50, 100, 200
(alpha 0.1, beta 0.01, seed 1), and tomotopy's HDPModel (its defaults but eta 0.01 and
``initial_k`` 2, seed 1, one worker), ``--sweeps`` sweeps each. tomotopy's topics are snapshot
at the steps of the topictk HDP run's saved samples and scored by ``topictk.score_topic_word``
on the same held-out tokens with the same fold-in, each snapshot with its own document prior
alpha pi: pi_k = m_k / (m.. + gamma), m_k the tables of topic k (tomotopy reports only the
total m.., so m_k is the topic's share of the (document, topic) pairs with tokens times m..;
with tomotopy's small alpha nearly every such pair has one table). Store words tomotopy never
saw get its smoothed weight eta / (n_k + V_used eta). Targets: the HDP within 2 % of the best
LDA, and below tomotopy's HDPModel.

settle: live K after ``--sweeps`` sweeps from starts with 2 and 64 occupied topics
(``model.initial_topics``), seeds 1, 2, 3, both corpora; target: largest over smallest, per
corpus, at most 1.15. The live-K curves (``live_k`` of every ``metrics.jsonl`` line, one every
``--sweeps`` / 50 sweeps) are saved as JSON and drawn (live K against sweeps).

speed: tokens/s at one thread on 20 Newsgroups of topictk's HDP, tomotopy's HDPModel and
topictk's LDA at K = the HDP's live K at the end of its timed run, ``--speed-sweeps`` sweeps each
(topictk's two in turn, ``--speed-rounds`` rounds, the median taken),
training time only, over the whole run and over its second half (where live K is nearer its end
value); each timed run starts once the load average is below ``--load-limit``
(``harness.wait_for_low_load``). Targets, on the second half: HDP / tomotopy >= 3, HDP / LDA
>= 0.8.

Finished runs are reused (``harness.train_once`` and the JSON kept beside each run), so an
interrupted run continues where it stopped (under ``work/hdp/``, a folder per mode, sweeps and
fold-in sweeps).

    python benchmarks/bench_hdp.py [--quick] [--record] [--only quality|settle|speed]
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

import harness as h
import topictk

NAME = "hdp"
CORPORA = {"20news_gan2015": "20 Newsgroups", "uci_kos": "KOS"}
LDA_TOPICS = (50, 100, 200)
STARTS = (2, 64)
SEEDS = (1, 2, 3)
QUALITY_SEED = 1
ALPHA_LDA, BETA = 0.1, 0.01
TARGET_LDA, TARGET_SETTLE, TARGET_TOMOTOPY, TARGET_LDA_SPEED = 1.02, 1.15, 3.0, 0.8


# ----------------------------------------------------------------------------- tomotopy
def tomotopy_worker(spec: dict) -> None:
    """Train tomotopy's HDPModel on the store's training tokens in this process; write its
    training time and, if ``sample_steps``, its held-out perplexity by topictk's evaluator."""
    import tomotopy as tp

    store = topictk.open_store(spec["store"])
    train = store.train()
    vocab, V = list(store.vocab), store.n_words
    doc_ptr, words = np.asarray(train.doc_ptr), np.asarray(train.words)
    mdl = tp.HDPModel(tw=tp.TermWeight.ONE, min_cf=0, min_df=0, rm_top=0, initial_k=2,
                      eta=BETA, seed=int(spec["seed"]))
    for d in range(doc_ptr.size - 1):
        mdl.add_doc([vocab[w] for w in words[doc_ptr[d]:doc_ptr[d + 1]]])
    mdl.train(0, workers=1)
    if mdl.num_words != words.size:
        raise SystemExit(f"tomotopy dropped tokens: {mdl.num_words} of {words.size}")
    index = {w: i for i, w in enumerate(vocab)}
    used = np.array([index[w] for w in mdl.used_vocabs], dtype=np.int64)
    unused = np.setdiff1d(np.arange(V), used)
    S = int(spec["sweeps"])
    steps = sorted(int(s) for s in spec.get("sample_steps", [])) or sorted(
        {max(1, S * i // 10) for i in range(1, 11)})
    snapshots, wall, done, live, segments = [], 0.0, 0, [], []
    for target in steps:
        began = time.perf_counter()
        mdl.train(target - done, workers=1)
        wall += time.perf_counter() - began
        done = target
        live.append(int(mdl.live_k))
        segments.append([done, wall, live[-1]])
        if spec.get("sample_steps"):
            snapshots.append(tomotopy_topics(mdl, V, used, unused))
    out = {"train_seconds": wall, "sweeps": done, "tokens": int(mdl.num_words),
           "tokens_per_s": mdl.num_words * done / wall if wall > 0 else None,
           "live_k": live[-1], "segments": segments, "alpha": float(mdl.alpha),
           "gamma": float(mdl.gamma), "tables": int(mdl.num_tables),
           "version": tp.__version__, "isa": tp.isa}
    if snapshots:
        scored = topictk.score_topic_word(store, [s["phi"] for s in snapshots],
                                          [s["prior"] for s in snapshots],
                                          sweeps=spec["fold_in_sweeps"],
                                          burn_in=spec["fold_in_burn_in"], seed=0, threads=1)
        out.update(perplexity=scored["perplexity"], floored=scored["floored_tokens"],
                   heldout_tokens=scored["heldout_tokens"], samples=scored["samples"],
                   table_pair_ratio=[s["ratio"] for s in snapshots])
    Path(spec["out"]).write_text(json.dumps(out, indent=1))


def tomotopy_topics(mdl, V: int, used: np.ndarray, unused: np.ndarray) -> dict:
    """The live topics of ``mdl`` over the store's V words and their prior alpha pi."""
    K = mdl.k
    live = np.array([k for k in range(K) if mdl.is_live_topic(k)], dtype=np.int64)
    counts = np.asarray(mdl.get_count_by_topics(), dtype=np.float64)
    phi = np.zeros((live.size, V))
    n_used = used.size
    for i, k in enumerate(live):
        phi[i, used] = mdl.get_topic_word_dist(int(k))
        phi[i, unused] = BETA / (counts[k] + n_used * BETA)
    pairs = np.zeros(K)
    for doc in mdl.docs:
        topics = np.unique(np.asarray(doc.topics))
        pairs[topics[topics >= 0]] += 1
    pairs = pairs[live]
    tables = float(mdl.num_tables)
    m = pairs / pairs.sum() * tables
    prior = mdl.alpha * m / (tables + mdl.gamma)
    keep = prior > 0                        # a live topic with tokens has a pair
    return {"phi": phi[keep], "prior": prior[keep], "ratio": tables / pairs.sum()}


def tomotopy_run(store: Path, out: Path, spec: dict) -> dict:
    """tomotopy's run of ``spec`` in its own process, once (its JSON reused)."""
    if out.exists():
        return json.loads(out.read_text())
    h.log(f"tomotopy {out.stem}")
    logfile = out.with_suffix(".log")
    res = h.run_measured([sys.executable, str(Path(__file__).resolve()), "_tomotopy",
                          json.dumps({**spec, "store": str(store), "out": str(out)})], logfile)
    if res["rc"] != 0:
        raise SystemExit(f"tomotopy failed:\n{h.tail(logfile)}")
    result = json.loads(out.read_text())
    result["foreign"] = res["foreign"]
    out.write_text(json.dumps(result, indent=1))
    return result


# ----------------------------------------------------------------------------- topictk runs
class Bench:
    def __init__(self, args):
        self.args = args
        # runs are reused by name: the folder names what changes them
        self.work = h.WORK / NAME / (f"{'quick' if args.quick else 'full'}-{args.sweeps}"
                                     f"-fold{args.fold_in_sweeps}")
        self.work.mkdir(parents=True, exist_ok=True)
        self.S = args.sweeps
        self.lines: list[str] = []
        self.met: list[tuple[str, bool | None]] = []

    def config(self, corpus: str, name: str, model: dict, *, sweeps: int | None = None,
               seed: int = QUALITY_SEED, eval_every: int = 0) -> dict:
        sweeps = sweeps or self.S
        inference = {"algorithm": "gibbs", "iterations": sweeps}
        if self.args.quick:                  # two saved samples instead of ten
            inference.update(burn_in=sweeps // 2, thin=max(1, sweeps // 4))
        return {"corpus": str(h.ensure_store(corpus)),
                "output": str(self.work / corpus / name),
                "model": model, "inference": inference,
                "training": {"seed": seed, "threads": 1, "eval_every": eval_every,
                             "checkpoint_every": 0, "keep_checkpoints": 1},
                "evaluation": {"fold_in_sweeps": self.args.fold_in_sweeps,
                               "fold_in_burn_in": self.args.fold_in_sweeps // 2}}

    def evaluated(self, config: dict) -> dict:
        """The run of ``config`` trained once and evaluated once (``evaluate.json`` beside it)."""
        run = h.train_once(config, Path(config["output"]).parent)
        cached = run.parent / f"{run.name}.evaluate.json"
        if cached.exists():
            return json.loads(cached.read_text())
        h.log(f"evaluate {run.name}")
        result, res = h.evaluate(run, run.parent / "logs" / f"evaluate-{run.name}.log")
        if result is None:
            raise SystemExit(f"evaluate {run} failed (exit {res['rc']})")
        loaded = topictk.load_run(run)
        metrics = loaded.metrics()
        result["live_k"] = metrics[-1].get("live_k") if metrics else None
        result["topics_shown"] = len(loaded.topic_ids)
        cached.write_text(json.dumps(result, indent=1))
        return result

    # ---- quality
    def quality(self) -> None:
        rows, self.quality_rows = [], {}
        for corpus, label in CORPORA.items():
            hdp_cfg = self.config(corpus, "hdp", {"family": "hdp"}, eval_every=self.every())
            hdp = self.evaluated(hdp_cfg)
            ldas = {K: self.evaluated(self.config(corpus, f"lda-K{K}",
                                                  {"topics": K, "alpha": ALPHA_LDA,
                                                   "beta": BETA}))
                    for K in LDA_TOPICS}
            steps = sample_steps(Path(hdp_cfg["output"]))
            tomo = tomotopy_run(h.ensure_store(corpus), self.work / corpus / "tomotopy-hdp.json",
                                {"seed": QUALITY_SEED, "sweeps": self.S, "sample_steps": steps,
                                 "fold_in_sweeps": self.args.fold_in_sweeps,
                                 "fold_in_burn_in": self.args.fold_in_sweeps // 2})
            best_K = min(ldas, key=lambda K: ldas[K]["perplexity"])
            best = ldas[best_K]["perplexity"]
            ratio = hdp["perplexity"] / best
            self.quality_rows[corpus] = {"hdp": hdp, "lda": ldas, "tomotopy": tomo}
            rows.append([label, "topictk HDP", f"{hdp['perplexity']:.1f}", hdp["live_k"],
                         hdp["samples"], f"{ratio:.3f}"])
            for K, r in ldas.items():
                rows.append([label, f"topictk LDA K = {K}", f"{r['perplexity']:.1f}", K,
                             r["samples"], f"{r['perplexity'] / best:.3f}"])
            rows.append([label, f"tomotopy HDPModel {tomo['version']}",
                         f"{tomo['perplexity']:.1f}", tomo["live_k"], tomo["samples"],
                         f"{tomo['perplexity'] / best:.3f}"])
            self.met.append((f"{label}: HDP within {100 * (TARGET_LDA - 1):.0f} % of the best "
                             f"LDA (K = {best_K}): {ratio:.3f}", ratio <= TARGET_LDA))
            self.met.append((f"{label}: HDP below tomotopy's HDPModel: {hdp['perplexity']:.1f} "
                             f"against {tomo['perplexity']:.1f}",
                             hdp["perplexity"] < tomo["perplexity"]))
            h.log(f"{label}: HDP {hdp['perplexity']:.1f}, best LDA {best:.1f}, "
                  f"tomotopy {tomo['perplexity']:.1f}")
        tomo_notes = "; ".join(
            f"{CORPORA[c]}: alpha {t['alpha']:.3g}, gamma {t['gamma']:.3g}, tables / "
            f"(document, topic) pairs {min(t['table_pair_ratio']):.3f}–"
            f"{max(t['table_pair_ratio']):.3f}"
            for c, t in ((c, r["tomotopy"]) for c, r in self.quality_rows.items()))
        self.lines += [
            "## Quality: held-out perplexity (document completion)", "",
            f"{self.S} sweeps each, seed 1, one thread; `topictk evaluate` (fold-in "
            f"{self.args.fold_in_sweeps} sweeps, {self.args.fold_in_sweeps // 2} discarded, "
            "averaged over the saved samples); tomotopy's topics snapshot at the same steps and "
            "scored by `topictk.score_topic_word` with the same fold-in and its alpha pi. "
            "`K`: live topics at the end (LDA: K). `÷ best LDA`: perplexity over the best "
            "LDA's of the corpus.", "",
            *h.table(["corpus", "model", "perplexity", "K", "samples", "÷ best LDA"], rows), "",
            f"tomotopy at the end: {tomo_notes}.", ""]

    def every(self) -> int:
        return max(1, self.S // 50)

    # ---- settle
    def settle(self) -> None:
        curves, rows = {}, []
        for corpus, label in CORPORA.items():
            finals = []
            for start in STARTS:
                for seed in self.args.seeds:
                    cfg = self.config(corpus, f"settle-start{start}-seed{seed}",
                                      {"family": "hdp", "initial_topics": start}, seed=seed,
                                      eval_every=self.every())
                    run = h.train_once(cfg, Path(cfg["output"]).parent)
                    metrics = h.read_metrics(run)
                    curve = [[m["step"], m["live_k"]] for m in metrics if "live_k" in m]
                    curves[f"{corpus}/start{start}/seed{seed}"] = {
                        "step": [c[0] for c in curve], "live_k": [c[1] for c in curve],
                        "max_topics": topictk.load_run(run).config.model.topics}
                    finals.append(curve[-1][1])
                    marks = [c[1] for c in curve if c[0] in self.marks()]
                    rows.append([label, start, seed, " / ".join(map(str, marks)), curve[-1][1]])
            ratio = max(finals) / min(finals)
            rows.append([label, "all", "", "", f"max / min {ratio:.2f}"])
            self.met.append((f"{label}: live K after {self.S} sweeps, max / min over starts "
                             f"{', '.join(map(str, STARTS))} and seeds "
                             f"{', '.join(map(str, self.args.seeds))}: {ratio:.2f}",
                             ratio <= TARGET_SETTLE))
        curves_path = h.results_path(f"{NAME}_live_k", self.args.record).with_suffix(".json")
        curves_path.parent.mkdir(parents=True, exist_ok=True)
        tmp = curves_path.with_name(f".{curves_path.name}.tmp")
        body = ",\n".join(f" {json.dumps(k)}: {json.dumps(v)}" for k, v in curves.items())
        tmp.write_text(f'{{"sweeps": {self.S}, "curves": {{\n{body}\n}}}}\n')
        tmp.replace(curves_path)
        figure = self.figure(curves)
        self.lines += [
            "## K settles: live K from 2 and from 64 occupied topics", "",
            f"Model defaults but `model.initial_topics`, one thread, {self.S} sweeps; live K at "
            f"sweeps {' / '.join(map(str, self.marks()))}. Curves (`live_k` of every "
            f"metrics line, every {self.every()} sweeps): `{h.rel(curves_path)}`; figure: "
            f"`{h.rel(figure)}`.", "",
            *h.table(["corpus", "start", "seed", "live K at the marks", "at the end"], rows),
            ""]

    def marks(self) -> list[int]:
        return sorted({max(self.every(), round(self.S * f / self.every()) * self.every())
                       for f in (0.1, 0.3, 0.5, 1.0)})

    def figure(self, curves: dict) -> Path:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, axes = plt.subplots(1, len(CORPORA), figsize=(10, 4), sharey=False)
        colours = {STARTS[0]: "tab:blue", STARTS[1]: "tab:red"}
        styles = ["-", "--", ":", "-."]
        for ax, (corpus, label) in zip(axes, CORPORA.items()):
            for start in STARTS:
                for i, seed in enumerate(self.args.seeds):
                    curve = curves[f"{corpus}/start{start}/seed{seed}"]
                    ax.plot(curve["step"], curve["live_k"], styles[i % len(styles)],
                            color=colours[start], label=f"start {start}, seed {seed}")
            k_max = curves[f"{corpus}/start{STARTS[0]}/seed{self.args.seeds[0]}"]["max_topics"]
            ax.axhline(k_max, color="grey", linestyle="--", linewidth=1)
            ax.annotate(f"K_max = {k_max}", (0, k_max), xytext=(4, -12),
                        textcoords="offset points", fontsize=8, color="grey")
            ax.set_title(label)
            ax.set_xlabel("sweeps")
            ax.set_ylabel("live K")
            ax.grid(alpha=0.3)
        axes[0].legend(fontsize=8, loc="lower right")
        fig.suptitle(f"topictk HDP: live K from 2 and 64 occupied topics ({self.S} sweeps"
                     + (", --quick" if self.args.quick else "") + ")")
        fig.tight_layout()
        path = h.figure_path(f"{NAME}_live_k.png", self.args.record)
        tmp = path.with_name(f".{path.stem}.tmp.png")
        fig.savefig(tmp, dpi=110)
        plt.close(fig)
        tmp.replace(path)
        return path

    # ---- speed
    def timed(self, done: Path, name: str) -> float | None:
        """Before the timed run ``name``: wait for a quiet machine unless its result ``done``
        is there already; the load average seen then (kept beside the run, so a reused run
        reports its own)."""
        kept = self.work / "20news_gan2015" / f"{name}.load.json"
        if done.exists():
            return json.loads(kept.read_text())["load"] if kept.exists() else None
        load = h.wait_for_low_load(self.args.load_limit, self.args.max_wait)
        kept.parent.mkdir(parents=True, exist_ok=True)
        kept.write_text(json.dumps({"load": load}))
        return load

    def speed(self) -> None:
        corpus, S, R = "20news_gan2015", self.args.speed_sweeps, self.args.speed_rounds
        store = h.ensure_store(corpus)
        rows, every = [], max(1, S // 10)
        # topictk's HDP and LDA take turns, R rounds; a chain is the same every round, only
        # its clock differs, so the paired ratios show how much the clock moves
        hdp_rates, lda_rates, K = [], [], None
        for r in range(1, R + 1):
            suffix = "" if r == 1 else f"-r{r}"
            cfg = self.config(corpus, f"speed-hdp-{S}{suffix}", {"family": "hdp"}, sweeps=S,
                              eval_every=every)
            load = self.timed(Path(cfg["output"]) / "model.npz", f"speed-hdp-{S}{suffix}")
            run = h.train_once(cfg, Path(cfg["output"]).parent)
            live_k = len(topictk.load_run(run).topic_ids)
            hdp_rates.append(metric_rates(run))
            rows.append([f"topictk HDP, round {r}", live_k, *rate_cells(hdp_rates[-1]),
                         fmt_load(load)])
            if r == 1:
                out = self.work / corpus / f"speed-tomotopy-{S}.json"
                load = self.timed(out, out.stem)
                tomo = tomotopy_run(store, out, {"seed": QUALITY_SEED, "sweeps": S})
                tomo_rates = segment_rates(tomo)
                rows.append([f"tomotopy HDPModel {tomo['version']}", tomo["live_k"],
                             *rate_cells(tomo_rates), fmt_load(load)])
                K = max(2, live_k)
            cfg = self.config(corpus, f"speed-lda-K{K}-{S}{suffix}",
                              {"topics": K, "alpha": ALPHA_LDA, "beta": BETA}, sweeps=S,
                              eval_every=every)
            load = self.timed(Path(cfg["output"]) / "model.npz", f"speed-lda-K{K}-{S}{suffix}")
            run = h.train_once(cfg, Path(cfg["output"]).parent)
            lda_rates.append(metric_rates(run))
            rows.append([f"topictk LDA K = {K}, round {r}", K, *rate_cells(lda_rates[-1]),
                         fmt_load(load)])
        hdp = float(np.median([x[1] for x in hdp_rates]))
        paired = [a[1] / b[1] for a, b in zip(hdp_rates, lda_rates)]
        r_tomo, r_lda = hdp / tomo_rates[1], float(np.median(paired))
        self.met.append((f"speed (second half): HDP ÷ tomotopy HDPModel {r_tomo:.2f} (the "
                         f"median HDP round)", r_tomo >= TARGET_TOMOTOPY))
        self.met.append((f"speed (second half): HDP ÷ LDA at K = {K} {r_lda:.2f} (median of "
                         f"the rounds' ratios: {', '.join(f'{x:.2f}' for x in paired)})",
                         r_lda >= TARGET_LDA_SPEED))
        self.lines += [
            "## Speed: tokens/s at one thread, 20 Newsgroups", "",
            f"{S} sweeps each from their starts (topictk HDP: model defaults; tomotopy: "
            f"initial_k 2); training time only: topictk's `train_seconds` of its metrics lines "
            f"(a point evaluation every {every} sweeps, not counted), tomotopy's `train` calls "
            f"in {every}-sweep pieces. `whole run`: all {S} sweeps; `second half`: sweeps "
            f"{S - S // 2 + 1}–{S}, where the HDPs' live K is nearer its end value (the "
            "targets use it). `K`: live topics at the end; LDA's K is the topictk HDP's. "
            f"topictk's HDP and LDA runs take turns, {R} round(s) (the same chains each round); "
            "the targets take the median. "
            "`load`: the 1-minute load average when the run started (a run starts once it is "
            f"below {self.args.load_limit}, or after {self.args.max_wait:.0f} s).", "",
            *h.table(["model", "K", "tokens/s, whole run", "tokens/s, second half", "load"],
                     rows), ""]

    # ---- report
    def report(self, seconds: float) -> None:
        target_lines = [f"- {'met' if ok else 'NOT met'}: {text}" for text, ok in self.met]
        head = ["# The HDP against LDA and tomotopy's HDPModel", "",
                "Written by `benchmarks/bench_hdp.py`"
                + (" with `--quick`: reduced sweeps, not the full-size measurement; the "
                   "targets are set for 1,000 sweeps, and at this size the HDP has barely "
                   "begun to grow, so they say nothing here." if self.args.quick else "."), "",
                f"Command: `{h.command_line()}` ({seconds:.0f} s, runs of earlier invocations "
                "reused)", "", *h.machine_info("tomotopy"), "",
                "Stores: " + "; ".join(
                    f"{CORPORA[c]} `{h.prepare_command(c, h.WORK / 'stores' / c)}`"
                    for c in CORPORA), "",
                "## Targets", "", *target_lines, ""]
        path = h.results_path(NAME, self.args.record)
        text = "\n".join(head + self.lines).rstrip("\n") + "\n"
        if not (path.exists() and h.NOTES_MARKER in path.read_text(encoding="utf-8")):
            text += "\n" + h.NOTES_MARKER + "\n"       # kept from the old file otherwise
        h.write_results(path, text)


def metric_rates(run: Path) -> tuple[float, float]:
    """tokens/s of a topictk run over all its sweeps and over their second half, from the
    cumulative ``tokens_seen`` and ``train_seconds`` of its metrics lines."""
    lines = [m for m in h.read_metrics(run) if "train_seconds" in m]
    last = lines[-1]
    mid = max((m for m in lines if m["step"] <= last["step"] // 2), key=lambda m: m["step"],
              default={"tokens_seen": 0, "train_seconds": 0.0})
    return (last["tokens_seen"] / last["train_seconds"],
            (last["tokens_seen"] - mid["tokens_seen"])
            / (last["train_seconds"] - mid["train_seconds"]))


def segment_rates(tomo: dict) -> tuple[float, float]:
    """The same for tomotopy's timed pieces (``segments``: step, cumulative seconds, live K)."""
    segments, N = tomo["segments"], tomo["tokens"]
    step, wall, _ = segments[-1]
    mid = max((s for s in segments if s[0] <= step // 2), key=lambda s: s[0], default=[0, 0.0])
    return N * step / wall, N * (step - mid[0]) / (wall - mid[1])


def rate_cells(rates: tuple[float, float]) -> list[str]:
    return [f"{r / 1e6:.2f} M" for r in rates]


def fmt_load(load: float | None) -> str:
    return "–" if load is None else f"{load:.2f}"


def sample_steps(run: Path) -> list[int]:
    """The steps of a run's saved samples (``samples/step-NNNNNNNN.npz``)."""
    return sorted(int(p.stem.split("-")[1]) for p in (run / "samples").glob("step-*.npz"))


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="60 sweeps (speed: 40), fold-in 20 sweeps, two saved samples: "
                             "a few minutes on a shared machine")
    parser.add_argument("--only", choices=("quality", "settle", "speed"), action="append",
                        help="only this part (repeatable; default: all three); the report holds "
                             "the parts run")
    parser.add_argument("--sweeps", type=int, help="sweeps of every run (1000; quick 60)")
    parser.add_argument("--speed-sweeps", type=int, help="sweeps of the timed runs (1000; "
                                                         "quick 40)")
    parser.add_argument("--speed-rounds", type=int, help="rounds of the timed topictk runs, "
                                                          "HDP and LDA in turn (3; quick 1)")
    parser.add_argument("--fold-in-sweeps", type=int, help="fold-in sweeps, half discarded "
                                                           "(50; quick 20)")
    parser.add_argument("--seeds", type=int, nargs="+", default=list(SEEDS),
                        help="seeds of the settle runs (1 2 3)")
    parser.add_argument("--load-limit", type=float, default=0.5,
                        help="before a timed run, wait until the 1-minute load average is "
                             "below this (0.5)")
    h.add_common_options(parser)
    parser.set_defaults(max_wait=None)
    args = parser.parse_args(argv)
    quick = args.quick
    args.sweeps = args.sweeps or (60 if quick else 1000)
    args.speed_sweeps = args.speed_sweeps or (40 if quick else 1000)
    args.fold_in_sweeps = args.fold_in_sweeps or (20 if quick else 50)
    args.speed_rounds = args.speed_rounds or (1 if quick else 3)
    if args.max_wait is None:
        args.max_wait = 20.0 if quick else 1800.0
    args.only = args.only or ["quality", "settle", "speed"]
    return args


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "_tomotopy":
        return tomotopy_worker(json.loads(sys.argv[2]))
    args = parse_args()
    began = time.monotonic()
    bench = Bench(args)
    for part in ("quality", "settle", "speed"):
        if part in args.only:
            getattr(bench, part)()
    bench.report(time.monotonic() - began)


if __name__ == "__main__":
    main()
