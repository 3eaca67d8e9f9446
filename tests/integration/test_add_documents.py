"""``topictk train --continue RUN --add STORE --out NEWRUN``: the union store, the grown state
of every family that can add documents (deterministic, resumable, the same at two threads),
what is refused, and that RUN and both stores are only read."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml

from tests.fixtures import cut_back_run
from tests.integration._cli import (EXAMPLE, assert_same_run, fails, metrics, model_arrays,
                                    ok, snapshot)
from topictk.corpus.store import CorpusStore, verify_store
from topictk.inference.registry import get_driver
from topictk.rundir.checkpoint import load_arrays

# the example corpus: its first 270 lines are the run's documents, the other 71 the added
BASE_LINES = 270

# the families that grow a state, as configs: (inference section, extra training keys)
FAMILIES = {
    "gibbs-sparse": {"algorithm": "gibbs", "burn_in": 20, "thin": 10},
    "gibbs-dense": {"algorithm": "gibbs", "sampler": "dense", "chunks": 2},
    "gibbs-mh": {"algorithm": "gibbs", "sampler": "mh", "chunks": 2, "mh_rebuild": 3},
    "gibbs-warp": {"algorithm": "gibbs", "sampler": "warp", "chunks": 2},
    "vb": {"algorithm": "vb", "chunks": 2},
    # topics without a prior: the new words are dropped (tol 0: every EM iteration runs)
    "vb-unsmoothed": {"algorithm": "vb", "smoothed": False, "chunks": 2, "tol": 0},
    "pem": {"algorithm": "pem", "particles": 3, "particle_offset": 1, "tol": 0,
            "temperature": 0.5, "anneal_steps": 40},
    "cvb": {"algorithm": "cvb", "chunks": 2},
    "cvb0": {"algorithm": "cvb0", "chunks": 2},
    "ovb": {"algorithm": "ovb", "batch_size": 32, "chunks": 2},
    "hsvg": {"algorithm": "hsvg", "batch_size": 32, "chunk_docs": 8},
    "sgrld": {"algorithm": "sgrld", "batch_size": 32, "thin": 5},
    "keyatm": {"algorithm": "gibbs", "chunks": 2, "model": {
        "family": "keyatm", "seed_words": {"exceptions": ["exception", "raised", "raise"],
                                           "numbers": ["number", "integer", "float"]}}},
    "hdp": {"algorithm": "gibbs", "chunks": 2, "model": {"family": "hdp", "topics": 12}},
    "hdp-mh": {"algorithm": "gibbs", "sampler": "mh", "chunks": 2,
               "model": {"family": "hdp", "topics": 12}},
    "hdp-warp": {"algorithm": "gibbs", "sampler": "warp", "chunks": 2,
                 "model": {"family": "hdp", "topics": 12}},
    **{name: {"algorithm": name, "batch_size": 32, "local_burn_in": 10, "local_samples": 6,
              "point_perplexity": {"iterations": 20, "last": 10, "thin": 2, "every": 100},
              "model_only": {"family": "dlda", "layers": [8, 4], "eta": "auto"}}
       for name in ("tlasgr", "tlfsgr", "dlda-sgrld")},
    "dlda-gibbs": {"algorithm": "dlda-gibbs", "chunks": 4,
                   "point_perplexity": {"iterations": 20, "last": 10, "thin": 2, "every": 100},
                   "model_only": {"family": "dlda", "layers": [8, 4], "eta": "auto"}},
}
# the families that save posterior samples (compared file by file)
SAMPLED = {"gibbs-sparse", "sgrld"}
# the families whose topics have no prior to give a new word
NO_PRIOR = ("pem", "vb-unsmoothed")
# a line of words no other document has, all new to the run's vocabulary
NOVEL_LINE = "zorblat quenvix zorblat"


@pytest.fixture(scope="module")
def stores(tmp_path_factory) -> dict[str, Path]:
    """The run's store (a test split), the added store (no test split), one of the added
    documents prepared with another --min-length, and one whose last document has only new
    words and whose documents keep held-out tokens (Protocol B)."""
    folder = tmp_path_factory.mktemp("add")
    lines = EXAMPLE.read_text(encoding="utf-8").splitlines(keepends=True)
    (folder / "old.txt").write_text("".join(lines[:BASE_LINES]), encoding="utf-8")
    (folder / "new.txt").write_text("".join(lines[BASE_LINES:]), encoding="utf-8")
    (folder / "novel.txt").write_text("".join(lines[BASE_LINES:]) + NOVEL_LINE + "\n",
                                      encoding="utf-8")
    ok("prepare", folder / "old.txt", "--out", folder / "base")
    ok("prepare", folder / "new.txt", "--out", folder / "added", "--test-docs", "0")
    ok("prepare", folder / "new.txt", "--out", folder / "added-min2", "--test-docs", "0",
       "--min-length", "2")
    ok("prepare", folder / "new.txt", "--out", folder / "added-test")
    ok("prepare", folder / "new.txt", "--out", folder / "added-case", "--test-docs", "0",
       "--case", "keep")
    ok("prepare", folder / "novel.txt", "--out", folder / "added-novel", "--test-docs", "0",
       "--heldout-train-fraction", "0.2")
    return {"folder": folder, "base": folder / "base", "added": folder / "added",
            "added-min2": folder / "added-min2", "added-test": folder / "added-test",
            "added-case": folder / "added-case", "added-novel": folder / "added-novel"}


def write_run_config(folder: Path, store: Path, inference: dict, name: str = "run",
                     iterations: int = 30, **training) -> Path:
    path = folder / f"{name}.yaml"
    inference = dict(inference)
    model = {"topics": 5, "alpha": 0.1, "beta": 0.01, **inference.pop("model", {})}
    model = inference.pop("model_only", model)          # deep LDA: a model of its own
    data = {"corpus": str(store), "output": str(folder / name), "model": model,
            "inference": {**inference, "iterations": iterations},
            "training": {"seed": 3, "eval_every": 10, "checkpoint_every": 10,
                         "keep_checkpoints": 10, **training},
            "evaluation": {"fold_in_sweeps": 10, "fold_in_burn_in": 5}}
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def gibbs_run(stores) -> Path:
    folder = stores["folder"]
    ok("train", "--config", write_run_config(folder, stores["base"], FAMILIES["gibbs-sparse"]),
       "-q")
    return folder / "run"


def continue_args(run: Path, added: Path, out: Path, *more: str) -> list:
    return ["train", "--continue", run, "--add", added, "--out", out, "-q", *more]


def test_the_union_store_keeps_the_old_ids_and_test_split(stores, gibbs_run, tmp_path):
    ok(*continue_args(gibbs_run, stores["added"], tmp_path / "new",
                      "--set", "inference.iterations=1"))
    base, added = CorpusStore.open(stores["base"]), CorpusStore.open(stores["added"])
    union = CorpusStore.open(tmp_path / "new" / "corpus")
    verify_store(union.path)
    # old words keep their ids; the added store's new words follow, in its order
    V = base.n_words
    assert union.vocab[:V] == base.vocab
    known = set(base.vocab)
    assert union.vocab[V:] == [w for w in added.vocab if w not in known]
    assert union.vocab[V:], "the added documents bring no new word: the test proves nothing"
    # the run's documents first, token for token; then the added ones, word for word
    old, new, both = base.train(), added.train(), union.train()
    N = old.n_tokens
    assert np.array_equal(both.words[:N], old.words)
    assert [union.vocab[w] for w in both.words[N:]] == [added.vocab[w] for w in new.words]
    assert both.n_docs == old.n_docs + new.n_docs
    assert union.document_ids("train") == base.document_ids("train") + added.document_ids(
        "train")
    # the test split is the run's, unchanged
    for name in base.manifest["arrays"]:
        if name.startswith("test_"):
            assert np.array_equal(union.array(name), base.array(name)), name
    assert union.document_ids("test") == base.document_ids("test")
    facts = union.manifest["union"]
    assert facts["new_words"] == union.n_words - V and facts["added_documents"] == new.n_docs
    # the run's config names its store relatively, and the marker where it came from
    saved = yaml.safe_load((tmp_path / "new" / "config.yaml").read_text())
    assert saved["corpus"] == "corpus"
    origin = json.loads((tmp_path / "new" / "topictk-run.json").read_text())["continued_from"]
    assert origin["step"] == 30 and origin["corpus_id"] == union.corpus_id
    assert origin["run_corpus_id"] == base.corpus_id
    assert origin["added_corpus_id"] == added.corpus_id
    assert origin["new_words"] == {"words": facts["new_words"],
                                   "tokens": facts["new_word_tokens"], "dropped": False}
    assert not facts["new_words_dropped"]


def test_run_and_stores_are_only_read_and_a_moved_run_evaluates(stores, gibbs_run, tmp_path):
    inputs = [gibbs_run, stores["base"], stores["added"]]
    before = [snapshot(p) for p in inputs]
    out = ok(*continue_args(gibbs_run, stores["added"], tmp_path / "new",
                            "--set", "inference.iterations=10"))
    assert out.stdout.strip().startswith(f"{tmp_path / 'new'}: step 40")
    assert [snapshot(p) for p in inputs] == before
    shutil.move(tmp_path / "new", tmp_path / "moved")
    result = json.loads(ok("evaluate", tmp_path / "moved", "--json").stdout)
    assert result["step"] == 40 and np.isfinite(result["perplexity"])


def continue_three_ways(folder: Path, base: Path, added: Path, inference: dict,
                        sampled: bool) -> Path:
    """RUN (30 steps on ``base``) continued by 20 steps with ``added`` into ``folder/a``, again
    at two threads, and cut back to its checkpoint at step 40 and resumed: the three end in
    the same place. Returns RUN."""
    ok("train", "--config", write_run_config(folder, base, inference), "-q")
    run = folder / "run"
    more = ("--set", "inference.iterations=20")
    ok(*continue_args(run, added, folder / "a", *more))
    ok(*continue_args(run, added, folder / "b", *more, "--set", "training.threads=2"))
    assert_same_run(folder / "a", folder / "b", same_samples=sampled)
    cut_back_run(folder / "a", folder / "cut", 40)
    ok("train", "--config", folder / "cut" / "config.yaml", "--resume", "-q")
    assert_same_run(folder / "a", folder / "cut", same_samples=sampled)
    return run


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_a_continued_run_is_deterministic_resumable_and_thread_free(family, stores, tmp_path):
    """Continued twice (one and two threads) the run ends in the same place; cut back to the
    checkpoint 10 steps after RUN's step and resumed, it ends there too."""
    inference = FAMILIES[family]
    run = continue_three_ways(tmp_path, stores["base"], stores["added"], inference,
                              family in SAMPLED)
    header, arrays = model_arrays(tmp_path / "a")
    assert header["state"]["step"] == 50
    union = CorpusStore.open(tmp_path / "a" / "corpus")
    assert header["vocabulary"] == union.n_words and header["corpus_id"] == union.corpus_id
    # the grown start: the run's state for the run's documents, a fold-in for the added ones
    start_header, start = load_arrays(tmp_path / "a" / "checkpoints" / "step-00000030.npz")
    old_header, old = load_arrays(run / "model.npz")
    if "z" in old:
        N = old["z"].size
        assert np.array_equal(start["z"][:N], old["z"])
        assert start["z"].size == union.train().n_tokens
    if "s" in old:              # keyatm: the run's switches kept, the added tokens regular
        assert np.array_equal(start["s"][:N], old["s"]) and not start["s"][N:].any()
    if "pi" in old:             # hdp: the run's global draws go on
        assert np.array_equal(start["pi"], old["pi"])
        for key in ("concentration", "gamma"):
            assert start_header["state"][key] == old_header["state"][key]
    if family in NO_PRIOR:      # the topics kept whole: the union has no new words
        topics = "phi" if "phi" in old else "lam"
        assert union.n_words == old[topics].shape[0]
        assert np.array_equal(start[topics], old[topics])
    elif "lam" in old:
        V = old["lam"].shape[0]
        assert np.array_equal(start["lam"][:V], old["lam"])
        assert np.all(start["lam"][V:] == 0.01)         # the new words' rows: the prior
        assert start["lam"].shape[0] == union.n_words > V
    if "gamma" in old:          # vb, pem: the old documents' gamma kept, the added at a start
        D = old["gamma"].shape[-2]
        lengths = np.diff(union.train().doc_ptr)[D:].astype(float)
        cold = old["alpha"] + (lengths / 5)[:, None]
        assert start["gamma"].shape[-2] == union.train().n_docs > D
        assert np.array_equal(start["gamma"][..., :D, :], old["gamma"])
        assert np.array_equal(start["alpha"], old["alpha"])
        if old["gamma"].ndim == 2:
            assert np.allclose(start["gamma"][D:], cold)
    if "omega" in old:          # pem (particle_offset 1): every particle's start perturbed
        D = old["omega"].shape[0]
        assert np.array_equal(start["omega"][:D], old["omega"])
        assert np.all(start["omega"][D:] == 1 / 3)
        added = start["gamma"][:, D:] - old["alpha"]
        assert np.allclose(added.sum(axis=2), lengths)      # alpha + N_d e / e.
        for p in range(3):
            assert not np.allclose(added[p], (lengths / 5)[:, None]), p
        assert not np.allclose(added[0], added[1]) and not np.allclose(added[1], added[2])
        assert np.isnan(start["particle_bounds"]).all()
        state = start_header["state"]       # the stopping rule starts afresh (nan: null)
        assert state["bound"] is None and state["bound_prev"] is None and not state["converged"]
    if "mu" in old:
        assert np.array_equal(start["mu"][:old["mu"].shape[0]], old["mu"])
    if "phi_hat" in old:        # SGRLD: the new words' rows at beta; samples after RUN's step
        V = old["phi_hat"].shape[0]
        assert np.array_equal(start["phi_hat"][:V], old["phi_hat"])
        assert np.all(start["phi_hat"][V:] == 0.01) and start["phi_hat"].shape[0] > V
        steps = sorted(int(p.stem.split("-")[1]) for p in (tmp_path / "a" / "samples").glob("*"))
        assert steps == [35, 40, 45, 50]
    if "phi_1" in old:          # deep LDA: Phi^(1) grows, every other layer and r go on
        V = old["phi_1"].shape[0]
        assert start["phi_1"].shape[0] == union.n_words > V
        assert np.allclose(start["phi_1"].sum(axis=0), 1.0)
        for name in ("phi_2", "r", "theta_test", "racc"):
            assert np.array_equal(start[name], old[name]), name
        if "theta_train" in old:   # dlda-gibbs: the old chains go on, the new ones start
            D = old["theta_train"].shape[0]
            assert np.array_equal(start["theta_train"][:D], old["theta_train"])
            assert np.array_equal(start["c_train"][:D], old["c_train"])
            assert np.all(start["c_train"][D:] == 1) and start["theta_train"].shape[0] > D
            assert np.allclose(start["phi_1"][V:], 1 / union.n_words)
        elif "phi_hat_1" in old:
            assert np.array_equal(start["phi_hat_1"][:V], old["phi_hat_1"])
        else:   # the old rows scaled by one factor per topic, the new ones equal
            ratio = start["phi_1"][:V] / old["phi_1"]
            assert np.allclose(ratio, ratio[0]) and np.all(ratio < 1)
            assert np.allclose(start["phi_1"][V:], start["phi_1"][V])
            M = old["M_1"] if family == "tlasgr" else np.full(8, old["M_1"].mean())
            eta = 1 / 8             # eta: auto is 1 / K_1
            assert np.allclose(start["phi_1"][V], eta / (M + union.n_words * eta))
    if "lam_tilde" in old:      # lambda = offset + scale lam_tilde: the new rows at the offset
        V = old["lam_tilde"].shape[0]
        assert np.array_equal(start["lam_tilde"][:V], old["lam_tilde"])
        assert np.all(start["lam_tilde"][V:] == 0) and start["lam_tilde"].shape[0] > V
        # the step sizes go on: tau0 (auto) stays the run's batches per epoch
        kappa = yaml.safe_load((run / "config.yaml").read_text())["inference"]["kappa"]
        tau0 = CorpusStore.open(stores["base"]).train().n_docs // inference["batch_size"]
        for record in metrics(tmp_path / "a"):
            assert record["rho"] == pytest.approx((tau0 + record["step"] - 1) ** -kappa)


