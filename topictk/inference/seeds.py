"""Seed words as the samplers and updates use them: the seeded topics' word ids, and the
sparse extra prior they put on the topic-word distributions (docs/seeds.md,
docs/algorithms.md §2.12).

``model.seed_words`` maps labels to words (``model.seed_file`` is read into it when the
config is loaded); the i-th label seeds topic row i. With ``model.seed_mode: prior`` (the
default) every seed word w of topic k gets the extra prior

    o_wk = seed_weight * N / V        (N training tokens, V words of the vocabulary)

so that beta_wk = beta + o_wk: ``seed_weight`` is the pseudo-count in units of the mean count
of a word . The overlay is CSR by word (``prior_ptr`` (V + 1) int64,
``prior_topic`` int32 ascending within a word, ``prior_extra`` float64), the layout the
kernels take (docs/algorithms.md §2.10); a word seeded in two topics gets both entries. In
both modes the seed words' tokens start in their topic (:func:`seed_init_topics`); with
``seed_mode: init`` there is no overlay, that start is all (GuidedLDA's initialisation, kept
as a baseline).
"""
from __future__ import annotations

import difflib
import hashlib
import json
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from topictk.config.schema import SEED_WEIGHT
from topictk.errors import ConfigError

log = logging.getLogger("topictk")

_WARNED: set[str] = set()
CLOSE_WORDS = 3         # vocabulary words suggested for a seed word it does not hold


def _model(config):
    return config.get("model", {}) if isinstance(config, Mapping) else config.model


def setting(model, key: str, default=None):
    """A key of the model section (a mapping or a config Section), ``default`` when absent or
    null (a run saved before the key existed)."""
    try:
        value = model[key]
    except (KeyError, AttributeError, TypeError):
        value = None
    return default if value is None else value


def seed_words(config) -> dict[str, list[str]] | None:
    """``model.seed_words`` of a loaded config or a plain dict, None when it has none."""
    seeds = setting(_model(config), "seed_words")
    return dict(seeds) if seeds else None


def seed_mode(config) -> str:
    """``model.seed_mode``: prior (the default) or init."""
    return str(setting(_model(config), "seed_mode", "prior"))


def _index(vocab) -> dict[str, int]:
    if isinstance(vocab, Mapping):
        return dict(vocab)
    return {word: i for i, word in enumerate(vocab)}


def lookup(word: str, index: Mapping[str, int]) -> int | None:
    """The id of a seed word: as written, else lower-cased (the tokenizer's default)."""
    found = index.get(word)
    if found is None:
        found = index.get(word.lower())
    return found


def seed_rows(config, vocab=None) -> list[tuple[str, list[int]]]:
    """The seeded topics in row order: (label, ids of its words in the vocabulary), words the
    vocabulary lacks left out (one warning line lists them with the closest vocabulary words).
    ``vocab`` is the vocabulary (a list of words or a word -> id mapping); None reads the
    config's corpus store. Empty without seed words.

    Raises ConfigError for a label none of whose words the vocabulary holds, and for more
    seeded labels than ``model.topics``."""
    seeds = seed_words(config)
    if not seeds:
        return []
    if vocab is None:
        from topictk.corpus.store import CorpusStore   # noqa: PLC0415 (only when not given)
        corpus = config["corpus"] if isinstance(config, Mapping) else config.corpus
        vocab = CorpusStore.open(Path(corpus)).vocab
    model = _model(config)
    topics = setting(model, "topics")
    if topics is not None and len(seeds) > int(topics):
        raise ConfigError(f"model.seed_words: {len(seeds)} seeded topics but model.topics is "
                          f"{topics}; raise model.topics or give fewer labels")
    index = _index(vocab)
    rows, missing = [], []
    for label, words in seeds.items():
        ids = []
        for word in words:
            found = lookup(word, index)
            if found is None:
                missing.append(word)
            elif found not in ids:
                ids.append(int(found))
        if not ids:
            raise ConfigError(f"model.seed_words.{label}: none of its words "
                              f"({', '.join(words[:10])}) is in the corpus vocabulary "
                              f"{_closest_text(words, index)}; give words the vocabulary holds")
        rows.append((label, ids))
    if missing:
        line = "; ".join(f"{w} {_closest_text([w], index)}" for w in missing)
        if line not in _WARNED:         # once per process, not once per caller
            _WARNED.add(line)
            log.warning("seed words not in the vocabulary, left out: %s", line)
    return rows


