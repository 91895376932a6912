"""Validators of what the untrusted child sends: each message type refuses a malformed frame with ProtocolViolation."""

from __future__ import annotations

from typing import Any

import pytest

from shared.sandbox import messages
from shared.sandbox.messages import ProtocolViolation

_NOW_US = 1_700_000_000_000_000


def _events(*events: Any) -> dict[str, Any]:
    return {"op": "capability_events", "events": list(events)}


MALFORMED: dict[str, list[dict[str, Any]]] = {
    "unknown op": [{"op": "nope"}, {"op": [1]}, {"op": None}, {}],
    "tool_call": [
        {"op": "tool_call", "id": "x", "tool": "t:echo", "args": {}},
        {"op": "tool_call", "id": True, "tool": "t:echo", "args": {}},
        {"op": "tool_call", "id": 1, "tool": 5, "args": {}},
        {"op": "tool_call", "id": 1, "tool": "t:" + "x" * 300, "args": {}},
        {"op": "tool_call", "id": 1, "tool": "t:echo", "args": []},
        {"op": "tool_call", "id": 1, "tool": "t:echo"},
        {"op": "tool_call", "id": 1, "tool": "t:echo", "args": {}, "parent": ["unhashable"]},
    ],
    "resource_read": [
        {"op": "resource_read", "id": "1", "server": "s", "uri": "demo://x"},
        {"op": "resource_read", "id": 1, "server": None, "uri": "demo://x"},
        {"op": "resource_read", "id": 1, "server": "s" * 300, "uri": "demo://x"},
        {"op": "resource_read", "id": 1, "server": "s", "uri": ""},
        {"op": "resource_read", "id": 1, "server": "s", "uri": "x" * 9000},
        {"op": "resource_read", "id": 1, "server": "s"},
    ],
    "stdout": [{"op": "stdout", "data": 5}, {"op": "stdout"}],
    "progress": [
        {"op": "progress", "message": None},
        {"op": "progress", "message": "m", "done": "1"},
        {"op": "progress", "message": "m", "total": True},
    ],
    "capability_events": [
        {"op": "capability_events", "events": "nope"},
        {"op": "capability_events", "events": []},
        {"op": "capability_events", "events": [["e", 1, 1, None]] * 4097},
        _events(["s", "x"]),
        _events(["x", 1, 2, 3]),
        _events([]),
        _events({"s": 1}),
        _events([["s"], 1, "a", None, _NOW_US]),
    ],
    "capability start": [
        _events(["s", "1", "a", None, _NOW_US]),
        _events(["s", True, "a", None, _NOW_US]),
        _events(["s", 1, 5, None, _NOW_US]),
        _events(["s", 1, "a", ["unhashable"], _NOW_US]),
        _events(["s", 1, "a", None, "now"]),
        _events(["s", 1, "a", None, 2**70]),
        _events(["s", 1, "a", None, float("nan")]),
        _events(["s", 1, "a", None, _NOW_US], ["s", 2, "a", None, None]),  # one bad event
    ],
    "capability end": [
        _events(["e", 1.5, 10, None]),
        _events(["e", 1, "10", None]),
        _events(["e", 1, float("inf"), None]),
        _events(["e", 1, 10, "boom"]),
        _events(["e", 1, 10, {"type": 1, "message": "m"}]),
        _events(["e", 1, 10, {"type": "runtime_error"}]),
    ],
    "done": [
        {"op": "done", "ok": "yes"},
        {"op": "done", "ok": True, "stdout_truncated": 1},
        {"op": "done", "ok": False},
        {"op": "done", "ok": False, "error": "boom"},
        {"op": "done", "ok": False, "error": {"type": "made_up", "message": "m"}},
        {"op": "done", "ok": False, "error": {"type": ["unhashable"], "message": "m"}},
        {"op": "done", "ok": False, "error": {"type": "protocol_error", "message": "m"}},
        {"op": "done", "ok": False, "error": {"type": "runtime_error", "message": 5}},
        {
            "op": "done",
            "ok": False,
            "error": {"type": "runtime_error", "message": "m", "traceback": 5},
        },
    ],
}


@pytest.mark.parametrize(
    "frame",
    [
        pytest.param(frame, id=f"{kind}-{i}")
        for kind, frames in MALFORMED.items()
        for i, frame in enumerate(frames)
    ],
)
def test_a_malformed_message_is_a_protocol_violation(frame: dict[str, Any]) -> None:
    with pytest.raises(ProtocolViolation):
        messages.parse(frame)


def test_well_formed_messages_parse_to_their_types() -> None:
    call = messages.parse({"op": "tool_call", "id": 7, "tool": "t:echo", "args": {"x": 1}})
    assert call == messages.ToolCallMessage(7, "t:echo", {"x": 1}, None)
    assert messages.parse({"op": "stdout", "data": "hi"}) == messages.StdoutMessage("hi")
    read = messages.parse({"op": "resource_read", "id": 8, "server": "s", "uri": "demo://x"})
    assert read == messages.ResourceReadMessage(8, "s", "demo://x")
    progress = messages.parse({"op": "progress", "message": "m", "done": 1, "total": 2.5})
    assert progress == messages.ProgressMessage("m", 1, 2.5)
    batch = messages.parse(_events(["s", 1, "a", "b", _NOW_US], ["e", 1, 250, None]))
    assert batch == messages.CapabilityEventsMessage(
        [
            messages.CapabilityStartMessage(1, "a", "b", float(_NOW_US)),
            messages.CapabilityEndMessage(1, 250.0, None),
        ]
    )
    done = messages.parse({"op": "done", "ok": True, "stdout_truncated": True, "result": [1]})
    assert done == messages.DoneMessage(True, True, [1], None)


def test_errors_the_child_reports_are_bounded_and_limited_to_child_types() -> None:
    (end,) = messages.parse_capability_events(
        _events(["e", 1, 10, {"type": "sandbox_unavailable", "message": "x" * 5000}])
    ).events
    assert isinstance(end, messages.CapabilityEndMessage) and end.error is not None
    assert end.error["type"] == "runtime_error"  # a type only the trusted side may claim
    assert len(end.error["message"]) == 2000
    done = messages.parse_done(
        {
            "op": "done",
            "ok": False,
            "error": {"type": "timeout", "message": "m" * 5000, "traceback": "t" * 20_000},
        }
    )
    assert done.error is not None and done.error["type"] == "timeout"
    assert len(done.error["message"]) == 4000 and len(done.error["traceback"]) == 16_000
