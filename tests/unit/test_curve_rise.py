"""The rule that says a run's in-training held-out curve rose at its end."""
from __future__ import annotations

from topictk.rundir.metrics import RISE_MARGIN, curve_rise


def _records(values, key="perplexity_point"):
    return [{"step": 10 * (i + 1), key: v} for i, v in enumerate(values)]


def test_the_last_three_above_the_best_by_more_than_the_margin_rise():
    message = curve_rise(_records([500, 420, 400, 410, 415, 412]))
    assert message is not None
    assert "410.0 at step 40, 415.0 at step 50, 412.0 at step 60" in message
    assert "400.0 at step 30" in message and "\n" not in message


def test_one_or_two_points_up_are_noise_not_a_rise():
    assert curve_rise(_records([500, 420, 400, 410, 415, 399])) is None
    assert curve_rise(_records([500, 420, 400, 399, 410, 415])) is None
    # the best just before the last points (a dip) is not a rise either
    assert curve_rise(_records([500, 420, 410, 400, 410, 415])) is None


def test_a_curve_within_the_margin_of_its_best_does_not_rise():
    best = 400.0
    wobble = best * (1 + RISE_MARGIN * 0.9)
    assert curve_rise(_records([500, best, wobble, wobble, wobble])) is None
    above = best * (1 + RISE_MARGIN * 1.1)
    assert curve_rise(_records([500, best, above, above, above])) is not None


def test_a_falling_curve_and_a_short_one_do_not_rise():
    assert curve_rise(_records([500, 450, 420, 410, 405])) is None
    assert curve_rise(_records([400, 500, 500])) is None
    assert curve_rise([]) is None


def test_a_store_without_test_documents_uses_the_training_held_out_curve():
    records = _records([500, 400, 410, 415, 420], key="perplexity_train_heldout_point")
    assert curve_rise(records) is not None
