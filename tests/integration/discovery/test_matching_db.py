"""Capability matching compares semantic * reliability with the adaptive threshold."""

from __future__ import annotations

import pytest

from shared.db import connect
from shared.matching.capabilities import best_below_threshold, match_capabilities
from shared.matching.thresholds import initial_threshold, set_threshold
from tests.integration.discovery.helpers import at_similarity, basis, insert_capability


def test_changing_the_threshold_changes_the_outcome(pg_url: str) -> None:
    with connect(pg_url) as conn:
        cap_id = insert_capability(conn, name="parse_config", embedding=basis(0), success_rate=0.8)
        query = at_similarity(basis(0), basis(1), 0.75)

        found = match_capabilities(conn, intent_embedding=query)
        assert found["threshold_used"] == pytest.approx(initial_threshold("capability_matching"))
        assert found["total_found"] == 1
        match = found["capabilities"][0]
        assert match["id"] == cap_id
        assert match["semantic_score"] == pytest.approx(0.75, abs=1e-3)
        assert match["score"] == pytest.approx(0.75, abs=1e-3)
        assert {"code", "parameters_schema", "success_rate", "usage_count"} <= match.keys()

        set_threshold(conn, context="capability_matching", value=0.8, reason="test")
        stricter = match_capabilities(conn, intent_embedding=query)
        assert stricter["threshold_used"] == pytest.approx(0.8)
        assert stricter["capabilities"] == [] and stricter["total_found"] == 0


def test_reliability_reorders_and_filters(pg_url: str) -> None:
    with connect(pg_url) as conn:
        flaky = insert_capability(conn, name="flaky", embedding=basis(0), success_rate=0.3)
        proven = insert_capability(
            conn, name="proven", embedding=at_similarity(basis(0), basis(2), 0.8), success_rate=0.95
        )
        found = match_capabilities(conn, intent_embedding=[float(x) for x in basis(0)])
        ids = [c["id"] for c in found["capabilities"]]
        assert ids == [proven]  # 0.8 * 1.2 = 0.96; the exact but flaky one scores 0.1
        assert flaky not in ids
        assert found["capabilities"][0]["score"] == pytest.approx(0.96, abs=1e-3)


def test_tenants_are_isolated(pg_url: str) -> None:
    with connect(pg_url) as conn:
        insert_capability(conn, name="theirs", embedding=basis(0), tenant_id="other")
        assert match_capabilities(conn, intent_embedding=list(basis(0)))["total_found"] == 0


def test_best_below_threshold_finds_a_near_miss(pg_url: str) -> None:
    with connect(pg_url) as conn:
        cap_id = insert_capability(conn, name="proven", embedding=basis(0), success_rate=1.0)
        near_miss = at_similarity(basis(0), basis(3), 0.4)  # 0.4 * 1.2 = 0.48 < 0.50
        found = best_below_threshold(conn, intent_embedding=near_miss)
        assert found is not None and found["id"] == cap_id
        assert found["score"] == pytest.approx(0.48, abs=1e-3)
        assert best_below_threshold(conn, intent_embedding=list(basis(0))) is None  # matched
