"""The trace summary ``finish_execution`` stores: decoded once, read back unchanged, old rows decoded."""

from __future__ import annotations

import json
from typing import Any

from shared.executions.trace import (
    LOST_CALL_MESSAGE,
    SUMMARY_VERSION,
    TraceSummary,
    replay,
    summarize,
    summary_of,
)
from tests.unit.graph.trace_builder import TraceBuilder

CAP = "11111111-1111-1111-1111-111111111111"


def _trace() -> list[dict[str, Any]]:
    builder = TraceBuilder().tool("fs:read").tool("fs:write", ok=False, error="disk full")
    builder.start_tool("fs:stat")  # cut off by the deadline: lost
    builder.events.append(
        {"type": "capability_start", "call_id": "c1", "capability_id": CAP, "name": "copy",
         "parent": None, "ts": 1_700_000_001.0}
    )  # fmt: skip
    return builder.events


def test_the_summary_lists_calls_in_order_with_outcome_timing_and_failures() -> None:
    summary = summarize(_trace())
    assert [(c.tool, c.ok, c.error_type) for c in summary.tool_calls] == [
        ("fs:read", True, None),
        ("fs:write", False, "tool_error"),
        ("fs:stat", None, None),
    ]
    assert summary.tool_calls[0].duration_ms == 5.0 and summary.tool_calls[2].duration_ms is None
    assert [c.capability_id for c in summary.capability_calls] == [CAP]
    assert not summary.truncated
    assert summary.failures == [
        {"tool": "fs:write", "error": "disk full", "type": "tool_error"},
        {"tool": "fs:stat", "error": LOST_CALL_MESSAGE, "type": "lost"},
    ]


def test_a_truncation_marker_marks_the_summary_truncated() -> None:
    trace = [*_trace(), {"type": "trace_truncated", "what": "tool_calls", "limit": 3, "ts": 1.0}]
    assert summarize(trace).truncated


def _approval(tool: str, status: str) -> dict[str, Any]:
    return {"type": "approval", "call_id": f"t-{tool}", "tool": tool, "status": status,
            "by": None, "reason": None, "ts": 1_700_000_002.0}  # fmt: skip


def test_calls_that_waited_for_approval_name_their_tools_once_in_order() -> None:
    trace = [
        *_trace(),
        _approval("fs:write", "pending"),
        _approval("fs:write", "approved"),
        _approval("pay:send", "pending"),
    ]
    summary = summarize(trace)
    assert summary.approval_tools == ("fs:write", "pay:send")
    assert summarize(_trace()).approval_tools == ()
    stored = json.loads(json.dumps(summary.as_dict()))
    assert TraceSummary.from_dict(stored) == summary
    # A summary stored before approvals were summarised reads back as none seen.
    del stored["approval_tools"]
    assert TraceSummary.from_dict(stored).approval_tools == ()


def test_the_stored_json_reads_back_as_the_same_summary() -> None:
    summary = summarize(_trace())
    stored = json.loads(json.dumps(summary.as_dict()))  # what executions.trace_summary holds
    assert stored["v"] == SUMMARY_VERSION
    assert set(stored) == {"v", "truncated", "tool_calls", "capability_calls", "approval_tools"}
    assert TraceSummary.from_dict(stored) == summary


def test_a_row_is_read_from_its_stored_summary_without_decoding_the_trace() -> None:
    summary = summarize(_trace())
    row = {"trace": [], "trace_summary": summary.as_dict()}  # trace not selected: not decoded
    assert summary_of(row) == summary


def test_a_row_stored_before_the_summary_is_decoded_from_its_trace() -> None:
    expected = summarize(_trace())
    assert summary_of({"trace": _trace(), "trace_summary": None}) == expected
    assert summary_of({"trace": _trace()}) == expected
    older = {**expected.as_dict(), "v": SUMMARY_VERSION - 1}
    assert summary_of({"trace": _trace(), "trace_summary": older}) == expected


def test_a_run_in_memory_is_summarised_from_its_trace() -> None:
    assert summary_of(_trace()) == summarize(_trace())
    assert summary_of([]) == TraceSummary() and summary_of({"trace": None}) == TraceSummary()


def test_a_stored_trace_replays_as_typed_events_in_order() -> None:
    trace = [{"type": "tool_start", "call_id": "t1"}, {"call_id": "odd"}, {"type": "progress"}]
    assert [kind for kind, _ in replay(trace)] == ["tool_start", "event", "progress"]
    assert [event for _, event in replay(trace)] == trace
    assert replay(None) == []
