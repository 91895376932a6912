"""`agentcards bench load`'s phase breakdown: the phases of one execution add up to what the
client measured, so the breakdown never hides time (the figures themselves are not asserted)."""

from __future__ import annotations

import pytest

from deploy.bench.load_phases import PHASES, _phases

SAMPLE = {"sent": 100.000, "received": 100.300, "ok": True, "id": "e1"}
ROW = {
    "created": 100.010,
    "started": 100.050,
    "finished": 100.200,
    "trace": [
        {"type": "tool_start", "ts": 100.100, "tool": "example:add"},
        {"type": "tool_end", "ts": 100.150, "tool": "example:add", "duration_ms": 50.0},
    ],
}


def test_phases_cover_the_whole_client_latency_in_order() -> None:
    phases = _phases(SAMPLE, ROW, announced=100.250)
    assert phases is not None
    assert list(phases) == [*PHASES, "total"]
    assert sum(phases[name] for name in PHASES) == pytest.approx(phases["total"])
    assert phases["tool_rpc"] == pytest.approx(50.0)
    assert phases["announce"] == pytest.approx(50.0)


def test_a_run_without_a_tool_call_or_announcement_is_left_out() -> None:
    assert _phases(SAMPLE, {**ROW, "trace": []}, announced=100.250) is None
    assert _phases(SAMPLE, ROW, announced=None) is None


def test_a_run_without_a_tool_call_counts_its_run_as_the_sandbox_phase() -> None:
    phases = _phases(SAMPLE, {**ROW, "trace": []}, announced=100.250, tool_call=False)
    assert phases is not None
    assert sum(phases[name] for name in PHASES) == pytest.approx(phases["total"])
    assert phases["sandbox_start"] == pytest.approx(150.0)
    assert phases["tool_rpc"] == phases["result_store"] == 0
