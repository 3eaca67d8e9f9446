"""``topictk infer``: topic proportions of new documents equal the NumPy twin of the fold-in,
recover planted topics, apply the store's metadata encoding (DMR), do not depend on the thread
count, and refuse bad input without touching an existing output."""
from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest
from click.testing import CliRunner
from scipy.optimize import linear_sum_assignment

from tests.dlda._helpers import dlda_config, pgbn_corpus
from tests.dmr.conftest import planted_dmr_corpus
from tests.fixtures import gibbs_config, planted_corpus, write_token_store
from tests.integration._cli import EXAMPLE, fails, ok
from tests.reference import dlda as dlda_ref
from tests.reference import minibatch as minibatch_ref
from topictk.cli import cli
from topictk.corpus.store import CorpusStore, ptr_to_csr
from topictk.errors import UsageError
from topictk.evaluation import infer as infer_module
from topictk.numbering import topic_number
from topictk.evaluation.run import LoadedRun
from topictk.inference.perplexity import mixture_probabilities
from topictk.inference.sampled import evaluation_plan
from topictk.inference.base import (
    INFER_CHUNK_DOCS,
    Driver,
    EvaluationSet,
    FoldInPlan,
    chunk_bounds_by_docs,
)
from topictk.inference.dlda.driver import initial_theta
from topictk.inference.registry import load_config
from topictk.rundir.checkpoint import load_arrays
from topictk.streams import infer_key, make_stream
from topictk.training.run import train

N_WORDS = 50
VOCAB = [f"w{chr(97 + v // 26)}{chr(97 + v % 26)}" for v in range(N_WORDS)]   # letters only


def _lines(docs) -> str:
    return "".join(" ".join(VOCAB[w] for w in d) + "\n" for d in docs)


def _expected_theta(doc_ptr, words, phi, alpha, sweeps, burn_in, seed):
    """theta from the NumPy twin of the local Gibbs kernel, streams keyed as infer keys them."""
    vocab, local = np.unique(words, return_inverse=True)
    weights = np.ascontiguousarray(phi[:, vocab].T)
    bounds = chunk_bounds_by_docs(len(doc_ptr) - 1, INFER_CHUNK_DOCS)
    rngs = [np.random.Generator(make_stream(seed, infer_key(c))) for c in range(bounds.size - 1)]
    _, doc_topic = minibatch_ref.local_gibbs(doc_ptr, local.astype(np.int32), weights, alpha,
                                             sweeps, burn_in, bounds, rngs)
    alpha = np.broadcast_to(np.atleast_2d(alpha), doc_topic.shape)
    lengths = np.diff(doc_ptr)
    return (doc_topic / (sweeps - burn_in) + alpha) / (lengths + alpha.sum(axis=1))[:, None]


@pytest.fixture(scope="module")
def lda_run(tmp_path_factory):
    """collapsed Gibbs on a planted corpus whose words are letter strings (so text input
    tokenises back to the same words)."""
    tmp = tmp_path_factory.mktemp("infer")
    corpus = planted_corpus(seed=5, n_docs=300)
    store = write_token_store(tmp / "store", corpus.docs, N_WORDS, vocab=VOCAB)
    cfg = gibbs_config(store, tmp / "run", topics=5, iterations=100,
                       model={"alpha": 0.2, "beta": 0.05},
                       training={"seed": 1, "checkpoint_every": 50, "keep_checkpoints": 2})
    train(cfg, quiet=True)
    return tmp / "run", corpus


