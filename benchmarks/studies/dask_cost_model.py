"""A cost model of one Gibbs sweep and one online-VB epoch on a Dask cluster, fitted to the
measurements in benchmarks/results/ and projected to PubMed- and Wikipedia-size corpora.

    python benchmarks/studies/dask_cost_model.py [--record]

Every constant below names the measurement it comes from. ``--record`` writes
benchmarks/results/dask_cost_model.md; without it the tables go to stdout.
"""
from __future__ import annotations

import argparse
import math
from dataclasses import dataclass
from pathlib import Path

RESULTS = Path(__file__).resolve().parents[1] / "results" / "dask_cost_model.md"

# ---- measured constants ------------------------------------------------------------------
# Gibbs kernel speed per core, one thread, quiet machine (results/gibbs.md, UCI KOS):
# K = 128: 14.66 M tokens/s; K = 1,000: 7.63 M tokens/s
GIBBS_RATE = {128: 14.66e6, 1000: 7.63e6}
# rebuilding a shard's SparseLDA word lists from the n_kw it receives: about 10 % of a shard
# sweep of half KOS x 10 at K = 128 (results/dask.md notes): 0.08 s for V x K = 884k counts
REBUILD_RATE = 884e3 / 0.08                     # counts per second
# the driver adding a shard's dense change of n_kw: 0.005 s for 2 x 884k counts (dask.md)
MERGE_RATE = 2 * 884e3 / 0.005                  # counts per second
# Dask's per-task cost (submit, schedule, gather of a small result): the 0.115 s of transfer
# and scheduling per sweep in dask.md, less the 11.6 MiB it moved at the loopback's speed,
# for 2 tasks: about 0.03 s per task
TASK_LATENCY = 0.03
# online VB, K = 50: 19.5 epochs of NIPS (1.84 M tokens) in 153.1 s, 1 thread
# (results/minibatch.md): 0.235 M tokens/s per core, scaled here as 1/K
OVB_RATE_K50 = 1.84e6 * 19.5 / 153.1

# ---- assumptions, stated ---------------------------------------------------------------------
BANDWIDTH = 1.25e9                # bytes/s into and out of the driver: 10 Gbit/s Ethernet
MOVED = 0.10                      # fraction of tokens changing topic per sweep, late in a run
OVB_BATCH = 4096                  # documents per online-VB mini-batch
OVB_BATCH_VOCAB = 0.25            # a batch's vocabulary as a fraction of V


@dataclass(frozen=True)
class Corpus:
    name: str
    documents: float
    tokens: float
    vocabulary: int


CORPORA = [
    # UCI bag-of-words PubMed abstracts
    Corpus("PubMed", 8.2e6, 730e6, 141_043),
    # English Wikipedia, articles with >= 50 words after stop words, 100k-word vocabulary
    Corpus("Wikipedia", 4.6e6, 1.9e9, 100_000),
]
WORKERS = [8, 32, 128]


def gibbs_sweep(corpus: Corpus, K: int, W: int) -> dict:
    """Seconds of one sweep as topictk does it today: n_kw (int32) sent from the driver to
    every worker, each shard's change of n_kw back (sparse pairs or dense, whichever is
    smaller), added by the driver in shard order."""
    counts = corpus.vocabulary * K
    compute = corpus.tokens / (W * GIBBS_RATE[K]) + counts / REBUILD_RATE
    broadcast = W * counts * 4 / BANDWIDTH
    change = min(counts * 4, 2 * MOVED * corpus.tokens / W * 12)   # (+1, -1) per move
    gather = W * change / BANDWIDTH
    merge = W * min(counts, change / 12) / MERGE_RATE
    tasks = W * TASK_LATENCY
    total = compute + broadcast + gather + merge + tasks
    # the same sweep with a binary tree of workers relaying n_kw down and adding the changes
    # up (in shard order, so the numbers stay those of one machine): log2 W hops instead of W
    hops = max(1.0, math.log2(W))
    tree = (compute + hops * counts * 4 / BANDWIDTH + hops * change / BANDWIDTH
            + hops * min(counts, change / 12) / MERGE_RATE + hops * TASK_LATENCY)
    return {"compute": compute, "broadcast": broadcast, "gather": gather, "merge": merge,
            "tasks": tasks, "total": total, "tree": tree}


