"""Labels and representative documents where commands list topics: the fields they add to
each topic of ``topictk topics``, their lines in its text output, and the labels an export
carries (``export_labels``)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from topictk.errors import UsageError
from topictk.evaluation.labels import run_labels
from topictk.numbering import topic_number, topic_row


@dataclass
class Listing:
    """The topics a run shows when it shows not all of its rows (a hierarchical Dirichlet
    process: its live topics, largest first): ``rows`` (0-based, in the order shown), and
    ``weights`` by name, one value per shown topic."""

    rows: np.ndarray
    weights: dict[str, np.ndarray]

    @property
    def ids(self) -> list[int]:
        """The shown topics' numbers (row + 1: stable whatever their order)."""
        return [topic_number(k) for k in self.rows]


def listing(run) -> Listing | None:
    """What the loaded ``run`` (:class:`~topictk.evaluation.run.LoadedRun`) shows of its
    topics (:meth:`~topictk.inference.base.Driver.listed_topics`); None: every row, in row
    order."""
    rows = run.driver.listed_topics(run.state)
    if rows is None:
        return None
    rows = np.asarray(rows, dtype=np.int64)
    weights = run.driver.topic_weights(run.state) or {}
    return Listing(rows, {name: np.asarray(w, dtype=np.float64)[rows]
                          for name, w in weights.items()})


def annotator(run, *, labels_file: str | Path | None = None, docs: int = 0, fmt: str = "text"):
    """A function adding to each topic of a flat model's listing its ``label`` and
    ``label_source`` (from the labels file or the seed words; no field when the run has no
    label at all) and, with ``docs`` > 0, its ``docs``: the most representative training
    documents ({"document", "index", "share", "snippet"}) and ``docs_share``, what the share
    is."""
    if docs and fmt == "tsv":
        raise UsageError("--docs lists documents under each topic; TSV is one row per word: "
                         "use --format text or json")
    if docs and fmt == "dot" or docs and run.driver.traits.layered:
        raise UsageError("--docs lists the documents of a flat model's topics; leave out "
                         "--docs for deep models and --format dot")
    K = int(run.topic_word().shape[0])
    labels = run_labels(run.run_dir, run.config, K, labels_file)

    def annotate(table: list[dict]) -> None:
        if any(labels):
            for t, label in zip(table, labels):
                t["label"] = label.text if label else None
                t["label_source"] = label.source if label else None
        if docs:
            from topictk.evaluation.topic_docs import representative_docs, training_theta

            training = training_theta(run)
            ids = run.store.document_ids("train")
            for k, t in enumerate(table):     # the table lists the topics in row order
                t["docs"] = representative_docs(run.store, training, k, docs, ids)
                t["docs_share"] = "theta_dk, " + training.theta_source
    return annotate


def extra_lines(t: dict) -> list[str]:
    """Text lines under a topic's words: its label, its representative documents."""
    lines = []
    if t.get("label"):
        lines.append(f"     label: {t['label']}"
                     + (" (seed words)" if t.get("label_source") == "seed" else ""))
    if t.get("docs"):
        lines.append(f"     documents (share {t['docs_share']}):")
    for d in t.get("docs") or ():
        snippet = f"  {d['snippet']}" if d.get("snippet") else ""
        lines.append(f"       {d['share']:.3f}  {d['document']}{snippet}")
    return lines


def labelled_column(column: str, label: str | None) -> str:
    """A TSV header cell of a topic column: ``topic_3`` unlabelled, ``topic_3:space flight``
    labelled (split at the first colon to get both back)."""
    return f"{column}:{label}" if label else column


def export_labels(result, run, labels_file: str | Path | None = None):
    """``result`` of ``topictk export`` with the run's topic labels (labels file, else seed
    labels), when it has any: a matrix export names its topic columns with them (TSV) and
    carries ``topic_labels`` (row k's label or null; JSON, npz); the LDAvis data carries
    ``topic.labels`` (topic n's label at n - 1), beside the fields LDAvis reads. Other
    exports, and runs without labels, are left as they are."""
    K = int(run.topic_word().shape[0])
    labels = run_labels(run.run_dir, run.config, K, labels_file)
    shown = listing(run)
    if shown is not None:       # the columns and LDAvis topics are the shown topics
        labels = [labels[k] for k in shown.rows]
        K = len(labels)
    if not any(labels):
        return result
    texts = [label.text if label else None for label in labels]
    if hasattr(result, "matrix") and result.matrix.ndim == 2 and result.matrix.shape[1] == K:
        result.topic_labels = texts
        result.meta = {**result.meta, "topic_labels": texts}
    elif isinstance(getattr(result, "data", None), dict) and "mdsDat" in result.data:
        result.data["topic.labels"] = texts
    return result


def alignment_labels(alignment: dict, runs: tuple, labels_files: dict | None = None) -> dict:
    """An alignment of ``compare --align`` (topics numbered from 1) with ``label_a`` and
    ``label_b`` in each pair, when either run has labels (labels file or seed labels);
    ``runs`` are the two RunRefs, ``labels_files`` maps a run's path to another labels
    file than its labels.tsv."""
    files = labels_files or {}
    found = []
    for run in runs:
        K = int(run.config.model.topics)
        labels = run_labels(run.path, run.config, K, files.get(run.path))
        found.append((K, [label.text if label else None for label in labels]))
    if not any(any(texts) for _, texts in found):
        return alignment
    for pair in alignment["pairs"]:
        for side, (K, texts) in zip("ab", found):
            pair[f"label_{side}"] = texts[topic_row(pair[f"topic_{side}"], K)]
    return alignment
