"""Collocations joined into single tokens (``prepare --phrases``).

Learned on the training documents' token sequences (after the minimum length, case and
lemmas, stop words still in place): a pair ``a b`` of adjacent tokens is a phrase when it
occurs at least ``min_count`` times, neither word is a stop word, and its normalised PMI

    npmi(a, b) = log(p(ab) / (p(a) p(b))) / -log p(ab)

is at least ``threshold``; a triple ``a b c`` when it occurs ``min_count`` times, ``a`` and
``c`` are not stop words (``b`` may be: "secretary the navy") and

    npmi(a, b, c) = log(p(abc) / (p(a) p(b) p(c))) / -2 log p(abc)

is at least ``threshold`` (1 for words that only ever occur together, 0 for independent
ones, as for pairs). Every p is a count over the training tokens N.

Joining reads a document left to right: a triple starting at a position wins over a pair
starting there; a joined phrase is never joined again. Prepare and infer join with the same
function (:func:`join`), over word ids in one and over words in the other.
"""
from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np

JOINER = "_"


@dataclass(frozen=True)
class Phrase:
    words: tuple[str, ...]
    count: int
    npmi: float

    def to_json(self) -> dict:
        return {"words": list(self.words), "count": self.count, "npmi": round(self.npmi, 6)}


def _npmi(joint: np.ndarray, parts: list[np.ndarray], total: int) -> np.ndarray:
    """Normalised PMI of n-grams counted ``joint`` times whose words are counted ``parts``."""
    n = len(parts)
    log_joint = np.log(joint / total)
    pmi = log_joint - sum(np.log(p / total) for p in parts)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = pmi / (-(n - 1) * log_joint)
    return np.where(log_joint < 0, out, 1.0)


def _pairs_of(docs: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    firsts = [d[:-1] for d in docs if d.size > 1]
    seconds = [d[1:] for d in docs if d.size > 1]
    if not firsts:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    return (np.concatenate(firsts).astype(np.int64), np.concatenate(seconds).astype(np.int64))


def learn(docs: list[np.ndarray], names: list[str], stop: frozenset[str], min_count: int,
          threshold: float) -> list[tuple[tuple[int, ...], int, float]]:
    """The phrases of the documents ``docs`` (word-id arrays over ``names``) as (word ids,
    count, npmi), triples first, each kind by npmi descending then words."""
    n_types = len(names)
    unigram = np.zeros(n_types, dtype=np.int64)
    for d in docs:
        np.add.at(unigram, d, 1)
    total = int(unigram.sum())
    if total == 0:
        return []
    content = np.array([name not in stop for name in names], dtype=bool)
    frequent = unigram >= min_count
    found: list[tuple[tuple[int, ...], int, float]] = []
    a, b = _pairs_of(docs)
    pair_keys, pair_counts = np.unique(a * n_types + b, return_counts=True)
    often = pair_counts >= min_count
    pair_keys, pair_counts = pair_keys[often], pair_counts[often]
    pa, pb = pair_keys // n_types, pair_keys % n_types
    npmi = _npmi(pair_counts, [unigram[pa], unigram[pb]], total)
    good = content[pa] & content[pb] & (npmi >= threshold)
    pairs = [((int(x), int(y)), int(c), float(v))
             for x, y, c, v in zip(pa[good], pb[good], pair_counts[good], npmi[good])]
    # triples: both of their pairs occur min_count times (a necessary condition)
    starts, ends = [], []
    for d in docs:
        if d.size > 2:
            starts.append(d[:-2])
            ends.append(d[2:])
    if starts:
        a3 = np.concatenate(starts).astype(np.int64)
        c3 = np.concatenate(ends).astype(np.int64)
        b3 = np.concatenate([d[1:-1] for d in docs if d.size > 2]).astype(np.int64)
        keep = (frequent[a3] & frequent[b3] & frequent[c3] & content[a3] & content[c3]
                & np.isin(a3 * n_types + b3, pair_keys) & np.isin(b3 * n_types + c3, pair_keys))
        if keep.any():
            grams, counts = np.unique(np.stack([a3[keep], b3[keep], c3[keep]], axis=1),
                                      axis=0, return_counts=True)
            often = counts >= min_count
            grams, counts = grams[often], counts[often]
            npmi3 = _npmi(counts, [unigram[grams[:, i]] for i in range(3)], total)
            good3 = npmi3 >= threshold
            found = [(tuple(int(w) for w in g), int(c), float(v))
                     for g, c, v in zip(grams[good3], counts[good3], npmi3[good3])]
    order = lambda p: (-p[2], [names[w] for w in p[0]])     # noqa: E731
    return sorted(found, key=order) + sorted(pairs, key=order)


def join(tokens: Sequence[Hashable], triples: dict, pairs: dict) -> list:
    """``tokens`` with every phrase replaced by its joined token (the value of ``triples``
    or ``pairs`` under the tuple of its words), read left to right, a triple before a pair."""
    out = []
    i, n = 0, len(tokens)
    while i < n:
        if i + 2 < n:
            joined = triples.get((tokens[i], tokens[i + 1], tokens[i + 2]))
            if joined is not None:
                out.append(joined)
                i += 3
                continue
        if i + 1 < n:
            joined = pairs.get((tokens[i], tokens[i + 1]))
            if joined is not None:
                out.append(joined)
                i += 2
                continue
        out.append(tokens[i])
        i += 1
    return out


def joined_name(words: Sequence[str]) -> str:
    return JOINER.join(words)


class PhraseTable:
    """Learned phrases, joining word sequences (infer)."""

    def __init__(self, phrases: list[Sequence[str]]):
        self.triples = {tuple(p): joined_name(p) for p in phrases if len(p) == 3}
        self.pairs = {tuple(p): joined_name(p) for p in phrases if len(p) == 2}

    def __call__(self, tokens: list[str]) -> list[str]:
        return join(tokens, self.triples, self.pairs) if len(tokens) > 1 else tokens


def join_documents(docs: list[np.ndarray], names: list[str],
                   phrases: list[tuple[tuple[int, ...], int, float]]) -> list[np.ndarray]:
    """``docs`` (word-id arrays over ``names``) with every phrase joined; the joined words
    are appended to ``names`` (or are the word of that name it already has)."""
    index = {name: i for i, name in enumerate(names)}
    triples, pairs = {}, {}
    for ids, _, _ in phrases:
        name = joined_name([names[w] for w in ids])
        if name not in index:
            index[name] = len(names)
            names.append(name)
        (triples if len(ids) == 3 else pairs)[ids] = index[name]
    if not phrases:
        return docs
    heads = np.zeros(len(names), dtype=bool)
    heads[[ids[0] for ids, _, _ in phrases]] = True
    out = []
    for d in docs:
        if d.size < 2 or not heads[d[:-1]].any():
            out.append(d)
            continue
        out.append(np.array(join(d.tolist(), triples, pairs), dtype=np.int32))
    return out


def check_options(min_count: int, threshold: float) -> str | None:
    """What is wrong with the phrase options, or None."""
    if min_count < 1:
        return f"--phrase-min-count must be >= 1; got {min_count}"
    if not (math.isfinite(threshold) and -1 <= threshold <= 1):
        return f"--phrase-threshold must be a normalised PMI in [-1, 1]; got {threshold}"
    return None
