"""The SGRLD local step at K = 128 on 20 Newsgroups mini-batches of 200 documents, 10 sweeps:
token-sweeps per second of the kernel (``local_gibbs`` of topictk's mini-batch kernels) and of
its Python wrapper at 1 and 2 threads, and the cost of the dense SGRLD global step at that
size. A study, not a benchmark: it calls topictk's internals directly, so it may need
adapting when they change.

    python benchmarks/studies/minibatch_local_step.py            # phi from bench_minibatch's
    python benchmarks/studies/minibatch_local_step.py --quick    # 20news SGRLD run, if any

Writes benchmarks/work/minibatch/throughput.json and the report ``minibatch_local_step.md``
(``--record``: benchmarks/results/).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # benchmarks/: the harness

import harness as h  # noqa: E402

NAME = "minibatch_local_step"
WORK = h.WORK / "minibatch"
THROUGHPUT = {"batch_docs": 200, "sweeps": 10, "burn_in": 5, "batches": 40, "alpha": 0.1,
              "threads": (1, 2), "repeats": 2}
rel, log = h.rel, h.log


def phi_run(iterations: int) -> Path:
    """A finished 20 Newsgroups SGRLD run: bench_minibatch's, or a short one trained here."""
    finals = sorted((WORK / "runs" / "news").glob("final-sgrld-*/model.npz"))
    if finals:
        return finals[0].parent
    store = h.ensure_store("20news_gan2015")
    out = WORK / "runs" / "study" / f"phi-sgrld-{iterations}"
    cfg = {"corpus": str(store), "output": str(out),
           "model": {"topics": 128, "alpha": 0.1, "beta": 0.01},
           "inference": {"algorithm": "sgrld", "iterations": iterations, "batch_size": 64,
                         "step": {"a": 0.01, "b": 1000, "c": 0.55}},
           "training": {"seed": 0, "threads": 1, "eval_every": 0, "checkpoint_every": 0}}
    if not (out / "model.npz").exists():
        res = h.train(cfg, WORK / "configs" / "study-phi-sgrld.yaml", WORK / "logs" / "phi.log")
        if res["rc"] != 0:
            raise SystemExit(h.tail(WORK / "logs" / "phi.log"))
    return out


def measure(args) -> dict:
    import numpy as np

    from topictk import streams as keys
    from topictk.corpus.batches import gather_batch
    from topictk.corpus.store import CorpusStore
    from topictk.inference import _minibatch
    from topictk.inference.base import chunk_bounds_by_docs
    from topictk.inference.minibatch import local_statistics
    from topictk.inference.sgrld.driver import sgrld_update
    from topictk.rundir.checkpoint import load_arrays
    from topictk.streams import Streams

    out_path = WORK / "throughput.json"
    if out_path.exists() and not args.force and not args.quick:
        return json.loads(out_path.read_text())
    store = CorpusStore.open(h.ensure_store("20news_gan2015"))
    train = store.train()
    doc_ptr = np.asarray(train.doc_ptr)
    words = np.asarray(train.words)
    phi_source = phi_run(200 if args.quick else 2000)
    _, arrays = load_arrays(phi_source / "model.npz")
    phi_hat = arrays["phi_hat"]
    phi = phi_hat / phi_hat.sum(axis=0, keepdims=True)
    K = phi.shape[1]
    alpha = np.full((1, K), THROUGHPUT["alpha"])
    T = dict(THROUGHPUT)
    if args.quick:
        T.update(batches=4, repeats=1)
    rng = np.random.default_rng(0)
    ids = rng.permutation(doc_ptr.size - 1)
    streams = Streams(0)
    size = T["batch_docs"]
    batches = [gather_batch(doc_ptr, words, np.sort(ids[i * size:(i + 1) * size]))
               for i in range(T["batches"])]
    stats = {th: {"kernel_s": 0.0, "kernel_cpu_s": 0.0, "local_statistics_s": 0.0,
                  "token_sweeps": 0}
             for th in T["threads"]}
    same = True

    inf = {"sweeps": T["sweeps"], "local_burn_in": T["burn_in"], "chunk_docs": 16}
    for rep in range(T["repeats"] + 1):          # repeat 0 is a warm-up, not counted
        for t, batch in enumerate(batches):
            weights = np.ascontiguousarray(phi[batch.vocab])
            bounds = chunk_bounds_by_docs(batch.doc_ids.size, 16)
            ref = None
            for th in T["threads"]:
                gens = [streams.derived(keys.local_key(t, c)) for c in range(bounds.size - 1)]
                wt = np.zeros((batch.vocab.size, K), dtype=np.int64)
                dt = np.zeros((batch.doc_ids.size, K), dtype=np.int64)
                began, cpu = time.perf_counter(), time.process_time()
                _minibatch.local_gibbs(batch.doc_ptr, batch.words, weights, alpha, T["sweeps"],
                                       T["burn_in"], bounds, gens, wt, dt, th)
                k_s = time.perf_counter() - began
                k_cpu = time.process_time() - cpu
                began = time.perf_counter()
                local_statistics(batch, phi[batch.vocab], alpha[0], inf, streams, t, th)
                l_s = time.perf_counter() - began
                if ref is None:
                    ref = wt
                else:
                    same &= bool(np.array_equal(ref, wt))
                if rep > 0:
                    stats[th]["kernel_s"] += k_s
                    stats[th]["kernel_cpu_s"] += k_cpu
                    stats[th]["local_statistics_s"] += l_s
                    stats[th]["token_sweeps"] += batch.n_tokens * T["sweeps"]
    rows = []
    for th, s in stats.items():
        rate = s["token_sweeps"] / s["kernel_s"]
        rows.append({"threads": th, "token_sweeps": s["token_sweeps"],
                     "kernel_seconds": round(s["kernel_s"], 4),
                     "kernel_rate": rate, "kernel_rate_per_thread": rate / th,
                     "kernel_cpu_seconds": round(s["kernel_cpu_s"], 4),
                     "kernel_rate_per_cpu_second": s["token_sweeps"] / s["kernel_cpu_s"],
                     "local_statistics_rate": s["token_sweeps"] / s["local_statistics_s"],
                     "local_statistics_rate_per_thread":
                         s["token_sweeps"] / s["local_statistics_s"] / th})
    # cost of the dense global SGRLD update at this size (V x K), for comparison
    main = np.random.Generator(np.random.PCG64(1))
    batch = batches[0]
    nbar = rng.random((batch.vocab.size, K))
    timings = {"normals": 0.0, "phi": 0.0, "update": 0.0}
    n_rep = 20
    ph = phi_hat.copy()
    for _ in range(n_rep):
        b = time.perf_counter()
        noise = main.standard_normal(size=ph.shape)
        timings["normals"] += time.perf_counter() - b
        b = time.perf_counter()
        ph / ph.sum(axis=0, keepdims=True)
        timings["phi"] += time.perf_counter() - b
        b = time.perf_counter()
        sgrld_update(ph, nbar, batch.vocab, 0.01, 1e-4, 176.0, noise)
        timings["update"] += time.perf_counter() - b
    tokens_per_batch = [b.n_tokens for b in batches]
    result = {"rows": rows, "identical_across_threads": same, "K": K,
              "phi_source": rel(phi_source), "batches": T["batches"], "repeats": T["repeats"],
              "batch_docs": T["batch_docs"], "sweeps": T["sweeps"], "burn_in": T["burn_in"],
              "mean_tokens_per_batch": float(np.mean(tokens_per_batch)),
              "global_update_ms": {k: 1000 * v / n_rep for k, v in timings.items()},
              "V": int(phi.shape[0])}
    out_path.write_text(json.dumps(result, indent=1))
    for r in rows:
        log(f"threads {r['threads']}: kernel {r['kernel_rate'] / 1e6:.2f} M token-sweeps/s "
            f"({r['kernel_rate_per_thread'] / 1e6:.2f} per thread; "
            f"{r['kernel_rate_per_cpu_second'] / 1e6:.2f} per CPU-second)")
    return result


