"""NumPy twin of topictk/inference/_minibatch.pyx::local_gibbs and of the document sampler
of topictk/_cy/docsampler.pxd (docs/algorithms.md §6, §7.4, §11.2)."""
from __future__ import annotations

import numpy as np
from scipy.special import digamma


def _draw(u, cum):
    for k, value in enumerate(cum):
        if u < value:
            return k
    return None


def sample_document(toks, weights, alpha, n_sweeps, n_burn, rng, sparse, word_topic=None,
                    doc_grad=None):
    """One document's chain; returns (kept-sweep sum of n_dk, final n_dk). ``sparse`` selects
    the bucket path (one alpha for every document) exactly as the kernel walks it.
    ``doc_grad`` (K,), when given, receives the kept-sweep sum of DMR's g_dk (§9.1)."""
    K = weights.shape[1]
    a = [float(x) for x in alpha]
    nd = [0] * K
    z = []
    for _ in toks:
        k = min(int(rng.random() * K), K - 1)
        z.append(k)
        nd[k] += 1
    dt = [k for k in range(K) if nd[k] > 0]
    doc_topic = np.zeros(K, dtype=np.int64)
    for sweep in range(n_sweeps):
        for i, w in enumerate(toks):
            k = z[i]
            nd[k] -= 1
            if not sparse:
                c, cum = 0.0, []
                for kk in range(K):
                    c = c + (float(nd[kk]) + a[kk]) * weights[w, kk]
                    cum.append(c)
                k = _draw(rng.random() * c, cum)
                k = K - 1 if k is None else k
            else:
                if nd[k] == 0:  # swap-remove
                    j = dt.index(k)
                    last = dt.pop()
                    if j < len(dt):
                        dt[j] = last
                r, rcum = 0.0, []
                for kk in dt:
                    r = r + float(nd[kk]) * weights[w, kk]
                    rcum.append(r)
                acum, c = [], 0.0
                for kk in range(K):
                    c = c + a[kk] * weights[w, kk]
                    acum.append(c)
                u = rng.random() * (r + acum[-1])
                if u < r:
                    j = _draw(u, rcum)
                    k = dt[-1] if j is None else dt[j]
                else:
                    j = _draw(u - r, acum)
                    k = K - 1 if j is None else j
                if nd[k] == 0:
                    dt.append(k)
            z[i] = k
            nd[k] += 1
        if sweep >= n_burn:
            if word_topic is not None:
                for i, w in enumerate(toks):
                    word_topic[w, z[i]] += 1
            doc_topic += np.array(nd)
            if doc_grad is not None:
                av = np.array(a)
                doc_grad += av * (digamma(av.sum()) - digamma(av.sum() + len(toks))
                                  + digamma(av + np.array(nd)) - digamma(av))
    return doc_topic, np.array(nd)


def local_gibbs(doc_ptr, words, weights, alpha, n_sweeps, n_burn, chunk_bounds, rngs,
                doc_grad=None):
    """Kept-sweep sums of n_kw (V_B, K) and n_dk (B, K) with the kernel's draw order;
    ``doc_grad`` (B, K), when given, receives the kept-sweep sums of g_dk (§9.1, §9.3)."""
    VB, K = weights.shape
    B = len(doc_ptr) - 1
    alpha = np.atleast_2d(alpha)
    sparse = alpha.shape[0] == 1
    word_topic = np.zeros((VB, K), dtype=np.int64)
    doc_topic = np.zeros((B, K), dtype=np.int64)
    for c in range(len(chunk_bounds) - 1):
        for d in range(chunk_bounds[c], chunk_bounds[c + 1]):
            a = alpha[d] if alpha.shape[0] > 1 else alpha[0]
            toks = words[doc_ptr[d]:doc_ptr[d + 1]]
            doc_topic[d] = sample_document(toks, weights, a, n_sweeps, n_burn, rngs[c], sparse,
                                           word_topic,
                                           None if doc_grad is None else doc_grad[d])[0]
    return word_topic, doc_topic


def sgmcmc_step(a: float, b: float, c: float, t: int) -> float:
    """SG-MCMC step size of docs/algorithms.md §12.1, eps_t = a (1 + t / b)^(-c), written out
    here so that a twin test does not take it from the code under test."""
    return a * (1.0 + t / b) ** (-c)


def sgrld_step(phi_hat, batch, n_docs, alpha, beta, eps, sweeps, burn, chunk_bounds,
               local_rngs, main: np.random.Generator):
    """One SGRLD update (§7.3) of ``phi_hat`` (V, K) for a gathered ``batch`` -> new phi_hat.

    Local chains with phi = phi_hat normalised per topic (twin :func:`local_gibbs`), then, with
    the mini-batch rescaling R_B = N / |B|,
    phi_hat_wk <- max(1e-300, | phi_hat_wk + eps (beta - phi_hat_wk
                                 + R_B (nbar_wk - phi_wk nbar_k)) + sqrt(2 eps phi_hat_wk) xi_wk |)
    and the normals xi drawn from ``main`` in storage order.
    """
    V, K = phi_hat.shape
    phi = phi_hat / phi_hat.sum(axis=0, keepdims=True)
    word_topic, _ = local_gibbs(batch.doc_ptr, batch.words, phi[batch.vocab],
                                np.atleast_2d(alpha), sweeps, burn, chunk_bounds, local_rngs)
    nbar = np.zeros((V, K))
    nbar[batch.vocab] = word_topic / (sweeps - burn)
    n_batch = len(batch.doc_ptr) - 1
    R = n_docs / n_batch
    xi = main.standard_normal(size=(V, K))
    drift = beta - phi_hat + R * (nbar - phi * nbar.sum(axis=0))
    new = np.abs(phi_hat + eps * drift + np.sqrt(2.0 * eps * phi_hat) * xi)
    return np.maximum(new, 1e-300)
