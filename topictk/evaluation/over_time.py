"""Topics over time (``topictk topics RUN --over-time``, docs/evaluate.md, "Topics over time").

A dynamic topic model run (traits ``time_slices``) has a version of every topic per slice: each
topic's top words in every slice, and its prevalence there (the driver's ``slice_prevalence``).

For a DMR run (``dmr-sem``, ``dmr-sgrld``) on a store with time slices (``prepare
--time-column``): the prevalence of topic k in slice s is the mean, over the slice's training
documents, of the model's expected topic share for the document's metadata,
E[theta_dk] = alpha_dk / sum_j alpha_dj with alpha_d = exp(x_d^T nu) (docs/algorithms.md §9).
With ``model.features: slice`` (or ``--meta FIELD:slice``: one feature per slice) it is what the
model learnt of each slice, with ``model.features: spline`` a smooth curve through time; other
metadata enter as the slice's documents have them (``topictk config dmr-sem --over-time slice``
writes such a config for any store with time slices). It is the prior the model puts on a
document of that time, not the documents' fitted topics, and so not an average of counts: a
slice of few documents is as well defined as its features are.
"""
from __future__ import annotations

import json

import numpy as np

from topictk.errors import UsageError
from topictk.evaluation.topics import topic_table
from topictk.numbering import topic_number


def prevalence_over_time(driver, state, store) -> np.ndarray:
    """(K, S) the prevalence of every topic in every time slice (module docstring); a slice
    without training documents is NaN."""
    slices = store.slices("train")
    if slices is None:
        raise UsageError(f"--over-time needs a store with time slices; {store.path} has none: "
                         f"prepare the corpus with --time-column FIELD")
    if not driver.traits.features:
        raise UsageError(f"--over-time shows a DMR run's topic prevalence by time slice; this "
                         f"run is {driver.name}: train the config of 'topictk config dmr-sem "
                         f"--corpus {store.path} --over-time slice' (or dtm-sgld, whose topics "
                         f"change by slice too)")
    alpha = driver.document_prior(state, driver.features_of("train"))
    share = alpha / alpha.sum(axis=1, keepdims=True)
    n_slices = len(store.time_slices)
    counts = np.bincount(slices, minlength=n_slices)
    sums = np.zeros((n_slices, share.shape[1]))
    np.add.at(sums, slices, share)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (sums / counts[:, None]).T


def render_over_time(driver, state, store, *, top: int, fmt: str) -> str:
    """What ``topictk topics --over-time`` prints: per topic its top words and its prevalence
    in every slice (text: percentages; TSV: one row per topic and slice; JSON: both); for a
    run whose topics change by slice, its top words in every slice too."""
    if driver.traits.time_slices:
        return _render_slices(driver, state, store, top=top, fmt=fmt)
    prevalence = prevalence_over_time(driver, state, store)
    labels = store.time_slices
    table = topic_table(driver.topic_word(state), store.vocab, top)
    field = store.manifest["time"]["field"]
    if fmt == "json":
        return json.dumps({"time_field": field, "slices": labels,
                           "documents": np.bincount(store.slices("train"),
                                                    minlength=len(labels)).tolist(),
                           "topics": [dict(t, prevalence=[_number(p) for p in row])
                                      for t, row in zip(table, prevalence)]}) + "\n"
    if fmt == "tsv":
        lines = ["topic\tslice\tprevalence"]
        for k, row in enumerate(prevalence):
            lines += [f"{topic_number(k)}\t{label}\t{_cell(p, '.6f')}"
                      for label, p in zip(labels, row)]
        return "\n".join(lines) + "\n"
    if fmt != "text":
        raise UsageError(f"--over-time writes text, tsv or json; got --format {fmt}")
    lines = [f"prevalence (%) by time slice of '{field}': the mean over each slice's training "
             f"documents of the DMR prior's E[theta] for their metadata",
             "slices: " + "; ".join(f"{i + 1} = {label}" for i, label in enumerate(labels)), ""]
    width = max(5, max(len(str(i + 1)) for i in range(len(labels))) + 1)
    lines.append("topic " + "".join(f"{i + 1:>{width}}" for i in range(len(labels)))
                 + "  top words")
    for t, row in zip(table, prevalence):
        words = " ".join(w["word"] for w in t["words"])
        lines.append(f"{t['topic']:>5} " + "".join(f"{_cell(100 * p, '.1f'):>{width}}"
                                                    for p in row) + f"  {words}")
    return "\n".join(lines) + "\n"


def _number(p: float) -> float | None:
    return None if not np.isfinite(p) else float(p)


def _cell(p: float, spec: str) -> str:
    return "-" if not np.isfinite(p) else format(p, spec)


def _render_slices(driver, state, store, *, top: int, fmt: str) -> str:
    """:func:`render_over_time` of a run with a version of every topic per slice."""
    labels = store.time_slices
    field = store.manifest["time"]["field"]
    prevalence = driver.slice_prevalence(state).T                # (K, T)
    versions = driver.slice_topic_word(state)                    # (T, K, V)
    tables = [topic_table(versions[t], store.vocab, top) for t in range(len(labels))]
    documents = np.bincount(store.slices("train"), minlength=len(labels)).tolist()
    K = prevalence.shape[0]
    if fmt == "json":
        topics = [{"topic": topic_number(k), "prevalence": [_number(p) for p in prevalence[k]],
                   "words_by_slice": [tables[t][k]["words"] for t in range(len(labels))]}
                  for k in range(K)]
        return json.dumps({"time_field": field, "slices": labels, "documents": documents,
                           "topics": topics}) + "\n"
    if fmt == "tsv":
        lines = ["topic\tslice\tprevalence\twords"]
        for k in range(K):
            lines += [f"{topic_number(k)}\t{label}\t{_cell(prevalence[k, t], '.6f')}\t"
                      + " ".join(w["word"] for w in tables[t][k]["words"])
                      for t, label in enumerate(labels)]
        return "\n".join(lines) + "\n"
    if fmt != "text":
        raise UsageError(f"--over-time writes text, tsv or json; got --format {fmt}")
    width = max(len(str(label)) for label in labels)
    lines = [f"every topic's version in each time slice of '{field}': its prevalence (% of a "
             f"document of the slice at the slice's mean, softmax of alpha_t) and top words; "
             f"slices without training documents are the slice before propagated", ""]
    for k in range(K):
        lines.append(f"topic {topic_number(k)}")
        for t, label in enumerate(labels):
            words = " ".join(w["word"] for w in tables[t][k]["words"])
            lines.append(f"  {label:<{width}} {100 * prevalence[k, t]:5.1f}%  {words}"
                         + ("  (no training documents)" if documents[t] == 0 else ""))
        lines.append("")
    return "\n".join(lines)
