"""``topictk report``: what the report page shows of each run, gathered from its run directory
(config, metrics log, model or latest checkpoint) and its corpus store; the page itself is
drawn by :mod:`topictk.evaluation.report_html`."""
from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from topictk.corpus.store import CorpusStore
from topictk.corpus.union import heldout_id
from topictk.errors import UsageError
from topictk.evaluation import ldavis
from topictk.evaluation.coherence import (
    co_document_counts,
    diversity,
    incidence_matrix,
    npmi,
    top_words,
    umass,
)
from topictk.evaluation.diagnostics import run_diagnostics
from topictk.evaluation.report_labels import add_labels_and_docs
from topictk.evaluation.runs import discover_runs
from topictk.evaluation.run import LoadedRun
from topictk.evaluation.scores import (describe_protocol, progress_bar, protocol, run_scores,
                                       scored_already)
from topictk.evaluation.topic_listing import listing
from topictk.evaluation.topics import topic_tree
from topictk.inference.registry import load_config
from topictk.rundir import checkpoint as ckpt
from topictk.rundir.guard import read_marker
from topictk.rundir.layout import MODEL_FILE
from topictk.rundir.metrics import read_metrics

TREE_WORDS = 6          # words per node of a deep model's topic tree
TREE_CHILDREN = 3       # children per node
DMR_FEATURES = 5        # metadata features per topic
TIME_WORDS = 6          # words per topic in the time panel of a dynamic topic model


@dataclass
class RunReport:
    """One run as the report shows it; ``topics`` is None when there is no model to read."""

    path: Path
    name: str
    algorithm: str
    corpus: str                 # the store's path, as the run's config gives it
    corpus_id: str | None
    corpus_counts: dict
    shape: str                  # "K = 10" or "layers 16-8-4"
    iterations: str             # "60 of 60"
    summary: dict               # train_seconds, perplexity, umass, npmi, diversity, status
    curve: list[dict]           # {"seconds", "tokens", "perplexity"} per evaluation
    # the chain's own measures per evaluation, of an HDP run: {"step", "live_k", "alpha",
    # "gamma"} (metrics.jsonl); empty for other runs
    chain: list[dict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)   # what is missing, what is shown instead
    topics: dict | None = None  # the map and bars (see _topic_data)
    tree: list[dict] | None = None
    diagnostics: list[dict] | None = None   # per-topic diagnostics and junk flags
    comparable: bool = True
    heldout_id: str | None = None   # its held-out tokens (topictk.corpus.union.heldout_id)
    # the held-out score's protocol (scores.protocol) and its one-line description; the
    # in-training curve's documents: curve_docs of test_documents (None: all of them)
    protocol: dict = field(default_factory=dict)
    protocol_text: str = ""
    curve_docs: int | None = None
    test_documents: int | None = None

    @property
    def curve_label(self) -> str:
        """What the curve is: "in-training estimate on 565 of 7,532 test documents"."""
        total = self.test_documents
        if not total:
            return "in-training estimate"
        shown = total if self.curve_docs is None else min(self.curve_docs, total)
        return f"in-training estimate on {shown:,} of {total:,} test documents"


def check_runs(paths: list[str]) -> list[Path]:
    """The run directories of ``paths``: each a run, or a folder of runs (the output of
    ``topictk train --sweep``) standing for its runs in the natural order of their names
    (:func:`topictk.evaluation.runs.discover_runs`); anything else is refused."""
    return [ref.path for ref in discover_runs(paths)]


