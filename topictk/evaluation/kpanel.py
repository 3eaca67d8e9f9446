"""Scores against K: the runs of a sweep (``topictk train --sweep model.topics=... --sweep
training.seed=...``) grouped by the swept value, with the seeds as replicates, and per run the
numbers that help choose K (docs/choosing-k.md).

Per run:

- ``perplexity``: the held-out perplexity of ``topictk evaluate`` (document completion on the
  store's held-out tokens), from the run's scores cache (:func:`scores.run_scores`), never the
  in-training estimate; lower is better;
- ``npmi`` and ``umass``: evaluate's mean NPMI and UMass of the topics' top
  ``evaluation.coherence_top`` words, by document co-occurrence in the store's training
  documents (coherence.py); higher is better;
- ``reference_npmi``: gensim's ``c_npmi`` of the same top words on the training texts of
  another store (a sliding window of 10 tokens), as ``evaluate --coherence c_npmi
  --reference STORE`` gives it: words are matched by their string, a word the reference lacks
  is left out of its topic; higher is better;
- ``diversity``: evaluate's share of unique words among the top ``evaluation.diversity_top``
  words of all topics (Dieng et al. 2020); higher is better;
- ``inverted_rbo``: 1 - the mean rank-biased overlap (Webber et al. 2010, extrapolated,
  p = 0.9) over all pairs of topics' top ``evaluation.coherence_top`` lists (Bianchi et al.
  2021); higher is better (the topics overlap less).

Per swept value, over the pairs of its seeds:

- ``stability``: the mean over pairs of runs of the mean (1 - Jensen-Shannon distance, base 2,
  in [0, 1]) between topics aligned one to one as ``topictk compare --align`` aligns them;
  higher is better (1: the seeds found the same topics).

Nothing of this is cached beyond evaluate's own scores.json: the coherence numbers come with
evaluate's cached score, and the rest (top-word lists, one pass over the reference texts for
all runs at once, the alignments) takes seconds.
"""
from __future__ import annotations

import json
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path

import numpy as np

from topictk.config.schema import initial_hdp_topics
from topictk.corpus.store import CorpusStore
from topictk.errors import TopictkError, UsageError
from topictk.evaluation.coherence import gensim_coherence, top_words
from topictk.evaluation.compare import align_topics
from topictk.evaluation.topic_listing import listing
from topictk.evaluation.run import LoadedRun
from topictk.evaluation.runs import RunRef, check_same_store, protocol_differences
from topictk.evaluation.scores import (describe_protocol, progress_bar, protocol,
                                       run_scores, scored_already, store_counts)

log = logging.getLogger("topictk")

#: persistence of rank-biased overlap (Bianchi et al. 2021 use 0.9)
RBO_P = 0.9
#: the reference measure: gensim's name, and its window in tokens
REFERENCE_MEASURE = "c_npmi"
REFERENCE_WINDOW = 10

#: (key, title, better): the measures in the order they are drawn
MEASURES = (
    ("perplexity", "held-out perplexity", "lower"),
    ("npmi", "NPMI (training corpus)", "higher"),
    ("umass", "UMass (training corpus)", "higher"),
    ("reference_npmi", "NPMI (reference corpus)", "higher"),
    ("diversity", "topic diversity", "higher"),
    ("inverted_rbo", "inverted RBO", "higher"),
    ("stability", "stability across seeds", "higher"),
)
TITLES = {key: title for key, title, _ in MEASURES}
BETTER = {key: better for key, _, better in MEASURES}

#: config keys that never change what a run learns: they neither define a sweep's x axis nor
#: split its runs into series
_NOT_SETTINGS = ("training.", "evaluation.", "output", "corpus")
SEED_KEY = "training.seed"
TOPICS_KEY = "model.topics"


