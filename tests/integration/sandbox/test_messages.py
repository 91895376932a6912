"""A malformed message of each type, written by agent code straight to the channel, ends the run as protocol_error."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from tests.integration.sandbox.conftest import Run

# fd 3 is the channel; the frame is built by hand so no validation on the child side applies.
_WRITE_FRAME = """
import json, os, struct, time
body = json.dumps({frame}).encode()
os.write(3, struct.pack(">I", len(body)) + body)
time.sleep(0.5)
"""

# One per message type; the unhashable values must not escape the bridge as a TypeError.
MALFORMED = {
    "tool_call": '{"op": "tool_call", "id": 1, "tool": "t:echo", "args": {}, "parent": [1]}',
    "stdout": '{"op": "stdout", "data": 5}',
    "progress": '{"op": "progress", "message": "m", "done": "half"}',
    "capability start": '{"op": "capability_events", "events": [["s", 1, "a", None, "now"]]}',
    "capability end": '{"op": "capability_events", "events": [["e", 1, 10, "boom"]]}',
    "done": '{"op": "done", "ok": False, "error": {"type": [1], "message": "m"}}',
    "unknown op": '{"op": {"tool_call": 1}}',
}


async def test_each_malformed_message_type_ends_the_run_as_protocol_error(
    run: Run, host_intact: Callable[[], Awaitable[None]]
) -> None:
    for kind, frame in MALFORMED.items():
        outcome = await run(_WRITE_FRAME.format(frame=frame))
        assert outcome.status == "failed", kind
        assert outcome.error is not None and outcome.error["type"] == "protocol_error", kind
        assert "malformed message from the sandbox" in outcome.error["message"], kind
    await host_intact()
