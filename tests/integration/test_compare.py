"""``compare``, ``export``, ``plot`` and the Python API on real runs of every algorithm family
(sampled: gibbs; variational: ovb; deep LDA: tlasgr; DMR: dmr-sem) trained on the bundled
example corpus, given as JSONL with ids and a metadata field."""
from __future__ import annotations

import io
import json
import subprocess
import sys

import numpy as np
import pytest
import yaml

import topictk
from tests.integration._cli import EXAMPLE, REPO, fails, ok, write_config
from topictk.evaluation.compare import align_topics, js_distances
from topictk.evaluation.runs import discover_runs

LDA = {"topics": 6, "alpha": 0.1, "beta": 0.01}
FAMILIES = {
    "gibbs": (LDA, {"algorithm": "gibbs", "iterations": 30, "burn_in": 20, "thin": 5}),
    "ovb": (LDA, {"algorithm": "ovb", "iterations": 10, "batch_size": 32}),
    "tlasgr": ({"family": "dlda", "layers": [6, 3]},
               {"algorithm": "tlasgr", "iterations": 6, "burn_in": 3, "batch_size": 32,
                "local_burn_in": 4, "local_samples": 2,
                "point_perplexity": {"iterations": 4, "last": 2, "thin": 1, "every": 100}}),
    "dmr-sem": ({"family": "dmr", **LDA},
                {"algorithm": "dmr-sem", "iterations": 20, "optimize_burn_in": 5,
                 "optimize_interval": 5, "burn_in": 10, "thin": 5}),
}


@pytest.fixture(scope="module")
def jsonl_store(tmp_path_factory):
    """The example corpus as JSONL: an ``id`` per document and a categorical field."""
    folder = tmp_path_factory.mktemp("jsonl")
    lines = [line for line in EXAMPLE.read_text().splitlines() if line.strip()]
    (folder / "docs.jsonl").write_text("".join(
        json.dumps({"id": f"doc-{i:03d}", "text": line, "half": "a" if i % 2 else "b"}) + "\n"
        for i, line in enumerate(lines)))
    ok("prepare", folder / "docs.jsonl", "--meta", "half:cat", "--out", folder / "store")
    return folder / "store"


@pytest.fixture(scope="module")
def runs(jsonl_store, tmp_path_factory):
    """One finished run per family, all in one folder (a folder of runs)."""
    folder = tmp_path_factory.mktemp("families")
    for name, (model, inference) in FAMILIES.items():
        config = folder / f"{name}.yaml"
        config.write_text(yaml.safe_dump({
            "corpus": str(jsonl_store), "output": str(folder / "runs" / name), "model": model,
            "inference": inference, "training": {"seed": 3, "eval_every": 2,
                                                 "checkpoint_every": 0},
            "evaluation": {"fold_in_sweeps": 10, "fold_in_burn_in": 5}}))
        ok("train", "--config", config, "--quiet")
    return folder / "runs"


# ----------------------------------------------------------------------------- compare
def test_compare_scores_every_family_as_evaluate_does_flagging_mixed_estimators(runs):
    data = json.loads(ok("compare", runs, "--format", "json").stdout)
    rows = data["runs"]
    # each family's own estimator of theta: not one estimator, so flagged
    assert data["perplexity_comparable"] is False
    theta = [d for d in data["protocol_differences"] if d.startswith("evaluation.theta:")]
    assert len(theta) == 1 and "variational E-step (ovb)" in theta[0]
    assert "persistent test chain (tlasgr)" in theta[0]
    assert {r["run"]: r["estimator"] for r in rows} == {
        "gibbs": "gibbs", "dmr-sem": "gibbs", "ovb": "variational E-step",
        "tlasgr": "persistent test chain"}
    assert sorted(r["run"] for r in rows) == sorted(FAMILIES)
    perplexities = [r["perplexity"] for r in rows]
    assert perplexities == sorted(perplexities)
    for row in rows:
        evaluated = json.loads(ok("evaluate", runs / row["run"], "--json").stdout)
        assert row["estimator"] == evaluated["estimator"]
        for key in ("perplexity", "umass", "npmi", "diversity"):
            assert row[key] == pytest.approx(evaluated[key], rel=1e-12), (row["run"], key)
        assert row["iterations"] == FAMILIES[row["run"]][1]["iterations"]
        assert row["train_seconds"] > 0
    assert next(r for r in rows if r["run"] == "tlasgr")["topics"] == "6-3"


