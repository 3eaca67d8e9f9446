"""``prepare --time-column FIELD --time-bins RULE`` (docs/prepare.md, "Time slices"): the store
records each document's slice in document order, names the slices, draws test documents slice
by slice, from JSONL fields and from a --meta-file beside bag-of-words input; a time the rule
cannot place is one line naming the document, exit 2."""
from __future__ import annotations

import json

import numpy as np
import pytest

from tests.integration._cli import fails, ok
from topictk import open_store, prepare

WORDS = ["market", "stock", "trade", "price", "vote", "party", "poll", "senate"]


def _jsonl(path, n_per_month=10, months=6):
    rng = np.random.default_rng(0)
    with open(path, "w", encoding="utf-8") as out:
        for m in range(months):
            for i in range(n_per_month):
                words = rng.choice(WORDS, 12)
                out.write(json.dumps({"id": f"m{m}-{i}", "text": " ".join(words),
                                      "date": f"2008-{m + 1:02d}-{i + 1:02d}"}) + "\n")
    return path


def test_jsonl_dates_by_month_are_recorded_and_drawn_slice_by_slice(tmp_path):
    data = _jsonl(tmp_path / "docs.jsonl")
    out = ok("prepare", data, "--time-column", "date", "--time-bins", "month",
             "--test-docs", "0.2", "--stopwords", "none", "--out", tmp_path / "s").stdout
    assert "time slices:  6 of 'date' by month" in out, out
    store = open_store(tmp_path / "s")
    assert store.time_slices == [f"2008-{m:02d}" for m in range(1, 7)]
    for part in ("train", "test"):
        slices = store.slices(part)
        ids = store.document_ids(part)
        assert slices.dtype == np.int32 and slices.size == len(ids)
        # every document's slice is its month, in the store's document order
        np.testing.assert_array_equal(slices, [int(i[1]) for i in ids])
    # 2 of every month's 10 documents are test documents
    assert np.bincount(store.slices("test"), minlength=6).tolist() == [2] * 6
    time = store.manifest["time"]
    assert time["train_documents"] == [8] * 6 and time["test_documents"] == [2] * 6
    assert time["field"] == "date" and time["kind"] == "date" and time["rule"] == "month"
    assert store.verify() > 0
    # the Python API takes the options by their names, records in memory the same store
    records = [json.loads(line) for line in data.read_text().splitlines()]
    prepare(out=tmp_path / "api", texts=records, time_column="date", time_bins="month",
            test_docs=0.2, stopwords="none")
    api = open_store(tmp_path / "api")
    for part in ("train", "test"):
        np.testing.assert_array_equal(api.slices(part), store.slices(part))


def test_a_meta_file_gives_bag_of_words_their_times(tmp_path):
    """UCI input, the times in a --meta-file column, explicit edges; a store prepared without
    --time-column has no slices."""
    V, D = 5, 12
    rng = np.random.default_rng(1)
    rows = [(d + 1, w + 1, int(rng.integers(1, 4))) for d in range(D) for w in range(V)
            if rng.random() < 0.7]
    lines = [str(D), str(V), str(len(rows))] + [f"{d} {w} {c}" for d, w, c in rows]
    (tmp_path / "docword.t.txt").write_text("\n".join(lines) + "\n")
    (tmp_path / "vocab.t.txt").write_text("\n".join(WORDS[:V]) + "\n")
    days = [3, 40, 75, 5, 41, 90, 7, 33, 100, 12, 58, 61]
    (tmp_path / "meta.tsv").write_text("doc_id\tday\n" + "".join(
        f"{d + 1}\t{day}\n" for d, day in enumerate(days)))
    ok("prepare", tmp_path / "docword.t.txt", "--vocab", tmp_path / "vocab.t.txt",
       "--meta-file", tmp_path / "meta.tsv", "--time-column", "day",
       "--time-bins", "edges:1,32,61,101", "--test-docs", "3", "--out", tmp_path / "s")
    store = open_store(tmp_path / "s")
    assert store.time_slices == ["[1, 32)", "[32, 61)", "[61, 101]"]
    want = {str(d + 1): int(np.searchsorted([32, 61], day, side="right"))
            for d, day in enumerate(days)}
    for part in ("train", "test"):
        assert store.slices(part).tolist() == [want[i] for i in store.document_ids(part)]
    assert np.bincount(store.slices("test"), minlength=3).tolist() == [1, 1, 1]
    ok("prepare", tmp_path / "docword.t.txt", "--vocab", tmp_path / "vocab.t.txt",
       "--out", tmp_path / "plain")
    plain = open_store(tmp_path / "plain")
    assert plain.slices("train") is None and plain.time_slices is None


