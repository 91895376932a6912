"""A tool call's failure keeps its type from the real toolhost to agent code, the trace and the response."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from tests.integration.mcp_servers import example_server
from tests.stack import E2EStack, stack_fixture

CALL_DEADLINE_S = 1.0  # AGENTCARDS_TOOL_CALL_TIMEOUT_S of this stack's sandbox worker

CATCH_TYPES = """
out = {}
for server, tool, kwargs in args["calls"]:
    try:
        await mcp[server][tool](**kwargs)
        out[server + ":" + tool] = "ok"
    except Exception as exc:
        out[server + ":" + tool] = exc.type
return out
"""


stack = stack_fixture(
    lambda tmp: {
        "example": example_server(tmp),
        "down": {"command": sys.executable, "args": ["-c", "raise SystemExit(3)"]},
    },
    synced_servers=1,  # `down` never starts
    learning=False,
    tool_call_timeout_s=CALL_DEADLINE_S,
)


@pytest.fixture(scope="module", autouse=True)
def unanswered_tools(stack: E2EStack) -> None:
    """Tools the scope check knows but no live server answers (example lacks one, down is down)."""
    with stack.db() as conn:
        conn.execute(
            "INSERT INTO tools (id, server, name, schema_hash) VALUES "
            "('example:vanished', 'example', 'vanished', 'x'), "
            "('down:anything', 'down', 'anything', 'x') ON CONFLICT (id) DO NOTHING"
        )


def _run(stack: E2EStack, code: str, args: dict[str, Any]) -> dict[str, Any]:
    with stack.client() as client:
        response = client.post(
            "/v1/executions", params={"wait": "true"}, json={"code": code, "args": args}
        )
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def test_timeout_unknown_tool_and_server_unavailable_reach_agent_code(stack: E2EStack) -> None:
    calls = [
        ["example", "slow", {"seconds": CALL_DEADLINE_S + 5}],
        ["example", "vanished", {}],
        ["down", "anything", {}],
    ]
    body = _run(stack, CATCH_TYPES, {"calls": calls})
    expected = {
        "example:slow": "timeout",
        "example:vanished": "unknown_tool",
        "down:anything": "server_unavailable",
    }
    assert body["status"] == "succeeded", body
    assert body["result"] == expected  # what agent code saw as ToolCallError.type
    assert {c["tool"]: c["error"]["type"] for c in body["tool_calls"]} == expected
    assert {f["tool"]: f["type"] for f in body["tool_failures"]} == expected
    with stack.db() as conn:
        row = conn.execute("SELECT trace FROM executions WHERE id = %s", (body["id"],)).fetchone()
    assert row is not None
    ends = {e["tool"]: e["error"]["type"] for e in row["trace"] if e["type"] == "tool_end"}
    assert ends == expected


def test_an_uncaught_tool_timeout_fails_the_run_as_timeout_not_tool_error(
    stack: E2EStack,
) -> None:
    body = _run(stack, "return await mcp.example.slow(seconds=args['s'])", {"s": 30})
    # The run itself did not hit its wall time (status failed, not timeout); its cause did.
    assert body["status"] == "failed", body
    assert body["error"]["type"] == "timeout"
    assert body["error"]["message"].startswith("example:slow: ")
