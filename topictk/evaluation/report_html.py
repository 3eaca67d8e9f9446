"""The report page: one self-contained HTML file. Charts and maps are SVG drawn here; a small
plain script (``report.js``, inlined with ``report.css``) draws the bar charts when a topic is
selected or lambda moves. A Content-Security-Policy forbids the page any request."""
from __future__ import annotations

import html
import math
from importlib import resources
from pathlib import PurePath

from topictk._fileio import shown
from topictk.evaluation.diagnostics_html import diagnostics_section
from topictk.evaluation.htmljson import script_json
from topictk.evaluation.report_labels import DOCS_MARKUP, labels_markup
from topictk.numbering import FIRST_TOPIC, topic_number, topic_row
from topictk.evaluation.report import RunReport, protocol_differences

COLOURS = ("#2b6cb0", "#c05621", "#2f855a", "#9b2c2c", "#6b46c1", "#b7791f", "#2c7a7b",
           "#97266d", "#4a5568", "#276749")
CSP = ("default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
       "img-src data:")
MAP_SIZE = 440
MAP_AREA = 0.18         # share of the map's area that all circles together cover
MIN_RADIUS = 2.5        # px: the smallest circle drawn, so that every topic can be clicked


def render(reports: list[RunReport], version: str, k_panel=None) -> str:
    """The whole page for ``reports``; ``k_panel``: the scores of a sweep against K
    (:func:`topictk.evaluation.kpanel.k_panel`), drawn after the curves when given."""
    style = resources.files("topictk.evaluation").joinpath("report.css").read_text("utf-8")
    script = resources.files("topictk.evaluation").joinpath("report.js").read_text("utf-8")
    script += "\n" + resources.files("topictk.evaluation").joinpath(
        "report_labels.js").read_text("utf-8")
    order = ranking(reports)
    differences = protocol_differences(reports)
    data = {"runs": [r.topics and {k: v for k, v in r.topics.items() if k != "words"}
                     for r in reports],
            # the summary table's rows: the evaluate scores, best first when ranked
            "scores": [{"run": reports[i].name, "index": i,
                        "rank": (rank + 1) if _ranked(reports) else None,
                        "perplexity": _finite(reports[i].summary.get("perplexity")),
                        "heldout_tokens": reports[i].summary.get("heldout_tokens"),
                        "estimator": reports[i].summary.get("estimator"),
                        "protocol": reports[i].protocol_text,
                        "curve": reports[i].curve_label}
                       for rank, i in enumerate(order)],
            "protocol_differences": differences,
            # an HDP run's live K, alpha_0 and gamma per evaluation (None: not an HDP run)
            "chains": [r.chain or None for r in reports],
            # topics are numbered from this wherever the page names one; data-topic
            # attributes and the arrays of "runs" hold the model's 0-based rows
            "first_topic": FIRST_TOPIC}
    payload = script_json(data, separators=(",", ":"), allow_nan=False)
    parts = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>topictk report: {html.escape(', '.join(r.name for r in reports))}</title>",
        f"<style>{style}</style></head><body>",
        (f"<header><h1>topictk report</h1><p class=\"sub\">{_subtitle(reports, version)}</p>"
        "</header>"),
        _summary_table(reports, order, differences), _curves(reports), _chains(reports),
        _k_panel_section(k_panel),
        *(_run_section(i, r) for i, r in enumerate(reports)),
        f'<script type="application/json" id="report-data">{payload}</script>',
        f"<script>{script}</script></body></html>",
    ]
    return "\n".join(parts) + "\n"


def _e(value) -> str:
    return html.escape(str(value), quote=True)


def _subtitle(reports: list[RunReport], version: str) -> str:
    stores = sorted({r.corpus for r in reports})
    runs = f"{len(reports)} run{'s' if len(reports) != 1 else ''}"
    where = (f'on the corpus store <span title="{_e(shown(stores[0]))}">'
             f"{_e(PurePath(stores[0]).name)}</span>" if len(stores) == 1
             else f"on {len(stores)} corpus stores")
    return f"{runs} {where} · topictk {_e(version)}"


# ----------------------------------------------------------------------------- numbers
def _fmt(value, digits: int = 4) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}g}" if abs(value) < 1e5 else f"{value:,.0f}"
    return f"{value:,}" if isinstance(value, int) else _e(value)    # e.g. a manifest's text


