"""Online VB against gensim's LdaModel and scikit-learn's online LatentDirichletAllocation, and
the per-iteration throughput of batch VB and CVB0 against scikit-learn's batch method.

Part ``online``: KOS (10% of the documents held out, 80/20 document completion) and
20 Newsgroups (the published split of Gan et al. 2015) at K = 50 and 128, with the same
alpha, eta, batch size, kappa, tau0, E-step tolerance and number of epochs for all three.
Every model is scored by one evaluator on the same held-out tokens,
``topictk.score_topic_word`` (Gibbs fold-in of the test documents with the topics fixed):
the peer's normalised lambda (gensim ``state.get_lambda()``, scikit-learn ``components_``)
and topictk's ``Run.topic_word()`` at each checkpoint. Every library runs from ``--seeds``
initialisations and is compared on its seed-averaged final perplexity and training time.
Target: topictk's mean curve reaches the best peer's mean final perplexity in at most a
third of that peer's mean training time, and ends no worse.

Part ``throughput``: seconds per iteration of ``vb`` and ``cvb0`` (``topictk train`` of 1 and
of 1 + n iterations: the difference of their training seconds and of their processes' CPU
seconds, divided by n, so start-up and the first iteration cancel) against
``LatentDirichletAllocation(learning_method="batch")`` on the same data and K. Target: >= 3x.

Everything runs single-threaded (topictk ``threads = 1`` unless a row says otherwise,
scikit-learn ``n_jobs = 1``, BLAS and OpenMP limited to one thread)::

    python benchmarks/bench_variational.py --record                       # both parts
    python benchmarks/bench_variational.py --quick --datasets kos --topics 50 --seeds 0
"""
from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import json  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import harness as h  # noqa: E402
import numpy as np  # noqa: E402

import topictk  # noqa: E402

NAME = "variational"
WORK = h.WORK / "variational"
STORES = {"kos": "uci_kos", "20news": "20news_gan2015"}
ALPHA, ETA, BATCH, KAPPA, TAU0 = 0.1, 0.01, 256, 0.7, 64.0
ESTEP_TOL, ESTEP_MAX = 1e-3, 100
EPOCHS = {"kos": 5, "20news": 2}
EVALS_PER_EPOCH = 2
# one estimator of theta for every library: topictk's runs are scored by score_topic_word too
# (not by evaluate, which would use online VB's own E-step)
SCORE = {"sweeps": 50, "burn_in": 25, "seed": 0, "fold_in": "gibbs"}


class Clock:
    """Wall and CPU seconds of the enclosed block, accumulated."""

    def __init__(self):
        self.wall = self.cpu = 0.0

    def __enter__(self):
        self._w, self._c = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc):
        self.wall += time.perf_counter() - self._w
        self.cpu += time.process_time() - self._c
        return False


def score(store, topic_word: np.ndarray) -> float:
    return topictk.score_topic_word(store, topic_word, ALPHA, **SCORE)["perplexity"]


def csr_matrix(store):
    import scipy.sparse as sp

    tr = store.train()
    return sp.csr_matrix((np.asarray(tr.counts, dtype=np.float64), np.asarray(tr.indices),
                          np.asarray(tr.indptr)), shape=(tr.n_docs, store.n_words))


