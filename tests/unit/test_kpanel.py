"""The measures of the Scores against K panel that need no run: rank-biased overlap against
values worked out by hand from Webber et al. (2010), inverted RBO, stability of aligned
topics, and which config key a sweep varies."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from topictk.evaluation.kpanel import inverted_rbo, pairwise_rbo, rbo, stability, swept_keys


def test_rbo_of_identical_lists_is_one_and_of_disjoint_lists_zero():
    assert rbo([4, 7, 1, 9], [4, 7, 1, 9]) == pytest.approx(1.0, abs=1e-12)
    assert rbo([4, 7, 1, 9], [2, 3, 5, 6]) == 0.0


def test_rbo_of_small_lists_matches_the_hand_computed_values():
    # [1, 2, 3] ~ [1, 3, 2]: X_1 = 1, X_2 = 1, X_3 = 3;
    # (1 - p)/p (1 p + 1/2 p^2 + 3/3 p^3) + 3/3 p^3 at p = 0.9 = 0.226 + 0.729
    assert rbo([1, 2, 3], [1, 3, 2]) == pytest.approx(0.955, abs=1e-12)
    # [1, 2] ~ [2, 1]: X_1 = 0, X_2 = 2: (1/9) (2/2) 0.81 + (2/2) 0.81 = 0.9
    assert rbo([1, 2], [2, 1]) == pytest.approx(0.9, abs=1e-12)
    # one shared item at ranks 1 and 3: X = 1, 1, 1 with p = 0.5:
    # (0.5/0.5)(0.5 + 0.25/2 + 0.125/3) + 0.125/3
    assert rbo([5, 6, 7], [5, 8, 9], p=0.5) == pytest.approx(0.5 + 0.125 + 0.125 / 3 * 2)


def test_pairwise_rbo_equals_rbo_of_every_pair():
    rng = np.random.default_rng(3)
    top = np.array([rng.choice(25, 8, replace=False) for _ in range(30)])
    expected = np.array([[rbo(list(a), list(b)) for b in top] for a in top])
    np.testing.assert_allclose(pairwise_rbo(top, block=7), expected, atol=1e-12)


def test_inverted_rbo_of_identical_topics_is_zero_and_of_disjoint_topics_one():
    assert inverted_rbo(np.array([[1, 2, 3], [1, 2, 3]])) == pytest.approx(0.0, abs=1e-12)
    assert inverted_rbo(np.arange(12).reshape(4, 3)) == pytest.approx(1.0)
    # three topics: pairs (a, b) = 0.955, (a, c) = 0, (b, c) = 0
    three = np.array([[1, 2, 3], [1, 3, 2], [7, 8, 9]])
    assert inverted_rbo(three) == pytest.approx(1 - 0.955 / 3)
    assert inverted_rbo(np.array([[1, 2, 3]])) is None


def test_stability_of_the_same_topics_in_another_order_is_one():
    rng = np.random.default_rng(0)
    phi = rng.dirichlet(np.full(40, 0.1), size=6)
    assert stability(phi, phi[[3, 0, 5, 1, 4, 2]]) == pytest.approx(1.0, abs=1e-9)
    other = rng.dirichlet(np.full(40, 0.1), size=6)
    assert 0.0 < stability(phi, other) < 1.0
    # topics with no word in common: Jensen-Shannon distance 1, stability 0
    a, b = np.zeros((2, 4)), np.zeros((2, 4))
    a[0, 0] = a[1, 1] = b[0, 2] = b[1, 3] = 1.0
    assert stability(a, b) == pytest.approx(0.0, abs=1e-9)


@dataclass
class _Config:
    data: dict

    def to_dict(self) -> dict:
        return self.data


@dataclass
class _Run:
    config: _Config


def _runs(*settings: dict) -> list[_Run]:
    out = []
    for s in settings:
        data = {"corpus": "/store", "output": f"/out/{len(out)}",
                "model": {"topics": s.get("topics", 10), "alpha": s.get("alpha", 0.1)},
                "inference": {"algorithm": s.get("algorithm", "gibbs"), "iterations": 100},
                "training": {"seed": s.get("seed", 1), "threads": s.get("threads", 1)},
                "evaluation": {"fold_in_sweeps": 50}}
        out.append(_Run(_Config(data)))
    return out


def test_the_swept_key_is_k_first_then_any_numeric_key_and_never_the_seed():
    runs = _runs(*({"topics": k, "seed": s, "threads": s} for k in (5, 10) for s in (1, 2)))
    assert swept_keys(runs) == ("model.topics", [])
    assert swept_keys(_runs({"alpha": 0.1}, {"alpha": 0.5, "seed": 2})) == ("model.alpha", [])
    # K is the x axis even where another numeric key differs too (it is then a series)
    grid = _runs({"topics": 5, "alpha": 0.1}, {"topics": 10, "alpha": 0.5})
    assert swept_keys(grid) == ("model.topics", ["model.alpha"])
    both = _runs({"topics": 5, "algorithm": "gibbs"}, {"topics": 10, "algorithm": "cvb0"})
    assert swept_keys(both) == ("model.topics", ["inference.algorithm"])
    assert swept_keys(_runs({"seed": 1}, {"seed": 2}))[0] is None
    assert swept_keys(_runs({"algorithm": "gibbs"}, {"algorithm": "cvb0"})) == (
        None, ["inference.algorithm"])