def _seconds(value) -> str:
    if value is None:
        return "–"
    if value < 60:
        return f"{value:.2f} s" if value < 10 else f"{value:.1f} s"
    return f"{value / 60:.1f} min"


def _short(value: float) -> str:
    """Tick labels: 1.5M, 250k, 12."""
    for size, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= size:
            return f"{value / size:g}{suffix}"
    return f"{value:g}"


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """About ``count`` round tick values covering [low, high]."""
    if not high > low:
        high = low + 1.0
    raw = (high - low) / max(count, 1)
    step = 10 ** math.floor(math.log10(raw))
    for factor in (1, 2, 2.5, 5, 10):
        if raw <= factor * step:
            step *= factor
            break
    first = math.floor(low / step) * step
    ticks, value = [], first
    while value <= high + step * 1e-9:
        ticks.append(round(value, 12))
        value += step
    if ticks[-1] < high:
        ticks.append(round(value, 12))
    return ticks


def _finite(value):
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None


def _ranked(reports: list[RunReport]) -> bool:
    return all(r.comparable for r in reports)


def ranking(reports: list[RunReport]) -> list[int]:
    """The order of the summary table: by held-out perplexity, lowest first (runs without
    one last), when the runs share a store; the order given otherwise."""
    indices = list(range(len(reports)))
    if not _ranked(reports):
        return indices
    value = [_finite(r.summary.get("perplexity")) for r in reports]
    return sorted(indices, key=lambda i: (value[i] is None, value[i] or 0.0))


# ----------------------------------------------------------------------------- summary
def _score_heading(reports: list[RunReport]) -> str:
    texts = sorted({r.protocol_text for r in reports if r.protocol_text})
    label = (texts[0] if len(texts) == 1 else
             "evaluate: document completion on each run's full held-out set; the settings "
             "differ, see the notes below")
    return (f'held-out perplexity<br><span class="dim protocol" title="{_e(label)}">'
            f"{_e(label)}</span>")


def _summary_table(reports: list[RunReport], order: list[int] | None = None,
                   differences: list[str] | None = None) -> str:
    head = ("run", "algorithm", "corpus", "topics", "iterations", "training time",
            _score_heading(reports), "UMass", "NPMI", "diversity", "status")
    rows = []
    for i in (order if order is not None else range(len(reports))):
        r = reports[i]
        s, c = r.summary, r.corpus_counts
        corpus = (f"<span title=\"{_e(shown(r.corpus))}\">{_e(PurePath(r.corpus).name)}</span>"
                  f"<br><span class=\"dim\">{_fmt(c.get('train_documents'))} "
                  f"docs, {_fmt(c.get('vocabulary'))} words, {_fmt(c.get('train_tokens'))} "
                  f"tokens</span>")
        ppl = _fmt(s.get("perplexity"), 5) + ("" if r.comparable else " †")
        cells = ((f'<span class="swatch" style="background:{_colour(i)}"></span>'
                 f'<a href="#run-{i}">{_e(r.name)}</a>'), _e(r.algorithm), corpus, _e(r.shape),
                 _e(r.iterations), _seconds(s.get("train_seconds")), ppl,
                 _fmt(s.get("umass")), _fmt(s.get("npmi")), _fmt(s.get("diversity")),
                 _e(s.get("status")))
        rows.append(f'<tr data-run="{i}">' + "".join(f"<td>{c}</td>" for c in cells)
                    + "</tr>")
    notes = [f'<p class="note">{_e(r.name)}: {_e(n)}</p>' for r in reports for n in r.notes]
    if len({r.protocol_text for r in reports}) > 1:
        notes += [f'<p class="note">{_e(r.name)}: held-out perplexity by {_e(r.protocol_text)}'
                  f"</p>" for r in reports]
    if differences:
        notes.append('<p class="note warning">These runs are scored differently, so their '
                     "numbers are not ranked on equal terms; differing: "
                     + "; ".join(f"<b>{_e(d)}</b>" for d in differences) + "</p>")
    if _ranked(reports) and len(reports) > 1:
        notes.append('<p class="note">Rows are ranked by held-out perplexity, lowest first, '
                     "as <code>topictk compare</code> ranks them.</p>")
    if not all(r.comparable for r in reports):
        notes.append('<p class="note">† trained on another corpus store than the first run: '
                     "its perplexity is measured on other held-out tokens and is not "
                     "comparable.</p>")
    return ('<section class="summary"><h2>Runs</h2><div class="scroll"><table><thead><tr>'
            + "".join(f"<th>{h}</th>" for h in head) + "</tr></thead><tbody>"
            + "".join(rows) + "</tbody></table></div>" + "".join(notes) + "</section>")


