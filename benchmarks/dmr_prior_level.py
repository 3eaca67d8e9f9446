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
  to answer that question.

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
    a = p.parse_args(argv)
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
        result["seeds"][str(seed)] = r
        print(seed, json.dumps(r), flush=True)
    out = out_path(a.corpus, K)
    out.write_text(json.dumps(result, indent=1))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
