"""The rule that says a run's in-training held-out curve rose at its end."""
from __future__ import annotations

from topictk.rundir.metrics import RISE_MARGIN, curve_rise


def _records(values, key="perplexity_point"):
    return [{"step": 10 * (i + 1), key: v} for i, v in enumerate(values)]


# online VB with too many topics for the example corpus: best early, then up by 4 %
OVB_RISING = [360.3, 359.1, 364.6, 367.8, 369.0, 371.1, 374.8, 375.5, 376.5, 375.2]
# sgrld on 2,000 documents of 20 Newsgroups: one sample scored per point, 2-7 % apart
SGRLD_NOISY = [2016.3, 1935.5, 1900.9, 1962.4, 1827.5, 1939.7, 1988.9, 1978.3, 1941.6, 1929.5]


def test_a_curve_that_climbs_from_its_best_rises():
    message = curve_rise(_records(OVB_RISING))
    assert message is not None and "\n" not in message
    assert "375.7, the mean of the last 3 evaluations (steps 80-100)" in message
    assert "361.3 (steps 10-30)" in message and "4.0% above" in message


def test_a_sampler_s_scatter_is_not_a_rise():
    # its last three points are each over 5 % above its lowest point, 1827.5
    assert all(value > 1827.5 * 1.05 for value in SGRLD_NOISY[-3:])
    assert curve_rise(_records(SGRLD_NOISY)) is None


def test_the_margin_is_two_percent_for_a_smooth_curve():
    base = [500, 450, 400, 400, 400, 400, 400, 400]
    below = 400 * (1 + RISE_MARGIN * 0.95)
    above = 400 * (1 + RISE_MARGIN * 1.05)
    assert curve_rise(_records([*base, below, below, below])) is None
    assert curve_rise(_records([*base, above, above, above])) is not None


def test_a_falling_curve_and_a_short_one_do_not_rise():
    assert curve_rise(_records([500, 450, 420, 410, 405, 403, 402])) is None
    assert curve_rise(_records([400, 380, 500, 520, 530])) is None      # fewer than 6
    assert curve_rise([]) is None


def test_a_store_without_test_documents_uses_the_training_held_out_curve():
    records = _records(OVB_RISING, key="perplexity_train_heldout_point")
    assert curve_rise(records) is not None


def test_the_last_mean_is_compared_with_windows_that_end_before_it_starts():
    # the dip at 390 is inside windows that share points with the last one: against those
    # the last mean (405) is 2.1 % up, against the earlier ones (400) 1.25 %
    assert curve_rise(_records([400, 400, 400, 400, 400, 400, 390, 410, 415])) is None
