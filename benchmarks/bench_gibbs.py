#!/usr/bin/env python3
"""Collapsed Gibbs benchmark: topictk beside tomotopy (LDAModel) and lda (lda.LDA).

Every library is trained on exactly the training documents of one topictk corpus store, for the
same number of sweeps, with alpha = 0.1 and beta = 0.01, each training in its own subprocess
(peak RSS from wait4): topictk by ``topictk train``, the peers by a worker of this script.
Every model is then scored by one evaluator, ``topictk.score_topic_word``: phi-hat =
(n_kw + beta) / (n_k + V beta) from the final counts (topictk: ``Run.topic_word()``, the
same point estimate; the peers' counts mapped to the store's vocabulary), Gibbs fold-in of
the store's test documents with the same alpha, settings and seed, so held-out tokens and
estimator are identical for everyone.

Usage (from the repository root, with ``pip install -e . -r benchmarks/requirements.txt``)::

    python benchmarks/bench_gibbs.py --record                  # full run (~40-50 min, 2 cores)
    python benchmarks/bench_gibbs.py --corpora uci_kos --topics 50 --sweeps 10   # quick check
"""
from __future__ import annotations

import argparse
import datetime as _dt
import hashlib
import json
import os
import sys
import time
from pathlib import Path

import harness as h

NAME = "gibbs"
WORK = h.WORK / "gibbs"
ALPHA = 0.1
BETA = 0.01
# one estimator of theta for every library (the topictk rows' evaluate uses it too)
ESTIMATOR = "gibbs"
FOLD_IN_SWEEPS = 50      # topictk defaults (evaluation.fold_in_sweeps / fold_in_burn_in)
FOLD_IN_BURN_IN = 25

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


def source_fingerprint() -> str:
    """sha256 over topictk's sources (.py, .pyx, .pxd): detects a change of the code mid-run
    (the checkout may be rebuilt while a run goes on). Compiled modules are not hashed:
    editable installs rebuild them with different bytes from the same source."""
    digest = hashlib.sha256()
    for path in sorted((h.REPO / "topictk").rglob("*")):
        if path.suffix in (".py", ".pyx", ".pxd") and path.is_file():
            digest.update(str(path.relative_to(h.REPO)).encode())
            digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()[:16]


# --------------------------------------------------------------------------- workers
def worker_peer(spec: dict) -> None:
    """Train tomotopy or lda on the store's training documents; save counts in store ids."""
    import logging

    import numpy as np

    import topictk

    logging.basicConfig(level=logging.WARNING)
    store = topictk.open_store(spec["store"])
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
        began, c0 = time.perf_counter(), h.process_cpu()
        mdl.train(S, workers=int(spec["threads"]))
        info["train_seconds"] = time.perf_counter() - began
        info["train_cpu"] = h.process_cpu() - c0
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
        began, c0 = time.perf_counter(), h.process_cpu()
        for _ in range(S):
            random_state.shuffle(rands)
            mdl._sample_topics(rands)
        info["train_seconds"] = time.perf_counter() - began
        info["train_cpu"] = h.process_cpu() - c0
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


def worker_eval(spec: dict) -> None:
    """Point perplexity of one model with ``topictk.score_topic_word``."""
    import numpy as np

    import topictk

    store = topictk.open_store(spec["store"])
    if spec["kind"] == "topictk":
        phi = topictk.load_run(spec["model"]).topic_word()
    else:
        counts = np.load(spec["model"])
        nkw, nk = counts["nkw"], counts["nk"]
        phi = ((nkw + BETA) / (nk + store.n_words * BETA)).T
    began = time.perf_counter()
    result = topictk.score_topic_word(store, phi, ALPHA, sweeps=FOLD_IN_SWEEPS,
                                      burn_in=FOLD_IN_BURN_IN, seed=int(spec["seed"]),
                                      threads=int(spec["threads"]), fold_in=ESTIMATOR)
    result["eval_seconds"] = time.perf_counter() - began
    Path(spec["out"]).write_text(json.dumps(result))