def test_theta_equals_the_reference_fold_in(lda_run, tmp_path):
    run, corpus = lda_run
    new = planted_corpus(seed=11, n_docs=70).docs      # 70 documents: two chunks of streams
    text = _lines(new).splitlines()
    text[3] += " unknownword another"                  # out-of-vocabulary tokens are dropped
    (tmp_path / "new.txt").write_text("\n".join(text) + "\n")
    out = ok("infer", run, tmp_path / "new.txt", "--sweeps", "12", "--burn-in", "4",
             "--seed", "9").stdout
    records = [json.loads(line) for line in out.splitlines()]
    assert len(records) == 70
    assert [r["unknown"] for r in records[2:5]] == [0, 2, 0]
    assert all(r["tokens"] == d.size for r, d in zip(records, new))
    _, model = load_arrays(run / "model.npz")
    nkw = model["nkw"].astype(np.float64)                          # (V, K)
    phi = ((nkw + 0.05) / (nkw.sum(axis=0) + N_WORDS * 0.05)).T    # the run's phi-hat (K, V)
    doc_ptr = np.concatenate([[0], np.cumsum([d.size for d in new])])
    expected = _expected_theta(doc_ptr, np.concatenate(new), phi, np.full((1, 5), 0.2), 12, 4, 9)
    theta = np.array([r["theta"] for r in records])
    np.testing.assert_allclose(theta, expected, rtol=1e-12)
    np.testing.assert_allclose(theta.sum(axis=1), 1.0, rtol=1e-12)
    assert [r["top_topics"] for r in records] == [        # topics numbered from 1
        [topic_number(k) for k in np.argsort(-t, kind="stable")[:3]] for t in theta]


def test_a_checkpoint_can_be_used(lda_run, tmp_path):
    run, _ = lda_run
    new = planted_corpus(seed=13, n_docs=20).docs
    (tmp_path / "new.txt").write_text(_lines(new))
    got = np.array([json.loads(line)["theta"] for line in ok(
        "infer", run, tmp_path / "new.txt", "--checkpoint", "50").stdout.splitlines()])
    _, model = load_arrays(run / "checkpoints" / "step-00000050.npz")
    nkw = model["nkw"].astype(np.float64)
    phi = ((nkw + 0.05) / (nkw.sum(axis=0) + N_WORDS * 0.05)).T
    doc_ptr = np.concatenate([[0], np.cumsum([d.size for d in new])])
    expected = _expected_theta(doc_ptr, np.concatenate(new), phi, np.full((1, 5), 0.2), 50, 25,
                               1)
    np.testing.assert_allclose(got, expected, rtol=1e-12)
    assert "no checkpoint at step 7" in fails(2, "infer", run, tmp_path / "new.txt",
                                              "--checkpoint", "7")


def test_single_topic_documents_get_their_topic(lda_run, tmp_path):
    """New documents drawn from one planted topic each are assigned to the learnt topic matched
    to it, with most of their mass."""
    run, corpus = lda_run
    _, model = load_arrays(run / "model.npz")
    learnt = model["nkw"].T / model["nkw"].sum(axis=0)[:, None]          # (K, V)
    cost = np.abs(corpus.phi[:, None, :] - learnt[None, :, :]).sum(axis=2)
    _, match = linear_sum_assignment(cost)
    assert cost[np.arange(5), match].max() < 0.3          # the run found the planted topics
    rng = np.random.default_rng(0)
    docs = [rng.choice(N_WORDS, size=60, p=corpus.phi[k]) for k in range(5) for _ in range(4)]
    (tmp_path / "one.txt").write_text(_lines(docs))
    records = [json.loads(line) for line in ok("infer", run, tmp_path / "one.txt").stdout
               .splitlines()]
    for i, r in enumerate(records):
        planted = i // 4
        assert r["top_topics"][0] == topic_number(match[planted])
        assert r["theta"][match[planted]] > 0.8


