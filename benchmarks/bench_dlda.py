#!/usr/bin/env python3
"""Deep LDA benchmark: Table 1 of Cong et al. (2017) on 20News.

Parts (the report ``dlda.md`` is written after each; ``--record``: benchmarks/results/):

* ``table``: the twelve 20News configs ``configs/20news_dlda_{tlasgr,tlfsgr,sgrld,gibbs}_
  {128,128-64,128-64-32}.yaml`` (2000 burn-in + 1500 collected updates for the mini-batch
  samplers, 2000 + 1500 sweeps of the whole corpus for batch Gibbs). Every run is resumed
  from its last checkpoint, so a long table can be spread over several sittings: ``--budget``
  wall-clock seconds are shared by the configs of one sitting, and each training process is
  stopped with SIGTERM when its share runs out (it finishes the current step and writes a
  checkpoint). Finished runs are scored by ``topictk evaluate`` (the persistent test
  chain's rate-accumulated perplexity, §8.11, and a point perplexity); unfinished ones show the
  latest value in their metrics.
* ``memory``: peak memory of ``topictk train`` (TLASGR, 128-64-32, mini-batches of 200) on
  20News and on 20News with every training document twice (the stores of
  ``benchmarks/bench_minibatch.py``): a deep model streams its mini-batches from the
  memory-mapped store, so the peak should not grow with the number of training documents.
* ``plot``: point perplexity against training time from the Table 1 runs' metrics (the paper's
  Figure 1a is the 128 panel), ``dlda_20news_ppl_vs_time.png`` (needs matplotlib).

The time of one TLASGR update is measured by ``studies/dlda_update_speed.py``.

Usage (from the repository root, in the project's virtual environment)::

    python benchmarks/bench_dlda.py table --budget 3600 --record       # one sitting
    python benchmarks/bench_dlda.py table --configs tlasgr_128 gibbs --budget 600
    python benchmarks/bench_dlda.py memory --record
    python benchmarks/bench_dlda.py plot --record
    python benchmarks/bench_dlda.py report --record                    # rewrite the report
    python benchmarks/bench_dlda.py table --configs tlasgr_128 --budget 70 --quick   # smoke

The store is ``stores/20news`` (prepared here when missing, with the command in the configs);
run directories are ``runs/20news_dlda_*`` (``--quick``: ``benchmarks/work/dlda_quick/``, with
the configs' iterations cut to 60); what the sittings measured is kept in
``benchmarks/work/bench_dlda.json`` and the memory rows in ``benchmarks/work/
bench_dlda_memory.json`` (git-ignored).
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import harness as h
import yaml

import topictk

HERE, REPO = h.HERE, h.REPO
DATA = h.DATA / "20news_gan2015"
STORE = REPO / "stores" / "20news"
WORK = h.WORK
STATE_FILE = WORK / "bench_dlda.json"
MEMORY_FILE = WORK / "bench_dlda_memory.json"
NAME = "dlda"
PLOT = {"path": h.FIGURES / "dlda_20news_ppl_vs_time.png"}
RUNS = {"dir": REPO / "runs", "iterations": None}     # --quick: elsewhere, shorter
MEMORY = {"layers": [128, 64, 32], "updates": 100, "batch": 200,
          "stores": ("20news", "20news_x2")}

METHODS = ["tlasgr", "tlfsgr", "sgrld", "gibbs"]
SIZES = ["128-64-32", "128-64", "128"]
PAPER = {("tlasgr", "128-64-32"): 757, ("tlasgr", "128-64"): 758, ("tlasgr", "128"): 770,
         ("tlfsgr", "128-64-32"): 760, ("tlfsgr", "128-64"): 759, ("tlfsgr", "128"): 772,
         ("sgrld", "128-64-32"): 775, ("sgrld", "128-64"): 770, ("sgrld", "128"): 777,
         ("gibbs", "128-64-32"): 752, ("gibbs", "128-64"): 754, ("gibbs", "128"): 768}


# --------------------------------------------------------------------------- helpers
def topictk_cmd() -> list[str]:
    return list(h.TOPICTK)


def ensure_store() -> None:
    h.ensure_store("20news_gan2015", out=STORE)


def load_state() -> dict:
    if STATE_FILE.exists():
        return json.loads(STATE_FILE.read_text())
    return {"runs": {}, "sittings": []}


def save_state(state: dict) -> None:
    WORK.mkdir(parents=True, exist_ok=True)
    tmp = STATE_FILE.with_suffix(".tmp")
    tmp.write_text(json.dumps(state, indent=1, sort_keys=True))
    os.replace(tmp, STATE_FILE)


# --------------------------------------------------------------------------- table
def config_path(method: str, size: str) -> Path:
    """The config of a Table 1 row (``--quick``: a copy with fewer iterations)."""
    path = REPO / "configs" / f"20news_dlda_{method}_{size}.yaml"
    if RUNS["iterations"] is None:
        return path
    data = yaml.safe_load(path.read_text())
    data["corpus"] = str(STORE)
    data["output"] = str(run_dir(method, size))
    inf = data["inference"]
    inf["iterations"] = RUNS["iterations"]
    inf["burn_in"] = RUNS["iterations"] // 2
    if "point_perplexity" in inf:
        inf["point_perplexity"] = {"iterations": 20, "last": 10, "thin": 2,
                                   "every": RUNS["iterations"] // 2}
    data.setdefault("training", {})["checkpoint_every"] = max(1, RUNS["iterations"] // 3)
    return h.write_config(RUNS["dir"] / "configs" / path.name, data)


def run_dir(method: str, size: str) -> Path:
    return RUNS["dir"] / f"20news_dlda_{method}_{size}"


def run_status(method: str, size: str) -> dict:
    """What the run directory says: steps done, target, status, clock, last metrics."""
    config = yaml.safe_load(config_path(method, size).read_text())
    out = {"iterations": int(config["inference"]["iterations"]), "step": 0,
           "status": "not started", "train_seconds": 0.0, "eval_seconds": 0.0}
    d = run_dir(method, size)
    steps = h.checkpoint_steps(d)
    run = None
    if (d / "model.npz").exists():
        run = topictk.load_run(d)
    if steps and (run is None or steps[-1] > run.step):
        run = topictk.load_run(d, checkpoint=steps[-1])
    if run is not None:
        out.update(step=run.step, status=run.status, train_seconds=run.train_seconds)
    metrics = h.read_metrics(d)
    out["eval_seconds"] = sum(m.get("eval_seconds", 0.0) for m in metrics)
    last = [m for m in metrics if m.get("perplexity") is not None]
    if last:
        out["chain_perplexity"] = last[-1]["perplexity"]
    points = [m for m in metrics if isinstance(m.get("perplexity_point"), float)
              and m["perplexity_point"] == m["perplexity_point"]]
    if points:
        out["point_perplexity"] = points[-1]["perplexity_point"]
        out["point_step"] = points[-1]["step"]
    return out


def train_for(method: str, size: str, seconds: float, threads: int | None) -> float:
    """Train (or resume) one config for at most ``seconds`` of wall-clock time (training and
    its evaluations): at the deadline the process gets SIGTERM, finishes its current step,
    writes a checkpoint and exits. Returns the wall time used."""
    d = run_dir(method, size)
    cmd = topictk_cmd() + ["train", "--config", str(config_path(method, size)), "-q"]
    if threads:
        cmd += ["--set", f"training.threads={threads}"]
    if any((d / "checkpoints").glob("step-*.npz")):
        cmd.append("--resume")
    elif d.exists() and any(d.iterdir()):
        cmd.append("--force")            # a run that never reached its first checkpoint
    began = time.perf_counter()
    print("$", " ".join(cmd[2:]), f"(for at most {seconds:.0f} s)", file=sys.stderr)
    proc = subprocess.Popen(cmd, cwd=REPO)
    try:
        proc.wait(timeout=max(seconds, 1.0))
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGTERM)
        proc.wait()
    return time.perf_counter() - began


def evaluate(method: str, size: str, threads: int | None) -> dict:
    cmd = topictk_cmd() + ["evaluate", str(run_dir(method, size)), "--json"]
    if threads:
        cmd += ["--threads", str(threads)]
    began = time.perf_counter()
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    if done.returncode != 0:
        return {"error": done.stderr.strip().splitlines()[-1] if done.stderr else "failed"}
    data = json.loads(done.stdout)
    data["evaluate_seconds"] = time.perf_counter() - began
    return data


def table(args, state: dict) -> None:
    ensure_store()
    selected = [(m, s) for m in METHODS for s in SIZES
                if not args.configs or any(c in (f"{m}_{s}", m, s) for c in args.configs)]
    deadline = time.monotonic() + args.budget
    sitting = {"started": _dt.datetime.now(_dt.timezone.utc).isoformat(), "trained": []}
    todo = [(m, s) for m, s in selected if run_status(m, s)["status"] != "completed"]
    for i, (m, s) in enumerate(todo):
        left = deadline - time.monotonic()
        if left < 60:
            break
        share = left / (len(todo) - i) if args.share else left
        key = f"{m}_{s}"
        update_entry(state, key, run_status(m, s))
        used = train_for(m, s, share, args.threads)
        entry = state["runs"][key]
        entry["wall_seconds"] += used
        entry["sittings"] += 1
        sitting["trained"].append({"config": key, "seconds": used})
        save_state(state)
    for m, s in selected:
        status = run_status(m, s)
        entry = update_entry(state, f"{m}_{s}", status)
        if status["status"] == "completed" and "evaluation" not in entry:
            entry["evaluation"] = evaluate(m, s, args.threads)
            entry["evaluation"]["scored_state"] = [status["step"], status["train_seconds"]]
        save_state(state)
    state["sittings"].append(sitting)
    save_state(state)


# --------------------------------------------------------------------------- memory
def memory(args) -> list[dict]:
    """Peak RSS of TLASGR training on 20News and on 20News with every document twice."""
    import bench_minibatch as mb

    rows = []
    for name in MEMORY["stores"]:
        manifest = mb.ensure_store(name)
        out = WORK / "memory" / name
        raw = {"corpus": str(mb.store_path(name)), "output": str(out / "run"),
               "model": {"family": "dlda", "layers": MEMORY["layers"]},
               "inference": {"algorithm": "tlasgr", "iterations": MEMORY["updates"],
                             "burn_in": MEMORY["updates"] // 2,
                             "batch_size": MEMORY["batch"]},
               "training": {"seed": 1, "threads": 1, "eval_every": 0, "checkpoint_every": 0}}
        out.mkdir(parents=True, exist_ok=True)
        config = out / "config.yaml"
        config.write_text(json.dumps(raw, indent=1))          # JSON is YAML
        cmd = topictk_cmd() + ["train", "-q", "--force", "--config", str(config)]
        print("$", " ".join(cmd[2:]), file=sys.stderr)
        res = mb.run_process(cmd, out / "train.log", poll_memory=True)
        if res["rc"] != 0:
            raise SystemExit(f"train failed on {name}; see {out / 'train.log'}")
        counts = manifest["counts"]
        rows.append({"store": name, "train_documents": counts["train_documents"],
                     "train_tokens": counts["train_tokens"],
                     "store_bytes": mb.dir_size(mb.store_path(name)),
                     "maxrss_kb": res["maxrss_kb"], "rss_anon_kb": res["rss_anon_kb"],
                     "rss_file_kb": res["rss_file_kb"],
                     "train_seconds": topictk.load_run(out / "run").train_seconds,
                     "command": "topictk " + " ".join(cmd[3:]), "config": raw})
        print(f"{name}: peak RSS {res['maxrss_kb'] / 1024:.1f} MiB", file=sys.stderr)
    return rows


def memory_lines(rows: list[dict] | None) -> list[str]:
    L = ["## Streaming memory of a deep model", ""]
    if not rows:
        return L + ["Not measured yet: `python benchmarks/bench_dlda.py memory`.", ""]
    L += [f"`topictk train` of TLASGR, layers {'-'.join(map(str, MEMORY['layers']))}, "
          f"{MEMORY['updates']} updates of {MEMORY['batch']} documents (full local chain), "
          "one thread, no evaluation, one run at a time in its own process. `20news_x2` is the "
          "20News training docword with every document twice, prepared with the same test "
          "split (`python benchmarks/bench_minibatch.py memory` writes it). Peak RSS = "
          "ru_maxrss from wait4; RssAnon / RssFile = peaks polled from /proc/PID/status every "
          "20 ms (anonymous memory against mapped files such as the memory-mapped store).", "",
          "| store | train docs | train tokens | store MB | peak RSS MiB | peak RssAnon MiB | "
          "peak RssFile MiB | train s |",
          "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        L.append(f"| {r['store']} | {r['train_documents']:,} | {r['train_tokens']:,} | "
                 f"{r['store_bytes'] / 1e6:.2f} | {r['maxrss_kb'] / 1024:.1f} | "
                 f"{r['rss_anon_kb'] / 1024:.1f} | {r['rss_file_kb'] / 1024:.1f} | "
                 f"{r['train_seconds']:.1f} |")
    if len(rows) == 2:
        a, b = rows
        L += ["", f"Doubling the training documents changes the peak RSS by "
              f"{(b['maxrss_kb'] - a['maxrss_kb']) / 1024:+.1f} MiB "
              f"({100 * (b['maxrss_kb'] / a['maxrss_kb'] - 1):+.1f} %) and the anonymous "
              f"memory by {(b['rss_anon_kb'] - a['rss_anon_kb']) / 1024:+.1f} MiB."]
    return L + [""]


# --------------------------------------------------------------------------- plot
def curves(method: str, size: str) -> dict:
    """(train seconds, point perplexity) and (train seconds, test-chain perplexity) of a run."""
    point, chain = [], []
    for m in h.read_metrics(run_dir(method, size)):
        p = m.get("perplexity_point")
        if isinstance(p, float) and p == p:
            point.append((m["train_seconds"], p))
        if m.get("perplexity") is not None:
            chain.append((m["train_seconds"], m["perplexity"]))
    return {"point": point, "chain": chain}


def plot(args) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib import ticker

    fig, axes = plt.subplots(1, len(SIZES), figsize=(5 * len(SIZES), 4), sharey=True)
    styles = {"tlasgr": "C3", "tlfsgr": "C1", "sgrld": "C0", "gibbs": "C2"}
    top = 0.0
    for ax, size in zip(axes, reversed(SIZES)):
        for m in METHODS:
            c = curves(m, size)
            if not c["point"]:
                continue
            name = {"sgrld": "SGRLD", "gibbs": "Gibbs"}.get(m, m.upper())
            x, y = zip(*c["point"])
            top = max(top, max(y))
            ax.plot(x, y, "o-", color=styles[m], label=f"{name} (point)", markersize=3)
            if c["chain"]:
                x, y = zip(*c["chain"])
                ax.plot(x, y, "--", color=styles[m], alpha=0.6, linewidth=1,
                        label=f"{name} (test chain)")
        ax.set_xscale("log")
        # labels at 1, 2 and 5 times the powers of ten, as plain numbers; none on minor ticks
        ax.xaxis.set_major_locator(ticker.LogLocator(subs=(1.0, 2.0, 5.0)))
        ax.xaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}"))
        ax.xaxis.set_minor_formatter(ticker.NullFormatter())
        ax.set_xlabel("training time (s)")
        ax.set_title(f"20News, DLDA {size}" + ("  (Figure 1a)" if size == "128" else ""))
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    if top:
        axes[0].set_ylim(top=top * 1.03)     # the test chain starts far above, off the plot
    axes[0].set_ylabel("held-out perplexity")
    fig.tight_layout()
    fig.savefig(PLOT["path"], dpi=110)
    h.log(f"wrote {h.rel(PLOT['path'])}")


# --------------------------------------------------------------------------- report
def fmt(x, spec=".1f", missing="–"):
    return missing if x is None else format(x, spec)


def method_name(method: str) -> str:
    return {"sgrld": "SGRLD", "gibbs": "Gibbs"}.get(method, method.upper())


def target_lines(state: dict) -> list[str]:
    """Each finished row against the paper (within 3 %), and every ordering of two rows of the
    same method or the same size whose gap in the paper exceeds 1 %."""
    ours = {}
    for m in METHODS:
        for s in SIZES:
            ev = state["runs"].get(f"{m}_{s}", {}).get("evaluation") or {}
            if ev.get("perplexity") is not None:
                ours[(m, s)] = ev["perplexity"]
    dev = {k: v / PAPER[k] - 1 for k, v in ours.items()}
    worst = max(dev, key=lambda k: abs(dev[k]), default=None)
    L = ["## Targets", "",
         f"Rows within 3 % of the paper: {sum(abs(d) <= 0.03 for d in dev.values())} of "
         f"{len(dev)} finished ({len(PAPER)} in the table); largest deviation "
         + (f"{100 * dev[worst]:+.1f} % ({method_name(worst[0])} {worst[1]})" if worst else "–")
         + ".", "",
         "Every pair of rows of the same method or the same size whose perplexities differ by "
         "more than 1 % in the paper, and whether ours are in the same order:", "",
         "| lower in the paper | higher in the paper | paper gap | ours | same order? |",
         "| --- | --- | ---: | --- | --- |"]
    keys = [(m, s) for m in METHODS for s in SIZES]
    for i, a in enumerate(keys):
        for b in keys[i + 1:]:
            if a[0] != b[0] and a[1] != b[1]:
                continue
            lo, hi = (a, b) if PAPER[a] < PAPER[b] else (b, a)
            gap = PAPER[hi] / PAPER[lo] - 1
            if gap <= 0.01:
                continue
            if lo in ours and hi in ours:
                got = f"{ours[lo]:.1f} vs {ours[hi]:.1f}"
                held = "**yes**" if ours[lo] < ours[hi] else "no"
            else:
                got, held = "–", "not finished yet"
            L.append(f"| {method_name(lo[0])} {lo[1]} ({PAPER[lo]}) | "
                     f"{method_name(hi[0])} {hi[1]} ({PAPER[hi]}) | {100 * gap:.1f} % | {got} | "
                     f"{held} |")
    return L + [""]


def section(state: dict) -> str:
    L = ["# Deep LDA (Table 1 of Cong et al. 2017)", "",
         f"Reported {h.now_utc():%Y-%m-%d %H:%M} UTC by `{h.command_line()}`; raw numbers in "
         "`benchmarks/work/bench_dlda.json` (git-ignored). Configs: "
         "`configs/20news_dlda_{tlasgr,tlfsgr,sgrld,gibbs}_{128,128-64,128-64-32}.yaml`, "
         "store `stores/20news` (20News of Gan et al. 2015 with its published observed/held-out "
         "split: 11,284 training and 7,502 test documents, V = 2,000; the paper reports "
         "11,315 / 7,531).", "", *h.machine_info(), ""]
    L += ["## Table 1, 20News: per-held-out-word perplexity", "",
          "`ours` is the persistent test chain's rate-accumulated perplexity (ALGORITHMS.md "
          "§8.11: one upward-downward iteration of every test document after every update, "
          "rates accumulated after the burn-in) from `topictk evaluate`, the same estimator as "
          "the paper; `point` is the last point perplexity in the run's metrics (fresh test "
          "chain, 600 iterations, every 2nd of the last 400). A run that has not finished shows "
          "its progress and the value so far (*in italics*; `–` before the burn-in ends). "
          "`wall` is the time of all its training processes (training + evaluation), summed "
          "over sittings; `train` is the training clock alone.", "",
          "| method | size | paper | ours | point (at update) | updates done / planned | "
          "test-chain samples | train h | wall h | status |",
          "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
    partial = False
    for m in METHODS:
        for s in SIZES:
            e = state["runs"].get(f"{m}_{s}", {})
            ev = e.get("evaluation") or {}
            if ev.get("perplexity") is not None:
                ours = f"**{ev['perplexity']:.1f}**"
            elif e.get("chain_perplexity") is not None:
                ours = f"*{e['chain_perplexity']:.1f}*"
            else:
                ours = "–"
            point = (f"{e['point_perplexity']:.1f} ({e['point_step']})"
                     if e.get("point_perplexity") is not None else "–")
            if ev.get("perplexity_point") is not None:
                point = f"{ev['perplexity_point']:.1f} (final)"
            train_h = e.get("train_seconds", 0.0) / 3600
            wall_h = e.get("wall_seconds", 0.0) / 3600
            # a run partly trained outside this script: its own clocks instead (training and
            # the evaluations during training), marked
            own_h = (e.get("train_seconds", 0.0) + e.get("eval_seconds", 0.0)) / 3600
            wall = f"{wall_h:.2f}" if wall_h >= train_h else f"{own_h:.2f}†"
            partial |= wall_h < train_h
            L.append(f"| {method_name(m)} | {s} | {PAPER[(m, s)]} | {ours} | {point} | "
                     f"{e.get('step', 0)} / {e.get('iterations', '?')} | "
                     f"{ev.get('samples', '–')} | {train_h:.2f} | {wall} | "
                     f"{e.get('status', 'not started')} |")
    if partial:
        L += ["", "† part of this run was trained outside this script, which therefore has no "
                  "wall time for it: the value is the run's own clock (training plus the "
                  "evaluations during training, from its checkpoint and metrics), without the "
                  "final `topictk evaluate`."]
    L += [""] + target_lines(state)
    L += [""] + memory_lines(json.loads(MEMORY_FILE.read_text()) if MEMORY_FILE.exists()
                             else None)
    if PLOT["path"].exists():
        L += ["## Perplexity against training time (Figure 1a)", "",
              f"![point perplexity against training time](../{PLOT['path'].parent.name}/"
              f"{PLOT['path'].name})", "",
              "`python benchmarks/bench_dlda.py plot`: the point perplexity of each Table 1 run "
              "(every 500 updates or sweeps) against its training clock (evaluation "
              "excluded), and the persistent test chain's perplexity after its burn-in (dashed). "
              "The paper's Figure 1a is the 128 panel.", ""]
    L += [f"Sittings so far: {len(state.get('sittings', []))}. Continue with "
          "`python benchmarks/bench_dlda.py table --budget SECONDS` (every run resumes from its "
          "last checkpoint)."]
    return "\n".join(L) + "\n"


def update_entry(state: dict, key: str, status: dict) -> dict:
    """Bring a run's entry up to date with its directory. A run started again with another
    schedule (its planned updates changed) is a new run: the old run's wall time and
    evaluation are dropped, as is an evaluation of an earlier state of the run."""
    entry = state["runs"].setdefault(key, {"wall_seconds": 0.0, "sittings": 0})
    if entry.get("iterations") not in (None, status["iterations"]):
        for k in ("evaluation", "chain_perplexity", "point_perplexity", "point_step"):
            entry.pop(k, None)
        entry.update(wall_seconds=0.0, sittings=0)
    scored = (entry.get("evaluation") or {}).get("scored_state")
    if scored is not None and scored != [status["step"], status["train_seconds"]]:
        entry.pop("evaluation")
    entry.update(status)
    return entry


def refresh(state: dict) -> None:
    """Progress of every Table 1 run from its run directory (cheap: headers and metrics)."""
    for m in METHODS:
        for s in SIZES:
            update_entry(state, f"{m}_{s}", run_status(m, s))


def write_section(state: dict, record: bool) -> None:
    h.write_results(h.results_path(NAME, record), section(state))


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--record", action="store_true",
                        help="write benchmarks/results/dlda.md and benchmarks/figures/")
    common.add_argument("--quick", action="store_true",
                        help="runs of 60 iterations under benchmarks/work/dlda_quick/")
    sub = p.add_subparsers(dest="command", required=True)
    t = sub.add_parser("table", parents=[common],
                       help="train / resume the Table 1 configs, then report")
    t.add_argument("--budget", type=float, default=3600.0,
                   help="wall-clock seconds of this sitting, shared by the unfinished runs")
    t.add_argument("--configs", nargs="*", default=[],
                   help="METHOD_SIZE, METHOD or SIZE to select, e.g. tlasgr_128-64-32 gibbs 128")
    t.add_argument("--threads", type=int, default=None, help="override training.threads")
    t.add_argument("--no-share", dest="share", action="store_false",
                   help="give the whole remaining budget to each run in turn")
    sub.add_parser("memory", parents=[common],
                   help="peak memory of TLASGR training against corpus size")
    sub.add_parser("plot", parents=[common],
                   help="point perplexity against training time (Figure 1a)")
    sub.add_parser("report", parents=[common], help="rewrite the report from the saved numbers")
    args = p.parse_args(argv)
    global STATE_FILE, MEMORY_FILE
    if args.quick:
        RUNS.update(dir=WORK / "dlda_quick", iterations=60)
        STATE_FILE = WORK / "dlda_quick" / "bench_dlda.json"
        MEMORY_FILE = WORK / "dlda_quick" / "bench_dlda_memory.json"
        MEMORY["updates"] = 6
    if not args.record:
        PLOT["path"] = h.figure_path(PLOT["path"].name, False)
    state = load_state()
    if args.command == "table":
        table(args, state)
    elif args.command == "memory":
        # its own file: a table sitting may be saving the state file meanwhile
        MEMORY_FILE.parent.mkdir(parents=True, exist_ok=True)
        MEMORY_FILE.write_text(json.dumps(memory(args), indent=1))
    elif args.command == "plot":
        plot(args)
    refresh(state)
    if args.command == "table":
        save_state(state)       # the others only read it (a table sitting may be running)
    write_section(state, args.record)


if __name__ == "__main__":
    main()
