"""Capability stats after each run, and the promotion rule they feed."""

from __future__ import annotations

import pytest

from shared.capabilities.stats import CapabilityStats, is_promotable, record_run


def test_runs_update_counts_rate_and_average_duration() -> None:
    stats = CapabilityStats()
    stats = record_run(stats, ok=True, duration_ms=100.0)
    stats = record_run(stats, ok=True, duration_ms=200.0)
    stats = record_run(stats, ok=False, duration_ms=600.0)
    assert (stats.usage_count, stats.success_count, stats.failure_count) == (3, 2, 1)
    assert stats.success_rate == pytest.approx(2 / 3)
    assert stats.avg_duration_ms == pytest.approx(300.0)


def test_a_run_without_duration_keeps_the_average() -> None:
    stats = record_run(CapabilityStats(), ok=True, duration_ms=50.0)
    stats = record_run(stats, ok=True, duration_ms=None)
    assert stats.usage_count == 2
    assert stats.avg_duration_ms == pytest.approx(50.0)


def test_promotion_needs_three_uses_and_over_seventy_percent_success() -> None:
    assert not is_promotable(CapabilityStats(usage_count=2, success_count=2, success_rate=1.0))
    assert is_promotable(CapabilityStats(usage_count=3, success_count=3, success_rate=1.0))
    assert not is_promotable(CapabilityStats(usage_count=10, success_count=7, success_rate=0.7))