def test_threads_seed_blocks_tsv_and_atomic_output(lda_run, tmp_path, monkeypatch):
    run, _ = lda_run
    new = planted_corpus(seed=12, n_docs=150).docs
    (tmp_path / "new.txt").write_text(_lines(new))
    one = ok("infer", run, tmp_path / "new.txt", "--threads", "1").stdout
    two = ok("infer", run, tmp_path / "new.txt", "--threads", "2").stdout
    assert one == two
    assert ok("infer", run, tmp_path / "new.txt", "--seed", "7").stdout != one
    # folded in and written in blocks: cutting the input differently changes nothing
    monkeypatch.setattr(infer_module, "BLOCK_DOCS", INFER_CHUNK_DOCS)
    assert ok("infer", run, tmp_path / "new.txt").stdout == one
    monkeypatch.undo()
    out = tmp_path / "theta.tsv"
    assert ok("infer", run, tmp_path / "new.txt", "--output-format", "tsv", "--out", out,
              "--threads", "2").stdout == ""
    rows = out.read_text().splitlines()
    assert rows[0].split("\t") == ["id", "tokens", "unknown"] + [f"topic_{n}" for n in range(1, 6)]
    tsv = np.array([[float(x) for x in row.split("\t")[3:]] for row in rows[1:]])
    np.testing.assert_array_equal(tsv, [json.loads(line)["theta"] for line in one.splitlines()])
    # a failing call leaves the existing output as it was
    before = out.read_bytes()
    message = fails(2, "infer", run, tmp_path / "new.txt", "--sweeps", "5", "--burn-in", "5",
                    "--out", out)
    assert "--sweeps must be larger than --burn-in" in message
    (tmp_path / "empty.txt").write_text("")
    assert "no documents found" in fails(2, "infer", run, tmp_path / "empty.txt", "--out", out,
                                         "--force")
    assert "no such file" in fails(2, "infer", run, tmp_path / "missing.txt", "--out", out,
                                   "--force")
    assert "folder not found" in fails(2, "infer", run, tmp_path / "new.txt", "--out",
                                       tmp_path / "nowhere" / "x.tsv")
    assert out.read_bytes() == before
    assert "not a run directory" in fails(2, "infer", tmp_path, tmp_path / "new.txt")


def test_uci_input_gives_what_text_input_gives(lda_run, tmp_path):
    """The same documents as a UCI docword file (its own vocabulary order, one word the store
    does not know) and as text lines give the same proportions up to token order, which the
    fold-in sees: so compare with text whose tokens are in docword order."""
    run, _ = lda_run
    docs = [np.array([3, 3, 7, 12, 40]), np.array([1, 2, 2, 2, 49, 30])]
    uci_vocab = ["zzunknown"] + VOCAB[::-1]                 # docword ids 1.. = this order
    position = {w: i + 1 for i, w in enumerate(uci_vocab)}
    entries = []
    for d, doc in enumerate(docs):
        words, counts = np.unique([position[VOCAB[w]] for w in doc], return_counts=True)
        entries += [(d + 1, int(w), int(c)) for w, c in zip(words, counts)]
    entries.append((2, position["zzunknown"], 4))
    entries.sort()
    (tmp_path / "docword.new.txt").write_text(
        f"2\n{len(uci_vocab)}\n{len(entries)}\n" + "".join(f"{d} {w} {c}\n" for d, w, c in entries))
    (tmp_path / "words.txt").write_text("\n".join(uci_vocab) + "\n")
    got = [json.loads(line) for line in ok("infer", run, tmp_path / "docword.new.txt",
                                           "--vocab", tmp_path / "words.txt").stdout.splitlines()]
    assert [r["unknown"] for r in got] == [0, 4] and [r["tokens"] for r in got] == [5, 6]
    in_docword_order = [sorted(doc, key=lambda w: position[VOCAB[w]]) for doc in docs]
    (tmp_path / "same.txt").write_text(_lines(in_docword_order))
    text = [json.loads(line) for line in ok("infer", run, tmp_path / "same.txt").stdout
            .splitlines()]
    assert [r["theta"] for r in got] == [r["theta"] for r in text]
    assert "vocabulary" in fails(2, "infer", run, tmp_path / "docword.new.txt")


def test_documents_without_known_words_get_the_prior_mean(lda_run, tmp_path):
    run, _ = lda_run
    (tmp_path / "odd.txt").write_text("nothing known here\n\n" + _lines([[0, 1, 2]]))
    outcome = ok("infer", run, tmp_path / "odd.txt")
    records = [json.loads(line) for line in outcome.stdout.splitlines()]
    assert [r["tokens"] for r in records] == [0, 0, 3]
    np.testing.assert_allclose(records[0]["theta"], 0.2)
    assert "2 document(s) have no word of the model's vocabulary" in outcome.stderr


