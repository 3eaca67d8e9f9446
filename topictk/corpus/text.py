"""Tokenisation: lower-case runs of Unicode letters (with their combining marks) of a minimum
length, after NFC normalisation; or the matches of a researcher's pattern."""
from __future__ import annotations

import functools
import re
import unicodedata

_LETTERS = re.compile(r"[^\W\d_]+")


def _mark_class(codes) -> str:
    """A regular-expression character class of the combining marks (Unicode M*) in ``codes``."""
    ranges: list[list[int]] = []
    for code in codes:
        if unicodedata.category(chr(code))[0] == "M":
            if ranges and ranges[-1][1] == code - 1:
                ranges[-1][1] = code
            else:
                ranges.append([code, code])
    return "[" + "".join(re.escape(chr(a)) + ("" if a == b else "-" + re.escape(chr(b)))
                         for a, b in ranges) + "]"


@functools.lru_cache(maxsize=1)
def _patterns() -> tuple[re.Pattern, re.Pattern, re.Pattern]:
    """Combining marks of the Basic Multilingual Plane, those above it, and a word: a letter
    followed by letters (L*) and marks (M*).

    Python's ``re`` has no class for marks, so they are listed once per process (about 30 ms).
    Without them an accent left decomposed (NFD text, common from macOS) or a vowel sign of
    Devanagari, Bengali, Thai, ... would cut a word in pieces. The two mark classes are kept
    apart because ``re`` looks up a class of BMP characters in a table, and one reaching
    above U+FFFF range by range, which is many times slower.
    """
    bmp = _mark_class(range(0x10000))
    # above the BMP, marks live below U+20000 and in the variation selectors' supplement
    astral = _mark_class([*range(0x10000, 0x20000), *range(0xE0100, 0xE01F0)])
    word = re.compile(rf"[^\W\d_](?:[^\W\d_]|{bmp}|{astral})*")
    return re.compile(bmp), re.compile(astral), word


def tokenize(text: str, min_length: int = 3, fold: bool = True) -> list[str]:
    """Lower-cased maximal runs of Unicode letters and combining marks, starting with a letter,
    with at least ``min_length`` code points; the text is NFC-normalised first, so composed
    and decomposed spellings of a word are one word. ``fold=False`` keeps the case."""
    if text.isascii():     # nothing to normalise, no marks
        return [t for t in _LETTERS.findall(text.lower() if fold else text)
                if len(t) >= min_length]
    text = unicodedata.normalize("NFC", text)
    if fold:
        text = text.lower()
    bmp_mark, astral_mark, word = _patterns()
    marked = bmp_mark.search(text) or (max(text) > "\uffff" and astral_mark.search(text))
    words = word if marked else _LETTERS      # the letter class alone is faster
    return [t for t in words.findall(text) if len(t) >= min_length]


def pattern_tokens(text: str, pattern: re.Pattern, min_length: int = 3,
                   fold: bool = True) -> list[str]:
    """The matches of ``pattern`` in the NFC-normalised ``text`` with at least ``min_length``
    code points, lower-cased after matching unless ``fold`` is False (so a pattern may look at
    case)."""
    if not text.isascii():
        text = unicodedata.normalize("NFC", text)
    found = pattern.findall(text)
    if fold:
        return [t.lower() for t in found if len(t) >= min_length]
    return [t for t in found if len(t) >= min_length]
