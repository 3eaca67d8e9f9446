"""The variational drivers on the training spine: resume, refused resumes, evaluation on the
same held-out tokens (Protocols A and B), the example configs."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from tests.fixtures import write_token_store
from tests.integration._cli import EXAMPLE
from tests.variational.conftest import make_config, random_docs
from topictk.cli import cli
from topictk.corpus.store import CorpusStore
from topictk.errors import UsageError
from topictk.evaluation.run import LoadedRun, evaluate_run
from topictk.inference import base as inference_base
from topictk.rundir import checkpoint as ckpt
from topictk.training.run import train

ROOT = Path(__file__).resolve().parents[2]
ALGORITHMS = {
    "vb": {"model": {"alpha": "auto"}, "inference": {"tol": 0}},
    "cvb": {"inference": {"chunks": 2, "refresh_every": 3, "check_every": 2, "tol": 1e-12}},
    "cvb0": {"inference": {"refresh_every": 3, "check_every": 2, "tol": 1e-12}},
    "ovb": {"model": {"alpha": "auto"},
            "inference": {"batch_size": 100, "tau0": 1.0, "learn_eta": True}},
}


def _arrays(run_dir: Path) -> tuple[dict, dict]:
    header, arrays = ckpt.load_arrays(run_dir / "model.npz")
    return header, arrays


@pytest.mark.parametrize("algorithm", sorted(ALGORITHMS))
def test_resume_equals_uninterrupted(planted_store, tmp_path, algorithm):
    """Stopped at step 7 (mid-epoch for ovb: 4 batches per epoch) and resumed to 11 gives the
    bitwise state, streams and metrics of an uninterrupted run."""
    sections = {k: dict(v) for k, v in ALGORITHMS[algorithm].items()}
    sections["training"] = {"eval_every": 2, "checkpoint_every": 3, "threads": 2}
    full = make_config(planted_store, tmp_path / "full", algorithm, iterations=11, **sections)
    train(full, quiet=True)
    part = make_config(planted_store, tmp_path / "part", algorithm, iterations=7, **sections)
    train(part, quiet=True)
    rest = make_config(planted_store, tmp_path / "part", algorithm, iterations=11, **sections)
    train(rest, resume=True, quiet=True)
    (h1, a1), (h2, a2) = _arrays(tmp_path / "full"), _arrays(tmp_path / "part")
    assert h1["state"] == h2["state"] and h1["streams"] == h2["streams"]
    assert sorted(a1) == sorted(a2)
    for name in a1:
        assert np.array_equal(a1[name], a2[name]), name

    def metrics(run):
        rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
        return [{k: v for k, v in r.items() if not k.endswith("seconds")} for r in rows]

    full_rows = metrics(tmp_path / "full")
    steps = {r["step"] for r in full_rows}       # the stopped run also logged its last step 7
    assert full_rows == [r for r in metrics(tmp_path / "part") if r["step"] in steps]


@pytest.mark.parametrize("change", ["algorithm", "topics"])
def test_resume_with_other_algorithm_or_k_is_refused(planted_store, tmp_path, change):
    train(make_config(planted_store, tmp_path / "run", "vb", topics=5, iterations=2,
                      training={"checkpoint_every": 1}), quiet=True)
    algorithm, topics = ("cvb0", 5) if change == "algorithm" else ("vb", 7)
    other = make_config(planted_store, tmp_path / "run", algorithm, topics=topics, iterations=4)
    with pytest.raises(UsageError) as err:
        train(other, resume=True, quiet=True)
    text = str(err.value)
    if change == "algorithm":
        assert "inference.algorithm = vb" in text and "cvb0" in text
    else:
        assert "model.topics = 5" in text and "7" in text


@pytest.mark.parametrize("algorithm", ["vb", "ovb", "cvb", "cvb0"])
def test_uniform_topics_give_perplexity_v(planted_store, tmp_path, algorithm):
    """§11 oracle (a): phi-hat = 1/V gives perplexity exactly V."""
    cfg = make_config(planted_store, tmp_path / "run", algorithm, iterations=1,
                      inference={"batch_size": 10} if algorithm == "ovb" else {})
    run = _state_with_uniform_topics(cfg)
    driver, state = run
    probs = driver.heldout_probabilities(state, None,
                                         inference_base.EvaluationSet.from_store(driver.store), 0)
    assert np.allclose(probs, 1 / 50, rtol=1e-12)


def _state_with_uniform_topics(cfg):
    from topictk.inference.registry import get_driver
    from topictk.streams import Streams

    store = CorpusStore.open(cfg.corpus)
    driver = get_driver(cfg.inference.algorithm)(cfg, store, 1, streams=Streams(0))
    state = driver.init_state()
    name = cfg.inference.algorithm
    if name == "vb":
        state.lam[...] = 3.0
    elif name == "ovb":
        state.lam_tilde[...] = 3.0
        state.lam_sum = state.lam_tilde.sum(axis=0)
    else:
        state.m_kw[...] = 2.0
        state.m_k[...] = 2.0 * driver.V
    return driver, state


def test_evaluate_compares_every_algorithm_on_the_same_tokens(planted_store, tmp_path):
    """gibbs, vb, cvb, cvb0 and ovb scored on the same held-out tokens: all well below the
    uniform V = 50 and within a few percent of each other on the planted corpus."""
    settings = {"gibbs": {}, "vb": {}, "cvb": {}, "cvb0": {},
                "ovb": {"inference": {"batch_size": 32, "tau0": 1.0}}}
    results = {}
    for algorithm, sections in settings.items():
        iterations = 300 if algorithm == "ovb" else 60
        cfg = make_config(planted_store, tmp_path / algorithm, algorithm, iterations=iterations,
                          **sections)
        train(cfg, quiet=True)
        results[algorithm] = evaluate_run(tmp_path / algorithm)
    tokens = {r["heldout_tokens"] for r in results.values()}
    assert len(tokens) == 1
    ppl = {a: r["perplexity"] for a, r in results.items()}
    assert max(ppl.values()) < 30 and max(ppl.values()) / min(ppl.values()) < 1.05, ppl


# ----------------------------------------------------------------------------- Protocol B
def _protocol_b_store(tmp_path: Path, seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    words = ["w" + chr(97 + i // 26) + chr(97 + i % 26) for i in range(30)]
    lines = [" ".join(words[j] for j in rng.integers(0, 30, size=int(rng.integers(1, 25))))
             for _ in range(80)]
    lines[0] = words[7]                           # a one-token training document
    source = tmp_path / "docs.txt"
    source.write_text("\n".join(lines) + "\n")
    store = tmp_path / "store"
    result = CliRunner().invoke(cli, ["prepare", str(source), "--out", str(store),
                                      "--test-docs", "0.1", "--heldout-train-fraction", "0.1",
                                      "--stopwords", "none"])
    assert result.exit_code == 0, result.output
    assert "protocol B:" in result.output
    return store


def test_protocol_b_store_layout(tmp_path):
    store = CorpusStore.open(_protocol_b_store(tmp_path))
    held = store.train_heldout()
    train = store.train()
    assert held is not None and held.n_docs == train.n_docs
    assert store.manifest["split"]["heldout_train_fraction"] == 0.1
    assert store.manifest["counts"]["train_heldout_tokens"] == held.n_tokens > 0
    lengths = np.diff(np.asarray(train.doc_ptr)) + np.diff(np.concatenate(
        [[0], np.cumsum(held.counts)])[np.asarray(held.indptr)])
    # n_obs = ceil(0.9 N_d): every training document keeps an observed token
    assert np.all(np.diff(np.asarray(train.doc_ptr)) >= 1)
    assert np.all(np.diff(np.asarray(train.doc_ptr)) == np.ceil(0.9 * lengths - 1e-9))


def test_protocol_b_vocabulary_is_learnable_from_observed_tokens(tmp_path):
    """Every word of a Protocol B store has an observed training token: one seen only in the
    held-out parts is dropped with its tokens, so an unsmoothed point estimate never scores
    tokens of a word it could not learn.

    Which words those are follows from the split of §11.1, redone here on the store prepared
    without Protocol B (same seed, so the same vocabulary and training documents): generator
    default_rng(SeedSequence(seed, spawn_key=(2,))), per document a permutation of its tokens,
    the first ceil(0.9 N_d) observed."""
    plain = tmp_path / "plain"
    assert CliRunner().invoke(cli, ["prepare", str(EXAMPLE), "--out", str(plain)]).exit_code == 0
    before = CorpusStore.open(plain)
    train_docs = before.train()
    ptr, words = np.asarray(train_docs.doc_ptr), np.asarray(train_docs.words)
    rng = np.random.default_rng(np.random.SeedSequence(0, spawn_key=(2,)))
    seen = np.zeros(before.n_words, dtype=bool)
    held_tokens = np.zeros(before.n_words, dtype=np.int64)
    for d in range(ptr.size - 1):
        tokens = words[ptr[d]:ptr[d + 1]]
        order = rng.permutation(tokens.size)
        n_obs = min(tokens.size, int(np.ceil(0.9 * tokens.size - 1e-9)))
        seen[tokens[order[:n_obs]]] = True
        held_tokens += np.bincount(tokens[order[n_obs:]], minlength=before.n_words)
    n_unseen = int((~seen).sum())
    assert n_unseen > 0                       # the case is exercised on this corpus

    out = tmp_path / "store"
    result = CliRunner().invoke(cli, ["prepare", str(EXAMPLE), "--out", str(out),
                                      "--heldout-train-fraction", "0.1"])
    assert result.exit_code == 0, result.output
    store = CorpusStore.open(out)
    assert store.n_words == before.n_words - n_unseen
    observed = np.bincount(np.asarray(store.train().words), minlength=store.n_words)
    assert observed.min() >= 1
    counts = store.manifest["counts"]
    assert counts["unobserved_words_dropped"] == n_unseen
    assert counts["train_heldout_tokens_dropped"] == int(held_tokens[~seen].sum())
    assert f"{n_unseen} word(s) occur only in the held-out part" in result.output
    held = store.train_heldout()
    assert held.n_tokens == counts["train_heldout_tokens"]
    assert int(np.asarray(held.indices).max()) < store.n_words


def test_stores_without_protocol_b_still_open(planted_store):
    store = CorpusStore.open(planted_store)
    assert store.train_heldout() is None


@pytest.mark.parametrize("algorithm", ["gibbs", "vb", "cvb", "cvb0", "ovb"])
def test_evaluate_reports_protocol_b(tmp_path, algorithm):
    store = _protocol_b_store(tmp_path)
    inference = {"batch_size": 16} if algorithm == "ovb" else {}
    cfg = make_config(store, tmp_path / "run", algorithm, topics=3, iterations=20,
                      inference=inference)
    train(cfg, quiet=True)
    result = evaluate_run(tmp_path / "run")
    assert result["train_heldout_tokens"] == CorpusStore.open(store).train_heldout().n_tokens
    assert 1 < result["perplexity_train_heldout"] < 60
    assert result["train_heldout_floored_tokens"] == 0


@pytest.mark.parametrize("algorithm", ["gibbs", "vb", "cvb0", "ovb"])
def test_protocol_b_perplexity_is_logged_during_training(tmp_path, algorithm):
    """metrics.jsonl carries the training documents' held-out perplexity at every evaluation;
    it is the point estimate evaluate gives for the same state, and logging it leaves the
    chain alone (a run without evaluations ends in the same state)."""
    import json

    from topictk.inference.perplexity import train_heldout_perplexity

    store = _protocol_b_store(tmp_path)
    inference = {"batch_size": 16} if algorithm == "ovb" else {}
    runs = {}
    for every in (5, 0):
        cfg = make_config(store, tmp_path / f"run{every}", algorithm, topics=3, iterations=20,
                          inference=inference, training={"eval_every": every})
        train(cfg, quiet=True)
        runs[every] = LoadedRun(tmp_path / f"run{every}")
    lines = [json.loads(line) for line in
             (tmp_path / "run5" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in lines] == [5, 10, 15, 20]
    assert all(1 < r["perplexity_train_heldout_point"] < 60 for r in lines)
    run = runs[5]
    final = train_heldout_perplexity(run.driver, run.state, run.store, None)
    assert lines[-1]["perplexity_train_heldout_point"] == pytest.approx(
        final["perplexity_train_heldout"], rel=1e-12)
    a, b = runs[5].driver.state_to_arrays(runs[5].state)[1], \
        runs[0].driver.state_to_arrays(runs[0].state)[1]
    assert a.keys() == b.keys()
    for key in a:
        np.testing.assert_array_equal(a[key], b[key])


def test_protocol_b_uses_the_training_state(tmp_path):
    """VB and CVB score training documents with their own theta-hat from training."""
    store = _protocol_b_store(tmp_path)
    for algorithm in ("vb", "cvb0"):
        cfg = make_config(store, tmp_path / algorithm, algorithm, topics=3, iterations=10)
        train(cfg, quiet=True)
        run = LoadedRun(tmp_path / algorithm)
        held = run.store.train_heldout()
        p = run.driver.train_heldout_probabilities(run.state, [], held)
        rows = np.repeat(np.arange(held.n_docs), np.diff(np.asarray(held.indptr)))
        expected = np.einsum("jk,jk->j", run.state.theta()[rows],
                             run.state.phi()[np.asarray(held.indices)])
        assert np.allclose(p, expected, rtol=1e-12)


def test_bad_heldout_train_fraction_is_refused(tmp_path):
    source = tmp_path / "docs.txt"
    source.write_text("alpha beta gamma\n")
    result = CliRunner().invoke(cli, ["prepare", str(source), "--out", str(tmp_path / "s"),
                                      "--heldout-train-fraction", "1.5"])
    assert result.exit_code == 2
    assert "--heldout-train-fraction must be in (0, 1); got 1.5" in result.output


# ------------------------------------------------------------------------- example configs
@pytest.mark.parametrize("algorithm", ["vb", "cvb", "cvb0", "ovb"])
def test_example_configs_validate_and_run(tmp_path, algorithm):
    from topictk.inference.registry import load_config

    rng = np.random.default_rng(1)
    store = write_token_store(tmp_path / "store", random_docs(rng, 60, 40), 40,
                              test_observed=random_docs(rng, 5, 40),
                              test_heldout=random_docs(rng, 5, 40))
    path = ROOT / "configs" / f"example_{algorithm}.yaml"
    cfg = load_config(path, [f"corpus={store}", f"output={tmp_path / 'run'}",
                             "inference.iterations=5", "training.eval_every=5"])
    assert cfg.inference.algorithm == algorithm
    result = train(cfg, quiet=True)
    assert result.status == "completed" and np.isfinite(result.perplexity)