def gather(paths: list[Path], *, allow_different_corpora: bool = False,
           n_terms: int = ldavis.DEFAULT_TERMS, quiet: bool = False,
           recompute: bool = False) -> list[RunReport]:
    """Read every run; runs of different corpus stores are refused unless
    ``allow_different_corpora``, which marks the perplexities of runs on another store than
    the first run's as not comparable. Each run's perplexity is its ``evaluate`` score, read
    from its scores cache or computed (and cached); a progress bar on stderr counts the runs
    scored (a terminal, not ``quiet``)."""
    incidences: dict[str, object] = {}
    configs = [load_config(path / "config.yaml") for path in paths]
    to_score = sum(1 for path, config in zip(paths, configs)
                   if (path / MODEL_FILE).is_file()
                   and (recompute or not scored_already(path, config)))
    reports = []
    with progress_bar(to_score, quiet, "scoring runs") as bar:
        for path, config in zip(paths, configs):
            reports.append(_read_run(path, n_terms, incidences, config, recompute, bar))
    _check_same_store(reports, allow_different_corpora)
    return reports


def protocol_differences(reports: list[RunReport]) -> list[str]:
    """What differs between the runs' held-out scores and curves, one line each: the corpus
    store, an evaluate setting, the in-training curve's documents."""
    def listed(values: dict) -> str:
        return "; ".join(f"{value} ({', '.join(names)})" for value, names in values.items())

    out = []
    stores: dict[str, list[str]] = {}
    shown: dict[str, str] = {}
    for r in reports:
        key = r.heldout_id or r.corpus_id or "?"      # a run and its continuations: one
        shown.setdefault(key, f"{r.corpus} [{(r.corpus_id or '?')[:12]}]")
        stores.setdefault(key, []).append(r.name)
    if len(stores) > 1:
        out.append(f"corpus store: {listed({shown[k]: v for k, v in stores.items()})}")
    settings: dict[str, dict[str, list[str]]] = {}
    for r in reports:
        for key, value in r.protocol.items():
            settings.setdefault(key, {}).setdefault(str(value), []).append(r.name)
    out += [f"evaluation.{key}: {listed(values)}" for key, values in settings.items()
            if len(values) > 1]
    curves: dict[str, list[str]] = {}
    for r in reports:
        if r.curve:
            curves.setdefault(r.curve_label, []).append(r.name)
    if len(curves) > 1:
        out.append(f"in-training curves: {listed(curves)}")
    return out


def _check_same_store(reports: list[RunReport], allow: bool) -> None:
    first = reports[0]
    for other in reports[1:]:
        if (other.heldout_id or other.corpus_id) == (first.heldout_id or first.corpus_id):
            continue        # one store, or a run and one continued from it: the same tokens
        if not allow:
            raise UsageError(f"{other.path}: was trained on another corpus store "
                             f"({other.corpus}) than {first.path} ({first.corpus}), so their "
                             f"held-out perplexities are measured on different tokens; report "
                             f"runs of one store, or add --allow-different-corpora to mark "
                             f"the perplexities as not comparable")
        other.comparable = False


def _read_run(path: Path, n_terms: int, incidences: dict, config=None,
              recompute: bool = False, bar=None) -> RunReport:
    config = config if config is not None else load_config(path / "config.yaml")
    loaded, notes = _load_model(path)
    store = loaded.store if loaded else CorpusStore.open(config.corpus)
    marker = read_marker(path)
    corpus_id = (marker or {}).get("corpus_id") or store.corpus_id
    metrics = read_metrics(path / "metrics.jsonl")
    if not metrics:
        notes.append("metrics.jsonl has no evaluations yet: no perplexity curve")
    report = RunReport(path=path, name=_display_name(path), algorithm=config.inference.algorithm,
                       corpus=str(config.corpus), corpus_id=corpus_id,
                       heldout_id=heldout_id(store.manifest),
                       corpus_counts=dict(store.manifest.get("counts", {})),
                       shape=_shape(config), iterations=_iterations(config, loaded, metrics),
                       summary=_summary(loaded, metrics), curve=_curve(metrics),
                       chain=_chain(metrics), notes=notes)
    counts = report.corpus_counts
    report.test_documents = counts.get("test_documents")
    report.curve_docs = config.evaluation.curve_docs
    report.protocol = protocol(config)
    report.protocol_text = describe_protocol(report.protocol, report.test_documents)
    if loaded is not None:
        _add_score(report, loaded, recompute, bar)
        _add_model(report, loaded, n_terms, incidences)
    return report


