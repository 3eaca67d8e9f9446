"""Online VB against gensim's LdaModel and scikit-learn's online LatentDirichletAllocation, and
the per-iteration throughput of batch VB and CVB0 against scikit-learn's batch method.

Part 1 (``online``): KOS (10% of the documents held out, 80/20 document completion) and
20 Newsgroups (the published split of Gan et al. 2015) at K = 50 and 128, with the same
alpha, eta, batch size, kappa, tau0, E-step tolerance and number of epochs for all three.
Every model is scored by topictk's evaluator on the same held-out tokens: the peer's lambda
(gensim ``state.get_lambda()``, scikit-learn ``components_``) is put through topictk's VB
fold-in (cold E-step, lambda frozen; ALGORITHMS.md §11.2). Every library runs from
``--seeds`` initialisations (0 1 2) and is compared on its seed-averaged final perplexity and
training time (on KOS the spread between initialisations is ~100 perplexity points, larger than
the differences between the libraries). Target: topictk's mean curve reaches the best peer's
mean final perplexity in at most a third of that peer's mean training time, and ends no worse.

Part 2 (``throughput``): seconds per iteration of ``vb`` and ``cvb0`` against
``LatentDirichletAllocation(learning_method="batch")`` on the same data and K. Target: >= 3x.

Everything runs single-threaded (topictk ``threads = 1``, scikit-learn ``n_jobs = 1``, BLAS
and OpenMP limited to one thread) on a shared 2-core machine; wall and CPU seconds are both
recorded. Install the peers in a separate venv (benchmarks/requirements.txt)::

    python3 -m venv /tmp/varbench
    /tmp/varbench/bin/pip install -e . gensim scikit-learn matplotlib
    /tmp/varbench/bin/python benchmarks/bench_variational.py            # both parts
    /tmp/varbench/bin/python benchmarks/bench_variational.py --quick    # smoke run
"""
from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from topictk.corpus.prepare import PrepareOptions, prepare  # noqa: E402
from topictk.corpus.store import CorpusStore  # noqa: E402
from topictk.inference.base import TestSet  # noqa: E402
from topictk.inference.perplexity import perplexity_from_probabilities  # noqa: E402
from topictk.inference.registry import (
    get_driver,  # noqa: E402
    load_config,  # noqa: E402
)
from topictk.inference.variational import fold_in_theta
from topictk.inference.vb import mixture_probabilities  # noqa: E402
from topictk.streams import Streams  # noqa: E402

DATA = ROOT.parent / "shared" / "data"
WORK = ROOT / "benchmarks" / "work" / "variational"

ALPHA, ETA, BATCH, KAPPA, TAU0 = 0.1, 0.01, 256, 0.7, 64.0
ESTEP_TOL, ESTEP_MAX = 1e-3, 100
EPOCHS = {"kos": 5, "20news": 2}
EVALS_PER_EPOCH = 2


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


def store_for(name: str) -> Path:
    path = WORK / f"{name}_protocol_a"
    if (path / "manifest.json").exists():
        return path
    if name == "kos":
        opts = PrepareOptions(format="uci", vocab=str(DATA / "uci_kos" / "vocab.kos.txt"),
                              test_docs=0.1, heldout_fraction=0.2, seed=0, force=True)
        prepare([str(DATA / "uci_kos" / "docword.kos.txt.gz")], path, opts)
    else:
        d = DATA / "20news_gan2015"
        opts = PrepareOptions(format="uci", vocab=str(d / "vocab.txt"),
                              test_observed=str(d / "docword.test_observed80.txt.gz"),
                              test_heldout=str(d / "docword.test_heldout20.txt.gz"), force=True)
        prepare([str(d / "docword.train.txt.gz")], path, opts)
    return path


def score_lambda(lam_vk: np.ndarray, alpha: np.ndarray, test: TestSet, eta: float) -> float:
    """topictk's evaluator on a word-major lambda: cold E-step fold-in, then perplexity."""
    lam_vk = np.ascontiguousarray(lam_vk, dtype=np.float64)
    theta = fold_in_theta(test.observed, lam_vk, alpha, eta, True, ESTEP_TOL, ESTEP_MAX, 1)
    p = mixture_probabilities(test.heldout, theta, lam_vk / lam_vk.sum(axis=0), 1)
    return perplexity_from_probabilities(p, test.heldout.counts)[0]


