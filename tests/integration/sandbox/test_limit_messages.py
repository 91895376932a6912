"""Each limit's error has the right type and says what to do: the setting or request field behind it, or the way out."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from shared.sandbox.child import advice
from shared.sandbox.tools import LocalToolRegistry
from tests.integration.sandbox.conftest import Run


async def test_a_too_large_return_value_names_the_setting(run: Run) -> None:
    outcome = await run('"x" * (5 << 20)')
    assert outcome.status == "failed"
    assert outcome.error is not None and outcome.error["type"] == "output_limit"
    message = outcome.error["message"]
    assert "AGENTCARDS_SANDBOX_RESULT_BYTES" in message and "4 MiB" in message
    assert "return less" in message


async def test_a_too_large_tool_result_is_an_output_limit_not_a_tool_error(run: Run) -> None:
    outcome = await run("await mcp.t.huge()")  # 8 MiB against the 4 MiB default
    assert outcome.status == "failed"
    assert outcome.error is not None and outcome.error["type"] == "output_limit"
    message = outcome.error["message"]
    assert message.startswith("t:huge: ")
    assert "AGENTCARDS_SANDBOX_TOOL_RESULT_BYTES" in message and "ask the tool for less" in message
    end = next(e for e in outcome.trace if e["type"] == "tool_end")
    assert end["ok"] is False and end["error"]["type"] == "output_limit"


async def test_agent_code_can_catch_a_too_large_tool_result_by_its_type(run: Run) -> None:
    code = """
try:
    await mcp.t.huge()
except ToolCallError as e:
    return [e.type, e.tool]
"""
    outcome = await run(code)
    assert outcome.status == "succeeded", outcome.error
    assert outcome.result == ["output_limit", "t:huge"]


async def test_a_timeout_names_the_request_field_and_the_server_maximum(run: Run, limits) -> None:
    outcome = await run("import time\ntime.sleep(60)", limits=replace(limits, wall_time_s=1.0))
    assert outcome.status == "timeout"
    assert outcome.error is not None and outcome.error["type"] == "timeout"
    message = outcome.error["message"]
    assert "wall time limit of 1s exceeded" in message
    assert "`timeout_s`" in message and "at most 300s" in message
    assert "AGENTCARDS_SANDBOX_MAX_WALL_TIME_S" in message


async def test_a_timeout_at_the_server_maximum_says_timeout_s_cannot_go_higher(
    run: Run, limits
) -> None:
    at_max = replace(limits, wall_time_s=1.0, max_wall_time_s=1.0)
    outcome = await run("import time\ntime.sleep(60)", limits=at_max)
    assert outcome.error is not None and outcome.error["type"] == "timeout"
    message = outcome.error["message"]
    assert "AGENTCARDS_SANDBOX_MAX_WALL_TIME_S" in message
    assert "`timeout_s` cannot go above it" in message


@pytest.mark.parametrize(
    "code",
    [
        "import socket\nsocket.socket()",
        "import socket\nsocket.socket(socket.AF_UNIX)",
        "import socket\nsocket.getaddrinfo('example.com', 443)",
        "import urllib.request\nurllib.request.urlopen('http://example.com/', timeout=1)",
        "import urllib.request\nurllib.request.urlopen('http://127.0.0.1:9/', timeout=1)",
        "await asyncio.open_connection('10.0.0.1', 80)",
    ],
    ids=["socket", "unix_socket", "dns", "urllib_dns", "urllib_ip", "asyncio"],
)
async def test_a_network_attempt_says_there_is_no_network_and_to_use_tools(
    run: Run, code: str
) -> None:
    outcome = await run(code)
    assert outcome.status == "failed"
    assert outcome.error is not None and outcome.error["type"] == "runtime_error"
    message = outcome.error["message"]
    assert message.endswith(advice.NO_NETWORK)
    assert "The sandbox has no network" in message and "mcp.<server>.<tool>" in message


async def test_other_permission_errors_get_no_network_hint(run: Run) -> None:
    outcome = await run("open('/usr/lib/agentcards-nope', 'w')")
    assert outcome.error is not None and outcome.error["type"] == "runtime_error"
    assert "network" not in outcome.error["message"]


async def test_a_run_that_times_out_waiting_on_a_tool_says_which_call_held_it(
    run: Run, registry: LocalToolRegistry, limits
) -> None:
    async def hang() -> None:
        await asyncio.sleep(3600)

    registry.register("t:hang", hang)
    # A wall long enough that the code reaches its second call however slowly the sandbox
    # starts on a busy machine (with the suite's 3 s, a slow start could time out before it).
    outcome = await run(
        "await mcp.t.echo(x=1)\nawait mcp.t.hang()", limits=replace(limits, wall_time_s=8.0)
    )
    assert outcome.status == "timeout", outcome.error
    assert outcome.error is not None and outcome.error["type"] == "timeout"
    # The answered call is not listed; the one still out is, with how long it waited.
    (waiting,) = outcome.error["details"]["waiting_on"]
    assert waiting["tool"] == "t:hang" and waiting["call_id"] == "call-2"
    assert 0 < waiting["waited_s"] < outcome.duration_ms / 1000  # the time it held the run


async def test_a_run_that_times_out_on_its_own_code_lists_no_call(run: Run) -> None:
    outcome = await run("import time\ntime.sleep(10**6)")
    assert outcome.status == "timeout"
    assert outcome.error is not None and "details" not in outcome.error
