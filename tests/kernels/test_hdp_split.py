"""The split-merge move's sequential allocation (docs/algorithms.md §2.15) equals its NumPy
twin (tests/reference/hdp.py) from the same uniforms, and the probability it gives a deal
when told the deal is the probability it gave it when drawing it."""
from __future__ import annotations

import numpy as np
import pytest

from tests.reference import hdp as ref
from topictk.inference.gibbs import _hdp

D, V = 9, 11


def _tokens(seed: int, n: int = 60):
    rng = np.random.default_rng(seed)
    doc_of = np.sort(rng.integers(0, D, n)).astype(np.int32)
    words = rng.integers(0, V, n).astype(np.int32)
    members = np.sort(rng.choice(n, size=40, replace=False)).astype(np.int64)
    anchors = members[[3, 17]]
    others = members[(members != anchors[0]) & (members != anchors[1])]
    return doc_of, words, others, int(anchors[0]), int(anchors[1]), rng


@pytest.mark.parametrize("a, beta", [(0.05, 0.01), (2.0, 0.5)])
def test_the_deal_equals_its_twin(seed, a, beta):
    """The same sides and ln q as the twin, drawing from the same uniforms."""
    doc_of, words, others, i, i2, rng = _tokens(seed)
    u = rng.random(others.size)
    side = np.empty(others.size, dtype=np.int8)
    log_q = _hdp.sequential_allocation(others, doc_of, words, i, i2, u,
                                       np.zeros(0, dtype=np.int8), False, a, beta, V * beta,
                                       D, V, side)
    want_side, want_q = ref.sequential_allocation(others, doc_of, words, i, i2, u, None, a,
                                                  beta, V * beta, D, V)
    np.testing.assert_array_equal(side, want_side)
    np.testing.assert_allclose(log_q, want_q, rtol=1e-12)
    assert 0 < side.sum() < side.size and log_q < 0


def test_a_forced_deal_has_the_probability_of_the_drawn_one(seed):
    """Told the sides it drew, the deal gives the same ln q (what a merge computes of the
    split it undoes), and told another split, that split's probability (the twin's)."""
    doc_of, words, others, i, i2, rng = _tokens(seed)
    side = np.empty(others.size, dtype=np.int8)
    args = (0.3, 0.1, V * 0.1, D, V)
    drawn = _hdp.sequential_allocation(others, doc_of, words, i, i2, rng.random(others.size),
                                       np.zeros(0, dtype=np.int8), False, *args, side)
    again = np.empty(others.size, dtype=np.int8)
    forced = _hdp.sequential_allocation(others, doc_of, words, i, i2, np.zeros(0), side, True,
                                        *args, again)
    assert forced == drawn
    np.testing.assert_array_equal(again, side)
    other = (rng.random(others.size) < 0.5).astype(np.int8)
    got = _hdp.sequential_allocation(others, doc_of, words, i, i2, np.zeros(0), other, True,
                                     *args, again)
    _, want = ref.sequential_allocation(others, doc_of, words, i, i2, None, other, *args)
    np.testing.assert_allclose(got, want, rtol=1e-12)
