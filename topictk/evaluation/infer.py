"""``topictk infer``: topic proportions of new documents under a trained run.

The documents are read like ``topictk prepare`` reads its input (lines, a folder of ``.txt``
files, JSONL, CSV/TSV, or a UCI, LDA-C or Matrix Market bag of words), tokenised with the
store's settings and mapped onto the store's vocabulary; words the store does not know are
dropped and counted. Metadata (DMR runs) are encoded with the encoding saved in the store's
manifest, so a new document gets exactly the features a test document would get.

The driver folds the documents in by ``Driver.fold_in``, the fold-in that ``evaluate`` scores
with: for the sampled algorithms collapsed Gibbs over each document's topic assignments with
the run's topics fixed (the point estimate ``topic_word``) and the run's document prior
(alpha, or alpha_d = exp(x_d^T nu) for DMR), see :func:`topictk.inference.base.gibbs_fold_in`;
for the variational ones their E-step (or CVB0 updates) with the topics frozen; for deep LDA
the upward-downward chain of every document with the run's networks fixed. The result
depends on the seed only, not on the number of threads.
"""
from __future__ import annotations

import json
import logging
from pathlib import Path
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from topictk.corpus import inputs as input_formats
from topictk.corpus import readers
from topictk.corpus.features import (
    merge_meta_file,
    read_meta_file,
    rows_for_documents,
)
from topictk.corpus.store import csr_to_tokens
from topictk.corpus.tables import TableOptions, check_table_options
from topictk.corpus.preprocess import Preprocessing
from topictk.errors import CorpusError, CorpusUsageError, UsageError
from topictk.inference.base import INFER_CHUNK_DOCS, FoldInPlan, gibbs_fold_in
from topictk.inference.sampled import cluster_infer_blocks
from topictk.evaluation.labels import run_labels
from topictk.evaluation.topic_listing import labelled_column
from topictk.numbering import topic_columns, topic_number
from topictk.evaluation.tsv import tsv_rows
from topictk.state.dmr import ETA_MAX, ETA_MIN

log = logging.getLogger("topictk")

BLOCK_DOCS = 64 * INFER_CHUNK_DOCS     # documents folded in (and written) at a time


@dataclass
class NewDocuments:
    """Documents to infer, over the store's vocabulary."""

    ids: list[str]
    doc_ptr: np.ndarray          # (D + 1,) int64
    words: np.ndarray            # (N,) int32 store word ids
    unknown: np.ndarray          # (D,) int64 tokens dropped as out of vocabulary
    metas: list[dict] | None     # metadata fields per document (JSONL fields, --meta-file)
    slices: np.ndarray | None = None     # (D,) int32 time slices, when the store's own

    @property
    def n_docs(self) -> int:
        return len(self.ids)


def document_slices(store, docs: NewDocuments, where: str) -> np.ndarray | None:
    """The time slice of every document, for a run whose topics change by slice: the store's
    own for its documents, else placed by the store's slices from the documents' time field
    (``prepare --time-column``) when any of them has it (then every one needs it: a
    document without it is one line naming it); None when none has it (the run then takes
    its last slice)."""
    if docs.slices is not None:
        return np.ascontiguousarray(docs.slices, dtype=np.int32)
    record = store.manifest.get("time")
    if record is None or not docs.metas or not any(record["field"] in m for m in docs.metas):
        return None
    from topictk.corpus.timeslices import TimeSlices
    return TimeSlices.from_json(record).index(docs.metas, docs.ids, where)


def check_sweeps(sweeps: int, burn_in: int) -> None:
    if burn_in < 0 or sweeps <= burn_in:
        raise UsageError(f"--sweeps must be larger than --burn-in (>= 0); got sweeps = {sweeps}, "
                         f"burn-in = {burn_in}")


