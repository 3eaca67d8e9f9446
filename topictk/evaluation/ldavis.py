"""What a topic map shows (docs/algorithms.md §11.8): topic prevalence, corpus term frequencies,
Jensen–Shannon distances between topics laid out by classical multidimensional scaling, the
relevance of a term to a topic (Sievert & Shirley 2014) and the saliency of a term (Chuang,
Manning & Heer 2012), and the LDAvis data of a model.

``topictk report`` draws its maps from these, and :func:`ldavis_data` returns the JSON object
that LDAvis and pyLDAvis read (``mdsDat``, ``tinfo``, ``token.table``, ``R``, ``lambda.step``,
``plot.opts``, ``topic.order``). LDAvis counts topics from 1 and treats 0 as "no topic": its
topic ``n`` is the model's topic ``n - 1`` (as ``topictk topics`` numbers them), and
``topic.order`` is the identity, so no topic is renumbered or reordered by size.
"""
from __future__ import annotations

import numpy as np
from scipy.special import entr

DEFAULT_TERMS = 30          # R: terms per bar chart, as in LDAvis
DEFAULT_LAMBDA_STEP = 0.01  # the grid of lambda over which a topic's terms are collected


def term_frequencies(indices: np.ndarray, counts: np.ndarray, n_words: int) -> np.ndarray:
    """Occurrences of every word in a corpus given as CSR (documents x words): its column
    indices and counts.

    Returns
    -------
    numpy.ndarray
        (V,) float64 counts.
    """
    return np.bincount(np.asarray(indices), weights=np.asarray(counts, dtype=np.float64),
                       minlength=n_words).astype(np.float64)


def topic_shares(topic_word: np.ndarray, term_frequency: np.ndarray, *,
                 tol: float = 1e-7, max_iter: int = 1000) -> np.ndarray:
    """Each topic's share of the corpus's tokens: the mixture weights pi that maximise
    sum_w n_w ln(sum_k pi_k phi_kw) with the topics fixed, by EM (docs/algorithms.md §11.8).

    Parameters
    ----------
    topic_word : numpy.ndarray
        phi, (K, V), rows on the simplex.
    term_frequency : numpy.ndarray
        n_w, (V,) occurrences of each word in the training corpus.
    tol, max_iter
        EM stops when no share changes by more than ``tol``, or after ``max_iter`` updates.

    Returns
    -------
    numpy.ndarray
        pi, (K,), summing to 1.
    """
    phi = np.asarray(topic_word, dtype=np.float64)
    freq = np.asarray(term_frequency, dtype=np.float64)
    seen = freq > 0
    phi, freq = phi[:, seen], freq[seen]
    K = phi.shape[0]
    pi = np.full(K, 1.0 / K)
    total = freq.sum()
    if total == 0:
        return pi
    for _ in range(max_iter):
        mixture = pi @ phi                                   # (V,)
        ratio = np.divide(freq, mixture, out=np.zeros_like(freq), where=mixture > 0)
        new = pi * (phi @ ratio) / total
        new /= new.sum()
        done = np.max(np.abs(new - pi)) <= tol
        pi = new
        if done:
            break
    return pi


def topic_term_counts(topic_word: np.ndarray, shares: np.ndarray,
                      term_frequency: np.ndarray) -> np.ndarray:
    """Expected occurrences of word w assigned to topic k: n_w p(k | w), with
    p(k | w) = pi_k phi_kw / sum_j pi_j phi_jw; column w sums to n_w.

    Returns
    -------
    numpy.ndarray
        (K, V) float64.
    """
    weighted = np.asarray(shares, dtype=np.float64)[:, None] * topic_word   # (K, V)
    mixture = weighted.sum(axis=0)
    scale = np.divide(term_frequency, mixture, out=np.zeros_like(mixture), where=mixture > 0)
    return weighted * scale[None, :]


def js_distances(topic_word: np.ndarray) -> np.ndarray:
    """Jensen–Shannon distances between the topics: sqrt of the JS divergence in bits (base-2
    logarithm, as ``compare --align``), a metric in [0, 1].

    Returns
    -------
    numpy.ndarray
        (K, K) symmetric, zero diagonal; computed in single precision.
    """
    phi = np.asarray(topic_word, dtype=np.float32)     # single precision: K^2 V logarithms
    K = phi.shape[0]
    own = entr(phi).sum(axis=1, dtype=np.float64)                # H(phi_k)
    dist = np.zeros((K, K))
    for i in range(K - 1):
        mixed = phi[i] + phi[i + 1:]
        mixed *= 0.5
        logs = np.log(mixed, where=mixed > 0, out=np.zeros_like(mixed))
        logs *= mixed
        entropy = -logs.sum(axis=1, dtype=np.float64)            # H(M)
        divergence = np.maximum(entropy - 0.5 * (own[i] + own[i + 1:]), 0.0)
        dist[i, i + 1:] = dist[i + 1:, i] = np.sqrt(divergence / np.log(2.0))
    return dist


