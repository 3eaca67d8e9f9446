"""Slow NumPy twin of topictk/evaluation/_coherence.pyx: one window at a time.

Every window of every text is formed explicitly, the set of relevant words it contains is
taken (with ``gensim_edge``: the state gensim's ``WordOccurrenceAccumulator`` keeps, where the
token leaving at the left edge is marked absent and the one entering at the right edge
present), and every present word and present pair adds one.
"""
from __future__ import annotations

import numpy as np


def windows_of(length: int, window: int) -> list[tuple[int, int]]:
    """[begin, end) of the windows of a text of ``length`` tokens: length - window + 1 of
    ``window`` tokens, or the whole text (also an empty one) when it is not longer, or when
    ``window`` <= 0."""
    if window <= 0 or length <= window:
        return [(0, length)]
    return [(t, t + window) for t in range(length - window + 1)]


def count_windows(doc_ptr, words, local, window: int, gensim_edge: bool, n_local: int):
    """(n_windows, occurrences (U,), co (U, U) symmetric with a zero diagonal): windows
    containing each relevant word, and each pair of distinct relevant words."""
    occurrences = np.zeros(n_local, dtype=np.int64)
    co = np.zeros((n_local, n_local), dtype=np.int64)
    n_windows = 0
    for d in range(len(doc_ptr) - 1):
        text = [int(local[w]) for w in words[doc_ptr[d]:doc_ptr[d + 1]]]
        present: set[int] = set()
        for t, (begin, end) in enumerate(windows_of(len(text), window)):
            if not gensim_edge or t == 0:
                present = {a for a in text[begin:end] if a >= 0}
            else:
                present.discard(text[begin - 1])
                if text[end - 1] >= 0:
                    present.add(text[end - 1])
            n_windows += 1
            for a in present:
                occurrences[a] += 1
                for b in present:
                    if a != b:
                        co[a, b] += 1
    return n_windows, occurrences, co
