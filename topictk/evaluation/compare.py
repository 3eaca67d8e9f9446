"""``topictk compare``: one row of scores per run, and the alignment of two runs' topics.

Every run is scored as ``topictk evaluate`` scores it (held-out perplexity by document
completion on the store's held-out tokens, UMass, NPMI and diversity of its topics), so runs
of one store are ranked on the same tokens.
"""
from __future__ import annotations

import json
import logging
import math
from collections.abc import Sequence

import numpy as np

from topictk.errors import UsageError
from topictk.evaluation.coherence import top_words
from topictk.evaluation.topic_listing import listing
from topictk.numbering import topic_number
from topictk.evaluation.run import LoadedRun
from topictk.evaluation.runs import RunRef
from topictk.evaluation.scores import progress_bar, run_scores, scored_already
from topictk.evaluation.tsv import tsv_rows

log = logging.getLogger("topictk")

COLUMNS = ("run", "algorithm", "topics", "iterations", "train_seconds", "perplexity",
           "perplexity_left_to_right", "umass", "npmi", "diversity", "estimator")


def model_size(config) -> str:
    """K, or the layer sizes of a deep model (``128-64-32``)."""
    layers = config.model.get("layers")
    return "-".join(str(k) for k in layers) if layers else str(config.model.topics)


def compare_row(run: RunRef, left_to_right: int | None = None,
                threads: int | None = None, recompute: bool = False) -> dict:
    """The scores of one run, those of ``topictk evaluate`` (from the run's scores cache when
    it holds them, :func:`topictk.evaluation.scores.run_scores`); a run without its final
    model gets what its metrics log holds (steps and seconds so far) and ``missing``, saying
    what it lacks and the fix."""
    row = {"run": run.label, "path": str(run.path),
           "algorithm": run.config.inference.algorithm, "topics": model_size(run.config)}
    missing = run.missing()
    if missing is not None:
        records = run.metrics()
        last = records[-1] if records else {}
        row.update({"iterations": last.get("step"), "train_seconds": last.get("train_seconds"),
                    "missing": missing})
        return row
    scores = run_scores(run.path, run.config, None, left_to_right, threads,
                        recompute=recompute)
    row.update({"iterations": int(scores["step"]),
                "train_seconds": scores.get("train_seconds"),
                # a Protocol B store has no test documents: its held-out tokens are the
                # training documents' (§11.1), the same for every run of the store
                "perplexity": (scores["perplexity"] if scores.get("perplexity") is not None
                               else scores.get("perplexity_train_heldout")),
                "estimator": scores.get("estimator"),
                "umass": scores["umass"], "npmi": scores["npmi"],
                "diversity": scores["diversity"], "cached": scores.get("cached", False)})
    if left_to_right is not None:
        row["perplexity_left_to_right"] = scores.get("perplexity_left_to_right")
    return row


def compare_runs(runs: Sequence[RunRef], *, comparable: bool, left_to_right: int | None = None,
                 threads: int | None = None, recompute: bool = False,
                 quiet: bool = False) -> list[dict]:
    """One row per run (:func:`compare_row`), lowest perplexity first when the perplexities
    are ``comparable`` (runs without one last), in the order given otherwise. The runs not yet
    scored are counted by a progress bar on stderr (a terminal, not ``quiet``)."""
    rows = []
    to_score = sum(1 for run in runs if run.complete and (
        recompute or not scored_already(run.path, run.config, left_to_right)))
    with progress_bar(to_score, quiet, "scoring runs") as bar:
        for run in runs:
            rows.append(compare_row(run, left_to_right, threads, recompute))
            if "missing" in rows[-1]:
                log.warning("%s", rows[-1]["missing"])
            elif not rows[-1].pop("cached", False):
                bar.update(1)
    if comparable:
        rows.sort(key=lambda r: (r.get("perplexity") is None, r.get("perplexity") or 0.0))
    return rows


