"""Time slices of documents (``prepare --time-column``, topictk/corpus/timeslices.py): the
binning rules on numbers and dates, the errors that name the document and the fix, and the
held-out choice drawn slice by slice."""
from __future__ import annotations

import datetime as dt

import numpy as np
import pytest

from topictk.corpus.splits import choose_test_documents, stratum_counts
from topictk.corpus.timeslices import Rule, TimeSlices, parse_time
from topictk.errors import CorpusUsageError, UsageError


def _fit(values, rule=None, field="t"):
    metas = [{field: v} for v in values]
    ids = [f"d{i}" for i in range(len(values))]
    return TimeSlices.fit(field, rule, metas, ids, "in.jsonl")


def test_numbers_and_dates_are_read():
    assert parse_time(1994) == ("number", 1994.0)
    assert parse_time(" 17.5 ") == ("number", 17.5)
    assert parse_time("1994") == ("number", 1994.0)          # a bare year is a number
    day = dt.date(2008, 3, 14).toordinal()
    assert parse_time("2008-03-14") == ("date", float(day))
    assert parse_time("2008-03") == ("date", float(dt.date(2008, 3, 1).toordinal()))
    assert parse_time("2008-03-14T12:00:00") == ("date", day + 0.5)
    for bad in ("March 2008", "2008-13-01", "2008-02-30", "", True, None, float("nan")):
        assert parse_time(bad) is None, bad


def test_years_of_whole_numbers_are_the_years_that_occur_in_order():
    slices, index = _fit([1990, 1987, 1990, 1988, 1992])
    assert slices.labels == ["1987", "1988", "1990", "1992"]
    np.testing.assert_array_equal(index, [2, 0, 2, 1, 3])
    assert index.dtype == np.int32


def test_years_and_months_of_dates():
    values = ["2008-12-31", "2009-01-01", "2008-01-15T23:59", "2010-06"]
    years, index = _fit(values)
    assert years.labels == ["2008", "2009", "2010"]
    np.testing.assert_array_equal(index, [0, 1, 0, 2])
    months, index = _fit(values, "month")
    assert months.labels == ["2008-01", "2008-12", "2009-01", "2010-06"]
    np.testing.assert_array_equal(index, [1, 2, 0, 3])


def test_a_time_between_calendar_slices_belongs_to_none():
    """A later document (added to a run) whose year or month no slice holds is refused, not
    put in the slice before the gap."""
    slices, _ = _fit(["2008-01-05", "2008-03-05"], "month")
    np.testing.assert_array_equal(
        slices.index([{"t": "2008-03-31"}, {"t": "2008-01-01"}], ["a", "b"], "new"), [1, 0])
    with pytest.raises(CorpusUsageError, match="document gap"):
        slices.index([{"t": "2008-02-10"}], ["gap"], "new")
    years, _ = _fit([1987, 1990])
    with pytest.raises(CorpusUsageError, match="document gap"):
        years.index([{"t": 1988}], ["gap"], "new")


def test_equal_width_slices_span_the_times_the_last_one_closed():
    slices, index = _fit([0, 10, 2.5, 5, 7.5, 9.99], "width:4")
    assert slices.labels == ["[0, 2.5)", "[2.5, 5)", "[5, 7.5)", "[7.5, 10]"]
    np.testing.assert_array_equal(index, [0, 3, 1, 2, 3, 3])
    one, index = _fit([3, 3, 3], "width:2")          # every time equal: one slice
    assert len(one.labels) == 1 and not index.any()


def test_explicit_edges_of_numbers_and_of_dates():
    slices, index = _fit([1, 31, 32, 60, 61, 366], "edges:1,32,61,367")
    assert slices.labels == ["[1, 32)", "[32, 61)", "[61, 367]"]
    np.testing.assert_array_equal(index, [0, 0, 1, 1, 2, 2])
    dated, index = _fit(["2008-01-31", "2008-02-01", "2008-03-01"],
                        "edges:2008-01-01,2008-02-01,2008-03-01")
    np.testing.assert_array_equal(index, [0, 1, 1])
    assert dated.labels == ["[2008-01-01, 2008-02-01)", "[2008-02-01, 2008-03-01]"]


@pytest.mark.parametrize("values, rule, words", [
    ([1, 400], "edges:1,32,367", ["document d1", "400", "outside", "widen --time-bins"]),
    ([1987, 1987.5], None, ["document d1", "1987.5", "whole", "width:N"]),
    ([1, 2], "month", ["month needs dates", "field 't'"]),
    ([1990, "1990-01-01"], None, ["mixes numbers and dates", "document d1"]),
    ([1990, "soon"], None, ["document d1", "'soon'", "ISO date"]),
    ([1990, None], None, ["document d1", "no 't' value"]),
])
def test_a_time_without_a_slice_is_an_error_naming_the_document(values, rule, words):
    with pytest.raises(CorpusUsageError) as caught:
        _fit(values, rule)
    message = str(caught.value)
    assert message.startswith("in.jsonl: ") and "\n" not in message
    for word in words:
        assert word in message, message


@pytest.mark.parametrize("text, words", [
    ("weekly", ["year, month, width:N or edges"]),
    ("width:0", ["whole number of slices"]),
    ("edges:5", ["two or more"]),
    ("year:2", ["takes no value"]),
])
def test_a_bad_rule_is_a_usage_error(text, words):
    with pytest.raises(UsageError) as caught:
        Rule.parse(text)
    for word in words:
        assert word in str(caught.value)


def test_edges_must_ascend_and_be_of_the_times_kind():
    with pytest.raises(UsageError, match="ascending"):
        _fit([1, 2], "edges:1,5,3")
    with pytest.raises(UsageError, match="not a number"):
        _fit([1, 2], "edges:2008-01-01,2009-01-01")


def test_stratum_counts_share_in_proportion_by_largest_remainder():
    assert stratum_counts([10, 10, 10], 3) == [1, 1, 1]
    assert stratum_counts([5, 3, 2], 5) == [3, 1, 1]       # quotas 2.5, 1.5, 1.0
    assert stratum_counts([1, 100], 50) == [0, 50]
    assert stratum_counts([2, 2], 4) == [2, 2]
    for sizes, n in (([7, 1, 12, 0, 30], 17), ([3, 3, 4], 10), ([9], 4)):
        counts = stratum_counts(sizes, n)
        assert sum(counts) == n and all(0 <= c <= s for c, s in zip(counts, sizes))


def test_test_documents_are_drawn_slice_by_slice():
    """Every slice gives its share of the test documents (a plain draw of 10 % from these
    slices gives them 15, 4, 11 and 0 on this seed, against shares of 20, 1.5, 8 and 0.5); the
    same seed draws the same documents, and without slices the draw is the one before slices
    existed."""
    strata = np.repeat([0, 1, 2, 3], [200, 15, 80, 5])
    mask = choose_test_documents(strata.size, 0.1, 3, strata=strata)
    assert [int(mask[strata == s].sum()) for s in range(4)] == [20, 2, 8, 0]
    plain = choose_test_documents(strata.size, 0.1, 3)
    assert [int(plain[strata == s].sum()) for s in range(4)] == [15, 4, 11, 0]
    assert mask.sum() == 30
    np.testing.assert_array_equal(mask, choose_test_documents(strata.size, 0.1, 3, strata))
    rng = np.random.default_rng(np.random.SeedSequence(3, spawn_key=(1,)))
    np.testing.assert_array_equal(np.flatnonzero(plain), np.sort(rng.permutation(300)[:30]))