def test_times_the_rule_cannot_place_are_one_line_exit_2(tmp_path):
    data = _jsonl(tmp_path / "docs.jsonl", n_per_month=3, months=2)
    lines = data.read_text().splitlines()
    lines[4] = lines[4].replace('"date": "2008-02-02"', '"date": "someday"')
    data.write_text("\n".join(lines) + "\n")
    message = fails(2, "prepare", data, "--time-column", "date", "--out", tmp_path / "s")
    assert "document m1-1" in message and "'someday'" in message
    message = fails(2, "prepare", _jsonl(tmp_path / "ok.jsonl"), "--time-column", "date",
                    "--time-bins", "edges:2008-01-01,2008-03-01", "--out", tmp_path / "s")
    assert "outside the slices' edges" in message and "widen --time-bins" in message
    message = fails(2, "prepare", data, "--time-bins", "year", "--out", tmp_path / "s")
    assert "add --time-column" in message
    message = fails(2, "prepare", data, "--time-column", "date", "--time-bins", "weekly",
                    "--out", tmp_path / "s")
    assert "--time-bins weekly" in message
    assert not (tmp_path / "s").exists()


def test_documents_added_to_a_run_get_their_slices(tmp_path):
    """``train --continue RUN --add STORE``: the union store places the added documents' times
    in the run's slices (their own store's slices do not matter) and counts them; added
    documents without metadata, or with a time outside the slices, are refused in one line."""
    from tests.integration._cli import write_config
    ok("prepare", _jsonl(tmp_path / "base.jsonl", n_per_month=6, months=3), "--time-column",
       "date", "--time-bins", "month", "--stopwords", "none", "--out", tmp_path / "base")
    ok("train", "--config", write_config(tmp_path, tmp_path / "base",
                                         inference={"iterations": 4, "burn_in": 2, "thin": 2},
                                         training={"eval_every": 2, "checkpoint_every": 2}),
       "-q")
    added = tmp_path / "added.jsonl"
    added.write_text("".join(json.dumps({"id": f"new{i}", "text": "stock vote poll market",
                                         "date": date}) + "\n"
                             for i, date in enumerate(["2008-03-30", "2008-01-02"])))
    ok("prepare", added, "--time-column", "date", "--stopwords", "none", "--test-docs", "0",
       "--out", tmp_path / "added")
    ok("train", "--continue", tmp_path / "run", "--add", tmp_path / "added", "--out",
       tmp_path / "more", "-q")
    union = open_store(tmp_path / "more" / "corpus")
    base = open_store(tmp_path / "base")
    assert union.time_slices == ["2008-01", "2008-02", "2008-03"]
    np.testing.assert_array_equal(union.slices("train"),
                                  np.concatenate([base.slices("train"), [2, 0]]))
    np.testing.assert_array_equal(union.slices("test"), base.slices("test"))
    assert union.manifest["time"]["train_documents"] == (
        np.bincount(base.slices("train"), minlength=3) + [1, 0, 1]).tolist()
    (tmp_path / "plain.txt").write_text("stock vote poll market\n")
    ok("prepare", tmp_path / "plain.txt", "--stopwords", "none", "--test-docs", "0",
       "--out", tmp_path / "plain")
    message = fails(2, "train", "--continue", tmp_path / "run", "--add", tmp_path / "plain",
                    "--out", tmp_path / "more2", "-q")
    assert "time slice" in message and "--time-column date" in message
    late = tmp_path / "late.jsonl"
    late.write_text(json.dumps({"id": "late", "text": "stock vote", "date": "2009-05-01"})
                    + "\n")
    ok("prepare", late, "--time-column", "date", "--stopwords", "none", "--test-docs", "0",
       "--out", tmp_path / "late")
    message = fails(2, "train", "--continue", tmp_path / "run", "--add", tmp_path / "late",
                    "--out", tmp_path / "more3", "-q")
    assert "document late" in message and "its month is none of the store's slices" in message


def _two_eras(path, n_per_month=12):
    """Months 1-3 of 2008 write about markets, months 4-6 about votes."""
    rng = np.random.default_rng(2)
    with open(path, "w", encoding="utf-8") as out:
        for m in range(6):
            words = WORDS[:4] if m < 3 else WORDS[4:]
            for i in range(n_per_month):
                out.write(json.dumps({"id": f"m{m}-{i}", "text": " ".join(rng.choice(words, 20)),
                                      "date": f"2008-{m + 1:02d}-{i + 1:02d}"}) + "\n")
    return path


