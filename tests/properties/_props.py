"""Helpers of the property tests: one property, two tests (quick and long), and damage to
bytes (flips, truncation, insertion) drawn by Hypothesis."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.properties.conftest import LONG_EXAMPLES


def quick_and_long(check, strategy, quick_examples: int | None = None):
    """Two tests of ``check(example)`` over ``strategy``: one with the profile's examples (or
    ``quick_examples`` when the property is slow per example), one with LONG_EXAMPLES under
    the slow marker."""
    @given(strategy)
    def quick(example):
        check(example)

    if quick_examples is not None:
        quick = settings(max_examples=quick_examples)(quick)

    @pytest.mark.slow
    @settings(max_examples=LONG_EXAMPLES)
    @given(strategy)
    def long(example):
        check(example)

    return quick, long


class Blob(bytes):
    """Bytes that print as what was done to them, not as the bytes (a damaged checkpoint
    would print as hundreds of kilobytes)."""

    how: str = ""

    def __repr__(self) -> str:
        return f"<{len(self)} bytes: {self.how}>"


@st.composite
def damaged(draw, data: bytes) -> Blob:
    """``data`` with a few random byte flips, a truncation, an insertion, a zeroed run or
    nothing done."""
    kind = draw(st.sampled_from(["flip", "flip", "truncate", "insert", "zero", "none"]))
    out = bytearray(data)
    how = "unchanged"
    if kind == "flip" and out:
        flips = []
        for _ in range(draw(st.integers(1, 4))):
            i = draw(st.integers(0, len(out) - 1))
            mask = draw(st.integers(1, 255))
            out[i] ^= mask
            flips.append(f"{i}^{mask}")
        how = "flipped " + ", ".join(flips)
    elif kind == "truncate":
        out = out[: draw(st.integers(0, max(len(out) - 1, 0)))]
        how = f"cut to {len(out)}"
    elif kind == "insert":
        i = draw(st.integers(0, len(out)))
        extra = draw(st.binary(min_size=1, max_size=16))
        out[i:i] = extra
        how = f"{extra!r} inserted at {i}"
    elif kind == "zero" and out:
        i = draw(st.integers(0, len(out) - 1))
        j = draw(st.integers(i, min(len(out), i + 64)))
        out[i:j] = bytes(j - i)
        how = f"zeroed {i}:{j}"
    blob = Blob(bytes(out))
    blob.how = how
    return blob