def _colour(i: int) -> str:
    return COLOURS[i % len(COLOURS)]


# ----------------------------------------------------------------------------- curves
def _curves(reports: list[RunReport]) -> str:
    charts = [_curve_chart(reports, "seconds", "training seconds", _short),
              _curve_chart(reports, "tokens", "training tokens seen", _short)]
    legend = "".join(
        f'<li><span class="swatch{"" if r.comparable else " dashed"}" '
        f'style="background:{_colour(i)}"></span>{_e(r.name)} ({_e(r.algorithm)}, '
        f"{_e(r.shape)}){'' if r.curve else ' – no evaluations yet'}"
        f"{_legend_score(r)}</li>"
        for i, r in enumerate(reports))
    caveat = ("" if all(r.comparable for r in reports) else
              '<p class="note">Dashed: runs on another corpus store than the first run; their '
              "perplexities are not comparable with the others.</p>")
    labels = sorted({r.curve_label for r in reports if r.curve})
    what = (f"{labels[0]}" if len(labels) == 1 else
            "in-training estimates on different test documents: "
            + "; ".join(f"{r.name}: {r.curve_label}" for r in reports if r.curve))
    explain = (f'<p class="note curve-label">Perplexity along training, an {_e(what)} with a '
               "short fold-in (metrics.jsonl's perplexity_point); not the runs' scores, which "
               "are the held-out perplexities of the table above, by "
               "<code>topictk evaluate</code> on every test document.</p>")
    return ('<section class="curves"><h2>In-training perplexity estimates</h2>'
            f'{explain}<div class="charts">{"".join(charts)}</div>'
            f'<ul class="legend">{legend}</ul>{caveat}</section>')


#: the charts of an HDP chain: (metrics key, axis label)
CHAIN_CHARTS = (("live_k", "live K (topics with tokens)"), ("alpha", "α₀ (document concentration)"),
                ("gamma", "γ (top-level concentration)"))


def _chains(reports: list[RunReport]) -> str:
    """Live K, alpha_0 and gamma against the steps, for the runs whose metrics hold them (HDP
    runs); empty when none does."""
    shown = [(i, r) for i, r in enumerate(reports) if r.chain]
    if not shown:
        return ""
    charts = "".join(_chain_chart(shown, key, label) for key, label in CHAIN_CHARTS)
    return ('<section class="chains"><h2>HDP chains</h2><p class="note">Per evaluation '
            "(metrics.jsonl's live_k, alpha, gamma): the topics holding tokens, and the "
            "concentrations alpha_0 and gamma as the chain samples them.</p>"
            f'<div class="charts">{charts}</div></section>')


def _chain_chart(shown: list[tuple[int, RunReport]], key: str, label: str) -> str:
    width, height, left, right, top, bottom = 480, 240, 64, 18, 16, 46
    points = [(p["step"], p[key]) for _, r in shown for p in r.chain]
    xt = nice_ticks(0.0, max(x for x, _ in points))
    ys = [y for _, y in points]
    yt = nice_ticks(min(0.0, min(ys)), max(ys))
    sx = _scale(xt[0], xt[-1], left, width - right)
    sy = _scale(yt[0], yt[-1], height - bottom, top)
    svg = [f'<svg class="chart chain" data-measure="{key}" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" role="img" aria-label="{_e(label)} against steps">']
    svg += _axes(xt, yt, sx, sy, left, width - right, top, height - bottom, _short,
                 lambda v: f"{v:g}")
    svg.append(f'<text class="axis-label" x="{(left + width - right) / 2}" y="{height - 8}" '
               f'text-anchor="middle">steps</text><text class="axis-label" '
               f'transform="translate(14,{(top + height - bottom) / 2}) rotate(-90)" '
               f'text-anchor="middle">{_e(label)}</text>')
    for i, r in shown:
        xy = " ".join(f"{sx(p['step']):.1f},{sy(p[key]):.1f}" for p in r.chain)
        svg.append(f'<polyline class="run-line" points="{xy}" fill="none" '
                   f'stroke="{_colour(i)}" stroke-width="2"><title>{_e(r.name)}</title>'
                   f"</polyline>")
        for p in r.chain:
            svg.append(f'<circle cx="{sx(p["step"]):.1f}" cy="{sy(p[key]):.1f}" r="2.5" '
                       f'fill="{_colour(i)}"><title>{_e(r.name)}: {key} {p[key]:g} at step '
                       f'{p["step"]}</title></circle>')
    svg.append("</svg>")
    return "".join(svg)