def test_adding_the_held_back_documents_scores_as_a_fresh_run(stores, tmp_path):
    """The run trained on the first documents, continued with the rest, is scored on the
    same held-out tokens as a fresh run on all of them (the union store) with as many sweeps
    in all: its perplexity is finite, within 10 % of the fresh run's, and below the run's
    before the documents were added (they are more of the same text)."""
    inference = FAMILIES["gibbs-sparse"]
    ok("train", "--config", write_run_config(tmp_path, stores["base"], inference,
                                             iterations=60), "-q")
    ok(*continue_args(tmp_path / "run", stores["added"], tmp_path / "continued",
                      "--set", "inference.iterations=60"))
    union = tmp_path / "continued" / "corpus"
    fresh = write_run_config(tmp_path, union, {**inference, "burn_in": 60}, name="fresh",
                             iterations=120)
    ok("train", "--config", fresh, "-q")
    continued = json.loads(ok("evaluate", tmp_path / "continued", "--json").stdout)
    scratch = json.loads(ok("evaluate", tmp_path / "fresh", "--json").stdout)
    assert continued["heldout_tokens"] == scratch["heldout_tokens"]
    assert np.isfinite(continued["perplexity"])
    assert continued["perplexity"] <= 1.10 * scratch["perplexity"], (continued, scratch)
    before = json.loads(ok("evaluate", tmp_path / "run", "--json").stdout)
    assert continued["heldout_tokens"] == before["heldout_tokens"]
    assert continued["perplexity"] < before["perplexity"], (continued, before)