# ----------------------------------------------------------------------------- RBO
def rbo(a: Sequence[int], b: Sequence[int], p: float = RBO_P) -> float:
    """Extrapolated rank-biased overlap of two ranked lists of the same length k without
    repeats (Webber, Moffat and Zobel 2010, eq. 32 with s = l = k):

        RBO_ext = X_k / k * p^k + (1 - p) / p * sum_{d=1}^{k} X_d / d * p^d

    where X_d is the number of items the two lists share in their first d. It is 1 for
    identical lists and 0 for disjoint ones (the truncated sum alone would give 1 - p^k)."""
    if len(a) != len(b):
        raise ValueError(f"rbo: lists of different lengths ({len(a)}, {len(b)})")
    k = len(a)
    if k == 0:
        return 1.0
    seen_a, seen_b, shared, total = set(), set(), 0, 0.0
    for d in range(1, k + 1):
        x, y = a[d - 1], b[d - 1]
        if x == y:
            shared += 1
        else:
            shared += (x in seen_b) + (y in seen_a)
        seen_a.add(x)
        seen_b.add(y)
        total += shared / d * p ** d
    return shared / k * p ** k + (1 - p) / p * total


def pairwise_rbo(top: np.ndarray, p: float = RBO_P, block: int = 64) -> np.ndarray:
    """(K, K) extrapolated RBO (:func:`rbo`) between every two rows of ``top`` (K, k), each a
    topic's top word ids best first; computed ``block`` rows at a time from the positions
    where two lists hold the same word (an item shared at ranks i and j counts in X_d from
    d = max(i, j) + 1 on)."""
    top = np.asarray(top)
    K, k = top.shape
    out = np.empty((K, K))
    if k == 0:
        out.fill(1.0)
        return out
    depth = np.arange(1, k + 1)
    weights = (1 - p) / p * p ** depth / depth             # (k,)
    # (k, k): the depth index (d - 1) from which a word at ranks i and j is shared
    deeper = np.maximum.outer(np.arange(k), np.arange(k))
    for begin in range(0, K, block):
        rows = top[begin:begin + block]
        same = rows[:, None, :, None] == top[None, :, None, :]            # (b, K, k, k)
        b_idx, c_idx, i_idx, j_idx = np.nonzero(same)
        first = np.zeros((rows.shape[0], K, k))
        np.add.at(first, (b_idx, c_idx, deeper[i_idx, j_idx]), 1.0)
        X = np.cumsum(first, axis=2)                                      # X_d, d = 1..k
        out[begin:begin + rows.shape[0]] = X[:, :, -1] / k * p ** k + X @ weights
    return out


def inverted_rbo(top: np.ndarray, p: float = RBO_P) -> float | None:
    """1 - the mean extrapolated RBO over all pairs of distinct topics (Bianchi et al. 2021);
    None for fewer than two topics."""
    K = top.shape[0]
    if K < 2:
        return None
    upper = np.triu_indices(K, 1)
    return float(1.0 - pairwise_rbo(top, p)[upper].mean())


# ----------------------------------------------------------------------------- stability
def stability(phi_a: np.ndarray, phi_b: np.ndarray) -> float:
    """The mean of (1 - Jensen-Shannon distance, base 2) over the topics of two runs matched
    one to one (:func:`topictk.evaluation.compare.align_topics`): 1 when they are the same
    topics, 0 when no matched pair shares a word."""
    pairs = align_topics(phi_a, phi_b)
    return float(np.mean([1.0 - d for _, _, d in pairs]))


# ----------------------------------------------------------------------------- the sweep
def _flat(data: dict, prefix: str = "") -> dict[str, object]:
    out = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(_flat(value, name + "."))
        else:
            out[name] = value
    return out


def _numeric(value) -> bool:
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value))


