"""What a run says about its training documents topic by topic: the topic of each training
token, each topic's most frequent adjacent word pairs and the label they suggest, and each
topic's most representative documents.

Token topics. A Gibbs-family run keeps the topic z of every training token in its state
(store order): those are used. Any other run assigns token i of document d with word w to
argmax_k theta_dk phi_kw, theta from the run's own training state where it keeps one (the
Gibbs counts n_dk + alpha, the variational gamma), else from a fold-in of the training
documents with the topics fixed (as ``topictk infer`` folds in documents).

Adjacent pairs. Two consecutive tokens of one training document, in the store's token order
(stop words and words outside the vocabulary were removed before, so "space the shuttle"
gives the pair "space shuttle"), both assigned to topic k and of two different words. A store
prepared from bag-of-words input keeps no token order: then no pair is counted and a
suggestion is top words only.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from topictk.corpus import readers
from topictk.evaluation.coherence import top_words

SUGGEST_WORDS = 3       # top words in a suggested label (besides the pair)
MIN_PAIR_COUNT = 2      # a pair seen once is chance, not a phrase
REPRESENTATIVE = 5      # documents per topic
ARGMAX_BLOCK = 1 << 16  # tokens per block of the argmax assignment (memory: block x K)
FOLD_IN = {"sweeps": 50, "burn_in": 25}     # as topictk infer's defaults


@dataclass
class TrainingTopics:
    """theta of the training documents and how it was obtained (``theta_source``, said
    wherever a share is shown)."""

    theta: np.ndarray       # (D, K)
    theta_source: str


def keeps_token_order(store) -> bool:
    """Whether the store's training tokens are in the order of the text (not a bag of
    words expanded word by word)."""
    return store.manifest.get("source", {}).get("format") not in readers.BAG_FORMATS


def training_theta(run) -> TrainingTopics:
    """theta of every training document of ``run`` (a LoadedRun): from its state when it
    keeps one, else folded in."""
    state, driver, store = run.state, run.driver, run.store
    D = store.train().indptr.size - 1
    K = int(np.asarray(run.topic_word()).shape[0])
    ndk = getattr(state, "ndk", None)
    if isinstance(ndk, np.ndarray) and ndk.shape == (D, K):
        features = driver.features_of("train")
        try:
            prior = np.asarray(driver.document_prior(state, features), dtype=np.float64)
        except Exception:      # noqa: BLE001  (no Dirichlet prior: the counts alone)
            prior = np.zeros((1, K))
        counts = ndk.astype(np.float64) + prior
        return TrainingTopics(counts / counts.sum(axis=1, keepdims=True),
                              "training state: (n_dk + alpha_k) / (n_d + sum alpha)")
    theta = getattr(state, "theta", None)
    if callable(theta):
        values = np.asarray(theta(), dtype=np.float64)
        if values.shape == (D, K):
            return TrainingTopics(values, "training state: the variational posterior mean")
    parts = [t for _, t in run.training_fold_in(**FOLD_IN)]
    values = np.concatenate(parts) if parts else np.zeros((0, K))
    return TrainingTopics(values, f"fold-in of the training documents with the topics fixed "
                                  f"({FOLD_IN['sweeps']} sweeps, {FOLD_IN['burn_in']} burn-in)")


def token_topics(run, training: TrainingTopics | None = None) -> tuple[np.ndarray, str]:
    """The topic of every training token (store order) and how it was assigned."""
    words = np.asarray(run.store.train().words)
    z = getattr(run.state, "z", None)
    if isinstance(z, np.ndarray) and z.shape == words.shape:
        return np.asarray(z, dtype=np.int64), "the sampler's assignments z"
    training = training if training is not None else training_theta(run)
    phi = np.asarray(run.topic_word(), dtype=np.float64)
    doc_ptr = np.asarray(run.store.train().doc_ptr)
    return (argmax_assignments(training.theta, phi, doc_ptr, words),
            "argmax_k theta_dk phi_kw (" + training.theta_source + ")")


def argmax_assignments(theta: np.ndarray, phi: np.ndarray, doc_ptr: np.ndarray,
                       words: np.ndarray) -> np.ndarray:
    """argmax_k theta_dk phi_kw of every token, the lower k on a tie, in blocks of
    :data:`ARGMAX_BLOCK` tokens (a (block, K) array at a time)."""
    doc_of = np.repeat(np.arange(doc_ptr.size - 1), np.diff(doc_ptr))
    out = np.empty(words.size, dtype=np.int64)
    phi_t = np.ascontiguousarray(phi.T)         # (V, K)
    for start in range(0, words.size, ARGMAX_BLOCK):
        stop = min(start + ARGMAX_BLOCK, words.size)
        scores = theta[doc_of[start:stop]] * phi_t[words[start:stop]]
        out[start:stop] = np.argmax(scores, axis=1)     # first maximum: the lower k
    return out


def adjacent_pairs(doc_ptr: np.ndarray, words: np.ndarray, z: np.ndarray, n_topics: int,
                   n_words: int) -> list[tuple[int, int, int] | None]:
    """Each topic's most frequent adjacent pair (first word, second word, count), None when
    no pair of the topic occurs :data:`MIN_PAIR_COUNT` times; ties by the lower first word,
    then the lower second word."""
    words = np.asarray(words, dtype=np.int64)
    z = np.asarray(z, dtype=np.int64)
    same = np.ones(max(words.size - 1, 0), dtype=bool)
    ends = np.asarray(doc_ptr[1:-1], dtype=np.int64) - 1     # last token of each document
    same[ends[(ends >= 0) & (ends < same.size)]] = False     # ... has no successor in it
    same &= (z[:-1] == z[1:]) & (words[:-1] != words[1:])
    first = np.flatnonzero(same)
    key = (z[first] * n_words + words[first]) * n_words + words[first + 1]
    keys, counts = np.unique(key, return_counts=True)       # ascending: topic, w1, w2
    topic = keys // (n_words * n_words)
    out: list[tuple[int, int, int] | None] = [None] * n_topics
    # per topic the largest count, the lowest key among equal counts
    order = np.lexsort((keys, -counts, topic))
    starts = np.flatnonzero(np.r_[True, topic[order][1:] != topic[order][:-1]]) if order.size \
        else np.zeros(0, dtype=np.int64)
    for i in order[starts]:
        if counts[i] >= MIN_PAIR_COUNT:
            rest = keys[i] % (n_words * n_words)
            out[int(topic[i])] = (int(rest // n_words), int(rest % n_words), int(counts[i]))
    return out


def suggest_labels(phi: np.ndarray, vocab: list[str],
                   pairs: list[tuple[int, int, int] | None]) -> dict[int, str]:
    """A label per topic row: "pair / w1, w2, w3" (the most frequent adjacent pair, then the
    top words not in it), or the top words alone when the topic has no pair."""
    n = min(SUGGEST_WORDS + 2, phi.shape[1])
    top = top_words(phi, n)
    out = {}
    for k in range(phi.shape[0]):
        pair = pairs[k] if k < len(pairs) else None
        shown = set(pair[:2]) if pair else set()
        rest = [vocab[w] for w in top[k] if w not in shown][:SUGGEST_WORDS]
        if pair:
            out[k] = f"{vocab[pair[0]]} {vocab[pair[1]]} / {', '.join(rest)}"
        else:
            out[k] = ", ".join(rest)
    return out


def run_suggestions(run, training: TrainingTopics | None = None) -> tuple[dict[int, str], str]:
    """Suggested labels of a loaded run's topics and a line saying how they were made."""
    store = run.store
    phi = np.asarray(run.topic_word(), dtype=np.float64)
    K, V = phi.shape
    if not keeps_token_order(store):
        return (suggest_labels(phi, store.vocab, [None] * K),
                "top words (a bag-of-words store keeps no token order: no adjacent pairs)")
    train = store.train()
    z, how = token_topics(run, training)
    pairs = adjacent_pairs(np.asarray(train.doc_ptr), np.asarray(train.words), z, K, V)
    return (suggest_labels(phi, store.vocab, pairs),
            f"most frequent adjacent pair (at least {MIN_PAIR_COUNT} times) of the topic's "
            f"tokens, then top words; tokens assigned by {how}")


def representative_rows(theta: np.ndarray, k: int, n: int = REPRESENTATIVE) -> np.ndarray:
    """The ``n`` training documents with the largest theta_dk, ties by the lower document
    index."""
    column = np.asarray(theta[:, k], dtype=np.float64)
    order = np.lexsort((np.arange(column.size), -column))
    return order[:n]


def representative_docs(store, training: TrainingTopics, k: int,
                        n: int = REPRESENTATIVE, ids: list[str] | None = None) -> list[dict]:
    """Topic row ``k``'s ``n`` most representative training documents: {"index" (store
    row), "document" (its id), "share" (theta_dk), "snippet" (the start of its text, None
    when the store keeps none)}."""
    rows = representative_rows(training.theta, k, n)
    ids = ids if ids is not None else store.document_ids("train")
    snippets = store.snippets(rows)
    return [{"index": int(d), "document": ids[d], "share": float(training.theta[d, k]),
             "snippet": snippets[i] if snippets is not None else None}
            for i, d in enumerate(rows)]