def _add_score(report: RunReport, loaded: LoadedRun, recompute: bool, bar) -> None:
    """The run's held-out perplexity as ``evaluate`` gives it (of the model the page shows:
    the final model, else the latest checkpoint), from the scores cache or computed."""
    scores = run_scores(loaded.run_dir, loaded.config, loaded.checkpoint, loaded=loaded,
                        recompute=recompute)
    if not scores.get("cached") and bar is not None and loaded.checkpoint is None:
        bar.update(1)
    # a Protocol B store has no test documents: its held-out tokens are the training
    # documents' (as compare and evaluate say)
    ppl = scores.get("perplexity")
    report.summary["perplexity"] = (ppl if ppl is not None
                                    else scores.get("perplexity_train_heldout"))
    report.summary["heldout_tokens"] = scores.get("heldout_tokens",
                                                  scores.get("train_heldout_tokens"))
    report.summary["scored_step"] = scores.get("step")
    report.summary["estimator"] = scores.get("estimator")
    if loaded.checkpoint is not None:
        report.protocol_text += f" (checkpoint at step {loaded.checkpoint})"


def _display_name(path: Path) -> str:
    """The run as the command line named it when that is a relative path (``runs/k=10``);
    an absolute path, or a name of dots alone (``.``, ``..``), as its folder's parent and
    name, which are short and say more."""
    typed = os.path.normpath(path)
    if not Path(typed).is_absolute() and Path(typed).name not in ("", ".", ".."):
        return typed
    resolved = path.resolve()
    return f"{resolved.parent.name}/{resolved.name}" if resolved.parent.name else resolved.name


def _load_model(path: Path) -> tuple[LoadedRun | None, list[str]]:
    """The final model, else the latest checkpoint (saying so), else nothing (saying what is
    missing and how to get it)."""
    if (path / MODEL_FILE).exists():
        return LoadedRun(path), []
    resume = f"'topictk train --config {path / 'config.yaml'} --resume'"
    steps = [s for s, _ in ckpt.list_checkpoints(path / "checkpoints")]
    if steps:
        note = (f"{MODEL_FILE} is missing: training has not finished; the topics shown are "
                f"those of the checkpoint at step {steps[-1]}; resume with {resume}")
        return LoadedRun(path, steps[-1]), [note]
    note = (f"{MODEL_FILE} and checkpoints are missing: training stopped or is running before "
            f"its first checkpoint, so there are no topics to show; resume or train it with "
            f"{resume}, or with --force")
    return None, [note]


def _shape(config) -> str:
    layers = getattr(config.model, "layers", None)
    if getattr(config.model, "family", "lda") == "dlda" and layers:
        return "layers " + "-".join(str(k) for k in layers)
    return f"K = {config.model.topics}"


def _iterations(config, loaded: LoadedRun | None, metrics: list[dict]) -> str:
    planned = config.inference.iterations
    if loaded is not None:
        done = loaded.state.step
    else:
        done = metrics[-1]["step"] if metrics else 0
    return f"{done} of {planned}"


def _perplexity(record: dict) -> float | None:
    value = record.get("perplexity_point")
    if isinstance(value, (int, float)) and math.isfinite(value):
        return float(value)
    return None


def _curve(metrics: list[dict]) -> list[dict]:
    return [{"seconds": float(m.get("train_seconds", 0.0)),
             "tokens": float(m.get("tokens_seen", 0)), "perplexity": _perplexity(m)}
            for m in metrics if _perplexity(m) is not None]


#: the measures of a chain that metrics.jsonl records besides the perplexity (an HDP run's
#: live K, alpha_0 and gamma), which the page plots against the steps
CHAIN_MEASURES = ("live_k", "alpha", "gamma")


