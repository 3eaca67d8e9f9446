"""Top words per topic with their probabilities, as text, TSV or JSON."""
from __future__ import annotations

import json

import numpy as np

from topictk.evaluation.coherence import top_words


def topic_table(topic_word: np.ndarray, vocab: list[str], n: int) -> list[dict]:
    """[{"topic": k, "words": [{"word", "probability"}...]}] for every topic."""
    top = top_words(topic_word, min(n, topic_word.shape[1]))
    return [{"topic": k,
             "words": [{"word": vocab[w], "probability": float(topic_word[k, w])} for w in row]}
            for k, row in enumerate(top)]


def format_topics(table: list[dict], fmt: str) -> str:
    if fmt == "json":
        return json.dumps({"topics": table}, indent=None) + "\n"
    lines = []
    if fmt == "tsv":
        lines.append("topic\trank\tword\tprobability")
        for t in table:
            for rank, w in enumerate(t["words"], start=1):
                lines.append(f"{t['topic']}\t{rank}\t{w['word']}\t{w['probability']:.6g}")
    else:
        for t in table:
            words = " ".join(f"{w['word']}({w['probability']:.3f})" for w in t["words"])
            lines.append(f"{t['topic']:>3}  {words}")
    return "\n".join(lines) + "\n"
