"""Slow NumPy twins of the collapsed variational Bayes kernels
(topictk/inference/variational/_cvb.pyx), written from docs/algorithms.md §4 one pair (or one token)
at a time."""
from __future__ import annotations

import math

import numpy as np
from scipy.special import gammaln, polygamma


def init_mu(n_pairs: int, n_topics: int, rng: np.random.Generator) -> np.ndarray:
    """mu_dw ~ Dir(1): K draws -ln(1 - U) per pair (pair order, k inner), normalised. ln(1 - U)
    is the C library's log1p, as in the kernel: NumPy's vectorised log1p (SVML on AVX-512
    machines) may differ from it in the last bit."""
    mu = np.empty((n_pairs, n_topics))
    for e in range(n_pairs):
        for k in range(n_topics):
            mu[e, k] = -math.log1p(-rng.random())
        mu[e] /= mu[e].sum()
    return mu


def compute_fields(indptr, indices, counts, mu, n_words, gaussian):
    """Fields of §4.2 from scratch, word fields summed in pair order."""
    D, K = len(indptr) - 1, mu.shape[1]
    f = {"m_dk": np.zeros((D, K)), "m_kw": np.zeros((n_words, K)), "m_k": np.zeros(K)}
    if gaussian:
        f.update(v_dk=np.zeros((D, K)), v_kw=np.zeros((n_words, K)), v_k=np.zeros(K))
    for d in range(D):
        for e in range(indptr[d], indptr[d + 1]):
            c, g = float(counts[e]), mu[e]
            f["m_dk"][d] += c * g
            f["m_kw"][indices[e]] += c * g
            if gaussian:
                f["v_dk"][d] += c * g * (1.0 - g)
                f["v_kw"][indices[e]] += c * g * (1.0 - g)
    for w in range(n_words):
        f["m_k"] += f["m_kw"][w]
        if gaussian:
            f["v_k"] += f["v_kw"][w]
    return f


def prior_totals(overlay, beta):
    """beta-bar_k = V beta + sum_w o[w, k] of a dense (V, K) overlay, added word after word
    (the kernel's CSR order)."""
    V, K = overlay.shape
    totals = np.full(K, V * beta)
    for w in range(V):
        for k in range(K):
            if overlay[w, k] != 0.0:
                totals[k] += overlay[w, k]
    return totals


def _update_pair(d, w, c, mu_e, f, alpha, beta, n_words, gaussian, overlay=None):
    """The pair update of §4.4 on the fields ``f`` (dict of arrays, changed in place); with a
    dense (V, K) ``overlay`` o the word prior is beta + o[w, k] (§2.12)."""
    K = mu_e.size
    vbeta = n_words * beta if overlay is None else prior_totals(overlay, beta)
    weights = np.empty(K)
    for k in range(K):
        g = mu_e[k]
        a = alpha[k] + max(f["m_dk"][d, k] - g, 0.0)
        bk = beta if overlay is None or overlay[w, k] == 0.0 else beta + overlay[w, k]
        b = bk + max(f["m_kw"][w, k] - g, 0.0)
        z = (vbeta if overlay is None else vbeta[k]) + max(f["m_k"][k] - g, 0.0)
        u = a * b / z
        if gaussian:
            gv = g * (1.0 - g)
            u *= np.exp(-max(f["v_dk"][d, k] - gv, 0.0) / (2 * a * a)
                        - max(f["v_kw"][w, k] - gv, 0.0) / (2 * b * b)
                        + max(f["v_k"][k] - gv, 0.0) / (2 * z * z))
        weights[k] = u
    new = weights / weights.sum()
    dm = c * (new - mu_e)
    f["m_dk"][d] += dm
    f["m_kw"][w] += dm
    f["m_k"] += dm
    if gaussian:
        dv = c * (new * (1.0 - new) - mu_e * (1.0 - mu_e))
        f["v_dk"][d] += dv
        f["v_kw"][w] += dv
        f["v_k"] += dv
    mu_e[:] = new