def worker_baseline(spec: dict) -> None:
    """Import a set of modules and exit: the RSS floor of a worker of that kind."""
    import importlib
    for name in spec["modules"]:
        importlib.import_module(name)


# --------------------------------------------------------------------------- orchestration
class Bench:
    def __init__(self, args):
        self.args = args
        self.rows: list[dict] = []
        self.notes: list[str] = []
        self.fingerprint = source_fingerprint()

    def worker(self, mode: str, spec: dict, log: Path) -> dict:
        return h.run_measured([sys.executable, str(Path(__file__).resolve()), mode,
                               json.dumps(spec)], log)

    def store(self, name: str) -> dict:
        path = h.ensure_store(name)
        return {"name": name, **h.store_facts(path), "path": str(path),
                "prepare": h.prepare_command(name, path)}

    def baselines(self) -> dict:
        sets = {"python": [], "python + numpy": ["numpy"],
                "tomotopy worker imports (numpy, tomotopy, topictk.api)":
                    ["numpy", "tomotopy", "topictk.api"],
                "lda worker imports (numpy, scipy.sparse, lda, topictk.api)":
                    ["numpy", "scipy.sparse", "lda", "lda.utils", "topictk.api"]}
        out = {}
        for label, modules in sets.items():
            res = self.worker("_baseline", {"modules": modules},
                              WORK / "logs" / f"baseline-{len(out)}.log")
            out[label] = res["maxrss"]
        res = h.run_measured([*h.TOPICTK, "train", "--help"], WORK / "logs" / "baseline-cli.log")
        out["`topictk train --help` (the command before it chooses an algorithm)"] = res["maxrss"]
        return out

    def train_topictk(self, store: dict, K: int, sweeps: int, spec: dict, base: Path,
                      tag: str) -> dict:
        run_dir = base / tag
        cfg = {"corpus": store["path"], "output": str(run_dir),
               "model": {"topics": K, "alpha": ALPHA, "beta": BETA},
               "inference": {"algorithm": "gibbs", "iterations": sweeps, "sparse": True,
                             "chunks": spec["chunks"]},
               "training": {"seed": self.args.seed, "threads": spec["threads"], "eval_every": 0,
                            "checkpoint_every": 0, "keep_checkpoints": 1},
               "evaluation": {"fold_in_sweeps": FOLD_IN_SWEEPS,
                              "fold_in_burn_in": FOLD_IN_BURN_IN}}
        log = base / f"{tag}.train.log"
        res = h.train(cfg, base / f"{tag}.yaml", log)
        if res["rc"] != 0:
            return {"error": f"topictk train exit {res['rc']} (see {log})"}
        import topictk
        return {"train_seconds": topictk.load_run(run_dir).train_seconds,
                "train_cpu": res["cpu"], "peak_rss": res["maxrss"], "process_wall": res["wall"],
                "process_cpu": res["cpu"], "foreign": res["foreign"], "model": str(run_dir),
                "kind": "topictk", "run_dir": str(run_dir)}

    def train_peer(self, store: dict, K: int, sweeps: int, spec: dict, base: Path,
                   tag: str) -> dict:
        counts, info_path = base / f"{tag}.counts.npz", base / f"{tag}.info.json"
        log = base / f"{tag}.train.log"
        res = self.worker("_peer", {"lib": spec["lib"], "threads": spec["threads"],
                                    "store": store["path"], "K": K, "sweeps": sweeps,
                                    "seed": self.args.seed, "out": str(counts),
                                    "info": str(info_path)}, log)
        if res["rc"] != 0:
            return {"error": f"{spec['lib']} worker exit {res['rc']} (see {log})"}
        info = json.loads(info_path.read_text())
        return {"train_seconds": info["train_seconds"], "train_cpu": res["cpu"],
                "loop_cpu": info["train_cpu"], "construct_seconds": info["construct_seconds"],
                "peak_rss": res["maxrss"], "process_wall": res["wall"],
                "process_cpu": res["cpu"], "foreign": res["foreign"], "model": str(counts),
                "kind": "peer"}

    def train_once(self, store, K, sweeps, spec, base, tag) -> dict:
        """One training process; retried when it fails or topictk's sources changed meanwhile."""
        for attempt in range(4):
            before = source_fingerprint()
            if spec["lib"] == "topictk":
                out = self.train_topictk(store, K, sweeps, spec, base, tag)
            else:
                out = self.train_peer(store, K, sweeps, spec, base, tag)
            after = source_fingerprint()
            if spec["lib"] == "topictk" and not (before == after == self.fingerprint):
                self.notes.append(f"{store['name']} K={K} {tag}: topictk sources changed "
                                  f"({self.fingerprint} -> {after}); row rerun")
                h.log(self.notes[-1])
                self.fingerprint = after
                continue
            if "error" in out and attempt < 3:
                h.log(f"  {out['error']}; retrying in 45 s")
                time.sleep(45)
                continue
            break
        out["fingerprint"] = self.fingerprint
        return out

    def run_one(self, store: dict, K: int, sweeps: int, spec: dict) -> dict:
        a = self.args
        label = run_label(spec)
        base = WORK / "runs" / store["name"] / f"K{K}-S{sweeps}"
        base.mkdir(parents=True, exist_ok=True)
        row = {"corpus": store["name"], "K": K, "sweeps": sweeps, "label": label,
               "lib": spec["lib"], "threads": spec["threads"], "chunks": spec.get("chunks"),
               "scheme": scheme_of(spec)}
        best, tries = None, []
        for attempt in range(1 + a.contended_retries):
            row["foreign_before"] = h.wait_for_quiet(spec["threads"], a.quiet_margin, a.max_wait)
            out = self.train_once(store, K, sweeps, spec, base, f"{label}-a{attempt}")
            tries.append({k: out.get(k) for k in ("train_seconds", "foreign", "error")})
            if "error" in out:
                best = best or out
                break
            if best is None or "error" in best or out["train_seconds"] < best["train_seconds"]:
                best = out
            if out["foreign"] < h.spare_cores(spec["threads"]) + a.contended \
                    or out["train_seconds"] > 120 or attempt == a.contended_retries:
                break
            h.log(f"  contended: other processes used {out['foreign']:.2f} cores "
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
        tag = Path(row["model"]).name.split(".")[0]
        ev_out = base / f"{tag}.eval.json"
        res = self.worker("_eval", {"store": store["path"], "model": row["model"],
                                    "kind": row["kind"], "seed": a.seed,
                                    "threads": a.eval_threads, "out": str(ev_out)},
                          base / f"{tag}.eval.log")
        if res["rc"] == 0:
            ev = json.loads(ev_out.read_text())
            row.update({"perplexity": ev["perplexity"], "floored": ev["floored_tokens"],
                        "eval_seconds": ev["eval_seconds"]})
        else:
            row["eval_error"] = f"eval exit {res['rc']} (see {base / (tag + '.eval.log')})"
        if spec["lib"] == "topictk" and (a.sample_eval == "all" or
                                         (a.sample_eval == "exact" and spec["chunks"] == 1)):
            result, res = h.evaluate(row["run_dir"], base / f"{tag}.evaluate.log",
                                     "--threads", str(a.eval_threads))
            if result is not None:
                row.update({"perplexity_samples": result.get("perplexity"),
                            "n_samples": result.get("samples"), "evaluate_seconds": res["wall"]})
            else:
                row["evaluate_error"] = f"topictk evaluate exit {res['rc']}"
        return row

    def main(self) -> None:
        a = self.args
        started, began = h.now_utc(), time.perf_counter()
        self.commands = [h.command_line()]
        path = WORK / "results.json"
        if a.merge:
            if not path.exists():
                raise SystemExit(f"--merge: {path} not found")
            prev = json.loads(path.read_text())
            self.rows, self.notes = prev["rows"], prev.get("notes", [])
            self.commands = prev.get("commands", []) + self.commands
            started = _dt.datetime.fromisoformat(prev["started"])
        corpora = list(dict.fromkeys([r["corpus"] for r in self.rows] + list(a.corpora)))
        self.stores = [self.store(c) for c in corpora]
        self.base_rss = self.baselines()
        for store in self.stores:
            if store["name"] not in a.corpora:
                continue
            for K in a.topics:
                sweeps = a.sweeps_for.get(K, a.sweeps)
                for spec in RUNS:
                    if spec["lib"] not in a.libs or (a.runs and run_label(spec) not in a.runs):
                        continue
                    h.log(f"{store['name']} K={K} S={sweeps} {run_label(spec)} ...")
                    row = self.run_one(store, K, sweeps, spec)
                    key = (row["corpus"], row["K"], row["label"])
                    at = next((i for i, r in enumerate(self.rows)
                               if (r["corpus"], r["K"], r["label"]) == key), None)
                    if at is None:
                        self.rows.append(row)
                    else:
                        self.rows[at] = row
                        self.notes.append(f"{key[0]} K={key[1]} {key[2]}: rerun on "
                                          f"{started:%Y-%m-%d %H:%M} UTC by "
                                          f"`{self.commands[-1]}`")
                    h.log("  " + (row.get("error") or
                                  f"{row['tokens_per_s'] / 1e6:.2f} M tok/s, ppl "
                                  f"{h.fmt(row.get('perplexity'))}, RSS "
                                  f"{h.mib(row['peak_rss'])} MiB, contention "
                                  f"{row['foreign']:.2f} cores"))
                    self.save(path, started)
        self.minutes = (time.perf_counter() - began) / 60
        self.save(path, started)
        text = self.markdown(started)
        print(text)
        h.write_results(h.results_path(NAME, a.record), text)

    def save(self, path: Path, started) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"started": started.isoformat(), "commands": self.commands,
                                    "rows": self.rows, "notes": self.notes}, indent=1,
                                   default=str))

    # ---- report
    def markdown(self, started) -> str:
        a = self.args
        L = ["# Collapsed Gibbs: topictk vs tomotopy vs lda", "",
             f"Measured {started:%Y-%m-%d %H:%M} UTC ({self.minutes:.1f} min) by", "",
             "```bash", *self.commands, "```", "",
             *h.machine_info("tomotopy", "lda"), f"- topictk sources fingerprint "
             f"{self.fingerprint}", f"- estimator: {ESTIMATOR} (theta of every test "
             f"document by the {ESTIMATOR} fold-in) for topictk and for every peer; "
             "docs/evaluate.md, 'Two estimators of theta for document completion'", "",
             "## Method", "",
             "- Each library trains on exactly the training tokens of the topictk store "
             "(tomotopy: one `add_doc` per training document with the store's word strings, "
             "`min_cf=0, min_df=0, rm_top=0`, `optim_interval=0` so α stays fixed; lda: the "
             f"store's doc-term CSR). α = {ALPHA}, β = {BETA}, seed {a.seed}, the same sweeps "
             "for every library in a row.",
             "- tokens/s = training tokens × sweeps / training wall time of the sweeps only "
             "(topictk: `Run.train_seconds` of `topictk train` with `eval_every: 0`; tomotopy: "
             "`train(S)` after `train(0)`; lda: the `_sample_topics` loop of `LDA._fit` after "
             "`_initialize`). tokens/CPU-s divides by the CPU time of the whole training "
             "process instead (wait4; start-up and loading included, for every library).",
             f"- Held-out perplexity (point): `topictk.score_topic_word` on φ̂ = (n_kw + β)/"
             f"(n_k + Vβ) of the final state ({FOLD_IN_SWEEPS} fold-in sweeps, "
             f"{FOLD_IN_BURN_IN} burn-in, the same seed) — identical held-out tokens and "
             "estimator for every library. `ppl (samples)`: `topictk evaluate` (averaged over "
             "the saved samples of the second half of the run).",
             "- Peak RSS: `ru_maxrss` of the training process (wait4). Contention: cores other "
             "processes kept busy while the training process ran; before each row the script "
             f"waits (≤ {a.max_wait:g} s) for a quiet machine, and a contended row shorter than "
             f"120 s is run again (up to {a.contended_retries}×), the faster run kept.", "",
             "## Baseline RSS", "", *h.table(["process", "peak RSS MiB"],
                                              [[k, h.mib(v)] for k, v in self.base_rss.items()]),
             ""]
        for store in self.stores:
            rows = []
            for r in self.rows:
                if r["corpus"] != store["name"]:
                    continue
                if "tokens_per_s" not in r:
                    rows.append([r["lib"], r["threads"], r["scheme"], r["K"], r["sweeps"],
                                 f"error: {r.get('error')}", "", "", "", "", "", ""])
                    continue
                ps = (f"{r['perplexity_samples']:.1f} ({r['n_samples']})"
                      if r.get("perplexity_samples") is not None else "")
                rows.append([r["lib"], r["threads"], r["scheme"], r["K"], r["sweeps"],
                             f"{r['train_seconds']:.1f}", f"{r['tokens_per_s'] / 1e6:.2f} M",
                             f"{r['tokens_per_cpu_s'] / 1e6:.2f} M", h.fmt(r.get("perplexity")),
                             ps, h.mib(r["peak_rss"]), f"{r['foreign']:.2f}"])
            L += [f"## {store['name']}", "",
                  f"`{store['prepare']}`: {store['D']:,} training documents, {store['N']:,} "
                  f"training tokens, V = {store['V']:,}, {store['test_docs']:,} test documents; "
                  f"store {store['bytes'] / 2**20:.1f} MiB on disk.", "",
                  *h.table(["library", "threads", "parallel scheme", "K", "sweeps", "train s",
                            "tokens/s", "tokens/CPU-s", "held-out ppl (point)", "ppl (samples)",
                            "peak RSS MiB", "contention"], rows, align="lrlrrrrrrrrr"), ""]
        L += self.targets()
        if self.notes:
            L += ["## Notes from the run", "", *(f"- {n}" for n in self.notes), ""]
        return "\n".join(L)

    def find(self, corpus, K, label):
        return next((r for r in self.rows if r["corpus"] == corpus and r["K"] == K
                     and r["label"] == label and "tokens_per_s" in r), None)

    def targets(self) -> list[str]:
        rows = []
        yes = lambda ok: "**yes**" if ok else "**no**"  # noqa: E731
        for store in self.stores:
            c = store["name"]
            for K in sorted({r["K"] for r in self.rows if r["corpus"] == c}):
                tk1, tm1 = self.find(c, K, "topictk-t1-c1"), self.find(c, K, "tomotopy-t1")
                if tk1 and tm1:
                    need = 1.0 if K < 1000 else 2.0
                    for what, key in (("tokens/s", "tokens_per_s"),
                                      ("tokens per process CPU-second", "tokens_per_cpu_s")):
                        ratio = tk1[key] / tm1[key]
                        rows.append([f"topictk 1 thread ≥ {need:g}× tomotopy 1 worker ({what})",
                                     c, K, f"{tk1[key] / 1e6:.2f} M vs {tm1[key] / 1e6:.2f} M = "
                                     f"{ratio:.2f}×", yes(ratio >= need)])
                t1c2, t2c2 = self.find(c, K, "topictk-t1-c2"), self.find(c, K, "topictk-t2-c2")
                if t1c2 and t2c2:
                    sp = t2c2["tokens_per_s"] / t1c2["tokens_per_s"]
                    rows.append(["topictk 2 threads ≥ 1.7× 1 thread (chunks 2, tokens/s)", c, K,
                                 f"{sp:.2f}× (contention {t1c2['foreign']:.2f} / "
                                 f"{t2c2['foreign']:.2f} cores)", yes(sp >= 1.7)])
                if tk1 and tm1 and tk1.get("perplexity") and tm1.get("perplexity"):
                    rel = tk1["perplexity"] / tm1["perplexity"] - 1
                    rows.append(["perplexity within 1% of tomotopy (same sweeps, point)", c, K,
                                 f"{tk1['perplexity']:.1f} vs {tm1['perplexity']:.1f} = "
                                 f"{rel:+.2%}", yes(abs(rel) <= 0.01)])
        L = ["## Targets", "", *h.table(["target", "corpus", "K", "measured", "holds?"], rows,
                                        align="llrll"), "",
             "### Memory: peak RSS ≤ store size + 3× count arrays", "",
             "count arrays = ndk (D×K int32) + nkw (V×K int32) + nk (K int64); `− baseline` "
             "subtracts the RSS of `topictk train --help`.", ""]
        base = next((v for k, v in self.base_rss.items() if k.startswith("`topictk")), 0)
        mem = []
        for r in self.rows:
            if r["lib"] != "topictk" or "mem_target" not in r:
                continue
            net = r["peak_rss"] - base
            mem.append([r["corpus"], r["K"], r["label"], h.mib(r["peak_rss"]),
                        h.mib(r["store_bytes"]), h.mib(3 * r["count_bytes"]),
                        h.mib(r["mem_target"]), yes(r["peak_rss"] <= r["mem_target"]),
                        h.mib(net), yes(net <= r["mem_target"])])
        L += h.table(["corpus", "K", "run", "peak RSS MiB", "store MiB", "3× counts MiB",
                      "target MiB", "peak ≤ target", "peak − baseline MiB",
                      "(peak − baseline) ≤ target"], mem, align="lrlrrrrlrl")
        return L + [""]


