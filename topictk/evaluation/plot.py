"""``topictk plot``: the metrics a run records along training, several runs on one figure.

matplotlib comes with the ``plot`` extra (``pip install "topictk[plot]"``); it is imported
only when a figure is drawn.
"""
from __future__ import annotations

import io
import logging
from collections.abc import Sequence
from pathlib import Path

from topictk.errors import UsageError
from topictk.evaluation.runs import RunRef

log = logging.getLogger("topictk")

# --x: the metrics.jsonl key of each choice, and the axis label
X_AXES = {"seconds": ("train_seconds", "training seconds (evaluation excluded)"),
          "tokens": ("tokens_seen", "training tokens seen"),
          "step": ("step", "step (sweep or mini-batch update)")}

# metric names shown to the user -> metrics.jsonl keys; other recorded keys keep their names
ALIASES = {"perplexity": "perplexity_point",
           "perplexity-train-heldout": "perplexity_train_heldout_point"}
_NOT_METRICS = {"step", "tokens_seen", "documents_seen", "train_seconds", "eval_seconds"}

FORMATS = {".png": "png", ".svg": "svg", ".pdf": "pdf"}
_NO_DATE = {"png": {}, "svg": {"Date": None}, "pdf": {"CreationDate": None}}


def recorded_metrics(runs: Sequence[RunRef]) -> list[str]:
    """The metrics the runs' ``metrics.jsonl`` record (numbers only), by their names for
    ``--metric``."""
    keys = set()
    for run in runs:
        for record in run.metrics():
            keys.update(k for k, v in record.items() if k not in _NOT_METRICS
                        and isinstance(v, (int, float)) and not isinstance(v, bool))
    names = {key: alias for alias, key in ALIASES.items()}
    return sorted(names.get(k, k) for k in keys)


def figure_format(out: Path) -> str:
    """The image format of ``out`` by its suffix."""
    fmt = FORMATS.get(Path(out).suffix.lower())
    if fmt is None:
        raise UsageError(f"{out}: --out must end in {', '.join(FORMATS)} (the image format)")
    return fmt


def require_matplotlib():
    """matplotlib's Figure class, or a :class:`UsageError` naming the extra that brings it."""
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise UsageError("topictk plot needs matplotlib, which comes with the plot extra: "
                         "pip install \"topictk[plot]\"") from None
    return Figure


def curves(runs: Sequence[RunRef], x: str, metric: str) -> list[tuple[str, list, list]]:
    """(label, x values, metric values) of every run that records ``metric``."""
    key, x_key = ALIASES.get(metric, metric), X_AXES[x][0]
    recorded = recorded_metrics(runs)
    if metric not in recorded:
        raise UsageError(f"--metric {metric}: not recorded by these runs; they record "
                         f"{', '.join(recorded) or 'no metric yet (no evaluation so far)'}")
    out = []
    for run in runs:
        points = [(r[x_key], r[key]) for r in run.metrics()
                  if r.get(key) is not None and r.get(x_key) is not None]
        if not points:
            log.warning("%s: records no %s; left out of the figure", run.path, metric)
            continue
        out.append((run.label, [p[0] for p in points], [p[1] for p in points]))
    return out


def curve_label(runs: Sequence[RunRef]) -> str | None:
    """What the runs' perplexity curves estimate: "in-training estimate on 565 of 7,532 test
    documents", or None when the runs' curves are on different test documents (or stores)."""
    from topictk.evaluation.scores import store_counts

    labels = set()
    for run in runs:
        total = store_counts(run.config.corpus).get("test_documents")
        docs = run.config.evaluation.curve_docs
        if not total:
            labels.add("in-training estimate")
            continue
        shown = total if docs is None else min(int(docs), int(total))
        labels.add(f"in-training estimate on {shown:,} of {int(total):,} test documents")
    return labels.pop() if len(labels) == 1 else None


def held_out_scores(runs: Sequence[RunRef], quiet: bool = False) -> dict[str, float]:
    """Each finished run's evaluate perplexity (its score, from the scores cache or computed
    and cached), by run label."""
    from topictk.evaluation.scores import progress_bar, run_scores, scored_already

    done = [run for run in runs if run.complete]
    out = {}
    with progress_bar(sum(not scored_already(r.path, r.config) for r in done), quiet,
                      "scoring runs") as bar:
        for run in done:
            scores = run_scores(run.path, run.config)
            value = scores.get("perplexity")
            value = value if value is not None else scores.get("perplexity_train_heldout")
            if value is not None:
                out[run.label] = float(value)
            if not scores.get("cached"):
                bar.update(1)
    return out


def draw(lines: list[tuple[str, list, list]], x: str, metric: str, fmt: str, *,
         comparable: bool = True, ylabel: str | None = None,
         scores: dict[str, float] | None = None, warning: str | None = None) -> bytes:
    """The figure of ``lines`` (:func:`curves`) as ``fmt`` bytes: one line per run, a legend;
    a logarithmic x axis for tokens. ``ylabel``: the axis' label (default: ``metric``);
    ``scores``: each run's held-out score, a star at the end of its line; ``warning``: a line
    above the axes saying what differs between the runs."""
    Figure = require_matplotlib()
    fig = Figure(figsize=(6.4, 4.6 if warning else 4.2), layout="constrained")
    ax = fig.add_subplot()
    scored = False
    for label, xs, ys in lines:
        (line,) = ax.plot(xs, ys, marker="o", markersize=3, linewidth=1.4, label=label)
        if scores and label in scores and xs:
            ax.plot([xs[-1]], [scores[label]], marker="*", markersize=11, linestyle="none",
                    color=line.get_color(), markeredgecolor="black", markeredgewidth=0.5)
            ax.annotate(f"{scores[label]:.5g}", (xs[-1], scores[label]), fontsize="x-small",
                        xytext=(5, -3), textcoords="offset points")
            scored = True
    if scored:
        ax.plot([], [], marker="*", markersize=9, linestyle="none", color="grey",
                markeredgecolor="black", markeredgewidth=0.5,
                label="held-out perplexity (evaluate, all test documents)")
    ax.set_xlabel(X_AXES[x][1])
    ax.set_ylabel((ylabel or metric)
                  + ("" if comparable else " (different stores: not comparable)"),
                  fontsize="small" if ylabel else None)
    if warning:
        fig.suptitle(warning, fontsize="x-small", color="#9b2c2c", wrap=True)
    if x == "tokens" and all(v > 0 for _, xs, _ in lines for v in xs):
        ax.set_xscale("log")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small")
    buffer = io.BytesIO()
    # no date in the file: the same runs give the same bytes
    fig.savefig(buffer, format=fmt, metadata=_NO_DATE[fmt])
    return buffer.getvalue()