def _k_panel_section(panel) -> str:
    if panel is None:
        return ""
    from topictk.evaluation.kpanel_html import section

    return section(panel)


def _legend_score(r: RunReport) -> str:
    value = _finite(r.summary.get("perplexity"))
    if value is None:
        return ""
    estimator = r.summary.get("estimator")
    named = f" (theta: {estimator})" if estimator else ""
    return f" · held-out perplexity {_fmt(value, 5)}{named}"


def _curve_chart(reports: list[RunReport], key: str, label: str, ticks_fmt) -> str:
    width, height, left, right, top, bottom = 480, 300, 64, 18, 16, 46
    points = [(p[key], p["perplexity"]) for r in reports for p in r.curve]
    svg = [(f'<svg class="chart curve" data-x="{key}" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" role="img" aria-label="perplexity against {label}">')]
    if not points:
        svg.append(f'<text x="{width / 2}" y="{height / 2}" text-anchor="middle" '
                   f'class="dim">no evaluations recorded</text></svg>')
        return "".join(svg)
    xt = nice_ticks(0.0, max(x for x, _ in points))
    ys = [y for _, y in points]
    yt = nice_ticks(min(ys), max(ys))
    sx = _scale(xt[0], xt[-1], left, width - right)
    sy = _scale(yt[0], yt[-1], height - bottom, top)
    svg += _axes(xt, yt, sx, sy, left, width - right, top, height - bottom, ticks_fmt,
                 lambda v: f"{v:g}")
    svg.append(f'<text class="axis-label" x="{(left + width - right) / 2}" y="{height - 8}" '
               f'text-anchor="middle">{_e(label)}</text>')
    svg.append(f'<text class="axis-label" transform="translate(14,{(top + height - bottom) / 2})'
               f' rotate(-90)" text-anchor="middle">perplexity (in-training estimate)</text>')
    for i, r in enumerate(reports):
        if not r.curve:
            continue
        xy = " ".join(f"{sx(p[key]):.1f},{sy(p['perplexity']):.1f}" for p in r.curve)
        dash = "" if r.comparable else ' stroke-dasharray="6 4"'
        svg.append(f'<polyline class="run-line" points="{xy}" fill="none" '
                   f'stroke="{_colour(i)}" stroke-width="2"{dash}><title>{_e(r.name)}</title>'
                   f"</polyline>")
        for p in r.curve:
            svg.append(f'<circle cx="{sx(p[key]):.1f}" cy="{sy(p["perplexity"]):.1f}" r="2.5" '
                       f'fill="{_colour(i)}"><title>{_e(r.name)}: {p["perplexity"]:.2f} at '
                       f'{_short(p[key])} {_e(label)}</title></circle>')
    svg.append("</svg>")
    return "".join(svg)


def _scale(lo: float, hi: float, a: float, b: float):
    span = (hi - lo) or 1.0
    return lambda v: a + (v - lo) / span * (b - a)


def _axes(xt, yt, sx, sy, x0, x1, y0, y1, xfmt, yfmt) -> list[str]:
    out = ['<g class="grid">']
    for t in yt:
        out.append(f'<line x1="{x0}" x2="{x1}" y1="{sy(t):.1f}" y2="{sy(t):.1f}"/>')
    out.append("</g><g class=\"ticks\">")
    for t in xt:
        out.append(f'<text x="{sx(t):.1f}" y="{y1 + 16}" text-anchor="middle">{xfmt(t)}</text>')
    for t in yt:
        out.append(f'<text x="{x0 - 6}" y="{sy(t) + 4:.1f}" text-anchor="end">{yfmt(t)}</text>')
    out.append(f'</g><line class="axis" x1="{x0}" x2="{x1}" y1="{y1}" y2="{y1}"/>'
               f'<line class="axis" x1="{x0}" x2="{x0}" y1="{y0}" y2="{y1}"/>')
    return out


