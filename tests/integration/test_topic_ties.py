"""``topictk topics`` ranks words of exactly equal probability by word id (their line in the
store's vocab.txt), and numbers the topics from 1."""
from __future__ import annotations

import json

import numpy as np

from tests.integration._cli import REPO, ok
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


def test_hard_particle_em_ranks_words_by_their_exact_counts(tmp_path, example_store):
    """Particle EM at T = 0 assigns every token to one topic: phi_kw = n_kw / n_k with n_kw
    exact integer counts, so words of equal counts have bitwise equal phi and ``topics`` lists
    them by word id, the same at 1 and 2 threads (no rounding decides their order)."""
    outs = []
    for threads in (1, 2):
        run = tmp_path / f"pem-{threads}"
        ok("train", "--config", REPO / "configs" / "example_pem.yaml", "--out", run, "-q",
           "--set", f"corpus={example_store}", "--set", "inference.temperature=0",
           "--set", "inference.iterations=6", "--set", f"training.threads={threads}")
        outs.append(json.loads(ok("topics", run, "--top", "60", "--format", "json").stdout))
    assert outs[0]["topics"] == outs[1]["topics"]
    loaded = LoadedRun(tmp_path / "pem-1")
    ids = {word: i for i, word in enumerate(loaded.store.vocab)}
    phi = np.asarray(loaded.topic_word(), dtype=np.float64)
    unit = np.where(phi > 1e-90, phi, np.inf).min(axis=1, keepdims=True)   # 1 / n_k
    counts = np.round(phi / unit)                   # the hard counts (each topic's rarest: 1)
    np.testing.assert_allclose(phi / unit, counts, rtol=0, atol=1e-9)
    ties = 0
    for t, row in zip(outs[0]["topics"], counts):
        listed = [ids[w["word"]] for w in t["words"]]
        assert listed == np.lexsort((np.arange(row.size), -row))[:60].tolist()
        ties += sum(row[a] == row[b] for a, b in zip(listed, listed[1:]))
    assert ties > 50