def _chain(metrics: list[dict]) -> list[dict]:
    """Per evaluation with all of :data:`CHAIN_MEASURES`: the step and their values."""
    return [{"step": int(m["step"]), **{k: float(m[k]) for k in CHAIN_MEASURES}}
            for m in metrics
            if all(isinstance(m.get(k), (int, float)) and math.isfinite(m[k])
                   for k in CHAIN_MEASURES)]


def _summary(loaded: LoadedRun | None, metrics: list[dict]) -> dict:
    """Training time and status; ``perplexity`` is the evaluate score (:func:`_add_score`),
    None without a model: the curve's last in-training estimate is not the run's score."""
    clock = loaded.header.get("clock", {}) if loaded else {}
    seconds = clock.get("train_seconds", metrics[-1].get("train_seconds") if metrics else None)
    status = loaded.header.get("status", "completed") if loaded else "no model"
    return {"train_seconds": seconds, "perplexity": None, "status": status}


def _add_model(report: RunReport, loaded: LoadedRun, n_terms: int, incidences: dict) -> None:
    store, ev = loaded.store, loaded.config.evaluation
    train = store.train()
    phi = np.asarray(loaded.topic_word(), dtype=np.float64)
    key = str(store.path)
    if key not in incidences:
        incidences[key] = incidence_matrix(train.indptr, train.indices, store.n_words)
    top = top_words(phi, min(ev.coherence_top, phi.shape[1]))
    counts = co_document_counts(top, incidences[key])
    per_topic = npmi(top, incidences[key], counts)
    report.summary.update(umass=float(np.mean(umass(top, incidences[key], counts))),
                          npmi=float(np.mean(per_topic)),
                          diversity=diversity(phi, min(ev.diversity_top, phi.shape[1])))
    freq = ldavis.term_frequencies(train.indices, train.counts, store.n_words)
    shown = listing(loaded)
    if shown is None:
        report.topics = topic_data(phi, freq, per_topic, n_terms)
    else:   # an HDP run: its live topics, largest first, under their numbers, with weights
        report.topics = topic_data(phi[shown.rows], freq, per_topic[shown.rows], n_terms)
        report.topics["ids"] = shown.ids
        report.shape = f"K = {len(shown.ids)} live of {phi.shape[0]} slots"
        report.topics["weights"] = {n: [round(float(x), 6) for x in w]
                                    for n, w in shown.weights.items()}
    report.topics["vocab"] = [store.vocab[w] for w in report.topics["words"]]
    traits = loaded.driver.traits
    if traits.offers("features"):
        report.topics["features"] = loaded.driver.feature_table(loaded.state, DMR_FEATURES)
    if traits.time_slices:
        report.topics["time"] = time_data(loaded.driver.slice_topic_word(loaded.state),
                                          loaded.driver.slice_prevalence(loaded.state),
                                          store.time_slices, store.vocab)
    report.diagnostics = run_diagnostics(loaded)
    if traits.offers("tree"):
        report.tree = topic_tree(loaded.driver, loaded.state, store.vocab, TREE_WORDS,
                                 TREE_CHILDREN, len(loaded.state.layers))
    add_labels_and_docs(report, loaded)     # labels, suggestions, representative documents


def time_data(versions: np.ndarray, prevalence: np.ndarray, labels: list[str],
              vocab) -> dict:
    """The time panel of a run whose topics change by slice: the slices' names, every topic's
    prevalence by slice (K, T) and, per topic, the words most probable in any slice (the
    TIME_WORDS first by their largest probability over the slices) with their probability in
    every slice."""
    T, K, _ = versions.shape
    words, series = [], []
    for k in range(K):
        peak = versions[:, k, :].max(axis=0)
        top = np.argsort(-peak, kind="stable")[:TIME_WORDS]
        words.append([vocab[int(w)] for w in top])
        series.append([[round(float(versions[t, k, w]), 6) for t in range(T)] for w in top])
    return {"slices": list(labels),
            "prevalence": [[round(float(prevalence[t, k]), 6) for t in range(T)]
                           for k in range(K)],
            "words": words, "series": series}