def ovb_epoch(corpus: Corpus, K: int, W: int) -> dict:
    """Seconds of one online-VB epoch: per mini-batch, E[log beta] rows of the batch's words
    (float64) sent to every worker, each worker's sufficient statistics of those rows back,
    the driver's update of lambda on them."""
    batches = corpus.documents / OVB_BATCH
    rows = OVB_BATCH_VOCAB * corpus.vocabulary * K
    per_batch_tokens = corpus.tokens / batches
    compute = per_batch_tokens / (W * OVB_RATE_K50 * 50 / K)
    broadcast = W * rows * 8 / BANDWIDTH
    gather = W * rows * 8 / BANDWIDTH
    merge = W * rows / MERGE_RATE
    tasks = W * TASK_LATENCY
    parts = {"compute": compute, "broadcast": broadcast, "gather": gather, "merge": merge,
             "tasks": tasks}
    return {k: v * batches for k, v in parts.items()} | {
        "total": sum(parts.values()) * batches}


def _table(title: str, rows: list[tuple]) -> list[str]:
    out = [f"**{title}**", "",
           "| corpus | K | workers | compute s | broadcast s | gather s | merge s | tasks s | "
           "total s | driver's share | total s, tree |",
           "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for corpus, K, W, r in rows:
        driver = (r["broadcast"] + r["gather"] + r["merge"] + r["tasks"]) / r["total"]
        out.append(f"| {corpus} | {K:,} | {W} | {r['compute']:,.1f} | {r['broadcast']:,.1f} | "
                   f"{r['gather']:,.1f} | {r['merge']:,.1f} | {r['tasks']:,.1f} | "
                   f"{r['total']:,.1f} | {driver:.0%} | "
                   + (f"{r['tree']:,.1f} |" if "tree" in r else "— |"))
    return out + [""]


def report() -> str:
    gibbs, ovb = [], []
    for corpus in CORPORA:
        for K in (128, 1000):
            for W in WORKERS:
                gibbs.append((corpus.name, K, W, gibbs_sweep(corpus, K, W)))
                ovb.append((corpus.name, K, W, ovb_epoch(corpus, K, W)))
    lines = [
        "# Dask cost model: one Gibbs sweep and one online-VB epoch at scale",
        "",
        "Computed by `python benchmarks/studies/dask_cost_model.py --record` from constants "
        "measured in this folder's results (each named in the script) and stated assumptions: "
        f"{BANDWIDTH * 8 / 1e9:.0f} Gbit/s into and out of the driver, {MOVED:.0%} of tokens "
        f"changing topic per sweep late in a run, online-VB mini-batches of {OVB_BATCH:,} "
        f"documents whose vocabulary is {OVB_BATCH_VOCAB:.0%} of V. Corpora: "
        + "; ".join(f"{c.name} D = {c.documents / 1e6:.1f} M, N = {c.tokens / 1e6:,.0f} M "
                    f"tokens, V = {c.vocabulary:,}" for c in CORPORA) + ".",
        "",
        "Model of a Gibbs sweep as implemented: compute = N / (W × r_K) + V·K / (list rebuild "
        "rate); broadcast = W × V·K × 4 B / bandwidth (the driver sends n_kw to each worker); "
        "gather = W × min(V·K × 4, 2 × moved × N / W × 12 B) / bandwidth; merge = W × the "
        "changed counts / merge rate; tasks = W × per-task latency.",
        "",
        *_table("One Gibbs sweep", gibbs),
        "Model of an online-VB epoch (D / batch updates): per update, compute = batch tokens / "
        "(W × E-step rate at K); the driver sends the batch rows of E[log β] (8 B each) to every "
        "worker and receives as many sufficient statistics back, and merges them.",
        "",
        *_table("One online-VB epoch", ovb),
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--record", action="store_true", help=f"write {RESULTS.name}")
    args = parser.parse_args()
    text = report()
    if args.record:
        notes = ""
        if RESULTS.exists():
            old = RESULTS.read_text(encoding="utf-8")
            marker = "<!-- hand-written notes below"
            if marker in old:
                notes = "\n" + old[old.index(marker):]
        RESULTS.write_text(text + "\n" + notes, encoding="utf-8")
    else:
        print(text)


if __name__ == "__main__":
    main()
