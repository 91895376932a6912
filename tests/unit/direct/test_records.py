"""A direct call's record: the row the answer reads is the row the drainer writes."""

from __future__ import annotations

import time
import uuid

import pytest

from shared.direct.records import decode_record, encode_record, finished_row
from shared.executions.models import view_from_row
from shared.executions.trace import TraceRecorder

TOOL = "time:get_current_time"


def _row() -> dict[str, object]:
    recorder = TraceRecorder(None)
    recorder.tool_start("call-1", TOOL, None)
    recorder.tool_end("call-1", None)
    now = time.time()
    return finished_row(
        execution_id=str(uuid.uuid4()), tenant_id="acme", code="# direct call\n",
        args={"timezone": "UTC"}, tool_id=TOOL, timeout_s=30.0,
        extras={"direct": {"session": "s", "after": "time:convert_time", "tool": TOOL}},
        created_at=now - 0.004, finished_at=now, status="succeeded",
        result={"datetime": "2026-11-28T09:00:00+00:00"}, error=None, trace=recorder.events,
        duration_ms=4.0, trace_id=None, pii=None,
    )  # fmt: skip


def test_the_answer_reads_the_call_as_a_finished_execution_of_its_one_tool() -> None:
    view = view_from_row(_row())
    assert view.status == "succeeded" and view.result == {"datetime": "2026-11-28T09:00:00+00:00"}
    assert [(c.tool, c.ok) for c in view.tool_calls] == [(TOOL, True)]
    assert view.cache_hit is None and view.attempts == 1


def test_the_record_carries_every_column_and_the_caller_s_key() -> None:
    row = _row()
    record = decode_record({b"record": encode_record(row, key_id="key-1")})
    assert record["id"] == str(row["id"]) and record["key_id"] == "key-1"
    assert record["created"] == pytest.approx(row["created_at"].timestamp())  # type: ignore[attr-defined]
    assert record["extras"]["direct"]["after"] == "time:convert_time"
    assert record["trace"] == row["trace"] and record["tools"] == [TOOL]


def test_an_entry_that_is_not_a_record_is_refused() -> None:
    with pytest.raises(ValueError):
        decode_record({b"other": b"{}"})
