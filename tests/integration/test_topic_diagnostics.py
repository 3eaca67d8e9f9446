"""``topictk topics --diagnostics``, ``Run.diagnostics()`` and the report's diagnostics table on
short runs of the example corpus."""
from __future__ import annotations

import json
import re

import numpy as np
import pytest

from tests.integration._cli import fails, ok
from topictk.evaluation import diagnostics as dg

NUMBERS = list(dg.NUMBER_FORMATS)


def _training_tokens(run_dir) -> int:
    import topictk

    return int(np.asarray(topictk.load_run(run_dir).store.train().counts).sum())


def test_text_output_has_a_legend_a_heading_and_a_row_per_topic(report_runs):
    lines = ok("topics", report_runs["gibbs"], "--diagnostics").stdout.splitlines()
    assert lines[0].startswith("# topic: topic number; tokens: training tokens assigned;")
    assert lines[1].split() == ["topic", *NUMBERS, "flags", "words"]
    rows = [line.split() for line in lines[2:]]
    assert [int(r[0]) for r in rows] == [1, 2, 3, 4, 5, 6]
    assert all(len(r) == 1 + len(NUMBERS) + 1 + 10 for r in rows if r[8] == "-")
    # Gibbs: the tokens are the topic totals n_k of the final state
    import topictk
    nk = topictk.load_run(report_runs["gibbs"])._loaded.state.nk
    assert [float(r[1]) for r in rows] == [float(n) for n in nk]


def test_tsv_and_json_carry_the_same_numbers_as_the_python_api(report_runs):
    import topictk

    run_dir = report_runs["gibbs8"]
    tsv = [line.split("\t") for line in
           ok("topics", run_dir, "--diagnostics", "--format", "tsv", "-n", "4").stdout.splitlines()]
    assert tsv[0] == ["topic", *NUMBERS, "flags", "words"] and len(tsv) == 1 + 8
    assert all(len(row[-1].split()) == 4 for row in tsv[1:])        # --top: words shown
    data = json.loads(ok("topics", run_dir, "--diagnostics", "--format", "json").stdout)
    assert set(data["columns"]) == set(dg.COLUMNS) | {"words"}
    api = topictk.load_run(run_dir).diagnostics()
    assert data["topics"] == api
    assert [float(row[1]) for row in tsv[1:]] == [round(r["tokens"], 1) for r in api]
    assert sum(r["tokens"] for r in api) == _training_tokens(run_dir)
    for row, r in zip(tsv[1:], api):
        assert float(row[2]) == pytest.approx(r["doc_entropy"], abs=5e-4)
        assert 0 < r["top_doc_share"] <= 1 and r["eff_words"] > 1 and r["corpus_kl"] > 0


@pytest.mark.parametrize("name", ["ovb", "dlda", "dmr"])
def test_every_family_assigns_all_training_tokens(report_runs, name):
    # online VB and deep LDA keep no per-document state: expected counts of the folded-in
    # documents; DMR counts its topic assignments
    data = json.loads(ok("topics", report_runs[name], "--diagnostics", "--format",
                         "json").stdout)
    tokens = [r["tokens"] for r in data["topics"]]
    assert sum(tokens) == pytest.approx(_training_tokens(report_runs[name]), rel=1e-9)
    assert min(tokens) > 0


def test_diagnostics_refuse_a_deep_models_tree(report_runs):
    message = fails(2, "topics", report_runs["dlda"], "--diagnostics", "--tree")
    assert "--diagnostics" in message and "--tree" in message


def test_the_report_shows_each_runs_diagnostics_table(tmp_path, report_runs):
    out = tmp_path / "report.html"
    ok("report", report_runs["gibbs"], report_runs["gibbs8"], "--out", out)
    page = out.read_text(encoding="utf-8")
    tables = re.findall(r'<table class="diagnostics">.*?</table>', page, re.DOTALL)
    assert [t.count("<tr data-topic=") + t.count('<tr class="flagged" data-topic=')
            for t in tables] == [6, 8]
    assert page.count("Topic diagnostics") == 2 and "training tokens assigned" in page
    import topictk
    first = topictk.load_run(report_runs["gibbs"]).diagnostics()
    cells = re.findall(r'<td class="num">([^<]*)</td>', tables[0].split("</tr>")[1])
    assert cells[0] == "1" and cells[1] == f"{first[0]['tokens']:,.0f}"
