"""Coherence as gensim computes it: topictk's ``c_v``, ``c_npmi``, ``c_uci`` and ``u_mass``
against gensim's ``CoherenceModel`` on 20 Newsgroups, K = 100.

One collapsed Gibbs run on the 20 Newsgroups "bydate" store (raw text from
``../shared/data/20news_bydate_raw``, prepared as docs/reproducing.md says), trained here once
and loaded afterwards. Both libraries score the same topics (every topic's top ``--top`` words
as strings, by the run's final topic-word estimate, ties by word id) on the same texts (the
store's training documents as lists of words, in token order):

- topictk: :func:`topictk.coherence` (all four measures in one call);
- gensim: ``CoherenceModel(topics=..., texts=..., dictionary=Dictionary(texts),
  coherence=M, processes=1).get_coherence_per_topic()`` per measure (``processes=1`` is what
  gensim picks on two cores, and keeps its window counts single-process).

Reported: per measure the largest absolute difference over the topics (target <= 0.01), the
means, and both timings; the machine, its load, and the versions.

    python benchmarks/bench_coherence.py --record        # the recorded run
    python benchmarks/bench_coherence.py --topics 20 --sweeps 50   # a smoke run

Writes benchmarks/work/coherence/ (the JSONL, the run, logs) and the report ``coherence.md``.
"""
from __future__ import annotations

import argparse
import logging
import os
import time

import numpy as np

import harness as h
import topictk

NAME = "coherence"
WORK = h.WORK / "coherence"
STORE = h.NEWS_STORE
MEASURES = ("c_v", "c_npmi", "c_uci", "u_mass")
TARGET = 0.01


def ensure_run(topics: int, sweeps: int, seed: int):
    """The Gibbs run (trained once with these settings, then loaded)."""
    out = WORK / f"gibbs-k{topics}-s{sweeps}-seed{seed}"
    config = {"corpus": str(STORE), "output": str(out),
              "model": {"topics": topics, "alpha": 0.5, "beta": 0.01},
              "inference": {"algorithm": "gibbs", "iterations": sweeps,
                            "burn_in": sweeps - 1, "thin": 1},
              "training": {"seed": seed, "threads": 1, "eval_every": sweeps,
                           "checkpoint_every": 0}}
    h.train_once(config, WORK)
    return topictk.load_run(out), out


def top_word_strings(run, n: int) -> list[list[str]]:
    """Every topic's ``n`` most probable words (ties by ascending word id)."""
    phi = run.topic_word()
    order = np.argsort(-phi, axis=1, kind="stable")[:, :n]
    vocab = run.vocabulary
    return [[vocab[w] for w in row] for row in order]


def token_texts(store) -> list[list[str]]:
    """The store's training documents as lists of words, in token order."""
    train, vocab = store.train(), np.array(store.vocab, dtype=object)
    ptr, words = np.asarray(train.doc_ptr), np.asarray(train.words)
    return [list(vocab[words[ptr[d]:ptr[d + 1]]]) for d in range(ptr.size - 1)]


def run_gensim(topics, texts) -> tuple[dict, dict, float]:
    """gensim's per-topic values and seconds per measure, and the seconds of its
    Dictionary."""
    from gensim.corpora import Dictionary
    from gensim.models.coherencemodel import CoherenceModel

    logging.getLogger("gensim").setLevel(logging.WARNING)
    began = time.perf_counter()
    dictionary = Dictionary(texts)
    dict_seconds = time.perf_counter() - began
    values, seconds = {}, {}
    for m in MEASURES:
        h.log(f"gensim {m}")
        began = time.perf_counter()
        model = CoherenceModel(topics=topics, texts=texts, dictionary=dictionary, coherence=m,
                               processes=1)
        values[m] = [float(v) for v in model.get_coherence_per_topic()]
        seconds[m] = time.perf_counter() - began
    return values, seconds, dict_seconds


def run_topictk(store, topics, repeats: int) -> tuple[dict, float, dict]:
    """topictk's result for all four measures, the best of ``repeats`` timings of that call,
    and the time of each measure alone."""
    best, result = float("inf"), None
    for _ in range(repeats):
        began = time.perf_counter()
        result = topictk.coherence(store, topics, ",".join(MEASURES), progress=False)
        best = min(best, time.perf_counter() - began)
    alone = {}
    for m in MEASURES:
        began = time.perf_counter()
        topictk.coherence(store, topics, m, progress=False)
        alone[m] = time.perf_counter() - began
    return result, best, alone


def lscpu_head() -> str:
    import subprocess

    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    except OSError:
        return "(lscpu not available)"
    return "\n".join(out.splitlines()[:10])


