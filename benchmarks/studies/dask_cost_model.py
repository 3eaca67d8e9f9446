"""A cost model of one Gibbs sweep and one online-VB epoch on a Dask cluster, fitted to the
measurements in benchmarks/results/ and projected to PubMed- and Wikipedia-size corpora.

    python benchmarks/studies/dask_cost_model.py [--record]

Two designs of the Gibbs sweep are modelled: the one topictk had (the driver sends n_kw to
every worker and adds every shard's change itself) and the one it has (every worker keeps
n_kw; the workers add their changes up in a pairwise tree and hand the total down a binary
tree; the driver receives the total once). The second's constants are fitted to the 1- and
2-worker runs of results/dask.json (``bench_dask.py --record``), and the model is checked
against the 3-worker run there. ``--record`` writes benchmarks/results/dask_cost_model.md;
without it the tables go to stdout.
"""
from __future__ import annotations

import argparse
import json
import math
from dataclasses import dataclass
from pathlib import Path

RESULTS = Path(__file__).resolve().parents[1] / "results" / "dask_cost_model.md"
MEASURED = RESULTS.parent / "dask.json"

# ---- measured constants ------------------------------------------------------------------
# Gibbs kernel speed per core, one thread, quiet machine (results/gibbs.md, UCI KOS, late in a
# run): K = 128: 14.66 M tokens/s; K = 1,000: 7.63 M tokens/s
GIBBS_RATE = {128: 14.66e6, 1000: 7.63e6}
# the driver design: rebuilding the SparseLDA word lists from the n_kw received, 0.08 s for
# V x K = 884k counts, and the driver adding a dense change, 0.005 s for 2 x 884k counts (the
# 2-worker run of results/dask.md as recorded 2026-11-26); per-task cost 0.03 s (that run's
# 0.115 s of transfer and scheduling per sweep for 2 tasks, less its transfers)
REBUILD_RATE = 884e3 / 0.08
MERGE_RATE = 2 * 884e3 / 0.005
TASK_LATENCY = 0.03
# the relay design: a count change costs 2 bytes per changed count sparse (a byte of gap, a
# byte of value), 1 byte per count dense, whichever is fewer (docs/cluster.md, "What
# travels"); a worker merges two changes in a pass over V x K counts at MERGE_PASS counts/s
# and adds a change at ADD_RATE changed counts/s (the kernel _changes on this machine, 884k
# counts: 6.2 ms a merge, 0.2 ms an add of 200k changes)
MERGE_PASS = 884e3 / 6.2e-3
ADD_RATE = 200e3 / 0.2e-3
# Dask's scheduler, per task, on this 2-core machine (1,000 trivial tasks submitted and
# gathered on a 2-worker LocalCluster: 1.6 ms each), and one hop, a task that waits for a
# result on another worker (a chain of 51 such tasks between 2 workers: 7.9 ms each)
SCHED_PER_TASK = 1.6e-3
HOP = 7.9e-3
# online VB, K = 50: 19.5 epochs of NIPS (1.84 M tokens) in 153.1 s, 1 thread
# (results/minibatch.md): 0.235 M tokens/s per core, scaled here as 1/K
OVB_RATE_K50 = 1.84e6 * 19.5 / 153.1

# topictk.inference.cluster.RELAY_FROM: from this many workers on, an array every worker
# needs goes from the driver to one worker and down a binary tree of them
RELAY_FROM = 4

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
    """Seconds of one sweep as topictk did it before the relay: n_kw (int32) sent from the
    driver to every worker, each shard's change of n_kw back (sparse pairs or dense,
    whichever is smaller), added by the driver in shard order."""
    counts = corpus.vocabulary * K
    compute = corpus.tokens / (W * GIBBS_RATE[K]) + counts / REBUILD_RATE
    broadcast = W * counts * 4 / BANDWIDTH
    change = min(counts * 4, 2 * MOVED * corpus.tokens / W * 12)   # (+1, -1) per move
    gather = W * change / BANDWIDTH
    merge = W * min(counts, change / 12) / MERGE_RATE
    tasks = W * TASK_LATENCY
    total = compute + broadcast + gather + merge + tasks
    return {"compute": compute, "broadcast": broadcast, "gather": gather, "merge": merge,
            "tasks": tasks, "total": total}


# ---- the relay design ------------------------------------------------------------------------
def levels(W: int) -> int:
    """The depth of the pairwise merge tree (and of the relay tree) over W shards."""
    return math.ceil(math.log2(W)) if W > 1 else 0


