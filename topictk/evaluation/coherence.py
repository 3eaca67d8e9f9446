"""Topic quality from top words (docs/algorithms.md §11.5): UMass, NPMI (document co-occurrence in
the training corpus) and topic diversity; and the coherence measures of gensim's
``CoherenceModel`` (``c_v``, ``c_npmi``, ``c_uci``, ``u_mass``) on tokenised texts
(docs/evaluate.md)."""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from topictk.progress import bar as progress_bar

if TYPE_CHECKING:
    import scipy.sparse as sp

    from topictk.corpus.store import Documents


def top_words(topic_word: np.ndarray, n: int) -> np.ndarray:
    """(K, n) word ids sorted by probability descending, ties by ascending word id."""
    order = np.argsort(-topic_word, axis=1, kind="stable")
    return order[:, :n]


def incidence_matrix(indptr: np.ndarray, indices: np.ndarray, n_words: int) -> "sp.csc_matrix":
    """Binary document x word incidence (D, V) as CSC, for column slicing."""
    import scipy.sparse as sp  # here: `train` does not pay SciPy's import (about 23 MiB)

    data = np.ones(indices.size, dtype=np.int32)        # counts of documents: exact in int32
    return sp.csr_matrix((data, np.asarray(indices), np.asarray(indptr)),
                         shape=(indptr.size - 1, n_words)).tocsc()


#: top words (with repeats) of the topics whose co-document counts are taken in one product
CO_GROUP = 1024