def csr_matrix(store: CorpusStore):
    import scipy.sparse as sp

    tr = store.train()
    return sp.csr_matrix((np.asarray(tr.counts, dtype=np.float64), np.asarray(tr.indices),
                          np.asarray(tr.indptr)), shape=(tr.n_docs, store.n_words))


# ------------------------------------------------------------------------------- part 1
def peers_initial_lambda(seed: int, K: int, V: int) -> np.ndarray:
    """The (V, K) initial lambda both peers draw for ``random_state=seed``: scikit-learn's
    ``components_`` and gensim's ``state.sstats`` are
    RandomState(seed).gamma(100, 1/100, (K, V))."""
    return np.random.RandomState(seed).gamma(100.0, 1.0 / 100.0, (K, V)).T


def run_topictk_online(store_path: Path, K: int, epochs: int, seed: int = 0,
                       same_init: bool = False) -> dict:
    store = CorpusStore.open(store_path)
    test = TestSet.from_store(store)
    raw = {"corpus": str(store_path), "output": str(WORK / "unused"),
           "model": {"topics": K, "alpha": ALPHA, "beta": ETA},
           "inference": {"algorithm": "ovb", "iterations": 1, "batch_size": BATCH,
                         "tau0": TAU0, "kappa": KAPPA, "estep_tol": ESTEP_TOL,
                         "estep_max_iter": ESTEP_MAX}}
    driver = get_driver("ovb")(load_config(None, raw=raw), store, 1, streams=Streams(seed))
    clock = Clock()
    with clock:
        state = driver.init_state()
        if same_init:
            # common random numbers: start from the peers' lambda (lambda = offset + lam_tilde)
            state.lam_tilde[:] = peers_initial_lambda(seed, K, driver.V) - state.offset
            state.scale = 1.0
            state.lam_sum = state.lam_tilde.sum(axis=0)
    per_epoch = driver.batches_per_epoch
    steps = epochs * per_epoch
    every = max(1, per_epoch // EVALS_PER_EPOCH)
    curve = []
    for t in range(steps):
        with clock:
            driver.step(state, t)
        if (t + 1) % every == 0 or t + 1 == steps:
            curve.append({"updates": t + 1, "epochs": (t + 1) / per_epoch, "wall": clock.wall,
                          "cpu": clock.cpu,
                          "perplexity": score_lambda(state.lam(), state.alpha, test, ETA)})
    return {"library": "topictk", "wall": clock.wall, "cpu": clock.cpu, "curve": curve,
            "perplexity": curve[-1]["perplexity"], "updates": steps}


def run_sklearn_online(store_path: Path, K: int, epochs: int, seed: int = 0) -> dict:
    from sklearn.decomposition import LatentDirichletAllocation

    store = CorpusStore.open(store_path)
    X = csr_matrix(store)
    model = LatentDirichletAllocation(
        n_components=K, doc_topic_prior=ALPHA, topic_word_prior=ETA, learning_method="online",
        learning_decay=KAPPA, learning_offset=TAU0, batch_size=BATCH, max_iter=epochs,
        total_samples=X.shape[0], evaluate_every=-1, mean_change_tol=ESTEP_TOL,
        max_doc_update_iter=ESTEP_MAX, random_state=seed, n_jobs=1)
    clock = Clock()
    with clock:
        model.fit(X)
    ppl = score_lambda(model.components_.T, np.full(K, ALPHA), TestSet.from_store(store), ETA)
    return {"library": "scikit-learn", "wall": clock.wall, "cpu": clock.cpu, "perplexity": ppl}


def run_gensim_online(store_path: Path, K: int, epochs: int, seed: int = 0) -> dict:
    from gensim.models import LdaModel

    store = CorpusStore.open(store_path)
    tr = store.train()
    indptr, indices, counts = (np.asarray(a) for a in (tr.indptr, tr.indices, tr.counts))
    corpus = [list(zip(indices[indptr[d]:indptr[d + 1]].tolist(),
                       counts[indptr[d]:indptr[d + 1]].tolist())) for d in range(tr.n_docs)]
    id2word = {i: w for i, w in enumerate(store.vocab)}
    clock = Clock()
    with clock:
        model = LdaModel(corpus=corpus, id2word=id2word, num_topics=K,
                         alpha=np.full(K, ALPHA), eta=ETA, chunksize=BATCH, passes=epochs,
                         update_every=1, decay=KAPPA, offset=TAU0, iterations=ESTEP_MAX,
                         gamma_threshold=ESTEP_TOL, eval_every=None, random_state=seed,
                         dtype=np.float64)
    lam = model.state.get_lambda()                    # (K, V)
    ppl = score_lambda(lam.T, np.full(K, ALPHA), TestSet.from_store(store), ETA)
    return {"library": "gensim", "wall": clock.wall, "cpu": clock.cpu, "perplexity": ppl}


def mean_run(runs: list[dict]) -> dict:
    """Seed-averaged run: mean final perplexity and times; for topictk the mean curve."""
    out = {"library": runs[0]["library"], "seeds": len(runs),
           "perplexity": float(np.mean([r["perplexity"] for r in runs])),
           "perplexity_each": [r["perplexity"] for r in runs],
           "wall": float(np.mean([r["wall"] for r in runs])),
           "cpu": float(np.mean([r["cpu"] for r in runs]))}
    if "curve" in runs[0]:
        out["curve"] = [{key: float(np.mean([r["curve"][i][key] for r in runs]))
                         for key in runs[0]["curve"][i]} for i in range(len(runs[0]["curve"]))]
    return out


def online_verdict(ours: dict, peers: list[dict]) -> dict:
    """On seed-averaged runs: the best peer by mean final perplexity, and the first point of
    topictk's mean curve at or below it."""
    best = min(peers, key=lambda p: p["perplexity"])
    reach = next((c for c in ours["curve"] if c["perplexity"] <= best["perplexity"]), None)
    return {"best_peer": best["library"], "best_peer_perplexity": best["perplexity"],
            "best_peer_wall": best["wall"], "best_peer_cpu": best["cpu"],
            "topictk_reach_wall": reach["wall"] if reach else None,
            "topictk_reach_cpu": reach["cpu"] if reach else None,
            "time_ratio_wall": (reach["wall"] / best["wall"]) if reach else None,
            "time_ratio_cpu": (reach["cpu"] / best["cpu"]) if reach else None,
            "final_no_worse": ours["perplexity"] <= best["perplexity"]}


# ------------------------------------------------------------------------------- part 2
def topictk_seconds_per_iteration(store_path: Path, algorithm: str, K: int, iterations: int,
                                  threads: int = 1, **options) -> dict:
    """Mean seconds of iterations 2 .. 1 + ``iterations`` (the first one is left out, as in the
    scikit-learn measurement below)."""
    store = CorpusStore.open(store_path)
    raw = {"corpus": str(store_path), "output": str(WORK / "unused"),
           "model": {"topics": K, "alpha": ALPHA, "beta": ETA},
           "inference": {"algorithm": algorithm, "iterations": 1 + iterations, "tol": 0,
                         **options}}
    driver = get_driver(algorithm)(load_config(None, raw=raw), store, threads, streams=Streams(0))
    state = driver.init_state()
    walls, cpus = [], []
    for t in range(1 + iterations):
        clock = Clock()
        with clock:
            driver.step(state, t)
        walls.append(clock.wall)
        cpus.append(clock.cpu)
    return {"wall_per_iteration": float(np.mean(walls[1:])),
            "cpu_per_iteration": float(np.mean(cpus[1:])), "wall_each": walls,
            "cpu_each": cpus, "threads": threads, "options": options,
            # after vb's first best_iterations (20) EM iterations: the steady state
            "cpu_per_iteration_after_20": float(np.mean(cpus[21:])) if len(cpus) > 21 else None,
            "cpu_per_iteration_first_20": float(np.mean(cpus[1:21]))}


def sklearn_batch_seconds_per_iteration(store_path: Path, K: int, iterations: int) -> dict:
    """Mean seconds of batch EM iterations 2 .. 1 + ``iterations`` of scikit-learn, each timed
    on its own: the iterations ``fit`` runs (``_em_step(batch_update=True)``), without its
    optional perplexity evaluation."""
    from sklearn.decomposition import LatentDirichletAllocation

    X = csr_matrix(CorpusStore.open(store_path))
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
            "cpu_per_iteration": float(np.mean(cpus[1:])), "wall_each": walls, "cpu_each": cpus}


