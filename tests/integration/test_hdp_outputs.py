"""Where an HDP run (``model.family: hdp``) shows its topics: only its live topics (slots
holding tokens), largest first (tokens n_k), each under its slot number + 1 with its weights
pi_k and token share, in ``topics`` (text, TSV, JSON, --diagnostics), ``labels``, ``export``
(doc-topics, topic-words, ldavis, intrusion), ``infer``, ``compare --align``, ``report`` (map,
NPMI bars, labels and documents, the number box, the chains' live K, alpha_0 and gamma) and
the Python API."""
from __future__ import annotations

import csv
import io
import json
import re
import shutil

import numpy as np
import pytest

import topictk
from tests.integration._cli import EXAMPLE, model_arrays, ok, write_config
from topictk.numbering import topic_number


@pytest.fixture(scope="module")
def hdp(example_store, tmp_path_factory):
    """A 20-sweep HDP run of the example corpus, its topics' slots largest first, and a
    label on its second largest topic."""
    folder = tmp_path_factory.mktemp("hdp-outputs")
    ok("train", "--config", write_config(
        folder, example_store, "h.yaml", output=str(folder / "h"),
        model={"family": "hdp", "topics": None, "alpha": 1.0},
        inference={"iterations": 20, "burn_in": 10, "thin": 10},
        training={"eval_every": 10, "checkpoint_every": 10}), "-q")
    run = folder / "h"
    _, arrays = model_arrays(run)
    nk = arrays["nk"]
    live = np.flatnonzero(nk)
    live = live[np.argsort(-nk[live], kind="stable")]
    assert 2 < live.size < nk.size and np.any(np.diff(live) < 0)     # not in slot order
    ok("labels", run, "--set", f"{topic_number(live[1])}=runner up")
    return {"run": run, "live": live, "ids": [topic_number(k) for k in live],
            "arrays": arrays, "folder": folder}


def test_topics_lists_live_topics_by_size_with_weights(hdp):
    arrays, ids = hdp["arrays"], hdp["ids"]
    listed = json.loads(ok("topics", hdp["run"], "--format", "json").stdout)["topics"]
    assert [t["topic"] for t in listed] == ids
    share = arrays["nk"] / arrays["nk"].sum()
    for t, k in zip(listed, hdp["live"]):
        assert t["weights"] == {"pi": pytest.approx(arrays["pi"][k]),
                                "share": pytest.approx(share[k])}
    assert listed[1]["label"] == "runner up"
    rows = list(csv.DictReader(io.StringIO(ok("topics", hdp["run"], "--format", "tsv",
                                              "-n", "2").stdout), delimiter="\t"))
    assert [int(r["topic"]) for r in rows[::2]] == ids
    assert float(rows[0]["pi"]) == pytest.approx(arrays["pi"][hdp["live"][0]], rel=1e-5)
    assert rows[2]["label"] == "runner up"
    text = ok("topics", hdp["run"], "-n", "3").stdout
    numbers = [int(line.split()[0]) for line in text.splitlines()
               if re.match(r"^ *\d+  ", line)]
    assert numbers == ids
    assert text.count("weight: pi ") == len(ids)


def test_diagnostics_and_labels_list_live_topics_by_size(hdp):
    diagnostics = json.loads(ok("topics", hdp["run"], "--diagnostics", "--format",
                                "json").stdout)["topics"]
    assert [t["topic"] for t in diagnostics] == hdp["ids"]
    tokens = [t["tokens"] for t in diagnostics]
    assert tokens == sorted(tokens, reverse=True) and tokens[-1] > 0
    labels = json.loads(ok("labels", hdp["run"], "--format", "json").stdout)["labels"]
    assert [x["topic"] for x in labels] == hdp["ids"]
    assert labels[1]["label"] == "runner up"


def test_exports_carry_live_topics_under_their_numbers(hdp, tmp_path):
    run, ids, live = hdp["run"], hdp["ids"], hdp["live"]
    ok("export", run, "--what", "topic-words", "--out", tmp_path / "tw.tsv")
    header = (tmp_path / "tw.tsv").read_text().splitlines()[0].split("\t")
    assert header[1:] == [f"topic_{n}" + (":runner up" if j == 1 else "")
                          for j, n in enumerate(ids)]
    ok("export", run, "--what", "topic-words", "--format", "json", "--out", tmp_path / "tw.json")
    data = json.loads((tmp_path / "tw.json").read_text())
    assert data["topic_ids"] == ids
    phi = topictk.load_run(run)._loaded.topic_word()
    np.testing.assert_allclose(np.array(data["word_topic"]), phi[live].T)
    assert data["topic_weights"]["pi"] == pytest.approx(hdp["arrays"]["pi"][live].tolist())
    ok("export", run, "--what", "doc-topics", "--format", "json", "--out", tmp_path / "dt.json",
       "--sweeps", "4", "--burn-in", "2")
    data = json.loads((tmp_path / "dt.json").read_text())
    assert data["topic_ids"] == ids and len(data["doc_topic"][0]) == len(ids)
    ok("export", run, "--what", "ldavis", "--out", tmp_path / "lda.json")
    data = json.loads((tmp_path / "lda.json").read_text())
    assert data["topic.order"] == ids and len(data["mdsDat"]["x"]) == len(ids)
    assert data["topic.labels"][1] == "runner up"
    ok("export", run, "--what", "intrusion", "--format", "json", "--out", tmp_path / "i.json",
       "--key", tmp_path / "k.json")
    tasks = json.loads((tmp_path / "i.json").read_text())["tasks"]
    key = json.loads((tmp_path / "k.json").read_text())["key"]
    assert [t["topic"] for t in tasks] == ids
    assert {k["source_topic"] for k in key} <= set(ids)