def _cell(value, spec: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return format(value, spec) if spec else str(value)


_FORMATS = {"train_seconds": ".1f", "perplexity": ".2f", "perplexity_left_to_right": ".2f",
            "umass": ".3f", "npmi": ".4f", "diversity": ".3f"}


def render_rows(rows: list[dict], fmt: str, *, comparable: bool,
                left_to_right: bool = False, protocol: str | None = None,
                differences: Sequence[str] = ()) -> str:
    """The rows as an aligned text table, TSV (a header, one line per run) or one JSON
    object; runs of different stores have their perplexities marked (text: ``*`` and a note;
    TSV and JSON: ``perplexity_comparable``). ``protocol``: how the perplexities were
    measured (text: a line under the table; JSON: ``protocol``); ``differences``: what differs
    between the runs' protocols (:func:`topictk.evaluation.runs.protocol_differences`; text:
    a warning line each; JSON: ``protocol_differences``)."""
    columns = [c for c in COLUMNS if left_to_right or c != "perplexity_left_to_right"]
    if fmt == "json":
        return json.dumps({"perplexity_comparable": comparable and not differences,
                           "protocol": protocol, "protocol_differences": list(differences),
                           "runs": rows}, sort_keys=True) + "\n"
    if fmt == "tsv":
        same = str(comparable and not differences).lower()
        return tsv_rows([[*columns, "perplexity_comparable"],
                         *([*(_cell(r.get(c), "") for c in columns), same] for r in rows)])
    mark = "" if comparable and not differences else "*"
    table = [[c.replace("perplexity_left_to_right", "ltr_perplexity") + (
        mark if c.startswith("perplexity") else "") for c in columns]]
    table += [[_cell(r.get(c), _FORMATS.get(c, "")) for c in columns] for r in rows]
    widths = [max(len(line[i]) for line in table) for i in range(len(columns))]
    lines = ["  ".join(cell.ljust(w) if i == 0 else cell.rjust(w)
                       for i, (cell, w) in enumerate(zip(line, widths))).rstrip()
             for line in table]
    if protocol:
        lines.append(f"perplexity: {protocol}")
    if not comparable:
        lines.append("* trained on different corpus stores: these perplexities are computed on "
                     "different held-out tokens and are not comparable")
    if differences:
        lines.append("* scored differently, so not ranked on equal terms; differing: "
                     + " | ".join(differences))
        if any(d.startswith("evaluation.theta:") for d in differences):
            lines.append("* theta is estimated differently: --fold-in fixed-point scores every "
                         "run (but deep LDA's) with one estimator")
    if any("missing" in r for r in rows):
        lines.append("- : not available (a run without its final model; see the warnings)")
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------- alignment
def js_distances(phi_a: np.ndarray, phi_b: np.ndarray) -> np.ndarray:
    """Jensen-Shannon distances (base 2, in [0, 1]) between every topic of ``phi_a`` (K_a, V)
    and every topic of ``phi_b`` (K_b, V): the square root of the JS divergence
    (docs/algorithms.md §11.7), each row normalised to sum to 1 first.

    The divergence is taken as H(M) - (H(P) + H(Q)) / 2 with M = (P + Q) / 2, so a row of
    ``phi_a`` costs one pass of x ln x over ``phi_b`` (five times faster than SciPy's
    ``jensenshannon`` on K = 200, V = 16,181, and equal to it within 1e-14)."""
    from scipy.special import entr

    a = np.asarray(phi_a, dtype=np.float64)
    b = np.asarray(phi_b, dtype=np.float64)
    a = a / a.sum(axis=1, keepdims=True)
    b = b / b.sum(axis=1, keepdims=True)
    own_b = entr(b).sum(axis=1)
    out = np.empty((a.shape[0], b.shape[0]))
    mixed = np.empty_like(b)
    for k, row in enumerate(a):
        np.add(row, b, out=mixed)
        mixed *= 0.5
        entr(mixed, out=mixed)
        divergence = mixed.sum(axis=1) - 0.5 * (entr(row).sum() + own_b)
        out[k] = np.sqrt(np.maximum(divergence, 0.0) / np.log(2.0))
    return out


def align_topics(phi_a: np.ndarray, phi_b: np.ndarray) -> list[tuple[int, int, float]]:
    """Match topics of ``phi_b`` to topics of ``phi_a`` one to one at the least total
    Jensen-Shannon distance (the Hungarian algorithm, ``scipy.optimize.linear_sum_assignment``).

    Returns
    -------
    list of (int, int, float)
        (topic of A, topic of B, distance) for min(K_a, K_b) pairs, by topic of A.
    """
    from scipy.optimize import linear_sum_assignment

    cost = js_distances(phi_a, phi_b)
    rows, cols = linear_sum_assignment(cost)
    return [(int(a), int(b), float(cost[a, b])) for a, b in zip(rows, cols)]


def _shown_topics(run: LoadedRun) -> tuple[np.ndarray, list[int]]:
    """The topics a run shows (an HDP run's live topics, largest first: :func:`listing`) and
    their numbers."""
    phi = np.asarray(run.topic_word(), dtype=np.float64)
    shown = listing(run)
    if shown is None:
        return phi, [topic_number(k) for k in range(phi.shape[0])]
    return phi[shown.rows], shown.ids


def align_runs(run_a: RunRef, run_b: RunRef, top: int = 5) -> dict:
    """The alignment of the topics of ``run_b`` to those of ``run_a`` (their final models;
    the bottom layer of deep models; an HDP run's live topics), with each pair's top words and
    the median distance."""
    loaded = []
    for run in (run_a, run_b):
        missing = run.missing()
        if missing is not None:
            raise UsageError(f"--align needs the final models; {missing}")
        loaded.append(LoadedRun(run.path))
    vocab_a, vocab_b = (list(r.store.vocab) for r in loaded)
    if vocab_a != vocab_b:
        raise UsageError(f"--align: {run_a.path} and {run_b.path} have different vocabularies, "
                         f"so their topics are distributions over different words; align runs "
                         f"of one corpus store")
    (phi_a, ids_a), (phi_b, ids_b) = (_shown_topics(r) for r in loaded)
    pairs = align_topics(phi_a, phi_b)
    words_a = top_words(phi_a, min(top, phi_a.shape[1]))
    words_b = top_words(phi_b, min(top, phi_b.shape[1]))
    return {"a": run_a.label, "b": run_b.label,
            "median_distance": float(np.median([d for _, _, d in pairs])),
            "pairs": [{"topic_a": ids_a[a], "topic_b": ids_b[b], "distance": d,
                       "words_a": [vocab_a[w] for w in words_a[a]],
                       "words_b": [vocab_b[w] for w in words_b[b]]} for a, b, d in pairs]}


def render_alignments(alignments: list[dict], fmt: str) -> str:
    """Alignments (:func:`align_runs`) as text, TSV (one line per matched pair) or JSON."""
    if fmt == "json":
        return json.dumps({"alignments": alignments}, sort_keys=True) + "\n"
    labelled = any("label_a" in p for al in alignments for p in al["pairs"])
    if fmt == "tsv":
        extra = ("label_a", "label_b") if labelled else ()
        return tsv_rows([("a", "b", "topic_a", "topic_b", "distance", "words_a", "words_b",
                          *extra),
                         *((al["a"], al["b"], p["topic_a"], p["topic_b"],
                            f"{p['distance']:.6f}", " ".join(p["words_a"]),
                            " ".join(p["words_b"]),
                            *(p.get(f"label_{side}") or "" for side in "ab" if labelled))
                           for al in alignments for p in al["pairs"])])
    lines = []
    for al in alignments:
        lines.append(f"{al['b']} aligned to {al['a']} (Jensen-Shannon distance, 0 = the same "
                     f"topic, 1 = no word in common)")
        lines.append(f"{'A':>4} {'B':>4}  distance  top words of A | of B")
        for p in al["pairs"]:
            lines.append(f"{p['topic_a']:>4} {p['topic_b']:>4}  {p['distance']:8.4f}  "
                         f"{' '.join(p['words_a'])} | {' '.join(p['words_b'])}")
            if labelled:        # the labels of the two topics, when the runs have labels
                lines.append(f"{'':>21}[{p.get('label_a') or '-'}] | "
                             f"[{p.get('label_b') or '-'}]")
        lines.append(f"median matched distance: {al['median_distance']:.4f} "
                     f"({len(al['pairs'])} pairs)")
        lines.append("")
    return "\n".join(lines)
