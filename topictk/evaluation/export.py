"""``topictk export``: a run's θ and φ as files other tools read.

Each export is an entry of :data:`EXPORTS`: an :class:`ExportKind`, the formats it can be
written as and a function of the loaded run and the fold-in options that returns an object with
``to_bytes(fmt)``. A new export is one more entry.
"""
from __future__ import annotations

import io
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from topictk import progress
from topictk.evaluation.htmljson import script_json
from topictk.evaluation.infer import infer_documents, split_documents
from topictk.evaluation.intrusion import intrusion_export
from topictk.evaluation.ldavis import ldavis_data, term_frequencies
from topictk.numbering import topic_columns
from topictk.evaluation.run import LoadedRun
from topictk.evaluation.topic_listing import labelled_column, listing
from topictk.evaluation.tsv import tsv_rows
from topictk.errors import UsageError


class Export(Protocol):
    """What an export builds: its bytes in each of its formats."""

    def to_bytes(self, fmt: str) -> bytes: ...


@dataclass
class MatrixExport:
    """A matrix with one row per item (a document, a word) and one column per topic, and
    the columns that name the rows.

    Attributes
    ----------
    name : str
        The matrix's name in JSON and npz: ``doc_topic`` (D, K) or ``word_topic`` (V, K).
    labels : dict of str to list
        Row labels by column name (``id`` and ``split``; ``word``), in output order.
    matrix : numpy.ndarray
        (rows, K) float64.
    meta : dict
        What the JSON and npz outputs carry besides (run, algorithm, K).
    topic_labels : list of str or None, optional
        The topics' labels, which name the TSV's topic columns.
    """

    name: str
    labels: dict[str, list]
    matrix: np.ndarray
    meta: dict = field(default_factory=dict)
    topic_labels: list[str | None] | None = None    # by column: the topics' labels
    topic_ids: list[int] | None = None      # by column: the topics' numbers (None: 1..K)

    def to_bytes(self, fmt: str) -> bytes:
        """The export written as ``fmt`` (tsv, json or npz)."""
        return {"tsv": self._tsv, "json": self._json, "npz": self._npz}[fmt]()

    def shown(self, run: LoadedRun) -> MatrixExport:
        """The export cut to the topics the run shows (:func:`listing`: an HDP run's live
        topics, largest first), whose numbers name the columns and are in ``meta``
        (``topic_ids``) and the weights too (``topic_weights``)."""
        found = listing(run)
        if found is None:
            return self
        self.matrix = np.ascontiguousarray(self.matrix[:, found.rows])
        self.topic_ids = found.ids
        self.meta = {**self.meta, "topic_ids": found.ids,
                     "topic_weights": {n: w.tolist() for n, w in found.weights.items()}}
        return self

    def _tsv(self) -> bytes:
        n_topics = self.matrix.shape[1]
        columns = (topic_columns(n_topics) if self.topic_ids is None
                   else [f"topic_{n}" for n in self.topic_ids])
        header = [*self.labels, *columns]
        if self.topic_labels:   # topic_labels.export_labels: "topic_3:space flight"
            header[len(self.labels):] = map(labelled_column, header[len(self.labels):],
                                            self.topic_labels)
        columns = list(self.labels.values())
        rows = ([*(c[i] for c in columns), *(f"{v:.6g}" for v in row)]
                for i, row in enumerate(self.matrix))
        return tsv_rows([header, *rows]).encode("utf-8")

    def _json(self) -> bytes:
        data = dict(self.meta)
        data.update(self.labels)
        data[self.name] = self.matrix.tolist()
        return (json.dumps(data) + "\n").encode("utf-8")

    def _npz(self) -> bytes:
        buffer = io.BytesIO()
        arrays = {key: np.asarray(values, dtype=str) for key, values in self.labels.items()}
        arrays[self.name] = self.matrix
        arrays["meta"] = np.asarray(json.dumps(self.meta))
        np.savez(buffer, **arrays)
        return buffer.getvalue()


@dataclass
class FoldIn:
    """The fold-in settings of θ (as ``topictk infer`` takes them)."""

    sweeps: int = 50
    burn_in: int = 25
    seed: int | None = None
    threads: int | None = None


def _meta(run: LoadedRun) -> dict:
    return {"run": str(run.run_dir), "algorithm": run.config.inference.algorithm,
            "topics": int(run.config.model.topics)}