def test_infer_and_compare_name_live_topics(hdp, tmp_path):
    run, ids = hdp["run"], hdp["ids"]
    docs = tmp_path / "new.txt"
    docs.write_text("\n".join(EXAMPLE.read_text().splitlines()[:3]) + "\n")
    records = [json.loads(x) for x in ok("infer", run, docs, "--sweeps", "4", "--burn-in", "2",
                                         "-q").stdout.splitlines()]
    for r in records:
        assert r["topics"] == ids and len(r["theta"]) == len(ids)
        best = [ids[j] for j in np.argsort(-np.array(r["theta"]), kind="stable")[:3]]
        assert r["top_topics"] == best
    header = ok("infer", run, docs, "--sweeps", "4", "--burn-in", "2", "--output-format", "tsv",
                "-q").stdout.splitlines()[0].split("\t")
    assert [c.split(":")[0] for c in header[3:]] == [f"topic_{n}" for n in ids]
    shutil.copytree(run, tmp_path / "copy")        # the same topics: each aligned to itself
    aligned = json.loads(ok("compare", run, tmp_path / "copy", "--align", "--format",
                            "json").stdout)
    pairs = aligned["alignments"][0]["pairs"]
    assert [p["topic_a"] for p in pairs] == ids == [p["topic_b"] for p in pairs]
    assert pairs[1]["label_a"] == "runner up"


def test_api_shows_live_topics(hdp):
    run = topictk.load_run(hdp["run"])
    live, arrays = hdp["live"], hdp["arrays"]
    assert run.topic_ids == hdp["ids"] and run.n_topics == len(live)
    np.testing.assert_array_equal(run.topic_word(), run._loaded.topic_word()[live])
    np.testing.assert_allclose(run.topic_weights["pi"], arrays["pi"][live])
    assert run.labels()[1] == "runner up" and len(run.labels()) == len(live)
    assert run.doc_topic(sweeps=4, burn_in=2).shape == (307, len(live))
    assert [d["topic"] for d in run.diagnostics()] == hdp["ids"]
    # the largest share of the first live topic in the training state, (n_dk + alpha_k) /
    # (n_d + sum alpha), alpha = alpha_0 pi of the saved state
    counts = arrays["ndk"].astype(np.float64) + arrays["alpha"]
    theta = counts[:, live[0]] / counts.sum(axis=1)
    top = run.representative_docs(0, 1)[0]
    assert top["index"] == int(np.argmax(theta))
    assert top["share"] == pytest.approx(theta.max())


def _page_data(page: str) -> dict:
    match = re.search(r'<script type="application/json" id="report-data">(.*?)</script>', page,
                      re.DOTALL)
    return json.loads(match.group(1))


def test_report_shows_live_topics_and_the_chain(hdp, tmp_path):
    """The page's data hold the live topics largest first with their numbers and weights
    (map, NPMI bars, labels, documents all of those topics), and per evaluation the chain's
    live K, alpha_0 and gamma as metrics.jsonl has them, drawn in three charts."""
    ok("report", hdp["run"], "--out", tmp_path / "r.html")
    page = (tmp_path / "r.html").read_text()
    data = _page_data(page)
    topics = data["runs"][0]
    ids = hdp["ids"]
    assert topics["ids"] == ids and len(topics["share"]) == len(ids)
    assert len(topics["npmi"]) == len(topics["docs"]) == len(topics["labels"]) == len(ids)
    assert topics["labels"][1]["text"] == "runner up"
    assert topics["weights"]["pi"] == pytest.approx(hdp["arrays"]["pi"][hdp["live"]].tolist(),
                                                    abs=1e-6)
    labels = re.findall(r'class="topic-label" data-topic-label="\d+"[^>]*>(\d+)<', page)
    assert labels and set(map(int, labels)) <= set(ids)
    metrics = [json.loads(x) for x in (hdp["run"] / "metrics.jsonl").read_text().splitlines()]
    assert data["chains"][0] == [{"step": m["step"], "live_k": m["live_k"],
                                  "alpha": m["alpha"], "gamma": m["gamma"]} for m in metrics]
    assert [m["step"] for m in metrics] == [10, 20]
    for key in ("live_k", "alpha", "gamma"):
        assert f'class="chart chain" data-measure="{key}"' in page
    assert f"K = {len(ids)} live of {hdp['arrays']['nk'].size} slots" in page