def tasks(W: int) -> int:
    """Tasks per sweep: a sweep per shard, W - 1 merges, a relay copy per shard with
    children."""
    return W + (W - 1) + sum(1 for s in range(1, W) if 2 * s + 1 < W)


def change_bytes(changed: float, counts: float) -> float:
    """The bytes of a change of ``changed`` of ``counts`` counts: 2 a change sparse, 1 a count
    dense, whichever is fewer."""
    return min(2 * changed, counts)


@dataclass(frozen=True)
class Fit:
    """The relay design's constants from the measured runs: the kernel's tokens/s alone on a
    core (1 worker), the slowdown of two kernels side by side on this machine (the 2-worker
    run's shards), the word lists' and the change's counts/s, and the 1-worker run's time
    besides its kernel (``fixed``: its task, the result back, the driver's add and
    bookkeeping). Nothing of the cluster's cost past one worker is fitted: a merge level is
    HOP + a merge pass + the change's transfer, a task SCHED_PER_TASK."""

    rate: float
    side_by_side: float
    lists_rate: float
    change_rate: float
    fixed: float

    @classmethod
    def of(cls, measured: dict) -> Fit:
        by = {m["workers"]: m["per_sweep"] for m in measured["modes"] if m["workers"]}
        n, counts = measured["corpus"]["N"], measured["corpus"]["V"] * measured["topics"]
        one, two = by[1], by[2]
        return cls(rate=n / one["sweep"], side_by_side=two["sweep"] / (one["sweep"] / 2),
                   lists_rate=counts / one["lists"], change_rate=counts / one["change"],
                   fixed=one["wall"] - one["compute"])

    def local_wall(self, measured: dict, W: int, cores: int = 2) -> float:
        """The modelled per-sweep wall of W workers on this machine's cores: the shards'
        kernels side by side (slowed as two are here, and shared when there are more
        processes than cores), the fixed cost, and per merge level a hop, a merge pass and the
        change's transfer (on the loopback, at BANDWIDTH), per task beyond one's the
        scheduler's cost."""
        n, counts = measured["corpus"]["N"], measured["corpus"]["V"] * measured["topics"]
        sweep = n / (W * self.rate) * (self.side_by_side if W > 1 else 1.0) * max(1.0,
                                                                                   W / cores)
        compute = sweep + counts / self.lists_rate + counts / self.change_rate
        # the total change, as the driver received it in the 1-worker run
        total = next(m for m in measured["modes"] if m["workers"] == 1)["per_sweep"]["received"]
        level = sum(HOP + counts / MERGE_PASS + min(total, total * 2 ** lv / W) / BANDWIDTH
                    for lv in range(levels(W)))
        return compute + self.fixed + (tasks(W) - tasks(1)) * SCHED_PER_TASK + level


def relay_sweep(corpus: Corpus, K: int, W: int, fit: Fit) -> dict:
    """Seconds of one sweep of the relay design on W workers, one per core (no sharing), at
    the kernel rate of results/gibbs.md: the shard's kernel with its word lists and change;
    per merge level a hop, the merged change's transfer and a merge pass over V x K; the
    total to the driver and its add; the relay of the total down the tree, which overlaps the
    driver's part (the longer counts); the scheduler's tasks; the fitted fixed cost."""
    counts = corpus.vocabulary * K
    moved = 2 * MOVED * corpus.tokens          # counts changed per sweep, all shards
    kernel = corpus.tokens / (W * GIBBS_RATE[K])
    own = counts / fit.lists_rate + counts / fit.change_rate + min(moved, counts) / ADD_RATE
    tree = sum(HOP + change_bytes(min(moved * 2 ** l / W, counts), counts) / BANDWIDTH
               + counts / MERGE_PASS for l in range(levels(W)))
    total_bytes = change_bytes(min(moved, counts), counts)
    driver = HOP + total_bytes / BANDWIDTH + min(moved, counts) / ADD_RATE
    relay = levels(W) * (HOP + total_bytes / BANDWIDTH)
    sched = tasks(W) * SCHED_PER_TASK
    wall = kernel + own + tree + max(driver, relay) + sched + fit.fixed
    return {"kernel": kernel, "own": own, "tree": tree, "driver": driver, "relay": relay,
            "sched": sched, "total": wall, "driver_bytes": total_bytes,
            # n_kw, the sweep's working copy (int32 each) and the SparseLDA lists (at most an
            # int64 entry a count)
            "worker_bytes": counts * (4 + 4 + 8)}