def _setting(value) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def swept_keys(runs: Sequence[RunRef]) -> tuple[str | None, list[str]]:
    """(x key, other keys) of runs that differ in their model or inference settings: the x
    key is ``model.topics`` when it differs, else the first numeric key that differs (None:
    no numeric key differs); the other differing keys split the runs into series. The seed
    and the training and evaluation settings are never among them."""
    flats = [_resolved_as_auto(_flat(run.config.to_dict())) for run in runs]
    keys = sorted({k for f in flats for k in f if not k.startswith(_NOT_SETTINGS)})
    differing = [k for k in keys if len({_setting(f.get(k)) for f in flats}) > 1]
    numeric = [k for k in differing if all(_numeric(f.get(k)) for f in flats)]
    if not numeric:
        return None, differing
    x = TOPICS_KEY if TOPICS_KEY in numeric else numeric[0]
    return x, [k for k in differing if k != x and SAME_AS.get(k) != x]


#: keys a config resolves into another: an HDP run's model.topics is its model.max_topics,
#: so runs that differ in both are one sweep of K (K_max), not one series per K_max
SAME_AS = {"model.max_topics": TOPICS_KEY}


def _resolved_as_auto(flat: dict) -> dict:
    """An HDP run's ``model.initial_topics`` back to ``auto`` where it is the number auto
    resolved to for its K_max: runs of different K_max started by default are one sweep."""
    topics = flat.get(TOPICS_KEY)
    if (flat.get("model.family") == "hdp" and isinstance(topics, int)
            and flat.get("model.initial_topics") == initial_hdp_topics(topics)):
        flat["model.initial_topics"] = "auto"
    return flat


@dataclass
class PanelRun:
    """One run of the panel: its x value, seed, series and numbers (None: not available)."""

    label: str
    path: Path
    x: float
    seed: object
    series: str
    scores: dict = field(default_factory=dict)


@dataclass
class KPanel:
    """The runs of a sweep, their numbers and what the numbers are.

    ``stability`` holds per series and x value the pairs of seeds compared:
    ``{"series", "x", "pairs": [(label a, label b, value)]}``; ``describe`` says, measure by
    measure, how each number is computed (for the line beside the charts and the figure's
    caption)."""

    x_key: str
    series: list[str]
    runs: list[PanelRun]
    stability: list[dict]
    measures: list[str]
    describe: dict[str, str]
    protocol_text: str
    vocabulary: int | None
    seeds: list
    reference: dict | None = None
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def x_label(self) -> str:
        return "K (topics)" if self.x_key == TOPICS_KEY else self.x_key

    @property
    def x_values(self) -> list[float]:
        return sorted({r.x for r in self.runs})

    def points(self, measure: str) -> list[tuple[str, float, float, str]]:
        """(series, x, value, what) of every number of ``measure``: a run (what = its label)
        or, for stability, a pair of seeds ("a ~ b")."""
        if measure == "stability":
            return [(s["series"], s["x"], v, f"{a} ~ {b}") for s in self.stability
                    for a, b, v in s["pairs"]]
        return [(r.series, r.x, r.scores[measure], r.label) for r in self.runs
                if r.scores.get(measure) is not None]

    def summary(self, measure: str) -> list[dict]:
        """Per series and x value: ``mean``, ``low``, ``high`` (min and max) and ``n`` of the
        numbers of ``measure``, by series then x."""
        groups: dict[tuple[str, float], list[float]] = {}
        for series, x, value, _ in self.points(measure):
            groups.setdefault((series, x), []).append(value)
        order = {s: i for i, s in enumerate(self.series)}
        return [{"series": s, "x": x, "mean": float(np.mean(v)), "low": float(min(v)),
                 "high": float(max(v)), "n": len(v)}
                for (s, x), v in sorted(groups.items(), key=lambda g: (order[g[0][0]], g[0][1]))]

    def band_text(self, measure: str) -> str:
        """What the shaded band of ``measure`` spans: "band: min–max over 3 seeds" (over
        "3 seed pairs" for stability)."""
        counts = sorted({g["n"] for g in self.summary(measure)})
        what = "seed pair" if measure == "stability" else "seed"
        n = str(counts[0]) if len(counts) == 1 else f"{counts[0]}–{counts[-1]}"
        return f"band: min–max over {n} {what}{'' if n == '1' else 's'}"


