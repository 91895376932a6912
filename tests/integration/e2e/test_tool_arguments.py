"""Tool arguments are checked against the tool's input schema before the call leaves the worker.

The real `mcp-server-time` (PyPI) behind the real toolhost: calling `get_current_time`
without `timezone`, or with a misspelled one, reaches agent code as a ToolCallError of type
`invalid_arguments` naming the missing and unknown arguments and listing the valid ones
(not the server's raw `-32602`), and, uncaught, fails the run with that type.
"""

from __future__ import annotations

from typing import Any

from tests.integration.mcp_servers import time_server
from tests.stack import E2EStack, stack_fixture

stack = stack_fixture(lambda tmp: {"time": time_server()}, learning=False)

CATCH = """
out = {}
for label, kwargs in args["calls"]:
    try:
        value = await mcp.time.get_current_time(**kwargs)
        out[label] = {"ok": value["timezone"]}
    except ToolCallError as exc:
        out[label] = {"type": exc.type, "message": exc.message}
return out
"""


def _run(stack: E2EStack, code: str, args: dict[str, Any] | None = None) -> dict[str, Any]:
    with stack.client() as client:
        response = client.post(
            "/v1/executions", params={"wait": "true"}, json={"code": code, "args": args or {}}
        )
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def test_missing_and_unknown_arguments_are_named_with_the_valid_ones(stack: E2EStack) -> None:
    calls = [["none", {}], ["typo", {"timezon": "UTC"}], ["extra", {"timezone": "UTC", "tz": 1}]]
    calls.append(["valid", {"timezone": "Asia/Tokyo"}])
    body = _run(stack, CATCH, {"calls": calls})
    assert body["status"] == "succeeded", body
    out = body["result"]
    assert out["valid"] == {"ok": "Asia/Tokyo"}  # a fitting call still goes through
    for label in ("none", "typo", "extra"):
        assert out[label]["type"] == "invalid_arguments", out[label]
        message = out[label]["message"]
        assert "valid arguments: timezone (string, required)" in message, message
        assert "-32602" not in message and "undefined" not in message
    assert "missing required argument(s): timezone" in out["none"]["message"]
    assert "missing required argument(s): timezone" in out["typo"]["message"]
    assert "unknown argument(s): timezon" in out["typo"]["message"]
    assert "unknown argument(s): tz" in out["extra"]["message"]
    assert "missing" not in out["extra"]["message"]
    # The trace and the response name the refused calls with the same type.
    failed = [c["error"]["type"] for c in body["tool_calls"] if not c["ok"]]
    assert failed == ["invalid_arguments"] * 3


def test_uncaught_it_fails_the_run_with_that_type(stack: E2EStack) -> None:
    body = _run(stack, "return await mcp.time.get_current_time(zone='UTC')")
    assert body["status"] == "failed", body
    assert body["error"]["type"] == "invalid_arguments", body["error"]
    assert "unknown argument(s): zone" in body["error"]["message"]
    assert "missing required argument(s): timezone" in body["error"]["message"]