# ----------------------------------------------------------------------------- one run
def _run_section(i: int, r: RunReport) -> str:
    head = (f'<h2><span class="swatch" style="background:{_colour(i)}"></span>'
            f"{_e(r.name)} <span class=\"dim\">{_e(r.algorithm)}, {_e(r.shape)}</span></h2>")
    notes = "".join(f'<p class="note">{_e(n)}</p>' for n in r.notes)
    if r.topics is None:
        return f'<section class="run" id="run-{i}">{head}{notes}</section>'
    t = r.topics
    panel = ('<div class="panel">' + _topic_nav(_numbers(t)) + '<h3 class="bars-title"></h3>'
             '<label class="slider">relevance λ = <span class="lambda-value">1.00</span> '
             '<input class="lambda" type="range" min="0" max="1" step="0.01" value="1">'
             '</label><svg class="bars" width="460" height="40"></svg>'
             + ('<div class="features"></div>' if t.get("features") else "")
             + ('<div class="time"></div>' if t.get("time") else "")
             + (DOCS_MARKUP if "docs" in t else "") + "</div>")
    body = (f'<div class="topic-view"><div class="map-box"><h3>Intertopic distance map</h3>'
            f'<p class="map-sizes">circle area: share of tokens</p>{_map(t)}'
            f"{_size_legend(t['share'])}<p class=\"dim small\">Jensen–Shannon distances, "
            f"classical MDS; circle area = share of the corpus's tokens, or P(topic | term) "
            f"while a term's bar is hovered or focused. Click a topic.</p></div>{panel}</div>"
            f'<div class="npmi-box"><h3>NPMI per topic</h3>{_npmi_chart(t)}</div>'
            f"{labels_markup(t)}")
    tree = _tree(r.tree, len(t["share"])) if r.tree else ""
    return (f'<section class="run" id="run-{i}" data-run="{i}" tabindex="-1">{head}{notes}'
            f"{body}{tree}{diagnostics_section(r.diagnostics)}</section>")


def _numbers(t: dict) -> list[int]:
    """The number of each topic of a run's page, in the page's order: 1 to K, or an HDP run's
    live topics (``ids``: slot + 1, largest first)."""
    return list(t["ids"]) if "ids" in t else [topic_number(k) for k in range(len(t["share"]))]


def _topic_nav(numbers: list[int]) -> str:
    """The selected topic's number (empty: no topic) with Previous and Next; the ← and →
    keys do the same while the run's section has the focus (report.js). ``numbers``: the
    topics' numbers in the page's order (Previous and Next follow it)."""
    first, last = min(numbers), max(numbers)
    return ('<div class="topic-nav"><button type="button" class="topic-prev" '
            'aria-label="previous topic">◀ Previous</button> <label>topic '
            f'<input class="topic-number" type="number" min="{first}" max="{last}" step="1" '
            f'placeholder="none" aria-label="selected topic, {first} to {last}; empty: none">'
            f'</label> <span class="dim small">of {first}–{last}</span> '
            '<button type="button" class="topic-next" aria-label="next topic">Next ▶</button>'
            '<span class="topic-number-error note warning" hidden></span></div>')


def _circle_scale() -> float:
    """Circle radius squared per unit of share on the map: all circles together (shares
    summing to 1) cover MAP_AREA of the map."""
    return MAP_AREA * MAP_SIZE * MAP_SIZE / math.pi


def _radius(share: float) -> float:
    """A circle's radius on the map, at least 2.5 px so that every topic can be clicked."""
    return max(math.sqrt(_circle_scale() * share), MIN_RADIUS)


