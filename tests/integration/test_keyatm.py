"""The keyword topic model (``model.family: keyatm``, docs/algorithms.md §2.13) through the
command line on the example corpus: keyword topics keep their seed words among their top
words, a resumed chain is the uninterrupted one, threads change no number, and on a planted
corpus the switch share pi-hat comes out near the share planted."""
from __future__ import annotations

import json

import numpy as np

from tests.fixtures import write_token_store
from tests.integration._cli import (assert_resumed_and_threaded_runs_equal, model_arrays, ok,
                                    write_config)

SEEDS = {"exceptions": ["exception", "raised", "raise", "try"],
         "dictionaries": ["dictionary", "key", "keys", "mapping", "hash"],
         "numbers": ["number", "integer", "numeric", "float", "numbers"]}


def _config(tmp_path, store, name, **sections):
    model = {"family": "keyatm", "topics": 8, "seed_words": SEEDS, **sections.pop("model", {})}
    inference = {"chunks": 1, **sections.pop("inference", {})}
    return write_config(tmp_path, store, f"{name}.yaml", output=str(tmp_path / name),
                        model=model, inference=inference, **sections)


def test_keyword_topics_keep_their_seeds(example_store, tmp_path):
    """After 100 sweeps each keyword topic holds at least two of its seed words among its 10
    top words, and its label; an LDA run with the same seed does not put them there (topic
    i of LDA is no particular topic)."""
    ok("train", "--config", _config(tmp_path, example_store, "k",
                                    inference={"iterations": 100}), "-q")
    topics = json.loads(ok("topics", tmp_path / "k", "--top", "10", "--format", "json").stdout)
    rows = topics["topics"] if isinstance(topics, dict) else topics
    for i, (label, seeds) in enumerate(SEEDS.items()):
        words = rows[i]["words"]
        words = [w["word"] if isinstance(w, dict) else w[0] for w in words]
        assert len(set(words) & set(seeds)) >= 2, (label, words)
    _, arrays = model_arrays(tmp_path / "k")
    assert arrays["nkey_k"].sum() > 0 and arrays["s"].any()


def test_resumed_equals_uninterrupted_and_threads_change_nothing(example_store, tmp_path):
    """Two AD-LDA chunks: the run cut back to its checkpoint at step 20 and resumed ends where
    the whole run ends, z, s, every count and every stream; two threads give the same run."""
    assert_resumed_and_threaded_runs_equal(
        lambda name, **sections: _config(tmp_path, example_store, name, **sections), tmp_path)


def test_planted_switch_share_is_recovered(tmp_path):
    """Documents from two keyword topics whose tokens come from their 5 seed words with
    probability pi = 0.3 (else from 20 regular words of their own): pi-hat_k =
    (n~_k + 1) / (n_k + n~_k + 2) within 0.06 of 0.3. The bound: a seed word also has mass
    in the regular distribution (beta), so the sampler may count a seed token as regular; with
    3,000 tokens per topic the binomial noise alone is about 0.008."""
    rng = np.random.default_rng(4)
    V, pi = 5 * 2 + 20 * 2, 0.3
    docs = []
    for d in range(120):
        k = d % 2
        n = 50
        key = rng.random(n) < pi
        seeds = rng.integers(0, 5, n) + 5 * k
        regular = rng.integers(0, 20, n) + 10 + 20 * k
        docs.append(np.where(key, seeds, regular).astype(np.int32))
    vocab = [f"w{i}" for i in range(V)]
    store = write_token_store(tmp_path / "store", docs, V, vocab=vocab)
    seed_words = {"a": vocab[0:5], "b": vocab[5:10]}
    ok("train", "--config", write_config(
        tmp_path, store, "p.yaml", output=str(tmp_path / "p"),
        model={"family": "keyatm", "topics": 2, "seed_words": seed_words, "alpha": 0.1},
        inference={"iterations": 200, "chunks": 1, "burn_in": 100, "thin": 50},
        training={"eval_every": 0}), "-q")
    _, arrays = model_arrays(tmp_path / "p")
    nk, nkey_k = arrays["nk"][:2], arrays["nkey_k"]
    share = (nkey_k + 1.0) / (nk + nkey_k + 2.0)
    assert np.all(np.abs(share - pi) < 0.06), share
