"""Semantic * reliability scoring: < 50 % success all but hides a capability, > 90 % boosts it."""

from __future__ import annotations

import pytest

from shared.matching.capabilities import match_score, reliability_factor


@pytest.mark.parametrize(
    ("rate", "factor"), [(0.0, 0.1), (0.49, 0.1), (0.5, 1.0), (0.9, 1.0), (0.91, 1.2), (1.0, 1.2)]
)
def test_reliability_factor(rate: float, factor: float) -> None:
    assert reliability_factor(rate) == factor


def test_score_is_capped_and_penalised() -> None:
    assert match_score(semantic=0.95, success_rate=1.0) == 1.0
    assert match_score(semantic=0.75, success_rate=0.95) == pytest.approx(0.9)
    assert match_score(semantic=0.9, success_rate=0.2) == pytest.approx(0.09)