def test_compare_fold_in_scores_every_run_with_one_estimator(runs):
    chosen = [runs / "gibbs", runs / "ovb", runs / "dmr-sem"]
    mixed = ok("compare", *chosen).stdout
    assert "perplexity*" in mixed and "--fold-in fixed-point" in mixed
    data = json.loads(ok("compare", *chosen, "--fold-in", "fixed-point", "--format",
                         "json").stdout)
    assert data["perplexity_comparable"] is True and data["protocol_differences"] == []
    assert "fixed-point fold-in" in data["protocol"]
    rows = data["runs"]
    assert {r["estimator"] for r in rows} == {"fixed-point"}
    assert [r["perplexity"] for r in rows] == sorted(r["perplexity"] for r in rows)
    for row in rows:
        evaluated = json.loads(ok("evaluate", runs / row["run"], "--json", "--fold-in",
                                  "fixed-point").stdout)
        assert row["perplexity"] == pytest.approx(evaluated["perplexity"], rel=1e-12)
        own = json.loads(ok("evaluate", runs / row["run"], "--json").stdout)
        assert own["perplexity"] != evaluated["perplexity"]
    # deep LDA has no Dirichlet prior to fold in with
    message = fails(2, "compare", runs / "tlasgr", "--fold-in", "fixed-point")
    assert "evaluation.fold_in: fixed-point does not apply to deep LDA" in message


def test_compare_text_and_tsv_hold_the_same_rows(runs):
    text = ok("compare", runs / "gibbs", runs / "dmr-sem").stdout.splitlines()
    assert text[0].split()[:6] == ["run", "algorithm", "topics", "iterations", "train_seconds",
                                   "perplexity"]
    # the rows, then the line saying how the perplexities were measured
    assert text[-1].startswith("perplexity: evaluate: document completion on all ")
    assert {line.split()[0] for line in text[1:-1]} == {"gibbs", "dmr-sem"}
    assert text[0].split()[-1] == "estimator"
    assert all(line.split()[-1] == "gibbs" for line in text[1:-1])
    tsv = ok("compare", runs / "gibbs", runs / "dmr-sem", "--format",
             "tsv").stdout.splitlines()
    header = tsv[0].split("\t")
    rows = [dict(zip(header, line.split("\t"))) for line in tsv[1:]]
    assert [r["run"] for r in rows] == [line.split()[0] for line in text[1:-1]]
    assert all(r["perplexity_comparable"] == "true" for r in rows)


def test_compare_left_to_right_adds_a_column(runs):
    data = json.loads(ok("compare", runs / "gibbs", "--left-to-right", "--particles", "2",
                         "--format", "json").stdout)
    value = data["runs"][0]["perplexity_left_to_right"]
    assert np.isfinite(value) and value > 1


def test_compare_refuses_runs_of_different_stores_unless_allowed(runs, tmp_path,
                                                                 example_store):
    ok("train", "--config", write_config(tmp_path, example_store), "--quiet")
    message = fails(2, "compare", runs / "gibbs", tmp_path / "run")
    assert "different corpus stores" in message and "different held-out tokens" in message
    assert "--allow-different-corpora" in message
    data = json.loads(ok("compare", runs / "gibbs", tmp_path / "run", "--format", "json",
                         "--allow-different-corpora").stdout)
    assert data["perplexity_comparable"] is False
    assert [r["run"] for r in data["runs"]] == ["gibbs", "run"]      # not ranked
    text = ok("compare", runs / "gibbs", tmp_path / "run", "--allow-different-corpora").stdout
    assert "perplexity*" in text and "not comparable" in text


def test_compare_reports_an_incomplete_run_and_what_it_lacks(runs, tmp_path):
    partial = tmp_path / "partial"
    partial.mkdir()
    for name in ("config.yaml", "metrics.jsonl", "topictk-run.json"):
        (partial / name).write_bytes((runs / "gibbs" / name).read_bytes())
    (partial / "checkpoints").mkdir()
    outcome = ok("compare", runs / "gibbs", partial, "--format", "json")
    rows = json.loads(outcome.stdout)["runs"]
    row = next(r for r in rows if r["run"] == "partial")
    assert row["iterations"] == 30 and "perplexity" not in row
    assert "no final model" in row["missing"] and "--force" in row["missing"]
    assert "no final model" in outcome.stderr
    assert rows[-1]["run"] == "partial"