def read_new_documents(inputs: list[str], store, fmt: str = "auto",
                       meta_file: str | None = None, encoding_errors: str = "strict",
                       vocab: str | None = None,
                       table: TableOptions | None = None) -> NewDocuments:
    """Read and map ``inputs`` onto ``store``'s vocabulary (see the module docstring)."""
    if not inputs:
        raise CorpusUsageError("no input given; name files, a folder, a .jsonl file, a UCI "
                               "docword file, or - for standard input")
    if fmt == "auto":
        fmt = readers.detect_format(inputs)
    if fmt not in readers.FORMATS:
        raise UsageError(f"--format must be one of {', '.join(readers.FORMATS)}; got {fmt}")
    index = {w: i for i, w in enumerate(store.vocab)}
    ids: list[str] = []
    docs: list[np.ndarray] = []
    unknown: list[int] = []
    metas: list[dict] = []
    check_table_options(table, fmt)
    if vocab is not None and fmt not in readers.BAG_FORMATS:
        raise UsageError(f"--vocab names the vocabulary of bag-of-words input (UCI, LDA-C, "
                         f"Matrix Market), not of {fmt} input")
    if fmt in readers.BAG_FORMATS:
        bag = input_formats.read_bag(inputs, fmt, vocab)
        to_store = np.array([index.get(w, -1) for w in bag.vocab], dtype=np.int64)
        for d, tokens in enumerate(csr_to_tokens(bag.indptr, bag.indices, bag.counts)):
            mapped = to_store[tokens]
            docs.append(mapped[mapped >= 0].astype(np.int32))
            unknown.append(tokens.size - docs[-1].size)
            ids.append(str(d + 1))
            metas.append({})
    stats = readers.ReadStats()
    if fmt not in readers.BAG_FORMATS:
        prep = Preprocessing.of_store(store.manifest, str(store.path))
        for doc in input_formats.read_documents(inputs, fmt, encoding_errors, stats, table):
            known, n_unknown = _map_text(doc.text, prep, index)
            docs.append(known)
            unknown.append(n_unknown)
            ids.append(doc.id)
            metas.append(doc.meta)
    if not ids:
        raise CorpusUsageError(readers.no_documents_message(inputs, stats))
    if stats.skipped_undecodable:
        log.warning("%d undecodable document(s) skipped (--encoding-errors skip)",
                    stats.skipped_undecodable)
    if meta_file is not None:
        rows = rows_for_documents(read_meta_file(meta_file), len(ids), stats.skipped_positions,
                                  meta_file)
        fields = [f["name"] for f in store.manifest.get("features", {}).get("fields", [])]
        metas = merge_meta_file(rows, metas, fields, meta_file)
    return _new_documents(ids, docs, unknown, metas)


def _map_text(text: str, prep: Preprocessing,
              index: dict[str, int]) -> tuple[np.ndarray, int]:
    """The word ids of ``text`` tokenised as the store's were (``prep``: its manifest's
    token pattern, case, minimum length, lemmas and phrases), and how many of its tokens the
    store's vocabulary does not know."""
    tokens = prep.tokens(text)
    known = [index[t] for t in tokens if t in index]
    return np.array(known, dtype=np.int32), len(tokens) - len(known)


def _new_documents(ids: list[str], docs: list[np.ndarray], unknown: list[int],
                   metas: list[dict]) -> NewDocuments:
    doc_ptr = np.zeros(len(docs) + 1, dtype=np.int64)
    np.cumsum([d.size for d in docs], out=doc_ptr[1:])
    words = np.concatenate(docs).astype(np.int32) if docs else np.zeros(0, dtype=np.int32)
    return NewDocuments(ids=ids, doc_ptr=doc_ptr, words=words,
                        unknown=np.array(unknown, dtype=np.int64),
                        metas=metas if any(metas) else None)


def documents_from_texts(texts: list[str], store, metas: list[dict] | None = None,
                         ids: list[str] | None = None) -> NewDocuments:
    """Texts (one document each, in memory) mapped onto ``store``'s vocabulary as
    :func:`read_new_documents` maps the documents of a file; ``metas``: metadata fields per
    document (DMR runs); ``ids``: default the 1-based position."""
    if not texts:
        raise CorpusUsageError("no documents given")
    if metas is not None and len(metas) != len(texts):
        raise UsageError(f"{len(metas)} metadata records for {len(texts)} documents; give one "
                         f"per document")
    if ids is not None and len(ids) != len(texts):
        raise UsageError(f"{len(ids)} ids for {len(texts)} documents; give one per document")
    index = {w: i for i, w in enumerate(store.vocab)}
    prep = Preprocessing.of_store(store.manifest, str(store.path))
    mapped = [_map_text(text, prep, index) for text in texts]
    return _new_documents([str(i) for i in ids] if ids is not None
                          else [str(d + 1) for d in range(len(texts))],
                          [m[0] for m in mapped], [m[1] for m in mapped],
                          [dict(m) for m in metas] if metas is not None else [{}] * len(texts))


