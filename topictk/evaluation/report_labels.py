"""Topic labels and representative documents on the report page: what each run's data
carries for them (:func:`add_labels_and_docs`), their markup, and their script
(``report_labels.js``: labels edited on the page, kept in the browser's localStorage per
run and saved as labels.tsv; the representative documents of the selected topic)."""
from __future__ import annotations

import html
from pathlib import Path

from topictk.evaluation.labels import WRITTEN_BY, run_labels
from topictk.numbering import FIRST_TOPIC
from topictk.evaluation.topic_docs import (REPRESENTATIVE, representative_docs,
                                           run_suggestions, training_theta)

SOURCES = {"file": "labels file", "seed": "seed words", "suggested": "suggested"}


def add_labels_and_docs(report, loaded, labels_file: str | Path | None = None) -> None:
    """Add to ``report.topics`` (a flat model's or a deep model's bottom layer) every topic's
    label with its source, the suggestions and how they were made, and its
    :data:`REPRESENTATIVE` most representative training documents."""
    training = training_theta(loaded)
    suggested, how = run_suggestions(loaded, training)
    ids = loaded.store.document_ids("train")
    rows = shown_rows(report.topics)
    report.topics["suggested"] = [suggested.get(k) for k in rows]
    report.topics["label_how"] = how
    report.topics["label_key"] = "topictk-labels " + str(Path(loaded.run_dir).resolve())
    report.topics["labels_header"] = WRITTEN_BY
    report.topics["docs"] = [representative_docs(loaded.store, training, k, REPRESENTATIVE, ids)
                             for k in rows]
    report.topics["docs_share"] = "θ_dk, " + training.theta_source
    report.topics["snippets"] = loaded.store.has_snippets
    relabel(report, loaded.config, labels_file)


def relabel(report, config, labels_file: str | Path | None = None) -> None:
    """``report.topics["labels"]``: each topic's label and source (labels file, seed words,
    suggestion), the labels file being ``labels_file`` or the run's labels.tsv."""
    if report.topics is None or "suggested" not in report.topics:
        return
    rows = shown_rows(report.topics)
    suggested = {k: s for k, s in zip(rows, report.topics["suggested"]) if s}
    labels = run_labels(report.path, config, max(len(report.topics["share"]),
                                                 int(config.model.topics or 0)),
                        labels_file, suggested)
    report.topics["labels"] = [{"text": label.text, "source": SOURCES[label.source]}
                               if label else {"text": "", "source": ""}
                               for label in (labels[k] for k in rows)]


def shown_rows(topics: dict) -> list[int]:
    """The model's rows of the topics a run's page shows, in its order: every row, or an HDP
    run's live topics (``ids``, their numbers)."""
    if "ids" in topics:
        return [number - FIRST_TOPIC for number in topics["ids"]]
    return list(range(len(topics["share"])))


def labels_markup(topics: dict) -> str:
    """The labels box of a run's section: filled by report_labels.js."""
    if "labels" not in topics:
        return ""
    how = html.escape(topics.get("label_how", ""), quote=True)
    return ('<div class="labels-box"><h3>Topic labels</h3><p class="dim small">From the run\'s '
            'labels file, else a seeded topic\'s seed words, else suggested (' + how + '). '
            'Edit a label here: edits are kept in this browser for this run. '
            '<button type="button" class="save-labels">Save labels.tsv</button> then put the '
            'file in the run folder, where every topictk command reads it.</p>'
            '<table class="labels"><thead><tr><th>topic</th><th>label</th><th>from</th></tr>'
            '</thead><tbody></tbody></table></div>')


DOCS_MARKUP = '<div class="topic-docs"></div>'