def test_compare_refuses_a_folder_without_runs(tmp_path):
    (tmp_path / "empty").mkdir()
    assert "neither a run directory nor a folder of runs" in fails(2, "compare",
                                                                   tmp_path / "empty")
    assert "no such run directory" in fails(2, "compare", tmp_path / "missing")


# ----------------------------------------------------------------------------- alignment
def test_js_distance_is_zero_for_equal_topics_and_one_for_disjoint_ones():
    phi = np.array([[0.5, 0.5, 0.0, 0.0], [0.0, 0.0, 0.5, 0.5]])
    d = js_distances(phi, phi)
    assert d == pytest.approx(np.array([[0.0, 1.0], [1.0, 0.0]]), abs=1e-12)


def test_alignment_recovers_a_permutation_of_noisy_topics(seed):
    rng = np.random.default_rng(seed)
    phi = rng.dirichlet(np.full(40, 0.1), size=8)
    perm = rng.permutation(8)
    noisy = phi[perm] + rng.uniform(0, 0.002, size=phi.shape)
    noisy /= noisy.sum(axis=1, keepdims=True)
    pairs = align_topics(phi, noisy)
    assert [b for _, b, _ in pairs] == list(np.argsort(perm))
    assert max(d for _, _, d in pairs) < 0.2


def test_runs_of_different_k_are_matched_on_the_smaller_k(seed):
    rng = np.random.default_rng(seed)
    big = rng.dirichlet(np.full(30, 0.1), size=5)
    pairs = align_topics(big[[4, 1, 2]], big)
    assert [(a, b) for a, b, _ in pairs] == [(0, 4), (1, 1), (2, 2)]
    assert all(d == pytest.approx(0, abs=1e-7) for _, _, d in pairs)
    assert [b for _, b, _ in align_topics(big, big[[4, 1, 2]])] == [1, 2, 0]


def test_align_a_run_with_itself_gives_distance_zero_and_another_more(runs):
    data = json.loads(ok("compare", runs / "gibbs", runs / "gibbs", runs / "dmr-sem",
                         "--align", "--format", "json").stdout)
    # a run named twice is listed once: only gibbs ~ dmr-sem
    (alignment,) = data["alignments"]
    assert (alignment["a"], alignment["b"]) == ("gibbs", "dmr-sem")
    distances = [p["distance"] for p in alignment["pairs"]]
    assert len(distances) == 6 and {p["topic_b"] for p in alignment["pairs"]} == set(range(1, 7))
    assert [p["topic_a"] for p in alignment["pairs"]] == [1, 2, 3, 4, 5, 6]     # from 1
    assert alignment["median_distance"] == pytest.approx(np.median(distances))
    assert 0 < alignment["median_distance"] < 1
    run = topictk.load_run(runs / "gibbs")
    phi = run.topic_word()
    assert all(d == pytest.approx(0, abs=1e-7) for _, _, d in align_topics(phi, phi))
    text = ok("compare", runs / "gibbs", runs / "tlasgr", "--align").stdout
    assert "median matched distance" in text and "tlasgr aligned to gibbs" in text


def test_align_needs_two_runs(runs):
    assert "--align needs two runs" in fails(2, "compare", runs / "gibbs", "--align")
    assert "leave out --left-to-right" in fails(2, "compare", runs / "gibbs", runs / "ovb",
                                                "--align", "--left-to-right")


# ----------------------------------------------------------------------------- export
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_export_doc_topics_has_every_document_with_its_id_and_split(runs, jsonl_store,
                                                                    family):
    out = ok("export", runs / family, "--what", "doc-topics").stdout.splitlines()
    assert out[0].split("\t") == ["id", "split", *(f"topic_{n}" for n in range(1, 7))]
    rows = [line.split("\t") for line in out[1:]]
    train_ids = (jsonl_store / "train_ids.txt").read_text().splitlines()
    test_ids = (jsonl_store / "test_ids.txt").read_text().splitlines()
    assert [r[0] for r in rows] == train_ids + test_ids
    assert [r[1] for r in rows] == ["train"] * len(train_ids) + ["test"] * len(test_ids)
    assert all(r[0].startswith("doc-") for r in rows)
    theta = np.array([[float(v) for v in r[2:]] for r in rows])
    assert np.allclose(theta.sum(axis=1), 1, atol=1e-4) and (theta >= 0).all()
    api_theta = topictk.load_run(runs / family).doc_topic()
    assert np.allclose(theta[:len(train_ids)], api_theta, atol=1e-5)