def topic_data(phi: np.ndarray, freq: np.ndarray, npmi_per_topic: np.ndarray,
               n_terms: int) -> dict:
    """The map and bars of one model (docs/algorithms.md §11.8), with only the words some bar
    chart shows: ``words`` (word ids, ascending), ``total`` (their corpus frequencies),
    ``x``, ``y`` (classical MDS of the JS distances), ``share``, ``npmi`` per topic,
    ``default`` (the most salient words, as indices into ``words``) and per topic
    ``terms``: [indices into ``words``], ``freq`` (expected occurrences in the topic),
    ``logprob``, ``loglift`` (rounded to 4 decimals, for relevance in the page), and per word
    ``term_topics``: P(topic | term) (:func:`term_topics`), which the map's circles show
    while the term's bar is hovered."""
    shares = ldavis.topic_shares(phi, freq)
    proportion = freq / freq.sum()
    logprob, loglift = ldavis.log_terms(phi, proportion)
    relevant = ldavis.relevant_terms(logprob, loglift, n_terms)
    default = np.argsort(-ldavis.saliency(phi, shares, proportion), kind="stable")[:n_terms]
    words = np.unique(np.concatenate([default, *relevant]))
    index = {int(w): i for i, w in enumerate(words)}
    weighted = shares[:, None] * phi
    mixture = weighted.sum(axis=0)
    coords = ldavis.classical_mds(ldavis.js_distances(phi))
    topics = []
    for k, ids in enumerate(relevant):
        expected = freq[ids] * weighted[k, ids] / mixture[ids]     # n_w p(k | w)
        topics.append({"terms": [index[int(w)] for w in ids],
                       "freq": np.round(expected, 1).tolist(),
                       "logprob": np.round(logprob[k, ids], 4).tolist(),
                       "loglift": np.round(loglift[k, ids], 4).tolist()})
    return {"words": words.tolist(), "total": [float(x) for x in freq[words]],
            "x": coords[:, 0].tolist(), "y": coords[:, 1].tolist(),
            "share": shares.tolist(), "npmi": [float(x) for x in npmi_per_topic],
            "default": [index[int(w)] for w in default], "topic": topics,
            "n_terms": int(n_terms), "term_topics": term_topics(weighted[:, words])}


#: P(topic | term) below this is left out of the page, and its circle drawn at the map's
#: smallest size (2.5 px instead of at most 4.7 px): with a smoothed model most words have
#: some probability under every topic, and keeping them all made the data of a K = 100 run of
#: 20 Newsgroups 2.7 MB (47 topics per word shown) instead of 0.2 MB (3.7 per word, 5.6% of a
#: word's probability left out on average)
TERM_TOPIC_FLOOR = 2e-3


def term_topics(weighted: np.ndarray) -> list[list[float]]:
    """P(topic | term) = phi_kw p(k) / sum_j phi_jw p(j) of every column of ``weighted``
    (phi_kw p(k), K x words), p(k) the topic's share of the corpus's tokens (the circle sizes of
    the map): per word a flat list [row, probability, row, probability, ...] of the topics
    with a probability of at least :data:`TERM_TOPIC_FLOOR`, rows ascending, probabilities
    rounded to 4 decimals."""
    total = weighted.sum(axis=0)
    posterior = np.divide(weighted, total[None, :], out=np.zeros_like(weighted),
                          where=total[None, :] > 0)
    out = []
    for column in posterior.T:
        rows = np.flatnonzero(column >= TERM_TOPIC_FLOOR)
        out.append([x for k in rows for x in (int(k), round(float(column[k]), 4))])
    return out
