"""What verifying corpus stores costs.

Two figures:

* the checks every command makes when it opens a store (``CorpusStore.check_layout``: each
  array's ``.npy`` header and file size against ``manifest.json``, the manifest's counts, the
  sha256 of ``vocab.txt``) as a share of a ``topictk evaluate`` of a short Gibbs run on
  20 Newsgroups (the Gan 2015 split, K = 50);
* the full content check ``train`` makes when it starts and ``prepare --verify`` makes
  (``CorpusStore.verify``: sha256 of every array) in seconds per GB, on the 20 Newsgroups
  store and on a synthetic store of about ``--big-gb`` GB, with the files in the page cache
  (warm) and dropped from it first (cold, ``posix_fadvise(DONTNEED)``).

    python benchmarks/studies/verify_cost.py                  # ~2 min on 2 cores
    python benchmarks/studies/verify_cost.py --big-gb 0.25 --repeats 3

Corpora are read from ``../shared/data``; stores and runs go to ``benchmarks/work/verify/``
(the synthetic store is deleted afterwards). Results: ``benchmarks/results/safety-verify.md``.
"""
from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parents[1]      # benchmarks/
REPO = HERE.parent
DATA = (REPO / ".." / "shared" / "data").resolve()
WORK = HERE / "work" / "verify"
RESULTS = HERE / "results" / "safety-verify.md"

sys.path.insert(0, str(REPO))
from topictk.corpus.store import CorpusStore, write_store  # noqa: E402


def topictk(*args: str | Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "topictk", *map(str, args)], check=True,
                          capture_output=True, text=True, cwd=REPO)


def prepare_20news() -> Path:
    store = WORK / "stores" / "20news"
    if not (store / "manifest.json").exists():
        d = DATA / "20news_gan2015"
        topictk("prepare", d / "docword.train.txt.gz", "--vocab", d / "vocab.txt",
                "--test-observed", d / "docword.test_observed80.txt.gz",
                "--test-heldout", d / "docword.test_heldout20.txt.gz", "--out", store)
    return store


def train_gibbs(store: Path, iterations: int) -> tuple[Path, float]:
    run = WORK / "runs" / f"gibbs-k50-{iterations}"
    config = {"corpus": str(store), "output": str(run),
              "model": {"topics": 50, "alpha": 0.1, "beta": 0.01},
              "inference": {"algorithm": "gibbs", "iterations": iterations,
                            "burn_in": iterations // 2, "thin": max(1, iterations // 10)},
              "training": {"seed": 1, "eval_every": iterations,
                           "checkpoint_every": iterations},
              "evaluation": {"fold_in_sweeps": 20, "fold_in_burn_in": 10}}
    path = WORK / "configs" / f"{run.name}.json"    # JSON is YAML
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(config))
    began = time.perf_counter()
    topictk("train", "--config", path, "-q", "--force")
    return run, time.perf_counter() - began


def median_time(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        began = time.perf_counter()
        fn()
        times.append(time.perf_counter() - began)
    return statistics.median(times)


def drop_cache(store: Path) -> None:
    for path in store.iterdir():
        with open(path, "rb") as f:
            os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)


def synthetic_store(path: Path, gigabytes: float) -> Path:
    """A store whose arrays total about ``gigabytes`` GB: random word ids, consistent shapes
    (the checks on open pass; nothing trains on it)."""
    rng = np.random.default_rng(0)
    n_words, n_docs = 50_000, 2_000_000
    n_tokens = int(gigabytes * 1e9 / 4 / 2)          # train_words + indices + counts
    n_pairs = n_tokens // 2
    ptr = np.linspace(0, n_tokens, n_docs + 1).astype(np.int64)
    indptr = np.linspace(0, n_pairs, n_docs + 1).astype(np.int64)
    small = {"doc_ptr": np.array([0, 2], np.int64), "words": np.array([1, 2], np.int32),
             "indptr": np.array([0, 2], np.int64), "indices": np.array([1, 2], np.int32),
             "counts": np.array([1, 1], np.int32)}
    arrays = {"train_doc_ptr": ptr,
              "train_words": rng.integers(0, n_words, n_tokens, dtype=np.int32),
              "train_indptr": indptr,
              "train_indices": rng.integers(0, n_words, n_pairs, dtype=np.int32),
              "train_counts": rng.integers(1, 4, n_pairs, dtype=np.int32),
              **{f"test_obs_{k}": v for k, v in small.items()},
              "test_held_indptr": small["indptr"], "test_held_indices": small["indices"],
              "test_held_counts": small["counts"]}
    vocab = [f"w{i}" for i in range(n_words)]
    counts = {"train_documents": n_docs, "test_documents": 1, "vocabulary": n_words,
              "train_tokens": n_tokens, "test_observed_tokens": 2, "test_heldout_tokens": 2}
    manifest = {"source": {"inputs": ["synthetic"], "format": "synthetic"}, "options": {},
                "counts": counts, "split": {"protocol": "synthetic"},
                "vocab_sha256": hashlib.sha256(("\n".join(vocab) + "\n").encode()).hexdigest()}
    write_store(path, arrays, vocab, manifest, train_ids=[str(i) for i in range(n_docs)],
                test_ids=["0"], train_meta=None, test_meta=None, force=True)
    return path


def store_bytes(store: Path) -> int:
    manifest = json.loads((store / "manifest.json").read_text())
    return sum((store / f"{name}.npy").stat().st_size for name in manifest["arrays"])


