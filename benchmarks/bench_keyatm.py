"""The keyword topic model on 20 Newsgroups by the protocol of ``bench_seeds.py``: the same
store (bydate, K = 20), seed lists (rule A, rule B) and score (share of test documents whose
argmax folded-in theta is the keyword topic of their group), beside the seeded LDA rows of
benchmarks/results/seeds.md.

keyatm: model.family keyatm with its defaults (gamma1 = gamma2 = 1, beta_keyword 0.1), the
exact chain (inference.chunks: 1), one thread, alpha 0.1, beta 0.01, training seed 1; its
test theta by the Gibbs fold-in with its phi-hat (50 sweeps, 25 burn-in), as bench_seeds.

    python benchmarks/bench_keyatm.py [--sweeps 500] [--hold 1000]
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

import yaml

import harness as h
from bench_seeds import (SEEDS_A, SEEDS_B, SEEDS_C, WORK, accuracy, config, groups, in_top,
                         test_theta)

OUT = Path(__file__).resolve().parent / "results" / "keyatm.md"


def train(store, name: str, sweeps: int, seeds: dict) -> Path:
    """A keyatm run of bench_seeds' config (same model and schedule keys), made once."""
    out = WORK / name
    if (out / "model.npz").exists():
        return out
    path = config(store, out, sweeps, seeds, family="keyatm")
    data = yaml.safe_load(path.read_text())
    data["inference"]["chunks"] = 1
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    subprocess.run([sys.executable, "-m", "topictk", "train", "-c", str(path), "-q",
                    "--force"], check=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sweeps", type=int, default=500)
    parser.add_argument("--hold", type=int, default=1000)
    args = parser.parse_args()
    WORK.mkdir(parents=True, exist_ok=True)
    store = h.ensure_20news_bydate()
    truth, names = groups(store)
    S, H, rows = args.sweeps, args.hold, []

    def record(name, value):
        rows.append((name, value))
        print(name, value, flush=True)

    t0 = time.time()
    run = train(store, f"keyatm-A-{H}", H, SEEDS_A)
    if (run / "checkpoints" / f"step-{S:08d}.npz").exists():   # kept: checkpoint_every 500
        record(f"keyatm (A), {S} sweeps", accuracy(test_theta(run, S), truth, names))
    record(f"keyatm (A), {H} sweeps", accuracy(test_theta(run, None), truth, names))
    record(f"seeds in top 10, keyatm (A), {H} sweeps", in_top(run))
    run = train(store, f"keyatm-B-{S}", S, SEEDS_B)
    record(f"keyatm (B), {S} sweeps", accuracy(test_theta(run, None), truth, names))
    record(f"seeds in top 10, keyatm (B), {S} sweeps", in_top(run))
    run = train(store, f"keyatm-C-{S}", S, SEEDS_C)
    record(f"keyatm (C), {S} sweeps", accuracy(test_theta(run, None), truth, names))
    record(f"seeds in top 10, keyatm (C), {S} sweeps", in_top(run))
    lines = ["# The keyword topic model on 20 Newsgroups (K = 20)", "",
             f"bydate store, {len(truth)} test documents, keyatm (gamma1 = gamma2 = 1, "
             f"beta_keyword 0.1), exact chain, one thread, alpha 0.1, beta 0.01, training seed "
             f"1; fold-in 50 sweeps (25 burn-in). Wall time {time.time() - t0:.0f} s. Protocol, "
             f"seed lists and the seeded LDA rows: benchmarks/bench_seeds.py, seeds.md.", "",
             "Command: `python benchmarks/bench_keyatm.py`", "", *h.machine_info(), "",
             "| measure | value |", "| --- | --- |"]
    for name, value in rows:
        text = (f"{value[0]} of {value[1]}" if isinstance(value, tuple) else f"{100 * value:.1f} %")
        lines.append(f"| {name} | {text} |")
    OUT.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
