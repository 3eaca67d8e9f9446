"""Every algorithm's generated config (``topictk config ALGORITHM --corpus STORE``), trained as
it stands on the bundled example corpus, scores a held-out perplexity within 10 % of collapsed
Gibbs' generated config at the same K.

The example corpus is small (341 documents, 12,700 tokens), so the store holds out more than the
default (30 % of the documents, half of each one's tokens: about 1,800 scored tokens) and each
algorithm's score is the mean of three training seeds: a single seed's perplexity moves by
10 % here. Every run is deterministic for its seed, so the numbers below are fixed.

The families that are not within 10 % on this corpus are listed in KNOWN_GAPS with their measured
ratio and the reason; their cases are strict expected failures, so one that comes within the
bound fails the test until it is moved out of the list (docs/train.md, "Generated configs").
"""
from __future__ import annotations

import json
import statistics

import pytest

from tests.integration._cli import EXAMPLE, ok
from topictk.inference.registry import algorithm_names, get_driver

K = 10
SEEDS = (1, 2, 3)
BOUND = 1.10

# mean perplexity / Gibbs' mean, measured with this module's store, K and seeds; and why.
# vb, ovb, hsvg and pem (1.13 to 1.15 with alpha 0.1) and dlda-sgrld (1.30 with 100
# updates of 200 documents) came within the bound with their generated values of their own
# (topictk/config/template.py, GENERATED)
KNOWN_GAPS: dict[str, tuple[float, str]] = {
    "dtm-sgld": (1.32, "four slices of 60 documents give each topic's version about 300 "
                       "tokens, and the Gaussian prior of its natural parameters keeps more "
                       "mass on words it does not use than a Dirichlet(0.01): its topics score "
                       "514 with LDA's Dirichlet fold-in where Gibbs' score 416 "
                       "(docs/algorithms.md §14.5)"),
}


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    """The example corpus with a larger held-out part, and the same with DMR covariates and
    with time slices (a made-up year)."""
    from tests.golden.cases import write_meta_corpus
    folder = tmp_path_factory.mktemp("quality")
    split = ["--test-docs", "0.3", "--heldout-fraction", "0.5"]
    ok("prepare", EXAMPLE, "--out", folder / "plain", *split)
    ok("prepare", write_meta_corpus(folder / "meta.jsonl"), "--meta", "group:cat,score",
       "--out", folder / "meta", *split)
    ok("prepare", write_meta_corpus(folder / "time.jsonl"), "--time-column", "year",
       "--out", folder / "time", *split)
    return folder


def _mean_perplexity(folder, algorithm: str, store: str) -> float:
    config = folder / f"{algorithm}-{store}.yaml"
    ok("config", algorithm, "--corpus", folder / store, "--topics", K, "--out", config,
       "--force")
    scores = []
    for seed in SEEDS:
        run_dir = folder / "runs" / f"{algorithm}-{store}-{seed}"
        ok("train", "--config", config, "--out", run_dir, "--set", f"training.seed={seed}", "-q")
        scores.append(json.loads(ok("evaluate", run_dir, "--json", "-q").stdout)["perplexity"])
    return statistics.mean(scores)


@pytest.fixture(scope="module")
def gibbs(stores):
    """Gibbs' mean perplexity on each store."""
    return {store: _mean_perplexity(stores, "gibbs", store)
            for store in ("plain", "meta", "time")}


def _case(name: str):
    if name not in KNOWN_GAPS:
        return name
    ratio, reason = KNOWN_GAPS[name]
    return pytest.param(name, marks=pytest.mark.xfail(
        strict=True, reason=f"{ratio:.2f} x Gibbs on the example corpus: {reason}"))


@pytest.mark.parametrize("algorithm", [_case(n) for n in algorithm_names() if n != "gibbs"])
def test_a_generated_config_scores_near_gibbs(algorithm, stores, gibbs):
    store = {"dmr": "meta", "dtm": "time"}.get(get_driver(algorithm).traits.family, "plain")
    ratio = _mean_perplexity(stores, algorithm, store) / gibbs[store]
    assert ratio <= BOUND, f"{algorithm}: {ratio:.3f} x Gibbs"


def test_the_known_gaps_are_algorithms():
    assert set(KNOWN_GAPS) <= set(algorithm_names())