def test_models_without_a_dirichlet_prior_are_refused():
    state = SimpleNamespace(phi=[np.ones((3, 2))])           # a deep-LDA-like state: no alpha
    with pytest.raises(UsageError, match="'tlasgr' runs have no Dirichlet document prior"):
        Driver.document_prior(SimpleNamespace(name="tlasgr"), state, None)


# ------------------------------------------------------------------ DMR: the saved encoding
@pytest.fixture(scope="module")
def dmr_run(tmp_path_factory):
    """A store prepared from JSONL with a categorical and a numeric field, and a dmr-sem run."""
    tmp = tmp_path_factory.mktemp("infer_dmr")
    corpus = planted_dmr_corpus(seed=4, n_docs=300)
    rng = np.random.default_rng(1)
    with open(tmp / "docs.jsonl", "w") as f:
        for d, doc in enumerate(corpus.docs):
            f.write(json.dumps({"id": f"d{d}", "text": " ".join(VOCAB[w] for w in doc),
                                "group": "on" if corpus.X[d, 0] else "off",
                                "year": int(rng.integers(1990, 2000))}) + "\n")
    ok("prepare", tmp / "docs.jsonl", "--out", tmp / "store", "--meta", "group,year")
    cfg = load_config(None, raw={
        "corpus": str(tmp / "store"), "output": str(tmp / "run"),
        "model": {"family": "dmr", "topics": 5, "alpha": 0.2, "beta": 0.05},
        "inference": {"algorithm": "dmr-sem", "iterations": 30, "burn_in": 20, "thin": 5,
                      "optimize_burn_in": 10, "optimize_interval": 10},
        "training": {"seed": 2}})
    train(cfg, quiet=True)
    return tmp


def _encode(manifest, group, year):
    """The features a document gets, from the manifest's numbers (written out here)."""
    fields = {f["name"]: f for f in manifest["features"]["fields"]}
    x = [1.0 if group == c else 0.0 for c in fields["group"]["categories"]]
    x.append(0.0 if year is None else (year - fields["year"]["mean"]) / fields["year"]["std"])
    return np.array(x + [1.0])


def test_dmr_prior_follows_the_saved_encoding(dmr_run, tmp_path):
    manifest = json.loads((dmr_run / "store" / "manifest.json").read_text())
    assert manifest["features"]["names"] == ["group=off", "group=on", "year", "(intercept)"]
    _, model = load_arrays(dmr_run / "run" / "model.npz")
    nu = model["nu"]
    cases = [("on", 1991), ("off", 1998), ("maybe", 1995), (None, None)]
    with open(tmp_path / "new.jsonl", "w") as f:
        for group, year in cases:
            meta = {k: v for k, v in (("group", group), ("year", year)) if v is not None}
            f.write(json.dumps({"text": "nothing known", **meta}) + "\n")
        f.write(json.dumps({"text": " ".join(VOCAB[w] for w in range(0, 50, 3)), "group": "on",
                            "year": 1993}) + "\n")
    store_vocab = CorpusStore.open(dmr_run / "store").vocab      # frequency order, no stopwords
    words = np.array([store_vocab.index(VOCAB[w]) for w in range(0, 50, 3)
                      if VOCAB[w] in store_vocab])
    outcome = ok("infer", dmr_run / "run", tmp_path / "new.jsonl", "--seed", "5")
    theta = np.array([json.loads(line)["theta"] for line in outcome.stdout.splitlines()])
    assert "field 'group': 1 value(s) not seen in training ('maybe')" in outcome.stderr
    assert "field 'group' missing from 1 document(s)" in outcome.stderr
    assert "field 'year' missing from 1 document(s)" in outcome.stderr
    for i, (group, year) in enumerate(cases):
        alpha = np.exp(nu @ _encode(manifest, group, year))
        np.testing.assert_allclose(theta[i], alpha / alpha.sum(), rtol=1e-12)
    # the document with words: the twin fold-in with its own alpha_d (dense per-document path)
    assert json.loads(outcome.stdout.splitlines()[4])["tokens"] == words.size
    nkw = model["nkw"].astype(np.float64)
    phi = ((nkw + 0.05) / (nkw.sum(axis=0) + len(store_vocab) * 0.05)).T
    alpha = np.exp(np.array([_encode(manifest, *c) for c in cases + [("on", 1993)]]) @ nu.T)
    expected = _expected_theta(np.array([0, 0, 0, 0, 0, words.size]), words, phi, alpha, 50, 25,
                               5)
    np.testing.assert_allclose(theta, expected, rtol=1e-12)
    # metadata given in a file instead of JSONL fields
    (tmp_path / "plain.txt").write_text("nothing known\n")
    (tmp_path / "meta.tsv").write_text("group\tyear\noff\t1998\n")
    got = json.loads(ok("infer", dmr_run / "run", tmp_path / "plain.txt", "--meta-file",
                        tmp_path / "meta.tsv").stdout)["theta"]
    np.testing.assert_allclose(got, theta[1], rtol=1e-12)