def co_document_counts(top: np.ndarray, incidence: "sp.csc_matrix",
                       group: int = CO_GROUP) -> np.ndarray:
    """(K, n, n): documents containing both of two top words of each topic (the diagonal:
    documents containing the word), from one product over the union of the top words of
    ``group // n`` topics at a time: memory O(group^2 + K n^2), not the square of the union of
    all topics' top words (at K = 10,000 most of the vocabulary)."""
    K, n = top.shape
    counts = np.empty((K, n, n))
    step = max(1, group // max(n, 1))
    for begin in range(0, K, step):
        union, position = np.unique(top[begin:begin + step], return_inverse=True)
        position = position.reshape(-1, n)
        sub = incidence[:, union]
        co = (sub.T @ sub).toarray()
        counts[begin:begin + step] = co[position[:, :, None], position[:, None, :]]
    return counts


def umass(top: np.ndarray, incidence: "sp.csc_matrix",
          counts: np.ndarray | None = None) -> np.ndarray:
    """Per-topic UMass: sum_{m>l} ln((D(v_m, v_l) + 1) / D(v_l)); ``counts``: the
    :func:`co_document_counts` of ``top``, when at hand."""
    counts = co_document_counts(top, incidence) if counts is None else counts
    scores = []
    for words, co in zip(top, counts):
        total = 0.0
        for m in range(1, len(words)):
            for l in range(m):
                total += np.log((co[m, l] + 1.0) / co[l, l]) if co[l, l] > 0 else 0.0
        scores.append(total)
    return np.array(scores)


def npmi(top: np.ndarray, incidence: "sp.csc_matrix",
         counts: np.ndarray | None = None) -> np.ndarray:
    """Per-topic mean NPMI over all pairs of top words (document co-occurrence); ``counts``:
    the :func:`co_document_counts` of ``top``, when at hand."""
    n_docs = incidence.shape[0]
    counts = co_document_counts(top, incidence) if counts is None else counts
    scores = []
    for words, co in zip(top, counts):
        values = []
        for m in range(1, len(words)):
            for l in range(m):
                joint = co[m, l] / n_docs
                if co[m, l] == 0:
                    values.append(-1.0)
                elif joint >= 1.0:
                    values.append(1.0)
                else:
                    pmi = np.log(joint / ((co[m, m] / n_docs) * (co[l, l] / n_docs)))
                    values.append(pmi / -np.log(joint))
        scores.append(np.mean(values) if values else 0.0)
    return np.array(scores)


def diversity(topic_word: np.ndarray, n: int = 25) -> float:
    """Share of unique words among the top-n words of all topics (Dieng et al. 2020)."""
    top = top_words(topic_word, n)
    return float(np.unique(top).size / top.size)


def topic_quality(topic_word: np.ndarray, indptr: np.ndarray, indices: np.ndarray,
                  coherence_top: int = 10, diversity_top: int = 25) -> dict:
    """Mean UMass, mean NPMI and topic diversity of ``topic_word`` (K, V)."""
    V = topic_word.shape[1]
    top = top_words(topic_word, min(max(coherence_top, diversity_top), V))
    return quality_of_top_words(top, indptr, indices, V, coherence_top, diversity_top)


def quality_of_top_words(top: np.ndarray, indptr: np.ndarray, indices: np.ndarray,
                         n_words: int, coherence_top: int = 10,
                         diversity_top: int = 25) -> dict:
    """:func:`topic_quality` from the topics' top words (K, n), n at least the larger of
    ``coherence_top`` and ``diversity_top`` (or V): the first of a topic's top words are its
    top words for a smaller n."""
    incidence = incidence_matrix(indptr, indices, n_words)
    coherent = np.ascontiguousarray(top[:, :min(coherence_top, n_words)])
    diverse = top[:, :min(diversity_top, n_words)]
    counts = co_document_counts(coherent, incidence)
    return {"umass": float(np.mean(umass(coherent, incidence, counts))),
            "npmi": float(np.mean(npmi(coherent, incidence, counts))),
            "diversity": float(np.unique(diverse).size / diverse.size)}


# ----------------------------------------------------------------------------------------------
# The coherence measures of gensim's CoherenceModel (Röder et al. 2015), on tokenised texts

#: gensim's names of the measures, in the order they are reported
GENSIM_MEASURES = ("c_v", "c_npmi", "c_uci", "u_mass")
#: each measure's window (gensim's ``SLIDING_WINDOW_SIZES``); 0: every text is one window
#: (u_mass counts documents)
WINDOW = {"c_v": 110, "c_npmi": 10, "c_uci": 10, "u_mass": 0}
#: what gensim adds to a joint probability before its logarithm
EPSILON = 1e-12
#: tokens per call of the counting kernel (between two updates of the progress bar)
CHUNK_TOKENS = 1 << 18

#: printed under c_v (docs/evaluate.md, "What is known about c_v")
C_V_CAVEAT = ("the c_v authors' own tool (Palmetto) advises against c_v, and automated "
              "coherence often disagrees with human judgement (Hoyle et al. 2021); see "
              "docs/evaluate.md")


def parse_measures(text: str | Sequence[str]) -> tuple[str, ...]:
    """The measures named in ``text`` ("c_v,u_mass", "all", or a sequence of names), in the
    order given, each once; ValueError naming the known ones otherwise."""
    names = text.split(",") if isinstance(text, str) else list(text)
    names = [str(n).strip() for n in names if str(n).strip()]
    if names == ["all"]:
        return GENSIM_MEASURES
    unknown = [n for n in names if n not in GENSIM_MEASURES]
    if unknown or not names:
        raise ValueError(f"unknown coherence measure(s) {', '.join(unknown) or '(none)'}; "
                         f"known: {', '.join(GENSIM_MEASURES)} or all")
    return tuple(dict.fromkeys(names))


def _pairs(local_top: np.ndarray, U: int) -> np.ndarray:
    """Sorted keys a * U + b of the ordered pairs of distinct relevant words sharing a topic
    (``local_top`` (K, n): relevant indices, -1 for none); both orders of a pair are there."""
    K, n = local_top.shape
    i, j = np.nonzero(~np.eye(n, dtype=bool))
    a, b = local_top[:, i].astype(np.int64), local_top[:, j].astype(np.int64)
    keep = (a >= 0) & (b >= 0) & (a != b)
    return np.unique(a[keep] * U + b[keep])


def window_counts(doc_ptr: np.ndarray, words: np.ndarray, top: np.ndarray, n_words: int,
                  window: int, *, gensim_edge: bool = True,
                  progress=None) -> tuple[int, np.ndarray]:
    """(windows, counts (K, n, n)): the windows of the texts (``doc_ptr``, ``words``) and, for
    the top words ``top`` (K, n) of every topic (word ids below ``n_words``, -1 for none),
    the windows holding both of two of them (the diagonal: holding the word; 0 where a word
    is -1). ``window`` and ``gensim_edge``: see :mod:`topictk.evaluation._coherence`.
    ``progress``: an object whose ``update(n)`` is told of every n texts counted."""
    from topictk.evaluation._coherence import count_windows

    top = np.asarray(top, dtype=np.int64)
    K, n = top.shape
    relevant = np.unique(top[top >= 0])
    U = relevant.size
    local = np.full(max(int(n_words), 1), -1, dtype=np.int32)
    local[relevant] = np.arange(U, dtype=np.int32)
    local_top = np.where(top >= 0, local[np.maximum(top, 0)], -1)
    keys = _pairs(local_top, max(U, 1))
    adj_ptr = np.zeros(U + 1, dtype=np.int64)
    np.cumsum(np.bincount(keys // max(U, 1), minlength=U), out=adj_ptr[1:])
    adj = (keys % max(U, 1)).astype(np.int32)
    occurrences = np.zeros(U, dtype=np.int64)
    co = np.zeros(keys.size, dtype=np.int64)
    doc_ptr = np.ascontiguousarray(doc_ptr, dtype=np.int64)
    words = np.ascontiguousarray(words, dtype=np.int32)
    n_docs, n_windows, begin = doc_ptr.size - 1, 0, 0
    while begin < n_docs:
        end = int(np.searchsorted(doc_ptr, doc_ptr[begin] + CHUNK_TOKENS, side="right")) - 1
        end = min(max(end, begin + 1), n_docs)
        n_windows += count_windows(doc_ptr, words, local, int(window), bool(gensim_edge),
                                   adj_ptr, adj, occurrences, co, begin, end)
        if progress is not None:
            progress.update(end - begin)
        begin = end
    # the count of pair {a, b}: the windows where b was present when a's presence ended,
    # and those where a was present when b's ended
    U1 = max(U, 1)
    both = co + co[np.searchsorted(keys, adj.astype(np.int64) * U1
                                   + np.repeat(np.arange(U, dtype=np.int64),
                                               np.diff(adj_ptr)))]
    counts = np.zeros((K, n, n), dtype=np.float64)
    a, b = local_top[:, :, None], local_top[:, None, :]
    pair = (a >= 0) & (b >= 0) & (a != b)
    if keys.size:
        at = np.searchsorted(keys, np.where(pair, a * U1 + b, 0))
        counts[pair] = both[at[pair]]
    same = (a >= 0) & (a == b)
    counts[same] = occurrences[np.broadcast_to(a, same.shape)[same]]
    return n_windows, counts


def _mean(values: list[float]) -> float:
    return float(np.mean(values)) if values else float("nan")


def measure_topics(measure: str, counts: np.ndarray, n_windows: int,
                   known: np.ndarray) -> np.ndarray:
    """(K,) ``measure`` of every topic from its window counts (:func:`window_counts`, with the
    window of the measure) over ``n_windows`` windows; ``known`` (K, n): the top words that
    occur in the texts (the others are left out, as gensim leaves out a word its dictionary
    lacks). NaN for a topic with fewer than two known words."""
    N = float(n_windows)
    scores = np.full(counts.shape[0], np.nan)
    for k in range(counts.shape[0]):
        idx = np.flatnonzero(known[k])
        if idx.size < 2:
            continue
        c = counts[k][np.ix_(idx, idx)]
        p = np.diag(c) / N
        joint = c / N + EPSILON
        if measure == "u_mass":
            # s_one_pre: each word given every word ranked above it
            scores[k] = _mean([np.log(joint[m, l] / p[l]) for m in range(1, idx.size)
                               for l in range(m)])
            continue
        pmi = np.log(joint / (p[:, None] * p[None, :]))
        npmi = pmi / -np.log(joint)
        off = ~np.eye(idx.size, dtype=bool)
        if measure == "c_uci":
            scores[k] = float(np.mean(pmi[off]))        # s_one_one: both orders of a pair
        elif measure == "c_npmi":
            scores[k] = float(np.mean(npmi[off]))
        elif measure == "c_v":
            # s_one_set: every word against the whole set, by the cosine of their NPMI
            # context vectors over the top words (the word's own NPMI included)
            whole = npmi.sum(axis=0)
            norms = np.sqrt((npmi ** 2).sum(axis=1)) * np.sqrt((whole ** 2).sum())
            cos = np.divide(npmi @ whole, norms, out=np.zeros(idx.size), where=norms > 0)
            scores[k] = float(np.mean(cos))
        else:
            raise ValueError(f"unknown coherence measure {measure!r}")
    return scores


def _progress_bar(total: int, enabled: bool | None):
    """A tqdm bar over ``total`` texts on stderr when ``enabled``, or (None) as the command
    shows bars (:func:`topictk.progress.bar`: on a terminal, not with -q); None otherwise."""
    if total <= 0:
        return None
    shown = progress_bar(total, desc="coherence", unit="text", show=enabled)
    return None if shown.disable else shown


def gensim_coherence(topics: Sequence[Sequence[str]], texts: "Documents", vocab: Sequence[str],
                     measures: Sequence[str] = GENSIM_MEASURES, *, gensim_edge: bool = True,
                     progress: bool | None = None) -> dict:
    """The ``measures`` (gensim's names) of ``topics`` (each a list of words, best first) on
    ``texts`` (token sequences: ``doc_ptr``, ``words`` over ``vocab``), as gensim's
    ``CoherenceModel(topics=..., texts=..., coherence=...)`` gives them.

    A topic word that does not occur in the texts is left out of its topic and listed in
    ``absent``; a topic left with fewer than two words has the value None and is left out of
    the mean. Returns ``{"mean": {m: float | None}, "per_topic": {m: [float | None]},
    "absent": {word: [topics]}, "windows": {m: count}}``. ``progress``: a tqdm bar (default:
    when stderr is a terminal)."""
    measures = parse_measures(measures)
    index = {w: i for i, w in enumerate(vocab)}
    n = max((len(t) for t in topics), default=0)
    top = np.full((len(topics), n), -1, dtype=np.int64)
    for k, words in enumerate(topics):
        for i, word in enumerate(words):
            top[k, i] = index.get(word, -1)
    if texts.doc_ptr is None or texts.words is None:
        raise ValueError("the texts keep no token order (no doc_ptr/words)")
    windows = list(dict.fromkeys(WINDOW[m] for m in measures))
    bar = _progress_bar(len(windows) * (texts.doc_ptr.size - 1), progress)
    counted = {}
    try:
        for w in windows:
            counted[w] = window_counts(texts.doc_ptr, texts.words, top, len(vocab), w,
                                       gensim_edge=gensim_edge, progress=bar)
    finally:
        if bar is not None:
            bar.close()
    n_windows, counts = counted[windows[0]]
    known = (top >= 0) & (np.diagonal(counts, axis1=1, axis2=2) > 0)
    absent: dict[str, list[int]] = {}
    for k, words in enumerate(topics):
        for i, word in enumerate(words):
            if not known[k, i]:
                absent.setdefault(word, []).append(k)
    result = {"mean": {}, "per_topic": {}, "absent": absent, "windows": {}}
    for m in measures:
        n_windows, counts = counted[WINDOW[m]]
        scores = measure_topics(m, counts, n_windows, known)
        finite = scores[np.isfinite(scores)]
        result["mean"][m] = float(np.mean(finite)) if finite.size else None
        result["per_topic"][m] = [float(s) if np.isfinite(s) else None for s in scores]
        result["windows"][m] = int(n_windows)
    return result