def parse_sweeps_for(items: list[str]) -> dict[int, int]:
    out = {}
    for item in items:
        k, _, s = item.partition("=")
        out[int(k)] = int(s)
    return out


def main(argv=None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    workers = {"_peer": worker_peer, "_eval": worker_eval, "_baseline": worker_baseline}
    if argv and argv[0] in workers:
        workers[argv[0]](json.loads(argv[1]))
        return
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--corpora", nargs="+", default=["uci_kos", "20news_gan2015"],
                   choices=["uci_kos", "20news_gan2015"])
    p.add_argument("--topics", nargs="+", type=int, default=[50, 128, 1000])
    p.add_argument("--sweeps", type=int, default=200, help="sweeps for every K (200)")
    p.add_argument("--sweeps-for", nargs="*", default=["1000=30"], metavar="K=S",
                   help="per-K override of --sweeps, the same for all libraries (1000=30)")
    p.add_argument("--libs", nargs="+", default=["topictk", "tomotopy", "lda"])
    p.add_argument("--runs", nargs="+", default=None, metavar="LABEL",
                   help="only these rows, e.g. topictk-t1-c2 tomotopy-t2 lda-t1")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--eval-threads", type=int, default=os.cpu_count() or 1,
                   help="threads for fold-in evaluation (never changes the numbers)")
    p.add_argument("--sample-eval", choices=("all", "exact", "none"), default="exact",
                   help="which topictk rows also get `topictk evaluate` (sample-averaged "
                        "perplexity): all, only the exact sampler (default) or none")
    p.add_argument("--contended", type=float, default=0.3, metavar="CORES",
                   help="a run during which other processes used (cores - its threads) + "
                        "CORES cores or more is contended and run again (0.3)")
    p.add_argument("--contended-retries", type=int, default=1,
                   help="reruns of a contended row shorter than 120 s; the fastest is kept (1)")
    p.add_argument("--merge", action="store_true",
                   help="merge the rows run now into benchmarks/work/gibbs/results.json")
    h.add_common_options(p)
    args = p.parse_args(argv)
    args.sweeps_for = parse_sweeps_for(args.sweeps_for)
    Bench(args).main()


if __name__ == "__main__":
    main()