def sweep(indptr, indices, counts, mu, fields, alpha, beta, chunk_bounds, gaussian,
          overlay=None):
    """One iteration (§4.4): sequential in place for one chunk; for C chunks each chunk works on
    private copies of the word and topic fields and the changes are added in chunk order."""
    n_words = fields["m_kw"].shape[0]
    word_keys = ["m_kw", "m_k"] + (["v_kw", "v_k"] if gaussian else [])
    C = len(chunk_bounds) - 1
    if C == 1:
        for d in range(chunk_bounds[0], chunk_bounds[1]):
            for e in range(indptr[d], indptr[d + 1]):
                _update_pair(d, indices[e], float(counts[e]), mu[e], fields, alpha, beta,
                             n_words, gaussian, overlay)
        return
    start = {key: fields[key].copy() for key in word_keys}
    locals_ = []
    for c in range(C):
        local = dict(fields)
        for key in word_keys:
            local[key] = start[key].copy()
        for d in range(chunk_bounds[c], chunk_bounds[c + 1]):
            for e in range(indptr[d], indptr[d + 1]):
                _update_pair(d, indices[e], float(counts[e]), mu[e], local, alpha, beta,
                             n_words, gaussian, overlay)
        locals_.append(local)
    for key in word_keys:
        acc = start[key].copy()
        for local in locals_:
            acc = acc + (local[key] - start[key])
        fields[key][...] = acc


def token_level_sweep(doc_ptr, words, mu_tok, fields, alpha, beta, gaussian):
    """The token-level mean-field update (one mu per token, §4.1-4.3), tokens in order; with
    all n_dw = 1 this is what the pair update must reproduce (§4 oracle e)."""
    n_words = fields["m_kw"].shape[0]
    for d in range(len(doc_ptr) - 1):
        for i in range(doc_ptr[d], doc_ptr[d + 1]):
            _update_pair(d, words[i], 1.0, mu_tok[i], fields, alpha, beta, n_words, gaussian)


def fold_in(indptr, indices, counts, phi, alpha, tol, max_passes):
    """CVB0 fold-in with phi frozen (§4.7), start mu proportional to alpha_k phi_wk."""
    D, K = len(indptr) - 1, phi.shape[1]
    theta = np.zeros((D, K))
    for d in range(D):
        ids = indices[indptr[d]:indptr[d + 1]]
        cts = counts[indptr[d]:indptr[d + 1]].astype(np.float64)
        mu = alpha[None, :] * phi[ids]
        mu /= mu.sum(axis=1, keepdims=True)
        md = (cts[:, None] * mu).sum(axis=0)
        if len(ids):
            for _ in range(max_passes):
                diff = 0.0
                for j, w in enumerate(ids):
                    u = (alpha + np.maximum(md - mu[j], 0.0)) * phi[w]
                    new = u / u.sum()
                    md += cts[j] * (new - mu[j])
                    diff += np.abs(new - mu[j]).sum()
                    mu[j] = new
                if diff / (len(ids) * K) < tol:
                    break
        theta[d] = (alpha + md) / (alpha.sum() + cts.sum())
    return theta


def approximate_bound(indptr, counts, mu, fields, alpha, beta):
    """B of §4.6 with G(a; m, v) = lnGamma(a + m) + psi'(a + m) v / 2."""
    def G(a, m, v):
        return gammaln(a + m) + 0.5 * polygamma(1, a + m) * v

    V, K = fields["m_kw"].shape
    D = len(indptr) - 1
    lengths = np.array([counts[indptr[d]:indptr[d + 1]].sum() for d in range(D)], float)
    a_sum = alpha.sum()
    doc = (D * gammaln(a_sum) - gammaln(a_sum + lengths).sum()
           + (G(alpha, fields["m_dk"], fields["v_dk"]) - gammaln(alpha)).sum())
    topic = (K * gammaln(V * beta) - G(V * beta, fields["m_k"], fields["v_k"]).sum()
             + (G(beta, fields["m_kw"], fields["v_kw"]) - gammaln(beta)).sum())
    with np.errstate(divide="ignore", invalid="ignore"):
        ent = np.where(mu > 0, mu * np.log(mu), 0.0)
    return float(doc + topic - (counts[:, None] * ent).sum())


def exact_expected_log(a: float, probs: np.ndarray) -> float:
    """E[ln(a + n)] for n a sum of independent Bernoulli(probs), by convolution (TNW 2007
    appendix)."""
    dist = np.array([1.0])
    for p in probs:
        new = np.zeros(dist.size + 1)
        new[:-1] += dist * (1 - p)
        new[1:] += dist * p
        dist = new
    return float(np.dot(dist, np.log(a + np.arange(dist.size))))
