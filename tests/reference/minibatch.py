"""NumPy twin of topictk/inference/_minibatch.pyx::local_gibbs (ALGORITHMS.md §6, §7.4)."""
from __future__ import annotations

import numpy as np


def local_gibbs(doc_ptr, words, weights, alpha, n_sweeps, n_burn, chunk_bounds, rngs):
    """Kept-sweep sums of n_kw (V_B, K) and n_dk (B, K) with the kernel's draw order."""
    VB, K = weights.shape
    B = len(doc_ptr) - 1
    alpha = np.atleast_2d(alpha)
    word_topic = np.zeros((VB, K), dtype=np.int64)
    doc_topic = np.zeros((B, K), dtype=np.int64)
    for c in range(len(chunk_bounds) - 1):
        rng = rngs[c]
        for d in range(chunk_bounds[c], chunk_bounds[c + 1]):
            a = alpha[d] if alpha.shape[0] > 1 else alpha[0]
            toks = words[doc_ptr[d]:doc_ptr[d + 1]]
            nd = np.zeros(K, dtype=np.int64)
            z = []
            for _ in toks:
                k = min(int(rng.random() * K), K - 1)
                z.append(k)
                nd[k] += 1
            for sweep in range(n_sweeps):
                for i, w in enumerate(toks):
                    nd[z[i]] -= 1
                    c_, cum = 0.0, []
                    for kk in range(K):
                        c_ = c_ + (float(nd[kk]) + a[kk]) * weights[w, kk]
                        cum.append(c_)
                    u = rng.random() * c_
                    k = K - 1
                    for kk, value in enumerate(cum):
                        if u < value:
                            k = kk
                            break
                    z[i] = k
                    nd[k] += 1
                if sweep >= n_burn:
                    for i, w in enumerate(toks):
                        word_topic[w, z[i]] += 1
                    doc_topic[d] += nd
    return word_topic, doc_topic