def ovb_epoch(corpus: Corpus, K: int, W: int, tree: bool = True) -> dict:
    """Seconds of one online-VB epoch with one E-step block per worker: per mini-batch,
    E[log beta] rows of the batch's words (float64) to every worker, and the blocks'
    sufficient statistics of those rows back. ``tree`` (topictk now): from RELAY_FROM workers
    the rows are sent once and relayed down a binary tree (log2 W levels of a hop and a
    transfer), the statistics added by the workers in a pairwise tree (log2 W levels of a
    hop, a transfer and a pass over the rows) and the total sent to the driver; before, the
    driver sent the rows to each worker and received and added every block's statistics.
    The driver's update of lambda on them."""
    batches = corpus.documents / OVB_BATCH
    rows = OVB_BATCH_VOCAB * corpus.vocabulary * K
    per_batch_tokens = corpus.tokens / batches
    compute = per_batch_tokens / (W * OVB_RATE_K50 * 50 / K)
    transfer = rows * 8 / BANDWIDTH
    broadcast = W * transfer
    if tree:
        levels = math.ceil(math.log2(W)) if W > 1 else 0
        if W >= RELAY_FROM:         # sent once, then down a binary tree of the workers
            broadcast = transfer + levels * (HOP + transfer)
        gather = transfer
        merge = levels * (HOP + transfer + rows / MERGE_PASS)
        tasks = W * TASK_LATENCY + (W - 1) * SCHED_PER_TASK
    else:
        gather = W * transfer
        merge = W * rows / MERGE_RATE
        tasks = W * TASK_LATENCY
    parts = {"compute": compute, "broadcast": broadcast, "gather": gather, "merge": merge,
             "tasks": tasks}
    # the driver's part: what it sends (once when relayed), receives and adds, and the tasks
    sends = transfer if tree and W >= RELAY_FROM else broadcast
    driver = sends + gather + tasks + (0.0 if tree else merge)
    return {k: v * batches for k, v in parts.items()} | {
        "total": sum(parts.values()) * batches, "driver": driver * batches}


def _ovb_table(rows: list[tuple]) -> list[str]:
    out = ["**One online-VB epoch**", "",
           "| corpus | K | workers | before: total s | driver's share | efficiency | "
           "now: compute s | broadcast s | gather s | merge tree s | tasks s | total s | "
           "driver's share | efficiency |",
           "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | "
           "---: | ---: |"]
    for corpus, K, W, old, r, e_old, e_new in rows:
        share_old = old["driver"] / old["total"]
        driver = r["driver"] / r["total"]
        out.append(f"| {corpus} | {K:,} | {W} | {old['total']:,.1f} | {share_old:.0%} | "
                   f"{e_old:.0%} | {r['compute']:,.1f} | {r['broadcast']:,.1f} | "
                   f"{r['gather']:,.1f} | {r['merge']:,.1f} | {r['tasks']:,.1f} | "
                   f"{r['total']:,.1f} | {driver:.0%} | {e_new:.0%} |")
    return out + [""]


def _validation(measured: dict, fit: Fit) -> list[str]:
    out = ["| workers | measured s per sweep | modelled s | error |",
           "| ---: | ---: | ---: | ---: |"]
    for m in measured["modes"]:
        W = m["workers"]
        if not W:
            continue
        got, want = m["per_sweep"]["wall"], fit.local_wall(measured, W)
        note = " (fitted)" if W == 1 else ""
        out.append(f"| {W} | {got:.3f} | {want:.3f}{note} | {100 * (want - got) / got:+.1f} % |")
    return out + [""]


def _gibbs_table(rows: list[tuple]) -> list[str]:
    out = ["| corpus | K | workers | driver design s | efficiency | relay s | kernel s | "
           "lists + change s | merge tree s | driver or relay s | scheduler s | efficiency | "
           "driver MiB | worker GiB |",
           "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | "
           "---: | ---: |"]
    for corpus, K, W, old, new, e_old, e_new in rows:
        out.append(f"| {corpus} | {K:,} | {W} | {old['total']:,.1f} | {e_old:.0%} | "
                   f"{new['total']:,.2f} | {new['kernel']:,.2f} | {new['own']:,.2f} | "
                   f"{new['tree']:,.2f} | {max(new['driver'], new['relay']):,.2f} | "
                   f"{new['sched']:,.2f} | {e_new:.0%} | {new['driver_bytes'] / 2**20:,.0f} | "
                   f"{new['worker_bytes'] / 2**30:,.1f} |")
    return out + [""]


