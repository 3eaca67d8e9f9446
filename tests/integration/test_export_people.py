"""Exports for people: word-intrusion tasks with their answer key kept apart and scored by
model precision, and the offline pyLDAvis page of ``export --what ldavis --html``."""
from __future__ import annotations

import csv
import json
import shutil
import sys

import numpy as np
import pytest

import topictk
from tests.integration._cli import fails, ok, run, write_config
from topictk.evaluation.coherence import top_words
from topictk.evaluation.intrusion import intrusion_tasks


@pytest.fixture(scope="module")
def trained(tmp_path_factory, example_store):
    folder = tmp_path_factory.mktemp("people")
    config = write_config(folder, example_store, "g.yaml", output=str(folder / "run"),
                          model={"topics": 8}, training={"seed": 7, "checkpoint_every": 0})
    ok("train", "--config", config, "-q")
    return folder / "run"


def _tsv(path):
    with open(path, encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f, delimiter="\t"))


def test_intrusion_tasks_hide_the_intruder_drawn_from_another_topic(trained, tmp_path):
    tasks, key = tmp_path / "tasks.tsv", tmp_path / "key.tsv"
    ok("export", trained, "--what", "intrusion", "--out", tasks, "--key", key)
    shown, answers = _tsv(tasks), _tsv(key)
    # the judges' file holds the topic and six words, nothing else
    assert list(shown[0]) == ["topic", *(f"word_{i}" for i in range(1, 7))]
    assert [int(t["topic"]) for t in shown] == list(range(1, 9))
    loaded = topictk.load_run(trained)
    phi, vocab = loaded.topic_word(), loaded.vocabulary
    index = {w: i for i, w in enumerate(vocab)}
    order = top_words(phi, phi.shape[1])
    rank = np.argsort(order, axis=1)
    median = np.take_along_axis(phi, order[:, phi.shape[1] // 2:][:, :1], axis=1)[:, 0]
    for task, answer in zip(shown, answers):
        k = int(task["topic"]) - 1
        words = [task[f"word_{i}"] for i in range(1, 7)]
        intruder = answer["intruder"]
        assert words[int(answer["position"]) - 1] == intruder
        assert sorted(w for w in words if w != intruder) == sorted(vocab[w] for w in order[k, :5])
        w = index[intruder]
        assert phi[k, w] <= median[k] and rank[k, w] >= 5       # low in this topic
        source = int(answer["source_topic"]) - 1
        assert source != k and rank[source, w] < 10             # high in another
        assert int(answer["intruder_rank"]) == np.count_nonzero(phi[k] > phi[k, w]) + 1
    # the same seed gives the same files; another seed other draws
    again = tmp_path / "again.tsv"
    ok("export", trained, "--what", "intrusion", "--out", again, "--key", tmp_path / "k2.tsv")
    assert again.read_bytes() == tasks.read_bytes()
    other = tmp_path / "other.tsv"
    ok("export", trained, "--what", "intrusion", "--out", other, "--key", tmp_path / "k3.tsv",
       "--seed", "99")
    assert other.read_bytes() != tasks.read_bytes()
    # JSON: the tasks carry no key; the key says how the intruders were chosen
    ok("export", trained, "--what", "intrusion", "--format", "json", "--out",
       tmp_path / "t.json", "--key", tmp_path / "k.json")
    data = json.loads((tmp_path / "t.json").read_text())
    assert list(data) == ["tasks"] and set(data["tasks"][0]) == {"topic", "words"}
    assert json.loads((tmp_path / "k.json").read_text())["seed"] == 7


def test_intrusion_needs_a_separate_key_file(trained, tmp_path):
    message = fails(2, "export", trained, "--what", "intrusion", "--out", tmp_path / "t.tsv")
    assert message.startswith("--what intrusion needs --key FILE")
    message = fails(2, "export", trained, "--what", "intrusion", "--out", tmp_path / "t.tsv",
                    "--key", tmp_path / "t.tsv")
    assert "--key" in message and "the same file" in message
    assert "--key writes the answer key" in fails(2, "export", trained, "--what",
                                                  "topic-words", "--key", tmp_path / "k.tsv")


def test_model_precision_from_judges_answers(trained, tmp_path):
    ok("export", trained, "--what", "intrusion", "--out", tmp_path / "t.tsv", "--key",
       tmp_path / "key.tsv")
    key = {int(r["topic"]): r for r in _tsv(tmp_path / "key.tsv")}
    wrong = {t: next(r[f"word_{i}"] for i in range(1, 7) if r[f"word_{i}"] != r["intruder"])
             for t, r in key.items()}
    lines = ["judge\ttopic\tword"]
    for t in key:                       # topic 1: 2 of 3 judges right; others: 1 of 2
        lines += [f"a\t{t}\t{key[t]['intruder']}", f"b\t{t}\t{wrong[t]}"]
    lines.append(f"c\t1\t{key[1]['intruder']}")
    (tmp_path / "answers.tsv").write_text("\n".join(lines) + "\n")
    mp = topictk.intrusion_precision(tmp_path / "answers.tsv", tmp_path / "key.tsv")
    assert mp["per_topic"][1] == {"precision": 2 / 3, "answers": 3,
                                  "intruder": key[1]["intruder"]}
    assert all(mp["per_topic"][t]["precision"] == 0.5 for t in range(2, 9))
    assert mp["mean"] == pytest.approx((2 / 3 + 7 * 0.5) / 8)
    (tmp_path / "bad.tsv").write_text("topic\tword\n1\tnot-shown-word\n")
    with pytest.raises(topictk.errors.UsageError, match=r"bad.tsv:2: 'not-shown-word' was not"):
        topictk.intrusion_precision(tmp_path / "bad.tsv", tmp_path / "key.tsv")


def test_intruder_candidates_fall_back_to_outside_the_top_50():
    """V = 200. Topic 1 ranks the words by id; topic 2's top 10 are words 60-69, in topic 1's
    top half but outside its top 50: topic 1's intruder is one of them (the looser rule).
    Topic 2's intruder is a top word of topic 1 (0-9), in its bottom half."""
    V = 200
    first = np.linspace(2.0, 1.0, V)
    second = np.full(V, 1.0)
    second[:10] = 0.1
    second[60:70] = np.linspace(30.0, 20.0, 10)
    phi = np.vstack([first / first.sum(), second / second.sum()])
    vocab = [f"w{i}" for i in range(V)]
    tasks = intrusion_tasks(phi, vocab, 3)
    one, two = tasks.key
    assert one["rule"] == "outside the top 50" and 60 <= int(one["intruder"][1:]) < 70
    assert two["rule"] == "bottom half" and int(two["intruder"][1:]) < 10
    assert one["source_topic"] == 2 and two["source_topic"] == 1
    assert intrusion_tasks(phi, vocab, 3).key == tasks.key          # the seed's draws
    with pytest.raises(ValueError, match="two topics or more"):
        intrusion_tasks(phi[:1], vocab, 0)


# ------------------------------------------------------------------------- pyLDAvis page
def test_ldavis_without_pyldavis_says_how_and_writes_the_json(trained, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "pyLDAvis", None)      # import pyLDAvis fails
    page, data = tmp_path / "page.html", tmp_path / "ldavis.json"
    outcome = run("export", trained, "--what", "ldavis", "--out", data, "--html", page)
    assert outcome.exit_code == 0, outcome.stderr
    warnings = [line for line in outcome.stderr.splitlines() if line.strip()]
    assert len(warnings) == 1 and "pip install pyLDAvis" in warnings[0]
    assert not page.exists()
    assert json.loads(data.read_text())["topic.order"] == list(range(1, 9))
    assert "--html writes the pyLDAvis page" in fails(2, "export", trained, "--what",
                                                       "topic-words", "--html", page)


@pytest.mark.benchmark
def test_pyldavis_page_draws_offline(trained, tmp_path):
    """Needs pyLDAvis (not a dependency; the benchmarks install it) and Debian's chromium."""
    pytest.importorskip("pyLDAvis")
    from playwright.sync_api import sync_playwright

    page_path = tmp_path / "page.html"
    ok("export", trained, "--what", "ldavis", "--out", tmp_path / "l.json", "--html", page_path)
    text = page_path.read_text(encoding="utf-8")
    assert "cdn" not in text.lower() and "<script src" not in text
    executable = shutil.which("chromium") or shutil.which("chromium-browser")
    assert executable, "no chromium on PATH"
    loaded = topictk.load_run(trained)
    top = [loaded.vocabulary[int(np.argmax(row))] for row in loaded.topic_word()]
    errors, outside = [], []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, headless=True)
        tab = browser.new_page(viewport={"width": 1300, "height": 900})
        tab.on("pageerror", lambda e: errors.append(str(e)))
        tab.on("console", lambda m: m.type == "error" and errors.append(m.text))
        tab.route("**/*", lambda route: route.continue_()
                  if route.request.url.startswith("file://")
                  else (outside.append(route.request.url), route.abort()))
        tab.goto(page_path.as_uri(), wait_until="load")
        ids = tab.eval_on_selector_all("#ldavis circle.dot", "els => els.map(e => e.id)")
        assert ids == [f"ldavis-topic{n}" for n in range(1, 9)]   # numbered as the report
        tab.evaluate("() => document.getElementById('ldavis-topic').value = 3")
        tab.dispatch_event("#ldavis-topic", "keyup")
        tab.wait_for_timeout(50)
        bars = tab.eval_on_selector_all(
            "#ldavis text.terms", "els => els.map(e => [e.textContent, "
                                  "e.getBoundingClientRect().y])")
        browser.close()
    assert len(bars) == 30
    assert min(bars, key=lambda item: item[1])[0] == top[2]       # topic 3 is row 2
    assert errors == [] and outside == []