def _legend_shares(shares: list[float]) -> list[float]:
    """Two or three round shares (1-2-5 steps) for the size legend: the largest not above the
    largest topic's share, and about a quarter and a sixteenth of it while their circles stay
    larger than the smallest a topic is drawn with."""
    steps = [m * 10.0 ** e for e in range(0, -5, -1) for m in (5, 2, 1)]
    first = next((v for v in steps if v <= max(shares) * (1 + 1e-9)), steps[-1])
    values = [first]
    for target in (first / 4, first / 16):
        value = next(v for v in steps if v <= target * (1 + 1e-9))
        # the labels stand at the circles' tops: keep them 12 px apart
        if (_radius(value) > 2 * MIN_RADIUS
                and 2 * (_radius(values[-1]) - _radius(value)) >= 12):
            values.append(value)
    return values


def _size_legend(shares: list[float]) -> str:
    """Nested reference circles, drawn to the map's scale, with the share each stands for (a
    probability while the map shows P(topic | term): circle area means the same)."""
    values = _legend_shares(shares)
    big = _radius(values[0])
    height, base, cx = 2 * big + 12, 2 * big + 6, big + 6
    parts = [f'<svg class="size-legend" width="{MAP_SIZE}" height="{height:.0f}" '
             f'viewBox="0 0 {MAP_SIZE} {height:.0f}" role="img" aria-label="circle sizes">']
    for v in values:
        r = _radius(v)
        label = f"{100 * v:g}%"
        parts.append(f'<circle class="legend-circle" data-share="{v:g}" cx="{cx:.1f}" '
                     f'cy="{base - r:.1f}" r="{r:.1f}"/><line class="legend-tick" '
                     f'x1="{cx:.1f}" x2="{2 * big + 16:.1f}" y1="{base - 2 * r:.1f}" '
                     f'y2="{base - 2 * r:.1f}"/><text class="small" x="{2 * big + 20:.1f}" '
                     f'y="{base - 2 * r + 4:.1f}">{label}</text>')
    parts.append(f'<text class="dim small" x="{2 * big + 64:.1f}" y="{base - 2:.1f}">'
                 "circle areas to scale</text></svg>")
    return "".join(parts)


def _map(t: dict) -> str:
    size, pad = MAP_SIZE, 34
    xs, ys, shares = t["x"], t["y"], t["share"]
    K, numbers = len(shares), _numbers(t)
    radius = [math.sqrt(_circle_scale() * s) for s in shares]
    span = max(max(xs) - min(xs), max(ys) - min(ys)) or 1.0
    scale = (size - 2 * pad) / span
    cx = [(size - scale * (max(xs) + min(xs))) / 2 + scale * x for x in xs]
    cy = [(size + scale * (max(ys) + min(ys))) / 2 - scale * y for y in ys]
    ox, oy = (size - scale * (max(xs) + min(xs))) / 2, (size + scale * (max(ys) + min(ys))) / 2
    svg = [(f'<svg class="map" width="{size}" height="{size}" viewBox="0 0 {size} {size}" '
           f'role="img" aria-label="intertopic distance map" '
           f'data-scale="{_circle_scale():.6g}" data-min-radius="{MIN_RADIUS}">'),
           (f'<line class="cross" x1="{ox:.1f}" x2="{ox:.1f}" y1="0" y2="{size}"/>'
           f'<line class="cross" x1="0" x2="{size}" y1="{oy:.1f}" y2="{oy:.1f}"/>'
           f'<text class="dim small" x="{size - 4}" y="{size - 6}" text-anchor="end">PC1 →'
           f'</text><text class="dim small" x="6" y="14">↑ PC2</text>')]
    order = sorted(range(K), key=lambda k: -shares[k])       # small circles drawn on top
    for k in order:
        svg.append(f'<circle class="topic" data-topic="{k}" tabindex="0" cx="{cx[k]:.1f}" '
                   f'cy="{cy[k]:.1f}" r="{_radius(shares[k]):.1f}"><title>topic '
                   f'{numbers[k]}: {100 * shares[k]:.1f}% of tokens, NPMI '
                   f'{t["npmi"][k]:.3f}</title></circle>')
    for k, (x, y) in _label_positions(order, cx, cy, radius, numbers):
        svg.append(f'<text class="topic-label" data-topic-label="{k}" x="{x:.1f}" '
                   f'y="{y + 4:.1f}" text-anchor="middle">{numbers[k]}</text>')
    svg.append("</svg>")
    return "".join(svg)