def report(t: dict) -> str:
    lines = ["# Mini-batch MCMC: SGRLD local step throughput", "",
             f"Measured {h.now_utc():%Y-%m-%d %H:%M} UTC by `{h.command_line()}`", "",
             *h.machine_info(), "",
              f"`topictk.inference._minibatch.local_gibbs` (and the Python wrapper "
              f"`topictk.inference.sgrld.driver.local_statistics`) on {t['batches']} random 20 "
              f"Newsgroups mini-batches of {t['batch_docs']} documents (mean "
              f"{t['mean_tokens_per_batch']:.0f} tokens), K = {t['K']}, {t['sweeps']} sweeps "
              f"({t['burn_in']} burn-in), α = 0.1, chunk_docs 16, φ from `{t['phi_source']}` "
              f"(the 20 Newsgroups SGRLD run of part 2). Every batch is run with 1 and 2 threads "
              f"back to back, {t['repeats']} timed passes after one warm-up pass; rates are total "
              f"token-sweeps / total seconds. Results identical across thread counts: "
              f"{t['identical_across_threads']}.", "",
              "| threads | token-sweeps | kernel wall s | kernel M token-sweeps/s (wall) | "
              "per thread (wall) | kernel CPU s | M token-sweeps per CPU-second | "
              "local_statistics M/s (wall) | per thread |",
              "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in t["rows"]:
        lines.append(f"| {r['threads']} | {r['token_sweeps']:,} | {r['kernel_seconds']:.3f} | "
                     f"{r['kernel_rate'] / 1e6:.2f} | {r['kernel_rate_per_thread'] / 1e6:.2f} | "
                     f"{r['kernel_cpu_seconds']:.3f} | "
                     f"{r['kernel_rate_per_cpu_second'] / 1e6:.2f} | "
                     f"{r['local_statistics_rate'] / 1e6:.2f} | "
                     f"{r['local_statistics_rate_per_thread'] / 1e6:.2f} |")
    g = t["global_update_ms"]
    lines += ["", f"For scale, the dense SGRLD global step at V × K = {t['V']} × {t['K']}: "
              f"{g['normals']:.1f} ms for the normal draws, {g['phi']:.1f} ms to normalise φ, "
              f"{g['update']:.1f} ms for `sgrld_update` (per update).", ""]
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--force", action="store_true", help="measure again")
    parser.add_argument("--quick", action="store_true", help="4 batches, 1 timed pass")
    parser.add_argument("--record", action="store_true",
                        help="write benchmarks/results/minibatch_local_step.md")
    args = parser.parse_args(argv)
    text = report(measure(args))
    print(text)
    h.write_results(h.results_path(NAME, args.record), text)


if __name__ == "__main__":
    main()
