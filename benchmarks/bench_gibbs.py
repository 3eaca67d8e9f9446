#!/usr/bin/env python3
"""Collapsed Gibbs benchmark: topictk beside tomotopy (LDAModel) and lda (lda.LDA).

Every library is trained on exactly the training documents of one topictk corpus store, for the
same number of sweeps, with alpha = 0.1 and beta = 0.01, each training in its own subprocess
(peak RSS from wait4). Every model is then scored by topictk's own evaluator: its topic-word
counts, mapped to the store's vocabulary, give phi-hat = (n_kw + beta) / (n_k + V beta) and
``topictk.inference.gibbs.fold_in_probabilities`` + ``perplexity_from_probabilities`` are run on
the store's TestSet with the same alpha, the same fold-in settings and the same random streams,
so held-out tokens and estimator are identical for everyone.

Usage (from the repository root, in a venv with
``pip install -e . -r benchmarks/requirements.txt``)::

    python benchmarks/bench_gibbs.py                       # full run, writes benchmarks/RESULTS.md
    python benchmarks/bench_gibbs.py --sweeps 10 --sweeps-for 1000=5   # quick check

Corpora are read from ``../shared/data`` relative to the repository root; stores, run
directories and logs go to ``benchmarks/work/`` (git-ignored).
"""
from __future__ import annotations

import argparse
import datetime as _dt
import hashlib
import json
import os
import platform
import shlex
import subprocess
import sys
import time
from pathlib import Path

from _results import replace_section  # benchmarks/_results.py (this directory)

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
DATA = (REPO / ".." / "shared" / "data").resolve()
WORK = HERE / "work"

ALPHA = 0.1
BETA = 0.01
FOLD_IN_SWEEPS = 50      # topictk defaults (evaluation.fold_in_sweeps / fold_in_burn_in)
FOLD_IN_BURN_IN = 25


def corpus_prepare_args(name: str) -> list[str]:
    """``topictk prepare`` arguments (without --out) for the benchmark corpora."""
    if name == "uci_kos":
        d = DATA / "uci_kos"
        return [str(d / "docword.kos.txt.gz"), "--vocab", str(d / "vocab.kos.txt"),
                "--test-docs", "0.1", "--heldout-fraction", "0.2", "--seed", "0"]
    if name == "20news_gan2015":
        d = DATA / "20news_gan2015"
        return [str(d / "docword.train.txt.gz"), "--vocab", str(d / "vocab.txt"),
                "--test-observed", str(d / "docword.test_observed80.txt.gz"),
                "--test-heldout", str(d / "docword.test_heldout20.txt.gz")]
    raise SystemExit(f"bench_gibbs: unknown corpus {name!r}")


# Rows of one (corpus, K) block, run back to back in this order.
RUNS = [
    {"lib": "topictk", "threads": 1, "chunks": 1},
    {"lib": "tomotopy", "threads": 1},
    {"lib": "topictk", "threads": 1, "chunks": 2},
    {"lib": "topictk", "threads": 2, "chunks": 2},
    {"lib": "tomotopy", "threads": 2},
    {"lib": "lda", "threads": 1},
]


def run_label(spec: dict) -> str:
    if spec["lib"] == "topictk":
        return f"topictk-t{spec['threads']}-c{spec['chunks']}"
    return f"{spec['lib']}-t{spec['threads']}"


def scheme_of(spec: dict) -> str:
    if spec["lib"] == "topictk":
        return "exact (chunks 1)" if spec["chunks"] == 1 else f"AD-LDA chunks {spec['chunks']}"
    if spec["lib"] == "tomotopy":
        return "serial" if spec["threads"] == 1 else "DEFAULT (= PARTITION)"
    return "serial"


# --------------------------------------------------------------------------- helpers
def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def kernel_fingerprint() -> str:
    """sha256 over the sources of the Gibbs sampler (kernel, its Cython helpers, the driver).

    Detects a change of the code mid-run. Compiled modules are not hashed: concurrent
    editable installs rebuild them every few minutes with different bytes from the same source.
    """
    h = hashlib.sha256()
    inf, cy = REPO / "topictk" / "inference", REPO / "topictk" / "_cy"
    for so in sorted([inf / "_gibbs.pyx", inf / "gibbs.py", inf / "base.py",
                      *cy.glob("*.pyx"), *cy.glob("*.pxd"), *cy.glob("*.h")]):
        if not so.exists():
            continue
        h.update(so.name.encode())
        h.update(sha256_file(so).encode())
    return h.hexdigest()[:16]


def cpu_busy_seconds() -> float:
    """CPU seconds all cores of the machine have spent busy since boot (/proc/stat)."""
    with open("/proc/stat") as f:
        vals = [int(v) for v in f.readline().split()[1:9]]
    return (sum(vals) - vals[3] - vals[4]) / os.sysconf("SC_CLK_TCK")


def foreign_load(seconds: float = 1.0) -> float:
    """Cores kept busy by other processes over the next ``seconds`` (we are idle meanwhile)."""
    b0 = cpu_busy_seconds()
    time.sleep(seconds)
    return (cpu_busy_seconds() - b0) / seconds