# ---------------------------------------------------------------------------------- main
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", nargs="+", default=["online", "throughput"],
                        choices=["online", "throughput"])
    parser.add_argument("--datasets", nargs="+", default=["kos", "20news"])
    parser.add_argument("--topics", type=int, nargs="+", default=[50, 128])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2],
                        help="initialisation seeds of every library (online part)")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--same-init", action="store_true",
                        help="topictk's online VB starts from the peers' initial lambda of each "
                             "seed (the comparison is then paired, not dominated by the draws)")
    parser.add_argument("--plot-only", metavar="JSON",
                        help="redraw benchmarks/variational_online.png from a results file")
    args = parser.parse_args()
    if args.plot_only:
        plot(json.loads(Path(args.plot_only).read_text())["online"],
             ROOT / "benchmarks" / "variational_online.png")
        return
    WORK.mkdir(parents=True, exist_ok=True)
    results = {"settings": {"alpha": ALPHA, "eta": ETA, "batch_size": BATCH, "kappa": KAPPA,
                            "tau0": TAU0, "estep_tol": ESTEP_TOL, "estep_max_iter": ESTEP_MAX,
                            "epochs": EPOCHS, "threads": 1, "same_init": args.same_init,
                            "seeds": args.seeds},
               "online": [], "throughput": []}
    began = time.perf_counter()
    if "online" in args.parts:
        for name in args.datasets:
            store = store_for(name)
            epochs = 1 if args.quick else EPOCHS[name]
            for K in args.topics:
                runs = {"topictk": [], "scikit-learn": [], "gensim": []}
                for seed in args.seeds:
                    runs["topictk"].append(run_topictk_online(store, K, epochs, seed,
                                                              args.same_init))
                    runs["scikit-learn"].append(run_sklearn_online(store, K, epochs, seed))
                    runs["gensim"].append(run_gensim_online(store, K, epochs, seed))
                ours = mean_run(runs["topictk"])
                peers = [mean_run(runs["scikit-learn"]), mean_run(runs["gensim"])]
                case = {"dataset": name, "topics": K, "epochs": epochs, "topictk": ours,
                        "peers": peers, "verdict": online_verdict(ours, peers), "runs": runs}
                results["online"].append(case)
                print(f"{name} K={K}: topictk {ours['perplexity']:.1f} in {ours['wall']:.1f}s; "
                      + "; ".join(f"{p['library']} {p['perplexity']:.1f} in {p['wall']:.1f}s"
                                  for p in peers) + f"; {case['verdict']}", flush=True)
    if "throughput" in args.parts:
        # scikit-learn's iterations all cost the same; topictk's vb runs both E-step starts
        # in its first 20 iterations and in every 5th after, so its mean is over 49
        iterations = 2 if args.quick else 3
        our_iterations = 2 if args.quick else 49
        for name in args.datasets:
            store = store_for(name)
            K = 50
            row = {"dataset": name, "topics": K, "iterations": iterations,
                   "sklearn_batch": sklearn_batch_seconds_per_iteration(store, K, iterations)}
            variants = {"vb": ("vb", 1, {}), "vb_warm": ("vb", 1, {"estep_start": "warm"}),
                        "vb_2threads": ("vb", 2, {}), "cvb0": ("cvb0", 1, {})}
            for label, (algorithm, threads, options) in variants.items():
                row[label] = topictk_seconds_per_iteration(store, algorithm, K, our_iterations,
                                                           threads, **options)
                row[f"{label}_speedup_wall"] = (row["sklearn_batch"]["wall_per_iteration"]
                                                / row[label]["wall_per_iteration"])
                row[f"{label}_speedup_cpu"] = (row["sklearn_batch"]["cpu_per_iteration"]
                                               / row[label]["cpu_per_iteration"])
            results["throughput"].append(row)
            print(f"{name} K={K}: sklearn batch {row['sklearn_batch']['cpu_per_iteration']:.2f}"
                  " CPU s/it; " + "; ".join(
                      f"{label} {row[label]['cpu_per_iteration']:.3f} "
                      f"(x{row[label + '_speedup_cpu']:.1f} CPU, "
                      f"x{row[label + '_speedup_wall']:.1f} wall)" for label in variants),
                  flush=True)
    results["wall_seconds"] = time.perf_counter() - began
    suffix = ("_quick" if args.quick else "") + ("_same_init" if args.same_init else "")
    parts = "_".join(args.parts)
    (WORK / f"variational_{parts}{suffix}.json").write_text(json.dumps(results, indent=1))
    if results["online"] and not args.quick:
        plot(results["online"], ROOT / "benchmarks" / "variational_online.png")


if __name__ == "__main__":
    main()
