"""Step-size schedules (docs/algorithms.md §12.1) against values worked out by hand, and the SG-MCMC
step that a run logs against the same formula.

eps_t = a (1 + t / b)^(-c) for the SG-MCMC samplers; rho_t = min(1, (tau0 + t)^(-kappa)) for
stochastic variational inference. The cases are chosen so that the powers are exact: a halved
exponent or a constant step gives another number, not a rounding difference.
"""
from __future__ import annotations

import json

import pytest

from topictk.inference.minibatch import step_size
from topictk.inference.schedules import sgmcmc_step

# (a, b, c, t, eps_t) with eps_t worked out by hand
SGMCMC_CASES = [
    (0.01, 1000.0, 0.55, 0, 0.01),               # t = 0: the scale a itself
    (0.5, 1.0, 1.0, 1, 0.25),                    # 0.5 * 2^-1
    (0.5, 1.0, 1.0, 3, 0.125),                   # 0.5 * 4^-1
    (1.0, 1.0, 0.5, 3, 0.5),                     # 4^-1/2
    (2.0, 1.0, 0.75, 15, 0.25),                  # 2 * 16^-3/4 = 2 / 8
    (0.1, 100.0, 0.75, 1500, 0.0125),            # 0.1 * 16^-3/4
    (0.01, 1000.0, 0.55, 3000, 0.004665164957684037),  # 0.01 * 4^-0.55 = 0.01 e^(-1.1 ln 2)
]


@pytest.mark.parametrize("a, b, c, t, want", SGMCMC_CASES)
def test_sgmcmc_step_matches_hand_computed_values(a, b, c, t, want):
    assert sgmcmc_step(a, b, c, t) == pytest.approx(want, rel=1e-14, abs=0)


def test_sgmcmc_step_decays_with_the_exponent_c():
    """Doubling 1 + t / b (t = b -> t = 3b) multiplies eps_t by 2^-c: the decay rate is c, not
    c / 2 or 0."""
    a, b = 0.01, 1000.0
    for c in (0.55, 0.75, 1.0):
        ratio = sgmcmc_step(a, b, c, 3000) / sgmcmc_step(a, b, c, 1000)
        assert ratio == pytest.approx(2.0 ** -c, rel=1e-13)


# (tau0, kappa, t, rho_t)
SVI_CASES = [
    (1.0, 0.5, 3, 0.5),        # 4^-1/2
    (9.0, 1.0, 1, 0.1),        # 10^-1
    (7.0, 2.0 / 3.0, 1, 0.25),  # 8^-2/3
    (0.0, 0.7, 0, 1.0),        # tau0 + t = 0: capped at 1
    (0.5, 0.7, 0, 1.0),        # 0.5^-0.7 > 1: capped at 1
    (63.0, 0.5, 1, 0.125),     # 64^-1/2
]


@pytest.mark.parametrize("tau0, kappa, t, want", SVI_CASES)
def test_svi_rates_match_hand_computed_values(tau0, kappa, t, want):
    assert step_size(t, tau0, kappa) == pytest.approx(want, rel=1e-14, abs=0)


def test_sgrld_run_logs_the_scheduled_step(tmp_path):
    """The ``epsilon`` of every metrics line is a (1 + t / b)^(-c) of that update (t = step - 1),
    computed here from the formula, not by the schedule function."""
    from tests.fixtures import planted_corpus, write_token_store
    from topictk.inference.registry import load_config
    from topictk.training.run import train

    corpus = planted_corpus(3, n_docs=60, mean_length=20)
    store = write_token_store(tmp_path / "store", corpus.docs[10:], 50,
                              test_observed=[d[: d.size // 2] for d in corpus.docs[:10]],
                              test_heldout=[d[d.size // 2:] for d in corpus.docs[:10]])
    a, b, c = 0.05, 2.0, 0.75
    config = load_config(None, raw={
        "corpus": str(store), "output": str(tmp_path / "run"),
        "model": {"topics": 3, "alpha": 0.2, "beta": 0.05},
        "inference": {"algorithm": "sgrld", "iterations": 6, "batch_size": 10, "sweeps": 2,
                      "step": {"a": a, "b": b, "c": c}},
        "training": {"seed": 1, "eval_every": 1, "checkpoint_every": 0}})
    train(config, quiet=True)
    lines = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    logged = {line["step"]: line["epsilon"] for line in lines if "epsilon" in line}
    assert sorted(logged) == [1, 2, 3, 4, 5, 6]
    for step, eps in logged.items():
        assert eps == pytest.approx(a * (1.0 + (step - 1) / b) ** -c, rel=1e-14)