def test_what_cannot_be_continued_is_refused_in_one_line(stores, gibbs_run, tmp_path,
                                                         monkeypatch):
    added = stores["added"]
    # every algorithm adds documents now: a driver whose traits list no family is refused
    gibbs = get_driver("gibbs")
    with monkeypatch.context() as patch:
        patch.setattr(gibbs, "traits", gibbs.traits.but(add_documents=()))
        assert fails(2, *continue_args(gibbs_run, added, tmp_path / "x")) == (
            "inference.algorithm gibbs with model.family lda cannot add documents to a trained "
            "run (topictk algorithms lists those that can); train a new run on a store with all "
            "the documents")
    assert not list(tmp_path.glob(".x.*"))     # no half-made run is left
    message = fails(2, *continue_args(gibbs_run, stores["added-min2"], tmp_path / "x"))
    assert "options.min_length = 2" in message and "with 3" in message
    message = fails(2, *continue_args(gibbs_run, stores["added-case"], tmp_path / "x"))
    assert "preprocessing.case = 'keep'" in message and "with 'fold'" in message
    assert "--test-docs 0" in fails(2, *continue_args(gibbs_run, stores["added-test"],
                                                      tmp_path / "x"))
    assert "--out NEWRUN" in fails(2, "train", "--continue", gibbs_run, "--add", added)
    assert "--add STORE" in fails(2, "train", "--continue", gibbs_run, "--out", tmp_path / "x")
    assert "model.topics" in fails(2, *continue_args(gibbs_run, added, tmp_path / "x",
                                                     "--set", "model.topics=3"))
    assert "input" in fails(2, *continue_args(gibbs_run, added, gibbs_run, "--force"))
    assert not (tmp_path / "x").exists()
    (tmp_path / "y").mkdir()
    (tmp_path / "y" / "notes.txt").write_text("mine")
    assert "exists" in fails(2, *continue_args(gibbs_run, added, tmp_path / "y"))
    assert "not a topictk run" in fails(2, *continue_args(gibbs_run, added, tmp_path / "y",
                                                          "--force"))
    assert (tmp_path / "y" / "notes.txt").read_text() == "mine"


