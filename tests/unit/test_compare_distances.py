"""compare's Jensen-Shannon distances against SciPy's definition, row by row."""
import numpy as np
import pytest
from scipy.spatial.distance import jensenshannon

from topictk.evaluation.compare import js_distances


def test_js_distances_equal_scipys_jensenshannon():
    rng = np.random.default_rng(3)
    a = rng.dirichlet(np.full(300, 0.1), 7)
    b = rng.dirichlet(np.full(300, 0.1), 5) * 3.0          # unnormalised rows are normalised
    b[0, :150] = 0.0                                         # zeros in one of the two only
    want = np.array([[jensenshannon(p, q, base=2.0) for q in b] for p in a])
    assert js_distances(a, b) == pytest.approx(want, abs=1e-12)
    assert np.diag(js_distances(a, a)) == pytest.approx(0.0, abs=1e-7)
