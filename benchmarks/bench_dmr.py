#!/usr/bin/env python3
"""DMR and particle-EM benchmarks (ALGORITHMS.md §9, §10).

Part ``dmr`` -- on stm_poliblog5k (metadata rating, blog) and nips12 (year), K = 20 and 50:

* topictk ``dmr-sem`` (stochastic EM), ``dmr-sgrld`` (SGRLD + SGLD) and plain LDA ``gibbs``
  (SparseLDA, symmetric alpha 0.1) on the same store, scored by ``topictk evaluate`` (document
  completion, fold-in with alpha_d = exp(x_d^T nu) for DMR, averaged over the 10 saved samples);
  ``dmr-sgrld-nu-burn-in`` is dmr-sgrld with nu held for the first third of its updates;
* tomotopy's ``DMRModel`` with the same K, alpha (0.1), eta (0.01), iterations, nu burn-in and
  optimisation interval, prior standard deviation sqrt(0.5), fed the store's training tokens with
  one categorical metadata string per document ("Conservative|ha"; NIPS: the year), snapshots
  of (phi, lambda) taken at the sweeps where topictk saves its samples, and scored by topictk's
  own evaluator: phi-hat from ``get_topic_word_dist``, alpha_d of each test document from
  ``get_topic_prior(its metadata)``, ``topictk.inference.gibbs.fold_in_probabilities`` with that
  (D_test, K) alpha and ``perplexity_from_probabilities``, averaged over the snapshots as topictk
  averages its samples (same fold-in settings and eval streams).

Part ``pem`` -- on uci_kos: particle EM with P in {1, 2, 4, 8} (T = 1, learnt alpha) beside batch
VB (smoothed, its defaults) and unsmoothed VB: held-out perplexity, EM iterations, training time,
peak memory.

Every training run is its own process (wall time, CPU time and peak RSS from wait4); one thread
by default. ``--threads N`` trains the topictk rows with N threads on N AD-LDA chunks and tomotopy
with N workers; those rows are kept apart (keys ``<method>-tN``) and reported in a table of their
own. Results go to ``benchmarks/work/dmr/results.json`` and to the section
"## DMR and particle EM" of ``benchmarks/RESULTS.md`` (that section only; the others are left as
they are).

Usage (a venv with ``pip install -e . -r benchmarks/requirements.txt``)::

    python benchmarks/bench_dmr.py                     # both parts, writes RESULTS.md
    python benchmarks/bench_dmr.py --part pem --em-iterations 10 --no-write   # quick check

``--sgrld-updates-factor N`` and ``--sgrld-sweeps N`` train the SGRLD rows longer or with other
local chains; those rows are kept apart (keys ``<method>-uNx``, ``<method>-swN``) and are not
part of the rendered section.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

from _results import replace_section  # benchmarks/_results.py (this directory)

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
DATA = (REPO / ".." / "shared" / "data").resolve()
WORK = HERE / "work" / "dmr"
RESULTS = HERE / "RESULTS.md"
SECTION = "## DMR and particle EM"

ALPHA, BETA = 0.1, 0.01
SIGMA2, SIGMA2_INTERCEPT = 0.5, 100.0
FOLD_IN_SWEEPS, FOLD_IN_BURN_IN = 50, 25
SGRLD_SWEEPS = 10
DMR_LIBS = ["gibbs", "dmr-sem", "dmr-sem-sparse", "dmr-sem-dense", "tomotopy-dmr", "sgrld",
            "dmr-sgrld", "dmr-sgrld-nu-burn-in"]

CORPORA = {
    "poliblog": {
        "prepare": ["stm_poliblog5k/docword.poliblog5k.txt.gz",
                    "--vocab", "stm_poliblog5k/vocab.poliblog5k.txt",
                    "--meta-file", "stm_poliblog5k/metadata.tsv", "--meta", "rating,blog"],
        "fields": ["rating", "blog"],
        "sgrld": {"updates": 400, "batch": 256},
    },
    "nips": {
        "prepare": ["nips12_roweis_knowceans/docword.nips12.txt.gz",
                    "--vocab", "nips12_roweis_knowceans/vocab.nips12.txt",
                    "--meta-file", "nips12_roweis_knowceans/metadata.tsv", "--meta", "year:cat"],
        "fields": ["year"],
        "sgrld": {"updates": 300, "batch": 128},
    },
    "kos": {
        "prepare": ["uci_kos/docword.kos.txt.gz", "--vocab", "uci_kos/vocab.kos.txt"],
        "fields": [],
    },
}


def _data_args(args: list[str]) -> list[str]:
    return [str(DATA / a) if a.endswith((".gz", ".txt", ".tsv")) else a for a in args]


# --------------------------------------------------------------------------- measuring
def run_measured(cmd: list[str], log_path: Path) -> dict:
    """Run ``cmd`` in its own process: exit code, wall time, CPU time, peak RSS (wait4)."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "w") as log:
        log.write("$ " + shlex.join(cmd) + "\n")
        log.flush()
        busy0 = busy_seconds()
        began = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=log, stderr=log, cwd=REPO)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - began
        busy = busy_seconds() - busy0
    cpu = usage.ru_utime + usage.ru_stime
    return {"rc": os.waitstatus_to_exitcode(status), "wall": wall, "cpu": cpu,
            "maxrss": usage.ru_maxrss * 1024, "contention": max(0.0, busy - cpu) / wall}