def run_measured(cmd: list[str], log_path: Path, stdout_path: Path | None = None) -> dict:
    """Run ``cmd`` in its own process: wall time, exit code, that process's peak RSS and CPU,
    and ``foreign``: the cores other processes kept busy meanwhile (contention)."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "w") as log:
        log.write("$ " + shlex.join(cmd) + "\n")
        log.flush()
        out = open(stdout_path, "w") if stdout_path else log
        try:
            busy0 = cpu_busy_seconds()
            began = time.perf_counter()
            proc = subprocess.Popen(cmd, stdout=out, stderr=log, cwd=REPO)
            _, status, usage = os.wait4(proc.pid, 0)
            wall = time.perf_counter() - began
            busy = cpu_busy_seconds() - busy0
            proc.returncode = os.waitstatus_to_exitcode(status)
        finally:
            if stdout_path:
                out.close()
    cpu = usage.ru_utime + usage.ru_stime
    return {"rc": proc.returncode, "wall": wall, "maxrss": usage.ru_maxrss * 1024, "cpu": cpu,
            "foreign": max(0.0, (busy - cpu) / wall) if wall > 0 else 0.0}


def dir_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in Path(path).rglob("*") if p.is_file())


def mib(n: float | None) -> str:
    return "n/a" if n is None else f"{n / 2**20:.0f}"


# --------------------------------------------------------------------------- workers
def worker_peer(spec: dict) -> None:
    """Train tomotopy or lda on the store's training documents; save counts in store ids."""
    import logging

    import numpy as np

    from topictk.corpus.store import CorpusStore

    logging.basicConfig(level=logging.WARNING)
    store = CorpusStore.open(spec["store"])
    train = store.train()
    V, K, S = store.n_words, int(spec["K"]), int(spec["sweeps"])
    doc_ptr = np.asarray(train.doc_ptr)
    words = np.asarray(train.words)
    N = int(words.size)
    freq = np.bincount(words, minlength=V)
    info = {"n_tokens": N, "n_docs": int(doc_ptr.size - 1)}
    t0 = time.perf_counter()
    if spec["lib"] == "tomotopy":
        import tomotopy as tp
        vocab = store.vocab
        if len(set(vocab)) != V:
            raise SystemExit("store vocabulary has duplicate words")
        # min_cf = min_df = rm_top = 0: no word is dropped; alpha fixed (optim_interval 0).
        mdl = tp.LDAModel(tw=tp.TermWeight.ONE, min_cf=0, min_df=0, rm_top=0, k=K, alpha=ALPHA,
                          eta=BETA, seed=int(spec["seed"]))
        mdl.optim_interval = 0
        mdl.burn_in = 0
        for d in range(doc_ptr.size - 1):
            mdl.add_doc([vocab[w] for w in words[doc_ptr[d]:doc_ptr[d + 1]]])
        mdl.train(0, workers=int(spec["threads"]))          # prepare: vocab, initial topics
        info["construct_seconds"] = time.perf_counter() - t0
        began, c0 = time.perf_counter(), process_cpu()
        mdl.train(S, workers=int(spec["threads"]))
        info["train_seconds"] = time.perf_counter() - began
        info["train_cpu"] = process_cpu() - c0
        info["global_step"] = int(mdl.global_step)
        used = list(mdl.used_vocabs)
        index = {w: i for i, w in enumerate(vocab)}
        ids = np.array([index[w] for w in used], dtype=np.int64)
        if mdl.num_words != N or ids.size != np.count_nonzero(freq):
            raise SystemExit(f"tomotopy dropped tokens: {mdl.num_words} of {N} words, "
                             f"{ids.size} of {np.count_nonzero(freq)} word types")
        if not np.array_equal(np.asarray(mdl.used_vocab_freq), freq[ids]):
            raise SystemExit("tomotopy word frequencies differ from the store's training tokens")
        eta = float(mdl.eta)
        raw = np.array([mdl.get_topic_word_dist(k, normalize=False) for k in range(K)],
                       dtype=np.float64)                    # (K, realV) = n_kw + eta
        counts = np.rint(raw - eta)
        err = float(np.abs(raw - eta - counts).max(initial=0.0))
        if err > 0.05:
            raise SystemExit(f"tomotopy topic-word values are not counts + eta (err {err})")
        nkw = np.zeros((V, K), dtype=np.int32)
        nkw[ids] = counts.T.astype(np.int32)
        nk = np.asarray(mdl.get_count_by_topics(), dtype=np.int64)
        info["version"] = tp.__version__
        info["isa"] = tp.isa
        info["alpha_after"] = [float(a) for a in np.atleast_1d(mdl.alpha)[:3]]
    elif spec["lib"] == "lda":
        import lda
        import lda.utils
        import scipy.sparse as sp
        X = sp.csr_matrix((np.asarray(train.counts), np.asarray(train.indices),
                           np.asarray(train.indptr)), shape=(doc_ptr.size - 1, V))
        mdl = lda.LDA(n_topics=K, n_iter=S, alpha=ALPHA, eta=BETA,
                      random_state=int(spec["seed"]), refresh=10**9)
        # lda.LDA._fit without the log-likelihood monitoring: initialise, then S sweeps.
        random_state = lda.utils.check_random_state(mdl.random_state)
        rands = mdl._rands.copy()
        mdl._initialize(X)
        info["construct_seconds"] = time.perf_counter() - t0
        began, c0 = time.perf_counter(), process_cpu()
        for _ in range(S):
            random_state.shuffle(rands)
            mdl._sample_topics(rands)
        info["train_seconds"] = time.perf_counter() - began
        info["train_cpu"] = process_cpu() - c0
        if len(mdl.WS) != N:
            raise SystemExit(f"lda sees {len(mdl.WS)} tokens, the store has {N}")
        nkw = np.ascontiguousarray(mdl.nzw_.T, dtype=np.int32)
        nk = np.asarray(mdl.nz_, dtype=np.int64)
        info["version"] = getattr(lda, "__version__", "?")
    else:
        raise SystemExit(f"unknown peer {spec['lib']}")
    if not (np.array_equal(nkw.sum(axis=1), freq) and np.array_equal(nkw.sum(axis=0), nk)):
        raise SystemExit("peer counts do not add up to the store's training tokens")
    np.savez(spec["out"], nkw=nkw, nk=nk)
    Path(spec["info"]).write_text(json.dumps(info))


