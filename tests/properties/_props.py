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


@st.composite
def damaged(draw, data: bytes) -> bytes:
    """``data`` with a few random byte flips, a truncation, an insertion or nothing done."""
    kind = draw(st.sampled_from(["flip", "flip", "truncate", "insert", "zero", "none"]))
    out = bytearray(data)
    if kind == "flip" and out:
        for _ in range(draw(st.integers(1, 4))):
            i = draw(st.integers(0, len(out) - 1))
            out[i] ^= draw(st.integers(1, 255))
    elif kind == "truncate":
        out = out[: draw(st.integers(0, max(len(out) - 1, 0)))]
    elif kind == "insert":
        i = draw(st.integers(0, len(out)))
        out[i:i] = draw(st.binary(min_size=1, max_size=16))
    elif kind == "zero" and out:
        i = draw(st.integers(0, len(out) - 1))
        j = draw(st.integers(i, min(len(out), i + 64)))
        out[i:j] = bytes(j - i)
    return bytes(out)