def test_force_replaces_a_continued_run(stores, gibbs_run, tmp_path):
    out = tmp_path / "new"
    ok(*continue_args(gibbs_run, stores["added"], out, "--set", "inference.iterations=10"))
    ok(*continue_args(gibbs_run, stores["added"], out, "--set", "inference.iterations=20",
                      "--force"))
    header, _ = model_arrays(out)
    assert header["state"]["step"] == 50
    assert not list(tmp_path.glob(".new.*"))
    # a file of someone else's in the run is never replaced with it
    (out / "checkpoints" / "notes.txt").write_text("mine")
    assert "checkpoints/notes.txt" in fails(2, *continue_args(gibbs_run, stores["added"], out,
                                                              "--force"))
    assert (out / "checkpoints" / "notes.txt").read_text() == "mine"
    header, _ = model_arrays(out)
    assert header["state"]["step"] == 50


def test_a_continued_run_is_extended_by_continue_with_resume(stores, gibbs_run, tmp_path):
    """``--continue RUN --add STORE --out NEWRUN --resume`` extends NEWRUN, its
    ``inference.iterations`` still counted from RUN's step: 10 then 20 steps end where 20
    steps at once do."""
    added = stores["added"]
    ok(*continue_args(gibbs_run, added, tmp_path / "once", "--set", "inference.iterations=20"))
    ok(*continue_args(gibbs_run, added, tmp_path / "twice", "--set", "inference.iterations=10"))
    ok(*continue_args(gibbs_run, added, tmp_path / "twice", "--set", "inference.iterations=20",
                      "--resume"))
    assert_same_run(tmp_path / "once", tmp_path / "twice", same_samples=True)
    assert "leave out --resume" in fails(2, *continue_args(gibbs_run, added, gibbs_run,
                                                           "--resume"))


