"""topictk: topic models from the command line.

Prepare a corpus once (``topictk prepare``), train any inference algorithm on it from a YAML
experiment (``topictk train``), and score every run on the same held-out tokens
(``topictk evaluate``).
"""
from __future__ import annotations

__version__ = "0.1.0"