def classical_mds(distances: np.ndarray, dims: int = 2) -> np.ndarray:
    """Classical (Torgerson) multidimensional scaling: the points whose inner products are
    -1/2 J D^2 J (J the centring matrix), from its largest eigenvalues; each axis's sign is
    fixed so that the first point away from zero on it is positive. Axes without a positive
    eigenvalue are zero.

    Returns
    -------
    numpy.ndarray
        (K, dims) coordinates, centred.
    """
    d2 = np.asarray(distances, dtype=np.float64) ** 2
    K = d2.shape[0]
    # double centring elementwise: J D^2 J without two K^3 products
    inner = -0.5 * (d2 - d2.mean(axis=0)[None, :] - d2.mean(axis=1)[:, None] + d2.mean())
    values, vectors = _largest_eigenpairs(inner, dims)
    coords = np.zeros((K, dims))
    for axis in range(min(dims, values.size)):
        if values[axis] <= 1e-12:
            continue
        column = vectors[:, axis] * np.sqrt(values[axis])
        if column[np.argmax(np.abs(column) > 1e-9 * np.abs(column).max())] < 0:
            column = -column
        coords[:, axis] = column
    return coords


def _largest_eigenpairs(matrix: np.ndarray, count: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``count`` largest eigenvalues of a symmetric matrix (descending) and their
    eigenvectors: Lanczos (ARPACK, from a fixed start vector) when the matrix is larger than
    ``count + 1``, which needs only matrix-vector products, else the full decomposition."""
    K = matrix.shape[0]
    if K > count + 1:
        from scipy.sparse.linalg import eigsh

        values, vectors = eigsh(matrix, k=count, which="LA", v0=np.ones(K))
    else:
        values, vectors = np.linalg.eigh(matrix)
    order = np.argsort(-values, kind="stable")[:count]
    return values[order], vectors[:, order]


def log_terms(topic_word: np.ndarray, term_proportion: np.ndarray) -> tuple[np.ndarray,
                                                                             np.ndarray]:
    """ln phi_kw and the log lift ln(phi_kw / p_w), (K, V) each (-inf where phi_kw = 0)."""
    with np.errstate(divide="ignore"):
        logprob = np.log(topic_word)
        loglift = logprob - np.log(term_proportion)[None, :]
    return logprob, loglift


def relevant_terms(logprob: np.ndarray, loglift: np.ndarray, n: int,
                   lambda_step: float = DEFAULT_LAMBDA_STEP) -> list[np.ndarray]:
    """Per topic, every word among the ``n`` most relevant for some lambda of the grid
    0, step, ..., 1, where relevance = lambda ln phi_kw + (1 - lambda) ln(phi_kw / p_w)
    (Sievert & Shirley 2014; docs/algorithms.md §11.8); of words tied at the n-th place, the
    smaller word ids.

    Returns
    -------
    list of numpy.ndarray
        K sorted arrays of word ids.
    """
    lambdas = np.linspace(0.0, 1.0, round(1.0 / lambda_step) + 1)
    # interval ends: every 10th grid point and the last
    ends = np.unique(np.append(np.arange(0, lambdas.size, 10), lambdas.size - 1))
    n = min(n, logprob.shape[1])
    found = []
    for a, b in zip(logprob, loglift):
        finite = np.flatnonzero(np.isfinite(a))
        # relevance is linear in lambda: between two ends a word's relevance stays below the
        # larger of its values there, and the n-th best of any n words bounds the n-th best
        # from below; a word below that bound on every interval is never among the n best
        base = np.union1d(_some_best(a, finite, n), _some_best(b, finite, n))
        grid = np.outer(lambdas, a[base]) + np.outer(1 - lambdas, b[base])
        nth = np.sort(grid, axis=1)[:, -min(n, base.size)]
        floors = (np.minimum(np.minimum.reduceat(nth, ends[:-1]), nth[ends[1:]])
                  if ends.size > 1 else nth)
        at_ends = np.outer(lambdas[ends], a[finite]) + np.outer(1 - lambdas[ends], b[finite])
        upper = np.maximum(at_ends[:-1], at_ends[1:]) if ends.size > 1 else at_ends
        keep = finite[(upper >= floors[:, None]).any(axis=0)]
        if keep.size <= n:
            found.append(keep.astype(np.int64))
            continue
        scores = np.outer(lambdas, a[keep]) + np.outer(1 - lambdas, b[keep])
        # exact ties at the n-th place go to the smaller word id (keep is ascending), on
        # every machine: a partition would pick any of the tied words
        best = np.argsort(-scores, axis=1, kind="stable")[:, :n]
        found.append(np.unique(keep[best]).astype(np.int64))
    return found


def _some_best(values: np.ndarray, among: np.ndarray, n: int) -> np.ndarray:
    """``n`` of ``among`` with the largest values (unordered; any of tied ones: only the n-th
    largest value, the same whichever are picked, is used, as a bound)."""
    if among.size <= n:
        return among
    return among[np.argpartition(-values[among], n - 1)[:n]]


def _top(values: np.ndarray, among: np.ndarray, n: int) -> np.ndarray:
    """The ``n`` of ``among`` (indices into ``values``) with the largest values, ties by
    smaller index, best first."""
    order = np.lexsort((among, -values[among]))
    return among[order[:n]]


def saliency(topic_word: np.ndarray, shares: np.ndarray,
             term_proportion: np.ndarray) -> np.ndarray:
    """Saliency of every word (Chuang, Manning & Heer 2012): p_w times the Kullback–Leibler
    divergence of p(k | w) from the topic shares p(k) (docs/algorithms.md §11.8).

    Returns
    -------
    numpy.ndarray
        (V,) float64.
    """
    weighted = np.asarray(shares)[:, None] * topic_word
    mixture = weighted.sum(axis=0)
    posterior = np.divide(weighted, mixture[None, :], out=np.zeros_like(weighted),
                          where=mixture[None, :] > 0)
    ratio = np.divide(posterior, np.asarray(shares)[:, None], out=np.ones_like(posterior),
                      where=posterior > 0)
    distinctiveness = (posterior * np.log(ratio)).sum(axis=0)
    return term_proportion * distinctiveness


def ldavis_data(topic_word: np.ndarray, vocab: list[str], term_frequency: np.ndarray, *,
                shares: np.ndarray | None = None, n_terms: int = DEFAULT_TERMS,
                lambda_step: float = DEFAULT_LAMBDA_STEP,
                plot_opts: dict | None = None) -> dict:
    """The LDAvis data of a model, as the JSON object LDAvis and pyLDAvis read.

    Parameters
    ----------
    topic_word : numpy.ndarray
        phi, (K, V), rows on the simplex (the bottom layer of a deep model).
    vocab : list of str
        The V words.
    term_frequency : numpy.ndarray
        (V,) occurrences of each word in the training corpus (:func:`term_frequencies`).
    shares : numpy.ndarray, optional
        (K,) topic shares of the corpus's tokens; default :func:`topic_shares`.
    n_terms : int
        R, the terms of each bar chart.
    lambda_step : float
        The step of LDAvis's lambda slider; a topic's terms are those among its ``n_terms``
        most relevant at some lambda of this grid.
    plot_opts : dict, optional
        Axis labels, default ``{"xlab": "PC1", "ylab": "PC2"}``.

    Returns
    -------
    dict
        ``mdsDat``, ``tinfo``, ``token.table``, ``R``, ``lambda.step``, ``plot.opts``,
        ``topic.order``; the topics in the model's order, LDAvis's topic n being the model's
        topic n - 1.
    """
    phi = np.asarray(topic_word, dtype=np.float64)
    freq = np.asarray(term_frequency, dtype=np.float64)
    K, V = phi.shape
    n_terms = min(n_terms, V)
    pi = topic_shares(phi, freq) if shares is None else np.asarray(shares, dtype=np.float64)
    proportion = freq / freq.sum()
    counts = topic_term_counts(phi, pi, freq)
    logprob, loglift = log_terms(phi, proportion)
    coords = classical_mds(js_distances(phi))

    tinfo = {"Term": [], "Freq": [], "Total": [], "Category": [], "logprob": [], "loglift": []}
    default = _top(saliency(phi, pi, proportion), np.arange(V), n_terms)
    ranks = np.arange(n_terms, 0, -1, dtype=np.float64)
    _extend(tinfo, vocab, default, np.floor(freq[default]), np.floor(freq[default]), "Default",
            ranks, ranks)
    used = set(default.tolist())
    for k, words in enumerate(relevant_terms(logprob, loglift, n_terms, lambda_step)):
        _extend(tinfo, vocab, words, counts[k, words], freq[words], f"Topic{k + 1}",
                np.round(logprob[k, words], 4), np.round(loglift[k, words], 4))
        used.update(words.tolist())

    table = {"Term": [], "Topic": [], "Freq": []}
    for w in sorted(used, key=lambda w: (vocab[w], w)):
        for k in np.flatnonzero(counts[:, w] >= 0.5):
            table["Term"].append(vocab[w])
            table["Topic"].append(int(k) + 1)
            table["Freq"].append(float(counts[k, w] / freq[w]))
    return {"mdsDat": {"x": coords[:, 0].tolist(), "y": coords[:, 1].tolist(),
                       "topics": list(range(1, K + 1)), "cluster": [1] * K,
                       "Freq": (100.0 * pi).tolist()},
            "tinfo": tinfo, "token.table": table, "R": int(n_terms),
            "lambda.step": float(lambda_step),
            "plot.opts": dict(plot_opts or {"xlab": "PC1", "ylab": "PC2"}),
            "topic.order": list(range(1, K + 1))}


def _extend(tinfo: dict, vocab: list[str], words: np.ndarray, freq, total, category: str,
            logprob, loglift) -> None:
    tinfo["Term"].extend(vocab[w] for w in words)
    tinfo["Freq"].extend(float(x) for x in freq)
    tinfo["Total"].extend(float(x) for x in total)
    tinfo["Category"].extend([category] * len(words))
    tinfo["logprob"].extend(float(x) for x in logprob)
    tinfo["loglift"].extend(float(x) for x in loglift)
