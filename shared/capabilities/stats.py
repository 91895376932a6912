"""Capability usage statistics, updated one run at a time (pure; learning batches fold runs with it)."""

from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True)
class CapabilityStats:
    """The stats columns of a ``capabilities`` row."""

    usage_count: int = 0
    success_count: int = 0
    failure_count: int = 0
    success_rate: float = 0.0
    avg_duration_ms: float = 0.0


def record_run(stats: CapabilityStats, *, ok: bool, duration_ms: float | None) -> CapabilityStats:
    """Stats after one more run of the capability.

    ``usage_count = success_count + failure_count``; ``success_rate`` is their plain
    ratio. The average duration is a running mean over runs that reported a
    duration; the n-th is folded in as ``avg + (d - avg) / n`` (no history kept),
    where n is the new usage count — a run without a duration leaves the average
    as it was, which slightly under-weights later runs (accepted: the bridge
    always records one for finished runs).
    """
    usage = stats.usage_count + 1
    successes = stats.success_count + (1 if ok else 0)
    failures = stats.failure_count + (0 if ok else 1)
    average = stats.avg_duration_ms
    if duration_ms is not None and duration_ms >= 0:
        average = average + (duration_ms - average) / usage
    return replace(
        stats,
        usage_count=usage,
        success_count=successes,
        failure_count=failures,
        success_rate=successes / usage,
        avg_duration_ms=average,
    )


# Promotion, kept as a quality signal: a capability proven by use (at least 3 runs, > 70 % success).
PROMOTION_MIN_USAGE = 3
PROMOTION_MIN_SUCCESS_RATE = 0.7


def is_promotable(stats: CapabilityStats) -> bool:
    """True when the beat job should set ``promoted_at`` (usage ≥ 3 and success rate > 0.7)."""
    return (
        stats.usage_count >= PROMOTION_MIN_USAGE and stats.success_rate > PROMOTION_MIN_SUCCESS_RATE
    )
