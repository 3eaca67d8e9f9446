"""``topictk plot --k-panel``: the Scores against K panel of the report page as a figure of
small multiples (matplotlib, the ``plot`` extra): per measure the mean over the seeds as a
line, the min–max over the seeds as a band, every run as a point; the caption says what the
numbers are."""
from __future__ import annotations

import io
import textwrap

from topictk.evaluation.kpanel import BETTER, TITLES, KPanel, panel_line
from topictk.evaluation.kpanel_html import log_axis
from topictk.evaluation.plot import _NO_DATE, require_matplotlib

COLUMNS = 3


def draw_k_panel(panel: KPanel, fmt: str) -> bytes:
    """The figure of ``panel`` as ``fmt`` bytes (png, svg or pdf), without a date in the file
    (the same runs give the same bytes)."""
    Figure = require_matplotlib()
    measures = panel.measures
    rows = -(-len(measures) // COLUMNS)
    caption = textwrap.fill(panel_line(panel), 190)
    warn = "\n".join(textwrap.fill(w, 190) for w in panel.warnings)
    extra = (caption.count("\n") + 1 + (warn.count("\n") + 1 if warn else 0)) * 0.16
    fig = Figure(figsize=(4.0 * COLUMNS, 3.0 * rows + extra + 0.4), layout="constrained")
    axes = fig.subplots(rows, COLUMNS, squeeze=False).ravel()
    colours = [f"C{i}" for i in range(10)]
    logx = log_axis(panel.x_values)
    for ax, measure in zip(axes, measures):
        summary = panel.summary(measure)
        for i, name in enumerate(panel.series):
            colour = colours[i % len(colours)]
            groups = [g for g in summary if g["series"] == name]
            if not groups:
                continue
            xs = [g["x"] for g in groups]
            ax.fill_between(xs, [g["low"] for g in groups], [g["high"] for g in groups],
                            color=colour, alpha=0.2, linewidth=0)
            ax.plot(xs, [g["mean"] for g in groups], color=colour, linewidth=1.8,
                    label=name or None)
            points = [(x, v) for s, x, v, _ in panel.points(measure) if s == name]
            ax.plot([p[0] for p in points], [p[1] for p in points], linestyle="none",
                    marker="o", markersize=3, color=colour)
        better = BETTER[measure]
        ax.set_title(f"{TITLES[measure]}\n{better} is better {'↓' if better == 'lower' else '↑'}"
                     f" · {panel.band_text(measure)}", fontsize="small")
        if logx:
            ax.set_xscale("log")
        ax.set_xticks(panel.x_values, [f"{x:g}" for x in panel.x_values])
        ax.minorticks_off()
        ax.set_xlabel(panel.x_label, fontsize="small")
        ax.tick_params(labelsize="x-small")
        ax.grid(True, alpha=0.3)
        if len(panel.series) > 1 and measure == measures[0]:
            ax.legend(fontsize="x-small")
    for ax in axes[len(measures):]:
        ax.set_axis_off()
    fig.suptitle("Scores against " + panel.x_label + ": line = mean over the seeds, band = "
                 "min–max over the seeds, points = runs", fontsize="medium")
    fig.text(0.01, 0.0, caption + ("\n" + warn if warn else ""), fontsize="x-small",
             va="bottom", ha="left", color="#333333")
    fig.get_layout_engine().set(rect=(0, extra / fig.get_figheight(), 1,
                                      1 - extra / fig.get_figheight()))
    buffer = io.BytesIO()
    fig.savefig(buffer, format=fmt, metadata=_NO_DATE[fmt])
    return buffer.getvalue()
