"""The pure threshold update rule: direction, bounds, window."""

from __future__ import annotations

from shared.matching.thresholds import (
    BASE_STEP,
    MAX_THRESHOLD,
    MIN_THRESHOLD,
    WINDOW,
    Outcome,
    apply_outcome,
)


def test_false_positive_raises_and_false_negative_lowers() -> None:
    up = apply_outcome(value=0.70, samples=[], outcome=Outcome.FALSE_POSITIVE)
    down = apply_outcome(value=0.70, samples=[], outcome=Outcome.FALSE_NEGATIVE)
    assert up.value > 0.70 and up.reason and "false_positive" in up.reason
    assert down.value < 0.70 and down.reason and "false_negative" in down.reason


def test_true_positive_keeps_value_but_joins_window() -> None:
    update = apply_outcome(value=0.70, samples=["false_positive"], outcome="true_positive")
    assert update.value == 0.70
    assert update.reason is None
    assert update.samples == ["false_positive", "true_positive"]


def test_mixed_errors_move_less_than_a_consistent_bias() -> None:
    mixed = apply_outcome(
        value=0.70,
        samples=["false_negative"] * 5 + ["false_positive"] * 4,
        outcome="false_positive",
    )
    biased = apply_outcome(value=0.70, samples=["false_positive"] * 9, outcome="false_positive")
    assert abs(mixed.value - 0.70) < abs(biased.value - 0.70)
    assert abs(mixed.value - 0.70) >= BASE_STEP - 1e-9


def test_bounds_hold() -> None:
    value = 0.70
    for _ in range(100):
        value = apply_outcome(value=value, samples=[], outcome="false_positive").value
    assert value == MAX_THRESHOLD
    assert apply_outcome(value=value, samples=[], outcome="false_positive").reason is None
    for _ in range(100):
        value = apply_outcome(value=value, samples=[], outcome="false_negative").value
    assert value == MIN_THRESHOLD


def test_window_is_bounded() -> None:
    update = apply_outcome(value=0.7, samples=["true_positive"] * WINDOW, outcome="false_negative")
    assert len(update.samples) == WINDOW
    assert update.samples[-1] == "false_negative"
