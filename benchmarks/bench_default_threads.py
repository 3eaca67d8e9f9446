"""Gibbs with the default schedule (``inference.chunks`` and ``inference.blocks`` unset: the
partitioned schedule with a block count fixed by the corpus size): what it costs one thread
against the exact single-chunk chain, what two threads give, and that the numbers do not depend
on the thread count.

Runs of the same config side by side, alternating, for several rounds: the exact chain
(``chunks: 1``, 1 thread), the default at 1 thread and at 2 threads, and AD-LDA with 2 chunks
at 1 thread (``chunks: 2``, the default before the partitioned schedule). Times are
training seconds (from the saved model, evaluation excluded) and the wall and CPU time of the
whole process; the contention (cores other processes kept busy) is reported per run. The two
default runs must save the same model byte for byte; one ``topictk evaluate`` of each run
gives the held-out perplexity.

    python benchmarks/bench_default_threads.py --rounds 3 --record
"""
from __future__ import annotations

import argparse
import io
import json
import zipfile
from pathlib import Path

import harness as h
import numpy as np

# (name, inference keys beyond the defaults, threads); the first three are the comparison
# the default is judged by, the last is AD-LDA's cost against the same exact chain
VARIANTS = (("exact", {"chunks": 1}, 1), ("default", {}, 1), ("default", {}, 2),
            ("chunks-2", {"chunks": 2}, 1))


def model_arrays(run_dir: Path) -> tuple[dict, dict]:
    """(header, every other array) of a run's ``model.npz``."""
    arrays, header = {}, {}
    with zipfile.ZipFile(run_dir / "model.npz") as zf:
        for name in sorted(zf.namelist()):
            value = np.load(io.BytesIO(zf.read(name)), allow_pickle=False)
            if name == "header.npy":
                header = json.loads(value.tobytes().decode("utf-8"))
            else:
                arrays[name] = value
    return header, arrays


def same_model(a: Path, b: Path) -> bool:
    (_, x), (_, y) = model_arrays(a), model_arrays(b)
    return x.keys() == y.keys() and all(np.array_equal(x[k], y[k]) for k in x)


def config(store: Path, out: Path, args, extra: dict, threads: int) -> dict:
    inference = {"algorithm": "gibbs", "iterations": args.sweeps,
                 "burn_in": args.sweeps - 1, "thin": 1, **extra}
    return {"corpus": str(store), "output": str(out),
            "model": {"topics": args.topics},
            "inference": inference,
            "training": {"seed": 1, "threads": threads, "eval_every": 0,
                         "checkpoint_every": 0}}


def list_length(arrays: dict) -> float:
    """The SparseLDA work per token at the end of a run: the number of topics with a non-zero
    count in a token's word, averaged over the training tokens (from the saved n_kw)."""
    nkw = arrays["a_nkw.npy"]
    freq = nkw.sum(axis=1)
    return float((freq * (nkw > 0).sum(axis=1)).sum() / freq.sum())


def label(name: str, threads: int) -> str:
    return f"{name}, {threads} thread{'s' if threads > 1 else ''}"


def measure(args) -> dict:
    store = h.ensure_store(args.corpus)
    runs = {label(n, t): [] for n, _, t in VARIANTS}
    for r in range(args.rounds):
        order = VARIANTS if r % 2 == 0 else VARIANTS[::-1]
        for name, extra, threads in order:
            key = label(name, threads)
            out = h.WORK / "runs" / "default_threads" / f"{name}-{threads}t"
            h.wait_for_quiet(threads, args.quiet_margin, args.max_wait)
            logfile = h.WORK / "logs" / f"dt-{name}-{threads}.log"
            res = h.train(config(store, out, args, extra, threads), out.with_suffix(".yaml"),
                          logfile)
            if res["rc"] != 0:
                raise SystemExit(f"{key} failed:\n{h.tail(logfile)}")
            header, arrays = model_arrays(out)
            res["train"] = header["clock"]["train_seconds"]
            res["list_length"] = list_length(arrays)
            if r == 0:
                res["same_as_1t"] = None
                result, _ = h.evaluate(out, h.WORK / "logs" / f"dt-eval-{name}-{threads}.log",
                                       "--threads", "2")
                res["perplexity"] = result["perplexity"] if result else None
            if name == "default" and threads > 1:
                res["same_as_1t"] = same_model(out, out.with_name(f"{name}-1t"))
            runs[key].append(res)
            h.log(f"round {r + 1} {key}: train {res['train']:.1f}s wall {res['wall']:.1f}s "
                  f"cpu {res['cpu']:.1f}s foreign {res['foreign']:.2f}")
    return {"store": h.store_facts(store), "runs": runs}