def test_the_training_documents_held_out_tokens_join_the_union(stores, tmp_path):
    """Protocol B: a run's store with held-out tokens of its training documents keeps them
    for its documents in the union; the added documents (whose store has none) get none."""
    folder = stores["folder"]
    ok("prepare", folder / "old.txt", "--out", tmp_path / "base-b",
       "--heldout-train-fraction", "0.2")
    ok("train", "--config", write_run_config(tmp_path, tmp_path / "base-b",
                                             FAMILIES["gibbs-sparse"]), "-q")
    ok(*continue_args(tmp_path / "run", stores["added"], tmp_path / "new",
                      "--set", "inference.iterations=10"))
    base, union = CorpusStore.open(tmp_path / "base-b"), CorpusStore.open(
        tmp_path / "new" / "corpus")
    verify_store(union.path)
    old, both = base.train_heldout(), union.train_heldout()
    D = old.n_docs
    assert both.n_docs == union.train().n_docs > D
    assert np.array_equal(both.indptr[:D + 1], old.indptr)
    assert np.array_equal(both.indices, old.indices) and np.array_equal(both.counts, old.counts)
    assert np.all(both.indptr[D:] == old.indptr[-1])
    result = json.loads(ok("evaluate", tmp_path / "new", "--json").stdout)
    assert np.isfinite(result["perplexity"])


