"""``topictk topics RUN --seeds``: where every seed word stands in its topic (docs/seeds.md):
its rank among the topic's words by phi-hat (1 = the top word) and its probability; seed
words the vocabulary lacks are marked, with the closest vocabulary words."""
from __future__ import annotations

import json

import numpy as np

from topictk.inference.seeds import closest_words, lookup, seed_words


def seed_ranks(config, topic_word: np.ndarray, vocab: list[str]) -> list[dict]:
    """One record per seeded topic row k: its label and, per seed word, ``rank`` (1-based,
    by phi-hat descending, ties by ascending word id as the top words are ordered) and
    ``probability``, or ``missing: true`` and ``closest`` words."""
    seeds = seed_words(config) or {}
    index = {word: i for i, word in enumerate(vocab)}
    out = []
    for k, (label, words) in enumerate(seeds.items()):
        if k >= topic_word.shape[0]:
            break
        order = np.argsort(-topic_word[k], kind="stable")
        position = np.empty(order.size, dtype=np.int64)
        position[order] = np.arange(1, order.size + 1)
        rows = []
        for word in words:
            w = lookup(word, index)
            if w is None:
                rows.append({"word": word, "missing": True,
                             "closest": closest_words(word, index)})
            else:
                rows.append({"word": vocab[w], "rank": int(position[w]),
                             "probability": float(topic_word[k, w])})
        out.append({"topic": k + 1, "label": label, "words": rows})
    return out


def render_seed_ranks(records: list[dict], fmt: str, top: int) -> str:
    """Text (one line per topic: word#rank(probability), a mark * on words outside the top
    ``top``, ``word(not in vocabulary)``) or JSON."""
    if fmt == "json":
        return json.dumps({"seeds": records, "top": top}) + "\n"
    if not records:
        return "no seed words: the run's config has no model.seed_words\n"
    lines = []
    for record in records:
        parts = []
        for row in record["words"]:
            if row.get("missing"):
                close = ", ".join(row["closest"]) or "none close"
                parts.append(f"{row['word']}(not in vocabulary; closest: {close})")
            else:
                mark = "" if row["rank"] <= top else "*"
                parts.append(f"{row['word']}#{row['rank']}{mark}({row['probability']:.3f})")
        lines.append(f"{record['topic']:>3}  {record['label']}: {' '.join(parts)}")
    held = sum(1 for r in records for w in r["words"] if not w.get("missing")
               and w["rank"] <= top)
    known = sum(1 for r in records for w in r["words"] if not w.get("missing"))
    lines.append(f"seed words in their topic's top {top}: {held} of {known} (* outside)")
    return "\n".join(lines) + "\n"