def test_export_topic_words_in_every_format_agree(runs, tmp_path):
    run = topictk.load_run(runs / "ovb")
    phi = run.topic_word()
    ok("export", runs / "ovb", "--what", "topic-words", "--format", "npz",
       "--out", tmp_path / "phi.npz")
    with np.load(tmp_path / "phi.npz") as data:
        assert np.array_equal(data["word_topic"], phi.T)
        assert list(data["word"]) == run.vocab
    js = json.loads(ok("export", runs / "ovb", "--what", "topic-words", "--format",
                       "json").stdout)
    assert js["word"] == run.vocab and js["algorithm"] == "ovb"
    assert np.allclose(np.array(js["word_topic"]), phi.T, rtol=1e-15)
    tsv = ok("export", runs / "ovb", "--what", "topic-words").stdout.splitlines()
    assert tsv[1].split("\t")[0] == run.vocab[0]
    assert np.allclose([float(v) for v in tsv[1].split("\t")[1:]], phi[:, 0], rtol=1e-5)
    assert np.allclose(phi.sum(axis=1), 1)


@pytest.mark.parametrize("family", ["gibbs", "tlasgr"])
def test_export_ldavis_keeps_the_model_topic_order(runs, family):
    """The LDAvis JSON: every key LDAvis reads, topic n of LDAvis is the model's topic n - 1
    (topic.order the identity, circles in order), and each topic's most probable term at
    lambda = 1 is the model's top word."""
    run = topictk.load_run(runs / family)
    phi = run.topic_word()
    K = phi.shape[0]
    data = json.loads(ok("export", runs / family, "--what", "ldavis").stdout)
    assert {"mdsDat", "tinfo", "token.table", "R", "lambda.step", "plot.opts",
            "topic.order"} <= set(data)
    assert data["topic.order"] == list(range(1, K + 1))
    assert data["mdsDat"]["topics"] == list(range(1, K + 1))
    assert np.isclose(sum(data["mdsDat"]["Freq"]), 100)
    tinfo = data["tinfo"]
    for k in range(K):
        rows = [i for i, c in enumerate(tinfo["Category"]) if c == f"Topic{k + 1}"]
        best = max(rows, key=lambda i: tinfo["logprob"][i])
        assert tinfo["Term"][best] == run.vocab[int(np.argmax(phi[k]))]
    assert "written as json" in fails(2, "export", runs / family, "--what", "ldavis",
                                      "--format", "tsv")


def test_export_out_is_written_atomically_and_never_over_an_input(runs, tmp_path):
    out = tmp_path / "theta.json"
    ok("export", runs / "gibbs", "--what", "doc-topics", "--format", "json", "--out", out)
    data = json.loads(out.read_text())
    assert len(data["id"]) == len(data["doc_topic"]) == len(data["split"])
    assert "exists; add --force" in fails(2, "export", runs / "gibbs", "--what", "doc-topics",
                                          "--out", out)
    assert "is a folder" in fails(2, "export", runs / "gibbs", "--what", "doc-topics",
                                  "--out", tmp_path)
    assert "inside the input" in fails(2, "export", runs / "gibbs", "--what", "topic-words",
                                       "--out", runs / "gibbs" / "phi.tsv")
    assert not list(tmp_path.glob(".*.tmp"))


def test_export_of_an_incomplete_run_says_what_is_missing(runs, tmp_path):
    partial = tmp_path / "partial"
    partial.mkdir()
    (partial / "config.yaml").write_bytes((runs / "gibbs" / "config.yaml").read_bytes())
    assert "no final model" in fails(1, "export", partial, "--what", "topic-words")


# ----------------------------------------------------------------------------- plot
@pytest.mark.parametrize("suffix, magic", [(".png", b"\x89PNG"), (".svg", b"<?xml"),
                                           (".pdf", b"%PDF")])
def test_plot_writes_the_format_of_the_suffix(runs, tmp_path, suffix, magic):
    out = tmp_path / f"curve{suffix}"
    ok("plot", runs / "gibbs", runs / "ovb", "--out", out, "--x", "tokens")
    assert out.read_bytes().startswith(magic)