@pytest.mark.parametrize("kind", ["slice", "spline4"])
def test_time_features_give_a_dmr_run_its_prevalence_over_time(tmp_path, kind):
    """``--meta date:slice`` makes one feature per slice, ``date:spline4`` a cubic B-spline
    basis of the date (4 columns); a DMR run on them shows, with ``topics --over-time``, the
    market topic in the first months and the vote topic in the last ones; the numbers are the
    mean over each slice's training documents of alpha_d / sum(alpha_d), alpha_d =
    exp(x_d^T nu), in text, TSV and JSON alike."""
    from tests.integration._cli import model_arrays, write_config
    ok("prepare", _two_eras(tmp_path / "docs.jsonl"), "--time-column", "date", "--time-bins",
       "month", "--meta", f"date:{kind}", "--stopwords", "none", "--out", tmp_path / "s")
    store = open_store(tmp_path / "s")
    months = [f"2008-{m:02d}" for m in range(1, 7)]
    X = store.features("train")
    if kind == "slice":
        assert store.feature_names == [f"date={m}" for m in months] + ["(intercept)"]
        np.testing.assert_array_equal(X[:, :6], np.eye(6)[store.slices("train")])
    else:
        assert store.feature_names == [f"date~s{j}" for j in range(1, 5)] + ["(intercept)"]
        # the B-splines sum to 1 with the first, left out; it is 1 at the earliest date only
        first = 1.0 - X[:, :4].sum(axis=1)
        assert np.all(first >= -1e-12) and np.all(X[:, :4] >= 0)
        earliest = np.argmin([m["date"] for m in store.metadata("train")])
        assert first[earliest] == pytest.approx(1.0)
        assert X[:, 3].max() == pytest.approx(1.0)          # the last date: the last spline
    ok("train", "--config", write_config(
        tmp_path, tmp_path / "s", model={"family": "dmr", "topics": 2, "alpha": 0.5},
        inference={"algorithm": "dmr-sem", "iterations": 60, "burn_in": 40, "thin": 10,
                   "optimize_burn_in": 10, "optimize_interval": 10, "chunks": 1},
        training={"seed": 3, "threads": 1, "eval_every": 20, "checkpoint_every": 20}), "-q")
    got = json.loads(ok("topics", tmp_path / "run", "--over-time", "--format", "json").stdout)
    assert got["slices"] == months and got["time_field"] == "date"
    assert got["documents"] == np.bincount(store.slices("train"), minlength=6).tolist()
    prevalence = np.array([t["prevalence"] for t in got["topics"]])
    _, arrays = model_arrays(tmp_path / "run")
    alpha = np.exp(X @ arrays["nu"].T)
    share = alpha / alpha.sum(axis=1, keepdims=True)
    want = np.array([share[store.slices("train") == s].mean(axis=0) for s in range(6)]).T
    np.testing.assert_allclose(prevalence, want, rtol=1e-12)
    np.testing.assert_allclose(prevalence.sum(axis=0), 1.0)
    market = int(np.argmax([sum(w["word"] in WORDS[:4] for w in t["words"])
                            for t in got["topics"]]))
    # a step in March/April: one parameter per month follows it, a smooth basis less closely
    # (seed 3: 0.70-0.84 before, 0.17-0.38 after)
    high, low = (0.7, 0.3) if kind == "slice" else (0.6, 0.4)
    assert prevalence[market, :3].min() > high and prevalence[market, 3:].max() < low, prevalence
    rows = ok("topics", tmp_path / "run", "--over-time", "--format", "tsv").stdout.splitlines()
    assert rows[0] == "topic\tslice\tprevalence" and len(rows) == 1 + 2 * 6
    assert [float(r.split("\t")[2]) for r in rows[1:7]] == pytest.approx(prevalence[0], abs=1e-6)
    text = ok("topics", tmp_path / "run", "--over-time").stdout
    assert "prevalence (%) by time slice of 'date'" in text and "1 = 2008-01" in text
    # new documents are encoded by their time: a market text of February leans to the market
    # topic; a later date has no slice (refused) but a value of the smooth basis (its end's)
    new = tmp_path / "new.jsonl"
    new.write_text(json.dumps({"id": "n", "text": "market stock trade price",
                               "date": "2008-02-10"}) + "\n")
    theta = json.loads(ok("infer", tmp_path / "run", new, "--format", "jsonl").stdout
                       .splitlines()[0])["theta"]
    assert np.argmax(theta) == market
    late = tmp_path / "late.jsonl"
    late.write_text(json.dumps({"id": "late", "text": "vote poll", "date": "2009-05-01"}) + "\n")
    if kind == "slice":
        assert "its month is none of the store's slices" in fails(2, "infer", tmp_path / "run",
                                                                    late)
    else:
        ok("infer", tmp_path / "run", late)
    # export doc-topics names every document's slice beside its split
    rows = [r.split("\t") for r in ok("export", tmp_path / "run", "--what", "doc-topics",
                                        "-q").stdout.splitlines()]
    assert rows[0][:3] == ["id", "split", "slice"]
    want = [months[s] for part in ("train", "test") for s in store.slices(part)]
    assert [r[2] for r in rows[1:]] == want


