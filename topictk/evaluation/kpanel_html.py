"""The "Scores against K" section of the report page: one small SVG chart per measure of a
:class:`~topictk.evaluation.kpanel.KPanel`, drawn here like the page's other charts (no
script): the mean over the seeds as a line, the min–max over the seeds as a shaded band, and
every run as a point."""
from __future__ import annotations

import math

from topictk.evaluation.htmljson import script_json
from topictk.evaluation.kpanel import BETTER, TITLES, KPanel, panel_data, panel_line
from topictk.evaluation.report_html import _axes, _colour, _e, _fmt, _scale, nice_ticks

WIDTH, HEIGHT = 300, 230
LEFT, RIGHT, TOP, BOTTOM = 58, 14, 42, 40


def log_axis(xs: list[float]) -> bool:
    """A logarithmic x axis when the values are positive and span a factor of 4 or more (K
    from 10 to 200 is spread evenly, not crowded at the left)."""
    return min(xs) > 0 and max(xs) / min(xs) >= 4


def section(panel: KPanel) -> str:
    """The page's section for ``panel``, with its numbers as JSON (``k-panel-data``) for
    scripts that read the page."""
    charts = "".join(_chart(panel, m) for m in panel.measures)
    warnings = "".join(f'<p class="note warning">{_e(w)}</p>' for w in panel.warnings)
    notes = "".join(f'<p class="note">{_e(n)}</p>' for n in panel.notes)
    legend = ""
    if len(panel.series) > 1 or panel.series[0]:
        legend = '<ul class="legend">' + "".join(
            f'<li><span class="swatch" style="background:{_colour(i)}"></span>{_e(s)}</li>'
            for i, s in enumerate(panel.series)) + "</ul>"
    x_what = "K, the number of topics" if panel.x_key == "model.topics" else panel.x_key
    return ('<section class="kpanel" id="k-panel"><h2>Scores against K</h2>'
            f'<p class="note kpanel-protocol">{_e(panel_line(panel))}</p>{warnings}'
            f'<p class="dim small">x: {_e(x_what)} ({len(panel.x_values)} values, '
            f"{len(panel.runs)} runs). Line: the mean over the seeds at each value; shaded "
            "band: their minimum to maximum; points: the runs (stability: the pairs of seeds)."
            f' Hover a point for its run.</p><div class="charts">{charts}</div>{legend}{notes}'
            '<script type="application/json" id="k-panel-data">'
            f'{script_json(panel_data(panel), separators=(",", ":"), allow_nan=False)}'
            "</script></section>")


def _chart(panel: KPanel, measure: str) -> str:
    points = panel.points(measure)
    summary = panel.summary(measure)
    xs = panel.x_values
    logx = log_axis(xs)
    fx = (lambda v: math.log10(v)) if logx else float
    lo, hi = fx(xs[0]), fx(xs[-1])
    pad = (hi - lo) * 0.06 or 0.5
    sx0 = _scale(lo - pad, hi + pad, LEFT, WIDTH - RIGHT)
    sx = lambda v: sx0(fx(v))      # noqa: E731
    values = [p[2] for p in points]
    yt = nice_ticks(min(values), max(values), 4)
    sy = _scale(yt[0], yt[-1], HEIGHT - BOTTOM, TOP)
    better = BETTER[measure]
    title = TITLES[measure]
    band = panel.band_text(measure)
    svg = [f'<svg class="chart kpanel-chart" data-measure="{measure}" width="{WIDTH}" '
           f'height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
           f'aria-label="{_e(title)} against {_e(panel.x_label)}">'
           f'<text class="axis-label chart-title" x="4" y="14" font-weight="bold">'
           f"{_e(title)}</text>"
           f'<text class="axis-label direction" x="4" y="29" style="font-size:11px">'
           f'{better} is better {"↓" if better == "lower" else "↑"} · {_e(band)}</text>']
    svg += _axes(xs, yt, sx, sy, LEFT, WIDTH - RIGHT, TOP, HEIGHT - BOTTOM, _fmt_x,
                 _fmt_y)
    svg.append(f'<text class="axis-label" x="{(LEFT + WIDTH - RIGHT) / 2}" y="{HEIGHT - 6}" '
               f'text-anchor="middle">{_e(panel.x_label)}{" (log scale)" if logx else ""}'
               "</text>")
    for i, name in enumerate(panel.series):
        colour = _colour(i)
        rows = [g for g in summary if g["series"] == name]
        if not rows:
            continue
        upper = [f"{sx(g['x']):.1f},{sy(g['high']):.1f}" for g in rows]
        lower = [f"{sx(g['x']):.1f},{sy(g['low']):.1f}" for g in reversed(rows)]
        svg.append(f'<polygon class="band" points="{" ".join(upper + lower)}" '
                   f'fill="{colour}" fill-opacity="0.18" stroke="{colour}" '
                   f'stroke-opacity="0.35" stroke-width="1"><title>{_e(band)}</title>'
                   "</polygon>")
        line = " ".join(f"{sx(g['x']):.1f},{sy(g['mean']):.1f}" for g in rows)
        svg.append(f'<polyline class="mean-line" points="{line}" fill="none" '
                   f'stroke="{colour}" stroke-width="2"><title>mean over the seeds</title>'
                   "</polyline>")
        for series, x, value, what in points:
            if series != name:
                continue
            svg.append(f'<circle class="run-point" data-x="{x}" cx="{sx(x):.1f}" '
                       f'cy="{sy(value):.1f}" r="2.6" fill="{colour}"><title>{_e(what)}: '
                       f"{_e(title)} {_fmt(float(value), 5)} at {_e(panel.x_label)} = "
                       f"{_fmt_x(x)}</title></circle>")
    svg.append("</svg>")
    caption = panel.describe.get(measure, "")
    return (f'<figure class="kpanel-figure" style="margin:0;width:{WIDTH}px">{"".join(svg)}'
            f'<figcaption class="dim small">{_e(caption)}</figcaption></figure>')


def _fmt_y(value) -> str:
    """Tick labels of a value axis: 3,200 rather than 3.2e+03."""
    value = float(value)
    return f"{value:,.0f}" if abs(value) >= 1000 else _fmt(value, 3)


def _fmt_x(value) -> str:
    value = float(value)
    return f"{int(value)}" if value.is_integer() else f"{value:g}"
