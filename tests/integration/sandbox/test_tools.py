"""Tool-channel attacks and bridge behaviour: scope, sizes, hostile results, malformed frames, concurrency."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

from shared.sandbox.tools import ToolResult, ToolSpec
from tests.integration.sandbox.conftest import Run


async def test_out_of_scope_tool_is_refused_and_traced(run: Run, host_intact) -> None:
    outcome = await run("await mcp.secrets.dump()")
    assert outcome.status == "failed"
    assert outcome.error is not None and outcome.error["type"] == "tool_not_allowed"
    ends = [e for e in outcome.trace if e["type"] == "tool_end"]
    assert ends and ends[0]["tool"] == "secrets:dump" and ends[0]["ok"] is False
    await host_intact()


async def test_oversized_tool_arguments(run: Run, limits, host_intact) -> None:
    small = replace(limits, tool_args_bytes=1024)
    outcome = await run('await mcp.t.echo(blob="x" * 5000)', limits=small)
    assert outcome.status == "failed"
    assert outcome.error is not None and outcome.error["type"] == "tool_args_too_large"
    await host_intact()


async def test_bridge_checks_argument_size_even_if_child_lies(
    run: Run, limits, host_intact
) -> None:
    # Agent code writes its own tool_call frame straight onto the channel, skipping the
    # child's pre-check: the trusted side must refuse it by itself.
    code = """
import json, os, struct
body = json.dumps({"op": "tool_call", "id": 999, "tool": "t:echo", "parent": None,
                   "args": {"blob": "y" * 4000}}).encode()
os.write(3, struct.pack(">I", len(body)) + body)  # fd 3 is the channel
import time
time.sleep(0.3)
"sent"
"""
    small = replace(limits, tool_args_bytes=1024)
    outcome = await run(code, limits=small)
    ends = [e for e in outcome.trace if e["type"] == "tool_end"]
    assert ends and ends[0]["ok"] is False
    assert ends[0]["error"]["type"] == "tool_args_too_large"
    await host_intact()


async def test_malformed_frames_end_with_protocol_error(run: Run, host_intact) -> None:
    for payload in (
        "b'\\x00\\x00\\x00\\x05hello'",
        "b'\\x00\\x00\\x00\\x02[]'",
        'b\'\\x00\\x00\\x00\\x0e{"op":"nope"}\'',
        "b'\\x7f\\xff\\xff\\xff'",
        'b\'\\x00\\x00\\x00\\x1c{"op":"tool_call","id":"x"}\'',
    ):
        code = f"import os, time\nos.write(3, {payload})\ntime.sleep(2)"
        outcome = await run(code)
        assert outcome.status == "failed", payload
        assert outcome.error is not None and outcome.error["type"] == "protocol_error", payload
    await host_intact()


async def test_hostile_tool_results_do_not_crash_anything(run: Run, host_intact) -> None:
    code = """
out = {}
for name in ("bomb", "bigint", "deep", "huge", "fail"):
    try:
        await getattr(mcp.t, name)()
        out[name] = "OK"
    except ToolCallError as e:
        out[name] = e.type