def test_report_page_numbers_live_topics_in_the_browser(hdp, browser, tmp_path):
    """In the page: Next from no topic selects the largest, its title giving its number, share
    and pi; the number box takes a live topic's number and refuses an empty slot's, naming the
    topics shown; the labels table numbers the topics as the commands do, and an edited label
    is saved under its topic's number (the others, suggestions included, under theirs)."""
    ids = hdp["ids"]
    ok("report", hdp["run"], "--out", tmp_path / "r.html")
    page = browser.new_page(viewport={"width": 1200, "height": 900}, accept_downloads=True)
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto((tmp_path / "r.html").as_uri())
    run = page.locator("#run-0")
    title, box = run.locator(".bars-title"), run.locator("input.topic-number")
    run.locator("button.topic-next").click()
    assert title.text_content().startswith(f"Topic {ids[0]} ·") and "π " in title.text_content()
    assert box.input_value() == str(ids[0])
    box.fill(str(ids[2]))
    assert title.text_content().startswith(f"Topic {ids[2]} ·")
    empty = next(n for n in range(1, hdp["arrays"]["nk"].size + 1) if n not in ids)
    box.fill(str(empty))
    error = run.locator(".topic-number-error")
    assert error.is_visible() and error.text_content().startswith(
        f"no topic {empty}: the topics shown are {ids[0]}, {ids[1]}")
    cells = run.locator("table.labels tbody tr td:first-child").all_text_contents()
    assert cells == [str(n) for n in ids]
    box.fill(str(ids[1]))
    assert run.locator(".topic-docs h3").text_content().startswith(f"Topic {ids[1]} · runner up")
    inputs = run.locator("table.labels input.topic-label")
    inputs.nth(0).fill("largest")
    inputs.nth(0).dispatch_event("change")
    with page.expect_download() as waiting:
        run.locator("button.save-labels").click()
    saved = waiting.value.path().read_text(encoding="utf-8").splitlines()[1:]
    assert saved[:2] == [f"{ids[0]}\tlargest", f"{ids[1]}\trunner up"]
    numbers = [int(line.split("\t")[0]) for line in saved]     # with the suggestions
    assert numbers == [n for n in ids if n in numbers]
    assert errors == []
    page.close()


def test_k_panel_scores_the_live_topics(hdp, example_store, tmp_path):
    """Two HDP runs of different K_max make a K panel; each run's inverted RBO is that of its
    live topics' top words (an empty slot's 'top words' are its words in id order)."""
    from topictk.evaluation.coherence import top_words
    from topictk.evaluation.kpanel import inverted_rbo

    other = tmp_path / "h40"
    ok("train", "--config", write_config(
        tmp_path, example_store, "h40.yaml", output=str(other),
        model={"family": "hdp", "topics": None, "max_topics": 40, "alpha": 1.0},
        inference={"iterations": 20, "burn_in": 10, "thin": 10},
        training={"eval_every": 10, "checkpoint_every": 10}), "-q")
    ok("report", hdp["run"], other, "--out", tmp_path / "r.html")
    page = (tmp_path / "r.html").read_text()
    match = re.search(r'<script type="application/json" id="k-panel-data">(.*?)</script>',
                      page, re.DOTALL)
    panel = json.loads(match.group(1))
    assert sorted(panel["x_values"]) == [40, hdp["arrays"]["nk"].size]
    for path, entry in zip((hdp["run"], other), panel["runs"]):
        run = topictk.load_run(path)
        n = run.config.evaluation.coherence_top
        expected = inverted_rbo(top_words(run.topic_word(), n))
        assert entry["scores"]["inverted_rbo"] == pytest.approx(expected)


def test_a_checkpoint_lists_its_own_live_topics_and_documents_follow_their_topic(hdp):
    """``--checkpoint 10`` lists the live slots of that checkpoint, largest first, under the
    same numbering (slot + 1); ``--docs`` gives each listed topic its own documents (the
    largest n_dk of its slot first)."""
    _, early = model_arrays(hdp["run"], "checkpoints/step-00000010.npz")
    live = np.flatnonzero(early["nk"])
    live = live[np.argsort(-early["nk"][live], kind="stable")]
    listed = json.loads(ok("topics", hdp["run"], "--checkpoint", "10", "--format",
                           "json").stdout)["topics"]
    assert [t["topic"] for t in listed] == [topic_number(k) for k in live]
    listed = json.loads(ok("topics", hdp["run"], "--docs", "1", "--format",
                           "json").stdout)["topics"]
    ndk = hdp["arrays"]["ndk"]
    for t, k in zip(listed[:5], hdp["live"]):
        share = (ndk[:, k] + 0.0) / np.maximum(ndk.sum(axis=1), 1)
        assert t["docs"][0]["index"] in np.flatnonzero(share >= share.max() - 0.05)
