"""JSON text that may be placed verbatim inside an HTML ``<script>`` element.

The HTML parser reads a script element's content before any JSON parser does: ``</script``
ends it early, and ``<!--`` followed by ``<script`` makes it swallow the rest of the page
(so the page's code never runs). Words of a vocabulary can hold any of these. Escaping
``<``, ``>`` and ``&`` as ``\\u003c``, ``\\u003e``, ``\\u0026`` leaves the parser nothing to
find, whatever state it is in; U+2028 and U+2029 are escaped too, as JavaScript before
ES2019 ends a string at them. The result is still JSON and parses to the same value.
"""
from __future__ import annotations

import json

_ESCAPES = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026",
                          "\u2028": "\\u2028", "\u2029": "\\u2029"})


def script_json(data, **dumps) -> str:
    """``json.dumps(data, **dumps)`` with the characters an HTML parser or an old JavaScript
    engine would act on escaped (they occur only inside strings, so escaping them keeps the
    value)."""
    return json.dumps(data, **dumps).translate(_ESCAPES)