@pytest.mark.parametrize("family", NO_PRIOR)
def test_topics_without_a_prior_drop_the_new_words_and_report_them(family, stores, tmp_path):
    """pem and unsmoothed vb: the union keeps RUN's vocabulary alone; the added documents'
    tokens (and held-out tokens) of new words are dropped, a document of new words only stays
    empty, and the dropped words and tokens are counted in one log line, the union's manifest
    and the marker; the continued run evaluates."""
    ok("train", "--config", write_run_config(tmp_path, stores["base"], FAMILIES[family],
                                             iterations=5), "-q")
    novel = stores["added-novel"]
    out = ok("train", "--continue", tmp_path / "run", "--add", novel, "--out", tmp_path / "new",
             "--set", "inference.iterations=3")
    base, added = CorpusStore.open(stores["base"]), CorpusStore.open(novel)
    union = CorpusStore.open(tmp_path / "new" / "corpus")
    verify_store(union.path)
    assert union.vocab == base.vocab
    known = set(base.vocab)
    new_words = [w for w in added.vocab if w not in known]
    assert {"zorblat", "quenvix"} <= set(new_words)
    # the added documents in order, each with its tokens of known words, in order
    old, new, both = base.train(), added.train(), union.train()
    assert both.n_docs == old.n_docs + new.n_docs
    for d in range(new.n_docs):
        kept = [added.vocab[w] for w in new.words[new.doc_ptr[d]:new.doc_ptr[d + 1]]
                if added.vocab[w] in known]
        row = both.words[both.doc_ptr[old.n_docs + d]:both.doc_ptr[old.n_docs + d + 1]]
        assert [union.vocab[w] for w in row] == kept, d
    assert both.doc_ptr[-1] == both.doc_ptr[-2]         # the novel line: an empty document
    assert union.document_ids("train") == base.document_ids("train") + added.document_ids(
        "train")
    dropped = sum(added.vocab[w] not in known for w in new.words)
    assert dropped >= 3
    # the added documents' held-out tokens of known words join the union, the others not
    held_new, held_both = added.train_heldout(), union.train_heldout()
    assert any(added.vocab[w] not in known for w in held_new.indices)
    for d in range(new.n_docs):
        entries = slice(held_new.indptr[d], held_new.indptr[d + 1])
        expected = sorted((added.vocab[w], int(c)) for w, c in zip(
            held_new.indices[entries], held_new.counts[entries]) if added.vocab[w] in known)
        entries = slice(held_both.indptr[old.n_docs + d], held_both.indptr[old.n_docs + d + 1])
        got = sorted((union.vocab[w], int(c)) for w, c in zip(held_both.indices[entries],
                                                               held_both.counts[entries]))
        assert got == expected, d
    facts = union.manifest["union"]
    assert (facts["new_words"], facts["new_word_tokens"]) == (len(new_words), dropped)
    assert facts["new_words_dropped"] and facts["added_tokens"] == new.n_tokens - dropped
    origin = json.loads((tmp_path / "new" / "topictk-run.json").read_text())["continued_from"]
    assert origin["new_words"] == {"words": len(new_words), "tokens": dropped, "dropped": True}
    lines = [line for line in out.stderr.splitlines() if "new words" in line]
    assert len(lines) == 1, out.stderr
    assert (f"{len(new_words)} new words with {dropped} tokens dropped from the added "
            f"documents") in lines[0]
    header, arrays = model_arrays(tmp_path / "new")
    assert header["state"]["step"] == 8 and header["vocabulary"] == base.n_words
    assert np.isfinite(arrays["gamma"]).all()
    result = json.loads(ok("evaluate", tmp_path / "new", "--json").stdout)
    assert np.isfinite(result["perplexity"])
    if family == "pem":         # particle p's added documents start the same whatever P is
        ok("train", "--config", write_run_config(tmp_path, stores["base"], {
            **FAMILIES[family], "particles": 2}, name="two", iterations=5), "-q")
        ok(*continue_args(tmp_path / "two", novel, tmp_path / "two-new",
                          "--set", "inference.iterations=1"))
        D = old.n_docs
        _, three = load_arrays(tmp_path / "new" / "checkpoints" / "step-00000005.npz")
        _, two = load_arrays(tmp_path / "two-new" / "checkpoints" / "step-00000005.npz")
        assert np.array_equal(two["gamma"][:, D:], three["gamma"][:2, D:])
        assert not np.array_equal(two["gamma"][:, :D], three["gamma"][:2, :D])