def _x_of(value) -> float:
    return int(value) if float(value).is_integer() else float(value)


def _series_label(flat: dict, keys: list[str], store: str | None) -> str:
    parts = [f"{k}={flat.get(k)}" for k in keys]
    if store is not None:
        parts.append(f"store {store}")
    return ", ".join(parts)


def check_reference(reference: str | Path | None) -> Path | None:
    """The ``--reference`` store's path, checked before any work starts; UsageError naming
    the option when it is not a corpus store with token order."""
    if reference is None:
        return None
    try:
        store = CorpusStore.open(reference)
    except TopictkError as exc:
        raise UsageError(f"--reference {reference}: not a readable corpus store ({exc}); give "
                         f"a folder made by 'topictk prepare'") from None
    texts = store.train()
    if texts.doc_ptr is None or texts.words is None:
        raise UsageError(f"--reference {reference}: keeps no token order of its training "
                         f"documents; prepare it again with this version of topictk")
    return Path(reference)


def k_panel(runs: Sequence[RunRef], *, reference: str | Path | None = None,
            allow_different_corpora: bool = False, quiet: bool = False,
            recompute: bool = False) -> KPanel | None:
    """The panel of ``runs`` when they hold a sweep of at least two values of a numeric
    model or inference key (model.topics first); None otherwise.

    Runs of different stores are refused (:func:`runs.check_same_store`) unless
    ``allow_different_corpora``: then each store is a series of its own and the panel warns
    that their perplexities are not comparable. Runs without a final model are left out,
    with a note. ``reference``: a store whose training texts give ``reference_npmi``."""
    runs = [r for r in runs]
    if len(runs) < 2:
        return None
    x_key, others = swept_keys(runs)
    if x_key is None:
        return None
    flats = [_flat(r.config.to_dict()) for r in runs]
    if len({_setting(f[x_key]) for f in flats}) < 2:
        return None
    same_store = check_same_store(runs, allow_different_corpora)
    notes, warnings = [], []
    if not same_store:
        warnings.append("the runs were trained on different corpus stores: each store is a "
                        "series of its own, and perplexities of different stores are "
                        "measured on different held-out tokens, so they are not comparable")
    warnings += [f"scored differently: {line}" for line in protocol_differences(runs)
                 if not line.startswith("corpus store:")]
    ref_store = CorpusStore.open(reference) if reference is not None else None
    groups: dict[tuple[str, float], list[int]] = {}
    members: list[tuple[RunRef, PanelRun]] = []
    for run, flat in zip(runs, flats):
        missing = run.missing()
        if missing is not None:
            notes.append(f"left out: {missing}")
            continue
        store = None if same_store else f"{run.config.corpus} [{(run.corpus_id or '?')[:12]}]"
        item = PanelRun(label=run.label, path=run.path, x=_x_of(flat[x_key]),
                        seed=flat.get(SEED_KEY), series=_series_label(flat, others, store))
        members.append((run, item))
    xs_of_series: dict[str, set] = {}
    for _, item in members:
        xs_of_series.setdefault(item.series, set()).add(item.x)
    if max((len(xs) for xs in xs_of_series.values()), default=0) < 2:
        return None             # no series runs over two values: nothing to draw a line of
    series = list(dict.fromkeys(item.series for _, item in members))
    for index, (_, item) in enumerate(members):
        groups.setdefault((item.series, item.x), []).append(index)
    first = members[0][0].config.evaluation
    top_n, diverse_n = int(first.coherence_top), int(first.diversity_top)
    if len({(r.config.evaluation.coherence_top, r.config.evaluation.diversity_top)
            for r, _ in members}) > 1:
        warnings.append("the runs' evaluation.coherence_top or diversity_top differ: their "
                        "coherence and diversity count different numbers of top words")
    reference_topics: list[tuple[int, list[str]]] = []
    stability_rows = []
    to_score = sum(1 for run, _ in members
                   if recompute or not scored_already(run.path, run.config))
    with progress_bar(to_score, quiet, "scoring runs") as bar:
        for (name, x), indices in groups.items():
            phis = []
            for index in indices:
                run, item = members[index]
                phi, top = _score_run(run, item, recompute, bar)
                if ref_store is not None:
                    vocab = run_vocab(run)
                    reference_topics += [(index, [vocab[w] for w in words])
                                         for words in top[:, :top_n]]
                phis.append(phi)
            pairs = []
            for a, b in combinations(range(len(indices)), 2):
                if phis[a].shape[1] != phis[b].shape[1]:
                    continue                    # different vocabularies: nothing to align
                pairs.append((members[indices[a]][1].label, members[indices[b]][1].label,
                              stability(phis[a], phis[b])))
            if pairs:
                stability_rows.append({"series": name, "x": x, "pairs": pairs})
            del phis
    items = [item for _, item in members]
    reference_info = None
    if ref_store is not None:
        reference_info = _reference_npmi(ref_store, reference_topics, items)
    measures = [m for m, _, _ in MEASURES
                if (m == "stability" and stability_rows)
                or any(r.scores.get(m) is not None for r in items)]
    if not stability_rows:
        notes.append("stability across seeds needs at least two seeds (runs that differ in "
                     "training.seed only) at some value of the swept key")
    config = members[0][0].config
    counts = store_counts(config.corpus)
    protocol_text = describe_protocol(protocol(config), counts.get("test_documents"))
    seeds = sorted({r.seed for r in items}, key=lambda s: (str(type(s)), s))
    describe = _describe(top_n, diverse_n, counts, reference_info)
    return KPanel(x_key=x_key, series=series, runs=items, stability=stability_rows,
                  measures=measures, describe=describe, protocol_text=protocol_text,
                  vocabulary=counts.get("vocabulary"), seeds=seeds,
                  reference=reference_info, notes=notes, warnings=warnings)