out
"""
    outcome = await run(code.replace("ToolCallError", "Exception"))
    assert outcome.status == "succeeded", outcome.error
    assert "OK" not in str(outcome.result), outcome.result
    ends = {e["tool"]: e for e in outcome.trace if e["type"] == "tool_end"}
    assert all(not ends[f"t:{n}"]["ok"] for n in ("bomb", "bigint", "deep", "huge", "fail"))
    await host_intact()


async def test_tool_call_limit(run: Run, limits, host_intact) -> None:
    outcome = await run(
        "for i in range(10):\n    await mcp.t.echo(i=i)", limits=replace(limits, max_tool_calls=3)
    )
    assert outcome.status == "failed"
    assert outcome.error is not None and outcome.error["type"] == "tool_call_limit"
    assert outcome.tool_calls == 3
    await host_intact()


async def test_gather_runs_tool_calls_concurrently(run: Run) -> None:
    code = "import asyncio\nawait asyncio.gather(mcp.t.slow(x=1), mcp.t.slow(x=2))"
    outcome = await run(code)
    assert outcome.status == "succeeded", outcome.error
    assert outcome.result == [1, 2]
    starts = {e["call_id"]: e["ts"] for e in outcome.trace if e["type"] == "tool_start"}
    ends = {e["call_id"]: e["ts"] for e in outcome.trace if e["type"] == "tool_end"}
    assert len(starts) == 2
    # Both calls started before either finished: they overlapped on the bridge.
    assert max(starts.values()) < min(ends.values())


async def test_trace_events_have_the_documented_shape(run: Run) -> None:
    outcome = await run(
        "await mcp.t.echo(a=1)\ntry:\n    await mcp.t.fail()\nexcept Exception:\n    pass"
    )
    assert outcome.status == "succeeded", outcome.error
    start, end, _start2, end2 = outcome.trace
    assert start["type"] == "tool_start" and start["tool"] == "t:echo" and start["parent"] is None
    assert isinstance(start["ts"], float) and start["call_id"] == end["call_id"]
    assert end["ok"] is True and end["error"] is None and end["duration_ms"] >= 0
    assert end2["ok"] is False and end2["error"]["type"] == "tool_error"
    assert "ZeroDivisionError" in end2["error"]["message"]


class _FailingBackend:
    """Fails every call ``f:<type>`` with that structured type, as a toolhost reply would."""

    async def call(self, tool_id: str, args: dict[str, Any], deadline: float) -> ToolResult:
        kind = tool_id.partition(":")[2]
        return ToolResult.failure(f"failed as {kind}", kind=kind)


class _OkBackend:
    """Answers every call with its tool id."""

    async def call(self, tool_id: str, args: dict[str, Any], deadline: float) -> ToolResult:
        return ToolResult.success(tool_id)


class _DeafBackend:
    """Ignores the deadline it is given (a broken backend): the bridge's backstop ends the call."""

    async def call(self, tool_id: str, args: dict[str, Any], deadline: float) -> ToolResult:
        await asyncio.sleep(60)
        return ToolResult.success(None)


CATCH_TYPES = """
out = {}
for server, tool in args["calls"]:
    try:
        await mcp[server][tool]()
        out[server + ":" + tool] = "ok"
    except Exception as exc:
        out[server + ":" + tool] = exc.type
out
"""


async def _catch_types(run: Run, calls: list[list[str]], backend: Any, **kw: Any) -> Any:
    """Run CATCH_TYPES over ``calls`` ([server, tool]), every one of them granted."""
    tools = {f"{s}:{t}": ToolSpec(f"{s}:{t}") for s, t in calls}
    return await run(CATCH_TYPES, args={"calls": calls}, tools=tools, backend=backend, **kw)


async def test_backend_failure_types_reach_agent_code_and_the_trace(run: Run) -> None:
    kinds = ["timeout", "unknown_tool", "server_unavailable", "internal_error", "tool_error"]
    calls = [["f", kind] for kind in [*kinds, "made_up"]]
    outcome = await _catch_types(run, calls, _FailingBackend())
    assert outcome.status == "succeeded", outcome.error
    # Each keeps its type; a type outside the vocabulary becomes tool_error.
    expected = {f"f:{kind}": kind for kind in kinds} | {"f:made_up": "tool_error"}
    assert outcome.result == expected
    ends = {e["tool"]: e["error"]["type"] for e in outcome.trace if e["type"] == "tool_end"}
    assert ends == expected


async def test_an_uncaught_tool_failure_fails_the_execution_with_its_type(run: Run) -> None:
    outcome = await run(
        "await mcp.f.unknown_tool()",
        tools={"f:unknown_tool": ToolSpec("f:unknown_tool")},
        backend=_FailingBackend(),
    )
    assert outcome.status == "failed"
    assert outcome.error is not None and outcome.error["type"] == "unknown_tool"
    assert "f:unknown_tool" in outcome.error["message"]


async def test_a_backend_overrunning_the_call_deadline_is_a_timeout(run: Run, limits) -> None:
    outcome = await _catch_types(
        run, [["deaf", "call"]], _DeafBackend(), limits=replace(limits, tool_call_timeout_s=0.2)
    )
    assert outcome.status == "succeeded", outcome.error
    assert outcome.result == {"deaf:call": "timeout"}


async def test_the_bridge_refuses_tool_ids_outside_the_rule_even_if_granted(run: Run) -> None:
    calls = [["srv", "get/x"], ["a.b", "x"], ["srv", "get.x"]]
    outcome = await _catch_types(run, calls, _OkBackend())
    assert outcome.status == "succeeded", outcome.error
    assert outcome.result == {
        "srv:get/x": "tool_not_allowed",
        "a.b:x": "tool_not_allowed",
        "srv:get.x": "ok",
    }
    refusal = next(e for e in outcome.trace if e["type"] == "tool_end" and e["tool"] == "a.b:x")
    assert "tool ids look like 'server:tool'" in refusal["error"]["message"]