def process_cpu() -> float:
    import resource
    r = resource.getrusage(resource.RUSAGE_SELF)   # every thread of this process
    return r.ru_utime + r.ru_stime


def worker_topictk(spec: dict) -> None:
    """``topictk train --config CFG --force --quiet`` in this process, with the driver's ``step``
    wrapped to add up its wall and CPU time (CPU time is robust to other processes taking
    turns on the cores; the run's own ``train_seconds`` is the wall time of the same calls)."""
    from topictk.inference.gibbs import GibbsDriver

    step, acc = GibbsDriver.step, {"step_wall": 0.0, "step_cpu": 0.0, "steps": 0}

    def timed_step(self, state, t):
        c0, w0 = process_cpu(), time.perf_counter()
        out = step(self, state, t)
        acc["step_wall"] += time.perf_counter() - w0
        acc["step_cpu"] += process_cpu() - c0
        acc["steps"] += 1
        return out

    GibbsDriver.step = timed_step
    from topictk.cli import main as topictk_main
    sys.argv = ["topictk", "train", "--config", spec["config"], "--force", "--quiet"]
    code = 0
    try:
        topictk_main()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    Path(spec["info"]).write_text(json.dumps(acc))
    sys.exit(code)


def worker_eval(spec: dict) -> None:
    """Point perplexity of one set of counts with topictk's own fold-in evaluator."""
    import numpy as np

    from topictk.config.loader import Section
    from topictk.config.schema import EVALUATION
    from topictk.corpus.store import CorpusStore
    from topictk.inference.base import TestSet
    from topictk.inference.perplexity import perplexity_from_probabilities
    from topictk.inference.sampled import fold_in_probabilities, resolve_alpha
    from topictk.rundir import checkpoint as ckpt
    from topictk.state.counts import phi_hat
    from topictk.streams import Streams

    store = CorpusStore.open(spec["store"])
    if spec["kind"] == "topictk":
        _, arrays = ckpt.load_arrays(Path(spec["counts"]))
    else:
        arrays = dict(np.load(spec["counts"]))
    nkw, nk = arrays["nkw"], arrays["nk"]
    K = nkw.shape[1]
    if nkw.shape[0] != store.n_words:
        raise SystemExit("counts do not match the store's vocabulary")
    alpha = resolve_alpha(ALPHA, K)
    evaluation = Section({**{k: o.default for k, o in EVALUATION.items()},
                          "fold_in_sweeps": FOLD_IN_SWEEPS, "fold_in_burn_in": FOLD_IN_BURN_IN})
    test = TestSet.from_store(store)
    began = time.perf_counter()
    phi = phi_hat(nkw, nk, BETA)
    probs = fold_in_probabilities(test, phi, phi, alpha, evaluation, Streams(int(spec["seed"])),
                                  0, int(spec["threads"]))
    ppl, floored = perplexity_from_probabilities(probs, test.heldout.counts)
    Path(spec["out"]).write_text(json.dumps({
        "perplexity": ppl, "floored": floored, "heldout_tokens": test.n_heldout_tokens,
        "eval_seconds": time.perf_counter() - began}))


def worker_baseline(spec: dict) -> None:
    """Import a set of modules (and call ``module:function`` entries) and exit: the RSS floor
    of a worker of that kind."""
    import importlib
    for name in spec["modules"]:
        mod, _, func = name.partition(":")
        m = importlib.import_module(mod)
        if func:
            getattr(m, func)()