def test_dmr_without_metadata_is_refused_with_the_fix(dmr_run, tmp_path):
    (tmp_path / "plain.txt").write_text("waa wab wac\n")
    message = fails(2, "infer", dmr_run / "run", tmp_path / "plain.txt")
    assert "metadata fields group, year" in message and "--meta-file" in message
    (tmp_path / "meta.tsv").write_text("group\tyear\noff\t1998\non\t1990\n")
    (tmp_path / "bad.jsonl").write_text('{"text": "waa", "group": "on", "year": "late"}\n'
                                        '{"text": "waa", "group": "on", "year": NaN}\n')
    message = fails(1, "infer", dmr_run / "run", tmp_path / "bad.jsonl")
    assert "field 'year' = 'late' is not a number" in message
    assert "trained with the field as a number" in message and "--meta" not in message
    (tmp_path / "nan.jsonl").write_text('{"text": "waa", "group": "on", "year": NaN}\n')
    assert "not a finite number" in fails(1, "infer", dmr_run / "run", tmp_path / "nan.jsonl")
    assert "has 2 rows but the input has 1 documents" in fails(
        1, "infer", dmr_run / "run", tmp_path / "plain.txt", "--meta-file", tmp_path / "meta.tsv")


# ------------------------------------------------------------------ the bundled example
def test_example_corpus_training_documents_keep_their_topic(tmp_path):
    """Real text: after training on the bundled corpus, its own training documents are inferred
    with the topic their trained assignments favour, for most documents."""
    ok("prepare", EXAMPLE, "--out", tmp_path / "store")
    cfg = gibbs_config(tmp_path / "store", tmp_path / "run", topics=8, iterations=150,
                       training={"seed": 1})
    train(cfg, quiet=True)
    records = [json.loads(line) for line in ok("infer", tmp_path / "run", EXAMPLE).stdout
               .splitlines()]
    by_id = {r["id"]: r for r in records}
    _, model = load_arrays(tmp_path / "run" / "model.npz")
    ids = (tmp_path / "store" / "train_ids.txt").read_text().splitlines()
    ndk = model["ndk"]
    long_docs = [d for d in range(len(ids)) if ndk[d].sum() >= 20]
    agree = [by_id[ids[d]]["top_topics"][0] == topic_number(np.argmax(ndk[d]))
             for d in long_docs]
    assert len(long_docs) >= 100
    assert np.mean(agree) > 0.8


