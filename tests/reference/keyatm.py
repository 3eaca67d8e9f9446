"""NumPy twin of ``topictk/inference/gibbs/_keyatm.pyx`` (docs/algorithms.md §2.12): the
same full conditional over (z, s), the same uniform per token and the same order of entries,
so that z, s and every count equal the kernel's after each sweep."""
from __future__ import annotations

import numpy as np


def sweep(doc_ptr, words, doc_begin, doc_end, z, s, ndk, nkw, nk, nkey, nkey_k, alpha, beta,
          beta_key, gamma1, gamma2, seed_ptr, seed_topic, seed_len, stream) -> int:
    """One sweep of documents [doc_begin, doc_end), arrays changed in place; returns the
    rounding fallbacks."""
    gen = np.random.Generator(stream)
    K, S, V = nk.size, nkey_k.size, nkw.shape[0]
    fallbacks = 0
    for d in range(doc_begin, doc_end):
        a = alpha[d] if alpha.shape[0] > 1 else alpha[0]
        for i in range(doc_ptr[d], doc_ptr[d + 1]):
            w, old = int(words[i]), int(z[i])
            ndk[d, old] -= 1
            if s[i]:
                nkey[w, old] -= 1
                nkey_k[old] -= 1
            else:
                nkw[w, old] -= 1
                nk[old] -= 1
            weights = []
            for k in range(K):
                r = (ndk[d, k] + a[k]) * (nkw[w, k] + beta) / (nk[k] + V * beta)
                if k < S:
                    r = r * (nk[k] + gamma2) / (nk[k] + nkey_k[k] + gamma1 + gamma2)
                weights.append(r)
            topics = [int(t) for t in seed_topic[seed_ptr[w]:seed_ptr[w + 1]]]
            for k in topics:
                weights.append((ndk[d, k] + a[k]) * (nkey[w, k] + beta_key)
                               / (nkey_k[k] + seed_len[k] * beta_key)
                               * (nkey_k[k] + gamma1) / (nk[k] + nkey_k[k] + gamma1 + gamma2))
            cum, total = [], 0.0
            for r in weights:
                total += r
                cum.append(total)
            u = gen.random() * total
            pick = next((j for j, c in enumerate(cum) if u < c), None)
            if pick is None:
                fallbacks += 1
                pick = len(cum) - 1
            if pick < K:
                k, s[i] = pick, 0
                nkw[w, k] += 1
                nk[k] += 1
            else:
                k, s[i] = topics[pick - K], 1
                nkey[w, k] += 1
                nkey_k[k] += 1
            z[i] = k
            ndk[d, k] += 1
    return fallbacks