def report(args, data: dict) -> str:
    runs = data["runs"]
    exact, one, two = (runs[label(n, t)] for n, _, t in VARIANTS[:3])
    facts = data["store"]
    lines = ["# Default schedule: Gibbs at 1 and 2 threads against the exact chain", "",
             f"Command: `{h.command_line()}`", "", *h.machine_info(), "",
             (f"Corpus `{args.corpus}` (D = {facts['D']:,} training documents, "
             f"N = {facts['N']:,} tokens, V = {facts['V']:,}; {facts['test_docs']:,} test "
             f"documents), K = {args.topics}, {args.sweeps} sweeps, seed 1, no evaluation "
             f"during training; {args.rounds} rounds, the runs alternating (order "
             f"reversed every other round). The default is the partitioned schedule "
             f"(`inference.chunks` and `inference.blocks` unset: 2 blocks for this corpus); "
             f"`chunks-2` is AD-LDA with 2 chunks, the default before it."), ""]
    rows = []
    for key, rs in runs.items():
        train = [r["train"] for r in rs]
        rows.append([key, h.fmt(h.mean(train), ".2f"), f"{min(train):.2f}–{max(train):.2f}",
                     h.fmt(h.mean([r["wall"] for r in rs]), ".1f"),
                     h.fmt(h.mean([r["cpu"] for r in rs]), ".1f"),
                     h.fmt(h.mean([r["foreign"] for r in rs]), ".2f"),
                     h.fmt(rs[0].get("perplexity"), ".2f"), h.fmt(rs[0]["list_length"], ".2f")])
    lines += h.table(["run", "train s (mean)", "train s (range)", "wall s", "CPU s",
                      "other load (cores)", "held-out perplexity",
                      "topics per token's word at the end"], rows, "lrrrrrrr")
    per_round = [(e["train"], o["train"], t["train"]) for e, o, t in zip(exact, one, two)]
    cost = [o / e - 1 for e, o, _ in per_round]
    speed = [o / t for _, o, t in per_round]
    cpu_speed = [o["cpu"] / (t["cpu"] / 2) for o, t in zip(one, two)]
    train_cost = {key: [r["train"] / e["train"] - 1 for r, e in zip(rs, exact)]
                  for key, rs in runs.items() if rs is not exact and rs is not two}
    cpu_cost = {key: [r["cpu"] / e["cpu"] - 1 for r, e in zip(rs, exact)]
                for key, rs in runs.items() if rs is not exact and rs is not two}
    ppl = {key: rs[0].get("perplexity") for key, rs in runs.items()}
    exact_key = label(VARIANTS[0][0], VARIANTS[0][2])
    same = all(t.get("same_as_1t") for t in two)
    lines += ["", "Per round (each ratio from runs of the same round):", "",
              ("- default at 1 thread against the exact chain: "
               + ", ".join(f"{100 * c:+.1f} %" for c in cost)
               + f" (mean {100 * h.mean(cost):+.1f} %)"),
              *(f"- {key} against the exact chain, training seconds: "
                + ", ".join(f"{100 * c:+.1f} %" for c in cs) + f" (mean {100 * h.mean(cs):+.1f} %)"
                for key, cs in train_cost.items() if not key.startswith("default")),
              *(f"- {key} against the exact chain, CPU seconds of the process: "
                + ", ".join(f"{100 * c:+.1f} %" for c in cs) + f" (mean {100 * h.mean(cs):+.1f} %)"
                for key, cs in cpu_cost.items()),
              ("- default, 2 threads against 1 thread (training seconds): "
               + ", ".join(f"{s:.2f}×" for s in speed) + f" (mean {h.mean(speed):.2f}×)"),
              ("- the same from CPU time (1-thread CPU s over half the 2-thread CPU s: what two "
               "free cores would give): " + ", ".join(f"{s:.2f}×" for s in cpu_speed)),
              ("- 2-thread model identical to the 1-thread model, byte for byte, in every "
               f"round: {'yes' if same else 'NO'}"),
              *(f"- held-out perplexity of {key} against the exact chain's: "
                f"{100 * (value / ppl[exact_key] - 1):+.2f} %"
                for key, value in ppl.items()
                if key != exact_key and value is not None and ppl[exact_key])]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", default="20news_gan2015")
    parser.add_argument("--topics", type=int, default=128)
    parser.add_argument("--sweeps", type=int, default=60)
    parser.add_argument("--rounds", type=int, default=3)
    h.add_common_options(parser)
    args = parser.parse_args()
    data = measure(args)
    h.write_results(h.results_path("default_threads", args.record), report(args, data))


if __name__ == "__main__":
    main()