# ------------------------------------------------------------------ deep LDA
@pytest.fixture(scope="module")
def dlda_run(tmp_path_factory):
    """dlda-gibbs, layers (4, 2), on a planted PGBN corpus with letter-string words."""
    tmp = tmp_path_factory.mktemp("infer_dlda")
    docs, _ = pgbn_corpus(3, layers=(4, 2), n_words=40, n_docs=400, mean_length=60)
    store = write_token_store(tmp / "store", docs, 40, vocab=VOCAB[:40])
    train(dlda_config(store, tmp / "run", "dlda-gibbs", [4, 2], iterations=40), quiet=True)
    return tmp / "run"


def test_dlda_proportions_equal_the_reference_chains(dlda_run, tmp_path):
    rng = np.random.default_rng(4)
    docs = [rng.integers(0, 40, size=int(n)) for n in rng.integers(0, 30, size=70)]
    (tmp_path / "new.txt").write_text(_lines(docs))
    records = [json.loads(line) for line in ok("infer", dlda_run, tmp_path / "new.txt",
                                               "--sweeps", "8", "--burn-in", "5", "--seed",
                                               "6", "--threads", "2").stdout.splitlines()]
    theta = np.array([r["theta"] for r in records])
    run = LoadedRun(dlda_run)
    doc_ptr = np.concatenate([[0], np.cumsum([d.size for d in docs])])
    csr = ptr_to_csr(doc_ptr, np.concatenate(docs).astype(np.int32), 40)
    net = dlda_ref.Net(run.state.phi, run.state.r, run.driver.hyper)
    th, c = initial_theta(70, [4, 2]), np.ones((70, 2))
    bounds = chunk_bounds_by_docs(70, INFER_CHUNK_DOCS)
    rngs = [np.random.Generator(make_stream(6, infer_key(ch))) for ch in range(bounds.size - 1)]
    total = np.zeros((70, 4))
    for it in range(1, 9):
        # p/c sampled from iteration min(5 // 2, 10) = 2 on
        dlda_ref.local_chains(*csr, net, th, c, 1, 1, 1 if it >= 2 else 2, rngs, bounds,
                              collect=False)
        if it > 5:
            total += th[:, :4] / th[:, :4].sum(axis=1, keepdims=True)
    np.testing.assert_allclose(theta, total / 3, rtol=1e-12)
    np.testing.assert_allclose(theta.sum(axis=1), 1.0, rtol=1e-12)
    one = ok("infer", dlda_run, tmp_path / "new.txt", "--sweeps", "8", "--burn-in", "5",
             "--seed", "6", "--threads", "1").stdout
    assert [json.loads(line)["theta"] for line in one.splitlines()] == theta.tolist()


