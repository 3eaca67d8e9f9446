#!/usr/bin/env python3
"""How much of a DMR run's held-out perplexity comes from the level of its learnt prior.

A diagnostic beside ``bench_dmr.py``, run after it on the same stores and run directories
(``benchmarks/work/dmr``). The level of a DMR prior is the mean over the training documents of
sum_k alpha_dk, alpha_dk = exp(x_d^T nu_k); plain LDA's is K alpha. For one corpus and K:

* rescoring: the saved samples of the ``dmr-sgrld`` and ``dmr-sem`` runs scored again with every
  intercept shifted so that the level is L (the metadata contrasts unchanged), and those of the
  ``sgrld`` and ``gibbs`` LDA runs with another symmetric alpha -- what the prior's level does at
  prediction time, with the topics fixed;
* held level: ``dmr-sgrld`` trained again with the intercepts shifted after every update so the
  level stays at K alpha (the metadata weights learnt as usual) -- what the metadata add when the
  level is LDA's. This changes the sampler and is not an algorithm of topictk; it exists only
  to answer that question;
* likelihood level: with the topics of a run's last sample fixed, the level at which the
  gradient of the training documents' likelihood along the intercepts (a common shift of every
  nu_k,intercept) vanishes, its expectation over z estimated by local Gibbs chains of the run's
  own length (``dmr-sgrld``: 10 sweeps, 5 kept) and of 200 sweeps (100 kept) -- whether the
  learnt level is what the likelihood asks for given those topics or an artefact of short
  local chains.

Results go to ``benchmarks/work/dmr/prior_level-<corpus>-K<K>.json``; ``bench_dmr.py
--report-only`` adds them to the "## DMR and particle EM" section of RESULTS.md.

Usage (the venv of bench_dmr.py)::

    python benchmarks/dmr_prior_level.py --corpus poliblog --topics 20
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
WORK = HERE / "work" / "dmr"


def out_path(corpus: str, K: int) -> Path:
    return WORK / f"prior_level-{corpus}-K{K}.json"


def run_dir(corpus: str, K: int, name: str, seed: int) -> Path:
    path = WORK / "runs" / f"{corpus}-K{K}-{name}-s{seed}" / "run"
    if not (path / "model.npz").exists():
        sys.exit(f"{path}: no finished run; run 'python benchmarks/bench_dmr.py --part dmr "
                 f"--corpora {corpus} --topics {K}' first")
    return path


def level(X: np.ndarray, nu: np.ndarray) -> float:
    return float(np.exp(X @ nu.T).sum(axis=1).mean())


def rescore(path: Path, kind: str, values: list[float]) -> dict:
    """Perplexities of one run's samples with the prior moved to each value (None = as learnt):
    DMR: the level; LDA: the symmetric alpha."""
    from topictk.evaluation.perplexity import heldout_perplexity
    from topictk.evaluation.run import LoadedRun
    from topictk.inference.base import TestSet

    run = LoadedRun(path)
    test = TestSet.from_store(run.store)
    samples = run.samples()
    out = {}
    if kind == "dmr":
        X = run.store.features("train")
        learnt = [s["nu"].copy() for s in samples]
        out["learnt_level"] = float(np.mean([level(X, nu) for nu in learnt]))
        for value in values:
            for s, nu in zip(samples, learnt):
                s["nu"] = nu.copy()
                if value is not None:
                    s["nu"][:, -1] += np.log(value / level(X, nu))
            key = "learnt" if value is None else f"{value:g}"
            out[key] = heldout_perplexity(run.driver, run.state, test, samples, 0)["perplexity"]
    else:
        for value in values:
            alpha = np.full(run.config.model.topics, value)
            for s in samples:
                s["alpha"] = alpha
            run.state.alpha = alpha          # sgrld scores with the state's alpha
            out[f"{value:g}"] = heldout_perplexity(run.driver, run.state, test, samples,
                                                   0)["perplexity"]
    return out


def level_gradient(phi: np.ndarray, X: np.ndarray, nu: np.ndarray, doc_ptr: np.ndarray,
                   words: np.ndarray, sweeps: int, seed: int) -> float:
    """Mean over training documents of sum_k g-bar_dk (§9.1): the derivative of the likelihood
    along a common shift of the intercepts, averaged over the kept sweeps of one local chain
    per document (§7.4, topics fixed)."""
    from topictk.inference import _minibatch

    D, K = doc_ptr.size - 1, phi.shape[1]
    alpha = np.ascontiguousarray(np.exp(X @ nu.T))
    grad = np.zeros((D, K))
    _minibatch.local_gibbs(doc_ptr, words, phi, alpha, sweeps, sweeps // 2,
                           np.array([0, D], dtype=np.int64), [np.random.PCG64(seed)],
                           np.zeros((phi.shape[0], K), dtype=np.int64),
                           np.zeros((D, K), dtype=np.int64), 1, grad)
    return float(grad.sum() / (sweeps - sweeps // 2) / D)


def likelihood_level(path: Path, sweeps: list[int], seed: int) -> dict:
    """The level where the likelihood's gradient along the intercepts is zero, for the topics
    of the run's last sample, with local chains of each length in ``sweeps``."""
    from scipy.optimize import brentq

    from topictk.evaluation.run import LoadedRun
    from topictk.state.counts import phi_hat

    run = LoadedRun(path)
    sample = run.samples()[-1]
    if "phi" in sample:
        phi = sample["phi"]
    else:                                   # collapsed Gibbs: phi-hat of the snapshot
        phi = phi_hat(sample["nkw"], sample["nk"], float(run.config.model.beta))
    phi = np.ascontiguousarray(phi, dtype=np.float64)
    X = np.ascontiguousarray(run.store.features("train"), dtype=np.float64)
    train = run.store.train()
    doc_ptr = np.ascontiguousarray(train.doc_ptr, dtype=np.int64)
    words = np.ascontiguousarray(train.words, dtype=np.int32)
    nu = sample["nu"]
    learnt = level(X, nu)
    out = {"sample_level": learnt}

    def gradient_at(log_level: float, n: int) -> float:
        shifted = nu.copy()
        shifted[:, -1] += log_level - np.log(learnt)
        return level_gradient(phi, X, shifted, doc_ptr, words, n, seed)

    for n in sweeps:
        lo, hi = np.log(learnt / 8), np.log(learnt * 4)
        root = brentq(gradient_at, lo, hi, args=(n,), xtol=0.01)
        out[f"sweeps_{n}"] = float(np.exp(root))
    return out


