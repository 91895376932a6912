"""Suggestion scoring: the combined score and the dominant community."""

from __future__ import annotations

import pytest

from shared.suggestions.engine import combined_score, dominant_community


def test_combined_score() -> None:
    assert combined_score(success_rate=1.0, usage_count=10, max_usage=10) == pytest.approx(1.0)
    assert combined_score(success_rate=0.5, usage_count=5, max_usage=10) == pytest.approx(0.5)
    assert combined_score(success_rate=1.0, usage_count=0, max_usage=0) == pytest.approx(0.6)


def test_dominant_community() -> None:
    assert dominant_community([3, 1, 3, None]) == 3
    assert dominant_community([2, 1]) == 1  # tie: smaller id
    assert dominant_community([None, None]) is None