def test_dlda_documents_of_one_topic_get_it(dlda_run, tmp_path):
    """Documents drawn from one of the run's own first-layer topics put most mass on it."""
    phi = LoadedRun(dlda_run).driver.topic_word(LoadedRun(dlda_run).state)       # (4, 40)
    rng = np.random.default_rng(2)
    docs = [rng.choice(40, size=80, p=phi[k] / phi[k].sum()) for k in range(4) for _ in range(3)]
    (tmp_path / "one.txt").write_text(_lines(docs))
    records = [json.loads(line) for line in ok("infer", dlda_run, tmp_path / "one.txt").stdout
               .splitlines()]
    for i, r in enumerate(records):
        assert r["top_topics"][0] == topic_number(i // 3)
        assert r["theta"][i // 3] > 0.5


def test_dmr_metadata_edge_cases(dmr_run, tmp_path):
    run = dmr_run / "run"
    text = "waa wab wac\n" * 2
    (tmp_path / "plain.txt").write_text(text)
    # a meta-file with none of the model's fields is refused, naming what is expected
    (tmp_path / "other.tsv").write_text("foo\tbar\n1\t2\n1\t2\n")
    message = fails(2, "infer", run, tmp_path / "plain.txt", "--meta-file", tmp_path / "other.tsv")
    assert "none of this run's metadata fields (group, year)" in message and "bar, foo" in message
    # a field given both by the JSONL documents and by the meta-file is refused
    (tmp_path / "both.jsonl").write_text('{"text": "waa", "group": "on"}\n'
                                         '{"text": "wab", "group": "off"}\n')
    (tmp_path / "group.tsv").write_text("group\tyear\non\t1991\noff\t1992\n")
    assert "field 'group' is given both" in fails(2, "infer", run, tmp_path / "both.jsonl",
                                                  "--meta-file", tmp_path / "group.tsv")
    # numbers far outside the training range give a prior that overflows: refused by document
    (tmp_path / "huge.jsonl").write_text('{"id": "x", "text": "waa", "group": "on", '
                                         '"year": 1e300}\n')
    message = fails(1, "infer", run, tmp_path / "huge.jsonl")
    assert "document x" in message and "year" in message
    (tmp_path / "far.jsonl").write_text('{"id": "y", "text": "waa", "group": "on", '
                                        '"year": 1e12}\n')
    assert "document y" in fails(1, "infer", run, tmp_path / "far.jsonl")
    # JSONL on standard input with --format jsonl; auto-detection reads stdin as text and the
    # refusal names --format jsonl
    lines = '{"text": "waa wab", "group": "on", "year": 1995}\n'
    result = CliRunner().invoke(cli, ["infer", str(run), "--format", "jsonl",
                                                      "-"], input=lines)
    assert result.exit_code == 0, result.stderr
    (tmp_path / "one.jsonl").write_text(lines)
    assert result.stdout.replace("<stdin>", "one.jsonl") == ok("infer", run,
                                                                tmp_path / "one.jsonl").stdout
    result = CliRunner().invoke(cli, ["infer", str(run), "-"], input=lines)
    assert result.exit_code == 2 and "--format jsonl" in result.stderr


def test_categories_match_across_number_forms(dmr_run, tmp_path):
    """A category trained from JSON numbers is found from a tab-separated cell and from a JSON
    float with the same value."""
    tmp = tmp_path
    with open(tmp / "docs.jsonl", "w") as f:
        for d in range(40):
            f.write(json.dumps({"text": "waa wab wac wad", "level": d % 2}) + "\n")
    ok("prepare", tmp / "docs.jsonl", "--out", tmp / "store", "--meta", "level:cat",
       "--test-docs", "0")
    store = CorpusStore.open(tmp / "store")
    assert store.feature_names == ["level=0", "level=1", "(intercept)"]
    from topictk.corpus.features import FeatureEncoding
    encoding = FeatureEncoding.from_json(store.manifest["features"])
    X, stats = encoding.encode([{"level": "1"}, {"level": 1.0}, {"level": "1.0"}, {"level": 0},
                                {"level": "2"}], list("abcde"), "m")
    np.testing.assert_array_equal(X[:, :2], [[0, 1], [0, 1], [0, 1], [1, 0], [0, 0]])
    assert stats["unseen_by_field"] == {"level": 1}


def test_lda_run_ignores_a_meta_file_with_a_warning(lda_run, tmp_path):
    run, _ = lda_run
    (tmp_path / "new.txt").write_text("waa wab\n")
    (tmp_path / "m.tsv").write_text("group\non\n")
    outcome = ok("infer", run, tmp_path / "new.txt", "--meta-file", tmp_path / "m.tsv")
    assert "m.tsv: ignored: this run's model (gibbs) does not use metadata" in outcome.stderr


def test_all_documents_skipped_says_so(lda_run, tmp_path):
    run, _ = lda_run
    (tmp_path / "bin.txt").write_bytes(b"\x00\x01\x02\n\xff\xfe\n")
    message = fails(2, "infer", run, tmp_path / "bin.txt", "--encoding-errors", "skip")
    assert "every one (2) was skipped as undecodable" in message


@pytest.mark.parametrize("algorithm", ["vb", "cvb0", "ovb", "pem"])
def test_variational_runs_infer_by_the_fold_in_they_are_scored_with(tmp_path, algorithm):
    """infer gives theta-hat of the algorithm's own fold-in (the E-step, or CVB0 updates, with
    the topics frozen) -- what evaluate mixes for the test documents -- not a Gibbs fold-in;
    it is deterministic, so the seed and sweeps of the Gibbs fold-in do not change it."""
    corpus = planted_corpus(seed=5, n_docs=120)
    store = write_token_store(tmp_path / "store", corpus.docs, N_WORDS, vocab=VOCAB)
    config = load_config(None, raw={
        "corpus": str(store), "output": str(tmp_path / "run"),
        "model": {"topics": 5, "alpha": 0.2, "beta": 0.05},
        "inference": {"algorithm": algorithm, "iterations": 6}, "training": {"seed": 1}})
    train(config, quiet=True)
    new = planted_corpus(seed=11, n_docs=20).docs
    (tmp_path / "new.txt").write_text(_lines(new))
    outputs = [ok("infer", tmp_path / "run", tmp_path / "new.txt", "--seed", seed, "--sweeps",
                  sweeps).stdout for seed, sweeps in (("1", "40"), ("2", "60"))]
    assert outputs[0] == outputs[1]
    theta = np.array([json.loads(line)["theta"] for line in outputs[0].splitlines()])
    run = LoadedRun(tmp_path / "run")
    doc_ptr = np.concatenate([[0], np.cumsum([d.size for d in new])]).astype(np.int64)
    indptr, indices, counts = ptr_to_csr(doc_ptr, np.concatenate(new), N_WORDS)
    docs = SimpleNamespace(indptr=indptr, indices=indices, counts=counts)
    np.testing.assert_array_equal(theta, run.driver.fold_in(run.state, docs))


@pytest.mark.parametrize("algorithm", ["gibbs", "sgrld", "hsvg", "vb"])
def test_evaluate_scores_with_the_fold_in_that_infer_reports(tmp_path, algorithm):
    """One fold-in (``Driver.fold_in``): infer reports its theta-hat under the infer plan, and
    evaluation mixes its theta-hat under the evaluation plan with the topics."""
    docs = planted_corpus(seed=5, n_docs=150).docs
    test = docs[120:]
    # every third test document has no held-out token: scoring skips it
    store = write_token_store(tmp_path / "store", docs[:120], N_WORDS, vocab=VOCAB,
                              test_observed=[d[: d.size // 2] for d in test],
                              test_heldout=[d[d.size // 2:] if i % 3 else d[:0]
                                            for i, d in enumerate(test)])
    config = load_config(None, raw={
        "corpus": str(store), "output": str(tmp_path / "run"),
        "model": {"topics": 5, "alpha": 0.2, "beta": 0.05},
        "inference": {"algorithm": algorithm, "iterations": 6},
        "evaluation": {"fold_in_sweeps": 10, "fold_in_burn_in": 5}, "training": {"seed": 1}})
    train(config, quiet=True)
    run = LoadedRun(tmp_path / "run")
    driver, state = run.driver, run.state
    test = EvaluationSet.from_store(run.store)
    obs = test.observed
    assert obs.n_docs == 30
    theta = driver.infer_proportions(state, obs.doc_ptr, obs.words, None, sweeps=12,
                                     burn_in=4, seed=3)
    plan = FoldInPlan.for_infer(obs.n_docs, sweeps=12, burn_in=4, seed=3)
    np.testing.assert_array_equal(theta, driver.fold_in(state, obs, plan))
    np.testing.assert_allclose(theta.sum(axis=1), 1.0, rtol=1e-12)
    probs = driver.heldout_probabilities(state, None, test, 3)
    folded = driver.fold_in(state, obs, evaluation_plan(driver, test, 3))
    phi = np.ascontiguousarray(driver.topic_word(state).T)
    np.testing.assert_array_equal(probs, mixture_probabilities(test.heldout, folded, phi, 1))
    assert probs.size and np.all(probs > 0)
    # another evaluation pass draws other streams (for the sampled fold-ins)
    if algorithm != "vb":
        assert not np.array_equal(folded, driver.fold_in(state, obs,
                                                         evaluation_plan(driver, test, 4)))