DMR = {"dmr-sem": {"algorithm": "dmr-sem", "optimize_interval": 10, "optimize_burn_in": 5,
                   "model": {"family": "dmr"}},
       "dmr-sgrld": {"algorithm": "dmr-sgrld", "batch_size": 32, "thin": 5,
                     "model": {"family": "dmr"}}}


@pytest.mark.parametrize("algorithm", sorted(DMR))
def test_dmr_adds_documents_with_their_features_encoded_as_the_runs(algorithm, tmp_path):
    """DMR (dmr-sem, dmr-sgrld): the added documents' metadata become features by the run's
    store's encoding (its mean and deviation, its categories; an unseen category all zeros),
    and the continued run is deterministic, resumable and the same at two threads, nu going
    on."""
    lines = EXAMPLE.read_text(encoding="utf-8").splitlines()
    for name, part, kinds in (("old", lines[:BASE_LINES], "ab"), ("new", lines[BASE_LINES:],
                                                                   "abc")):
        (tmp_path / f"{name}.jsonl").write_text("".join(
            json.dumps({"text": text, "size": len(text), "kind": kinds[i % len(kinds)]}) + "\n"
            for i, text in enumerate(part)), encoding="utf-8")
    ok("prepare", tmp_path / "old.jsonl", "--meta", "size,kind:cat", "--out", tmp_path / "base")
    ok("prepare", tmp_path / "new.jsonl", "--meta", "size,kind:cat", "--test-docs", "0",
       "--out", tmp_path / "added")
    inference = DMR[algorithm]
    run = continue_three_ways(tmp_path, tmp_path / "base", tmp_path / "added", inference,
                              True)
    base, added = CorpusStore.open(tmp_path / "base"), CorpusStore.open(tmp_path / "added")
    union = CorpusStore.open(tmp_path / "a" / "corpus")
    X, X_base = union.features("train"), base.features("train")
    assert np.array_equal(X[:len(X_base)], X_base)
    size = next(f for f in base.manifest["features"]["fields"] if f["name"] == "size")
    metas = added.metadata("train")
    assert np.allclose(X[len(X_base):, 0], [(m["size"] - size["mean"]) / size["std"]
                                            for m in metas])
    assert union.feature_names == base.feature_names == ["size", "kind=a", "kind=b",
                                                         "(intercept)"]
    unseen = [i for i, m in enumerate(metas) if m["kind"] == "c"]
    assert unseen and not X[len(X_base) + np.array(unseen), 1:3].any()
    _, start = load_arrays(tmp_path / "a" / "checkpoints" / "step-00000030.npz")
    _, old = load_arrays(run / "model.npz")
    assert np.array_equal(start["nu"], old["nu"])
    if algorithm == "dmr-sgrld":    # nu's step scale stays the run's 0.1 / D
        saved = yaml.safe_load((tmp_path / "a" / "config.yaml").read_text())
        assert saved["inference"]["nu_step"]["a"] == pytest.approx(0.1 / len(X_base))


def test_a_run_and_its_continuation_are_compared_on_their_common_heldout_tokens(
        stores, gibbs_run, tmp_path):
    """The union store's test split is RUN's: compare ranks RUN and NEWRUN together; a run of
    another store (the same documents prepared again) is still refused."""
    ok(*continue_args(gibbs_run, stores["added"], tmp_path / "new",
                      "--set", "inference.iterations=10"))
    result = json.loads(ok("compare", gibbs_run, tmp_path / "new", "--format", "json").stdout)
    assert result["perplexity_comparable"] and result["protocol_differences"] == []
    assert len(result["runs"]) == 2
    ok("prepare", stores["folder"] / "old.txt", "--out", tmp_path / "again", "--seed", "1")
    other = write_run_config(tmp_path, tmp_path / "again", {"algorithm": "gibbs"},
                             name="other", iterations=5)
    ok("train", "--config", other, "-q")
    assert "different corpus stores" in fails(2, "compare", tmp_path / "new", tmp_path / "other")
