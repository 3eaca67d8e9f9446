"""Helpers of the deep-LDA tests: random networks and documents for the kernel, the planted
PGBN corpus of ALGORITHMS.md §1.6/§8 oracle (g), and configs."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from tests.fixtures import planted_topics, write_token_store
from tests.reference import dlda as ref
from topictk.inference.registry import load_config


def random_phis(rng, n_words: int, layers: list[int]) -> list[np.ndarray]:
    phis, rows = [], n_words
    for k in layers:
        p = rng.random((rows, k)) + 0.05
        phis.append(p / p.sum(axis=0))
        rows = k
    return phis


def random_csr(rng, n_docs: int, n_words: int, max_entries: int = 6, max_count: int = 4):
    """CSR rows with ascending word ids; some rows are empty."""
    indptr, indices, counts = [0], [], []
    for _ in range(n_docs):
        n = int(rng.integers(0, max_entries + 1))
        words = np.sort(rng.choice(n_words, size=min(n, n_words), replace=False))
        indices += list(words)
        counts += list(rng.integers(1, max_count + 1, size=words.size))
        indptr.append(len(indices))
    return (np.array(indptr, np.int64), np.array(indices, np.int32),
            np.array(counts, np.int32))


def flat(phis) -> np.ndarray:
    return np.concatenate([p.ravel() for p in phis])


def sizes_of(phis) -> np.ndarray:
    return np.array([phis[0].shape[0]] + [p.shape[1] for p in phis], np.int64)


def n_stats(phis) -> int:
    return sum(p.size for p in phis) + phis[-1].shape[1]


def pcg(seed: int, n: int) -> list:
    return [np.random.PCG64([seed, c]) for c in range(n)]


def gens(seed: int, n: int) -> list:
    return [np.random.Generator(np.random.PCG64([seed, c])) for c in range(n)]


def initial_state(n_docs: int, layers: list[int]):
    theta = np.concatenate([np.full((n_docs, k), 1.0 / k) for k in layers], axis=1)
    return theta, np.ones((n_docs, len(layers)))


def pgbn_corpus(seed: int, layers=(8, 4), n_words: int = 100, n_docs: int = 2000,
                mean_length: float = 80, separation: float = 0.05):
    """Documents from a PGBN with planted, well-separated Phi^(1) (§1.6 topics as columns),
    random Dirichlet upper layers, r = 1 and unit rates; document lengths Pois(xi) as in
    §1.6 (the rates only set the topic proportions). Returns (docs, planted (K_1, V))."""
    rng = np.random.default_rng(seed)
    planted = planted_topics(layers[0], n_words, separation)          # (K_1, V)
    phis, rows = [planted.T], layers[0]
    for k in layers[1:]:
        phis.append(rng.dirichlet(np.full(rows, 0.3), size=k).T)      # (K_{l-1}, K_l)
        rows = k
    theta = rng.gamma(np.ones((n_docs, layers[-1])))
    for p in reversed(phis[1:]):
        theta = rng.gamma(theta @ p.T)
    theta = np.maximum(theta, 1e-300)
    props = theta / theta.sum(axis=1, keepdims=True)
    word_dist = props @ planted                                        # (D, V)
    docs = []
    for j in range(n_docs):
        n = max(1, int(rng.poisson(mean_length)))
        cdf = np.cumsum(word_dist[j])
        u = rng.random(n) * cdf[-1]
        docs.append(np.minimum(np.searchsorted(cdf, u, side="right"), n_words - 1)
                    .astype(np.int32))
    return docs, planted


def write_split_store(path: Path, docs: list[np.ndarray], n_words: int, n_test: int) -> Path:
    """The last ``n_test`` documents become test documents split 80/20 in token order."""
    train, test = docs[:-n_test], docs[-n_test:]
    obs = [d[: int(np.ceil(0.8 * d.size))] for d in test]
    held = [d[int(np.ceil(0.8 * d.size)):] for d in test]
    return write_token_store(path, train, n_words, test_observed=obs, test_heldout=held)


def dlda_config(store: Path, out: Path, algorithm: str, layers: list[int], *,
                iterations: int = 20, model: dict | None = None, training: dict | None = None,
                **inference):
    inf = {"algorithm": algorithm, "iterations": iterations,
           "point_perplexity": {"iterations": 20, "last": 10, "thin": 2}}
    if algorithm != "dlda-gibbs":
        inf.update({"batch_size": 40, "local_burn_in": 6, "local_samples": 4})
    inf.update(inference)
    train = {"seed": 5, "eval_every": 5, "checkpoint_every": 10}
    train.update(training or {})
    return load_config(None, raw={
        "corpus": str(store), "output": str(out),
        "model": {"family": "dlda", "layers": list(layers), **(model or {})},
        "inference": inf, "training": train})


__all__ = ["ref"]
