"""Peak memory of ``topictk train`` (collapsed Gibbs) as the corpus grows.

The target of the Gibbs benchmark: peak RSS of ``train`` no more than the store size plus three
times the count arrays (n_dk, n_kw, n_k). A Python process that has imported what ``train``
imports already holds about 57 MiB, more than that budget for a corpus as small as KOS, so this
script measures the same run on KOS replicated R times (R copies of every training document,
written as one UCI docword file, prepared with the same options), where the fixed part no
longer decides.

    python benchmarks/bench_gibbs_memory.py --copies 1 10 40 [--write-results]

Each row is one ``topictk train`` subprocess (K = 128, 5 sweeps, no evaluation, checkpoint at
the end); peak RSS is that process's VmHWM.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import gzip
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import yaml
from _results import replace_section  # benchmarks/_results.py (this directory)

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
DATA = (REPO / ".." / "shared" / "data").resolve()
WORK = HERE / "work" / "gibbs_memory"
SECTION = "## Collapsed Gibbs: peak memory against corpus size"
TOPICTK = [sys.executable, "-m", "topictk"]


def replicated_docword(copies: int) -> Path:
    """KOS with every document repeated ``copies`` times (document ids shifted per copy)."""
    out = WORK / f"docword.kos.x{copies}.txt.gz"
    if out.exists():
        return out
    src = DATA / "uci_kos" / "docword.kos.txt.gz"
    with gzip.open(src, "rt") as f:
        D, V, _ = (int(f.readline()) for _ in range(3))
        body = np.loadtxt(f, dtype=np.int64, ndmin=2)
    parts = []
    for c in range(copies):
        block = body.copy()
        block[:, 0] += c * D
        parts.append(block)
    rows = np.concatenate(parts)
    WORK.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    with gzip.open(tmp, "wt", compresslevel=1) as f:
        f.write(f"{D * copies}\n{V}\n{rows.shape[0]}\n")
        np.savetxt(f, rows, fmt="%d")
    tmp.replace(out)
    return out


def dir_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


# The child reports its own high-water mark (VmHWM of /proc/self/status, which exec resets):
# wait4's ru_maxrss of a child also counts the parent's pages it ran on before exec, and this
# process holds the replicated corpus.
PEAK_WRAPPER = """
import atexit, runpy, sys
out = sys.argv[1]
def peak():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            open(out, "w").write(line.split()[1])
atexit.register(peak)
if sys.argv[2] == "-c":
    exec(sys.argv[3])
else:
    sys.argv = sys.argv[3:]
    runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)
