"""Adaptive thresholds persist in Postgres, move the right way, and log every change."""

from __future__ import annotations

from shared.db import connect
from shared.matching.thresholds import (
    get_threshold,
    initial_threshold,
    record_outcome,
    threshold_changes,
)

MATCHING = initial_threshold("capability_matching")
SUGGESTIONS = initial_threshold("suggestions")


def test_false_positive_raises_and_persists(pg_url: str) -> None:
    with connect(pg_url) as conn:
        assert get_threshold(conn, context="capability_matching") == MATCHING
        new = record_outcome(
            conn, context="capability_matching", kind="false_positive", detail="re-run failed"
        )
    assert new > MATCHING
    with connect(pg_url) as fresh:  # a new connection: as after a restart
        assert get_threshold(fresh, context="capability_matching") == new
        changes = threshold_changes(fresh, context="capability_matching")
    assert len(changes) == 1
    assert changes[0]["old_value"] == MATCHING and changes[0]["new_value"] == new
    assert "false_positive" in changes[0]["reason"] and "re-run failed" in changes[0]["reason"]


def test_false_negative_lowers_and_persists_per_context_and_tenant(pg_url: str) -> None:
    with connect(pg_url) as conn:
        record_outcome(conn, context="suggestions", kind="false_negative", tenant_id="acme")
        record_outcome(conn, context="suggestions", kind="false_negative", tenant_id="acme")
    with connect(pg_url) as fresh:
        lowered = get_threshold(fresh, context="suggestions", tenant_id="acme")
        assert lowered < SUGGESTIONS
        assert get_threshold(fresh, context="suggestions") == SUGGESTIONS  # other tenant
        assert get_threshold(fresh, context="capability_matching", tenant_id="acme") == MATCHING
        assert len(threshold_changes(fresh, context="suggestions", tenant_id="acme")) == 2


def test_true_positive_changes_nothing_but_is_remembered(pg_url: str) -> None:
    with connect(pg_url) as conn:
        assert record_outcome(conn, context="capability_matching", kind="true_positive") == MATCHING
        row = conn.execute("SELECT samples FROM adaptive_thresholds").fetchone()
        assert row is not None and row["samples"] == ["true_positive"]
        assert threshold_changes(conn, context="capability_matching") == []
