#!/usr/bin/env python3
"""DMR and particle-EM benchmarks (docs/algorithms.md §9, §10).

Part ``dmr`` -- on stm_poliblog5k (metadata rating, blog) and nips12 (year), K = 20 and 50:

* topictk ``dmr-sem`` (stochastic EM), ``dmr-sgrld`` (SGRLD + SGLD) and plain LDA ``gibbs``
  (SparseLDA, symmetric alpha 0.1) on the same store, scored by ``topictk evaluate`` (document
  completion, fold-in with alpha_d = exp(x_d^T nu) for DMR, averaged over the 10 saved samples);
  ``dmr-sgrld-nu-burn-in`` is dmr-sgrld with nu held for the first third of its updates;
* tomotopy's ``DMRModel`` with the same K, alpha (0.1), eta (0.01), iterations, nu burn-in and
  optimisation interval, prior standard deviation sqrt(0.5), fed the store's training tokens with
  one categorical metadata string per document ("Conservative|ha"; NIPS: the year), snapshots
  of (phi, lambda) taken at the sweeps where topictk saves its samples, and scored by topictk's
  evaluator: phi-hat from ``get_topic_word_dist``, alpha_d of each test document from
  ``get_topic_prior(its metadata)``, put through ``topictk.score_topic_word`` with that
  (D_test, K) alpha, the probabilities averaged over the snapshots as ``topictk evaluate``
  averages a run's samples (same fold-in settings and seed).

Part ``pem`` -- on uci_kos: particle EM with P in {1, 2, 4, 8} (T = 1, learnt alpha) beside batch
VB (smoothed, its defaults) and unsmoothed VB: held-out perplexity, EM iterations, training time,
peak memory.

Every training run is its own process (wall time, CPU time and peak RSS from wait4); one thread
by default. ``--threads N`` trains the topictk rows with N threads on N AD-LDA chunks and tomotopy
with N workers; those rows are kept apart (keys ``<method>-tN``) and reported in a table of their
own. Results go to ``benchmarks/work/dmr/results.json`` and to the report ``dmr.md``
(``--record``: benchmarks/results/). How much of a DMR run's perplexity comes from the level of
its learnt prior is studied by ``studies/dmr_prior_level.py`` on the runs of this script.

Usage (a venv with ``pip install -e . -r benchmarks/requirements.txt``)::

    python benchmarks/bench_dmr.py --record             # both parts
    python benchmarks/bench_dmr.py --part pem --em-iterations 10 --particles 1 2   # quick check
    python benchmarks/bench_dmr.py --part dmr --corpora poliblog --topics 20 --seeds 1 \
        --iterations 20 --optimize-burn-in 5 --optimize-interval 5 --sgrld-updates 20

``--sgrld-updates-factor N`` and ``--sgrld-sweeps N`` train the SGRLD rows longer or with other
local chains; those rows are kept apart (keys ``<method>-uNx``, ``<method>-swN``) and are not
part of the rendered section.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import re
import sys
import time
from pathlib import Path

import harness as h

import topictk

WORK = h.WORK / "dmr"
NAME = "dmr"

ALPHA, BETA = 0.1, 0.01
SIGMA2, SIGMA2_INTERCEPT = 0.5, 100.0
ESTIMATOR = "gibbs"      # one estimator of theta for topictk and tomotopy (evaluation.fold_in)
FOLD_IN_SWEEPS, FOLD_IN_BURN_IN = 50, 25
SGRLD_SWEEPS = 10
DMR_LIBS = ["gibbs", "dmr-sem", "dmr-sem-sparse", "dmr-sem-dense", "tomotopy-dmr", "sgrld",
            "dmr-sgrld", "dmr-sgrld-nu-burn-in"]

CORPORA = {          # "store": the corpus's name in the harness
    "poliblog": {
        "store": "poliblog",
        "fields": ["rating", "blog"],
        "sgrld": {"updates": 400, "batch": 256},
    },
    "nips": {
        "store": "nips_year",
        "fields": ["year"],
        "sgrld": {"updates": 300, "batch": 128},
    },
    "kos": {
        "store": "kos_default",
        "fields": [],
    },
}


# --------------------------------------------------------------------------- measuring
def run_measured(cmd: list[str], log_path: Path) -> dict:
    """:func:`harness.run_measured`, the contention under the name this script records."""
    res = h.run_measured(cmd, log_path)
    res["contention"] = res["foreign"]
    return res


def load_average() -> float:
    return os.getloadavg()[0]


# --------------------------------------------------------------------------- workers
def metadata_strings(store, part: str, fields: list[str]) -> list[str]:
    """One categorical metadata string per document: the fields joined by '|'."""
    meta = store.metadata(part)
    if meta is None:
        raise SystemExit(f"{store.path}: no {part} metadata")
    return ["|".join(str(m.get(f, "")) for f in fields) for m in meta]


def worker_tomotopy(spec: dict) -> None:
    """Train tomotopy's DMRModel on the store's training tokens; snapshot (phi, alpha of the
    test documents) at the sample sweeps; score with topictk's evaluator."""
    import numpy as np
    import tomotopy as tp

    store = topictk.open_store(spec["store"])
    train = store.train()
    V, K = store.n_words, int(spec["K"])
    doc_ptr, words = np.asarray(train.doc_ptr), np.asarray(train.words)
    vocab = store.vocab
    train_meta = metadata_strings(store, "train", spec["fields"])
    test_meta = metadata_strings(store, "test", spec["fields"])
    t0 = time.perf_counter()
    mdl = tp.DMRModel(tw=tp.TermWeight.ONE, min_cf=0, min_df=0, rm_top=0, k=K, alpha=ALPHA,
                      eta=BETA, sigma=float(np.sqrt(SIGMA2)), seed=int(spec["seed"]))
    mdl.burn_in = int(spec["optimize_burn_in"])
    mdl.optim_interval = int(spec["optimize_interval"])
    for d in range(doc_ptr.size - 1):
        mdl.add_doc([vocab[w] for w in words[doc_ptr[d]:doc_ptr[d + 1]]], metadata=train_meta[d])
    workers = int(spec.get("workers", 1))
    mdl.train(0, workers=workers)
    construct = time.perf_counter() - t0
    if mdl.num_words != words.size:
        raise SystemExit(f"tomotopy dropped tokens: {mdl.num_words} of {words.size}")
    index = {w: i for i, w in enumerate(vocab)}
    ids = np.array([index[w] for w in mdl.used_vocabs], dtype=np.int64)
    sample_steps = sorted(int(s) for s in spec["sample_steps"])
    snapshots, wall, cpu, done = [], 0.0, 0.0, 0
    for target in sample_steps:
        w0, c0 = time.perf_counter(), h.process_cpu()
        mdl.train(target - done, workers=workers)
        wall += time.perf_counter() - w0
        cpu += h.process_cpu() - c0
        done = target
        phi = np.full((V, K), 0.0)
        phi[ids] = np.array([mdl.get_topic_word_dist(k) for k in range(K)]).T
        priors = {m: np.asarray(mdl.get_topic_prior(m), dtype=np.float64)
                  for m in sorted(set(test_meta))}
        alpha = np.array([priors[m] for m in test_meta])
        snapshots.append((phi, alpha))
    if done != int(spec["iterations"]) or mdl.global_step != done:
        raise SystemExit(f"tomotopy ran {mdl.global_step} sweeps, expected {spec['iterations']}")
    e0 = time.perf_counter()
    scored = topictk.score_topic_word(store, [phi.T for phi, _ in snapshots],
                                      [alpha for _, alpha in snapshots], sweeps=FOLD_IN_SWEEPS,
                                      burn_in=FOLD_IN_BURN_IN, seed=int(spec["seed"]), threads=1,
                                      fold_in=ESTIMATOR)
    ppl, floored = scored["perplexity"], scored["floored_tokens"]
    Path(spec["out"]).write_text(json.dumps({
        "train_seconds": wall, "train_cpu": cpu, "construct_seconds": construct,
        "perplexity": ppl, "floored": floored, "samples": len(snapshots),
        "eval_seconds": time.perf_counter() - e0, "version": tp.__version__, "isa": tp.isa,
        "metadata_categories": len(mdl.metadata_dict),
        "lambdas_shape": list(np.asarray(mdl.lambdas).shape)}))