"""


def run(cmd: list[str]) -> tuple[int, float, int]:
    """Exit code, wall seconds and peak RSS (bytes) of ``python -m MODULE ...`` or
    ``python -c CODE``."""
    peak_file = WORK / "peak.txt"
    peak_file.unlink(missing_ok=True)
    cmd = [cmd[0], "-c", PEAK_WRAPPER, str(peak_file)] + cmd[1:]
    began = time.perf_counter()
    proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stderr.decode(errors='replace')}")
    return proc.returncode, time.perf_counter() - began, int(peak_file.read_text()) * 1024


def measure(copies: int, K: int, sweeps: int, threads: int, chunks: int) -> dict:
    docword = replicated_docword(copies)
    store = WORK / f"store.x{copies}"
    if not (store / "manifest.json").exists():
        run(TOPICTK + ["prepare", str(docword), "--vocab", str(DATA / "uci_kos" / "vocab.kos.txt"),
                       "--test-docs", "0.1", "--heldout-fraction", "0.2", "--seed", "0",
                       "--out", str(store), "--force"])
    manifest = json.loads((store / "manifest.json").read_text())
    counts = manifest["counts"]
    D, V = counts["train_documents"], counts["vocabulary"]
    cfg = {"corpus": str(store), "output": str(WORK / f"run.x{copies}.t{threads}"),
           "model": {"topics": K, "alpha": 0.1, "beta": 0.01},
           "inference": {"algorithm": "gibbs", "iterations": sweeps, "chunks": chunks},
           "training": {"seed": 0, "threads": threads, "eval_every": 0, "checkpoint_every": 0}}
    cfg_path = WORK / f"x{copies}.t{threads}.yaml"
    cfg_path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    _, wall, rss = run(TOPICTK + ["train", "--config", str(cfg_path), "--force", "--quiet"])
    count_bytes = 4 * D * K + 4 * V * K + 8 * K
    store_bytes = dir_bytes(store)
    return {"copies": copies, "K": K, "sweeps": sweeps, "threads": threads, "chunks": chunks,
            "train_documents": D, "train_tokens": counts["train_tokens"], "vocabulary": V,
            "store_bytes": store_bytes, "count_bytes": count_bytes,
            "target_bytes": store_bytes + 3 * count_bytes, "peak_rss_bytes": rss,
            "wall_seconds": wall}


def baseline_rss() -> int:
    """Peak RSS of a process that only imports what ``topictk train`` imports."""
    code = ("import numpy, click, yaml, tqdm\n"
            "import topictk.cli, topictk.training.run, topictk.inference.gibbs, "
            "topictk.evaluation.run\n")
    return run([sys.executable, "-c", code])[2]


def report(rows: list[dict], base: int, command: str) -> str:
    mib = 1 << 20
    lines = [SECTION, "",
             f"Measured {_dt.datetime.now(_dt.timezone.utc):%Y-%m-%d %H:%M} UTC on "
             f"{platform.processor() or platform.machine()}, {os.cpu_count()} logical cores, "
             f"Python {platform.python_version()}, numpy {np.__version__}; by", "",
             "```bash", command, "```", "",
             "KOS (`uci_kos`) with every document repeated R times, prepared like the KOS "
             "store of the table above (10 % test documents, 20 % of each held out); "
             "`topictk train`, K = 128, α = 0.1, β = 0.01, no evaluation. count arrays = "
             "n_dk (D×K int32) + n_kw (V×K int32) + n_k (K int64); target = store size on "
             f"disk + 3 × count arrays. Import-only baseline: {base / mib:.0f} MiB.", "",
             "| R | training docs | training tokens | threads (chunks) | store MiB | "
             "count arrays MiB | target MiB | peak RSS MiB | peak ≤ target | "
             "peak − baseline MiB |", "| ---: | ---: | ---: | --- | ---: | ---: | ---: | "
             "---: | --- | ---: |"]
    for r in rows:
        ok = r["peak_rss_bytes"] <= r["target_bytes"]
        lines.append(
            f"| {r['copies']} | {r['train_documents']:,} | {r['train_tokens']:,} | "
            f"{r['threads']} ({r['chunks']}) | {r['store_bytes'] / mib:.0f} | "
            f"{r['count_bytes'] / mib:.0f} | {r['target_bytes'] / mib:.0f} | "
            f"{r['peak_rss_bytes'] / mib:.0f} | {'**yes**' if ok else '**no**'} | "
            f"{(r['peak_rss_bytes'] - base) / mib:.0f} |")
    return "\n".join(lines) + "\n"


def write_section(path: Path, text: str) -> None:
    """Replace (or append) this script's section of RESULTS.md."""
    replace_section(path, SECTION, text)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--copies", nargs="+", type=int, default=[1, 10, 40])
    p.add_argument("--topics", type=int, default=128)
    p.add_argument("--sweeps", type=int, default=5)
    p.add_argument("--write-results", action="store_true",
                   help="replace this script's section of benchmarks/RESULTS.md")
    args = p.parse_args(argv)
    WORK.mkdir(parents=True, exist_ok=True)
    rows = []
    for copies in args.copies:
        for threads, chunks in ((1, 1), (2, 2)):
            rows.append(measure(copies, args.topics, args.sweeps, threads, chunks))
            r = rows[-1]
            print(f"x{copies} t{threads}: peak {r['peak_rss_bytes'] / 2**20:.0f} MiB, target "
                  f"{r['target_bytes'] / 2**20:.0f} MiB", file=sys.stderr, flush=True)
    base = baseline_rss()
    command = "python benchmarks/bench_gibbs_memory.py " + " ".join(
        (["--copies"] + [str(c) for c in args.copies]) + (["--write-results"]
                                                         if args.write_results else []))
    text = report(rows, base, command)
    (WORK / "results.json").write_text(json.dumps({"rows": rows, "baseline": base}, indent=1))
    print(text)
    if args.write_results:
        write_section(HERE / "RESULTS.md", text)


if __name__ == "__main__":
    main()
