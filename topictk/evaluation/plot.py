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


def draw(lines: list[tuple[str, list, list]], x: str, metric: str, fmt: str, *,
         comparable: bool = True) -> bytes:
    """The figure of ``lines`` (:func:`curves`) as ``fmt`` bytes: one line per run, a legend;
    a logarithmic x axis for tokens."""
    Figure = require_matplotlib()
    fig = Figure(figsize=(6.4, 4.2), layout="constrained")
    ax = fig.add_subplot()
    for label, xs, ys in lines:
        ax.plot(xs, ys, marker="o", markersize=3, linewidth=1.4, label=label)
    ax.set_xlabel(X_AXES[x][1])
    ax.set_ylabel(metric + ("" if comparable else " (different stores: not comparable)"))
    if x == "tokens" and all(v > 0 for _, xs, _ in lines for v in xs):
        ax.set_xscale("log")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small")
    buffer = io.BytesIO()
    # no date in the file: the same runs give the same bytes
    fig.savefig(buffer, format=fmt, metadata=_NO_DATE[fmt])
    return buffer.getvalue()
