"""Topic labels and representative documents through the commands: ``labels`` (suggest,
set, never a user's file without --force), ``topics --labels/--docs``, ``export`` and
``compare --align`` with labels, ``prepare --snippets``, the Python API, and the report page
in a real headless Chromium (editing a label, the labels.tsv it saves, the documents of the
selected topic)."""
from __future__ import annotations

import json
import shutil

import pytest

from tests.integration._cli import EXAMPLE, fails, ok, write_config
from topictk.evaluation.labels import WRITTEN_BY



@pytest.fixture(scope="module")
def snippet_store(tmp_path_factory):
    out = tmp_path_factory.mktemp("snippets") / "store"
    outcome = ok("prepare", EXAMPLE, "--out", out, "--snippets", "60")
    assert "snippets:     the first 60 characters" in outcome.stdout
    return out


@pytest.fixture
def run_dir(tmp_path_factory, snippet_store):
    """A fresh short Gibbs run (K = 4) on the store with snippets (each test labels it)."""
    folder = tmp_path_factory.mktemp("labelled")
    config = write_config(folder, snippet_store, output=str(folder / "run"),
                          model={"topics": 4},
                          inference={"algorithm": "gibbs", "iterations": 20, "burn_in": 10,
                                     "thin": 10})
    ok("train", "--config", config, "-q")
    return folder / "run"


def test_suggest_then_set_writes_the_labels_file(run_dir):
    ok("labels", run_dir, "--suggest")
    path = run_dir / "labels.tsv"
    lines = path.read_text(encoding="utf-8").splitlines()
    assert lines[0] == WRITTEN_BY and [line.split("\t")[0] for line in lines[1:]] == \
        ["1", "2", "3", "4"]
    assert all(" / " in line for line in lines[1:])     # a pair on this text corpus
    shown = ok("labels", run_dir, "--set", "2=python functions", "--format", "json").stdout
    labels = json.loads(shown)["labels"]
    assert labels[1] == {"topic": 2, "label": "python functions", "source": "file"}
    assert labels[0]["label"] == lines[1].split("\t")[1]
    ok("labels", run_dir, "--set", "2=")                # removes it
    assert "\n2\t" not in path.read_text(encoding="utf-8")
    message = fails(2, "labels", run_dir, "--set", "5=x")
    assert message == "--set 5=x: topic 5 does not exist: topics are numbered 1 to 4"


def test_a_users_labels_file_is_kept_unless_force(run_dir):
    path = run_dir / "labels.tsv"
    path.write_text("# mine\n1\tcars\n", encoding="utf-8")
    message = fails(2, "labels", run_dir, "--set", "2=boats")
    assert message.startswith(f"{path}: a labels file topictk did not write")
    assert path.read_text(encoding="utf-8") == "# mine\n1\tcars\n"
    ok("labels", run_dir, "--set", "2=boats", "--force")
    assert path.read_text(encoding="utf-8") == f"{WRITTEN_BY}\n1\tcars\n2\tboats\n"
    path.write_text("1\tcars\n1\tvans\n", encoding="utf-8")
    assert fails(2, "topics", run_dir).startswith(f"{path}:2: topic 1 is labelled again")


def test_topics_show_labels_and_representative_documents(run_dir, tmp_path):
    other = tmp_path / "other.tsv"
    other.write_text("3\tthird topic\n", encoding="utf-8")
    ok("labels", run_dir, "--set", "1=first topic")
    text = ok("topics", run_dir, "--docs", "2", "-n", "3").stdout
    assert "     label: first topic" in text
    assert text.count("     documents (share theta_dk, training state") == 4
    data = json.loads(ok("topics", run_dir, "--docs", "5", "--format", "json").stdout)
    first = data["topics"][0]
    assert first["label"] == "first topic" and data["topics"][1]["label"] is None
    shares = [d["share"] for d in first["docs"]]
    assert len(shares) == 5 and shares == sorted(shares, reverse=True)
    assert all(d["snippet"] and len(d["snippet"]) <= 60 for d in first["docs"])
    tsv = ok("topics", run_dir, "--labels", other, "--format", "tsv", "-n", "1").stdout
    assert tsv.splitlines()[0] == "topic\tlabel\trank\tword\tprobability"
    assert tsv.splitlines()[3].startswith("3\tthird topic\t1\t")
    assert fails(2, "topics", run_dir, "--docs", "2", "--format", "tsv").startswith("--docs")