def test_over_time_needs_a_dmr_run_on_a_store_with_slices(tmp_path):
    from tests.integration._cli import write_config
    ok("prepare", _two_eras(tmp_path / "docs.jsonl", 4), "--time-column", "date",
       "--stopwords", "none", "--out", tmp_path / "s")
    ok("train", "--config", write_config(tmp_path, tmp_path / "s",
                                         inference={"iterations": 4, "burn_in": 2, "thin": 2},
                                         training={"eval_every": 2, "checkpoint_every": 2}),
       "-q")
    message = fails(2, "topics", tmp_path / "run", "--over-time")
    assert "topictk config dmr-sem" in message and "--over-time slice" in message
    message = fails(2, "prepare", _two_eras(tmp_path / "d2.jsonl", 4), "--meta", "date:slice",
                    "--out", tmp_path / "s2")
    assert "add --time-column date" in message


DMR_SHORT = ["inference.iterations=60", "inference.burn_in=40", "inference.thin=10",
             "inference.optimize_burn_in=10", "inference.optimize_interval=10",
             "inference.chunks=1", "training.seed=3", "training.threads=1",
             "training.eval_every=20", "training.checkpoint_every=20"]


def _train_generated(tmp_path, store, over_time: str, name: str):
    """``topictk config dmr-sem --over-time ...`` for ``store``, trained as it is written
    (model.alpha 0.5 and a short chain set on the command line)."""
    config = tmp_path / f"{name}.yaml"
    ok("config", "dmr-sem", "--corpus", store, "--topics", "2", "--over-time", over_time,
       "--out", config)
    sets = [arg for item in ["model.alpha=0.5", *DMR_SHORT] for arg in ("--set", item)]
    ok("train", "--config", config, "--out", tmp_path / name, *sets, "-q")
    return tmp_path / name


def test_config_over_time_slice_is_the_run_of_a_store_with_slice_features(tmp_path):
    """``topictk config dmr-sem --over-time slice`` on a store with time slices only writes
    ``model.features: slice``: the run's features are one per slice and the intercept, and its
    chain is, bit for bit, that of the same config on a store prepared with ``--meta
    date:slice``; ``topics --over-time`` shows the planted step."""
    from tests.integration._cli import model_arrays
    docs = _two_eras(tmp_path / "docs.jsonl")
    common = ["--time-column", "date", "--time-bins", "month", "--stopwords", "none"]
    ok("prepare", docs, *common, "--out", tmp_path / "plain")
    ok("prepare", docs, *common, "--meta", "date:slice", "--out", tmp_path / "meta")
    text = ok("config", "dmr-sem", "--corpus", tmp_path / "plain", "--over-time", "slice").stdout
    assert "\n  features: slice\n" in text, text
    run = _train_generated(tmp_path, tmp_path / "plain", "slice", "from-config")
    # the same config on the store whose --meta made the same columns
    config = (tmp_path / "from-config.yaml").read_text()
    twin = tmp_path / "twin.yaml"
    twin.write_text(config.replace("features: slice", "features: store")
                    .replace(str(tmp_path / "plain"), str(tmp_path / "meta")))
    sets = [arg for item in ["model.alpha=0.5", *DMR_SHORT] for arg in ("--set", item)]
    ok("train", "--config", twin, "--out", tmp_path / "twin", *sets, "-q")
    _, got = model_arrays(run)
    _, want = model_arrays(tmp_path / "twin")
    assert set(got) == set(want)
    for key in want:
        np.testing.assert_array_equal(got[key], want[key], err_msg=key)
    shown = json.loads(ok("topics", run, "--over-time", "--format", "json").stdout)
    prevalence = np.array([t["prevalence"] for t in shown["topics"]])
    market = int(np.argmax([sum(w["word"] in WORDS[:4] for w in t["words"])
                            for t in shown["topics"]]))
    assert prevalence[market, :3].min() > 0.7 and prevalence[market, 3:].max() < 0.3, prevalence
    listed = json.loads(ok("topics", run, "--format", "json").stdout)["topics"]
    names = [f["feature"] for t in listed for f in t["features"]]
    assert names and all(n.startswith("date=2008-") or n == "(intercept)" for n in names), names
    # documents added to the run are given their own slices' features
    from topictk.api import load_run
    added = tmp_path / "added.jsonl"
    added.write_text("".join(json.dumps({"id": f"new{i}", "text": text, "date": date}) + "\n"
                             for i, (text, date) in enumerate([("market stock", "2008-01-20"),
                                                               ("vote poll", "2008-06-03")])))
    ok("prepare", added, "--time-column", "date", "--stopwords", "none", "--test-docs", "0",
       "--out", tmp_path / "added")
    ok("train", "--continue", run, "--add", tmp_path / "added", "--out", tmp_path / "more", "-q")
    X = load_run(tmp_path / "more")._loaded.driver.features_of("train")
    np.testing.assert_array_equal(X[-2:], [[1, 0, 0, 0, 0, 0, 1], [0, 0, 0, 0, 0, 1, 1]])