def closest_words(word: str, index: Mapping[str, int]) -> list[str]:
    """The vocabulary words closest to ``word`` (difflib's ratio), best first."""
    return difflib.get_close_matches(word.lower(), list(index), n=CLOSE_WORDS, cutoff=0.6)


def _closest_text(words: Sequence[str], index: Mapping[str, int]) -> str:
    close = [c for w in words for c in closest_words(w, index)]
    return f"(closest: {', '.join(dict.fromkeys(close))})" if close else "(nothing close)"


def train_tokens(config) -> int:
    """Training tokens N of the config's corpus store (its manifest)."""
    corpus = config["corpus"] if isinstance(config, Mapping) else config.corpus
    from topictk.config.loader import _store_counts   # noqa: PLC0415 (the manifest reader)
    counts = _store_counts(str(corpus))
    if counts is None or not counts.get("train_tokens"):
        raise ConfigError(f"model.seed_weight: the corpus store {corpus} does not say how many "
                          f"training tokens it holds; prepare the store again")
    return int(counts["train_tokens"])


def seed_extra(config, n_words: int, n_tokens: int | None = None) -> float:
    """The extra prior o of a seed word in its topic: seed_weight * N / V."""
    weight = float(setting(_model(config), "seed_weight", SEED_WEIGHT))
    n_tokens = train_tokens(config) if n_tokens is None else int(n_tokens)
    return weight * n_tokens / max(1, int(n_words))


def seed_overlay(config, vocab, n_tokens: int | None = None
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """The seed words' extra prior as the kernels' CSR overlay (module docstring):
    (prior_ptr (V + 1) int64, prior_topic (nnz) int32, prior_extra (nnz) float64), or None
    without seed words or with ``seed_mode: init``. ``n_tokens`` is N (default: the store's
    training tokens)."""
    rows = seed_rows(config, vocab)
    if not rows or seed_mode(config) != "prior":
        return None
    V = len(vocab)
    extra = seed_extra(config, V, n_tokens)
    pairs = sorted({(w, k) for k, (_, ids) in enumerate(rows) for w in ids})
    ptr = np.zeros(V + 1, dtype=np.int64)
    topic = np.empty(len(pairs), dtype=np.int32)
    for i, (w, k) in enumerate(pairs):
        ptr[w + 1] += 1
        topic[i] = k
    np.cumsum(ptr, out=ptr)
    return ptr, topic, np.full(len(pairs), extra, dtype=np.float64)


def seed_init_topics(config, vocab) -> np.ndarray | None:
    """The (V,) int32 topic every token of a seed word starts in (-1: not a seed word; a word
    seeded in two topics starts in the first), None without seed words. Both modes start so:
    ``prior`` then keeps the words there by the overlay (on 20 Newsgroups the seeded start
    adds 1-2 points of accuracy to the prior's, benchmarks/results/seeds.md), ``init`` has
    nothing else."""
    rows = seed_rows(config, vocab)
    if not rows:
        return None
    start = np.full(len(vocab), -1, dtype=np.int32)
    for k, (_, ids) in enumerate(rows):
        for w in ids:
            if start[w] < 0:
                start[w] = k
    return start


def seed_signature(config, vocab=None) -> str | None:
    """A short hash of what the seeds change in a chain (rows of word ids, weight, mode), None
    without seeds: a checkpoint records it and resume refuses another."""
    rows = seed_rows(config, vocab)
    if not rows:
        return None
    model = _model(config)
    text = json.dumps([[label, ids] for label, ids in rows]
                      + [float(setting(model, "seed_weight", SEED_WEIGHT)), seed_mode(config)])
    return hashlib.sha256(text.encode()).hexdigest()[:16]