def report() -> str:
    measured = json.loads(MEASURED.read_text(encoding="utf-8"))
    fit = Fit.of(measured)
    gibbs, ovb = [], []
    for corpus in CORPORA:
        for K in (128, 1000):
            old1, new1 = gibbs_sweep(corpus, K, 1), relay_sweep(corpus, K, 1, fit)
            for W in WORKERS:
                old, new = gibbs_sweep(corpus, K, W), relay_sweep(corpus, K, W, fit)
                gibbs.append((corpus.name, K, W, old, new, old1["total"] / (W * old["total"]),
                              new1["total"] / (W * new["total"])))
                before, now = ovb_epoch(corpus, K, W, tree=False), ovb_epoch(corpus, K, W)
                one = ovb_epoch(corpus, K, 1)["total"]
                ovb.append((corpus.name, K, W, before, now, one / (W * before["total"]),
                            one / (W * now["total"])))
    big = CORPORA[0].vocabulary * 10_000 * 16       # n_kw, its working copy, the lists
    lines = [
        "# Dask cost model: one Gibbs sweep and one online-VB epoch at scale",
        "",
        "Computed by `python benchmarks/studies/dask_cost_model.py --record` from constants "
        "measured on this machine (each named in the script; the relay design's fitted to "
        f"[dask.json](dask.json), the runs of [dask.md](dask.md)) and stated assumptions: "
        f"{BANDWIDTH * 8 / 1e9:.0f} Gbit/s between hosts, {MOVED:.0%} of tokens "
        f"changing topic per sweep late in a run, online-VB mini-batches of {OVB_BATCH:,} "
        f"documents whose vocabulary is {OVB_BATCH_VOCAB:.0%} of V. Corpora: "
        + "; ".join(f"{c.name} D = {c.documents / 1e6:.1f} M, N = {c.tokens / 1e6:,.0f} M "
                    f"tokens, V = {c.vocabulary:,}" for c in CORPORA) + ".",
        "",
        "## The model against the measured runs",
        "",
        "The relay design on this machine's 2 cores (KOS × "
        f"{measured['copies']}, K = {measured['topics']}, {measured['chunks']} chunks): the "
        f"kernel alone on a core {fit.rate / 1e6:.2f} M tokens/s, {fit.side_by_side:.2f}× "
        f"slower with two side by side; word lists {fit.lists_rate / 1e6:.0f} M counts/s, "
        f"the change {fit.change_rate / 1e6:.0f} M counts/s; {1e3 * fit.fixed:.0f} ms per sweep "
        f"besides the kernel on one worker; per merge level a hop ({1e3 * HOP:.1f} ms) and a "
        f"merge pass ({1e3 * measured['corpus']['V'] * measured['topics'] / MERGE_PASS:.1f} "
        f"ms), {1e3 * SCHED_PER_TASK:.1f} ms per task. Only the one-worker run is fitted; "
        "the 2- and 3-worker rows are predictions. Three workers share two cores, which the "
        "model counts (each kernel gets 2/3 of a core).",
        "",
        *_validation(measured, fit),
        "## One Gibbs sweep",
        "",
        "Driver design (before): compute = N / (W × r_K) + V·K / (list rebuild rate); the "
        "driver sends n_kw to each worker and receives and adds each shard's change; W tasks. "
        "Relay design (now): kernel N / (W × r_K); lists and change encoded, V·K each, and "
        "the last total added; per merge level (log2 W) a hop, the merged change's transfer "
        "and a merge pass over V·K; the total to the driver (a hop, its transfer, the add) or "
        "down the relay tree, whichever is longer; the scheduler's tasks (2–2.5 W); the "
        "fitted fixed cost. Efficiency: the one-worker sweep ÷ (W × the W-worker sweep). "
        "Driver MiB: what the driver receives per sweep (the total change), the same at any "
        "W. Worker GiB: n_kw, its working copy and the word lists, on every worker.",
        "",
        *_gibbs_table(gibbs),
        f"At K = 10,000 on 32 workers (PubMed) every worker holds "
        f"{big / 2**30:,.1f} GiB of counts and lists in this design, whatever the number of "
        "workers.",
        "",
        "Model of an online-VB epoch (D / batch updates), with `inference.chunks` = W (a "
        "block per worker): per update, compute = batch tokens / (W × E-step rate at K). "
        "Before: the driver sent the batch rows of E[log β] (8 B each) to every worker, "
        "received every block's sufficient statistics and added them. Now: from "
        f"{RELAY_FROM} workers on it sends the rows once and the workers pass them down a "
        "binary tree (log2 W levels of a hop and the rows' transfer); the workers add the "
        "statistics in a pairwise tree (log2 W levels of a hop, the transfer and a pass over "
        "the rows) and the driver receives the total. The driver's share: its sending (once "
        "when relayed), receiving, adding and tasks over the total. Efficiency: the "
        "one-worker epoch ÷ (W × the W-worker epoch).",
        "",
        *_ovb_table(ovb),
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