def run_vocab(run: RunRef) -> list[str]:
    return list(CorpusStore.open(run.config.corpus).vocab)


def _score_run(run: RunRef, item: PanelRun, recompute: bool, bar) -> tuple[np.ndarray,
                                                                              np.ndarray]:
    """Fill ``item.scores`` from evaluate's score and the run's top words; returns its topics
    (K, V) and top words (K, n) by the ranking evaluate uses (an HDP run's live topics)."""
    cached = not recompute and scored_already(run.path, run.config)
    loaded = LoadedRun(run.path)
    scores = run_scores(run.path, run.config, loaded=loaded, recompute=recompute)
    if not cached and not scores.get("cached"):
        bar.update(1)
    ppl = scores.get("perplexity")
    ev, V = loaded.config.evaluation, loaded.driver.V
    phi = np.asarray(loaded.topic_word(), dtype=np.float64)        # (K, V)
    n = min(max(ev.coherence_top, ev.diversity_top), V)
    ranked = loaded.driver.ranked_words(loaded.state, n)
    top = top_words(phi, n) if ranked is None else ranked[0]        # (K, n)
    shown = listing(loaded)     # an HDP run: its live topics (the empty slots have no words)
    if shown is not None:
        phi, top = phi[shown.rows], top[shown.rows]
    item.scores.update(
        perplexity=ppl if ppl is not None else scores.get("perplexity_train_heldout"),
        npmi=scores.get("npmi"), umass=scores.get("umass"), diversity=scores.get("diversity"),
        inverted_rbo=inverted_rbo(top[:, :min(ev.coherence_top, V)]))
    return phi, top


