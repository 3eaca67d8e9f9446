"""An offline pyLDAvis page of a run: the LDAvis data of ``topictk export --what ldavis`` drawn
by pyLDAvis's own scripts, with d3, LDAvis's JavaScript and its style sheet copied into the
page from the installed pyLDAvis package, so that it opens from the file system with no
network (pyLDAvis's ``save_html`` links them from a CDN).

pyLDAvis is not a dependency of topictk: it is looked for only when a page is asked for, and
its package files are read, never its Python code run. The page numbers topics as the data
does, from 1 in the model's order (``topic.order`` is the identity), as ``topictk topics`` and
the report number them.
"""
from __future__ import annotations

import html
from pathlib import Path

from topictk.evaluation.htmljson import script_json

INSTALL = "pip install pyLDAvis"


class PyLDAvisMissing(ImportError):
    """pyLDAvis (or one of its script files) is not installed here."""


def pyldavis_assets() -> dict[str, str]:
    """The text of pyLDAvis's bundled d3, LDAvis script and style sheet: the files its own
    pages use for its installed version (``pyLDAvis.urls``'s ``*_LOCAL`` paths).

    Raises
    ------
    PyLDAvisMissing
        When pyLDAvis cannot be imported or lacks one of the files.
    """
    try:
        from pyLDAvis import urls
    except ImportError as exc:
        raise PyLDAvisMissing(f"pyLDAvis is not installed ({exc})") from None
    files = {"d3": urls.D3_LOCAL, "ldavis": urls.LDAVIS_LOCAL, "css": urls.LDAVIS_CSS_LOCAL}
    try:
        return {name: Path(path).read_text(encoding="utf-8") for name, path in files.items()}
    except OSError as exc:
        raise PyLDAvisMissing(f"pyLDAvis's file {exc.filename} cannot be read") from None


def _inline(text: str, element: str) -> str:
    """``text`` safe inside a ``<script>`` or ``<style>`` element: an end tag of the element
    in it (a string of a script, a comment) would close the element early; ``<\\/`` reads the
    same in JavaScript strings, regular expressions and comments."""
    return text.replace(f"</{element}", f"<\\/{element}").replace(
        f"</{element.upper()}", f"<\\/{element.upper()}")


def ldavis_page(data: dict, title: str, assets: dict[str, str] | None = None) -> str:
    """The whole page: a heading ``title`` and LDAvis drawing ``data``
    (:func:`topictk.evaluation.ldavis.ldavis_data`) into ``#ldavis``.

    Parameters
    ----------
    data : dict
        The LDAvis data.
    title : str
        What the page shows (the run, its algorithm and K); escaped here.
    assets : dict, optional
        :func:`pyldavis_assets` (read when None).
    """
    assets = pyldavis_assets() if assets is None else assets
    heading = html.escape(title)
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{heading}</title>
<style>
{_inline(assets["css"], "style")}
body {{ font-family: sans-serif; margin: 1em; }}
p.note {{ color: #555; font-size: 13px; margin: 0.2em 0 1em; }}
</style>
</head>
<body>
<h1 style="font-size: 18px; margin: 0;">{heading}</h1>
<p class="note">Topics numbered from 1 in the model's order, as <code>topictk topics</code> and
the report number them; circle areas are the topics' shares of the training tokens. Drawn by
pyLDAvis's LDAvis script; this page loads nothing from the network.</p>
<div id="ldavis" style="background-color: white;"></div>
<script>
{_inline(assets["d3"], "script")}
</script>
<script>
{_inline(assets["ldavis"], "script")}
</script>
<script type="application/json" id="ldavis-data">{script_json(data)}</script>
<script>
new LDAvis("#ldavis", JSON.parse(document.getElementById("ldavis-data").textContent));
</script>
</body>
</html>
"""


__all__ = ["INSTALL", "PyLDAvisMissing", "ldavis_page", "pyldavis_assets"]