def busy_seconds() -> float:
    """CPU seconds all processes have used since boot (from /proc/stat)."""
    with open("/proc/stat") as f:
        parts = [int(x) for x in f.readline().split()[1:]]
    return (sum(parts) - parts[3] - parts[4]) / os.sysconf("SC_CLK_TCK")


def process_cpu() -> float:
    import resource
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def load_average() -> float:
    return os.getloadavg()[0]


# --------------------------------------------------------------------------- workers
def worker_topictk(spec: dict) -> None:
    """``topictk train`` in this process, with the driver's ``step`` wrapped to add up its CPU
    time (the run's own ``train_seconds`` is the wall time of the same calls)."""
    from topictk.inference.registry import get_driver

    cls = get_driver(spec["algorithm"])
    step, acc = cls.step, {"step_cpu": 0.0, "steps": 0, "active_steps": 0}

    def timed_step(self, state, t):
        c0 = process_cpu()
        out = step(self, state, t)
        acc["step_cpu"] += process_cpu() - c0
        acc["steps"] += 1
        acc["active_steps"] += int(out.tokens > 0)     # VB and PEM idle once converged
        return out

    cls.step = timed_step
    from topictk.cli import main as topictk_main
    sys.argv = ["topictk", "train", "--config", spec["config"], "--force", "--quiet"]
    code = 0
    try:
        topictk_main()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    Path(spec["info"]).write_text(json.dumps(acc))
    sys.exit(code)


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

    from topictk.config.loader import Section
    from topictk.config.schema import EVALUATION
    from topictk.corpus.store import CorpusStore
    from topictk.inference.base import TestSet
    from topictk.inference.perplexity import perplexity_from_probabilities
    from topictk.inference.sampled import fold_in_probabilities
    from topictk.streams import Streams

    store = CorpusStore.open(spec["store"])
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
        w0, c0 = time.perf_counter(), process_cpu()
        mdl.train(target - done, workers=workers)
        wall += time.perf_counter() - w0
        cpu += process_cpu() - c0
        done = target
        phi = np.full((V, K), 0.0)
        phi[ids] = np.array([mdl.get_topic_word_dist(k) for k in range(K)]).T
        priors = {m: np.asarray(mdl.get_topic_prior(m), dtype=np.float64)
                  for m in sorted(set(test_meta))}
        alpha = np.array([priors[m] for m in test_meta])
        snapshots.append((phi, alpha))
    if done != int(spec["iterations"]) or mdl.global_step != done:
        raise SystemExit(f"tomotopy ran {mdl.global_step} sweeps, expected {spec['iterations']}")
    evaluation = Section({**{k: o.default for k, o in EVALUATION.items()},
                          "fold_in_sweeps": FOLD_IN_SWEEPS, "fold_in_burn_in": FOLD_IN_BURN_IN})
    test = TestSet.from_store(store)
    e0 = time.perf_counter()
    total = np.zeros(test.heldout.indices.size)
    for phi, alpha in snapshots:
        phi = np.ascontiguousarray(phi)
        total += fold_in_probabilities(test, phi, phi, np.ascontiguousarray(alpha), evaluation,
                                       Streams(int(spec["seed"])), 0, 1)
    ppl, floored = perplexity_from_probabilities(total / len(snapshots), test.heldout.counts)
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
        print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)

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

    def store(self, name: str) -> Path:
        out = WORK / "stores" / name
        if not (out / "manifest.json").exists():
            cmd = [self.py, "-m", "topictk", "prepare", *_data_args(CORPORA[name]["prepare"]),
                   "--out", str(out), "--force"]
            res = run_measured(cmd, WORK / "logs" / f"prepare-{name}.log")
            if res["rc"] != 0:
                raise SystemExit(f"prepare {name} failed; see {WORK / 'logs'}")
        return out

    # ---- topictk runs
    def topictk_row(self, key: str, store: Path, config: dict, seed: int | None = None) -> dict:
        if key in self.results["rows"] and not self.args.rerun:
            return self.results["rows"][key]
        base = WORK / "runs" / key
        base.mkdir(parents=True, exist_ok=True)
        run_dir = base / "run"
        config = {"corpus": str(store), "output": str(run_dir), **config,
                  "training": {"seed": self.args.seeds[0] if seed is None else seed,
                               "threads": self.args.threads, "eval_every": 0,
                               "checkpoint_every": 0, "keep_checkpoints": 1},
                  "evaluation": {"fold_in_sweeps": FOLD_IN_SWEEPS,
                                 "fold_in_burn_in": FOLD_IN_BURN_IN}}
        cfg_path = base / "config.yaml"
        cfg_path.write_text(json.dumps(config, indent=1))          # JSON is YAML
        load0 = load_average()
        res = self.worker("_topictk", {"config": str(cfg_path), "info": str(base / "info.json"),
                                       "algorithm": config["inference"]["algorithm"]},
                          base / "train.log")
        if res["rc"] != 0:
            return {"error": f"train exit {res['rc']} (see {base / 'train.log'})"}
        from topictk.rundir import checkpoint as ckpt
        header, _ = ckpt.load_arrays(run_dir / "model.npz")
        info = json.loads((base / "info.json").read_text())
        e, result = self.evaluate(run_dir, base / "evaluate.log")
        if result is None:
            return {"error": f"evaluate exit {e['rc']} (see {base / 'evaluate.log'})"}
        (base / "evaluate.json").write_text(json.dumps(result))
        row = {"train_seconds": float(header["clock"]["train_seconds"]),
               "train_cpu": info["step_cpu"], "steps": info["steps"],
               "em_iterations": info["active_steps"],
               "peak_rss": res["maxrss"], "perplexity": result["perplexity"],
               "samples": result.get("samples"), "eval_seconds": e["wall"],
               "load_before": load0, "load_after": load_average(),
               "contention": res["contention"],
               "tokens_seen": int(header["clock"]["tokens_seen"])}
        for k in ("umass", "npmi", "diversity"):
            row[k] = result.get(k)
        self.results["rows"][key] = row
        self.save()
        return row

    def evaluate(self, run_dir: Path, log: Path, *options: str) -> tuple[dict, dict | None]:
        """``topictk evaluate RUN --json OPTIONS`` in its own process: the measurement and the
        JSON result (None if it failed)."""
        res = run_measured([self.py, "-m", "topictk", "evaluate", str(run_dir), "--json",
                            *options], log)
        if res["rc"] != 0:
            return res, None
        text = log.read_text()
        return res, json.loads(text[text.index("{"):])

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
        updates = sg["updates"] * a.sgrld_updates_factor
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
                                    "inference": {"iterations": I, **inference}})
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
        self.results.setdefault("machine", {
            "cpus": os.cpu_count(), "python": platform.python_version(),
            "platform": platform.platform()})
        self.results["settings"] = {k: v for k, v in vars(self.args).items()}
        if self.args.part in ("dmr", "all"):
            self.part_dmr()
        if self.args.part in ("pem", "all"):
            self.part_pem()
        if self.args.part == "left-to-right":
            self.part_left_to_right()
        self.results["bench_seconds_last_invocation"] = time.perf_counter() - began
        self.save()
        if not self.args.no_write:
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
    lines = [SECTION, ""]
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
        "### DMR: held-out perplexity against plain LDA and tomotopy",
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
            "", f"### DMR with {threads} threads", "",
            f"The same runs as above with {threads} threads per run: topictk "
            f"`training.threads: {threads}` on `inference.chunks: {threads}` (AD-LDA, §2.4: "
            f"the result does not depend on the thread count, only on the chunks), tomotopy "
            f"`train(..., workers={threads})` (its default parallel scheme). Every other "
            f"setting, the seeds and the evaluation are those of the table above; `contention` "
            f"counts cores busy outside the run, so 0 means the machine was otherwise idle.",
            "", *TABLE_HEADER, *table, "", "Targets (means over the seeds):", "", *verdicts]
    lines += _left_to_right_table(rows, seeds)
    lines += _prior_level_table()
    lines += ["", "### Particle EM on uci_kos", ""]
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
        lines.append(f"| {label} | {_fmt(r['perplexity'])} | {_fmt(final_bound(K, name), '.5f')} "
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
    replace_section(RESULTS, SECTION, "\n".join(lines))


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
        "", "### DMR against LDA by the left-to-right estimator", "",
        "The runs of the first table scored again by `topictk evaluate --left-to-right` "
        "(Wallach et al. 2009, ALGORITHMS.md §11.3), which integrates theta out instead of "
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


def _prior_level_table() -> list[str]:
    """The tables of ``benchmarks/dmr_prior_level.py`` (its JSON files), for the corpora and
    K it has been run on."""
    lines = []
    for corpus in ("poliblog", "nips"):
        for K in (20, 50):
            path = WORK / f"prior_level-{corpus}-K{K}.json"
            if path.exists():
                lines += _prior_level_rows(json.loads(path.read_text()))
    return lines


def _prior_level_rows(res: dict) -> list[str]:
    seeds = sorted(res["seeds"], key=int)
    K, alpha = res["K"], res["lda_alpha"]
    base = f"{alpha * K:g}"
    rows = [("dmr-sgrld", "learnt_level", "dmr-sgrld: its learnt level (mean sum_k alpha_dk)"),
            ("dmr-sgrld", "learnt", "dmr-sgrld as trained (the table's row)"),
            ("dmr-sgrld", base, f"dmr-sgrld rescored at level {base} (= K alpha)"),
            ("dmr-sgrld", f"{2 * alpha * K:g}", f"dmr-sgrld rescored at level {2 * alpha * K:g}"),
            ("dmr-sgrld-held", "perplexity", f"dmr-sgrld trained with the level held at {base}"),
            ("dmr-sgrld", ("likelihood_level", "sample_level"),
             "dmr-sgrld: level of its last sample"),
            ("dmr-sgrld", ("likelihood_level", "sweeps_10"),
             "dmr-sgrld: likelihood level for its last sample's topics, local chains of 10 "
             "sweeps (5 kept, as in training)"),
            ("dmr-sgrld", ("likelihood_level", "sweeps_200"),
             "dmr-sgrld: likelihood level for its last sample's topics, local chains of 200 "
             "sweeps (100 kept)"),
            ("sgrld", f"{alpha:g}", f"sgrld LDA, alpha {alpha:g} (the table's row)"),
            ("sgrld", f"{2 * alpha:g}", f"sgrld LDA rescored with alpha {2 * alpha:g}"),
            ("sgrld", f"{3.5 * alpha:g}", f"sgrld LDA rescored with alpha {3.5 * alpha:g}"),
            ("dmr-sem", "learnt_level", "dmr-sem: its learnt level (mean over samples)"),
            ("dmr-sem", ("likelihood_level", "sample_level"), "dmr-sem: level of its last sample"),
            ("dmr-sem", ("likelihood_level", "sweeps_200"),
             "dmr-sem: likelihood level for its last sample's topics, local chains of 200 "
             "sweeps (100 kept)"),
            ("dmr-sem", "learnt", "dmr-sem as trained (the table's row)"),
            ("dmr-sem", base, f"dmr-sem rescored at level {base}"),
            ("dmr-sem", f"{2 * alpha * K:g}", f"dmr-sem rescored at level {2 * alpha * K:g}"),
            ("gibbs", f"{alpha:g}", f"gibbs LDA, alpha {alpha:g} (the table's row)"),
            ("gibbs", f"{2 * alpha:g}", f"gibbs LDA rescored with alpha {2 * alpha:g}"),
            ("gibbs", f"{3.5 * alpha:g}", f"gibbs LDA rescored with alpha {3.5 * alpha:g}")]
    lines = [
        "", f"### The level of the learnt DMR prior ({res['corpus']}, K = {K})", "",
        "`python benchmarks/dmr_prior_level.py --corpus "
        f"{res['corpus']} --topics {K}` on the runs of the first table: the level of a DMR prior "
        "is the mean over training documents of sum_k alpha_dk (LDA's: K alpha). Rescored = the "
        "same saved samples scored again with every intercept shifted to that level (metadata "
        "contrasts unchanged), or, for LDA, with another alpha. Held = `dmr-sgrld` trained again "
        "with the intercepts shifted after every update so that the level stays at K alpha, the "
        "metadata weights learnt as usual (a diagnostic, not an option of topictk). Likelihood "
        "level = with the topics of a run's last sample fixed, the level at which the gradient "
        "of the training documents' likelihood along a common shift of the intercepts vanishes "
        "(Brent's method; the expectation over z by one local Gibbs chain per document, "
        "gradient averaged over its kept sweeps).", "",
        "| " + " | ".join(["run", *(f"seed {s}" for s in seeds), "mean"]) + " |",
        "| --- |" + " ---: |" * (len(seeds) + 1)]
    for name, key, label in rows:
        vals = [_lookup(res["seeds"][s].get(name, {}), key) for s in seeds]
        if any(v is None for v in vals):
            continue
        fmt = ".2f" if "level" in str(key) else ".1f"
        lines.append("| " + " | ".join([label, *(format(v, fmt) for v in vals),
                                        format(_mean(vals), fmt)]) + " |")
    return lines


def _lookup(tree: dict, key: str | tuple[str, ...]):
    """``tree[key]``, or ``tree[a][b]`` for ``key = (a, b)``; None where a key is missing."""
    for part in (key,) if isinstance(key, str) else key:
        if not isinstance(tree, dict) or part not in tree:
            return None
        tree = tree[part]
    return tree


def final_bound(K: int, name: str) -> float | None:
    """The run's last training objective per token (VB: ELBO; PEM: L_T) from its model.npz."""
    try:
        from topictk.rundir import checkpoint as ckpt
        header, _ = ckpt.load_arrays(WORK / "runs" / f"kos-K{K}-{name}" / "run" / "model.npz")
        manifest = json.loads((WORK / "stores" / "kos" / "manifest.json").read_text())
        return float(header["state"]["bound"]) / manifest["counts"]["train_tokens"]
    except (OSError, KeyError, TypeError, ValueError):
        return None


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
    p.add_argument("--no-write", action="store_true", help="do not touch RESULTS.md")
    p.add_argument("--report-only", action="store_true",
                   help="rewrite the section from results.json")
    return p.parse_args(argv)


def main() -> None:
    if len(sys.argv) >= 3 and sys.argv[1].startswith("_"):
        mode, spec = sys.argv[1], json.loads(sys.argv[2])
        {"_topictk": worker_topictk, "_tomotopy": worker_tomotopy,
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