def _reference_npmi(ref: CorpusStore, topics: list[tuple[int, list[str]]],
                    items: list[PanelRun]) -> dict:
    """``reference_npmi`` of every run from one pass over the reference texts for all their
    topics at once (a topic's value does not depend on the others'); what the reference
    covers of the runs' top words."""
    texts = ref.train()
    if texts.doc_ptr is None or texts.words is None:
        raise UsageError(f"--reference {ref.path}: keeps no token order of its training "
                         f"documents; prepare it again with this version of topictk")
    found = gensim_coherence([words for _, words in topics], texts, ref.vocab,
                             (REFERENCE_MEASURE,), progress=False)
    per_topic = found["per_topic"][REFERENCE_MEASURE]
    values: dict[int, list[float]] = {}
    for (index, _), value in zip(topics, per_topic):
        values.setdefault(index, [])
        if value is not None:
            values[index].append(value)
    for index, vals in values.items():
        items[index].scores["reference_npmi"] = float(np.mean(vals)) if vals else None
    words = {w for _, ws in topics for w in ws}
    missing = sorted(found["absent"])
    return {"name": Path(ref.path).name, "path": str(ref.path),
            "documents": int(texts.doc_ptr.size - 1), "words": len(words),
            "present": len(words) - len(missing), "missing": missing,
            "windows": int(found["windows"][REFERENCE_MEASURE])}


def _describe(top_n: int, diverse_n: int, counts: dict, reference: dict | None) -> dict:
    docs = counts.get("train_documents")
    where = f"the {docs:,} training documents" if docs else "the training documents"
    out = {
        "perplexity": "evaluate's held-out perplexity (document completion)",
        "npmi": f"mean NPMI of the top {top_n} words, document co-occurrence in {where}",
        "umass": f"mean UMass of the top {top_n} words, document co-occurrence in {where}",
        "diversity": f"share of unique words among the top {diverse_n} of all topics",
        "inverted_rbo": (f"1 − mean rank-biased overlap of the top {top_n} lists over pairs "
                         f"of topics (p = {RBO_P}, extrapolated)"),
        "stability": ("mean (1 − Jensen–Shannon distance, base 2) of topics aligned one to "
                      "one, over pairs of seeds"),
    }
    if reference is not None:
        share = reference["present"] / reference["words"] if reference["words"] else 0.0
        out["reference_npmi"] = (
            f"mean NPMI (gensim c_npmi) of the top {top_n} words, sliding window of "
            f"{REFERENCE_WINDOW} tokens over the {reference['documents']:,} documents of "
            f"{reference['name']}; {reference['present']:,} of the {reference['words']:,} "
            f"top words ({share:.0%}) are in it, the others are left out of their topics")
    return out


def panel_data(panel: KPanel) -> dict:
    """The panel's numbers as plain JSON data (the report page carries it as
    ``k-panel-data``): every run's scores, the seed pairs' stability, per measure the mean and
    min–max at each x value, and what each number is."""
    def finite(value):
        return value if value is None or math.isfinite(value) else None

    return {"x_key": panel.x_key, "x_values": panel.x_values, "seeds": panel.seeds,
            "series": panel.series, "measures": panel.measures, "line": panel_line(panel),
            "describe": panel.describe, "protocol": panel.protocol_text,
            "reference": panel.reference, "warnings": panel.warnings, "notes": panel.notes,
            "runs": [{"run": r.label, "x": r.x, "seed": r.seed, "series": r.series,
                      "scores": {k: finite(v) for k, v in r.scores.items()}}
                     for r in panel.runs],
            "stability": [{"series": s["series"], "x": s["x"],
                           "pairs": [{"a": a, "b": b, "value": v} for a, b, v in s["pairs"]]}
                          for s in panel.stability],
            "summary": {m: panel.summary(m) for m in panel.measures}}


def panel_line(panel: KPanel) -> str:
    """One line saying what the panel's numbers are: the held-out protocol, the top-N and
    window of each coherence, the reference and its coverage, the vocabulary, the seeds."""
    parts = [f"held-out perplexity: {panel.protocol_text}"]
    parts += [f"{TITLES[m]}: {panel.describe[m]}" for m in panel.measures
              if m != "perplexity" and m in panel.describe]
    if panel.vocabulary:
        parts.append(f"vocabulary: {panel.vocabulary:,} words")
    parts.append("seeds: " + ", ".join(str(s) for s in panel.seeds))
    return " · ".join(parts)
