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

A study, not a benchmark: it rescores samples and trains with a modified driver step through
topictk's internals, so it may need adapting when they change. Results go to
``benchmarks/work/dmr/prior_level-<corpus>-K<K>.json`` and, for every corpus and K measured so
far, to the report ``dmr_prior_level.md`` (``--record``: benchmarks/results/).

Usage (the venv of bench_dmr.py)::

    python benchmarks/studies/dmr_prior_level.py --corpus poliblog --topics 20 --record
    python benchmarks/studies/dmr_prior_level.py --report-only      # the report from the JSON
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # benchmarks/: the harness

import harness as h  # noqa: E402

WORK = h.WORK / "dmr"
NAME = "dmr_prior_level"


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
    from topictk.evaluation.run import LoadedRun
    from topictk.inference.base import EvaluationSet
    from topictk.inference.perplexity import heldout_perplexity

    run = LoadedRun(path)
    test = EvaluationSet.from_store(run.store)
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
    import topictk.inference.dmr.driver as dmr
    from topictk.evaluation.run import evaluate_run
    from topictk.inference.registry import load_config
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


def _prior_level_rows(res: dict) -> list[str]:
    seeds = sorted(res["seeds"], key=int)
    K, alpha = res["K"], res["lda_alpha"]
    base = f"{alpha * K:g}"
    rows = [("dmr-sgrld", "learnt_level", "dmr-sgrld: its learnt level (mean sum_k alpha_dk)"),
            ("dmr-sgrld", "learnt", "dmr-sgrld as trained (the table's row)"),
            ("dmr-sgrld", base, f"dmr-sgrld rescored at level {base} (= K alpha)"),
            ("dmr-sgrld", f"{2 * alpha * K:g}", f"dmr-sgrld rescored at level {2 * alpha * K:g}"),
            ("dmr-sgrld-held", "perplexity", f"dmr-sgrld trained with the level held at {base}"),
            ("dmr-sgrld", ("likelihood_level", "sample_level"),
             "dmr-sgrld: level of its last sample"),
            ("dmr-sgrld", ("likelihood_level", "sweeps_10"),
             "dmr-sgrld: likelihood level for its last sample's topics, local chains of 10 "
             "sweeps (5 kept, as in training)"),
            ("dmr-sgrld", ("likelihood_level", "sweeps_200"),
             "dmr-sgrld: likelihood level for its last sample's topics, local chains of 200 "
             "sweeps (100 kept)"),
            ("sgrld", f"{alpha:g}", f"sgrld LDA, alpha {alpha:g} (the table's row)"),
            ("sgrld", f"{2 * alpha:g}", f"sgrld LDA rescored with alpha {2 * alpha:g}"),
            ("sgrld", f"{3.5 * alpha:g}", f"sgrld LDA rescored with alpha {3.5 * alpha:g}"),
            ("dmr-sem", "learnt_level", "dmr-sem: its learnt level (mean over samples)"),
            ("dmr-sem", ("likelihood_level", "sample_level"), "dmr-sem: level of its last sample"),
            ("dmr-sem", ("likelihood_level", "sweeps_200"),
             "dmr-sem: likelihood level for its last sample's topics, local chains of 200 "
             "sweeps (100 kept)"),
            ("dmr-sem", "learnt", "dmr-sem as trained (the table's row)"),
            ("dmr-sem", base, f"dmr-sem rescored at level {base}"),
            ("dmr-sem", f"{2 * alpha * K:g}", f"dmr-sem rescored at level {2 * alpha * K:g}"),
            ("gibbs", f"{alpha:g}", f"gibbs LDA, alpha {alpha:g} (the table's row)"),
            ("gibbs", f"{2 * alpha:g}", f"gibbs LDA rescored with alpha {2 * alpha:g}"),
            ("gibbs", f"{3.5 * alpha:g}", f"gibbs LDA rescored with alpha {3.5 * alpha:g}")]
    lines = [
        "", f"## The level of the learnt DMR prior ({res['corpus']}, K = {K})", "",
        "`python benchmarks/studies/dmr_prior_level.py --corpus "
        f"{res['corpus']} --topics {K}` on the runs of the first table: the level of a DMR prior "
        "is the mean over training documents of sum_k alpha_dk (LDA's: K alpha). Rescored = the "
        "same saved samples scored again with every intercept shifted to that level (metadata "
        "contrasts unchanged), or, for LDA, with another alpha. Held = `dmr-sgrld` trained again "
        "with the intercepts shifted after every update so that the level stays at K alpha, the "
        "metadata weights learnt as usual (a diagnostic, not an option of topictk). Likelihood "
        "level = with the topics of a run's last sample fixed, the level at which the gradient "
        "of the training documents' likelihood along a common shift of the intercepts vanishes "
        "(Brent's method; the expectation over z by one local Gibbs chain per document, "
        "gradient averaged over its kept sweeps).", "",
        "| " + " | ".join(["run", *(f"seed {s}" for s in seeds), "mean"]) + " |",
        "| --- |" + " ---: |" * (len(seeds) + 1)]
    for name, key, label in rows:
        vals = [_lookup(res["seeds"][s].get(name, {}), key) for s in seeds]
        if any(v is None for v in vals):
            continue
        fmt = ".2f" if "level" in str(key) else ".1f"
        lines.append("| " + " | ".join([label, *(format(v, fmt) for v in vals),
                                        format(h.mean(vals), fmt)]) + " |")
    return lines


def _lookup(tree: dict, key: str | tuple[str, ...]):
    """``tree[key]``, or ``tree[a][b]`` for ``key = (a, b)``; None where a key is missing."""
    for part in (key,) if isinstance(key, str) else key:
        if not isinstance(tree, dict) or part not in tree:
            return None
        tree = tree[part]
    return tree


def report() -> str:
    """Every corpus and K measured so far, one table each."""
    lines = ["# DMR: the level of the learnt prior", "",
             f"Reported {h.now_utc():%Y-%m-%d %H:%M} UTC by `{h.command_line()}` from "
             "`benchmarks/work/dmr/prior_level-*.json`.", "", *h.machine_info()]
    for corpus in ("poliblog", "nips"):
        for K in (20, 50):
            path = out_path(corpus, K)
            if path.exists():
                lines += _prior_level_rows(json.loads(path.read_text()))
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--corpus", default="poliblog")
    p.add_argument("--topics", type=int, default=20)
    p.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3])
    p.add_argument("--alpha", type=float, default=0.1, help="LDA's alpha (the benchmark's)")
    p.add_argument("--record", action="store_true",
                   help="write benchmarks/results/dmr_prior_level.md")
    p.add_argument("--report-only", action="store_true", help="only write the report")
    p.add_argument("--only-likelihood-level", action="store_true",
                   help="add the likelihood levels to an existing result file, nothing else")
    a = p.parse_args(argv)
    if a.report_only:
        h.write_results(h.results_path(NAME, a.record), report())
        return
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
    h.write_results(h.results_path(NAME, a.record), report())


if __name__ == "__main__":
    main()
