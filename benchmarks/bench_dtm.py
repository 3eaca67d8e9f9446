"""The dynamic topic model (``model.family: dtm``, ``inference.algorithm: dtm-sgld``) against
static topictk LDA and tomotopy's ``DTModel``, side by side in one run, one thread.

Corpora (prepared under ``work/dtm/``):

* NIPS 1987-1999 (``nips12_roweis_knowceans``): 13 yearly slices, 10 % of each year's
  documents held out (``prepare --time-column year``);
* the same with 1999 held out (``--forecast``): trained on 1987-1998, scored on 1999;
* the 2008 political blogs (``stm_poliblog5k``): ``day`` (day of 2008) binned into 12 months
  by explicit edges, 10 % of each month held out.

speed: training tokens/s over every sweep of a run (topictk's DTM: its LDA start and its
iterations, ``--sweeps`` sweeps in all; LDA and tomotopy: ``--sweeps`` sweeps), timed one
after the other: topictk's the wall time of ``topictk.train`` (the store opened, the run
written; no evaluation during training, one checkpoint at the end), tomotopy's of
``train``.

quality: held-out perplexity by document completion (the store's split), overall and per
slice (``perplexity_by_slice``). topictk's runs are scored by ``Run.evaluate`` (what ``topictk
evaluate`` prints: the DTM's fold-in of each test document with its slice's topics, LDA's Gibbs
fold-in averaged over its saved samples). tomotopy's DTModel is scored by
``topictk.score_slice_topics``, the DTM's fold-in, with its own per-slice topics
(``get_topic_word_dist``), slice means (``get_alpha``) and eta_var (0.1, its default), on the
same held-out tokens; in the forecast case, with its last trained slice's.

The figure: one topic of the NIPS K = 20 DTM run (the one whose version changes most from the
first slice to the last, in total variation), the probabilities of its top words (the five
most probable in its first and in its last slice) in every year.

    python benchmarks/bench_dtm.py [--topics 20 50] [--sweeps 200] [--record]
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

import harness as h
import topictk

NAME = "dtm"
TOMOTOPY_ETA_VAR = 0.1
FOLD_IN = (50, 25)
MONTHS = "edges:1,32,61,92,122,153,183,214,245,275,306,336,367"


def store_of(name: str) -> Path:
    """The prepared store ``name`` (nips, nips-forecast, poliblog), made once."""
    out = h.WORK / NAME / name
    if (out / "manifest.json").exists():
        return out
    (h.WORK / NAME).mkdir(parents=True, exist_ok=True)
    if name.startswith("nips"):
        d = h.data_path("nips12_roweis_knowceans")
        args = [str(d / "docword.nips12.txt.gz"), "--vocab", str(d / "vocab.nips12.txt"),
                "--meta-file", str(d / "metadata.tsv"), "--time-column", "year"]
        if name == "nips-forecast":
            args.append("--forecast")
    else:
        d = h.data_path("stm_poliblog5k")
        args = [str(d / "docword.poliblog5k.txt.gz"), "--vocab", str(d / "vocab.poliblog5k.txt"),
                "--meta-file", str(d / "metadata.tsv"), "--time-column", "day",
                "--time-bins", MONTHS]
    res = h.run_measured([*h.TOPICTK, "prepare", *args, "--out", str(out)],
                         h.WORK / NAME / f"prepare-{name}.log")
    if res["rc"] != 0:
        raise SystemExit(f"prepare {name} failed:\n{h.tail(h.WORK / NAME / f'prepare-{name}.log')}")
    return out


def by_slice(result: dict) -> list[float | None]:
    return list(result["perplexity_by_slice"].values())


def topictk_run(store_path: Path, name: str, model: dict, inference: dict) -> dict:
    """Train (timed) and score one run."""
    config = {"corpus": str(store_path), "output": str(h.WORK / NAME / "runs" / name),
              "model": model, "inference": inference,
              "training": {"seed": 1, "threads": 1, "eval_every": 0, "checkpoint_every": 0,
                           "keep_checkpoints": 1},
              "evaluation": {"fold_in_sweeps": FOLD_IN[0], "fold_in_burn_in": FOLD_IN[1]}}
    h.wait_for_quiet(1)
    start = time.perf_counter()
    run = topictk.train(config, force=True, progress=False)
    seconds = time.perf_counter() - start
    sweeps = int(inference["iterations"]) + int(inference.get("lda_sweeps", 0))
    result = run.evaluate(recompute=True)
    n_tokens = topictk.open_store(store_path).train().n_tokens
    out = {"seconds": seconds, "sweeps": sweeps, "tokens_per_s": n_tokens * sweeps / seconds,
           "perplexity": result["perplexity"], "by_slice": by_slice(result)}
    if model.get("family") == "dtm":
        out["versions"] = run.slice_topic_word()
    return out


def tomotopy_run(store_path: Path, K: int, sweeps: int) -> dict:
    import tomotopy as tp

    store = topictk.open_store(store_path)
    train = store.train()
    doc_ptr, words = np.asarray(train.doc_ptr), np.asarray(train.words)
    slices = np.asarray(store.slices("train"))
    T, V = int(slices.max()) + 1, store.n_words          # the slices it has documents of
    model = tp.DTModel(k=K, t=T, seed=1)
    names = [str(w) for w in range(V)]
    for d in range(train.n_docs):
        model.add_doc([names[w] for w in words[doc_ptr[d]:doc_ptr[d + 1]]],
                      timepoint=int(slices[d]))
    model.train(0, workers=1)
    h.wait_for_quiet(1)
    start = time.perf_counter()
    model.train(sweeps, workers=1)
    seconds = time.perf_counter() - start
    used = np.array([int(w) for w in model.used_vocabs])
    versions = np.full((T, K, V), 1e-12)
    for t in range(T):
        for k in range(K):
            versions[t, k, used] = model.get_topic_word_dist(k, timepoint=t)
    means = np.array([model.get_alpha(t) for t in range(T)], dtype=np.float64)
    result = topictk.score_slice_topics(store, versions, means, TOMOTOPY_ETA_VAR,
                                        sweeps=FOLD_IN[0], burn_in=FOLD_IN[1], seed=1)
    return {"seconds": seconds, "sweeps": sweeps,
            "tokens_per_s": train.n_tokens * sweeps / seconds,
            "perplexity": result["perplexity"], "by_slice": by_slice(result),
            "version": tp.__version__}


def case(store_path: Path, label: str, K: int, sweeps: int, lda_start: int) -> dict:
    h.log(f"{label}, K = {K}: topictk dtm-sgld")
    dtm = topictk_run(store_path, f"{store_path.name}-dtm-K{K}", {"family": "dtm", "topics": K},
                      {"algorithm": "dtm-sgld", "lda_sweeps": lda_start,
                       "iterations": sweeps - lda_start})
    h.log(f"{label}, K = {K}: topictk lda")
    lda = topictk_run(store_path, f"{store_path.name}-lda-K{K}",
                      {"topics": K, "alpha": 0.1, "beta": 0.01},
                      {"algorithm": "gibbs", "iterations": sweeps})
    h.log(f"{label}, K = {K}: tomotopy DTModel")
    tomo = tomotopy_run(store_path, K, sweeps)
    h.log(f"{label}, K = {K}: perplexity dtm {dtm['perplexity']:.1f}, lda "
          f"{lda['perplexity']:.1f}, tomotopy {tomo['perplexity']:.1f}; tokens/s dtm "
          f"{dtm['tokens_per_s'] / 1e6:.2f} M, tomotopy {tomo['tokens_per_s'] / 1e6:.2f} M")
    return {"label": label, "K": K, "dtm": dtm, "lda": lda, "tomotopy": tomo}


def trajectory_figure(versions: np.ndarray, store, path: Path) -> dict:
    """Draw the NIPS topic whose version changes most; returns what it shows."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    change = 0.5 * np.abs(versions[-1] - versions[0]).sum(axis=1)
    k = int(np.argmax(change))
    top = list(dict.fromkeys([*np.argsort(-versions[0, k])[:5], *np.argsort(-versions[-1, k])[:5]]))
    labels = store.time_slices
    vocab = store.vocab
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for w in top:
        ax.plot(range(len(labels)), versions[:, k, w], marker="o", label=vocab[w])
    ax.set_xticks(range(len(labels)), labels, rotation=45)
    ax.set_ylabel("p(word | topic, year)")
    ax.set_title(f"NIPS 1987-1999, dtm-sgld K = 20, topic {k + 1}: its words by year")
    ax.legend(ncol=2, fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return {"topic": k + 1, "change": float(change[k]), "words": [vocab[w] for w in top]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, nargs="+", default=[20, 50])
    parser.add_argument("--sweeps", type=int, default=200)
    parser.add_argument("--lda-start", type=int, default=50)
    parser.add_argument("--record", action="store_true")
    args = parser.parse_args()
    cases = [case(store_of("nips"), "NIPS 1987-1999", K, args.sweeps, args.lda_start)
             for K in args.topics]
    cases.append(case(store_of("nips-forecast"), "NIPS forecast 1999", args.topics[0],
                      args.sweeps, args.lda_start))
    cases.append(case(store_of("poliblog"), "poliblog 2008 by month", args.topics[0],
                      args.sweeps, args.lda_start))
    nips = topictk.open_store(store_of("nips"))
    figure = None
    if args.record:
        h.FIGURES.mkdir(parents=True, exist_ok=True)
        figure = trajectory_figure(cases[0]["dtm"]["versions"], nips,
                                   h.FIGURES / "dtm_nips_topic.png")
    command = (f"python benchmarks/bench_dtm.py --topics {' '.join(map(str, args.topics))} "
               f"--sweeps {args.sweeps} --lda-start {args.lda_start}"
               f"{' --record' if args.record else ''}")
    lines = [f"# The dynamic topic model against static LDA and tomotopy's DTModel "
             f"({h.now_utc():%Y-%m-%d %H:%M} UTC)", "", f"`{command}`", "",
             *h.machine_info("tomotopy"), "",
             f"{args.sweeps} sweeps each (topictk's DTM: {args.lda_start} LDA sweeps, then "
             f"{args.sweeps - args.lda_start} iterations), seed 1, one thread; held-out "
             f"perplexity by document completion on the store's held-out tokens, every model "
             f"scored by topictk (tomotopy's topics with the DTM's fold-in). Training time only.",
             "", "| corpus | K | run | seconds | tokens/s | perplexity | slices below LDA |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for c in cases:
        lda_by = c["lda"]["by_slice"]
        for name, label in (("dtm", "topictk dtm-sgld"), ("lda", "topictk LDA (gibbs)"),
                            ("tomotopy", "tomotopy DTModel")):
            x = c[name]
            pairs = [(a, b) for a, b in zip(x["by_slice"], lda_by) if a is not None]
            below = ("" if name == "lda" else
                     f"{sum(a < b for a, b in pairs)} of {len(pairs)}")
            lines.append(f"| {c['label']} | {c['K']} | {label} | {x['seconds']:.1f} | "
                         f"{x['tokens_per_s'] / 1e6:.2f} M | {x['perplexity']:.1f} | {below} |")
        ratio = c["dtm"]["tokens_per_s"] / c["tomotopy"]["tokens_per_s"]
        lines.append(f"| {c['label']} | {c['K']} | DTM / tomotopy tokens/s | | **{ratio:.2f}x** "
                     f"| | |")
    lines += ["", "Per slice (DTM / LDA / tomotopy perplexity):", ""]
    for c in cases:
        store = topictk.open_store(store_of({"NIPS 1987-1999": "nips",
                                           "NIPS forecast 1999": "nips-forecast"}.get(
                                               c["label"], "poliblog")))
        cells = [f"{label} {a:.0f}/{b:.0f}/{t:.0f}" for label, a, b, t in zip(
            store.time_slices, c["dtm"]["by_slice"], c["lda"]["by_slice"],
            c["tomotopy"]["by_slice"]) if a is not None]
        lines.append(f"- {c['label']}, K = {c['K']}: " + "; ".join(cells))
    if figure is not None:
        lines += ["", f"![topic {figure['topic']}](../figures/dtm_nips_topic.png)", "",
                  f"The figure: NIPS, K = {args.topics[0]}, topic {figure['topic']} (total "
                  f"variation {figure['change']:.2f} from 1987 to 1999), words "
                  f"{', '.join(figure['words'])}."]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.record:
        h.RESULTS.mkdir(parents=True, exist_ok=True)
        path = h.RESULTS / f"{NAME}.md"
        notes = ""
        if path.exists() and h.NOTES_MARKER in path.read_text():
            notes = path.read_text().split(h.NOTES_MARKER, 1)[1]
        path.write_text(text + "\n" + h.NOTES_MARKER + notes)
        for c in cases:
            c["dtm"].pop("versions", None)
        (h.RESULTS / f"{NAME}.json").write_text(json.dumps({"command": command,
                                                            "cases": cases}, indent=1))


if __name__ == "__main__":
    sys.exit(main())
