"""The dynamic topic model (``model.family: dtm``, docs/algorithms.md §14) through the command
line: it trains on a store with time slices and evaluates with its own fold-in, a resumed chain
is the uninterrupted one, threads change no number, a store without slices is one line, and
on a planted corpus whose topics drift over four slices every slice's topics are recovered."""
from __future__ import annotations

import json

import numpy as np
import pytest
import yaml

from tests.fixtures import cut_back_run
from tests.integration._cli import assert_same_run, fails, model_arrays, ok


def _config(tmp_path, store, name, **sections):
    model = {"family": "dtm", "topics": 4, **sections.pop("model", {})}
    inference = {"algorithm": "dtm-sgld", "iterations": 30, "lda_sweeps": 10, "burn_in": 10,
                 **sections.pop("inference", {})}
    training = {"seed": 5, "eval_every": 10, "checkpoint_every": 10, "keep_checkpoints": 5,
                **sections.pop("training", {})}
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump({
        "corpus": str(store), "output": str(tmp_path / name), "model": model,
        "inference": inference, "training": training,
        "evaluation": {"fold_in_sweeps": 10, "fold_in_burn_in": 5}}), encoding="utf-8")
    return path


def test_trains_and_evaluates_with_its_own_fold_in(time_store, tmp_path):
    ok("train", "--config", _config(tmp_path, time_store, "d"), "-q")
    lines = [json.loads(x) for x in (tmp_path / "d" / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in lines] == [10, 20, 30]
    assert all(np.isfinite(m["perplexity_point"]) for m in lines)
    header, arrays = model_arrays(tmp_path / "d")
    assert arrays["phi"].shape[0] == 4 and arrays["alpha"].shape == (4, 4)
    assert header["state"]["kept"] == 20
    result = json.loads(ok("evaluate", tmp_path / "d", "--json", "-q").stdout)
    assert result["estimator"] == "dtm"
    assert 1 < result["perplexity"] < 1737
    by_slice = result["perplexity_by_slice"]
    assert list(by_slice) == ["2001", "2002", "2003", "2004"]
    assert min(by_slice.values()) < result["perplexity"] < max(by_slice.values())
    assert json.loads(ok("evaluate", tmp_path / "d", "--json", "-q").stdout) == result
    topics = ok("topics", tmp_path / "d").stdout
    assert topics.count("\n") >= 4


def test_resumed_equals_uninterrupted_and_threads_change_nothing(time_store, tmp_path):
    ok("train", "--config", _config(tmp_path, time_store, "one", training={"threads": 1}),
       "-q")
    cut_back_run(tmp_path / "one", tmp_path / "cut", 20)
    ok("train", "--config", _config(tmp_path, time_store, "cut", training={"threads": 1}),
       "--resume", "-q")
    assert_same_run(tmp_path / "one", tmp_path / "cut")
    ok("train", "--config", _config(tmp_path, time_store, "two", training={"threads": 2}),
       "-q")
    assert_same_run(tmp_path / "one", tmp_path / "two")


def test_a_store_without_time_slices_is_one_line_exit_2(example_store, tmp_path):
    message = fails(2, "train", "--config", _config(tmp_path, example_store, "none"))
    assert "has no time slices" in message and "--time-column" in message
    assert "\n" not in message.strip()


def test_another_fold_in_is_refused_not_ignored(time_store, tmp_path):
    """evaluate --fold-in fixed-point (or mh) of a dynamic topic model run is one line, exit
    2: the run would be scored by its own fold-in all the same."""
    ok("train", "--config", _config(tmp_path, time_store, "d"), "-q")
    for estimator in ("fixed-point", "mh"):
        message = fails(2, "evaluate", tmp_path / "d", "--fold-in", estimator)
        assert f"evaluation.fold_in: {estimator} does not apply" in message


CORE = 0.06


def _word(w: int) -> str:
    return "w" + chr(97 + w // 26) + chr(97 + w % 26)


def _drifting_corpus(path, n_per_slice=150, length=60, seed=0):
    """Three topics over 60 words and four yearly slices: topic k puts CORE on each of its
    ten core words 20k..20k+9 in every slice, and the rest evenly on four drifting words
    20k+10+2t..20k+13+2t in slice t (slices 0 and 3 share none of them). Returns the true
    topics (T, K, V)."""
    rng = np.random.default_rng(seed)
    T, K, V = 4, 3, 60
    truth = np.zeros((T, K, V))
    for t in range(T):
        for k in range(K):
            truth[t, k, 20 * k:20 * k + 10] = CORE
            truth[t, k, 20 * k + 10 + 2 * t:20 * k + 14 + 2 * t] = (1 - 10 * CORE) / 4
    with open(path, "w", encoding="utf-8") as out:
        for t in range(T):
            for i in range(n_per_slice):
                theta = rng.dirichlet(np.full(K, 0.3))
                z = rng.choice(K, size=length, p=theta)
                words = [rng.choice(V, p=truth[t, k]) for k in z]
                out.write(json.dumps({"id": f"y{t}-{i}", "year": 2001 + t,
                                      "text": " ".join(_word(w) for w in words)}) + "\n")
    return truth


def test_topics_that_drift_are_recovered_slice_by_slice(tmp_path):
    """Every slice's version of each planted topic is recovered within total variation 0.15,
    and the recovered first and last versions differ by at least 0.25 (truth: 0.4). A static
    topic, the mean of the four versions, is 0.20 to 0.25 from each version. Why 0.15: with the
    default start (50 LDA sweeps) seeds 1 to 6 end at 0.065 to 0.137; from fewer LDA sweeps a
    seed can keep static LDA's mode, which splits a topic's drifting words by time (0.22)."""
    truth = _drifting_corpus(tmp_path / "drift.jsonl")
    ok("prepare", tmp_path / "drift.jsonl", "--time-column", "year", "--stopwords", "none",
       "--max-df", "1.0", "--out", tmp_path / "store")
    ok("train", "--config", _config(tmp_path, tmp_path / "store", "p", model={"topics": 3},
                                    inference={"iterations": 100, "lda_sweeps": 50,
                                               "burn_in": 50}), "-q")
    from topictk.api import load_run
    run = load_run(tmp_path / "p")
    order = np.array([run.vocabulary.index(_word(w)) for w in range(60)])
    probs = run._loaded.driver.slice_topic_word(run._loaded.state)[:, :, order]
    match = [int(np.argmax(probs[0, :, 20 * k:20 * k + 10].sum(axis=1))) for k in range(3)]
    assert sorted(match) == [0, 1, 2]
    for k, row in enumerate(match):
        for t in range(4):
            tv = 0.5 * np.abs(probs[t, row] - truth[t, k]).sum()
            assert tv < 0.15, (k, t, tv)
        assert 0.5 * np.abs(probs[0, row] - probs[3, row]).sum() > 0.25


def test_topics_over_time_and_the_slices_export_show_every_version(time_store, tmp_path):
    """--over-time lists each topic's version in every slice with its prevalence (each
    slice's prevalences sum to 1); export --what slice-topic-words writes every version's phi
    (a slice's column sums to 1) and doc-topics folds each training document in with its own
    slice's topics (a document moved to another slice gets other proportions)."""
    ok("train", "--config", _config(tmp_path, time_store, "d"), "-q")
    data = json.loads(ok("topics", tmp_path / "d", "--over-time", "--format", "json",
                         "-n", "5").stdout)
    assert data["slices"] == ["2001", "2002", "2003", "2004"] and len(data["topics"]) == 4
    prevalence = np.array([t["prevalence"] for t in data["topics"]])
    np.testing.assert_allclose(prevalence.sum(axis=0), 1.0)
    assert all(len(t["words_by_slice"]) == 4 and len(t["words_by_slice"][0]) == 5
               for t in data["topics"])
    text = ok("topics", tmp_path / "d", "--over-time").stdout
    assert text.count("  2003 ") == 4
    out = tmp_path / "phi.tsv"
    ok("export", tmp_path / "d", "--what", "slice-topic-words", "--out", out)
    rows = [line.split("\t") for line in out.read_text().splitlines()]
    assert rows[0][:2] == ["slice", "word"] and len(rows[0]) == 6
    first = np.array([[float(v) for v in r[2:]] for r in rows[1:] if r[0] == "2001"])
    np.testing.assert_allclose(first.sum(axis=0), 1.0, atol=1e-4)

    from topictk.api import load_run
    from topictk.evaluation.infer import infer_documents, split_documents
    run = load_run(tmp_path / "d")._loaded
    docs, _ = split_documents(run.store, "train")
    theta = np.concatenate([b for _, b in infer_documents(run, docs, "train", sweeps=10,
                                                          burn_in=5)])
    docs.slices = (np.asarray(docs.slices) + 2) % 4
    moved = np.concatenate([b for _, b in infer_documents(run, docs, "train", sweeps=10,
                                                          burn_in=5)])
    np.testing.assert_allclose(theta.sum(axis=1), 1.0)
    assert np.abs(theta - moved).max() > 0.05


def test_a_forecast_store_holds_out_the_last_slice_and_the_run_propagates_it(tmp_path):
    """prepare --forecast: the test documents are the last slice's, the training documents
    the others'; a run on it trains without documents in that slice, whose topics are then
    the slice before propagated (close to it, not equal), and evaluates."""
    from tests.golden.cases import write_meta_corpus
    corpus = write_meta_corpus(tmp_path / "meta.jsonl")
    outcome = ok("prepare", corpus, "--time-column", "year", "--forecast", "--out",
                 tmp_path / "store")
    assert "split:        forecast" in outcome.stdout
    from topictk.corpus.store import CorpusStore
    store = CorpusStore.open(tmp_path / "store")
    assert set(np.asarray(store.slices("test")).tolist()) == {3}
    assert set(np.asarray(store.slices("train")).tolist()) == {0, 1, 2}
    ok("train", "--config", _config(tmp_path, tmp_path / "store", "f"), "-q")
    from topictk.api import load_run
    run = load_run(tmp_path / "f")._loaded
    versions = run.driver.slice_topic_word(run.state)
    step = 0.5 * np.abs(versions[3] - versions[2]).sum(axis=1)
    assert np.all(step > 0) and np.all(step < 0.2), step
    assert 1 < json.loads(ok("evaluate", tmp_path / "f", "--json", "-q").stdout)["perplexity"]
    assert "drop --test-docs" in fails(2, "prepare", corpus, "--time-column", "year",
                                       "--forecast", "--test-docs", "0.2", "--out",
                                       tmp_path / "other")
    assert "add --time-column" in fails(2, "prepare", corpus, "--forecast", "--out",
                                        tmp_path / "other")


def test_two_dask_workers_give_the_one_machine_chain(time_store, tmp_path):
    """The token draws of every iteration on a 2-worker local cluster (runs of chunks, their
    counts added among the workers): the run (every array, stream and metric) and its
    evaluation equal the run in one process."""
    pytest.importorskip("distributed")
    ok("train", "--config", _config(tmp_path, time_store, "here"), "-q")
    ok("train", "--config", _config(tmp_path, time_store, "there"), "--dask-workers", "2",
       "-q")
    assert_same_run(tmp_path / "here", tmp_path / "there")
    # evaluate's fold-in and infer's (each document with its slice's topics) on 2 workers
    run = tmp_path / "here"
    assert (json.loads(ok("evaluate", run, "--json").stdout)
            == json.loads(ok("evaluate", run, "--json", "--dask-workers", "2").stdout))
    documents = time_store.parent / "meta.jsonl"
    here = ok("infer", run, documents).stdout
    assert here and here == ok("infer", run, documents, "--dask-workers", "2").stdout


def test_a_lost_worker_changes_nothing(time_store, tmp_path, monkeypatch):
    """A worker reported lost in the middle of iteration 7's token draw: the draw is done
    again from the same inputs and the run is the one-machine run."""
    pytest.importorskip("distributed")
    from topictk.inference import cluster

    ok("train", "--config", _config(tmp_path, time_store, "here"), "-q")
    original, calls = cluster._map_once, {"n": 0}

    def flaky(client, task):
        calls["n"] += 1
        if calls["n"] == 7:
            raise cluster.WorkerLost("a Dask worker was lost (simulated)")
        return original(client, task)

    monkeypatch.setattr(cluster, "_map_once", flaky)
    ok("train", "--config", _config(tmp_path, time_store, "there"), "--dask-workers", "2",
       "-q")
    assert calls["n"] > 7
    assert_same_run(tmp_path / "here", tmp_path / "there")


def test_the_report_draws_a_topics_prevalence_and_words_over_time(time_store, tmp_path,
                                                                  browser):
    """In a real browser: selecting a topic of a dynamic topic model run draws its
    prevalence (one line) and its words' probabilities (one line per word) over the four
    slices, their points where the data put them; nothing else is requested, no error."""
    ok("train", "--config", _config(tmp_path, time_store, "d"), "-q")
    out = tmp_path / "report.html"
    ok("report", tmp_path / "d", "--out", out)
    page = browser.new_page(viewport={"width": 1200, "height": 900})
    errors, requests = [], []
    page.on("console", lambda m: m.type in ("error", "warning") and errors.append(m.text))
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("request", lambda r: requests.append(r.url))
    page.goto(out.as_uri())
    run = page.locator("#run-0")
    assert run.locator(".time h3").text_content() == "Over time: select a topic"
    run.locator("svg.map circle.topic[data-topic='1']").click()
    assert run.locator(".time h3").text_content() == "Topic 2 over time"
    assert run.locator("svg.time-prevalence polyline").count() == 1
    lines = run.locator("svg.time-words polyline")
    assert lines.count() == 6
    points = [p.split(",") for p in lines.first.get_attribute("points").split()]
    assert len(points) == 4 and len({p[0] for p in points}) == 4
    from topictk.api import load_run
    loaded = load_run(tmp_path / "d")._loaded
    versions = loaded.driver.slice_topic_word(loaded.state)[:, 1, :]
    first = run.locator("svg.time-words text.time-label").first.text_content()
    word = loaded.store.vocab.index(first)
    ys = [float(p[1]) for p in points]
    # higher probability, higher on the chart (smaller y)
    assert np.argsort(ys).tolist() == np.argsort(-versions[:, word], kind="stable").tolist()
    assert errors == [] and requests == [out.as_uri()]
    page.close()


def test_score_slice_topics_gives_evaluates_number_for_a_runs_own_topics(time_store,
                                                                          tmp_path):
    """topictk.score_slice_topics, the scorer of another library's dynamic topic model, with
    a run's own topics, slice means, eta_var and seed gives the run's evaluate numbers (the
    same estimator on the same tokens); Run.slice_topic_word is refused for a static run."""
    import topictk
    from topictk.errors import UsageError

    ok("train", "--config", _config(tmp_path, time_store, "d"), "-q")
    run = topictk.load_run(tmp_path / "d")
    evaluated = run.evaluate()
    loaded = run._loaded
    scored = topictk.score_slice_topics(
        time_store, run.slice_topic_word(), loaded.driver.slice_alpha(loaded.state),
        loaded.driver.eta_var, sweeps=10, burn_in=5, seed=5)
    assert scored["estimator"] == evaluated["estimator"] == "dtm"
    np.testing.assert_allclose(scored["perplexity"], evaluated["perplexity"], rtol=1e-9)
    np.testing.assert_allclose(list(scored["perplexity_by_slice"].values()),
                               list(evaluated["perplexity_by_slice"].values()), rtol=1e-9)
    with pytest.raises(UsageError, match="slice_means"):
        topictk.score_slice_topics(time_store, run.slice_topic_word(), np.zeros((3, 4)), 1.0)
    from tests.integration._cli import write_config
    ok("train", "--config", write_config(tmp_path, time_store, "lda.yaml",
                                         output=str(tmp_path / "lda")), "-q")
    with pytest.raises(UsageError, match="one version of each topic"):
        topictk.load_run(tmp_path / "lda").slice_topic_word()


def test_new_documents_are_placed_in_their_slice_by_their_time(time_store, tmp_path):
    """infer: a new document with the store's time field is folded in with its slice's
    topics, one without it with the last slice's (the same numbers as one of the last
    year); a batch where only some have it names the one without."""
    import topictk
    from topictk.errors import TopictkError

    ok("train", "--config", _config(tmp_path, time_store, "d"), "-q")
    run = topictk.load_run(tmp_path / "d")
    text = "python list function code data file error module"
    first = run.infer([{"text": text, "year": 2001}])
    last = run.infer([{"text": text, "year": 2004}])
    untimed = run.infer([{"text": text}])
    np.testing.assert_array_equal(untimed, last)
    assert np.abs(first - last).max() > 0.02
    with pytest.raises(TopictkError, match="document 2 has no 'year'"):
        run.infer([{"text": text, "year": 2001}, {"text": text}])
