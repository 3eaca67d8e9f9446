"""Rankings break exact ties by the smaller word id, on every machine: the top words of a
topic, the terms of the report's bar charts (relevance) and the most salient terms; and P(topic
| term), which the report's map shows while a term's bar is hovered."""
from __future__ import annotations

import numpy as np
import pytest

from topictk.evaluation import ldavis
from topictk.evaluation.coherence import top_words
from topictk.numbering import topic_columns, topic_number, topic_row
from topictk.evaluation.report import TERM_TOPIC_FLOOR, topic_data


def tied_topics(K: int = 3, V: int = 400, seed: int = 0) -> np.ndarray:
    """Rows on the simplex taking only a few distinct values, each shared by many words at
    scattered positions: most neighbours in a ranking are exact ties."""
    rng = np.random.default_rng(seed)
    phi = rng.choice([1.0, 2.0, 3.0, 5.0], size=(K, V))
    return phi / phi.sum(axis=1, keepdims=True)


def test_top_words_rank_exact_ties_by_word_id():
    phi = tied_topics()
    ids = np.arange(phi.shape[1])
    top = top_words(phi, phi.shape[1])
    for k in range(phi.shape[0]):
        assert top[k].tolist() == np.lexsort((ids, -phi[k])).tolist()


def test_relevant_terms_of_tied_words_are_the_smallest_ids():
    # every word of topic 0 equally probable and equally frequent: its relevance is the same
    # for all of them at every lambda, so the 5 most relevant are words 0..4
    V, n = 300, 5
    phi = np.vstack([np.full(V, 1.0 / V), tied_topics(1, V, seed=3)[0]])
    proportion = np.full(V, 1.0 / V)
    logprob, loglift = ldavis.log_terms(phi, proportion)
    relevant = ldavis.relevant_terms(logprob, loglift, n)
    assert relevant[0].tolist() == list(range(n))
    again = ldavis.relevant_terms(logprob[:, ::-1].copy(), loglift[:, ::-1].copy(), n)
    assert again[0].tolist() == list(range(n))        # whatever the words' order in memory


def test_report_data_of_tied_words_ranks_them_by_word_id():
    phi = tied_topics(K=4, V=300, seed=1)
    freq = np.full(300, 10.0)                          # every word equally frequent
    data = topic_data(phi, freq, np.zeros(4), 12)
    words = np.asarray(data["words"])
    assert words.tolist() == sorted(words.tolist())
    # the most salient terms: by saliency, exact ties by word id
    shares = np.asarray(data["share"])
    salient = ldavis.saliency(phi, shares, freq / freq.sum())
    ids = np.arange(300)
    assert words[data["default"]].tolist() == np.lexsort((ids, -salient))[:12].tolist()
    # every topic's bars at lambda = 1 (by phi): its 12 largest, ties by word id
    for k, topic in enumerate(data["topic"]):
        terms = set(words[topic["terms"]].tolist())
        assert set(np.lexsort((ids, -phi[k]))[:12].tolist()) <= terms


def test_report_data_carries_p_topic_given_term_of_the_shown_words():
    phi = tied_topics(K=5, V=200, seed=2)
    freq = np.random.default_rng(4).integers(1, 50, size=200).astype(float)
    data = topic_data(phi, freq, np.zeros(5), 10)
    shares = np.asarray(data["share"])
    assert len(data["term_topics"]) == len(data["words"])
    for w, pairs in zip(data["words"], data["term_topics"]):
        expected = shares * phi[:, w] / (shares * phi[:, w]).sum()
        got = np.zeros(5)
        got[np.asarray(pairs[0::2], dtype=int)] = pairs[1::2]
        kept = expected >= TERM_TOPIC_FLOOR
        assert got[kept] == pytest.approx(expected[kept], abs=5e-5)
        assert not got[~kept].any()


def test_topics_are_numbered_from_one():
    assert [topic_number(k) for k in range(3)] == [1, 2, 3]
    assert [topic_row(n, 3) for n in (1, 2, 3)] == [0, 1, 2]
    assert topic_columns(3) == ["topic_1", "topic_2", "topic_3"]
    for bad in (0, 4, -1):
        with pytest.raises(ValueError, match="topics are numbered 1 to 3"):
            topic_row(bad, 3)