# ------------------------------------------------------------------------------- online
def run_topictk_online(name: str, store_path: Path, K: int, epochs: int, seed: int) -> dict:
    store = topictk.open_store(store_path)
    per_epoch = store.train().n_docs // BATCH
    steps = epochs * per_epoch
    every = max(1, per_epoch // EVALS_PER_EPOCH)
    tag = f"{name}-K{K}-e{epochs}-s{seed}"
    cfg = {"corpus": str(store_path), "output": str(WORK / "runs" / tag),
           "model": {"topics": K, "alpha": ALPHA, "beta": ETA},
           "inference": {"algorithm": "ovb", "iterations": steps, "batch_size": BATCH,
                         "tau0": TAU0, "kappa": KAPPA, "estep_tol": ESTEP_TOL,
                         "estep_max_iter": ESTEP_MAX},
           "training": {"seed": seed, "threads": 1, "eval_every": 0, "checkpoint_every": every,
                        "keep_checkpoints": steps // every + 1}}
    res = h.train(cfg, WORK / "configs" / f"{tag}.yaml", WORK / "logs" / f"{tag}.log")
    if res["rc"] != 0:
        raise SystemExit(f"{tag}: topictk train failed:\n{h.tail(WORK / 'logs' / f'{tag}.log')}")
    curve = []
    for step in [s for s in h.checkpoint_steps(cfg["output"]) if s < steps] + [None]:
        run = topictk.load_run(cfg["output"], checkpoint=step)
        curve.append({"updates": run.step, "epochs": run.step / per_epoch,
                      "wall": run.train_seconds, "perplexity": score(store, run.topic_word())})
    return {"library": "topictk", "wall": curve[-1]["wall"], "process_cpu": res["cpu"],
            "curve": curve, "perplexity": curve[-1]["perplexity"], "updates": steps}


def run_sklearn_online(store_path: Path, K: int, epochs: int, seed: int) -> dict:
    from sklearn.decomposition import LatentDirichletAllocation

    store = topictk.open_store(store_path)
    X = csr_matrix(store)
    model = LatentDirichletAllocation(
        n_components=K, doc_topic_prior=ALPHA, topic_word_prior=ETA, learning_method="online",
        learning_decay=KAPPA, learning_offset=TAU0, batch_size=BATCH, max_iter=epochs,
        total_samples=X.shape[0], evaluate_every=-1, mean_change_tol=ESTEP_TOL,
        max_doc_update_iter=ESTEP_MAX, random_state=seed, n_jobs=1)
    clock = Clock()
    with clock:
        model.fit(X)
    return {"library": "scikit-learn", "wall": clock.wall, "cpu": clock.cpu,
            "perplexity": score(store, model.components_)}


def run_gensim_online(store_path: Path, K: int, epochs: int, seed: int) -> dict:
    from gensim.models import LdaModel

    store = topictk.open_store(store_path)
    tr = store.train()
    indptr, indices, counts = (np.asarray(a) for a in (tr.indptr, tr.indices, tr.counts))
    corpus = [list(zip(indices[indptr[d]:indptr[d + 1]].tolist(),
                       counts[indptr[d]:indptr[d + 1]].tolist())) for d in range(tr.n_docs)]
    id2word = dict(enumerate(store.vocab))
    clock = Clock()
    with clock:
        model = LdaModel(corpus=corpus, id2word=id2word, num_topics=K,
                         alpha=np.full(K, ALPHA), eta=ETA, chunksize=BATCH, passes=epochs,
                         update_every=1, decay=KAPPA, offset=TAU0, iterations=ESTEP_MAX,
                         gamma_threshold=ESTEP_TOL, eval_every=None, random_state=seed,
                         dtype=np.float64)
    return {"library": "gensim", "wall": clock.wall, "cpu": clock.cpu,
            "perplexity": score(store, model.state.get_lambda())}


def mean_run(runs: list[dict]) -> dict:
    """Seed-averaged run: mean final perplexity and times; for topictk the mean curve."""
    out = {"library": runs[0]["library"], "seeds": len(runs),
           "perplexity": h.mean(r["perplexity"] for r in runs),
           "perplexity_sd": h.sd([r["perplexity"] for r in runs]),
           "perplexity_each": [r["perplexity"] for r in runs],
           "wall": h.mean(r["wall"] for r in runs)}
    if "curve" in runs[0]:
        n = min(len(r["curve"]) for r in runs)
        out["curve"] = [{key: h.mean(r["curve"][i][key] for r in runs)
                         for key in runs[0]["curve"][i]} for i in range(n)]
    return out


def online_verdict(ours: dict, peers: list[dict]) -> dict:
    """The best peer by mean final perplexity, and the first point of topictk's mean curve at
    or below it."""
    best = min(peers, key=lambda p: p["perplexity"])
    reach = next((c for c in ours["curve"] if c["perplexity"] <= best["perplexity"]), None)
    return {"best_peer": best["library"], "best_peer_perplexity": best["perplexity"],
            "best_peer_wall": best["wall"],
            "topictk_reach_wall": reach["wall"] if reach else None,
            "time_ratio_wall": (reach["wall"] / best["wall"]) if reach else None,
            "final_no_worse": ours["perplexity"] <= best["perplexity"]}


# ------------------------------------------------------------------------------- throughput
def topictk_seconds_per_iteration(name: str, store_path: Path, algorithm: str, K: int,
                                  iterations: int, threads: int = 1, **options) -> dict:
    """Training and process CPU seconds per iteration from two runs, of 1 and 1 + n
    iterations: their difference divided by n."""
    measured = {}
    for n in (1, 1 + iterations):
        tag = f"{name}-{algorithm}-K{K}-t{threads}-{'-'.join(map(str, options.values()))}-i{n}"
        cfg = {"corpus": str(store_path), "output": str(WORK / "runs" / tag),
               "model": {"topics": K, "alpha": ALPHA, "beta": ETA},
               "inference": {"algorithm": algorithm, "iterations": n, "tol": 0, **options},
               "training": {"seed": 0, "threads": threads, "eval_every": 0,
                            "checkpoint_every": 0}}
        h.wait_for_quiet(threads)
        res = h.train(cfg, WORK / "configs" / f"{tag}.yaml", WORK / "logs" / f"{tag}.log")
        if res["rc"] != 0:
            raise SystemExit(f"{tag}: train failed:\n{h.tail(WORK / 'logs' / f'{tag}.log')}")
        measured[n] = (topictk.load_run(cfg["output"]).train_seconds, res["cpu"], res["foreign"])
    (w1, c1, _), (wn, cn, foreign) = measured[1], measured[1 + iterations]
    return {"wall_per_iteration": (wn - w1) / iterations,
            "cpu_per_iteration": (cn - c1) / iterations, "threads": threads,
            "options": options, "foreign": foreign}


def sklearn_batch_seconds_per_iteration(store_path: Path, K: int, iterations: int) -> dict:
    """Mean seconds of batch EM iterations 2 .. 1 + ``iterations`` of scikit-learn, each timed
    on its own: the iterations ``fit`` runs (``_em_step(batch_update=True)``), without its
    optional perplexity evaluation."""
    from sklearn.decomposition import LatentDirichletAllocation

    X = csr_matrix(topictk.open_store(store_path))
    model = LatentDirichletAllocation(
        n_components=K, doc_topic_prior=ALPHA, topic_word_prior=ETA,
        learning_method="batch", max_iter=1 + iterations, evaluate_every=-1,
        mean_change_tol=ESTEP_TOL, max_doc_update_iter=ESTEP_MAX, random_state=0, n_jobs=1)
    model._init_latent_vars(X.shape[1])
    walls, cpus = [], []
    for _ in range(1 + iterations):
        clock = Clock()
        with clock:
            model._em_step(X, total_samples=X.shape[0], batch_update=True, parallel=None)
        walls.append(clock.wall)
        cpus.append(clock.cpu)
    return {"wall_per_iteration": float(np.mean(walls[1:])),
            "cpu_per_iteration": float(np.mean(cpus[1:]))}


# ------------------------------------------------------------------------------- report
def plot(online: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullFormatter

    cols = 2
    rows = (len(online) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(10, 3.8 * rows), squeeze=False)
    colours = {"gensim": "tab:orange", "scikit-learn": "tab:purple"}
    for ax, case in zip(axes.ravel(), online):
        ours = case["topictk"]
        ax.plot([c["wall"] for c in ours["curve"]], [c["perplexity"] for c in ours["curve"]],
                "o-", color="tab:blue", ms=3, label="topictk ovb (mean of seeds)")
        for peer in case["peers"]:
            ax.scatter([peer["wall"]], [peer["perplexity"]], color=colours[peer["library"]],
                       marker="s", s=40, label=f"{peer['library']} final (mean of seeds)")
            ax.axhline(peer["perplexity"], color=colours[peer["library"]], lw=0.7, ls="--")
        ax.set_xscale("log")
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel("training wall seconds (log)")
        ax.set_ylabel("held-out perplexity")
        ax.set_title(f"{case['dataset']}, K = {case['topics']}, {case['epochs']} epochs")
        lo = min([c["perplexity"] for c in ours["curve"]]
                 + [p["perplexity"] for p in case["peers"]])
        ax.set_ylim(lo * 0.98, lo * 1.2)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def report(results: dict, started, figure: Path | None) -> str:
    lines = ["# Variational family: online VB against gensim and scikit-learn; batch "
             "throughput", "", f"Measured {started:%Y-%m-%d %H:%M} UTC "
             f"({results['wall_seconds'] / 60:.1f} min) by", "", "```bash", h.command_line(),
             "```", "", *h.machine_info("gensim", "scikit-learn"),
             f"- estimator: {SCORE['fold_in']} (theta of every test document by the "
             f"{SCORE['fold_in']} fold-in) for topictk and for both peers; docs/evaluate.md, "
             "'Two estimators of theta for document completion'", "",
             f"α = {ALPHA}, η = {ETA}, |B| = {BATCH}, κ = {KAPPA}, τ0 = {TAU0:g}, E-step "
             f"tolerance {ESTEP_TOL:g} (≤ {ESTEP_MAX} iterations); every model scored by "
             f"`topictk.score_topic_word` ({SCORE['sweeps']} fold-in sweeps, "
             f"{SCORE['burn_in']} burn-in) on the store's held-out tokens. Times are training "
             "wall seconds (topictk: `train_seconds` of the run; peers: `fit`).", ""]
    if results["online"]:
        rows = []
        for case in results["online"]:
            v = case["verdict"]
            for r in [case["topictk"], *case["peers"]]:
                rows.append([case["dataset"], case["topics"], case["epochs"], r["library"],
                             f"{r['perplexity']:.1f} ± {h.fmt(r['perplexity_sd'])} "
                             f"({r['seeds']})", f"{r['wall']:.1f}",
                             (f"reaches {v['best_peer']}'s {v['best_peer_perplexity']:.1f} at "
                              f"{h.fmt(v['topictk_reach_wall'])} s = "
                              f"{h.fmt(v['time_ratio_wall'], '.2f')}× its time; final no "
                              f"worse: {'yes' if v['final_no_worse'] else 'no'}")
                             if r["library"] == "topictk" else ""])
        lines += ["## Online VB", "", *h.table(
            ["corpus", "K", "epochs", "library", "final perplexity (seeds)", "train s",
             "target (≤ 1/3 of the best peer's time)"], rows, align="lrrlrrl"), ""]
        if figure is not None:
            lines += [f"![perplexity against training time](../{figure.parent.name}/"
                      f"{figure.name})", ""]
    if results["throughput"]:
        rows = []
        for row in results["throughput"]:
            base = row["sklearn_batch"]
            rows.append([row["dataset"], row["topics"], "scikit-learn batch",
                         f"{base['wall_per_iteration']:.3f}", f"{base['cpu_per_iteration']:.3f}",
                         "", ""])
            for label in ("vb", "vb_warm", "vb_2threads", "cvb0"):
                r = row[label]
                rows.append([row["dataset"], row["topics"], label,
                             f"{r['wall_per_iteration']:.3f}", f"{r['cpu_per_iteration']:.3f}",
                             f"{row[label + '_speedup_wall']:.1f}×",
                             f"{row[label + '_speedup_cpu']:.1f}×"])
        lines += ["## Per-iteration throughput against scikit-learn's batch method", "",
                  *h.table(["corpus", "K", "method", "wall s / it", "CPU s / it",
                            "speed-up (wall)", "speed-up (CPU)"], rows, align="lrlrrrr"), ""]
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", nargs="+", default=["online", "throughput"],
                        choices=["online", "throughput"])
    parser.add_argument("--datasets", nargs="+", default=["kos", "20news"], choices=list(STORES))
    parser.add_argument("--topics", type=int, nargs="+", default=[50, 128])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2],
                        help="initialisation seeds of every library (online part)")
    parser.add_argument("--quick", action="store_true",
                        help="one epoch (online), 2 iterations (throughput)")
    parser.add_argument("--record", action="store_true",
                        help="write benchmarks/results/variational.md and the figure")
    args = parser.parse_args(argv)
    started, began = h.now_utc(), time.perf_counter()
    results = {"online": [], "throughput": []}
    if "online" in args.parts:
        for name in args.datasets:
            store = h.ensure_store(STORES[name])
            epochs = 1 if args.quick else EPOCHS[name]
            for K in args.topics:
                runs = {"topictk": [], "scikit-learn": [], "gensim": []}
                for seed in args.seeds:
                    runs["topictk"].append(run_topictk_online(name, store, K, epochs, seed))
                    runs["scikit-learn"].append(run_sklearn_online(store, K, epochs, seed))
                    runs["gensim"].append(run_gensim_online(store, K, epochs, seed))
                ours = mean_run(runs["topictk"])
                peers = [mean_run(runs["scikit-learn"]), mean_run(runs["gensim"])]
                case = {"dataset": name, "topics": K, "epochs": epochs, "topictk": ours,
                        "peers": peers, "verdict": online_verdict(ours, peers), "runs": runs}
                results["online"].append(case)
                h.log(f"{name} K={K}: topictk {ours['perplexity']:.1f} in {ours['wall']:.1f}s; "
                      + "; ".join(f"{p['library']} {p['perplexity']:.1f} in {p['wall']:.1f}s"
                                  for p in peers))
    if "throughput" in args.parts:
        # scikit-learn's iterations all cost the same; topictk's vb runs both E-step starts
        # in its first 20 iterations and in every 5th after, so its mean is over 49
        iterations = 2 if args.quick else 3
        our_iterations = 2 if args.quick else 49
        for name in args.datasets:
            store = h.ensure_store(STORES[name])
            K = 50
            row = {"dataset": name, "topics": K, "iterations": iterations,
                   "sklearn_batch": sklearn_batch_seconds_per_iteration(store, K, iterations)}
            variants = {"vb": ("vb", 1, {}), "vb_warm": ("vb", 1, {"estep_start": "warm"}),
                        "vb_2threads": ("vb", 2, {}), "cvb0": ("cvb0", 1, {})}
            for label, (algorithm, threads, options) in variants.items():
                row[label] = topictk_seconds_per_iteration(name, store, algorithm, K,
                                                           our_iterations, threads, **options)
                for kind in ("wall", "cpu"):
                    row[f"{label}_speedup_{kind}"] = (
                        row["sklearn_batch"][f"{kind}_per_iteration"]
                        / max(row[label][f"{kind}_per_iteration"], 1e-9))
            results["throughput"].append(row)
            h.log(f"{name} K={K}: sklearn batch {row['sklearn_batch']['cpu_per_iteration']:.2f} "
                  "CPU s/it; " + "; ".join(f"{label} x{row[label + '_speedup_cpu']:.1f} CPU"
                                           for label in variants))
    results["wall_seconds"] = time.perf_counter() - began
    WORK.mkdir(parents=True, exist_ok=True)
    (WORK / "results.json").write_text(json.dumps(results, indent=1))
    figure = None
    if results["online"]:
        figure = h.figure_path("variational_online.png", args.record)
        plot(results["online"], figure)
    text = report(results, started, figure)
    print(text)
    h.write_results(h.results_path(NAME, args.record), text)


if __name__ == "__main__":
    main()