# --------------------------------------------------------------------------- orchestration
class Bench:
    def __init__(self, args):
        self.args = args
        self.py = sys.executable
        self.rows: list[dict] = []
        self.notes: list[str] = []
        self.kernel = kernel_fingerprint()

    def worker(self, mode: str, spec: dict, log: Path, stdout: Path | None = None) -> dict:
        return run_measured([self.py, str(Path(__file__).resolve()), mode, json.dumps(spec)],
                            log, stdout)

    def log(self, msg: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)

    # ---- stores
    def prepare(self, name: str) -> dict:
        out = WORK / "stores" / name
        if not (self.args.reuse_stores and (out / "manifest.json").exists()):
            cmd = [self.py, "-m", "topictk", "prepare", *corpus_prepare_args(name),
                   "--out", str(out), "--force"]
            res = run_measured(cmd, WORK / "logs" / f"prepare-{name}.log")
            if res["rc"] != 0:
                raise SystemExit(f"prepare {name} failed; see {WORK / 'logs'}")
        manifest = json.loads((out / "manifest.json").read_text())
        arrays = manifest["arrays"]
        return {"name": name, "path": out, "bytes": dir_bytes(out),
                "D": arrays["train_doc_ptr"]["shape"][0] - 1,
                "N": arrays["train_words"]["shape"][0],
                "V": int(manifest["counts"]["vocabulary"]),
                "test_docs": arrays["test_obs_doc_ptr"]["shape"][0] - 1,
                "prepare": "topictk prepare " + " ".join(
                    a.replace(str(DATA), "../shared/data") for a in corpus_prepare_args(name))}

    # ---- baselines
    def baselines(self) -> dict:
        sets = {
            "python": [],
            "python + numpy": ["numpy"],
            "topictk train process imports for Gibbs (topictk.cli, training.run, "
            "inference.gibbs, evaluation.run: numpy, click, yaml, tqdm; no SciPy)":
                ["topictk.cli", "topictk.training.run", "topictk.inference.gibbs",
                 "topictk.evaluation.run"],
            "the same plus the driver registry's name list":
                ["topictk.cli", "topictk.training.run", "topictk.inference.gibbs",
                 "topictk.evaluation.run", "topictk.inference.registry:algorithm_names"],
            "tomotopy worker imports (numpy, tomotopy, topictk.corpus.store)":
                ["numpy", "tomotopy", "topictk.corpus.store"],
            "lda worker imports (numpy, scipy.sparse, lda, topictk.corpus.store)":
                ["numpy", "scipy.sparse", "lda", "lda.utils", "topictk.corpus.store"],
        }
        out = {}
        for label, modules in sets.items():
            res = self.worker("_baseline", {"modules": modules},
                              WORK / "logs" / f"baseline-{len(out)}.log")
            out[label] = res["maxrss"]
        return out

    # ---- one training row
    def spare(self, threads: int) -> float:
        """Cores other processes may use without taking one from a run of ``threads``."""
        return max(0, (os.cpu_count() or 1) - threads)

    def wait_quiet(self, threads: int) -> float:
        """Wait (at most --max-wait s) until other processes leave our threads their cores."""
        began = time.monotonic()
        while True:
            f = foreign_load(1.0)
            if f < self.spare(threads) + self.args.quiet \
                    or time.monotonic() - began >= self.args.max_wait:
                return f
            time.sleep(3.0)

    def train_topictk(self, store: dict, K: int, sweeps: int, spec: dict, base: Path,
                      tag: str) -> dict:
        seed = self.args.seed
        run_dir = base / tag
        cfg = {"corpus": str(store["path"]), "output": str(run_dir),
               "model": {"topics": K, "alpha": ALPHA, "beta": BETA},
               "inference": {"algorithm": "gibbs", "iterations": sweeps, "sparse": True,
                             "chunks": spec["chunks"]},
               "training": {"seed": seed, "threads": spec["threads"], "eval_every": 0,
                            "checkpoint_every": 0, "keep_checkpoints": 1},
               "evaluation": {"fold_in_sweeps": FOLD_IN_SWEEPS,
                              "fold_in_burn_in": FOLD_IN_BURN_IN}}
        cfg_path = base / f"{tag}.yaml"
        cfg_path.write_text(json.dumps(cfg, indent=1))   # JSON is valid YAML
        log, info_path = base / f"{tag}.train.log", base / f"{tag}.info.json"
        res = self.worker("_topictk", {"config": str(cfg_path), "info": str(info_path)}, log)
        if res["rc"] != 0:
            return {"error": f"topictk train exit {res['rc']} (see {log})"}
        from topictk.rundir import checkpoint as ckpt
        header, _ = ckpt.load_arrays(run_dir / "model.npz")
        info = json.loads(info_path.read_text())
        return {"train_seconds": float(header["clock"]["train_seconds"]),
                "train_cpu": info["step_cpu"], "step_wall": info["step_wall"],
                "peak_rss": res["maxrss"], "process_wall": res["wall"],
                "process_cpu": res["cpu"], "foreign": res["foreign"],
                "counts": str(run_dir / "model.npz"), "kind": "topictk", "run_dir": str(run_dir)}

    def train_peer(self, store: dict, K: int, sweeps: int, spec: dict, base: Path,
                   tag: str) -> dict:
        counts, info_path = base / f"{tag}.counts.npz", base / f"{tag}.info.json"
        log = base / f"{tag}.train.log"
        res = self.worker("_peer", {"lib": spec["lib"], "threads": spec["threads"],
                                    "store": str(store["path"]), "K": K, "sweeps": sweeps,
                                    "seed": self.args.seed, "out": str(counts),
                                    "info": str(info_path)}, log)
        if res["rc"] != 0:
            return {"error": f"{spec['lib']} worker exit {res['rc']} (see {log})"}
        info = json.loads(info_path.read_text())
        return {"train_seconds": info["train_seconds"], "train_cpu": info["train_cpu"],
                "construct_seconds": info["construct_seconds"],
                "peak_rss": res["maxrss"], "process_wall": res["wall"],
                "process_cpu": res["cpu"], "foreign": res["foreign"],
                "counts": str(counts), "kind": "peer"}

    def train_once(self, store, K, sweeps, spec, base, tag) -> dict:
        """One training process; retried when it fails or topictk's kernel changed meanwhile
        (the checkout may be rebuilt while a run goes on)."""
        for attempt in range(4):
            before = kernel_fingerprint()
            if spec["lib"] == "topictk":
                out = self.train_topictk(store, K, sweeps, spec, base, tag)
            else:
                out = self.train_peer(store, K, sweeps, spec, base, tag)
            after = kernel_fingerprint()
            changed = spec["lib"] == "topictk" and not (before == after == self.kernel)
            if changed:
                self.notes.append(f"{store['name']} K={K} {tag}: topictk kernel changed "
                                  f"({self.kernel} -> {after}); row rerun")
                self.log(self.notes[-1])
                self.kernel = after
                continue
            if "error" in out and attempt < 3:
                self.log(f"  {out['error']}; retrying in 45 s")
                time.sleep(45)
                continue
            break
        out["kernel"] = self.kernel
        return out

    def run_one(self, store: dict, K: int, sweeps: int, spec: dict) -> dict:
        label = run_label(spec)
        base = WORK / "runs" / store["name"] / f"K{K}-S{sweeps}"
        base.mkdir(parents=True, exist_ok=True)
        row = {"corpus": store["name"], "K": K, "sweeps": sweeps, "label": label,
               "lib": spec["lib"], "threads": spec["threads"], "chunks": spec.get("chunks"),
               "scheme": scheme_of(spec)}
        best, tries = None, []
        for attempt in range(1 + self.args.contended_retries):
            row["foreign_before"] = self.wait_quiet(spec["threads"])
            out = self.train_once(store, K, sweeps, spec, base, f"{label}-a{attempt}")
            tries.append({k: out.get(k) for k in ("train_seconds", "foreign", "error")})
            if "error" in out:
                if best is None:
                    best = out
                break
            if best is None or "error" in best or out["train_seconds"] < best["train_seconds"]:
                best = out
            if out["foreign"] < self.spare(spec["threads"]) + self.args.contended \
                    or out["train_seconds"] > 120 or attempt == self.args.contended_retries:
                break
            self.log(f"  contended: other processes used {out['foreign']:.2f} cores "
                     f"({out['train_seconds']:.1f} s); running the row again")
        row.update(best)
        row["attempts"] = tries
        if "error" in row:
            return row
        row["tokens_per_s"] = store["N"] * sweeps / row["train_seconds"]
        row["tokens_per_cpu_s"] = store["N"] * sweeps / row["train_cpu"]
        if spec["lib"] == "topictk":
            row["count_bytes"] = store["D"] * K * 4 + store["V"] * K * 4 + K * 8
            row["store_bytes"] = store["bytes"]
            row["mem_target"] = store["bytes"] + 3 * row["count_bytes"]
        # point perplexity of the final state, same evaluator for everyone
        tag = Path(row["counts"]).parent.name if row["kind"] == "topictk" else \
            Path(row["counts"]).name.split(".")[0]
        ev_out = base / f"{tag}.eval.json"
        for attempt in range(2):
            res = self.worker("_eval", {"store": str(store["path"]), "counts": row["counts"],
                                        "kind": row["kind"], "seed": self.args.seed,
                                        "threads": self.args.eval_threads, "out": str(ev_out)},
                              base / f"{tag}.eval.log")
            if res["rc"] == 0:
                ev = json.loads(ev_out.read_text())
                row.update({"perplexity": ev["perplexity"], "floored": ev["floored"],
                            "eval_seconds": ev["eval_seconds"]})
                break
            row["eval_error"] = f"eval exit {res['rc']} (see {base / (tag + '.eval.log')})"
            time.sleep(20)
        # topictk's own sample-averaged perplexity (topictk evaluate)
        if spec["lib"] == "topictk" and self.want_sample_eval(spec, K):
            out = base / f"{tag}.evaluate.json"
            res = run_measured([self.py, "-m", "topictk", "evaluate", row["run_dir"], "--json",
                                "--threads", str(self.args.eval_threads)],
                               base / f"{tag}.evaluate.log", out)
            if res["rc"] == 0:
                r = json.loads(out.read_text())
                row.update({"perplexity_samples": r.get("perplexity"),
                            "n_samples": r.get("samples"), "evaluate_seconds": res["wall"]})
            else:
                row["evaluate_error"] = f"topictk evaluate exit {res['rc']}"
        return row

    def want_sample_eval(self, spec: dict, K: int) -> bool:
        mode = self.args.sample_eval
        if mode == "none":
            return False
        if mode == "all":
            return True
        # exact: only the exact sampler (chunks 1), whose samples are the reference
        return spec["chunks"] == 1

    def main(self) -> None:
        a = self.args
        started = _dt.datetime.now(_dt.timezone.utc)
        t_start = time.perf_counter()
        self.log(f"kernel fingerprint {self.kernel}")
        self.commands = [self.command()]
        self.prev = None
        corpora = list(a.corpora)
        if a.merge:
            path = WORK / "bench_gibbs_results.json"
            if not path.exists():
                raise SystemExit(f"--merge: {path} not found")
            self.prev = json.loads(path.read_text())
            if "commands" not in self.prev:    # written by an older version of this script
                argv = self.prev.get("argv", [sys.argv[0]])
                self.prev["commands"] = ["python " + shlex.join(
                    ["benchmarks/bench_gibbs.py", *argv[1:]])]
            if "finished" not in self.prev:
                fin = _dt.datetime.fromtimestamp(path.stat().st_mtime, _dt.timezone.utc)
                self.prev["finished"] = fin.isoformat()
                self.prev["total_seconds"] = (
                    fin - _dt.datetime.fromisoformat(self.prev["started"])).total_seconds()
            self.rows = self.prev["rows"]
            self.notes = self.prev.get("notes", [])
            self.commands = self.prev.get("commands", []) + self.commands
            corpora = list(dict.fromkeys([r["corpus"] for r in self.rows] + corpora))
            a.reuse_stores = True
        self.stores = [self.prepare(c) for c in corpora]
        self.base_rss = self.baselines()
        libs = set(a.libs)
        for store in self.stores:
            if store["name"] not in a.corpora:
                continue
            for K in a.topics:
                sweeps = a.sweeps_for.get(K, a.sweeps)
                for spec in RUNS:
                    if spec["lib"] not in libs or (a.runs and run_label(spec) not in a.runs):
                        continue
                    self.log(f"{store['name']} K={K} S={sweeps} {run_label(spec)} ...")
                    row = self.run_one(store, K, sweeps, spec)
                    key = (row["corpus"], row["K"], row["label"])
                    at = next((i for i, r in enumerate(self.rows)
                               if (r["corpus"], r["K"], r["label"]) == key), None)
                    if at is None:
                        self.rows.append(row)
                    else:
                        self.rows[at] = row
                        self.notes.append(f"{key[0]} K={key[1]} {key[2]}: rerun on "
                                          f"{started:%Y-%m-%d %H:%M} UTC by `{self.commands[-1]}`")
                    self.log("  " + (row.get("error") or
                                     f"{row['tokens_per_s'] / 1e6:.2f} M tok/s, "
                                     f"ppl {row.get('perplexity', float('nan')):.1f}, "
                                     f"RSS {mib(row['peak_rss'])} MiB, "
                                     f"contention {row['foreign']:.2f} cores"))
                    self.save_json(started)
        self.finished = _dt.datetime.now(_dt.timezone.utc)
        self.total_seconds = time.perf_counter() - t_start
        if self.prev is not None:          # keep the date and duration of the original run
            started = _dt.datetime.fromisoformat(self.prev["started"])
            self.finished = _dt.datetime.fromisoformat(self.prev.get("finished",
                                                                     self.finished.isoformat()))
            self.total_seconds = self.prev.get("total_seconds", self.total_seconds)
        if kernel_fingerprint() != self.kernel:
            self.notes.append("the topictk kernel changed after the last topictk row")
        self.notes = [n for n in self.notes if not n.startswith("the Gibbs kernel was rebuilt")]
        used: dict[str, list[str]] = {}
        for r in self.rows:
            if r["lib"] == "topictk" and r.get("kernel"):
                used.setdefault(r["kernel"], []).append(f"{r['corpus']} K={r['K']} {r['label']}")
        if len(used) > 1:
            self.notes.append("the Gibbs kernel was rebuilt by others between rows; topictk rows "
                              "ran on " + "; ".join(f"kernel {k}: {', '.join(v)}"
                                                    for k, v in used.items()))
        self.save_json(started)
        self.write_markdown(started)

    def command(self) -> str:
        script = Path(sys.argv[0]).resolve()
        name = str(script.relative_to(REPO)) if script.is_relative_to(REPO) else sys.argv[0]
        return "python " + shlex.join([name, *sys.argv[1:]])

    def save_json(self, started) -> None:
        WORK.mkdir(parents=True, exist_ok=True)
        data = {"started": started.isoformat(), "commands": self.commands, "rows": self.rows,
                "notes": self.notes}
        if getattr(self, "finished", None) is not None:
            data.update(finished=self.finished.isoformat(), total_seconds=self.total_seconds)
        (WORK / "bench_gibbs_results.json").write_text(json.dumps(data, indent=1, default=str))

    # ---- report
    def machine(self) -> list[str]:
        def cmd_out(cmd):
            try:
                return subprocess.run(cmd, capture_output=True, text=True, cwd=REPO).stdout.strip()
            except OSError:
                return ""
        lscpu = cmd_out(["lscpu"])
        model = next((ln.split(":", 1)[1].strip() for ln in lscpu.splitlines()
                      if ln.startswith("Model name")), platform.processor())
        mem_kb = next((int(ln.split()[1]) for ln in open("/proc/meminfo")
                       if ln.startswith("MemTotal")), 0)
        import numpy
        vers = {}
        for mod in ("tomotopy", "lda", "scipy"):
            try:
                vers[mod] = __import__(mod).__version__
            except Exception:  # noqa: BLE001
                vers[mod] = "not installed"
        try:
            import tomotopy
            isa = tomotopy.isa
        except Exception:  # noqa: BLE001
            isa = "?"
        head = cmd_out(["git", "rev-parse", "--short", "HEAD"])
        dirty = cmd_out(["git", "status", "--porcelain", "--", "topictk"])
        dirty = [ln.split()[-1] for ln in dirty.splitlines() if ln.strip()]
        pyx = REPO / "topictk" / "inference" / "_gibbs.pyx"
        return [
            f"- CPU: {model}; {os.cpu_count()} logical cores (`lscpu`); "
            f"RAM {mem_kb / 2**20:.1f} GiB",
            f"- Python {platform.python_version()} ({sys.executable}), numpy {numpy.__version__}, "
            f"scipy {vers['scipy']}, tomotopy {vers['tomotopy']} (SIMD: {isa}), "
            f"lda {vers['lda']}",
            f"- topictk: git {head}" + (f" with uncommitted changes in {len(dirty)} files "
                                         f"under topictk/ (the checkout is shared and in flux)"
                                         if dirty else " (clean)")
            + f"; _gibbs.pyx sha256 {sha256_file(pyx)[:12]}; Gibbs sources fingerprint "
              f"{self.kernel}",
        ]

    def write_markdown(self, started) -> None:
        a = self.args
        L = [SECTION, "",
             "Generated by `benchmarks/bench_gibbs.py` (it rewrites only this section; a "
             f"`{KEEP}` subsection at its end is kept); raw numbers in "
             "`benchmarks/work/bench_gibbs_results.json` (git-ignored).", "",
             "```bash", "python3 -m venv /tmp/benchvenv && /tmp/benchvenv/bin/pip install -e . "
             "-r benchmarks/requirements.txt",
             *[f"/tmp/benchvenv/bin/{c}" for c in self.commands], "```", "",
             f"- Date: {started:%Y-%m-%d %H:%M} UTC to {self.finished:%H:%M} UTC "
             f"({self.total_seconds / 60:.1f} min in total)", *self.machine(), ""]
        L += ["### Method", "",
              f"- Each library trains on exactly the training tokens of the topictk store "
              f"(tomotopy: "
              f"one `add_doc` per training document with the store's word strings, `min_cf=0, "
              f"min_df=0, rm_top=0`, `optim_interval=0` so α stays fixed; the worker checks that "
              f"tomotopy's word frequencies equal the store's; lda: the store's doc-term CSR). "
              f"α = {ALPHA}, β = {BETA}, seed {a.seed}, the same sweeps for every library in a "
              f"row.",
              "- tokens/s = training tokens × sweeps / training wall time of the sweeps only "
              "(topictk: `train_seconds` from the model header, i.e. the driver's `step` calls of "
              "`topictk train` with `eval_every: 0`, run in-process by a wrapper that also adds "
              "up the CPU time of the same calls; tomotopy: `train(S)` after `train(0)` "
              "prepared the model; lda: the `_sample_topics` loop of `LDA._fit` after "
              "`_initialize`, without its log-likelihood monitoring). tokens/CPU-s divides by "
              "the CPU time (all threads) of the same calls instead: for 1-thread rows it is "
              "the speed with a core to itself, robust to other processes time-sharing the "
              "machine; for 2-thread rows it is per core (wall-clock speed-up needs tokens/s).",
              f"- Held-out perplexity (point): φ̂ = (n_kw + β)/(n_k + Vβ) from the final "
              f"state's "
              f"counts (peers' counts mapped to the store vocabulary), then topictk's "
              f"`fold_in_probabilities` ({FOLD_IN_SWEEPS} fold-in sweeps, {FOLD_IN_BURN_IN} "
              f"burn-in, same random streams) and `perplexity_from_probabilities` on the "
              f"store's TestSet — identical held-out tokens and estimator for every library. "
              f"`ppl (samples)` is topictk's own `topictk evaluate` (averaged over the saved "
              f"posterior samples of the second half of the run).",
              "- Peak RSS: `ru_maxrss` of the training process (wait4), which includes the "
              "interpreter, imports, reading the store and building the model. Baselines "
              "(processes that only import) are listed below.",
              "- Rows of one (corpus, K) block run back to back in one invocation. The machine "
              "is shared: `contention` is the number of cores other processes kept busy while "
              "the training process ran (/proc/stat minus the process's own CPU time; "
              f"{os.cpu_count()} cores in all, no SMT). Before each row the script waits "
              f"(≤ {a.max_wait:g} s) until other processes leave the row's threads their cores "
              f"(contention < cores − threads + {a.quiet:g}); a row shorter than 120 s whose "
              f"contention was ≥ cores − threads + {a.contended:g} is run again (up to "
              f"{a.contended_retries}×) and the faster run is kept"
              + (" (disabled here: `--contended-retries 0`, the machine was busy throughout)."
                 if a.contended_retries == 0 else "."), ""]
        L += ["### Baseline RSS (import only)", "", "| process | peak RSS MiB |", "| --- | ---: |"]
        for k, v in self.base_rss.items():
            L.append(f"| {k} | {mib(v)} |")
        L.append("")
        for store in self.stores:
            L += [f"### {store['name']}", "",
                  f"`{store['prepare']}`: {store['D']:,} training documents, "
                  f"{store['N']:,} training tokens, V = {store['V']:,}, "
                  f"{store['test_docs']:,} test documents; store {store['bytes'] / 2**20:.1f} MiB "
                  f"on disk.", "",
                  "| library | threads | parallel scheme | K | sweeps | train s | tokens/s | "
                  "tokens/CPU-s | held-out ppl (point) | ppl (samples) | peak RSS MiB | "
                  "contention |",
                  "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | "
                  "---: |"]
            for r in self.rows:
                if r["corpus"] != store["name"]:
                    continue
                if "error" in r and "tokens_per_s" not in r:
                    L.append(f"| {r['lib']} | {r['threads']} | {r['scheme']} | {r['K']} | "
                             f"{r['sweeps']} | error: {r['error']} | | | | | | |")
                    continue
                ps = (f"{r['perplexity_samples']:.1f} ({r['n_samples']})"
                      if r.get("perplexity_samples") is not None else "")
                L.append(f"| {r['lib']} | {r['threads']} | {r['scheme']} | {r['K']} | "
                         f"{r['sweeps']} | {r['train_seconds']:.1f} | "
                         f"{r['tokens_per_s'] / 1e6:.2f} M | "
                         f"{r['tokens_per_cpu_s'] / 1e6:.2f} M | "
                         f"{r.get('perplexity', float('nan')):.1f} | {ps} | "
                         f"{mib(r['peak_rss'])} | {r['foreign']:.2f} |")
            L.append("")
        L += self.targets()
        if self.notes:
            L += ["### Notes from the run", ""] + [f"- {n}" for n in self.notes] + [""]
        write_section(Path(a.results), "\n".join(L).rstrip() + "\n")
        self.log(f"wrote the {SECTION!r} section of {a.results}")

    def find(self, corpus, K, label):
        for r in self.rows:
            if r["corpus"] == corpus and r["K"] == K and r["label"] == label \
                    and "tokens_per_s" in r:
                return r
        return None

    def targets(self) -> list[str]:
        L = ["### Targets", "",
             "| target | corpus | K | measured | holds? |", "| --- | --- | ---: | --- | --- |"]
        yes = lambda ok: "**yes**" if ok else "**no**"  # noqa: E731
        for store in self.stores:
            c = store["name"]
            for K in sorted({r["K"] for r in self.rows if r["corpus"] == c}):
                tk1 = self.find(c, K, "topictk-t1-c1")
                tm1 = self.find(c, K, "tomotopy-t1")
                if tk1 and tm1:
                    need = 1.0 if K < 1000 else 2.0
                    ratio = tk1["tokens_per_s"] / tm1["tokens_per_s"]
                    L.append(f"| topictk 1 thread ≥ {need:g}× tomotopy 1 worker (tokens/s) | "
                             f"{c} | "
                             f"{K} | {tk1['tokens_per_s'] / 1e6:.2f} M vs "
                             f"{tm1['tokens_per_s'] / 1e6:.2f} M = {ratio:.2f}× | "
                             f"{yes(ratio >= need)} |")
                    ratio = tk1["tokens_per_cpu_s"] / tm1["tokens_per_cpu_s"]
                    L.append(f"| the same per CPU-second | {c} | {K} | "
                             f"{tk1['tokens_per_cpu_s'] / 1e6:.2f} M vs "
                             f"{tm1['tokens_per_cpu_s'] / 1e6:.2f} M = {ratio:.2f}× | "
                             f"{yes(ratio >= need)} |")
                t1c2 = self.find(c, K, "topictk-t1-c2")
                t2c2 = self.find(c, K, "topictk-t2-c2")
                if t1c2 and t2c2:
                    sp = t2c2["tokens_per_s"] / t1c2["tokens_per_s"]
                    L.append(f"| topictk 2 threads ≥ 1.7× 1 thread (chunks 2, tokens/s) | {c} | "
                             f"{K} | {sp:.2f}× (contention {t1c2['foreign']:.2f} / "
                             f"{t2c2['foreign']:.2f} cores) | {yes(sp >= 1.7)} |")
                if tk1 and tm1 and "perplexity" in tk1 and "perplexity" in tm1:
                    rel = tk1["perplexity"] / tm1["perplexity"] - 1
                    L.append(f"| perplexity within 1% of tomotopy (same sweeps, point estimate) "
                             f"| {c} | {K} | {tk1['perplexity']:.1f} vs {tm1['perplexity']:.1f} "
                             f"= {rel:+.2%} | {yes(abs(rel) <= 0.01)} |")
        L.append("")
        L += ["#### Memory: peak RSS ≤ store size + 3× count arrays", "",
              "count arrays = ndk (D×K int32) + nkw (V×K int32) + nk (K int64). "
              "`− baseline` subtracts the RSS of a process that only imports what "
              "`topictk train` "
              "imports.", "",
              "| corpus | K | run | peak RSS MiB | store MiB | 3× counts MiB | target MiB | "
              "peak ≤ target | peak − baseline MiB | (peak − baseline) ≤ target |",
              "| --- | ---: | --- | ---: | ---: | ---: | ---: | --- | ---: | --- |"]
        base = next((v for k, v in self.base_rss.items() if k.startswith("topictk")), 0)
        for r in self.rows:
            if r["lib"] != "topictk" or "mem_target" not in r:
                continue
            net = r["peak_rss"] - base
            L.append(f"| {r['corpus']} | {r['K']} | {r['label']} | {mib(r['peak_rss'])} | "
                     f"{mib(r['store_bytes'])} | {mib(3 * r['count_bytes'])} | "
                     f"{mib(r['mem_target'])} | {yes(r['peak_rss'] <= r['mem_target'])} | "
                     f"{mib(net)} | {yes(net <= r['mem_target'])} |")
        L.append("")
        return L


