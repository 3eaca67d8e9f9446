#!/usr/bin/env python3
"""Mini-batch MCMC benchmark: SGRLD and HSVG beside collapsed Gibbs and online VB.

Three parts (``python benchmarks/bench_minibatch.py PART ...``; ``all`` runs them in order):

``nips``        Patterson & Teh (2013) Figure 2a in kind: NIPS 1987-1999 (knowceans UCI docword),
                Protocol B (every document split 80/20; the held-out 20 % are scored with each
                document's own state, ``perplexity_train_heldout`` of ``topictk evaluate --json``),
                K = 50, alpha = beta = 0.01; gibbs, sgrld, ovb, hsvg in "batch mode" (the whole
                corpus per update) and with mini-batches of 50. A short grid selects the step
                sizes (SGRLD a, b then c; OVB/HSVG tau0 x kappa), a longer run scores the best.
``news``        20 Newsgroups (Gan et al. 2015 split), K = 128, alpha = 0.1, beta = 0.01,
                |B| = 64: a short pilot picks the step sizes, then every algorithm trains for a
                fixed budget of training seconds; point perplexity against train_seconds is
                plotted to ``benchmarks/minibatch_20news_ppl_vs_time.png``.
``memory``      peak RSS of ``topictk train`` (sgrld, hsvg) on 20 Newsgroups and on the same
                training corpus with every document twice (same test split, same updates).
``report``      writes the report ``minibatch.md`` and the PNG plots (``--record``:
                benchmarks/results/ and benchmarks/figures/, else under benchmarks/work/).

The throughput of the SGRLD local step is measured by ``studies/minibatch_local_step.py``.

Every training run lives in its own directory under ``benchmarks/work/minibatch/runs``; a run is
finished when its ``result.json`` exists, and reruns skip finished runs (an unfinished run is
trained again from scratch). Training and evaluation are subprocesses (``python -m topictk``);
peak RSS comes from ``os.wait4``. Corpora are read from ``../shared/data`` relative to the
repository root. Requires ``matplotlib`` (benchmarks/requirements.txt).

Usage (from the repository root, in the venv where topictk is installed)::

    python benchmarks/bench_minibatch.py all --jobs 2 --record
    python benchmarks/bench_minibatch.py nips --jobs 2       # one part
    python benchmarks/bench_minibatch.py report --record     # results/minibatch.md + plots
    python benchmarks/bench_minibatch.py all --quick         # a few minutes: tiny grids
"""
from __future__ import annotations

import argparse
import concurrent.futures as cf
import gzip
import json
import math
import shlex
import time
from pathlib import Path

import harness as h
import yaml

import topictk

REPO, DATA = h.REPO, h.DATA
WORK = h.WORK / "minibatch"
NAME = "minibatch"
PLOTS: dict[str, Path] = {}      # "news", "nips": where the report draws its figures
TOPICTK = h.TOPICTK
ALGOS = ("gibbs", "sgrld", "ovb", "hsvg")
RETRY_FAILED = False   # --retry-failed: rerun runs whose result.json records a failure
rel, log, tail = h.rel, h.log, h.tail

# ----------------------------------------------------------------------------- settings
NIPS = {
    "model": {"topics": 50, "alpha": 0.01, "beta": 0.01},
    "mb": 50,
    # short grid runs (updates) and long runs of the best settings (updates)
    "grid_updates": {"batch": {"sgrld": 8, "ovb": 4, "hsvg": 8},
                     "mb50": {"sgrld": 170, "ovb": 170, "hsvg": 170}},
    "final_updates": {"batch": {"sgrld": 200, "ovb": 200, "hsvg": 200},
                      "mb50": {"sgrld": 680, "ovb": 680, "hsvg": 680}},
    "gibbs_sweeps": 500,
    "sgrld_grid": {"batch": {"a": [0.01, 0.1, 1.0], "b": [10, 1000]},
                   "mb50": {"a": [0.003, 0.01, 0.03, 0.1], "b": [10, 1000]}},
    "sgrld_c": [0.51, 0.55, 0.8],           # stage 2 at the best (a, b); stage 1 uses 0.55
    "grid_sweeps": 5,                       # SGRLD sweeps in the grid (finals: 5 and 10)
    "vi_grid": {"batch": [(1, 0.55), (1, 0.9), (64, 0.55), (64, 0.9)],
                "mb50": [(1, 0.55), (1, 0.9), (64, 0.55), (64, 0.9), (1024, 0.55),
                         (1024, 0.9)]},
    "hsvg_sweeps": 10,
    # batch mode, second round at the full length (the 8-update grid favours large constant
    # steps, whose discretisation bias dominates 200 updates): decaying SGRLD schedules and
    # the neighbours of the best OVB/HSVG settings, 10 samples for SGRLD as in the finals
    "batch_long_grid": {"sgrld": [(0.1, 10, 0.55), (0.3, 10, 0.55), (1.0, 10, 0.55),
                                  (0.1, 10, 0.8), (0.3, 10, 0.8), (1.0, 10, 0.8)],
                        "ovb": [(1, 0.9)], "hsvg": [(1, 0.9), (64, 0.55)]},
}
NEWS = {
    "model": {"topics": 128, "alpha": 0.1, "beta": 0.01},
    "batch": 64,
    "budget": 240.0,          # training seconds per algorithm (evaluation excluded)
    "points": 25,             # evaluations along the run
    "pilot_limit": 30.0,      # training.time_limit of every pilot run
    "pilot": {"sgrld": [{"step": {"a": a, "b": 1000, "c": 0.55}} for a in (0.003, 0.01, 0.03)]
              + [{"step": {"a": 0.01, "b": 100, "c": 0.55}}],
              "ovb": [{"tau0": t, "kappa": k} for t, k in ((1, 0.55), (64, 0.55), (64, 0.7),
                                                            (1024, 0.7))],
              "hsvg": [{"tau0": t, "kappa": k} for t, k in ((1, 0.55), (64, 0.55), (64, 0.7),
                                                             (1024, 0.7))],
              "gibbs": [{}]},
}
MEMORY = {"updates": 300, "batch": 64, "algos": ("sgrld", "hsvg")}


