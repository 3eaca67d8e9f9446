"""The report's per-topic diagnostics table of one run (:mod:`topictk.evaluation.diagnostics`):
one row per topic in the model's order, flagged topics marked, and a legend line saying what
every column is and which rules flag a topic."""
from __future__ import annotations

import html
import math

from topictk.evaluation import diagnostics as dg

# column, heading, format
_COLUMNS = (("tokens", "tokens", ",.0f"), ("doc_entropy", "doc entropy", ".2f"),
            ("eff_words", "eff. words", ".0f"), ("corpus_kl", "corpus KL", ".2f"),
            ("top_doc_share", f"top-{dg.TOP_DOCS} docs", ".0%"),
            ("word_length", "word length", ".1f"), ("nonwords", "non-words", "d"))


def _e(value) -> str:
    return html.escape(str(value), quote=True)


def legend() -> str:
    """What the columns are and when a topic is flagged, in one line."""
    return (f"tokens: training tokens assigned to the topic; doc entropy: entropy of "
            f"p(d | topic) over the training documents, nats; eff. words: 1 / Σ φ²; "
            f"corpus KL: KL(φ ‖ corpus word frequencies), nats; top-{dg.TOP_DOCS} docs: share "
            f"of the topic's tokens in its {dg.TOP_DOCS} largest documents; word length: mean "
            f"characters of the top {dg.TOP_WORDS} words; non-words: how many of them have a "
            f"digit, no vowel or {dg.LONG_WORD}+ characters. Flagged ⚑ few documents: "
            f"top-{dg.TOP_DOCS} docs ≥ {dg.FEW_DOCS_SHARE:.0%} and e^(doc entropy) ≤ "
            f"{dg.FEW_DOCS_EFFECTIVE:g}; non-words: non-words ≥ {dg.NONWORDS_MIN} or word "
            f"length ≥ {dg.LONG_WORD_MEAN:g}.")


def diagnostics_section(rows: list[dict] | None) -> str:
    """The run's diagnostics as an HTML block (empty without diagnostics)."""
    if not rows:
        return ""
    flagged = [str(r["topic"]) for r in rows if r["flags"]]
    head = "".join(f"<th>{_e(h)}</th>" for _, h, _ in _COLUMNS)
    body = []
    for j, r in enumerate(rows):     # row j of the page's topics (its data-topic)
        cells = "".join(f'<td class="num">{_e(_number(r[c], f))}</td>' for c, _, f in _COLUMNS)
        flags = ", ".join(r["flags"])
        mark = f'<td class="flags">⚑ {_e(flags)}</td>' if flags else "<td></td>"
        row_class = ' class="flagged"' if flags else ""
        body.append(f'<tr{row_class} data-topic="{j}">'
                    f'<td class="num">{r["topic"]}</td>{cells}{mark}'
                    f'<td class="words">{_e(" ".join(r["words"]))}</td></tr>')
    return (f'<details class="diagnostics"><summary><h3>Topic diagnostics</h3> '
            f'<span class="dim">{len(flagged)} of {len(rows)} topics flagged'
            f'{": " + ", ".join(flagged) if flagged else ""}</span></summary>'
            f'<p class="dim small legend">{_e(legend())}</p>'
            f'<table class="diagnostics"><thead><tr><th>topic</th>{head}<th>flags</th>'
            f'<th>top words</th></tr></thead><tbody>{"".join(body)}</tbody></table></details>')


def _number(value, spec: str) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "–"
    return format(value, spec)
