"""``topictk topics`` ranks words of exactly equal probability by word id (their line in the
store's vocab.txt), and numbers the topics from 1."""
from __future__ import annotations

import json

import numpy as np

from tests.integration._cli import ok
from topictk.evaluation.run import LoadedRun


def test_topics_rank_tied_words_by_word_id(report_runs):
    run = report_runs["gibbs"]
    loaded = LoadedRun(run)
    vocab = list(loaded.store.vocab)
    ids = {word: i for i, word in enumerate(vocab)}
    phi = np.asarray(loaded.topic_word(), dtype=np.float64)
    out = ok("topics", run, "--top", str(len(vocab)), "--format", "json").stdout
    table = json.loads(out)["topics"]
    assert [t["topic"] for t in table] == list(range(1, phi.shape[0] + 1))
    ties = 0
    for t, row in zip(table, phi):
        listed = [(w["probability"], ids[w["word"]]) for w in t["words"]]
        # a Gibbs topic of a small corpus: hundreds of words with the same count, so the same
        # probability; each run of equal probabilities is in ascending word id
        assert listed == sorted(listed, key=lambda pw: (-pw[0], pw[1]))
        assert [i for _, i in listed] == np.lexsort((np.arange(row.size), -row)).tolist()
        ties += sum(a[0] == b[0] for a, b in zip(listed, listed[1:]))
    assert ties > 1000
