"""The report page draws every chart whatever text its runs hold: words, run and store names
and metadata made of markup (``<!--<script>``, ``</script>``, quotes, entities), right-to-left
text and very long words are shown as text, in a real headless Chromium; the LDAvis export of
such a run can be pasted into a page as it is."""
from __future__ import annotations

import json
import re

import numpy as np
import pytest

from tests.integration._cli import EXAMPLE, metrics, ok, write_config
from tests.integration.conftest import REPORT_DMR
from tests.integration.test_report_browser import page_of  # noqa: F401 (a fixture)
from topictk.numbering import topic_number

# every word a corpus store can hold that an HTML or JavaScript parser might act on (a store
# cannot hold U+2028 or U+2029: its vocabulary is one word per line, and they end lines)
HOSTILE = ["<!--<script>", "</script>", "<script>alert(1)</script>", "]]>", "-->", "<!--",
           "&amp;", '"onmouseover="x', "'", "w" * 300, "שלום", "مرحبا", "\u202eevil"]
VOCAB = HOSTILE + [f"plain{i}" for i in range(13)]     # fewer than the 30 bars: all shown
TOPICS = 6
STORE_NAME = "store <!--<script>&\"'"
RUN_NAME = ("<!--<script>", "-->&amp;\"onmouseover=\"x'")     # folder and run folder
GROUPS = ["</script><b>", "<!--<script>", "&lt;'\""]


def _bag_of_words(folder):
    """A UCI docword file and its vocabulary: 80 documents of 12 distinct words each."""
    rng = np.random.default_rng(3)
    entries = [(d, w, int(rng.integers(1, 6))) for d in range(1, 81)
               for w in sorted(rng.choice(len(VOCAB), 12, replace=False) + 1)]
    docword = folder / "docword.hostile.txt"
    docword.write_text(f"80\n{len(VOCAB)}\n{len(entries)}\n"
                       + "".join(f"{d} {w} {c}\n" for d, w, c in entries), encoding="utf-8")
    (folder / "vocab.hostile.txt").write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
    return docword


@pytest.fixture(scope="module")
def hostile_runs(tmp_path_factory):
    """A Gibbs run on a store of the hostile words, both named with markup, and a DMR run
    whose metadata categories are markup."""
    from topictk.corpus.store import CorpusStore

    folder = tmp_path_factory.mktemp("hostile")
    store = folder / STORE_NAME
    ok("prepare", _bag_of_words(folder), "--out", store)
    assert sorted(CorpusStore.open(store).vocab) == sorted(VOCAB)
    gibbs = folder.joinpath(*RUN_NAME)
    ok("train", "--config", write_config(folder, store, output=str(gibbs),
                                         model={"topics": TOPICS}), "-q")
    lines = [line for line in EXAMPLE.read_text(encoding="utf-8").splitlines() if line.strip()]
    meta = folder / "meta.jsonl"
    meta.write_text("".join(json.dumps({"text": line, "group": GROUPS[i % 3]}) + "\n"
                            for i, line in enumerate(lines)), encoding="utf-8")
    ok("prepare", meta, "--meta", "group:cat", "--out", folder / "meta-store")
    dmr = folder / "dmr"
    sets = [part for item in REPORT_DMR for part in ("--set", item)]
    ok("train", "--config", EXAMPLE.parents[1] / "configs" / "example_dmr_sem.yaml", "--out",
       dmr, "-q", "--set", f"corpus={folder / 'meta-store'}", *sets)
    return {"gibbs": gibbs, "store": store, "dmr": dmr}


def _label(word: str) -> str:
    """A bar's label: long words are cut (report.js)."""
    return word if len(word) <= 18 else word[:17] + "…"


def _bar_words(run) -> list[str]:
    """The words of the bars, from each bar's tooltip ('WORD: N in the corpus')."""
    titles = run.locator("svg.bars rect.bar-total:not(.key) > title").all_text_contents()
    return [re.sub(r": \d+ in the corpus$", "", t) for t in titles]