def document_features(driver, store, docs: NewDocuments, where: str) -> np.ndarray:
    """The (D, F) features of ``docs`` under the run's encoding (DMR runs: the store's saved
    one, or one of its time slices, ``model.features``)."""
    encoding = driver.feature_encoding()
    if encoding is None:
        raise UsageError(f"{store.path}: the store has no metadata features, so this run has "
                         f"none to apply")
    fields = [f["name"] for f in encoding.fields]
    how = ("give them as JSONL fields (a .jsonl file, or --format jsonl for standard input) or "
           "with --meta-file")
    if docs.metas is None:
        raise UsageError(f"{where}: this run's prior depends on the metadata fields "
                         f"{', '.join(fields)}; {how}")
    found = sorted({str(k) for m in docs.metas for k in m})
    if fields and not set(fields) & set(found):
        raise UsageError(f"{where}: none of this run's metadata fields ({', '.join(fields)}) is "
                         f"in the input, which has {', '.join(found)}; {how}")
    X, stats = encoding.encode(docs.metas, docs.ids, where, fixed=True)
    for name, count in stats["missing_by_field"].items():
        log.warning("%s: field '%s' missing from %d document(s): its features are left at 0, "
                    "the training baseline", where, name, count)
    for name, count in stats["unseen_by_field"].items():
        examples = stats["unseen_examples"][name]
        more = ", ..." if count > len(examples) else ""
        log.warning("%s: field '%s': %d value(s) not seen in training (%s%s): none of the "
                    "field's columns is set for them", where, name, count,
                    ", ".join(repr(v) for v in examples), more)
    return X


def check_document_prior(alpha: np.ndarray, docs: NewDocuments, features: np.ndarray,
                         names: list[str], where: str) -> None:
    """Refuse documents whose metadata put the prior's exponent x_d^T nu_k outside the range in
    which it is taken (``ETA_MIN``..``ETA_MAX``, alpha from 5e-131 to 2e130): only values far
    outside the training range get there, and the clipped prior would mean nothing."""
    low, high = np.exp(ETA_MIN) * (1 + 1e-9), np.exp(ETA_MAX) * (1 - 1e-9)
    bad = np.flatnonzero(~np.all(np.isfinite(alpha) & (alpha > low) & (alpha < high), axis=1))
    if bad.size:
        more = f" (and {bad.size - 1} more)" if bad.size > 1 else ""
        row = features[bad[0], :-1]
        j = int(np.argmax(np.abs(row))) if row.size else 0
        field, value = (names[j], row[j]) if row.size else ("(intercept)", 1.0)
        raise CorpusError(f"{where}: document {docs.ids[bad[0]]}{more}: its metadata lie so far "
                          f"outside the training range (feature '{field}' = {value:.3g} "
                          f"training standard deviations) that the prior exp(x_d^T nu) over- or "
                          f"underflows; fix the value")


def render_jsonl(docs: NewDocuments, start: int, theta: np.ndarray, top: int,
                 labels: list[str | None] | None = None,
                 topic_ids: list[int] | None = None) -> str:
    """JSON lines of documents ``start``.. (one per row of ``theta``); with ``labels`` (column
    k's topic label or None), the labels of the top topics too (``top_labels``); with
    ``topic_ids`` (the number of column k's topic: an HDP run's live topics), those numbers
    name the topics and the record lists them (``topics``) beside ``theta``."""
    number = topic_number if topic_ids is None else topic_ids.__getitem__
    lines = []
    for i, row in enumerate(theta):
        d = start + i
        order = np.argsort(-row, kind="stable")[:top]
        record = {"id": docs.ids[d], "tokens": int(docs.doc_ptr[d + 1] - docs.doc_ptr[d]),
                  "unknown": int(docs.unknown[d]),
                  "top_topics": [number(k) for k in order]}
        if labels:
            record["top_labels"] = [labels[k] for k in order]
        if topic_ids is not None:
            record["topics"] = list(topic_ids)
        record["theta"] = [float(x) for x in row]
        lines.append(json.dumps(record) + "\n")
    return "".join(lines)


