"""When a tenant's consolidation runs after new runs: soon for a small tenant, never more
than a tenth of a core for a large one, never later than the beat."""

from __future__ import annotations

from shared.learning.consolidate import (
    SOON_BURST_CAP_S,
    SOON_MAX_S,
    SOON_MIN_S,
    SOON_QUIET_S,
    soon_delay,
    soon_wait,
)
from shared.learning.ingest import IngestResult, tenants_taught


def test_a_tenant_never_consolidated_waits_the_minimum() -> None:
    assert soon_delay(None) == SOON_MIN_S == 5.0


def test_the_delay_is_ten_passes_long_between_the_bounds() -> None:
    assert soon_delay(0.05) == SOON_MIN_S  # a small tenant: a burst shares one pass
    assert soon_delay(3.0) == 30.0  # passes take at most a tenth of a core
    assert soon_delay(60.0) == SOON_MAX_S == 600.0  # 100k runs: the beat's own period
    assert soon_delay(600.0) == SOON_MAX_S


def test_only_runs_with_an_intent_queue_a_pass() -> None:
    """A direct call (no intent) is ingested for its graph edges, but a pass reads intents:
    a burst of direct calls must not start a pass every few seconds for nothing."""

    direct = IngestResult(outcome="skipped", tenant_id="a")
    asked = IngestResult(outcome="skipped", tenant_id="b", intent=True)
    redelivered = IngestResult(outcome="already_ingested", tenant_id="c", intent=True)
    assert tenants_taught({"1": direct, "2": asked, "3": redelivered}) == ["b"]
    assert tenants_taught({"1": direct}) == []


def test_a_pass_waits_for_a_burst_to_pause_but_not_past_its_cap() -> None:
    """A burst longer than the delay is read by one pass once it pauses (its first pass
    used to read part of it and leave the rest ten passes later); a tenant whose runs never
    pause still gets its pass, SOON_BURST_CAP_S after it was due; waiting is only ever
    longer than ``soon_delay``, never shorter (no extra passes)."""
    due = 1000.0
    assert soon_wait(now=due, due_at=due, last_taught=None) == 0.0  # nothing recorded
    assert soon_wait(now=due, due_at=due, last_taught=due - 10) == 0.0  # paused already
    assert soon_wait(now=due, due_at=due, last_taught=due - 1) == SOON_QUIET_S - 1
    later = due + SOON_BURST_CAP_S - 2  # still running, near the cap: waits at most to it
    assert soon_wait(now=later, due_at=due, last_taught=later) == 2.0
    assert soon_wait(now=due + SOON_BURST_CAP_S, due_at=due, last_taught=due + 119) == 0.0