def test_config_over_time_spline_places_its_knots_on_the_slices_span(tmp_path):
    """``--over-time spline4``: a cubic B-spline basis of the date, 4 columns, on the span the
    slices cover (from the first slice's start to the last one's end); training, test and new
    documents are encoded by their dates, and the planted step shows in the prevalence."""
    from scipy.interpolate import BSpline

    from topictk.api import load_run
    from topictk.corpus.timeslices import parse_time
    ok("prepare", _two_eras(tmp_path / "docs.jsonl"), "--time-column", "date", "--time-bins",
       "month", "--stopwords", "none", "--out", tmp_path / "s")
    run = _train_generated(tmp_path, tmp_path / "s", "spline4", "run")
    store = open_store(tmp_path / "s")
    edges = store.manifest["time"]["edges"]
    inner = np.linspace(edges[0], edges[-1], 3)[1:-1]
    knots = np.r_[[edges[0]] * 4, inner, [edges[-1]] * 4]
    driver = load_run(run)._loaded.driver
    for part in ("train", "test"):
        times = np.array([parse_time(m["date"])[1] for m in store.metadata(part)])
        want = BSpline.design_matrix(times, knots, 3).toarray()[:, 1:]
        X = driver.features_of(part)
        assert X.shape == (len(times), 5)
        np.testing.assert_allclose(X[:, :4], want, rtol=0, atol=1e-12)
        np.testing.assert_array_equal(X[:, 4], 1.0)
    shown = json.loads(ok("topics", run, "--over-time", "--format", "json").stdout)
    prevalence = np.array([t["prevalence"] for t in shown["topics"]])
    market = int(np.argmax([sum(w["word"] in WORDS[:4] for w in t["words"])
                            for t in shown["topics"]]))
    assert prevalence[market, :3].min() > 0.6 and prevalence[market, 3:].max() < 0.4, prevalence
    new = tmp_path / "new.jsonl"
    new.write_text(json.dumps({"id": "n", "text": "market stock trade price",
                               "date": "2008-02-10"}) + "\n")
    theta = json.loads(ok("infer", run, new, "--format", "jsonl").stdout.splitlines()[0])["theta"]
    assert np.argmax(theta) == market
    undated = tmp_path / "undated.jsonl"
    undated.write_text(json.dumps({"id": "u", "text": "vote poll", "when": "2008-02-10"}) + "\n")
    assert "date" in fails(2, "infer", run, undated)


def test_time_features_need_a_dmr_algorithm_and_a_store_with_slices(tmp_path):
    ok("prepare", _two_eras(tmp_path / "docs.jsonl", 4), "--stopwords", "none",
       "--meta", "date:cat", "--out", tmp_path / "s")
    message = fails(2, "config", "dmr-sem", "--corpus", tmp_path / "s", "--over-time", "slice")
    assert "has none; prepare the corpus with --time-column FIELD" in message
    assert "dtm-sgld" in fails(2, "config", "gibbs", "--over-time", "slice")
    assert "spline3" in fails(2, "config", "dmr-sem", "--over-time", "spline2")
    assert "give slice" in fails(2, "config", "dmr-sem", "--over-time", "weekly")
    assert "--over-time" in fails(2, "config", "--example", "gibbs", "--over-time", "slice")
    # a config that asks for them on a store without slices: one line at train time
    config = tmp_path / "c.yaml"
    ok("config", "dmr-sem", "--corpus", tmp_path / "s", "--out", config)
    message = fails(2, "train", "--config", config, "--set", "model.features=slice",
                    "--out", tmp_path / "run")
    assert "model.features: slice" in message and "--time-column FIELD" in message
    assert not (tmp_path / "run").exists()
