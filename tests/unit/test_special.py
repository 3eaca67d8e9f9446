"""Special functions of the kernels (topictk/_cy/special.pxd) against scipy.special
(docs/algorithms.md §12.4, §12 oracle (a)) at 10^4 log-spaced points in [1e-8, 1e8]."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.special as sc

from topictk._cy import special

X = np.logspace(-8, 8, 10_000)


def test_psi_within_1e14_of_max_abs_psi_and_one():
    want = sc.digamma(X)
    err = np.abs(special.psi(X) - want) / np.maximum(np.abs(want), 1.0)
    assert err.max() <= 1e-14, f"max error {err.max():.3g} at x = {X[err.argmax()]:.6g}"


def test_psi1_within_1e13_relative():
    want = sc.polygamma(1, X)
    err = np.abs(special.psi1(X) - want) / np.abs(want)
    assert err.max() <= 1e-13, f"max error {err.max():.3g} at x = {X[err.argmax()]:.6g}"


def test_gammaln_within_1e13_relative():
    """lnΓ has zeros at x = 1 and x = 2. Next to them scipy's gammaln itself is off by up to
    4e-13 relative (measured against mpmath at 40 digits, see the next test), so the relative
    bound is applied where |lnΓ| >= 0.01 and an absolute bound of 1e-15 next to the zeros."""
    want = sc.gammaln(X)
    got = special.gammaln(X)
    far = np.abs(want) >= 0.01
    assert far.sum() > 9_900
    rel = np.abs(got[far] - want[far]) / np.abs(want[far])
    assert rel.max() <= 1e-13, f"max relative error {rel.max():.3g}"
    assert np.abs(got[~far] - want[~far]).max() <= 1e-15


@pytest.mark.parametrize("x,log_gamma", [
    # mpmath.loggamma(x) with mp.dps = 40, rounded to double
    (1.0018439502889436, -0.0010615629876597693),
    (1.9954001613524004, -0.0019379102360909746),
    (0.9944884875250298, 0.003206382563869816),
    (0.9981594436055558, 0.0010651867131254958),
])
def test_gammaln_next_to_its_zeros_is_accurate(x, log_gamma):
    assert special.gammaln(np.array([x]))[0] == pytest.approx(log_gamma, rel=1e-15)


def test_shapes_and_exact_values():
    grid = np.array([[0.5, 1.0], [2.0, 10.0]])
    assert special.psi(grid).shape == (2, 2)
    assert special.psi(np.array([1.0]))[0] == pytest.approx(-np.euler_gamma, rel=0, abs=1e-14)
    assert special.psi1(np.array([1.0]))[0] == pytest.approx(np.pi ** 2 / 6, rel=1e-13)
    np.testing.assert_array_equal(special.gammaln(np.array([1.0, 2.0])), [0.0, 0.0])
    # recurrences psi(x + 1) = psi(x) + 1/x, psi1(x + 1) = psi1(x) - 1/x^2 across the shift point
    x = np.array([9.5, 9.999, 10.0, 11.5, 11.999, 12.0])
    np.testing.assert_allclose(special.psi(x + 1), special.psi(x) + 1 / x, rtol=1e-14)
    np.testing.assert_allclose(special.psi1(x + 1), special.psi1(x) - 1 / x ** 2, rtol=1e-13)
