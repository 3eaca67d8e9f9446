"""The change-coding kernel (topictk/inference/_changes.pyx) against its NumPy twin
(tests/reference/changes.py): the same form, the same bytes, and adding it back gives the
change exactly, whatever its density, the lengths of its runs of zeros and the width of its
values."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from tests.reference import changes as twin
from topictk.inference.gibbs.shards import add_change, encode_change, merge_changes

COUNT = st.integers(0, 2**31 - 1)


def _pairs():
    """(new, old) int32 counts: old arbitrary, new equal to it except where drawn (so most
    entries do not change), differences of every width."""
    def pair(n):
        old = arrays(np.int32, n, elements=st.integers(0, 1000), fill=st.just(7))
        step = st.one_of(st.integers(-3, 3), st.integers(-300, 300),
                         st.integers(-(2**20), 2**20))
        delta = arrays(np.int64, n, elements=step, fill=st.just(0))
        return st.tuples(old, delta)
    return st.integers(1, 3000).flatmap(pair)


def _same(a: tuple, b: tuple) -> None:
    assert a[0] == b[0] and tuple(a[1]) == tuple(b[1])
    for x, y in zip(a[2:], b[2:]):
        assert x.dtype == y.dtype
        np.testing.assert_array_equal(x, y)


@settings(max_examples=300, deadline=None)
@given(_pairs())
def test_the_kernel_writes_what_its_twin_writes(pair):
    old, delta = pair
    new = np.clip(old.astype(np.int64) + delta, 0, 2**31 - 1).astype(np.int32)
    encoded = encode_change(new, old)
    _same(encoded, twin.encode(new, old))
    target = old.copy()
    add_change(target, encoded)
    np.testing.assert_array_equal(target, new)


@pytest.mark.parametrize("gaps", [[255, 256, 1, 510, 511, 512, 765, 766, 254, 1000],
                                  [1] * 50 + [5000], [3000]])
def test_runs_of_zeros_of_every_length_are_bridged(gaps):
    old = np.zeros(sum(gaps) + 17, dtype=np.int32)
    new = old.copy()
    new[np.cumsum(gaps) - 1] = -2
    encoded = encode_change(new, old)
    assert encoded[0] == "sparse" and encoded[2].dtype == np.uint8
    _same(encoded, twin.encode(new, old))
    target = old.copy()
    add_change(target, encoded)
    np.testing.assert_array_equal(target, new)


@pytest.mark.parametrize("value, dtype", [(127, np.int8), (-128, np.int8), (128, np.int16),
                                          (-32769, np.int32), (2**31 - 1, np.int32),
                                          (-(2**31 - 1), np.int32)])
def test_values_take_the_smallest_type_that_holds_them(value, dtype):
    old = np.zeros(4000, dtype=np.int32) if value > 0 else np.full(4000, 2**31 - 1,
                                                                    dtype=np.int32)
    new = old.copy()
    new[[5, 3999]] = old[[5, 3999]] + value
    encoded = encode_change(new, old)
    assert encoded[0] == "sparse" and encoded[3].dtype == dtype
    _same(encoded, twin.encode(new, old))


def test_a_dense_change_is_every_entry_in_its_smallest_type():
    rng = np.random.default_rng(0)
    old = rng.integers(0, 50, (300, 16)).astype(np.int32)
    new = (old + rng.integers(-2, 3, old.shape)).astype(np.int32)
    encoded = encode_change(new, old)
    assert encoded[0] == "dense" and encoded[2].dtype == np.int8
    _same(encoded, twin.encode(new, old))
    assert encoded[2].nbytes == new.size            # a byte an entry
    total = merge_changes(encoded, encode_change(old, new))
    assert total[0] == "sparse" and total[2].size == 0   # the change and its reverse: none


def test_a_change_of_another_size_is_refused():
    from topictk.inference import _changes
    with pytest.raises(ValueError, match="C-contiguous"):
        add_change(np.zeros((4, 6), np.int32)[:, ::2], encode_change(np.ones((4, 3), np.int32)))
    with pytest.raises(ValueError, match="past the counts"):
        _changes.add_sparse(np.zeros(3, np.int32), np.array([2, 2], np.uint8),
                            np.array([1, 1], np.int8))
    with pytest.raises(ValueError, match="differ in size"):
        _changes.change_stats(np.zeros(3, np.int32), np.zeros(4, np.int32))