def tsv_header(n_topics: int, labels: list[str | None] | None = None,
               topic_ids: list[int] | None = None) -> str:
    """The header row: topic columns ``topic_3``, or ``topic_3:LABEL`` for a labelled topic;
    ``topic_ids``: the columns' topic numbers (default 1..n_topics)."""
    columns = (topic_columns(n_topics) if topic_ids is None
               else [f"topic_{n}" for n in topic_ids])
    if labels:
        columns = [labelled_column(c, label) for c, label in zip(columns, labels)]
    return tsv_rows([["id", "tokens", "unknown", *columns]])


def topic_labels(run, labels_file: str | Path | None = None) -> list[str | None] | None:
    """The run's topic labels by row (its labels file, else its seed labels), None when it
    has none."""
    K = int(run.topic_word().shape[0])
    labels = [label.text if label else None
              for label in run_labels(run.run_dir, run.config, K, labels_file)]
    return labels if any(labels) else None


def render_tsv(docs: NewDocuments, start: int, theta: np.ndarray) -> str:
    """TSV rows of documents ``start``.. (one per row of ``theta``)."""
    ptr = docs.doc_ptr
    return tsv_rows([docs.ids[d], int(ptr[d + 1] - ptr[d]), int(docs.unknown[d]),
                     *(repr(float(x)) for x in row)]
                    for d, row in enumerate(theta, start=start))


def infer_run(run, inputs: list[str], *, fmt: str = "auto", meta_file: str | None = None,
              sweeps: int = 50, burn_in: int = 25, seed: int | None = None,
              encoding_errors: str = "strict", vocab: str | None = None,
              threads: int | None = None, table: TableOptions | None = None
              ) -> tuple[NewDocuments, Iterator[tuple[int, np.ndarray]]]:
    """Read ``inputs`` (all of it, so that bad input stops the command before any output) and
    return them with an iterator over (first document, topic proportions) of blocks of
    ``BLOCK_DOCS`` documents, so that neither the proportions nor the output of a large input
    are held whole."""
    check_sweeps(sweeps, burn_in)
    if meta_file is not None and not run.driver.traits.features:
        log.warning("%s: ignored: this run's model (%s) does not use metadata", meta_file,
                    run.driver.name)
        meta_file = None
    docs = read_new_documents(inputs, run.store, fmt, meta_file, encoding_errors, vocab, table)
    return docs, infer_documents(run, docs, meta_file or ", ".join(inputs), sweeps=sweeps,
                                 burn_in=burn_in, seed=seed, threads=threads)


