"""Tokenisation: lower-case runs of Unicode letters of a minimum length."""
from __future__ import annotations

import re

_LETTERS = re.compile(r"[^\W\d_]+")


def tokenize(text: str, min_length: int = 3) -> list[str]:
    """Lower-cased maximal runs of Unicode letters with at least ``min_length`` characters."""
    return [t for t in _LETTERS.findall(text.lower()) if len(t) >= min_length]