SECTION = "## Collapsed Gibbs: topictk vs tomotopy vs lda"
KEEP = "### Observations (hand-written)"   # kept when the section is regenerated


def write_section(path: Path, text: str) -> None:
    """Replace (or append) only our section of RESULTS.md, keeping its hand-written notes."""
    replace_section(path, SECTION, text, keep=KEEP)


def parse_sweeps_for(items: list[str]) -> dict[int, int]:
    out = {}
    for item in items:
        k, _, s = item.partition("=")
        out[int(k)] = int(s)
    return out


def main(argv=None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    workers = {"_peer": worker_peer, "_topictk": worker_topictk, "_eval": worker_eval,
               "_baseline": worker_baseline}
    if argv and argv[0] in workers:
        workers[argv[0]](json.loads(argv[1]))
        return
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--corpora", nargs="+", default=["uci_kos", "20news_gan2015"])
    p.add_argument("--topics", nargs="+", type=int, default=[50, 128, 1000])
    p.add_argument("--sweeps", type=int, default=200, help="sweeps for every K (default 200)")
    p.add_argument("--sweeps-for", nargs="*", default=["1000=30"], metavar="K=S",
                   help="per-K override of --sweeps, same for all libraries (default 1000=30)")
    p.add_argument("--libs", nargs="+", default=["topictk", "tomotopy", "lda"])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--eval-threads", type=int, default=os.cpu_count() or 1,
                   help="threads for fold-in evaluation (never changes the numbers)")
    p.add_argument("--sample-eval", choices=("all", "exact", "none"), default="exact",
                   help="which topictk rows also get `topictk evaluate` (sample-averaged "
                        "perplexity): all, only the exact sampler (default) or none")
    p.add_argument("--quiet", type=float, default=0.3, metavar="CORES",
                   help="before each row wait until other processes use fewer than "
                        "(cores - threads of the row) + CORES cores (0.3)")
    p.add_argument("--max-wait", type=float, default=20.0, metavar="S",
                   help="longest wait for a quiet machine before a row (20 s)")
    p.add_argument("--contended", type=float, default=0.3, metavar="CORES",
                   help="a training process during which other processes used "
                        "(cores - its threads) + CORES cores or more is contended and is "
                        "run again (0.3)")
    p.add_argument("--contended-retries", type=int, default=1,
                   help="reruns of a contended row shorter than 120 s; the fastest is kept (1)")
    p.add_argument("--runs", nargs="+", default=None, metavar="LABEL",
                   help="only these rows, e.g. topictk-t1-c2 tomotopy-t2 lda-t1")
    p.add_argument("--merge", action="store_true",
                   help="rerun only the selected rows and merge them into the previous "
                        "benchmarks/work/bench_gibbs_results.json, then rewrite the section")
    p.add_argument("--report-only", action="store_true",
                   help="run no row: measure the baselines again and rewrite the section from "
                        "benchmarks/work/bench_gibbs_results.json (implies --merge)")
    p.add_argument("--reuse-stores", action="store_true",
                   help="keep existing stores in benchmarks/work/stores")
    p.add_argument("--results", default=str(HERE / "RESULTS.md"))
    args = p.parse_args(argv)
    args.sweeps_for = parse_sweeps_for(args.sweeps_for)
    if args.report_only:
        args.merge, args.corpora = True, []
    if not DATA.is_dir():
        raise SystemExit(f"bench_gibbs: {DATA} not found (expected ../shared/data beside the repo)")
    Bench(args).main()


if __name__ == "__main__":
    main()