def test_every_chart_draws_and_hostile_text_stays_text(page_of, hostile_runs):  # noqa: F811
    gibbs = hostile_runs["gibbs"]
    page, seen = page_of(gibbs, hostile_runs["dmr"])
    name = "/".join(RUN_NAME)
    assert page.title() == f"topictk report: {name}, {gibbs.parent.parent.name}/dmr"
    assert page.locator("script").count() == 2          # the data and the page's code
    assert page.locator("[onmouseover]").count() == 0
    evaluations = [len([m for m in metrics(run) if m.get("perplexity_point") is not None])
                   for run in (gibbs, hostile_runs["dmr"])]
    for chart in page.locator("svg.chart.curve").all():
        assert chart.locator("polyline").count() == 2
        assert chart.locator("circle").count() == sum(evaluations)
        assert chart.locator("polyline > title").first.text_content() == name
    run = page.locator("#run-0")
    assert run.locator("h2").text_content().startswith(name + " ")
    corpus = page.locator("section.summary td span[title]").first
    assert corpus.text_content() == STORE_NAME
    assert corpus.get_attribute("title") == str(hostile_runs["store"])
    assert run.locator("svg.map circle.topic").count() == TOPICS
    assert run.locator("svg.npmi rect.npmi-bar").count() == TOPICS
    assert sorted(_bar_words(run)) == sorted(VOCAB)
    assert sorted(run.locator("svg.bars text.term").all_text_contents()) == \
        sorted(map(_label, VOCAB))
    for k in range(TOPICS):
        run.locator(f"svg.map circle.topic[data-topic='{k}']").click()
        assert run.locator(".bars-title").text_content().startswith(
            f"Topic {topic_number(k)} ·")
        assert run.locator("svg.bars rect.bar-topic:not(.key)").count() == len(VOCAB)
        assert sorted(_bar_words(run)) == sorted(VOCAB)
    dmr = page.locator("#run-1")
    assert dmr.locator("svg.bars rect.bar-total:not(.key)").count() == 30
    dmr.locator("svg.map circle.topic[data-topic='0']").click()
    cells = dmr.locator(".features td").all_text_contents()
    assert {f"group={g}" for g in GROUPS} & set(cells)
    assert dmr.locator(".features b").count() == 0
    assert seen["errors"] == []
    assert seen["requests"] == [seen["url"]]


def test_the_data_block_holds_nothing_a_parser_acts_on(hostile_runs, tmp_path,
                                                        browser):  # noqa: F811
    """Words a store cannot hold (line separators) are escaped too, should a vocabulary ever
    carry them; the page still draws all their bars."""
    from topictk import __version__
    from topictk.evaluation.report import gather
    from topictk.evaluation.report_html import render

    [report] = gather([hostile_runs["gibbs"]])
    vocab = report.topics["vocab"]
    vocab[:2] = ["a\u2028b", "c\u2029d"]
    report.corpus_counts = {"train_documents": "<i>72</i>"}
    page_text = render([report], __version__)
    block = page_text.split('<script type="application/json" id="report-data">')[1]
    block = block.split("</script>")[0]
    assert not set(block) & set("<>&\u2028\u2029")
    assert json.loads(block)["runs"][0]["vocab"] == vocab
    assert "<i>" not in page_text
    out = tmp_path / "report.html"
    out.write_text(page_text, encoding="utf-8")
    page = browser.new_page()
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(out.as_uri())
    bars = page.locator("#run-0 svg.bars rect.bar-total:not(.key) > title").all_text_contents()
    assert len(bars) == len(VOCAB) and any(t.startswith("a\u2028b:") for t in bars)
    assert "<i>72</i>" in page.locator("section.summary").text_content()
    assert errors == []
    page.close()


def test_ldavis_export_can_be_placed_in_a_page(hostile_runs):
    text = ok("export", hostile_runs["gibbs"], "--what", "ldavis").stdout
    assert not set(text) & set("<>&\u2028\u2029")
    assert set(json.loads(text)["tinfo"]["Term"]) == set(VOCAB)