def _label_positions(order: list[int], cx, cy, radius,
                     numbers: list[int]) -> list[tuple[int, tuple]]:
    """Topic numbers (from 1) at the circle centres of rows ``order``, largest topics first,
    leaving out a label that would overlap one already placed (the circle's tooltip still
    names it)."""
    placed, boxes = [], []
    for k in order:
        w, h = 7 * len(str(numbers[k])) + 2, 12
        box = (cx[k] - w / 2, cy[k] - h / 2, cx[k] + w / 2, cy[k] + h / 2)
        if radius[k] < 5 or any(box[0] < b[2] and b[0] < box[2] and box[1] < b[3]
                                and b[1] < box[3] for b in boxes):
            continue
        boxes.append(box)
        placed.append((k, (cx[k], cy[k])))
    return placed


def _npmi_chart(t: dict) -> str:
    values, numbers = t["npmi"], _numbers(t)
    K = len(values)
    width, height, left, top, bottom = 900, 170, 44, 10, 30
    lo, hi = min(0.0, min(values)), max(0.0, max(values))
    yt = nice_ticks(lo, hi, 4)
    sy = _scale(yt[0], yt[-1], height - bottom, top)
    step = (width - left - 8) / K
    svg = [(f'<svg class="chart npmi" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" role="img" aria-label="NPMI per topic">')]
    for tick in yt:
        svg.append(f'<line class="gridline" x1="{left}" x2="{width - 8}" y1="{sy(tick):.1f}" '
                   f'y2="{sy(tick):.1f}"/><text class="tick" x="{left - 5}" '
                   f'y="{sy(tick) + 4:.1f}" text-anchor="end">{tick:g}</text>')
    zero = sy(0.0)
    label_every = max(1, math.ceil(K / 25))
    for k, v in enumerate(values):
        x = left + k * step
        y0, y1 = sorted((zero, sy(v)))
        svg.append(f'<rect class="npmi-bar" data-topic="{k}" x="{x + 0.5:.1f}" y="{y0:.1f}" '
                   f'width="{max(step - 1, 1):.1f}" height="{max(y1 - y0, 0.5):.1f}">'
                   f"<title>topic {numbers[k]}: NPMI {v:.3f}</title></rect>")
        if k % label_every == 0:
            svg.append(f'<text class="tick" x="{x + step / 2:.1f}" y="{height - bottom + 14}" '
                       f'text-anchor="middle">{numbers[k]}</text>')
    svg.append(f'<line class="axis" x1="{left}" x2="{width - 8}" y1="{zero:.1f}" '
               f'y2="{zero:.1f}"/><text class="axis-label" x="{(left + width) / 2}" '
               f'y="{height - 2}" text-anchor="middle">topic</text></svg>')
    return "".join(svg)


def _tree(tree: list[dict], n_topics: int) -> str:
    """The deep model's hierarchy; nodes carry topic numbers (from 1), a layer-1 node also the
    row (``data-topic``) of its topic among the ``n_topics`` of the map."""
    def node(n: dict) -> str:
        attr = (f' data-topic="{topic_row(n["topic"], n_topics)}"' if n["layer"] == 1
                else "")
        label = (f'<span class="node"{attr}>L{n["layer"]} #{n["topic"]} '
                 f'<span class="dim">({n["weight"]:.3f})</span> {_e(" ".join(n["words"]))}'
                 "</span>")
        kids = "".join(f"<li>{node(c)}</li>" for c in n["children"])
        return label + (f"<ul>{kids}</ul>" if kids else "")

    roots = "".join(f'<details{" open" if i < 3 else ""}><summary>{node_head}</summary>'
                    f"{body}</details>"
                    for i, (node_head, body) in enumerate(_split(node(n)) for n in tree))
    return ('<div class="tree"><h3>Topic tree</h3><p class="dim small">Each topic of the top '
            "layer (largest share of the prior first) with its strongest children; weights: a "
            "root's share, a child's weight φ. Click a layer-1 topic to select it."
            f"</p>{roots}</div>")


def _split(markup: str) -> tuple[str, str]:
    """A node's label and its list of children."""
    cut = markup.find("<ul>")
    return (markup, "") if cut < 0 else (markup[:cut], markup[cut:])