def hash_rates(store: Path, repeats: int) -> dict:
    size = store_bytes(store)
    CorpusStore.open(store).verify()                  # into the page cache

    def warm():
        CorpusStore.open(store).verify()

    def cold():
        drop_cache(store)
        began = time.perf_counter()
        CorpusStore.open(store).verify()
        return time.perf_counter() - began

    warm_s = median_time(warm, repeats)
    cold_s = statistics.median(cold() for _ in range(repeats))
    return {"bytes": size, "warm_s": warm_s, "cold_s": cold_s,
            "warm_s_per_gb": warm_s / (size / 1e9), "cold_s_per_gb": cold_s / (size / 1e9)}


def machine() -> str:
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2 ** 30
    return (f"{cpu}, {os.cpu_count()} cores, {mem:.0f} GiB RAM, {platform.system()} "
            f"{platform.release()}, Python {platform.python_version()}, NumPy {np.__version__}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--iterations", type=int, default=50, help="Gibbs sweeps of the run")
    parser.add_argument("--big-gb", type=float, default=1.0, help="size of the synthetic store")
    args = parser.parse_args()
    WORK.mkdir(parents=True, exist_ok=True)

    store = prepare_20news()
    run, train_s = train_gibbs(store, args.iterations)

    opened = CorpusStore.open(store)
    checks_s = median_time(opened.check_layout, 20 * args.repeats)
    open_s = median_time(lambda: CorpusStore.open(store), 20 * args.repeats)
    evaluate_s = median_time(lambda: topictk("evaluate", run, "--json"), args.repeats)
    from topictk.evaluation.run import evaluate_run
    evaluate_inproc_s = median_time(lambda: evaluate_run(run), args.repeats)
    news = hash_rates(store, args.repeats)

    big_path = WORK / "stores" / "synthetic"
    began = time.perf_counter()
    synthetic_store(big_path, args.big_gb)
    build_s = time.perf_counter() - began
    big = hash_rates(big_path, max(2, args.repeats // 2))
    shutil.rmtree(big_path, ignore_errors=True)

    raw = np.random.default_rng(1).integers(0, 255, 256 * 2 ** 20, dtype=np.uint8).tobytes()
    sha_s = median_time(lambda: hashlib.sha256(raw).digest(), 3)

    lines = [
        "# Cost of verifying corpus stores",
        "",
        f"Recorded {dt.date.today().isoformat()} with `python benchmarks/studies/verify_cost.py "
        f"--repeats {args.repeats} --iterations {args.iterations} --big-gb {args.big_gb}`.",
        f"Machine: {machine()} (shared; other jobs were running, so times vary by +-20 %).",
        "",
        "## Checks on open (every command)",
        "",
        f"20 Newsgroups (Gan 2015 split: 11,284 train, 7,502 test documents, V = 2,000; "
        f"{news['bytes'] / 1e6:.1f} MB of arrays), Gibbs K = 50, {args.iterations} sweeps "
        f"(`train` took {train_s:.1f} s).",
        "",
        "| what | median time | share of `evaluate` |",
        "| --- | --- | --- |",
        f"| `check_layout()` (13 `.npy` headers and sizes, counts, sha256 of vocab.txt) | "
        f"{checks_s * 1e3:.2f} ms | {checks_s / evaluate_s:.2%} of the command, "
        f"{checks_s / evaluate_inproc_s:.2%} of `evaluate_run` |",
        f"| `CorpusStore.open()` in all (manifest parse + checks) | {open_s * 1e3:.2f} ms | "
        f"{open_s / evaluate_s:.2%} |",
        f"| `topictk evaluate RUN --json` (a new process) | {evaluate_s:.2f} s | 100 % |",
        f"| `evaluate_run(RUN)` in-process (no interpreter start-up) | "
        f"{evaluate_inproc_s:.2f} s | |",
        "",
        "Target: at most 5 % of `evaluate`. The checks read no array data, so their cost does "
        "not grow with the corpus, only with the vocabulary file (hashed whole).",
        "",
        "## Full content check (`train` start, `prepare --verify`)",
        "",
        "| store | size | warm (page cache) | cold (cache dropped) |",
        "| --- | --- | --- | --- |",
        f"| 20 Newsgroups | {news['bytes'] / 1e6:.1f} MB | {news['warm_s']:.3f} s "
        f"({news['warm_s_per_gb']:.2f} s/GB) | {news['cold_s']:.3f} s "
        f"({news['cold_s_per_gb']:.2f} s/GB) |",
        f"| synthetic | {big['bytes'] / 1e9:.2f} GB | {big['warm_s']:.2f} s "
        f"({big['warm_s_per_gb']:.2f} s/GB) | {big['cold_s']:.2f} s "
        f"({big['cold_s_per_gb']:.2f} s/GB) |",
        "",
        f"For comparison, sha256 of a 256 MiB buffer already in memory: "
        f"{256 * 2 ** 20 / 1e9 / sha_s:.2f} GB/s ({sha_s / (256 * 2 ** 20 / 1e9):.2f} s/GB); "
        f"the check hashes one file at a time on one core. \"Cold\" drops the files from this "
        f"machine's page cache; on a virtual machine the host may still cache them, so a "
        f"really cold disk can be slower. On 20 Newsgroups the check at `train` start is "
        f"{news['warm_s'] / train_s:.2%} of this {args.iterations}-sweep run. (Writing the "
        f"synthetic store took {build_s:.0f} s.)",
        "",
    ]
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text("\n".join(lines), encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
