"""Does ``seed_mode: prior`` gain from starting the seed words' tokens in their topic?

``seed_mode: prior`` starts the seed words' tokens in their topic (as ``seed_mode: init``
does) and keeps them there by the prior; before, it started every token uniformly. This study
trains the prior mode both ways on 20 Newsgroups by the protocol of
benchmarks/bench_seeds.py (K = 20, SparseLDA, one thread, default seed_weight, lists A and B,
the same accuracy rule and fold-in), at training seeds 1, 2 and 3, 1,000 sweeps with the
checkpoint at 500 scored too. Both starts are put in by replacing the Gibbs driver's start of
the seed words (``seed_init_topics``) in this process: the uniform one gives no start with
the prior, as before.

    python benchmarks/studies/seeded_start.py

Runs are kept in benchmarks/work/seeds (``study-{prior,start}-{A,B}-t{seed}``) and reused.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import bench_seeds as b  # noqa: E402
import harness as h  # noqa: E402
from topictk.inference.seeds import seed_init_topics, seed_mode  # noqa: E402

SEEDS = (1, 2, 3)
SWEEPS = 1000
LISTS = {"A": b.SEEDS_A, "B": b.SEEDS_B}


# the seed words' starting topics whatever the mode: the prior mode's start since it became so
start_always = seed_init_topics


def start_uniform(config, vocab) -> np.ndarray | None:
    """The start before: the seed words' topics with ``seed_mode: init`` only."""
    return start_always(config, vocab) if seed_mode(config) == "init" else None


def train(store: Path, name: str, seeds: dict, seed: int, seeded_start: bool) -> Path:
    """One run of bench_seeds' config at training seed ``seed``, in this process."""
    import topictk.inference.gibbs.driver as driver
    from topictk.cli import main

    out = b.WORK / name
    if (out / "model.npz").exists():
        return out
    path = b.config(store, out, SWEEPS, seeds)
    data = yaml.safe_load(path.read_text())
    data["training"]["seed"] = seed
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    driver.seed_init_topics = start_always if seeded_start else start_uniform
    sys.argv = ["topictk", "train", "-c", str(path), "-q", "--force"]
    try:
        main()
    except SystemExit as exc:
        if exc.code not in (0, None):
            raise
    return out


def main() -> None:
    b.WORK.mkdir(parents=True, exist_ok=True)
    store = h.ensure_20news_bydate()
    truth, names = b.groups(store)
    print("| list | training seed | start | 500 sweeps | 1,000 sweeps | seeds in top 10 (1,000) |")
    print("| --- | --- | --- | --- | --- | --- |")
    for tag, seeds in LISTS.items():
        for seed in SEEDS:
            for start in (False, True):
                mode = "start" if start else "prior"
                run = train(store, f"study-{mode}-{tag}-t{seed}", seeds, seed, start)
                acc = [100 * b.accuracy(b.test_theta(run, s), truth, names)
                       for s in (SWEEPS // 2, None)]
                held, total = b.in_top(run)
                print(f"| {tag} | {seed} | {'seeded' if start else 'uniform'} | {acc[0]:.1f} % | "
                      f"{acc[1]:.1f} % | {held} of {total} |", flush=True)


if __name__ == "__main__":
    main()