def train_held_level(corpus: str, K: int, seed: int, target: float) -> dict:
    """dmr-sgrld from the benchmark's config with the level held at ``target``."""
    import topictk.inference.dmr as dmr
    from topictk.config import load_config
    from topictk.evaluation.run import evaluate_run
    from topictk.training.run import train

    base = run_dir(corpus, K, "dmr-sgrld", seed).parent / "config.yaml"
    data = json.loads(base.read_text())
    out_dir = WORK / "runs" / f"{corpus}-K{K}-dmr-sgrld-held-s{seed}"
    out_dir.mkdir(parents=True, exist_ok=True)
    data["output"] = str(out_dir / "run")
    cfg_path = out_dir / "config.yaml"
    cfg_path.write_text(json.dumps(data, indent=1))

    step = dmr.DMRSGRLDDriver.step

    def held_step(self, state, t):
        info = step(self, state, t)
        state.nu[:, -1] += np.log(target / level(self.X, state.nu))
        state.alpha = np.exp(state.nu[:, -1])
        return info

    dmr.DMRSGRLDDriver.step = held_step
    try:
        train(load_config(cfg_path), force=True, quiet=True)
    finally:
        dmr.DMRSGRLDDriver.step = step
    return {"perplexity": evaluate_run(out_dir / "run")["perplexity"]}


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--corpus", default="poliblog")
    p.add_argument("--topics", type=int, default=20)
    p.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3])
    p.add_argument("--alpha", type=float, default=0.1, help="LDA's alpha (the benchmark's)")
    p.add_argument("--only-likelihood-level", action="store_true",
                   help="add the likelihood levels to an existing result file, nothing else")
    a = p.parse_args(argv)
    if a.only_likelihood_level:
        out = out_path(a.corpus, a.topics)
        result = json.loads(out.read_text())
        for seed in a.seeds:
            r = result["seeds"][str(seed)]
            for name in ("dmr-sgrld", "dmr-sem"):
                r[name]["likelihood_level"] = likelihood_level(
                    run_dir(a.corpus, a.topics, name, seed), [10, 200], seed)
            print(seed, json.dumps({n: r[n]["likelihood_level"] for n in ("dmr-sgrld", "dmr-sem")}),
                  flush=True)
        out.write_text(json.dumps(result, indent=1))
        print(f"wrote {out}")
        return
    K, base = a.topics, a.alpha * a.topics
    levels = [None, base, 2 * base]
    alphas = [a.alpha, 2 * a.alpha, 3.5 * a.alpha]
    result = {"corpus": a.corpus, "K": K, "lda_alpha": a.alpha, "seeds": {}}
    for seed in a.seeds:
        r = {name: rescore(run_dir(a.corpus, K, name, seed), "dmr", levels)
             for name in ("dmr-sgrld", "dmr-sem")}
        r.update({name: rescore(run_dir(a.corpus, K, name, seed), "lda", alphas)
                  for name in ("sgrld", "gibbs")})
        r["dmr-sgrld-held"] = train_held_level(a.corpus, K, seed, base)
        for name in ("dmr-sgrld", "dmr-sem"):
            r[name]["likelihood_level"] = likelihood_level(
                run_dir(a.corpus, K, name, seed), [10, 200], seed)
        result["seeds"][str(seed)] = r
        print(seed, json.dumps(r), flush=True)
    out = out_path(a.corpus, K)
    out.write_text(json.dumps(result, indent=1))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