def report(args, facts, topics, mine, mine_seconds, alone, theirs, their_seconds,
           dict_seconds, loads) -> str:
    rows, worst = [], {}
    for m in MEASURES:
        a = np.array([np.nan if v is None else v for v in mine["per_topic"][m]])
        b = np.array(theirs[m], dtype=float)
        diff = np.abs(a - b)
        k = int(np.nanargmax(diff))
        worst[m] = (k, float(diff[k]))
        rows.append([f"`{m}`", f"{np.nanmean(a):.4f}", f"{np.nanmean(b):.4f}",
                     f"{np.nanmax(diff):.2e}", f"{int((diff > TARGET).sum())}",
                     f"{int(np.isnan(a).sum())} / {int(np.isnan(b).sum())}",
                     f"{alone[m]:.2f}", f"{their_seconds[m]:.1f}"])
    total = sum(their_seconds.values())
    ok = all(d <= TARGET for _, d in worst.values())
    lines = [
        "# Coherence: topictk against gensim's CoherenceModel",
        "",
        f"Recorded {h.now_utc():%Y-%m-%d %H:%M} UTC with `{h.command_line()}`.",
        "",
        f"Run: collapsed Gibbs, K = {args.topics}, alpha 0.5, beta 0.01, {args.sweeps} sweeps, "
        f"seed {args.seed}, on the 20 Newsgroups bydate store ({facts['D']:,} training "
        f"documents, {facts['N']:,} tokens, {facts['V']:,} words), prepared by",
        "",
        "```bash",
        *h.news_commands(),
        "```",
        "",
        f"Topics: every topic's top {args.top} words (strings). Texts: the store's training "
        "documents as lists of words in token order, the same list for both. gensim: "
        "`CoherenceModel(topics=topics, texts=texts, dictionary=Dictionary(texts), "
        "coherence=M, processes=1).get_coherence_per_topic()`; topictk: "
        "`topictk.coherence(store, topics, 'c_v,c_npmi,c_uci,u_mass')`.",
        "",
        "## Agreement, per topic",
        "",
        *h.table(["measure", "mean topictk", "mean gensim", "max abs diff",
                  f"topics > {TARGET}", "undefined topics (tk / gensim)",
                  "topictk alone (s)", "gensim (s)"], rows),
        "",
        f"Target: every topic within {TARGET} for every measure: "
        + ("**met**." if ok else "**not met**.")
        + " Largest difference at topic "
        + ", ".join(f"{k} ({m})" for m, (k, _) in worst.items()) + ".",
        "",
        "## Time",
        "",
        f"- topictk, all four measures in one call (windows of 110 and 10, and documents, "
        f"counted once each): **{mine_seconds:.2f} s** (best of {args.repeats}; the measures "
        f"alone in the table above).",
        f"- gensim, the four measures one after another: **{total:.1f} s**, plus "
        f"{dict_seconds:.1f} s for `Dictionary(texts)`.",
        "",
        "## Machine",
        "",
        *h.machine_info("gensim", "tqdm"),
        f"- load average (1 min): {loads[0]:.2f} before the timings, {loads[1]:.2f} after "
        f"(limit {args.max_load}, waited at most {args.max_wait:.0f} s)",
        "",
        "```",
        lscpu_head(),
        "```",
        "",
    ]
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--topics", type=int, default=100)
    parser.add_argument("--sweeps", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--top", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3,
                        help="timings of topictk's call; the best is reported (3)")
    parser.add_argument("--max-load", type=float, default=1.5,
                        help="wait for a 1-minute load average below this before timing")
    parser.add_argument("--max-wait", type=float, default=1800.0, metavar="S",
                        help="longest wait for that load (1800 s)")
    parser.add_argument("--record", action="store_true",
                        help="write benchmarks/results/coherence.md (default: under work/)")
    args = parser.parse_args(argv)

    h.ensure_20news_bydate()
    run, _ = ensure_run(args.topics, args.sweeps, args.seed)
    store = topictk.open_store(STORE)
    facts = h.store_facts(STORE)
    topics = top_word_strings(run, args.top)
    texts = token_texts(store)
    before = h.wait_for_low_load(args.max_load, args.max_wait)
    h.log(f"load {before:.2f}: topictk")
    mine, mine_seconds, alone = run_topictk(store, topics, args.repeats)
    theirs, their_seconds, dict_seconds = run_gensim(topics, texts)
    after = os.getloadavg()[0]
    text = report(args, facts, topics, mine, mine_seconds, alone, theirs, their_seconds,
                  dict_seconds, (before, after))
    h.write_results(h.results_path(NAME, args.record), text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