# ----------------------------------------------------------------------------- processes
def run_process(cmd: list[str], log_path: Path, poll_memory: bool = False) -> dict:
    """:func:`harness.run_measured` with stdout kept beside ``log_path``, in the units the
    results files of this script record."""
    res = h.run_measured(cmd, log_path, stdout_path=log_path.with_suffix(".stdout"),
                         poll_memory=poll_memory)
    result = {"rc": res["rc"], "wall_seconds": round(res["wall"], 3),
              "maxrss_kb": res["maxrss"] // 1024, "stdout": res["stdout"],
              "contention": round(res["foreign"], 3)}
    if poll_memory:
        result.update(rss_anon_kb=res["rss_anon"] // 1024, rss_file_kb=res["rss_file"] // 1024)
    return result


# ----------------------------------------------------------------------------- stores
def store_args(name: str) -> list[str]:
    if name == "nips12":
        d = DATA / "nips12_roweis_knowceans"
        return [rel(d / "docword.nips12.txt.gz"), "--vocab", rel(d / "vocab.nips12.txt"),
                "--test-docs", "0", "--heldout-train-fraction", "0.2", "--seed", "0"]
    d = DATA / "20news_gan2015"
    split = ["--vocab", rel(d / "vocab.txt"),
             "--test-observed", rel(d / "docword.test_observed80.txt.gz"),
             "--test-heldout", rel(d / "docword.test_heldout20.txt.gz")]
    if name == "20news":
        return [rel(d / "docword.train.txt.gz")] + split
    if name == "20news_x2":
        return [rel(doubled_docword()), "--format", "uci"] + split
    raise ValueError(name)


def store_path(name: str) -> Path:
    return WORK / "stores" / name


def prepare_command(name: str) -> list[str]:
    return ["topictk", "prepare"] + store_args(name) + ["--out", rel(store_path(name))]


def ensure_store(name: str) -> dict:
    """The manifest of store ``name``, prepared (from the repository root) when missing."""
    out = h.ensure_store(name, [str(REPO / a) if "/" in a else a for a in store_args(name)],
                         out=store_path(name))
    return json.loads((out / "manifest.json").read_text())


def doubled_docword() -> Path:
    """The 20 Newsgroups training docword with every document twice (d and d + D)."""
    out = WORK / "data" / "docword.train_x2.txt.gz"
    if out.exists():
        return out
    src = DATA / "20news_gan2015" / "docword.train.txt.gz"
    with gzip.open(src, "rt") as f:
        D, W, NNZ = (int(f.readline()) for _ in range(3))
        body = [line for line in f if line.strip()]
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    with gzip.open(tmp, "wt") as g:
        g.write(f"{2 * D}\n{W}\n{2 * NNZ}\n")
        g.writelines(body)
        for line in body:
            d, w, c = line.split()
            g.write(f"{int(d) + D} {w} {c}\n")
    tmp.rename(out)
    return out


def dir_size(path: Path) -> int:
    return sum(p.stat().st_size for p in Path(path).iterdir() if p.is_file())


# ----------------------------------------------------------------------------- runs
def make_config(part: str, name: str, store: str, model: dict, inference: dict,
                training: dict, evaluation: dict | None = None) -> dict:
    cfg = {"corpus": str(store_path(store)), "output": str(WORK / "runs" / part / name),
           "model": dict(model), "inference": dict(inference),
           "training": {"seed": 0, "threads": 1, "eval_every": 0, "checkpoint_every": 0,
                        **training}}
    if evaluation:
        cfg["evaluation"] = dict(evaluation)
    return cfg


def execute(cfg: dict, evaluate: bool = True, poll_memory: bool = False) -> dict:
    """Train (and evaluate) one config unless its result.json exists; returns the result."""
    run_dir = Path(cfg["output"])
    result_path = run_dir / "result.json"
    if result_path.exists():
        result = json.loads(result_path.read_text())
        if not (RETRY_FAILED and result.get("failed")):
            return result
        if result.get("clock") and evaluate and not result.get("evaluation"):
            # training finished, only the evaluation failed: evaluate again
            ev = run_process(TOPICTK + ["evaluate", str(run_dir), "--json"],
                             WORK / "logs" / run_dir.parent.name / f"{run_dir.name}.eval.log")
            result["evaluate_seconds"] = ev["wall_seconds"]
            if ev["rc"] == 0:
                result["evaluation"] = json.loads(ev["stdout"])
                result.pop("failed", None)
            result_path.write_text(json.dumps(result, indent=1))
            return result
    cfg_path = WORK / "configs" / run_dir.parent.name / f"{run_dir.name}.yaml"
    cfg_path.parent.mkdir(parents=True, exist_ok=True)
    cfg_path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    log(f"train {run_dir.parent.name}/{run_dir.name}")
    train_cmd = TOPICTK + ["train", "-q", "--config", str(cfg_path), "--force"]
    res = run_process(train_cmd, WORK / "logs" / run_dir.parent.name / f"{run_dir.name}.train.log",
                      poll_memory)
    result = {"name": run_dir.name, "config": cfg, "config_path": rel(cfg_path),
              "train_command": "topictk train -q --config " + rel(cfg_path),
              "train": {k: v for k, v in res.items() if k != "stdout"}}
    if res["rc"] != 0:
        result["failed"] = tail(WORK / "logs" / run_dir.parent.name / f"{run_dir.name}.train.log")
        log(f"  FAILED {run_dir.name}: {result['failed'].splitlines()[-1:]}")
    else:
        run = topictk.load_run(run_dir)
        result["clock"] = {"train_seconds": run.train_seconds, "tokens_seen": run.tokens_seen}
        result["step"] = run.step
        result["metrics"] = run.metrics()
        if evaluate:
            ev = run_process(TOPICTK + ["evaluate", str(run_dir), "--json"],
                             WORK / "logs" / run_dir.parent.name / f"{run_dir.name}.eval.log")
            result["evaluate_seconds"] = ev["wall_seconds"]
            if ev["rc"] == 0:
                result["evaluation"] = json.loads(ev["stdout"])
            else:
                result["failed"] = "evaluate: " + tail(
                    WORK / "logs" / run_dir.parent.name / f"{run_dir.name}.eval.log")
    result_path.parent.mkdir(parents=True, exist_ok=True)
    result_path.write_text(json.dumps(result, indent=1))
    return result


def run_all(cfgs: list[dict], jobs: int, **kw) -> list[dict]:
    """Execute configs with ``jobs`` concurrent subprocesses, results in input order."""
    with cf.ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        return list(pool.map(lambda c: execute(c, **kw), cfgs))


def score(result: dict, key: str) -> float:
    value = (result.get("evaluation") or {}).get(key)
    if value is None or result.get("failed") or not math.isfinite(value):
        return math.inf
    return float(value)


# ----------------------------------------------------------------------------- part 1: NIPS
def nips_configs(D: int):
    """Stage-1 grid, stage-2 (SGRLD c) and final configs, built lazily from results."""
    model = NIPS["model"]
    size = {"batch": D, "mb50": NIPS["mb"]}

    def sgrld(mode, a, b, c, sweeps, updates, samples, tag):
        name = f"{tag}-sgrld-{mode}-s{sweeps}-a{a:g}-b{b:g}-c{c:g}-u{updates}"
        return make_config("nips", name, "nips12", model,
                           {"algorithm": "sgrld", "iterations": updates, "batch_size": size[mode],
                            "sweeps": sweeps, "step": {"a": a, "b": b, "c": c},
                            "samples": samples}, {})

    def vi(alg, mode, tau0, kappa, updates, tag):
        inf = {"algorithm": alg, "iterations": updates, "batch_size": size[mode],
               "tau0": tau0, "kappa": kappa}
        if alg == "hsvg":
            inf["sweeps"] = NIPS["hsvg_sweeps"]
        return make_config("nips", f"{tag}-{alg}-{mode}-t{tau0:g}-k{kappa:g}-u{updates}",
                           "nips12", model, inf, {})

    return size, sgrld, vi


def part_nips(args) -> None:
    manifest = ensure_store("nips12")
    D = manifest["counts"]["train_documents"]
    _, sgrld, vi = nips_configs(D)
    G, F = NIPS["grid_updates"], NIPS["final_updates"]
    t0 = time.perf_counter()
    # stage 1: every grid point, plus Gibbs (no step size)
    stage1 = [make_config("nips", f"final-gibbs-{NIPS['gibbs_sweeps']}", "nips12", NIPS["model"],
                          {"algorithm": "gibbs", "iterations": NIPS["gibbs_sweeps"]}, {})]
    for mode in ("batch", "mb50"):
        for alg in ("ovb", "hsvg"):
            stage1 += [vi(alg, mode, t, k, G[mode][alg], "grid") for t, k in NIPS["vi_grid"][mode]]
        grid = NIPS["sgrld_grid"][mode]
        stage1 += [sgrld(mode, a, b, 0.55, NIPS["grid_sweeps"], G[mode]["sgrld"], 1, "grid")
                   for a in grid["a"] for b in grid["b"]]
    # longest first so the two workers finish together
    stage1.sort(key=lambda c: -(c["inference"]["iterations"] *
                                (10 if c["inference"]["algorithm"] == "ovb" else 1)))
    run_all(stage1, args.jobs)
    stage2, finals = [], []
    for mode in ("batch", "mb50"):
        grid = NIPS["sgrld_grid"][mode]
        res = [execute(sgrld(mode, a, b, 0.55, NIPS["grid_sweeps"], G[mode]["sgrld"], 1, "grid"))
               for a in grid["a"] for b in grid["b"]]
        best = min(res, key=lambda r: score(r, "perplexity_train_heldout"))
        a, b = best["config"]["inference"]["step"]["a"], best["config"]["inference"]["step"]["b"]
        stage2 += [sgrld(mode, a, b, c, NIPS["grid_sweeps"], G[mode]["sgrld"], 1, "grid")
                   for c in NIPS["sgrld_c"] if c != 0.55]
    run_all(stage2, args.jobs)
    for mode in ("batch", "mb50"):
        a, b, c = best_sgrld(mode, D)
        finals += [sgrld(mode, a, b, c, s, F[mode]["sgrld"], 10, "final") for s in (5, 10)]
        for alg in ("ovb", "hsvg"):
            tau0, kappa = best_vi(alg, mode, D)
            finals.append(vi(alg, mode, tau0, kappa, F[mode][alg], "final"))
    finals.sort(key=lambda c: -(c["inference"]["iterations"] *
                                (10 if c["inference"]["algorithm"] == "ovb" else 1)
                                * (30 if c["inference"]["batch_size"] == D else 1)))
    run_all(finals, args.jobs)
    long = NIPS["batch_long_grid"]
    extra = [sgrld("batch", a, b, c, 5, F["batch"]["sgrld"], 10, "final")
             for a, b, c in long["sgrld"]]
    extra += [vi(alg, "batch", tau0, kappa, F["batch"][alg], "final")
              for alg in ("ovb", "hsvg") for tau0, kappa in long[alg]]
    extra.sort(key=lambda c: -(c["inference"]["iterations"] *
                               {"ovb": 2.5, "hsvg": 1.6, "sgrld": 1}[c["inference"]["algorithm"]]))
    run_all(extra, args.jobs)
    log(f"nips done in {time.perf_counter() - t0:.0f} s (this invocation)")


def nips_grid_results(alg: str, mode: str, D: int) -> list[dict]:
    _, sgrld, vi = nips_configs(D)
    out = []
    for path in sorted((WORK / "runs" / "nips").glob(f"grid-{alg}-{mode}-*/result.json")):
        out.append(json.loads(path.read_text()))
    return out


def best_sgrld(mode: str, D: int) -> tuple[float, float, float]:
    res = nips_grid_results("sgrld", mode, D)
    best = min(res, key=lambda r: score(r, "perplexity_train_heldout"))
    s = best["config"]["inference"]["step"]
    return s["a"], s["b"], s["c"]


def best_vi(alg: str, mode: str, D: int) -> tuple[float, float]:
    res = nips_grid_results(alg, mode, D)
    best = min(res, key=lambda r: score(r, "perplexity_train_heldout"))
    return best["config"]["inference"]["tau0"], best["config"]["inference"]["kappa"]


# ----------------------------------------------------------------------------- part 2: 20news
def news_inference(alg: str, extra: dict, iterations: int) -> dict:
    inf = {"algorithm": alg, "iterations": iterations}
    if alg != "gibbs":
        inf["batch_size"] = NEWS["batch"]
    inf.update(extra)
    return inf


def news_label(alg: str, extra: dict) -> str:
    if alg == "sgrld":
        s = extra["step"]
        return f"sgrld-a{s['a']:g}-b{s['b']:g}-c{s['c']:g}"
    if alg in ("ovb", "hsvg"):
        return f"{alg}-t{extra['tau0']:g}-k{extra['kappa']:g}"
    return alg


def news_pilot_configs() -> list[dict]:
    cfgs = []
    for alg, settings in NEWS["pilot"].items():
        for extra in settings:
            cfgs.append(make_config("news", "pilot-" + news_label(alg, extra), "20news",
                                    NEWS["model"], news_inference(alg, extra, 10**7),
                                    {"time_limit": NEWS["pilot_limit"]}))
    return cfgs


def news_best() -> dict:
    """Per algorithm: the best pilot result (lowest test perplexity)."""
    best = {}
    for cfg in news_pilot_configs():
        r = execute(cfg)
        alg = cfg["inference"]["algorithm"]
        if alg not in best or score(r, "perplexity") < score(best[alg], "perplexity"):
            best[alg] = r
    return best


def news_final_config(alg: str, pilot: dict) -> dict:
    inf = dict(pilot["config"]["inference"])
    rate = pilot["step"] / max(pilot["clock"]["train_seconds"], 1e-9)   # steps per train second
    eval_every = max(1, int(round(rate * NEWS["budget"] / NEWS["points"])))
    eval_cost = pilot.get("evaluate_seconds", 10.0)
    limit = NEWS.get("final_limit") or NEWS["budget"] + (NEWS["points"] + 2) * eval_cost + 30.0
    extra = {k: v for k, v in inf.items() if k not in ("algorithm", "iterations", "batch_size")}
    return make_config("news", "final-" + news_label(alg, extra), "20news", NEWS["model"],
                       inf, {"time_limit": round(limit), "eval_every": eval_every})


def part_news(args) -> None:
    ensure_store("20news")
    t0 = time.perf_counter()
    run_all(news_pilot_configs(), args.jobs)
    best = news_best()
    finals = [news_final_config(alg, best[alg]) for alg in ALGOS]
    run_all(finals, args.jobs)
    log(f"news done in {time.perf_counter() - t0:.0f} s (this invocation)")


def news_finals() -> dict:
    best = news_best()
    return {alg: execute(news_final_config(alg, best[alg])) for alg in ALGOS}


def value_at(metrics: list[dict], seconds: float) -> float | None:
    """Point perplexity at ``seconds`` of training, linear in train_seconds between points."""
    pts = [(m["train_seconds"], m["perplexity_point"]) for m in metrics
           if m.get("perplexity_point") is not None]
    if not pts or seconds < pts[0][0] or seconds > pts[-1][0]:
        return None
    for (s0, p0), (s1, p1) in zip(pts, pts[1:]):
        if s0 <= seconds <= s1:
            return p0 if s1 == s0 else p0 + (p1 - p0) * (seconds - s0) / (s1 - s0)
    return pts[-1][1]


# ----------------------------------------------------------------------------- part 3
# ----------------------------------------------------------------------------- part 4
def part_memory(args) -> list[dict]:
    rows = []
    cfgs = []
    for store in ("20news", "20news_x2"):
        ensure_store(store)
        for alg in MEMORY["algos"]:
            extra = {"step": {"a": 0.01, "b": 1000, "c": 0.55}} if alg == "sgrld" else \
                {"tau0": 64, "kappa": 0.7}
            inf = news_inference(alg, extra, MEMORY["updates"])
            inf["batch_size"] = MEMORY["batch"]
            cfgs.append(make_config("memory", f"{alg}-{store}", store, NEWS["model"], inf, {}))
    # one at a time: peak RSS does not depend on contention, but keep it clean
    for cfg in cfgs:
        r = execute(cfg, evaluate=False, poll_memory=True)
        rows.append(r)
    return rows


# ----------------------------------------------------------------------------- report
def fmt(x, digits=1) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "—"
    return f"{x:,.{digits}f}"


def plot_news(finals: dict) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    colours = {"gibbs": "black", "sgrld": "tab:red", "ovb": "tab:blue", "hsvg": "tab:green"}
    for alg, r in finals.items():
        pts = [(m["train_seconds"], m["perplexity_point"]) for m in r.get("metrics", [])
               if m.get("perplexity_point") is not None]
        if pts:
            xs, ys = zip(*pts)
            ax.plot(xs, ys, marker="o", ms=3, label=f"{alg} ({news_label(alg, _extra(r))})",
                    color=colours[alg])
    ax.set_xlabel("training seconds (evaluation excluded), 1 thread")
    ax.set_ylabel("point perplexity (test, 80/20 document completion)")
    ax.set_title("20 Newsgroups, K = 128, alpha = 0.1, beta = 0.01, |B| = 64")
    ax.axvline(NEWS["budget"], color="grey", lw=0.5, ls="--")
    lo = min((m["perplexity_point"] for r in finals.values() for m in r.get("metrics", [])
              if m.get("perplexity_point")), default=500)
    ax.set_ylim(lo * 0.95, lo * 2.2)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(PLOTS["news"], dpi=120)
    plt.close(fig)


def _extra(r: dict) -> dict:
    return {k: v for k, v in r["config"]["inference"].items()
            if k not in ("algorithm", "iterations", "batch_size")}


def plot_nips(rows: list[tuple[str, str, float]]) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    labels = [f"{alg}\n{mode}" for alg, mode, _ in rows]
    vals = [v if math.isfinite(v) else 0 for _, _, v in rows]
    colours = {"gibbs": "black", "sgrld": "tab:red", "ovb": "tab:blue", "hsvg": "tab:green"}
    ax.bar(range(len(rows)), vals, color=[colours[a.split()[0]] for a, _, _ in rows])
    ax.set_xticks(range(len(rows)), labels, fontsize=7)
    ax.set_ylabel("held-out perplexity (Protocol B)")
    ax.set_title("NIPS 1987-1999, K = 50, alpha = beta = 0.01 (cf. Patterson & Teh Fig. 2a)")
    for i, v in enumerate(vals):
        ax.text(i, v, f"{v:.0f}", ha="center", va="bottom", fontsize=7)
    fig.tight_layout()
    fig.savefig(PLOTS["nips"], dpi=120)
    plt.close(fig)


def report_nips(lines: list[str]) -> None:
    manifest = json.loads((store_path("nips12") / "manifest.json").read_text())
    c = manifest["counts"]
    D = c["train_documents"]
    size, sgrld, vi = nips_configs(D)
    lines += ["## 1. NIPS, Protocol B (Patterson & Teh 2013, Figure 2a in kind)", "",
              f"Store: `{shlex.join(prepare_command('nips12'))}` — {D:,} documents, "
              f"V = {c['vocabulary']:,}, {c['train_tokens']:,} observed (training) tokens, "
              f"{c.get('train_heldout_tokens', 0):,} held-out tokens (20 % of every document). "
              f"K = 50, α = β = 0.01, seed 0, 1 thread per run, two runs at a time. "
              "Score: `perplexity_train_heldout` of `topictk evaluate --json` "
              "(Gibbs: θ̂ from each document's n_dk in the saved samples; SGRLD/HSVG: fresh "
              "local Gibbs chains on the observed tokens, 50 sweeps/25 burn-in, per saved "
              "sample; OVB: cold E-step).", "",
              "Batch mode = the whole corpus (batch_size = D) in every update (R_B = 1); "
              f"mini-batch mode = |B| = {NIPS['mb']} (R_B = {D / NIPS['mb']:.1f}, "
              f"{D // NIPS['mb']} updates per epoch). The grid runs are short "
              f"(updates: batch {NIPS['grid_updates']['batch']}, mini-batch "
              f"{NIPS['grid_updates']['mb50']}); SGRLD's grid uses {NIPS['grid_sweeps']} "
              "sweeps (half burn-in), c = 0.55 over (a, b), then c over the best (a, b); "
              "SGRLD grid runs score the final state (samples: 1). "
              "The long runs use the best setting; SGRLD keeps 10 samples after half of the "
              "updates.", ""]
    # grid tables
    for mode in ("batch", "mb50"):
        lines += [f"**Grid, {'batch mode' if mode == 'batch' else 'mini-batches of 50'}** "
                  "(held-out perplexity; train s = training seconds)", "",
                  "| algorithm | setting | updates | train s | perplexity |",
                  "| --- | --- | ---: | ---: | ---: |"]
        for alg in ("sgrld", "ovb", "hsvg"):
            res = nips_grid_results(alg, mode, D)
            res.sort(key=lambda r: score(r, "perplexity_train_heldout"))
            for r in res:
                inf = r["config"]["inference"]
                setting = (f"a={inf['step']['a']:g}, b={inf['step']['b']:g}, "
                           f"c={inf['step']['c']:g}, sweeps {inf['sweeps']}"
                           if alg == "sgrld" else f"τ0={inf['tau0']:g}, κ={inf['kappa']:g}")
                note = " (failed)" if r.get("failed") else ""
                lines.append(f"| {alg} | {setting}{note} | {inf['iterations']} | "
                             f"{fmt((r.get('clock') or {}).get('train_seconds'))} | "
                             f"{fmt(score(r, 'perplexity_train_heldout'))} |")
        lines.append("")
    # finals
    lines += ["**Long runs of the best settings**", "",
              "| algorithm | mode | setting | updates (epochs) | train s | wall s (train+eval) "
              "| held-out perplexity |", "| --- | --- | --- | ---: | ---: | ---: | ---: |"]
    bars = []
    for path in sorted((WORK / "runs" / "nips").glob("final-*/result.json")):
        r = json.loads(path.read_text())
        inf = r["config"]["inference"]
        alg = inf["algorithm"]
        bs = inf.get("batch_size", D)
        mode = "batch" if bs >= D else f"B = {bs}"
        if alg == "sgrld":
            setting = (f"a={inf['step']['a']:g}, b={inf['step']['b']:g}, c={inf['step']['c']:g}, "
                       f"sweeps {inf['sweeps']}, 10 samples")
        elif alg == "gibbs":
            setting = f"burn-in {inf['iterations'] // 2}, 10 samples"
        else:
            setting = f"τ0={inf['tau0']:g}, κ={inf['kappa']:g}" + (
                f", sweeps {inf['sweeps']}" if alg == "hsvg" else "")
        epochs = inf["iterations"] * min(bs, D) / D
        ppl = score(r, "perplexity_train_heldout")
        lines.append(f"| {alg} | {mode} | {setting} | {inf['iterations']} ({epochs:.1f}) | "
                     f"{fmt((r.get('clock') or {}).get('train_seconds'))} | "
                     f"{fmt(r['train']['wall_seconds'] + r.get('evaluate_seconds', 0), 0)} | "
                     f"**{fmt(ppl)}** |")
        label = alg + (f" s{inf['sweeps']}" if alg == "sgrld" else "")
        bars.append((label, "batch" if bs >= D else f"B={bs}", ppl))
    lines.append("")
    best = {}                      # the plot shows the best run of each algorithm and mode
    for label, mode, ppl in bars:
        key = (label.split()[0], mode)
        if key not in best or ppl < best[key][2]:
            best[key] = (label.split()[0], mode, ppl)
    bars = list(best.values())
    order = {"gibbs": 0, "sgrld": 1, "ovb": 2, "hsvg": 3}
    bars.sort(key=lambda b: (b[1] != "batch", order[b[0].split()[0]], b[0]))
    if bars:
        plot_nips(bars)
        lines += [f"Plot: ![nips](../{PLOTS['nips'].parent.name}/{PLOTS['nips'].name})", ""]


def report_news(lines: list[str]) -> dict:
    manifest = json.loads((store_path("20news") / "manifest.json").read_text())
    c = manifest["counts"]
    lines += ["## 2. 20 Newsgroups, K = 128: point perplexity against training time", "",
              f"Store: `{shlex.join(prepare_command('20news'))}` — {c['train_documents']:,} "
              f"training documents ({c['train_tokens']:,} tokens), {c['test_documents']:,} test "
              f"documents ({c['test_observed_tokens']:,} observed / "
              f"{c['test_heldout_tokens']:,} held-out tokens), V = {c['vocabulary']:,}. "
              f"α = 0.1, β = 0.01, |B| = {NEWS['batch']} (sgrld, ovb, hsvg; sweeps 10 with "
              "5 burn-in for sgrld/hsvg), 1 thread, two runs at a time. Point perplexity = "
              "metrics.jsonl `perplexity_point` (S = 1, Gibbs fold-in 50/25 for gibbs/sgrld/"
              "hsvg, cold E-step for ovb); `train_seconds` excludes evaluation.", "",
              f"**Pilot** (training.time_limit = {NEWS['pilot_limit']:g} s each, then "
              "`topictk evaluate --json`, test perplexity of the final state):", "",
              "| algorithm | setting | updates in pilot | train s | perplexity |",
              "| --- | --- | ---: | ---: | ---: |"]
    for cfg in news_pilot_configs():
        r = execute(cfg)
        alg = cfg["inference"]["algorithm"]
        lines.append(f"| {alg} | {news_label(alg, _extra(r))} | {r.get('step', '—')} | "
                     f"{fmt((r.get('clock') or {}).get('train_seconds'))} | "
                     f"{fmt(score(r, 'perplexity'))} |")
    finals = news_finals()
    lines += ["", f"**Fixed budget** (≈ {NEWS['budget']:g} training seconds each; "
              "training.time_limit counts wall time including evaluation, so it was set to "
              "the budget plus the expected evaluation time; the table interpolates the "
              "curves at fixed training seconds):", "",
              "| algorithm | setting | eval_every | updates | train s | "
              + " | ".join(f"ppl @ {s:g} s" for s in (30, 60, 120, 180, 240)) + " | final ppl |",
              "| --- | --- | ---: | ---: | ---: |" + " ---: |" * 6]
    for alg, r in finals.items():
        ms = r.get("metrics", [])
        vals = [value_at(ms, s) for s in (30, 60, 120, 180, 240)]
        last = ms[-1]["perplexity_point"] if ms else None
        lines.append(f"| {alg} | {news_label(alg, _extra(r))} | "
                     f"{r['config']['training']['eval_every']} | {r.get('step', '—')} | "
                     f"{fmt((r.get('clock') or {}).get('train_seconds'))} | "
                     + " | ".join(fmt(v) for v in vals) + f" | {fmt(last)} |")
    plot_news(finals)
    lines += ["", f"Plot: ![20news](../{PLOTS['news'].parent.name}/{PLOTS['news'].name})", ""]
    return finals


def report_memory(lines: list[str]) -> None:
    rows = []
    for alg in MEMORY["algos"]:
        for store in ("20news", "20news_x2"):
            p = WORK / "runs" / "memory" / f"{alg}-{store}" / "result.json"
            if p.exists():
                rows.append((alg, store, json.loads(p.read_text())))
    if not rows:
        return
    lines += ["## 3. Streaming memory", "",
              f"`topictk train` of sgrld (a = 0.01, b = 1000, c = 0.55) and hsvg (τ0 = 64, "
              f"κ = 0.7), K = 128, {MEMORY['updates']} updates of |B| = {MEMORY['batch']}, "
              "eval_every 0, checkpoint_every 0, one run at a time in its own subprocess. "
              "`20news_x2` = the training docword with every document twice "
              f"(`{rel(WORK / 'data' / 'docword.train_x2.txt.gz')}`, written by the script), "
              f"prepared with the same test split: `{shlex.join(prepare_command('20news_x2'))}`. "
              "Peak RSS = ru_maxrss from wait4; RssAnon/RssFile = peaks polled from "
              "/proc/PID/status every 20 ms (anonymous memory vs. mapped files such as the "
              "memory-mapped store).", "",
              "| algorithm | store | train docs | train tokens | store size MB | peak RSS MB | "
              "peak RssAnon MB | peak RssFile MB | train s |",
              "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for alg, store, r in rows:
        m = json.loads((store_path(store) / "manifest.json").read_text())["counts"]
        tr = r["train"]
        lines.append(f"| {alg} | {store} | {m['train_documents']:,} | {m['train_tokens']:,} | "
                     f"{dir_size(store_path(store)) / 1e6:.2f} | {tr['maxrss_kb'] / 1024:.1f} | "
                     f"{tr.get('rss_anon_kb', 0) / 1024:.1f} | "
                     f"{tr.get('rss_file_kb', 0) / 1024:.1f} | "
                     f"{fmt((r.get('clock') or {}).get('train_seconds'))} |")
    lines.append("")


def part_report(args) -> None:
    PLOTS["news"] = h.figure_path("minibatch_20news_ppl_vs_time.png", args.record)
    PLOTS["nips"] = h.figure_path("minibatch_nips_protocol_b.png", args.record)
    lines = ["# Mini-batch MCMC: SGRLD and HSVG", "",
             f"Reported {h.now_utc():%Y-%m-%d %H:%M} UTC by `{h.command_line()}` from the runs of "
             "`benchmarks/work/minibatch/` (every run's YAML is in `configs/`, its result in "
             "`runs/PART/NAME/result.json`); the machine is shared with other jobs.", "",
             *h.machine_info("matplotlib"), ""]
    if (store_path("nips12") / "manifest.json").exists():
        report_nips(lines)
    if (store_path("20news") / "manifest.json").exists() and \
            (WORK / "runs" / "news").exists():
        report_news(lines)
    report_memory(lines)
    if args.notes and Path(args.notes).exists():
        lines += [Path(args.notes).read_text().rstrip(), ""]
    text = "\n".join(lines).rstrip() + "\n"
    print(text)
    h.write_results(h.results_path(NAME, args.record), text)


def quick_settings() -> None:
    """Tiny grids and short runs (--quick): checks that every part runs, in a few minutes."""
    global WORK
    WORK = h.WORK / "minibatch_quick"
    NIPS.update(grid_updates={"batch": {"sgrld": 2, "ovb": 2, "hsvg": 2},
                              "mb50": {"sgrld": 10, "ovb": 10, "hsvg": 10}},
                final_updates={"batch": {"sgrld": 4, "ovb": 4, "hsvg": 4},
                               "mb50": {"sgrld": 20, "ovb": 20, "hsvg": 20}},
                gibbs_sweeps=10, sgrld_grid={"batch": {"a": [0.1], "b": [10]},
                                             "mb50": {"a": [0.01], "b": [1000]}},
                sgrld_c=[0.55], vi_grid={"batch": [(64, 0.55)], "mb50": [(64, 0.55)]},
                batch_long_grid={"sgrld": [], "ovb": [], "hsvg": []})
    NEWS.update(budget=6.0, points=3, pilot_limit=2.0, final_limit=6.0,
                pilot={"sgrld": [{"step": {"a": 0.01, "b": 1000, "c": 0.55}}],
                       "ovb": [{"tau0": 64, "kappa": 0.7}], "hsvg": [{"tau0": 64, "kappa": 0.7}],
                       "gibbs": [{}]})
    MEMORY.update(updates=10)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("part", choices=("nips", "news", "memory", "report", "all"))
    parser.add_argument("--jobs", type=int, default=2, help="concurrent training subprocesses")
    parser.add_argument("--retry-failed", action="store_true",
                        help="rerun (or only re-evaluate) runs whose result records a failure")
    parser.add_argument("--quick", action="store_true",
                        help="tiny grids and short runs, under benchmarks/work/minibatch_quick")
    parser.add_argument("--record", action="store_true",
                        help="report: write benchmarks/results/minibatch.md and the figures")
    parser.add_argument("--notes", default=None,
                        help="report: a Markdown file appended to the report (findings)")
    args = parser.parse_args(argv)
    global RETRY_FAILED
    RETRY_FAILED = args.retry_failed
    if args.quick:
        quick_settings()
    if args.notes is None:
        args.notes = str(WORK / "notes.md")
    WORK.mkdir(parents=True, exist_ok=True)
    parts = ("nips", "news", "memory", "report") if args.part == "all" else (args.part,)
    for part in parts:
        {"nips": part_nips, "news": part_news, "memory": part_memory,
         "report": part_report}[part](args)


if __name__ == "__main__":
    main()