def test_plot_draws_one_line_per_run_with_the_recorded_points(runs, tmp_path):
    out = tmp_path / "curve.svg"
    ok("plot", runs, "--out", out, "--x", "step")
    svg = out.read_text()
    for name in FAMILIES:                  # the legend names every run
        assert f"<!-- {name} -->" in svg
    from topictk.evaluation.plot import curves
    lines = curves(discover_runs([runs]), "step", "perplexity")
    gibbs = next(line for line in lines if line[0] == "gibbs")
    assert gibbs[1] == [m["step"] for m in topictk.load_run(runs / "gibbs").metrics()]


def test_plot_refuses_a_metric_the_runs_do_not_record_and_names_those_they_do(runs,
                                                                              tmp_path):
    message = fails(2, "plot", runs / "ovb", "--out", tmp_path / "c.png", "--metric", "nope")
    assert "not recorded" in message and "perplexity" in message
    assert "train_bound_per_token" in message
    assert ".png, .svg, .pdf" in fails(2, "plot", runs / "ovb", "--out", tmp_path / "c.jpg")
    assert "is a folder" in fails(2, "plot", runs / "ovb", "--out", tmp_path)


def test_plot_without_matplotlib_names_the_extra(runs, tmp_path):
    code = ("import sys; sys.modules['matplotlib'] = None; "
            "from topictk.cli import main; sys.argv = ['topictk', 'plot', sys.argv[1], "
            "'--out', sys.argv[2]]; main()")
    done = subprocess.run([sys.executable, "-c", code, str(runs / "gibbs"),
                           str(tmp_path / "c.png")], capture_output=True, text=True,
                          cwd=REPO, check=False)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        ('topictk: error: topictk plot needs matplotlib, which comes with the plot extra: '
         'pip install "topictk[plot]"')]
    assert not (tmp_path / "c.png").exists()


# ----------------------------------------------------------------------------- Python API
def test_load_run_gives_topics_proportions_vocabulary_metrics_and_config(runs):
    run = topictk.load_run(runs / "dmr-sem")
    phi = run.topic_word()
    assert phi.shape == (6, len(run.vocab)) and np.allclose(phi.sum(axis=1), 1)
    assert run.vocab == run.vocabulary
    assert run.config.inference.algorithm == "dmr-sem"
    metrics = run.metrics()
    assert isinstance(metrics, list) and all(isinstance(m, dict) for m in metrics)
    assert [m["step"] for m in metrics] == list(range(2, 21, 2))
    theta = run.infer([{"text": "a class defines methods", "half": "a"}])
    assert theta.shape == (1, 6) and np.isclose(theta.sum(), 1)
    assert run.document_ids("train")[:2] == ["doc-000", "doc-002"]


def test_export_npz_of_doc_topics_round_trips(runs, tmp_path):
    ok("export", runs / "tlasgr", "--what", "doc-topics", "--format", "npz",
       "--out", tmp_path / "t.npz")
    with np.load(io.BytesIO((tmp_path / "t.npz").read_bytes())) as data:
        assert data["doc_topic"].shape == (len(data["id"]), 6)
        assert set(data["split"]) == {"train", "test"}
        assert json.loads(str(data["meta"]))["algorithm"] == "tlasgr"


def test_compare_on_a_protocol_b_store_ranks_by_the_training_documents_held_out_tokens(
        tmp_path):
    store = tmp_path / "store"
    ok("prepare", EXAMPLE, "--out", store, "--test-docs", "0", "--heldout-train-fraction", "0.1")
    for seed in (1, 2):
        folder = tmp_path / f"s{seed}"
        folder.mkdir()
        ok("train", "--config", write_config(folder, store, training={"seed": seed}), "--quiet")
    rows = json.loads(ok("compare", tmp_path / "s1" / "run", tmp_path / "s2" / "run",
                         "--format", "json").stdout)["runs"]
    for row in rows:
        evaluated = json.loads(ok("evaluate", row["path"], "--json").stdout)
        assert evaluated["perplexity"] is None
        assert row["perplexity"] == evaluated["perplexity_train_heldout"]
    assert rows[0]["perplexity"] <= rows[1]["perplexity"]


def test_plot_of_runs_of_different_stores_is_refused_unless_allowed(runs, tmp_path,
                                                                   example_store):
    ok("train", "--config", write_config(tmp_path, example_store), "--quiet")
    out = tmp_path / "c.svg"
    assert "different corpus stores" in fails(2, "plot", runs / "gibbs", tmp_path / "run",
                                              "--out", out)
    assert not out.exists()
    ok("plot", runs / "gibbs", tmp_path / "run", "--out", out, "--allow-different-corpora")
    assert "not comparable" in out.read_text()
