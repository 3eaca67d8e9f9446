"""NumPy twin of the hierarchical Dirichlet process's table draw (docs/algorithms.md §2.15):
the plain loop over documents, topics and customers, one uniform each from the same stream in
the same order as :func:`topictk.inference.gibbs.hdp.crt_tables`."""
from __future__ import annotations

import numpy as np


def crt_tables(ndk: np.ndarray, weight: np.ndarray, generator: np.random.Generator
               ) -> np.ndarray:
    """m_.k: customer i (0-based) of topic k in a document opens a table with probability
    a_k / (a_k + i)."""
    D, K = ndk.shape
    tables = np.zeros(K, dtype=np.int64)
    for d in range(D):
        for k in range(K):
            for i in range(int(ndk[d, k])):
                if generator.random() < weight[k] / (weight[k] + i):
                    tables[k] += 1
    return tables