def test_exports_and_alignment_carry_the_labels(run_dir):
    ok("labels", run_dir, "--set", "2=functions")
    header = ok("export", run_dir, "--what", "topic-words").stdout.splitlines()[0]
    assert header.split("\t") == ["word", "topic_1", "topic_2:functions", "topic_3", "topic_4"]
    data = json.loads(ok("export", run_dir, "--what", "topic-words", "--format",
                         "json").stdout)
    assert data["topic_labels"] == [None, "functions", None, None]
    ldavis = json.loads(ok("export", run_dir, "--what", "ldavis").stdout)
    assert ldavis["topic.labels"] == [None, "functions", None, None]
    copy = run_dir.parent / "copy"
    shutil.copytree(run_dir, copy)
    (copy / "labels.tsv").unlink()
    mine = run_dir.parent / "mine.tsv"
    mine.write_text("2\tfunctions too\n", encoding="utf-8")
    aligned = json.loads(ok("compare", "--align", run_dir, copy, "--format", "json",
                            "--labels", f"{copy}={mine}").stdout)
    pairs = aligned["alignments"][0]["pairs"]
    assert [(p["topic_a"], p["label_a"], p["label_b"]) for p in pairs][1] == \
        (2, "functions", "functions too")
    text = ok("compare", "--align", run_dir, copy).stdout
    assert "[functions] | [-]" in text


def test_infer_names_the_labelled_topics(run_dir, tmp_path):
    docs = tmp_path / "new.txt"
    docs.write_text("a function returns a value\nlists and loops\n", encoding="utf-8")
    plain = json.loads(ok("infer", run_dir, docs).stdout.splitlines()[0])
    assert "top_labels" not in plain                    # no labels, no field
    ok("labels", run_dir, "--set", "2=functions")
    first = json.loads(ok("infer", run_dir, docs).stdout.splitlines()[0])
    assert first["top_labels"] == ["functions" if k == 2 else None
                                   for k in first["top_topics"]]
    header = ok("infer", run_dir, docs, "--output-format", "tsv").stdout.splitlines()[0]
    assert header.split("\t")[3:] == ["topic_1", "topic_2:functions", "topic_3", "topic_4"]
    mine = tmp_path / "mine.tsv"
    mine.write_text("4\tloops\n", encoding="utf-8")
    header = ok("infer", run_dir, docs, "--output-format", "tsv",
                "--labels", mine).stdout.splitlines()[0]
    assert header.split("\t")[-1] == "topic_4:loops"


def test_the_api_gives_labels_and_documents(run_dir):
    import topictk

    run = topictk.load_run(run_dir)
    assert run.labels() == [None] * 4
    suggested = run.labels(suggest=True)
    assert all(" / " in s for s in suggested)
    ok("labels", run_dir, "--set", "4=last")
    assert run.labels()[3] == "last"
    docs = run.representative_docs(3, 3)
    assert [d["document"] for d in docs] == [run.document_ids()[d["index"]] for d in docs]
    assert docs[0]["share"] >= docs[1]["share"] >= docs[2]["share"]


# ----------------------------------------------------------------------------- the page
def test_labels_are_edited_kept_and_saved_on_the_page(browser, run_dir, tmp_path):
    ok("labels", run_dir, "--set", "1=from the file")
    out = tmp_path / "report.html"
    ok("report", run_dir, "--out", out, "-q")
    context = browser.new_context(accept_downloads=True)
    page = context.new_page()
    errors = []
    page.on("console", lambda m: m.type in ("error", "warning") and errors.append(m.text))
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(out.as_uri())
    run = page.locator("#run-0")
    inputs = run.locator("input.topic-label")
    assert inputs.count() == 4
    assert inputs.nth(0).input_value() == "from the file"
    assert run.locator("td.label-source").nth(0).text_content() == "labels file"
    assert run.locator("td.label-source").nth(1).text_content() == "suggested"
    assert " / " in inputs.nth(1).input_value()
    inputs.nth(2).fill("  my   third  ")
    inputs.nth(2).dispatch_event("change")
    assert run.locator("td.label-source").nth(2).text_content() == "edited here"
    with page.expect_download() as waiting:
        run.locator("button.save-labels").click()
    saved = waiting.value.path().read_text(encoding="utf-8").splitlines()
    assert waiting.value.suggested_filename == "labels.tsv"
    assert saved[0] == WRITTEN_BY
    assert saved[1] == "1\tfrom the file" and saved[3] == "3\tmy third"
    assert [line.split("\t")[0] for line in saved[1:]] == ["1", "2", "3", "4"]
    # the documents of the selected topic, largest share first, with their text
    assert "select a topic" in run.locator(".topic-docs h3").text_content()
    run.locator("svg.map circle.topic[data-topic='2']").click()
    assert run.locator(".topic-docs h3").text_content().startswith("Topic 3 · my third")
    expected = json.loads(ok("topics", run_dir, "--docs", "5", "--format", "json").stdout)
    docs = expected["topics"][2]["docs"]
    assert run.locator(".topic-docs .doc-id").all_text_contents() == [d["document"]
                                                                       for d in docs]
    assert run.locator(".topic-docs .doc-snippet").all_text_contents() == [d["snippet"]
                                                                            for d in docs]
    # the edit is kept in the browser for this run: a new page of the same file shows it
    again = context.new_page()
    again.goto(out.as_uri())
    assert again.locator("#run-0 input.topic-label").nth(2).input_value() == "my third"
    assert not errors, errors
    context.close()
