"""An MCP client following a run is told, in its log lines, that a call waits for approval
and how it was answered."""

from __future__ import annotations

from services.gateway.mcp.log_messages import event_line


def test_a_paused_call_and_its_answer_become_log_lines() -> None:
    waiting = {"type": "approval", "call_id": "call-1", "tool": "bank:pay", "status": "pending"}
    assert event_line(waiting) == (
        "info",
        {"message": "bank:pay waits for approval", "call_id": "call-1"},
    )
    denied = {**waiting, "status": "denied", "by": "key:boss", "reason": "too much"}
    assert event_line(denied) == (
        "info",
        {
            "message": "bank:pay denied (approval)",
            "call_id": "call-1",
            "by": "key:boss",
            "reason": "too much",
        },
    )