def worker_baseline(spec: dict) -> None:
    import importlib
    for name in spec["modules"]:
        importlib.import_module(name)


# --------------------------------------------------------------------------- orchestration
class Bench:
    def __init__(self, args):
        self.args = args
        self.py = sys.executable
        self.results = self.load()

    def log(self, msg: str) -> None:
        h.log(msg)

    def load(self) -> dict:
        path = WORK / "results.json"
        if self.args.fresh or not path.exists():
            return {"rows": {}}
        return json.loads(path.read_text())

    def save(self) -> None:
        WORK.mkdir(parents=True, exist_ok=True)
        (WORK / "results.json").write_text(json.dumps(self.results, indent=1, sort_keys=True))

    def worker(self, mode: str, spec: dict, log: Path) -> dict:
        return run_measured([self.py, str(Path(__file__).resolve()), mode, json.dumps(spec)], log)

    def train(self, config_path: Path, log: Path) -> dict:
        return run_measured([*h.TOPICTK, "train", "--config", str(config_path), "--force",
                             "--quiet"], log)

    def store(self, name: str) -> Path:
        return h.ensure_store(CORPORA[name]["store"], out=WORK / "stores" / name)

    # ---- topictk runs
    def topictk_row(self, key: str, store: Path, config: dict, seed: int | None = None,
                    objective: bool = False) -> dict:
        """Train (``objective``: with a metrics line after every step, which records the
        tokens visited and the algorithm's own objective), evaluate and return one row."""
        if key in self.results["rows"] and not self.args.rerun:
            return self.results["rows"][key]
        base = WORK / "runs" / key
        base.mkdir(parents=True, exist_ok=True)
        run_dir = base / "run"
        config = {"corpus": str(store), "output": str(run_dir), **config,
                  "training": {"seed": self.args.seeds[0] if seed is None else seed,
                               "threads": self.args.threads,
                               "eval_every": 1 if objective else 0,
                               "checkpoint_every": 0, "keep_checkpoints": 1},
                  "evaluation": {"fold_in": ESTIMATOR, "fold_in_sweeps": FOLD_IN_SWEEPS,
                                 "fold_in_burn_in": FOLD_IN_BURN_IN}}
        cfg_path = base / "config.yaml"
        cfg_path.write_text(json.dumps(config, indent=1))          # JSON is YAML
        load0 = load_average()
        res = self.train(cfg_path, base / "train.log")
        if res["rc"] != 0:
            return {"error": f"train exit {res['rc']} (see {base / 'train.log'})"}
        run = topictk.load_run(run_dir)
        e, result = self.evaluate(run_dir, base / "evaluate.log")
        if result is None:
            return {"error": f"evaluate exit {e['rc']} (see {base / 'evaluate.log'})"}
        (base / "evaluate.json").write_text(json.dumps(result))
        row = {"train_seconds": run.train_seconds,
               "train_cpu": res["cpu"], "steps": run.step,
               "em_iterations": run.step,
               "peak_rss": res["maxrss"], "perplexity": result["perplexity"],
               "samples": result.get("samples"), "eval_seconds": e["wall"],
               "load_before": load0, "load_after": load_average(),
               "contention": res["contention"],
               "tokens_seen": run.tokens_seen}
        if objective:     # a metrics line per step: converged VB and PEM idle (no tokens)
            metrics = run.metrics()
            seen = [0] + [m["tokens_seen"] for m in metrics]
            row["em_iterations"] = sum(b > a for a, b in zip(seen, seen[1:]))
            row["objective"] = metrics[-1].get("train_bound_per_token") if metrics else None
        for k in ("umass", "npmi", "diversity"):
            row[k] = result.get(k)
        self.results["rows"][key] = row
        self.save()
        return row

    def evaluate(self, run_dir: Path, log: Path, *options: str) -> tuple[dict, dict | None]:
        """``topictk evaluate RUN --json OPTIONS`` in its own process: the measurement and the
        JSON result (None if it failed)."""
        result, res = h.evaluate(run_dir, log, *options)
        return res, result

    def tomotopy_row(self, key: str, store: Path, corpus: str, K: int, iterations: int,
                     sample_steps: list[int], seed: int) -> dict:
        if key in self.results["rows"] and not self.args.rerun:
            return self.results["rows"][key]
        base = WORK / "runs" / key
        base.mkdir(parents=True, exist_ok=True)
        load0 = load_average()
        res = self.worker("_tomotopy", {
            "store": str(store), "K": K, "iterations": iterations, "seed": seed,
            "fields": CORPORA[corpus]["fields"], "optimize_burn_in": self.args.optimize_burn_in,
            "optimize_interval": self.args.optimize_interval, "sample_steps": sample_steps,
            "workers": self.args.threads,
            "out": str(base / "result.json")}, base / "train.log")
        if res["rc"] != 0:
            return {"error": f"tomotopy exit {res['rc']} (see {base / 'train.log'})"}
        row = json.loads((base / "result.json").read_text())
        row.update({"peak_rss": res["maxrss"], "load_before": load0,
                    "load_after": load_average(), "contention": res["contention"]})
        self.results["rows"][key] = row
        self.save()
        return row

    # ---- parts
    def sample_schedule(self, iterations: int) -> tuple[int, int, list[int]]:
        burn = iterations // 2
        thin = max(1, (iterations - burn) // 10)
        return burn, thin, [s for s in range(burn + thin, iterations + 1, thin)]

    def dmr_jobs(self, corpus: str, K: int, store: Path, seed: int) -> dict:
        """name -> job for one corpus, K and seed (each job trains, evaluates and returns a
        row). Plain LDA is trained by both DMR algorithms' counterparts: collapsed Gibbs for
        dmr-sem, SGRLD (same schedule, batches and local sweeps) for dmr-sgrld."""
        a = self.args
        I = a.iterations
        burn, thin, steps = self.sample_schedule(I)
        common = {"iterations": I, "burn_in": burn, "thin": thin}
        if a.threads > 1:
            common["chunks"] = a.threads        # AD-LDA: one chunk per thread
        sfx = thread_suffix(a.threads)
        sg = CORPORA[corpus]["sgrld"]
        updates = (a.sgrld_updates or sg["updates"]) * a.sgrld_updates_factor
        sgrld = {"iterations": updates, "batch_size": sg["batch"], "sweeps": a.sgrld_sweeps,
                 "step": {"a": a.sgrld_a, "b": 1000, "c": 0.55}, "burn_in": updates // 2,
                 "samples": 10}
        lda = {"topics": K, "alpha": ALPHA, "beta": BETA}
        dmr = {"family": "dmr", **lda}
        regression = {"sigma2": SIGMA2, "sigma2_intercept": SIGMA2_INTERCEPT}
        sem = {"algorithm": "dmr-sem", **common, "optimize_burn_in": a.optimize_burn_in,
               "optimize_interval": a.optimize_interval, **regression}
        configs = {
            "gibbs": {"model": lda, "inference": {"algorithm": "gibbs", **common}},
            "dmr-sem": {"model": dmr, "inference": sem},          # the default, sparse: auto
            "dmr-sem-sparse": {"model": dmr, "inference": {**sem, "sparse": True}},
            "dmr-sem-dense": {"model": dmr, "inference": {**sem, "sparse": False}},
            "sgrld": {"model": lda, "inference": {"algorithm": "sgrld", **sgrld}},
            "dmr-sgrld": {"model": dmr,
                          "inference": {"algorithm": "dmr-sgrld", **sgrld, **regression}},
            # nu held for the first third, as dmr-sem's optimize_burn_in (100 of 300 sweeps)
            "dmr-sgrld-nu-burn-in": {"model": dmr, "inference": {
                "algorithm": "dmr-sgrld", **sgrld, **regression,
                "nu_burn_in": updates // 3}},
        }
        sgrld_sfx = sgrld_suffix(a.sgrld_updates_factor, a.sgrld_sweeps)
        jobs = {name: (lambda name=name, config=config: self.topictk_row(
                    f"{corpus}-K{K}-{name}{sfx}"
                    f"{sgrld_sfx if 'sgrld' in config['inference']['algorithm'] else ''}"
                    f"-s{seed}", store, config, seed))
                for name, config in configs.items()}
        jobs["tomotopy-dmr"] = lambda: self.tomotopy_row(
            f"{corpus}-K{K}-tomotopy-dmr{sfx}-s{seed}", store, corpus, K, I, steps, seed)
        return jobs

    def part_dmr(self) -> None:
        a = self.args
        for corpus in a.corpora:
            store = self.store(corpus)
            for K in a.topics:
                for seed in a.seeds:
                    jobs = self.dmr_jobs(corpus, K, store, seed)
                    for name in DMR_LIBS:
                        if name not in a.libs:
                            continue
                        self.log(f"{corpus} K={K} seed {seed} {name} ...")
                        row = jobs[name]()
                        self.log("  " + (row.get("error") or
                                         f"perplexity {row['perplexity']:.1f}, "
                                         f"train {row['train_seconds']:.1f} s wall / "
                                         f"{row['train_cpu']:.1f} s CPU, contention "
                                         f"{row.get('contention', float('nan')):.2f}"))

    def part_pem(self) -> None:
        a = self.args
        store = self.store("kos")
        K, I = a.pem_topics, a.em_iterations
        rows = [("vb", {"algorithm": "vb"}),
                ("vb-unsmoothed", {"algorithm": "vb", "smoothed": False, "estep_start": "warm"})]
        rows += [(f"pem-P{P}", {"algorithm": "pem", "particles": P, "temperature": 1.0})
                 for P in a.particles]
        for name, inference in rows:
            self.log(f"kos K={K} {name} ...")
            row = self.topictk_row(f"kos-K{K}-{name}", store,
                                   {"model": {"topics": K, "alpha": "auto", "beta": BETA},
                                    "inference": {"iterations": I, **inference}},
                                   objective=True)
            self.log("  " + (row.get("error") or f"perplexity {row['perplexity']:.1f}, "
                                                  f"{row['steps']} EM steps, "
                                                  f"{row['train_seconds']:.1f} s"))

    def part_left_to_right(self) -> None:
        """``topictk evaluate --left-to-right`` on finished topictk rows of the DMR part (the
        corpora, K, seeds and methods given; tomotopy's snapshots are not kept as runs), ``--jobs``
        evaluations at a time, one thread each."""
        from concurrent.futures import ThreadPoolExecutor

        a = self.args
        keys = []
        for corpus in a.corpora:
            for K in a.topics:
                for seed in a.seeds:
                    for name in a.libs:
                        key = f"{corpus}-K{K}-{name}{thread_suffix(a.threads)}-s{seed}"
                        row = self.results["rows"].get(key)
                        if name == "tomotopy-dmr" or not row or "error" in row:
                            continue
                        if "perplexity_left_to_right" not in row or a.rerun:
                            keys.append(key)

        def score(key: str) -> dict:
            base = WORK / "runs" / key
            log = base / "evaluate-left-to-right.log"
            res, out = self.evaluate(base / "run", log, "--left-to-right", "--particles",
                                     str(a.l2r_particles), "--threads", "1")
            if out is None:
                return {"error": f"evaluate exit {res['rc']} (see {log})"}
            return {"perplexity_left_to_right": out["perplexity_left_to_right"],
                    "left_to_right_particles": out["left_to_right_particles"],
                    "left_to_right_samples": out["left_to_right_samples"],
                    "left_to_right_eval_seconds": res["wall"]}

        self.log(f"left-to-right: {len(keys)} runs, {a.jobs} at a time")
        with ThreadPoolExecutor(max_workers=a.jobs) as pool:
            for key, out in zip(keys, pool.map(score, keys)):
                if "error" in out:
                    self.log(f"  {key}: {out['error']}")
                    continue
                self.results["rows"][key].update(out)
                self.save()
                self.log(f"  {key}: left-to-right {out['perplexity_left_to_right']:.1f} "
                         f"({out['left_to_right_eval_seconds']:.0f} s)")

    def main(self) -> None:
        began = time.perf_counter()
        self.results["machine"] = h.machine_info("tomotopy")
        self.results["settings"] = {k: v for k, v in vars(self.args).items()}
        if self.args.part in ("dmr", "all"):
            self.part_dmr()
        if self.args.part in ("pem", "all"):
            self.part_pem()
        if self.args.part == "left-to-right":
            self.part_left_to_right()
        self.results["bench_seconds_last_invocation"] = time.perf_counter() - began
        self.save()
        write_section(self.results, self.args)


# --------------------------------------------------------------------------- report
def thread_suffix(threads: int) -> str:
    """Row-name suffix of runs with more than one thread (one-thread rows have none)."""
    return "" if threads == 1 else f"-t{threads}"


def sgrld_suffix(updates_factor: int, sweeps: int) -> str:
    """Row-name suffix of SGRLD rows trained longer or with other local sweeps than the
    defaults (default rows have none)."""
    return ((f"-u{updates_factor}x" if updates_factor != 1 else "")
            + (f"-sw{sweeps}" if sweeps != SGRLD_SWEEPS else ""))


def _fmt(x, spec=".1f"):
    return "n/a" if x is None else format(x, spec)


def _seed_rows(rows: dict, corpus: str, K: int, name: str, seeds: list[int]) -> dict:
    """seed -> row of one method (rows with errors left out)."""
    out = {}
    for seed in seeds:
        r = rows.get(f"{corpus}-K{K}-{name}-s{seed}")
        if r and "error" not in r:
            out[seed] = r
    return out


def _mean(values) -> float:
    values = list(values)
    return sum(values) / len(values)


def _sd(values) -> float:
    values = list(values)
    if len(values) < 2:
        return 0.0
    m = _mean(values)
    return (sum((v - m) ** 2 for v in values) / (len(values) - 1)) ** 0.5


def _paired(a: dict, b: dict) -> tuple[float, int, int, float] | None:
    """Mean relative perplexity difference a/b - 1 over the seeds both have, how many of those
    seeds have a below b, the number of seeds, and the standard error of the difference of the
    two means relative to b's mean (the chains of different seeds are independent, so the two
    methods' seed spreads add: sqrt(sd_a^2 / n + sd_b^2 / n) / mean_b)."""
    common = sorted(set(a) & set(b))
    if not common:
        return None
    rel = [a[s]["perplexity"] / b[s]["perplexity"] - 1 for s in common]
    pa = [a[s]["perplexity"] for s in common]
    pb = [b[s]["perplexity"] for s in common]
    se = ((_sd(pa) ** 2 + _sd(pb) ** 2) / len(common)) ** 0.5 / _mean(pb)
    return _mean(rel), sum(r < 0 for r in rel), len(common), se


LABELS = {"gibbs": "topictk gibbs (LDA)",
          "dmr-sem": "topictk dmr-sem (default, `sparse: auto`)",
          "dmr-sem-sparse": "topictk dmr-sem `sparse: true` (SparseLDA)",
          "dmr-sem-dense": "topictk dmr-sem `sparse: false` (dense, §9.2)",
          "tomotopy-dmr": "tomotopy DMRModel",
          "sgrld": "topictk sgrld (LDA)",
          "dmr-sgrld": "topictk dmr-sgrld",
          "dmr-sgrld-nu-burn-in": "topictk dmr-sgrld, `nu_burn_in` = a third of the updates"}
TABLE_HEADER = [
    "| corpus | K | method | perplexity (mean ± sd) | train s wall | train s CPU | "
    "contention | peak RSS MiB | vs its LDA: mean ± se, seeds below | "
    "vs tomotopy: ppl, wall, CPU |",
    "| --- | --- | --- | --- | ---: | ---: | ---: | ---: | --- | --- |"]
LDA_OF = {"dmr-sem": "gibbs", "dmr-sem-sparse": "gibbs", "dmr-sem-dense": "gibbs",
          "tomotopy-dmr": "gibbs", "dmr-sgrld": "sgrld", "dmr-sgrld-nu-burn-in": "sgrld"}


def _dmr_table(rows: dict, seeds: list[int], sfx: str) -> tuple[list[str], list[str]]:
    """Table rows and target verdicts of the DMR part for the runs whose names end in ``sfx``
    (see :func:`thread_suffix`)."""
    lines, verdicts = [], []
    for corpus in ("poliblog", "nips"):
        for K in (20, 50):
            by_name = {name: _seed_rows(rows, corpus, K, name + sfx, seeds)
                       for name in DMR_LIBS}
            tomo_rows = by_name["tomotopy-dmr"]
            for name in DMR_LIBS:
                rs = by_name[name]
                if not rs:
                    continue
                ppl = [r["perplexity"] for r in rs.values()]
                wall = _mean(r["train_seconds"] for r in rs.values())
                cpu = _mean(r["train_cpu"] for r in rs.values())
                cont = [r["contention"] for r in rs.values() if "contention" in r]
                rel_lda = ""
                if name in LDA_OF and (p := _paired(rs, by_name[LDA_OF[name]])):
                    rel_lda = (f"{100 * p[0]:+.2f} % ± {100 * p[3]:.2f} ({LDA_OF[name]}), "
                               f"{p[1]} of {p[2]}")
                rel_tomo = ""
                if name.startswith("dmr-sem") and tomo_rows:
                    tp = _paired(rs, tomo_rows)
                    t_wall = _mean(r["train_seconds"] for r in tomo_rows.values())
                    t_cpu = _mean(r["train_cpu"] for r in tomo_rows.values())
                    rel_tomo = (f"{100 * tp[0]:+.2f} %, x{wall / t_wall:.2f}, "
                                f"x{cpu / t_cpu:.2f}")
                lines.append(
                    f"| {corpus} | {K} | {LABELS[name]} | {_mean(ppl):.1f} ± {_sd(ppl):.1f} "
                    f"({len(ppl)}) | {wall:.1f} | {cpu:.1f} | "
                    f"{_fmt(_mean(cont) if cont else None, '.2f')} | "
                    f"{_fmt(max(r['peak_rss'] for r in rs.values()) / 2**20, '.0f')} | "
                    f"{rel_lda} | {rel_tomo} |")
            parts = []
            for name in ("dmr-sem", "dmr-sgrld", "dmr-sgrld-nu-burn-in"):
                rs, lda = by_name[name], by_name[LDA_OF[name]]
                p = _paired(rs, lda)
                if p is None:
                    continue
                text = (f"`{name}` {'below' if p[0] < 0 else '**not below**'} LDA "
                        f"({LDA_OF[name]}; {100 * p[0]:+.2f} % ± {100 * p[3]:.2f}, {p[1]} of "
                        f"{p[2]} seeds)")
                if name == "dmr-sem" and tomo_rows:
                    tp = _paired(rs, tomo_rows)
                    wall = _mean(r["train_seconds"] for r in rs.values())
                    t_wall = _mean(r["train_seconds"] for r in tomo_rows.values())
                    text += (f", perplexity {'no worse than' if tp[0] <= 0 else '**worse than**'}"
                             f" tomotopy ({100 * tp[0]:+.2f} %), wall "
                             f"{'<=' if wall <= t_wall else '**>**'} tomotopy's "
                             f"(x{wall / t_wall:.3f})")
                parts.append(text)
            if parts:
                verdicts.append(f"* {corpus} K = {K}: " + "; ".join(parts) + ".")
    return lines, verdicts


def write_section(results: dict, args) -> None:
    rows = results["rows"]
    seeds = list(args.seeds)
    today = _dt.date.today().isoformat()
    lines = ["# DMR and particle EM", "",
             f"estimator: {ESTIMATOR} (theta of every test document by the {ESTIMATOR} "
             f"fold-in) for the topictk runs and tomotopy's; docs/evaluate.md, 'Two estimators "
             f"of theta for document completion'. Part pem (no peer): each row's theta by "
             f"its algorithm's own E-step (pem: particle E-step, vb: variational E-step).",
             ""]
    try:
        import tomotopy
        tomo = f"tomotopy {tomotopy.__version__} ({tomotopy.isa})"
    except ImportError:
        tomo = "tomotopy (not importable here)"
    contention = [r["contention"] for r in rows.values()
                  if isinstance(r, dict) and "contention" in r]
    lines += [
        f"Measured {today} by `benchmarks/bench_dmr.py` on a {os.cpu_count()}-core machine. "
        f"Every training run is its own process, with one thread unless a table says otherwise; "
        f"`contention` is the number of "
        f"cores other processes kept busy while it ran (from /proc/stat; "
        + (f"{min(contention):.2f}-{max(contention):.2f} over the rows" if contention else "n/a")
        + f"), the same background for topictk and tomotopy rows. {tomo}; seeds "
        f"{', '.join(map(str, seeds))} (each row is run once per seed).",
        "",
        "## DMR: held-out perplexity against plain LDA and tomotopy",
        "",
        f"Document completion on the store's 10 % test documents (20 % of each held out), fold-in "
        f"{FOLD_IN_SWEEPS} sweeps ({FOLD_IN_BURN_IN} burn-in), probabilities averaged over 10 "
        f"samples (topictk: its saved samples; tomotopy: snapshots at the same sweeps), all scored "
        f"by topictk's evaluator. {args.iterations} sweeps for `gibbs`, `dmr-sem` and tomotopy "
        f"(samples every {max(1, (args.iterations - args.iterations // 2) // 10)} sweeps after "
        f"{args.iterations // 2}; fewer than §9.2's 1,000, the same for every library); "
        f"nu/lambda optimised every {args.optimize_interval} sweeps after "
        f"{args.optimize_burn_in} (both libraries); `sgrld` and `dmr-sgrld`: "
        + ", ".join(f"{c} {v['sgrld']['updates']} updates of {v['sgrld']['batch']} documents"
                    for c, v in CORPORA.items() if "sgrld" in v)
        + f" (about as many token draws as {args.iterations} sweeps), {args.sgrld_sweeps} local "
        f"sweeps, a_eps = {args.sgrld_a}, b = 1000, c = 0.55, 10 samples from the second half. "
        f"alpha(_init) = {ALPHA}, beta = eta = {BETA}, "
        f"sigma^2 = {SIGMA2} (tomotopy: sigma = sqrt({SIGMA2}); its lambdas have no intercept: "
        f"one weight per topic and metadata category with prior mean ln alpha, while topictk "
        f"has one-hot features with prior mean 0 plus an intercept with sigma^2 = "
        f"{SIGMA2_INTERCEPT:g}). Metadata: poliblog `--meta rating,blog` (topictk: 8 one-hot "
        f"features + intercept; tomotopy: the 12 categories rating|blog), nips "
        f"`--meta year:cat` (13 one-hot years + intercept; tomotopy: the 13 years as "
        f"categories). Plain LDA (`gibbs`, `sgrld`) has symmetric alpha = {ALPHA}; each DMR "
        f"method is compared with LDA trained by its own kind of algorithm (collapsed Gibbs for "
        f"`dmr-sem` and tomotopy, SGRLD for `dmr-sgrld`), seed by seed; ± is the standard "
        f"error of the difference of the two means (the two methods' seed spreads added), in "
        f"% of LDA's mean.",
        "",
        *TABLE_HEADER,
    ]
    table, verdicts = _dmr_table(rows, seeds, "")
    lines += table
    lines += ["", "Targets (means over the seeds):", ""] + verdicts
    for threads in sorted({int(m.group(1)) for k in rows
                           if (m := re.search(r"-t(\d+)-s\d+$", k))}):
        table, verdicts = _dmr_table(rows, seeds, thread_suffix(threads))
        lines += [
            "", f"## DMR with {threads} threads", "",
            f"The same runs as above with {threads} threads per run: topictk "
            f"`training.threads: {threads}` on `inference.chunks: {threads}` (AD-LDA, §2.4: "
            f"the result does not depend on the thread count, only on the chunks), tomotopy "
            f"`train(..., workers={threads})` (its default parallel scheme). Every other "
            f"setting, the seeds and the evaluation are those of the table above; `contention` "
            f"counts cores busy outside the run, so 0 means the machine was otherwise idle.",
            "", *TABLE_HEADER, *table, "", "Targets (means over the seeds):", "", *verdicts]
    lines += _left_to_right_table(rows, seeds)
    lines += ["", "## Particle EM on uci_kos", ""]
    K, I = args.pem_topics, args.em_iterations
    lines += [
        f"K = {K}, alpha learnt (Newton, `model.alpha: auto`), at most {I} EM iterations (EM "
        f"tolerance 1e-5 on the objective; fewer than the 100 of the defaults, for the time "
        f"budget), E-step tolerance 1e-3 / 100 iterations. Particle EM: T = 1, warm-started "
        f"particles (§10.4), phi a point estimate (unsmoothed). `vb`: batch VB with its defaults "
        f"(smoothed q(phi), `estep_start: best`); `vb unsmoothed` (warm starts) is what P = 1 "
        f"reproduces exactly. Cost = training wall/CPU seconds and peak RSS of the process.",
        "",
        "| method | perplexity | final training objective per token | EM iterations | "
        "train s (wall) | train s (CPU) | s per iteration | peak RSS MiB |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, label in [("vb", "vb (smoothed)"), ("vb-unsmoothed", "vb unsmoothed")] + [
            (f"pem-P{P}", f"pem P = {P}") for P in args.particles]:
        r = rows.get(f"kos-K{K}-{name}")
        if not r or "error" in r:
            continue
        its = r.get("em_iterations") or r["steps"]
        lines.append(f"| {label} | {_fmt(r['perplexity'])} | {_fmt(r.get('objective'), '.5f')} "
                     f"| {its} | "
                     f"{_fmt(r['train_seconds'])} | {_fmt(r['train_cpu'])} | "
                     f"{_fmt(r['train_seconds'] / max(its, 1), '.2f')} | "
                     f"{_fmt(r['peak_rss'] / 2**20, '.0f')} |")
    notes = results.get("notes", [])
    if notes:
        lines += ["", "Notes:", ""] + [f"* {n}" for n in notes]
    commands = results.get("commands", [])
    if commands:
        lines += ["", "Exactly what was run (from the repository root; raw numbers in "
                      "`benchmarks/work/dmr/results.json`):", "", "```bash", *commands, "```"]
    lines.append("")
    h.write_results(h.results_path(NAME, args.record), "\n".join(lines))


def _left_to_right_table(rows: dict, seeds: list[int]) -> list[str]:
    """The DMR-part runs scored again by the left-to-right estimator (``--part
    left-to-right``), beside their document-completion perplexity on the same seeds."""
    body = []
    for corpus in ("poliblog", "nips"):
        for K in (20, 50):
            by_name = {}
            names = ("gibbs", "dmr-sem", "sgrld", "dmr-sgrld", "dmr-sgrld-nu-burn-in")
            for name in names:
                rs = _seed_rows(rows, corpus, K, name, seeds)
                by_name[name] = {s: {**r, "perplexity": r["perplexity_left_to_right"]}
                                 for s, r in rs.items() if "perplexity_left_to_right" in r}
                by_name[name + " completion"] = {s: rs[s] for s in by_name[name]}
            for name in names:
                rs = by_name[name]
                if not rs:
                    continue
                l2r = [r["perplexity"] for r in rs.values()]
                completion = [r["perplexity"] for r in by_name[name + " completion"].values()]
                rel = ""
                if name in LDA_OF and (p := _paired(rs, by_name[LDA_OF[name]])):
                    rel = (f"{100 * p[0]:+.2f} % ± {100 * p[3]:.2f} ({LDA_OF[name]}), "
                           f"{p[1]} of {p[2]}")
                first = next(iter(rs.values()))
                body.append(
                    f"| {corpus} | {K} | {LABELS[name]} | {_mean(l2r):.1f} ± {_sd(l2r):.1f} "
                    f"({len(l2r)}) | {_mean(completion):.1f} | {rel} | "
                    f"{_mean(r['left_to_right_eval_seconds'] for r in rs.values()):.0f} "
                    f"({first['left_to_right_particles']} particles, "
                    f"{first['left_to_right_samples']} samples) |")
    if not body:
        return []
    return [
        "", "## DMR against LDA by the left-to-right estimator", "",
        "The runs of the first table scored again by `topictk evaluate --left-to-right` "
        "(Wallach et al. 2009, docs/algorithms.md §11.3), which integrates theta out instead of "
        "plugging in the fold-in's estimate: 20 particles, each document's value averaged over "
        "the run's 10 samples in probability space, DMR with each test document's alpha_d. "
        "Same held-out tokens as document completion, whose perplexity on the same seeds is "
        "beside it. Its cost grows with the square of the document length, so NIPS (about "
        "1,300 tokens per test document, some 30 minutes per run) is not scored this way. "
        "Evaluation seconds: one thread per run, two runs at a time.", "",
        "| corpus | K | method | left-to-right perplexity (mean ± sd, seeds) | document "
        "completion (same seeds) | vs its LDA (left-to-right): mean ± se, seeds below | "
        "evaluation s |",
        "| --- | --- | --- | --- | --- | --- | --- |", *body]


# --------------------------------------------------------------------------- CLI
def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--part", choices=["dmr", "pem", "all", "left-to-right"], default="all",
                   help="all = dmr and pem; left-to-right = score finished DMR-part runs by the "
                        "left-to-right estimator as well (slow: O(R len^2 K) per document)")
    p.add_argument("--corpora", nargs="+", default=["poliblog", "nips"])
    p.add_argument("--topics", nargs="+", type=int, default=[20, 50])
    p.add_argument("--libs", nargs="+", default=DMR_LIBS, choices=DMR_LIBS)
    p.add_argument("--iterations", type=int, default=300)
    p.add_argument("--optimize-burn-in", type=int, default=100)
    p.add_argument("--optimize-interval", type=int, default=50)
    p.add_argument("--sgrld-sweeps", type=int, default=SGRLD_SWEEPS,
                   help="local Gibbs sweeps of the SGRLD rows; other values are kept apart "
                        "(keys <method>-swN)")
    p.add_argument("--sgrld-a", type=float, default=0.01)
    p.add_argument("--sgrld-updates-factor", type=int, default=1,
                   help="train the SGRLD rows (sgrld, dmr-sgrld) for N times their updates "
                        "(burn-ins scaled with them); N > 1 rows are kept apart (keys "
                        "<method>-uNx)")
    p.add_argument("--pem-topics", type=int, default=20)
    p.add_argument("--em-iterations", type=int, default=50)
    p.add_argument("--particles", nargs="+", type=int, default=[1, 2, 4, 8])
    p.add_argument("--threads", type=int, default=1,
                   help="threads per DMR-part training run (topictk: training.threads and "
                        "inference.chunks; tomotopy: workers); N > 1 rows are kept apart")
    p.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3],
                   help="seeds of the DMR part (every row once per seed); the PEM part uses the "
                        "first")
    p.add_argument("--l2r-particles", type=int, default=20,
                   help="particles of the left-to-right estimator")
    p.add_argument("--jobs", type=int, default=1,
                   help="left-to-right evaluations run at a time (one thread each)")
    p.add_argument("--rerun", action="store_true", help="run rows already in results.json again")
    p.add_argument("--fresh", action="store_true", help="forget results.json")
    p.add_argument("--record", action="store_true",
                   help="write benchmarks/results/dmr.md (default: benchmarks/work/results/)")
    p.add_argument("--sgrld-updates", type=int, default=None,
                   help="updates of the SGRLD rows (default: per corpus, 400 / 300)")
    p.add_argument("--report-only", action="store_true",
                   help="rewrite the report from results.json")
    return p.parse_args(argv)


def main() -> None:
    if len(sys.argv) >= 3 and sys.argv[1].startswith("_"):
        mode, spec = sys.argv[1], json.loads(sys.argv[2])
        {"_tomotopy": worker_tomotopy,
         "_baseline": worker_baseline}[mode](spec)
        return
    args = parse_args(sys.argv[1:])
    bench = Bench(args)
    if args.report_only:
        write_section(bench.results, args)
        return
    bench.main()


if __name__ == "__main__":
    main()