def infer_documents(run, docs: NewDocuments, where: str, *, sweeps: int = 50,
                    burn_in: int = 25, seed: int | None = None,
                    threads: int | None = None,
                    features: np.ndarray | None = None) -> Iterator[tuple[int, np.ndarray]]:
    """(first document, topic proportions) of ``docs`` block by block (see
    :func:`infer_run`); ``where`` names the input in messages. DMR runs: the documents'
    metadata are encoded (unless their (D, F) ``features`` are given) and the prior checked
    before the first block is returned."""
    check_sweeps(sweeps, burn_in)
    uses_features = run.driver.traits.features
    if not uses_features:
        features = None
    elif features is None:
        features = document_features(run.driver, run.store, docs, where)
    if uses_features:
        check_document_prior(run.driver.document_prior(run.state, features), docs, features,
                             run.driver.feature_names(), where)
    empty = int(np.count_nonzero(np.diff(docs.doc_ptr) == 0))
    if empty:
        log.warning("%d document(s) have no word of the model's vocabulary: their proportions "
                    "are the prior mean", empty)
    seed = run.config.training.seed if seed is None else seed
    threads = run.driver.threads if threads is None else threads
    slices = (document_slices(run.store, docs, where) if run.driver.traits.time_slices
              else None)

    cluster = run.driver.cluster
    if cluster is not None and slices is None and not run.driver.traits.own_fold_in:
        def pieces():
            for start in range(0, docs.n_docs, BLOCK_DOCS):
                stop = min(docs.n_docs, start + BLOCK_DOCS)
                lo, hi = docs.doc_ptr[start], docs.doc_ptr[stop]
                # a prior per document (DMR): the block's rows, as infer_proportions makes them
                prior = (None if features is None
                         else run.driver.document_prior(run.state, features[start:stop]))
                yield (start, docs.doc_ptr[start:stop + 1] - lo, docs.words[lo:hi],
                       start // INFER_CHUNK_DOCS, prior)

        # the Gibbs fold-in with the driver's weights; a driver with its own fold-in takes the
        # cluster in it (below)
        alpha = None if features is not None else run.driver.document_prior(run.state, None)
        return cluster_infer_blocks(cluster, run.driver.fold_in_weights(run.state).T, alpha,
                                    pieces(), sweeps=sweeps, burn_in=burn_in, seed=seed)

    def blocks() -> Iterator[tuple[int, np.ndarray]]:
        for start in range(0, docs.n_docs, BLOCK_DOCS):
            stop = min(docs.n_docs, start + BLOCK_DOCS)
            lo, hi = docs.doc_ptr[start], docs.doc_ptr[stop]
            yield start, run.driver.infer_proportions(
                run.state, docs.doc_ptr[start:stop + 1] - lo, docs.words[lo:hi],
                None if features is None else features[start:stop], sweeps=sweeps,
                burn_in=burn_in, seed=seed, threads=threads,
                first_chunk=start // INFER_CHUNK_DOCS,
                **({} if slices is None else {"slices": slices[start:stop]}))

    return blocks()


def split_documents(store, split: str, driver=None) -> tuple[NewDocuments, np.ndarray | None]:
    """The documents of the store's ``split`` ("train", or "test": the test documents'
    observed tokens) as documents to fold in, with their (D, F) features when ``driver``'s
    document prior depends on features (its ``features_of``)."""
    part = store.train() if split == "train" else store.test_observed()
    docs = NewDocuments(ids=store.document_ids(split), doc_ptr=np.asarray(part.doc_ptr),
                        words=np.asarray(part.words),
                        unknown=np.zeros(part.n_docs, dtype=np.int64), metas=None,
                        slices=store.slices(split))
    features = None if driver is None else driver.features_of(split)
    return docs, None if features is None else np.asarray(features)


def fold_in_topic_word(store, topic_word: np.ndarray, alpha, split: str, *, sweeps: int = 50,
                       burn_in: int = 25, seed: int = 0, threads: int = 1) -> np.ndarray:
    """theta (D, K) of the store's ``split`` under topics (K, V) from anywhere, by the Gibbs
    fold-in in the blocks and streams of :func:`infer_documents` (so that a collapsed Gibbs
    run's own phi-hat and alpha give its numbers)."""
    docs, _ = split_documents(store, split)
    weights = np.ascontiguousarray(np.asarray(topic_word, dtype=np.float64).T)
    K = weights.shape[1]
    prior = np.broadcast_to(np.asarray(alpha, dtype=np.float64), (K,)).reshape(1, K).copy()
    blocks = [np.zeros((0, K))]
    for start in range(0, docs.n_docs, BLOCK_DOCS):
        stop = min(docs.n_docs, start + BLOCK_DOCS)
        lo, hi = docs.doc_ptr[start], docs.doc_ptr[stop]
        plan = FoldInPlan.for_infer(stop - start, sweeps=sweeps, burn_in=burn_in, seed=seed,
                                    threads=threads, first_chunk=start // INFER_CHUNK_DOCS)
        blocks.append(gibbs_fold_in(weights, prior, docs.doc_ptr[start:stop + 1] - lo,
                                    docs.words[lo:hi], plan))
    return np.vstack(blocks)


def training_documents(store, driver) -> tuple[NewDocuments, np.ndarray | None]:
    """The store's training documents as documents to fold in (:func:`split_documents`)."""
    return split_documents(store, "train", driver)