def doc_topics(run: LoadedRun, fold_in: FoldIn) -> MatrixExport:
    """θ of every document of the store, training documents first, then test documents (from
    their observed tokens), each with its id from the input, its split and, when the store
    has time slices (``prepare --time-column``), the name of its slice; rows sum to 1.
    The documents are folded in with the topics fixed, as ``topictk infer`` does."""
    ids, splits, slices, parts = [], [], [], []
    names = run.store.time_slices
    n_topics = int(run.config.model.topics)
    splits_docs = tuple((split, split_documents(run.store, split, run.driver))
                        for split in ("train", "test"))
    with progress.bar(sum(len(docs.ids) for _, (docs, _) in splits_docs), desc="doc-topics",
                      unit="doc") as shown:
        for split, (docs, features) in splits_docs:
            if not len(docs.ids):
                continue
            blocks = infer_documents(run, docs, str(run.store.path), sweeps=fold_in.sweeps,
                                     burn_in=fold_in.burn_in, seed=fold_in.seed,
                                     threads=fold_in.threads, features=features)
            for _, theta in blocks:         # a block of BLOCK_DOCS documents at a time
                parts.append(theta)
                shown.update(theta.shape[0])
            ids += docs.ids
            splits += [split] * len(docs.ids)
            if names is not None:
                slices += [names[s] for s in run.store.slices(split).tolist()]
    theta = np.concatenate(parts) if parts else np.zeros((0, n_topics))
    labels = {"id": ids, "split": splits}
    if names is not None:
        labels["slice"] = slices
    return MatrixExport("doc_topic", labels, theta, _meta(run)).shown(run)


def topic_words(run: LoadedRun, fold_in: FoldIn) -> MatrixExport:
    """φ as one row per word of the vocabulary and one column per topic (φ transposed, so
    that column k sums to 1); deep models give their bottom layer."""
    phi = np.asarray(run.topic_word(), dtype=np.float64)
    return MatrixExport("word_topic", {"word": list(run.store.vocab)}, phi.T.copy(),
                        _meta(run)).shown(run)


def slice_topic_words(run: LoadedRun, fold_in: FoldIn) -> MatrixExport:
    """Every time slice's φ of a dynamic topic model run: one row per (slice, word), one
    column per topic (column k of a slice's rows sums to 1)."""
    if not run.driver.traits.time_slices:
        raise UsageError(f"--what slice-topic-words writes every time slice's version of the "
                         f"topics, which a dynamic topic model run has (model.family: dtm); "
                         f"{run.run_dir} is {run.driver.name}: export --what topic-words")
    versions = np.asarray(run.driver.slice_topic_word(run.state), dtype=np.float64)
    T, K, V = versions.shape
    labels = {"slice": [label for label in run.store.time_slices for _ in range(V)],
              "word": list(run.store.vocab) * T}
    matrix = np.ascontiguousarray(versions.transpose(0, 2, 1).reshape(T * V, K))
    return MatrixExport("slice_word_topic", labels, matrix, _meta(run))


@dataclass
class JSONExport:
    """An export that is one JSON object, written so that it may also be pasted into an HTML
    ``<script>`` element (as LDAvis pages do) whatever words it holds
    (:func:`topictk.evaluation.htmljson.script_json`)."""

    data: dict

    def to_bytes(self, fmt: str) -> bytes:
        return (script_json(self.data) + "\n").encode("utf-8")


def ldavis(run: LoadedRun, fold_in: FoldIn) -> JSONExport:
    """The LDAvis data of the run (:func:`topictk.evaluation.ldavis.ldavis_data`): its topics
    (the bottom layer of a deep model) and the training corpus's word counts, topics in the
    model's order (LDAvis's topic n is the model's topic n - 1); an HDP run's live topics
    largest first, ``topic.order`` giving LDAvis's topic n's number in the run."""
    train = run.store.train()
    freq = term_frequencies(np.asarray(train.indices), np.asarray(train.counts),
                            run.store.n_words)
    phi = np.asarray(run.topic_word(), dtype=np.float64)
    shown = listing(run)
    if shown is None:
        return JSONExport(ldavis_data(phi, list(run.store.vocab), freq))
    # an HDP run: its live topics, largest first; topic.order holds their numbers (pyLDAvis
    # reads it as each topic's number in the model)
    data = ldavis_data(phi[shown.rows], list(run.store.vocab), freq)
    data["topic.order"] = shown.ids
    return JSONExport(data)


@dataclass(frozen=True)
class ExportKind:
    """One choice of ``topictk export --what``: the formats it is written as (the first is
    the default) and the function that builds it."""

    build: Callable[[LoadedRun, FoldIn], Export]
    formats: tuple[str, ...]
    #: it also writes an answer key (``key_bytes(fmt)``) to ``--key FILE``, kept apart
    key: bool = False


MATRIX_FORMATS = ("tsv", "json", "npz")

EXPORTS: dict[str, ExportKind] = {
    "doc-topics": ExportKind(doc_topics, MATRIX_FORMATS),
    "topic-words": ExportKind(topic_words, MATRIX_FORMATS),
    "slice-topic-words": ExportKind(slice_topic_words, MATRIX_FORMATS),
    "ldavis": ExportKind(ldavis, ("json",)),
    "intrusion": ExportKind(intrusion_export, ("tsv", "json"), key=True),
}
