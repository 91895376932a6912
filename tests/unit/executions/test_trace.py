"""The trace recorder's events read back through the trace reader, after a JSON round trip as in ``executions.trace``."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from shared.executions.trace import (
    CapabilityCall,
    CapabilityStart,
    EventType,
    Progress,
    TraceRecorder,
    TraceTruncated,
    event_type,
    summarize,
)

_BOOM = {"type": "timeout", "message": "30 s"}


def _record(recorder: TraceRecorder) -> None:
    outer = CapabilityStart("cap-call-1", "cap-outer", "outer", None, 1_700_000_000.0)
    inner = CapabilityStart("cap-call-2", "cap-inner", "inner", "cap-outer", 1_700_000_000.5)
    recorder.record(outer)
    recorder.record(inner)
    recorder.tool_start("call-1", "fs:read", "cap-inner")
    recorder.tool_end("call-1", None)
    recorder.record(Progress("half", 1, 2, 1_700_000_001.0))
    recorder.tool_start("call-2", "fs:write", None)
    recorder.tool_end("call-2", _BOOM)
    recorder.end(inner, ts=1_700_000_000.6, duration_ms=100.0004, error=None)
    recorder.end(outer, ts=1_700_000_001.0, duration_ms=1000.0, error=_BOOM)
    recorder.record(TraceTruncated("capability_calls", 2000, 1_700_000_001.0))


def test_recorded_events_read_back_after_storage() -> None:
    recorder = TraceRecorder(None)
    _record(recorder)
    stored = json.loads(json.dumps(recorder.events))  # what executions.trace holds
    assert [event_type(e) for e in stored] == [
        "capability_start", "capability_start", "tool_start", "tool_end",
        "tool_start", "tool_end", "capability_end", "capability_end", "trace_truncated",
    ]  # fmt: skip
    summary = summarize(stored)
    read, write = summary.tool_calls
    assert (read.call_id, read.tool, read.parent, read.ok) == (
        "call-1",
        "fs:read",
        "cap-inner",
        True,
    )
    assert read.error_type is None and isinstance(read.duration_ms, float)  # carried through
    assert (write.tool, write.parent, write.ok) == ("fs:write", None, False)
    assert (write.error_type, write.error_message) == ("timeout", "30 s")
    assert read.ts is not None and write.ts is not None and read.ts <= write.ts
    assert summary.capability_calls == (
        CapabilityCall("cap-call-1", "cap-outer", None, 1_700_000_000.0),
        CapabilityCall("cap-call-2", "cap-inner", "cap-outer", 1_700_000_000.5),
    )
    assert summary.truncated


def test_stored_events_keep_the_api_shape() -> None:
    recorder = TraceRecorder(None)
    _record(recorder)
    shapes = {e["type"]: list(e) for e in recorder.events}
    common = ["type", "call_id"]
    assert shapes["tool_start"] == [*common, "tool", "parent", "ts"]
    assert shapes["tool_end"] == [*common, "tool", "parent", "ts", "duration_ms", "ok", "error"]
    assert shapes["capability_start"] == [*common, "capability_id", "name", "parent", "ts"]
    assert shapes["capability_end"] == [
        *common, "capability_id", "name", "parent", "ts", "duration_ms", "ok", "error",
    ]  # fmt: skip
    assert shapes["trace_truncated"] == ["type", "what", "limit", "ts"]
    end = recorder.events[-2]
    assert end["duration_ms"] == 1000.0 and end["ok"] is False and end["error"] == _BOOM
    assert recorder.events[-3]["duration_ms"] == 100.0  # rounded to µs
    assert all(type(e["type"]) is str for e in recorder.events)  # plain JSON strings


def test_progress_is_forwarded_but_not_stored() -> None:
    seen: list[dict[str, Any]] = []
    recorder = TraceRecorder(seen.append)
    _record(recorder)
    assert EventType.PROGRESS not in {e["type"] for e in recorder.events}
    assert [e for e in seen if e["type"] != "progress"] == recorder.events
    (progress,) = [e for e in seen if e["type"] == "progress"]
    assert progress == {
        "type": "progress",
        "message": "half",
        "done": 1,
        "total": 2,
        "ts": 1_700_000_001.0,
    }


def test_async_callbacks_are_awaited_by_flush_and_failures_do_not_stop_recording() -> None:
    seen: list[str] = []

    async def on_event(event: dict[str, Any]) -> None:
        await asyncio.sleep(0)
        if event["type"] == "tool_end":
            raise RuntimeError("subscriber down")
        seen.append(event["type"])

    async def scenario() -> TraceRecorder:
        recorder = TraceRecorder(on_event)
        recorder.tool_start("call-1", "fs:read", None)
        recorder.tool_end("call-1", None)
        recorder.tool_start("call-2", "fs:read", None)
        await recorder.flush()
        return recorder

    recorder = asyncio.run(scenario())
    assert seen == ["tool_start", "tool_start"]
    assert len(recorder.events) == 3


def test_events_without_a_type_key_are_not_read() -> None:
    recorder = TraceRecorder(None)
    _record(recorder)
    legacy = [{("event" if k == "type" else k): v for k, v in e.items()} for e in recorder.events]
    assert summarize(legacy) == summarize([])
    assert event_type(legacy[0]) is None
