"""Fixtures of the variational-family tests: the planted corpus of docs/algorithms.md §1.6 as a
store, small random CSR blocks, and helpers that build configs and run drivers directly."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.fixtures import planted_corpus, write_token_store
from topictk.corpus.store import CorpusStore
from topictk.inference.registry import get_driver, load_config
from topictk.streams import Streams

N_TRAIN = 450


@pytest.fixture(scope="session")
def planted():
    """The §1.6 defaults: K* = 5, V = 50, D = 500, xi = 80, alpha* = 0.2 (corpus seed 0)."""
    return planted_corpus(0)


@pytest.fixture(scope="session")
def planted_store(planted, tmp_path_factory) -> Path:
    """450 training documents; the other 50 are test documents split 80/20."""
    path = tmp_path_factory.mktemp("planted") / "store"
    test = planted.docs[N_TRAIN:]
    cut = [int(np.ceil(0.8 * d.size)) for d in test]
    return write_token_store(path, planted.docs[:N_TRAIN], 50,
                             test_observed=[d[:c] for d, c in zip(test, cut)],
                             test_heldout=[d[c:] for d, c in zip(test, cut)])


def random_docs(rng: np.random.Generator, n_docs: int, n_words: int, max_len: int = 12,
                single: int = 2) -> list[np.ndarray]:
    """Random token lists; the first ``single`` documents have exactly one token."""
    docs = []
    for d in range(n_docs):
        length = 1 if d < single else int(rng.integers(2, max_len + 1))
        docs.append(rng.integers(0, n_words, size=length).astype(np.int32))
    return docs


def random_csr(rng: np.random.Generator, n_docs: int, n_words: int, max_pairs: int = 10,
               max_count: int = 4):
    """A random CSR block (indptr int64, indices int32 ascending per row, counts int32)."""
    indptr, indices, counts = [0], [], []
    for _ in range(n_docs):
        ws = np.sort(rng.choice(n_words, size=int(rng.integers(1, max_pairs + 1)),
                                replace=False))
        indices.extend(ws)
        counts.extend(rng.integers(1, max_count + 1, size=ws.size))
        indptr.append(len(indices))
    return (np.array(indptr, np.int64), np.array(indices, np.int32), np.array(counts, np.int32))


def make_config(corpus: Path, output: Path, algorithm: str, topics: int = 5,
                iterations: int = 10, **sections):
    raw = {"corpus": str(corpus), "output": str(output),
           "model": {"topics": topics, **sections.get("model", {})},
           "inference": {"algorithm": algorithm, "iterations": iterations,
                         **sections.get("inference", {})},
           "training": {"eval_every": 0, "checkpoint_every": 0,
                        **sections.get("training", {})},
           "evaluation": dict(sections.get("evaluation", {}))}
    return load_config(None, raw=raw)


def run_driver(config, steps: int, *, threads: int = 1, seed: int = 0, each=None):
    """Driver and state after ``steps`` steps; ``each(driver, state, t)`` after every step."""
    store = CorpusStore.open(config.corpus)
    driver = get_driver(config.inference.algorithm)(config, store, threads, streams=Streams(seed))
    state = driver.init_state()
    for t in range(steps):
        driver.step(state, t)
        driver.check_state(state)
        if each is not None:
            each(driver, state, t)
    return driver, state


def best_of_three(config, steps: int, seed: int, each=None):
    """Driver and state of the one of three initialisations (seeds ``seed``, ``seed + 1000``,
    ``seed + 2000``) with the lowest held-out perplexity. Batch VB, CVB and SVI can end in a
    local optimum with two planted topics merged (VB: 2 of 10 seeds on the planted corpus, CVB
    1 of 10, matched L1 0.11 to 0.62 instead of 0.07); choosing among restarts by held-out
    perplexity is the usual remedy, and it uses no knowledge of the planted topics."""
    from topictk.inference.base import EvaluationSet
    from topictk.inference.perplexity import heldout_perplexity

    best = None
    for s in (seed, seed + 1000, seed + 2000):
        driver, state = run_driver(config, steps, seed=s, each=each)
        test = EvaluationSet.from_store(driver.store)
        ppl = heldout_perplexity(driver, state, test, None, 0)["perplexity"]
        if best is None or ppl < best[0]:
            best = (ppl, driver, state)
    return best[1], best[2]
