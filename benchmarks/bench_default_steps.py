"""Step-size defaults of the online algorithms: a small grid of (tau0, kappa) for ovb and
hsvg and of (a, b, c) for sgrld on corpora of different sizes, every setting trained for the
same number of mini-batch updates, and how far the default ends from the best of the grid.

Every run sets only the algorithm, the updates, the topics and the step sizes (the default
run sets no step size at all); it is scored once, after the last update, by its point
perplexity on the same 1000 test documents (all of them on a smaller test set), with the
in-training curve's fold-in: the settings of a corpus are compared on the same tokens.

    python benchmarks/bench_default_steps.py --record
"""
from __future__ import annotations

import argparse

import harness as h

# the largest documents first (the longest runs); the report orders corpora by size
CORPORA = ("uci_nips", "uci_kos", "20news_gan2015")                # harness.CORPORA
TAU_KAPPA = ([{"tau0": t, "kappa": 0.7} for t in (1, 16, 64, 256, 1024)]
             + [{"tau0": 16, "kappa": k} for k in (0.55, 0.9)])
STEP = [{"step": {"a": a, "b": b, "c": 0.55}} for a in (0.003, 0.01, 0.1) for b in (100, 1000)]
GRIDS = {"ovb": TAU_KAPPA, "hsvg": TAU_KAPPA, "sgrld": STEP}


def setting_name(setting: dict | None) -> str:
    if setting is None:
        return "default"
    if "step" in setting:
        s = setting["step"]
        return f"a={s['a']:g} b={s['b']:g} c={s['c']:g}"
    return f"tau0={setting['tau0']:g} kappa={setting['kappa']:g}"


def run_one(store, corpus: str, algorithm: str, setting: dict | None, args) -> dict:
    name = setting_name(setting).replace(" ", "_")
    out = h.WORK / "runs" / "default_steps" / f"{corpus}-{algorithm}-{name}"
    config = {"corpus": str(store), "output": str(out), "model": {"topics": args.topics},
              "inference": {"algorithm": algorithm, "iterations": args.updates,
                            **(setting or {})},
              "training": {"threads": args.threads, "eval_every": args.updates,
                           "checkpoint_every": 0},
              "evaluation": {"curve_docs": 1000}}
    logfile = h.WORK / "logs" / f"ds-{corpus}-{algorithm}-{name}.log"
    if args.reuse and finished(out, config):
        res = {"wall": float("nan")}
    else:
        res = h.train(config, config_path(out), logfile)
        if res["rc"] != 0:
            raise SystemExit(f"{corpus} {algorithm} {name} failed:\n{h.tail(logfile)}")
    last = h.read_metrics(out)[-1]
    h.log(f"{corpus} {algorithm} {setting_name(setting)}: {last['perplexity_point']:.1f} "
          f"({res['wall']:.0f} s)")
    return {"setting": setting_name(setting), "perplexity": last["perplexity_point"],
            "wall": res["wall"], "out": out}


def resolved_setting(run_dir, algorithm: str, n_docs: int) -> dict:
    """The step sizes a run was trained with, from its resolved ``config.yaml`` (``tau0:
    auto`` as topictk resolves it: the mini-batches of an epoch, in [1, 1024])."""
    import yaml
    inference = yaml.safe_load((run_dir / "config.yaml").read_text())["inference"]
    if algorithm == "sgrld":
        return {"step": {k: float(v) for k, v in inference["step"].items()}}
    tau0 = inference["tau0"]
    if tau0 == "auto":
        tau0 = min(1024, max(1, n_docs // inference["batch_size"]))
    return {"tau0": float(tau0), "kappa": float(inference["kappa"])}


def config_path(out):
    """The config file of run ``out`` (not ``with_suffix``: run names hold dots)."""
    return out.parent / f"{out.name}.yaml"


def finished(out, config: dict) -> bool:
    """Whether ``out`` holds a completed run of exactly ``config`` (``--reuse``)."""
    import yaml
    path = config_path(out)
    return ((out / "model.npz").exists() and path.exists()
            and yaml.safe_load(path.read_text()) == config)


def measure(args) -> dict:
    results = {}
    for corpus in args.corpora:
        store = h.ensure_store(corpus)
        for algorithm in args.algorithms:
            default = run_one(store, corpus, algorithm, None, args)
            chosen = setting_name(resolved_setting(default.pop("out"), algorithm,
                                                   h.store_facts(store)["D"]))
            rows = [default]
            for setting in GRIDS[algorithm]:
                if setting_name(setting) == chosen:   # the default run is this grid point
                    rows.append({**default, "setting": chosen})
                else:
                    rows.append(run_one(store, corpus, algorithm, setting, args))
                    rows[-1].pop("out")
            results[(corpus, algorithm)] = {"rows": rows, "facts": h.store_facts(store),
                                            "default": chosen}
    return results


def report(args, results: dict) -> str:
    lines = ["# Step-size defaults of ovb, hsvg and sgrld", "", f"Command: `{h.command_line()}`",
             "", *h.machine_info(), "",
             (f"K = {args.topics}, {args.updates} mini-batch updates of the default batch size "
              "(64 documents), every other key at its default; final point perplexity on the "
              "same (up to) 1000 test documents for every setting of a corpus. "
              "`default` is the run that sets no step size (it is also the grid point of "
              "its values, not run twice). The grid: tau0 in {1, 16, 64, 256, 1024} at "
              "kappa = 0.7 and kappa in {0.55, 0.9} at tau0 = 16 for ovb and hsvg; (a, b) in "
              "{0.003, 0.01, 0.1} x {100, 1000} with c = 0.55 for sgrld."), ""]
    results = dict(sorted(results.items(), key=lambda item: item[1]["facts"]["D"]))
    summary = []
    for (corpus, algorithm), data in results.items():
        rows = data["rows"]
        grid = rows[1:]
        best = min(grid, key=lambda r: r["perplexity"])
        default = rows[0]
        ratio = default["perplexity"] / best["perplexity"]
        facts = data["facts"]
        summary.append([corpus, f"{facts['D']:,}", algorithm, data["default"], best["setting"],
                        h.fmt(best["perplexity"], ".1f"), h.fmt(default["perplexity"], ".1f"),
                        f"{100 * (ratio - 1):+.1f} %", "yes" if ratio <= 1.03 else "NO"])
    lines += h.table(["corpus", "training documents", "algorithm", "default setting",
                      "best grid setting", "best", "default", "default vs best", "within 3 %"],
                     summary, "lrlllrrrl")
    for (corpus, algorithm), data in results.items():
        lines += ["", f"## {corpus}, {algorithm}", ""]
        lines += h.table(["setting", "perplexity", "wall s"],
                         [[r["setting"], h.fmt(r["perplexity"], ".1f"), h.fmt(r["wall"], ".0f")]
                          for r in data["rows"]], "lrr")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpora", nargs="+", default=list(CORPORA), choices=list(CORPORA))
    parser.add_argument("--algorithms", nargs="+", default=list(GRIDS), choices=list(GRIDS))
    parser.add_argument("--topics", type=int, default=20)
    parser.add_argument("--updates", type=int, default=100)
    parser.add_argument("--threads", type=int, default=2,
                        help="threads of every run (never changes the numbers)")
    parser.add_argument("--reuse", action="store_true",
                        help="take the result of a completed run of the same config from "
                             "benchmarks/work instead of training it again (wall time n/a; "
                             "delete the default runs after a default changes)")
    h.add_common_options(parser)
    args = parser.parse_args()
    h.write_results(h.results_path("default_steps", args.record), report(args, measure(args)))


if __name__ == "__main__":
    main()
