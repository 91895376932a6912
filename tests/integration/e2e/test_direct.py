"""Direct federation on the real stack, through the official MCP SDK client: each configured
server at /mcp/servers/<name> under its own names, all of them at /mcp/servers as
<server>.<tool>; keys' allow-lists, audit, the result cache and learning apply."""

from __future__ import annotations

import contextlib
import json
import re
import sys
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client, ClientSession, types
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import ResourceUpdated, ToolsListChanged
from mcp.server.streamable_http import REQUEST_CANCELLED
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError
from mcp.types.version import KNOWN_PROTOCOL_VERSIONS

from shared.auth.store import issue_key
from shared.db import connect
from shared.privacy.detect import TOKEN_PATTERN
from tests.integration.mcp_servers import (
    cache_test_server,
    everything_server,
    example_server,
    time_server,
)
from tests.integration.pii_server import PLANTED
from tests.integration.scale.test_gateway_replicas import INIT
from tests.stack import REPO, E2EStack, each_event, stack_fixture

# A call answered within this with nothing else to send is plain JSON (the default's 100 ms, made
# long here so that a loaded machine's quick call is still one).
JSON_WINDOW_MS = 10_000

e2e = stack_fixture(
    lambda tmp: {
        "example": example_server(tmp),
        "time": time_server(),
        "cache-test": cache_test_server(tmp / "cache-test", agentcards={"cache": {"ttl_s": 300}}),
        "everything": everything_server(),
        "crm": {
            "command": sys.executable,
            "args": ["-m", "tests.integration.pii_server"],
            "env": {"PII_TEST_DIR": str(tmp / "crm")},
            "cwd": str(REPO),
        },
    },
    mcp_json_answer_ms=JSON_WINDOW_MS,
)


@pytest.fixture(scope="module")
def keys(e2e: E2EStack) -> Iterator[dict[str, dict[str, str]]]:
    """Headers of an unrestricted key (``full``), of one limited to ``time:*`` (``time``) and
    of one whose /mcp is direct (``direct``)."""
    headers = {}
    with connect(e2e.settings.database_url or "") as conn:
        for label, patterns, mode in (
            ("full", None, None),
            ("time", ["time:*"], None),
            ("direct", None, "direct"),
        ):
            _, key = issue_key(conn, tenant_id="default", tool_patterns=patterns, mcp_mode=mode)
            headers[label] = {"Authorization": f"Bearer {key}"}
        _, key = issue_key(conn, tenant_id="default", executions_per_min=1)
        headers["slow"] = {"Authorization": f"Bearer {key}"}
        conn.commit()
    yield headers


@contextlib.asynccontextmanager
async def direct_init(
    stack: E2EStack, headers: dict[str, str], server: str | None = None, **options: Any
) -> AsyncIterator[tuple[ClientSession, types.InitializeResult]]:
    """An SDK session on /mcp/servers (or /mcp/servers/<server>) and its initialize result
    (``options``: the session's callbacks)."""
    path = "/mcp/servers" + (f"/{server}" if server else "")
    async with (
        create_mcp_http_client(headers=headers) as http,
        streamable_http_client(f"{stack.gateway_url}{path}", http_client=http) as (read, write),
        ClientSession(read, write, **options) as session,
    ):
        yield session, await session.initialize()


@contextlib.asynccontextmanager
async def direct(
    stack: E2EStack, headers: dict[str, str], server: str | None = None
) -> AsyncIterator[ClientSession]:
    """An initialized SDK session on /mcp/servers (or /mcp/servers/<server>)."""
    async with direct_init(stack, headers, server) as (session, _):
        yield session


def _text(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent), result
    return block.text


def _execution_id(result: types.CallToolResult) -> str:
    assert result.meta is not None, result
    return str(result.meta["agentcards/execution_id"])


def _wait(predicate: Any, what: str, timeout_s: float = 60) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if value := predicate():
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


async def test_a_server_is_served_under_its_own_names(
    e2e: E2EStack, keys: dict[str, dict[str, str]]
) -> None:
    async with direct(e2e, keys["full"], "example") as session:
        listed = {tool.name: tool for tool in (await session.list_tools()).tools}
        assert {"add", "multiply", "fail"} <= set(listed), listed
        assert all(not name.startswith("example") for name in listed)
        assert listed["add"].input_schema["properties"].keys() == {"a", "b"}
        result = await session.call_tool("add", {"a": 2, "b": 3})
        assert not result.is_error, result
        assert _text(result) == "5.0"
        assert result.structured_content == {"result": 5.0}
        failed = await session.call_tool("fail", {"message": "no luck"})
        assert failed.is_error and "no luck" in _text(failed)
    # The call is an execution like any other: its trace and tool_calls are the code path's.
    _assert_recorded(e2e, _execution_id(result), "example:add")


def _assert_recorded(stack: E2EStack, execution_id: str, tool_id: str) -> None:
    """The direct call's execution succeeded with one call of ``tool_id`` in its trace's
    ``tool_calls``, and its audit row is there (written just after the answer, by the
    gateway's drainer of direct calls' records)."""

    def recorded() -> Any:
        with stack.db() as conn:
            return conn.execute(
                "SELECT e.status, e.trace_summary, e.extras, a.action FROM executions e "
                "JOIN audit_log a ON a.execution_id = e.id WHERE e.id = %s",
                (execution_id,),
            ).fetchone()

    row = _wait(recorded, "the direct call's record", timeout_s=10)
    assert row is not None and row["status"] == "succeeded" and row["action"] == "execute"
    assert [c["tool"] for c in row["trace_summary"]["tool_calls"]] == [tool_id]
    assert row["extras"]["direct"]["tool"] == tool_id


async def test_the_aggregate_serves_every_server_as_server_dot_tool(
    e2e: E2EStack, keys: dict[str, dict[str, str]]
) -> None:
    async with direct(e2e, keys["full"]) as session:
        names = {tool.name for tool in (await session.list_tools()).tools}
        assert {"example.add", "time.get_current_time", "cache-test.counter"} <= names, names
        result = await session.call_tool("example.multiply", {"a": 4, "b": 5})
        assert not result.is_error and _text(result) == "20.0", result
        with pytest.raises(MCPError, match="no tool"):
            await session.call_tool("example.nope", {})


async def test_a_key_limited_to_one_server_neither_lists_nor_calls_the_others(
    e2e: E2EStack, keys: dict[str, dict[str, str]]
) -> None:
    async with direct(e2e, keys["time"]) as session:
        names = {tool.name for tool in (await session.list_tools()).tools}
        assert names and all(name.startswith("time.") for name in names), names
        with pytest.raises(MCPError, match="may not call example:add"):
            await session.call_tool("example.add", {"a": 1, "b": 2})
        now = await session.call_tool("time.get_current_time", {"timezone": "UTC"})
        assert not now.is_error, now
    async with direct(e2e, keys["time"], "example") as session:
        assert (await session.list_tools()).tools == []
        with pytest.raises(MCPError, match="may not call example:add") as refused:
            await session.call_tool("add", {"a": 1, "b": 2})
    # A refusal the client can tell from a crash: invalid request, typed as REST's 403.
    assert refused.value.error.code == types.INVALID_REQUEST
    assert refused.value.error.data["type"] == "tool_not_allowed"
    # Refused before anything ran: no execution of example:add for this key's calls.
    with e2e.db() as conn:
        rows = conn.execute(
            "SELECT count(*) AS n FROM executions WHERE extras->'direct'->>'tool' = 'example:add' "
            'AND args = \'{"a": 1, "b": 2}\'::jsonb'
        ).fetchone()
    assert rows is not None and rows["n"] == 0


async def test_a_read_only_call_is_answered_from_the_cache_the_second_time(
    e2e: E2EStack, keys: dict[str, dict[str, str]]
) -> None:
    async with direct(e2e, keys["full"], "cache-test") as session:
        first = await session.call_tool("counter", {"key": "direct"})
        second = await session.call_tool("counter", {"key": "direct"})
    assert not first.is_error and not second.is_error, (first, second)
    assert first.structured_content == second.structured_content  # the same n: not run again
    assert first.meta is not None and "agentcards/cache_hit" not in first.meta
    assert second.meta is not None and second.meta["agentcards/cache_hit"] == "execution"


async def test_direct_calls_are_audited_and_a_session_s_sequence_becomes_a_graph_edge(
    e2e: E2EStack, keys: dict[str, dict[str, str]]
) -> None:
    async with direct(e2e, keys["full"], "example") as session:
        first = await session.call_tool("divide", {"a": 9, "b": 3})
        second = await session.call_tool("multiply", {"a": 2, "b": 3})
    assert not first.is_error and not second.is_error

    def audit_row() -> Any:  # written just after the answer (the drainer of direct records)
        with e2e.db() as conn:
            return conn.execute(
                "SELECT action, key_id, status FROM audit_log WHERE execution_id = %s",
                (_execution_id(second),),
            ).fetchone()

    audited = _wait(audit_row, "the direct call's audit row", timeout_s=10)
    assert audited is not None and audited["action"] == "execute" and audited["key_id"]

    def edge() -> Any:
        with e2e.db() as conn:
            return conn.execute(
                "SELECT count FROM tool_edges WHERE src = 'example:divide' "
                "AND dst = 'example:multiply' AND kind = 'sequence'"
            ).fetchone()

    assert _wait(edge, "the sequence edge divide -> multiply")["count"] >= 1
    # Learned from the direct calls, yet no capability: a direct call has no intent.
    with e2e.db() as conn:
        learned = conn.execute(
            "SELECT learned_at, capability_id FROM executions WHERE id = %s",
            (_execution_id(second),),
        ).fetchone()
    assert learned is not None and learned["learned_at"] and learned["capability_id"] is None


async def test_a_call_refused_before_it_reaches_its_server_keeps_its_place_in_the_sequence(
    e2e: E2EStack, keys: dict[str, dict[str, str]]
) -> None:
    """A call's session sequence rides on its push to the toolhost; one refused before that
    (arguments its tool's schema rejects) still records its place in it."""
    async with direct(e2e, keys["full"], "example") as session:
        first = await session.call_tool("divide", {"a": 9, "b": 3})
        refused = await session.call_tool("multiply", {"a": "two"})
        third = await session.call_tool("divide", {"a": 8, "b": 2})
    assert not first.is_error and refused.is_error and not third.is_error, refused
    ids = [_execution_id(refused), _execution_id(third)]

    def afters() -> dict[str, str] | None:
        with e2e.db() as conn:
            rows = conn.execute(
                "SELECT id::text AS id, extras->'direct'->>'after' AS after FROM executions "
                "WHERE id::text = ANY(%s)",
                (ids,),
            ).fetchall()
        return {r["id"]: r["after"] for r in rows} if len(rows) == 2 else None

    after = _wait(afters, "both calls' rows", timeout_s=10)
    assert after == {ids[0]: "example:divide", ids[1]: "example:multiply"}


async def test_servers_say_where_they_are_served_directly_and_which_revision_they_speak(
    e2e: E2EStack, keys: dict[str, dict[str, str]]
) -> None:
    with httpx.Client(base_url=e2e.gateway_url, headers=keys["full"], timeout=30) as client:
        body = client.get("/v1/servers").json()
    assert body["direct"] == "/mcp/servers"
    servers = {s["name"]: s for s in body["servers"]}
    for name in ("example", "time", "cache-test"):
        assert servers[name]["direct"] == f"/mcp/servers/{name}"
        assert servers[name]["protocol_version"] in KNOWN_PROTOCOL_VERSIONS, servers[name]
    # The server's endpoint introduces itself with the downstream server's own instructions.
    async with direct_init(e2e, keys["full"], "example") as (_, initialized):
        assert initialized.server_info.name == "example"
        assert initialized.instructions == (
            "Deterministic example tools: notes, a calculator, a sample-file reader."
        )
    async with direct_init(e2e, keys["full"]) as (_, initialized):
        assert initialized.server_info.name == "agentcards-direct"
        assert "<server>.<tool>" in (initialized.instructions or "")
    with httpx.Client(base_url=e2e.gateway_url, headers=keys["full"], timeout=30) as client:
        missing = client.post("/mcp/servers/nope", json={})
    assert missing.status_code == 404 and "nope" in missing.json()["error"]["message"]


@contextlib.asynccontextmanager
async def on_mcp(stack: E2EStack, headers: dict[str, str]) -> AsyncIterator[ClientSession]:
    """An SDK session on /mcp itself."""
    async with (
        create_mcp_http_client(headers=headers) as http,
        streamable_http_client(f"{stack.gateway_url}/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


async def test_a_key_or_a_request_chooses_code_mode_direct_or_both_on_mcp(
    e2e: E2EStack, keys: dict[str, dict[str, str]]
) -> None:
    async def names(headers: dict[str, str]) -> set[str]:
        async with on_mcp(e2e, headers) as session:
            return {tool.name for tool in (await session.list_tools()).tools}

    code = await names(keys["full"])  # no mode anywhere: code mode, as before
    assert "execute_code" in code and not any("." in name for name in code)
    both = await names({**keys["full"], "X-AgentCards-Mode": "both"})
    assert both >= code | {"example.add", "time.get_current_time"}
    direct_only = await names(keys["direct"])  # the key's mode
    assert "example.add" in direct_only and "execute_code" not in direct_only
    assert await names({**keys["direct"], "X-AgentCards-Mode": "code"}) == code  # request wins
    async with on_mcp(e2e, keys["direct"]) as session:
        result = await session.call_tool("example.add", {"a": 1, "b": 1})
        assert not result.is_error and _text(result) == "2.0"
        with pytest.raises(MCPError, match="direct mode"):
            await session.call_tool("execute_code", {"code": "return 1"})
    with pytest.raises(BaseException) as refused:  # the SDK raises it in a task group
        await names({**keys["full"], "X-AgentCards-Mode": "sideways"})
    assert "must be one of code, direct, both, not 'sideways'" in _messages(refused.value)


BARE_BOTH = {"X-AgentCards-Mode": "both", "X-AgentCards-Tool-Names": "bare"}


async def test_with_bare_names_a_tool_is_listed_and_called_by_its_own_name_on_mcp(
    e2e: E2EStack, keys: dict[str, dict[str, str]]
) -> None:
    async with on_mcp(e2e, {**keys["full"], **BARE_BOTH}) as session:
        listed = {tool.name: tool for tool in (await session.list_tools()).tools}
        assert {"execute_code", "multiply", "get_current_time", "counter"} <= set(listed)
        assert not any(name.startswith(("example.", "time.")) for name in listed), listed
        assert listed["multiply"].meta == {"agentcards/tool": "example:multiply"}
        result = await session.call_tool("multiply", {"a": 6, "b": 7})
        assert not result.is_error and _text(result) == "42.0", result
        # code mode's tools answer beside them, by their names
        read = await session.call_tool("get_execution", {"execution_id": _execution_id(result)})
        assert not read.is_error and read.structured_content is not None, read
        assert read.structured_content["status"] == "succeeded", read
        with pytest.raises(MCPError, match="no tool 'nope' on any server") as unknown:
            await session.call_tool("nope", {})
    assert unknown.value.error.code == types.INVALID_PARAMS
    # The same path as a prefixed call: the execution's trace, tool_calls and audit row.
    _assert_recorded(e2e, _execution_id(result), "example:multiply")


async def test_with_bare_names_a_forbidden_tool_is_neither_listed_nor_callable(
    e2e: E2EStack, keys: dict[str, dict[str, str]]
) -> None:
    async with on_mcp(e2e, {**keys["time"], **BARE_BOTH}) as session:
        names = {tool.name for tool in (await session.list_tools()).tools}
        assert "get_current_time" in names and "multiply" not in names, names
        assert not any("multiply" in name for name in names), names
        with pytest.raises(MCPError, match="no tool 'multiply'") as refused:
            await session.call_tool("multiply", {"a": 5, "b": 11})
        now = await session.call_tool("get_current_time", {"timezone": "UTC"})
        assert not now.is_error, now
    assert refused.value.error.code == types.INVALID_PARAMS
    with e2e.db() as conn:  # refused before anything ran
        ran = conn.execute(
            "SELECT count(*) AS n FROM executions WHERE extras->'direct'->>'tool' = "
            "'example:multiply' AND args = '{\"a\": 5, \"b\": 11}'::jsonb"
        ).fetchone()
    assert ran is not None and ran["n"] == 0
    with pytest.raises(BaseException) as bad:  # the SDK raises it in a task group
        async with on_mcp(e2e, {**keys["full"], "X-AgentCards-Tool-Names": "short"}) as session:
            await session.list_tools()
    assert "must be one of prefixed, bare, not 'short'" in _messages(bad.value)


def _messages(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup):
        return " | ".join(_messages(inner) for inner in exc.exceptions)
    return str(exc)


def test_a_quick_call_is_answered_as_json_and_one_with_progress_as_a_resumable_stream(
    e2e: E2EStack, keys: dict[str, dict[str, str]]
) -> None:
    """In a 2025-11-25 session (raw HTTP), a call that ends within the window with nothing else
    to send is answered as plain JSON; one whose server sends progress opens its SSE stream: a
    priming event (an id, ``retry:``, no data), then each notification and the answer, each
    with an id, which a client resuming from the priming event (``Last-Event-ID``) is
    replayed."""
    url = f"{e2e.gateway_url}/mcp/servers/everything"
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                       "clientInfo": {"name": "raw", "version": "0"}}}  # fmt: skip
    accept = {"accept": "application/json, text/event-stream"}
    with httpx.Client(headers=keys["full"] | accept, timeout=60) as http:
        opened = http.post(url, json=init)
        session = {
            "mcp-session-id": opened.headers["mcp-session-id"],
            "mcp-protocol-version": "2025-11-25",
        }
        initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        assert http.post(url, json=initialized, headers=session).status_code == 202
        echo = {"name": "echo", "arguments": {"message": "quick"}}
        quick = http.post(
            url, json={"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": echo},
            headers=session,
        )  # fmt: skip
        assert quick.headers["content-type"] == "application/json", quick.text
        assert quick.headers["mcp-session-id"] == session["mcp-session-id"]
        answer = quick.json()
        assert answer["id"] == 2 and "quick" in answer["result"]["content"][0]["text"], answer
        slow = {"name": "trigger-long-running-operation",
                "arguments": {"duration": 1, "steps": 2}, "_meta": {"progressToken": "p"}}  # fmt: skip
        call = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": slow}
        with http.stream("POST", url, json=call, headers=session) as streamed:
            assert streamed.headers["content-type"].startswith("text/event-stream")
            primed, *events = each_event(streamed)
        resumed = session | {"accept": "text/event-stream", "last-event-id": primed["id"]}
        with http.stream("GET", url, headers=resumed) as again:
            replayed = [event for event, _ in zip(each_event(again), events, strict=False)]
    assert primed["id"] and primed["retry"] and primed["data"] == "", primed
    messages = [json.loads(event["data"]) for event in events]
    assert all(event["id"] for event in events), events
    assert [
        m["params"]["progressToken"]
        for m in messages
        if m.get("method") == "notifications/progress"
    ] == ["p", "p"], messages
    assert messages[-1]["id"] == 3 and not messages[-1]["result"].get("isError"), messages
    assert [event["data"] for event in replayed] == [event["data"] for event in events]


async def test_the_server_s_log_messages_during_a_call_reach_the_client(
    e2e: E2EStack, keys: dict[str, dict[str, str]]
) -> None:
    """Before the cancel test: the toolhost gives a log message to the execution whose call is
    in flight on the server's session, and drops it while several are (as for sampling)."""
    logged: list[types.LoggingMessageNotificationParams] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logged.append(params)

    async with direct_init(e2e, keys["full"], "example", logging_callback=on_log) as (
        session,
        initialized,
    ):
        assert initialized.capabilities.logging is not None
        await session.set_logging_level("info")
        result = await session.call_tool("log_and_echo", {"text": "hello"})
        assert not result.is_error and _text(result) == "hello", result
        await session.set_logging_level("warning")  # info is below it now
        await session.call_tool("log_and_echo", {"text": "quiet"})
    assert [(p.level, p.data["message"]) for p in logged] == [("info", "echoing hello")]
    assert logged[0].data["tool"] == "example:log_and_echo"


async def test_a_cancelled_direct_call_stops_its_execution(
    e2e: E2EStack, keys: dict[str, dict[str, str]]
) -> None:
    async with direct(e2e, keys["full"], "example") as session:
        with anyio.move_on_after(4):  # abandoning the request sends notifications/cancelled
            await session.call_tool("slow", {"seconds": 60})

    def ended() -> Any:
        with e2e.db() as conn:
            return conn.execute(
                "SELECT status FROM executions WHERE extras->'direct'->>'tool' = 'example:slow' "
                "AND status IN ('cancelled', 'succeeded', 'failed', 'timeout')"
            ).fetchone()

    assert _wait(ended, "the slow call's execution to end", timeout_s=30)["status"] == "cancelled"


async def test_a_call_cancelled_inside_the_json_window_ends_as_an_sse_event(
    e2e: E2EStack, keys: dict[str, dict[str, str]]
) -> None:
    """A call cancelled while its answer could still go back as JSON (the window is 10 s
    here) ends its POST as the SDK ends it after the window: an SSE event, REQUEST_CANCELLED.
    A JSON body instead reached the SDK's client after it had closed its session (it had
    abandoned the request) and failed its transport's task group."""
    url = f"{e2e.gateway_url}/mcp/servers/example"
    accept = {"accept": "application/json, text/event-stream"}
    async with httpx.AsyncClient(headers=keys["full"] | accept, timeout=30) as http:
        opened = await http.post(url, json=INIT)
        session = {
            "mcp-session-id": opened.headers["mcp-session-id"],
            "mcp-protocol-version": "2025-11-25",
        }
        initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        assert (await http.post(url, json=initialized, headers=session)).status_code == 202
        call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                "params": {"name": "slow", "arguments": {"seconds": 60}}}  # fmt: skip
        cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled",
                  "params": {"requestId": 7, "reason": "changed my mind"}}  # fmt: skip
        answered: list[httpx.Response] = []

        async def post_call() -> None:
            answered.append(await http.post(url, json=call, headers=session))

        with anyio.fail_after(20):
            async with anyio.create_task_group() as group:
                group.start_soon(post_call)
                await anyio.sleep(1)  # it runs
                assert (await http.post(url, json=cancel, headers=session)).status_code == 202
        await http.delete(url, headers=session)
    (answer,) = answered
    assert answer.headers["content-type"].startswith("text/event-stream"), answer.headers
    data = [
        json.loads(line[len("data:") :])
        for line in answer.text.splitlines()
        if line.startswith("data:") and line[len("data:") :].strip()
    ]
    assert data[-1]["id"] == 7 and data[-1]["error"]["code"] == REQUEST_CANCELLED, data


async def test_prompts_and_completions_are_the_server_s_own(
    e2e: E2EStack, keys: dict[str, dict[str, str]]
) -> None:
    async with direct(e2e, keys["full"], "everything") as session:
        prompts = {prompt.name for prompt in (await session.list_prompts()).prompts}
        assert {"simple-prompt", "args-prompt", "completable-prompt"} <= prompts, prompts
        got = await session.get_prompt("args-prompt", {"city": "Paris"})
        assert "Paris" in str(got.messages[0].content)
        completed = await session.complete(
            types.PromptReference(type="ref/prompt", name="completable-prompt"),
            {"name": "department", "value": "Eng"},
        )
        assert "Engineering" in completed.completion.values
    async with direct(e2e, keys["full"]) as session:  # the aggregate: <server>.<prompt>
        prompts = {prompt.name for prompt in (await session.list_prompts()).prompts}
        assert "everything.simple-prompt" in prompts and "simple-prompt" not in prompts
        got = await session.get_prompt("everything.args-prompt", {"city": "Oslo"})
        assert "Oslo" in str(got.messages[0].content)
        completed = await session.complete(
            types.PromptReference(type="ref/prompt", name="everything.completable-prompt"),
            {"name": "department", "value": "Eng"},
        )
        assert "Engineering" in completed.completion.values
    async with direct(e2e, keys["time"]) as session:  # no tool of everything: no prompts
        assert (await session.list_prompts()).prompts == []
        with pytest.raises(MCPError, match="no tool of server 'everything'"):
            await session.get_prompt("everything.simple-prompt")


async def test_personal_data_in_a_direct_result_reaches_the_client_as_tokens(
    e2e: E2EStack, keys: dict[str, dict[str, str]]
) -> None:
    async with direct(e2e, keys["full"], "crm") as session:
        result = await session.call_tool("customers", {})
    assert not result.is_error, result
    text = _text(result)
    assert re.search(TOKEN_PATTERN, text), text
    assert not [value for value in PLANTED if value in text]
    assert "Jane Doe" in text or "CUST-000042" in text  # the rest as it is


async def test_the_key_s_rate_limit_applies_to_direct_calls(
    e2e: E2EStack, keys: dict[str, dict[str, str]]
) -> None:
    async with direct(e2e, keys["slow"], "example") as session:
        first = await session.call_tool("add", {"a": 1, "b": 41})
        second = await session.call_tool("add", {"a": 2, "b": 40})
    assert not first.is_error, first
    assert second.is_error and '"rate_limited"' in _text(second), second


async def test_a_subscribed_resource_s_updates_reach_the_client(
    e2e: E2EStack, keys: dict[str, dict[str, str]]
) -> None:
    uri = "demo://resource/static/document/architecture.md"
    seen: list[str] = []
    updated = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            seen.append(str(message.params.uri))
            updated.set()

    async with direct_init(e2e, keys["full"], "everything", message_handler=on_message) as (
        session,
        initialized,
    ):
        resources = initialized.capabilities.resources
        assert resources is not None and resources.subscribe
        await session.subscribe_resource(uri)
        await _updates_on(session.call_tool)
        with anyio.fail_after(30):
            await updated.wait()
    assert seen[0] == uri


async def test_a_key_without_the_server_is_refused_a_subscription_as_a_forbidden_call(
    e2e: E2EStack, keys: dict[str, dict[str, str]]
) -> None:
    """``resources/subscribe`` on a server the key's allow-list has no tool of: invalid
    request typed ``tool_not_allowed``, as a forbidden ``tools/call`` (not an internal error)."""
    uri = "demo://resource/static/document/architecture.md"
    async with direct(e2e, keys["time"], "everything") as session:
        with pytest.raises(MCPError) as refused:
            await session.subscribe_resource(uri)
    assert refused.value.error.code == types.INVALID_REQUEST, refused.value.error
    assert refused.value.error.data["type"] == "tool_not_allowed"
    assert "everything" in refused.value.error.message


async def test_a_listening_client_hears_of_a_resource_s_updates(
    e2e: E2EStack, keys: dict[str, dict[str, str]]
) -> None:
    """At 2026-07-28 (no session): a ``subscriptions/listen`` stream naming a resource carries
    its server's updates; one naming a resource of a server the key may not use is refused."""
    uri = "demo://resource/static/document/architecture.md"
    url = f"{e2e.gateway_url}/mcp/servers/everything"
    async with (
        create_mcp_http_client(headers=keys["full"]) as http,
        Client(streamable_http_client(url, http_client=http)) as client,
    ):
        assert client.protocol_version == "2026-07-28"
        declared = client.server_capabilities.resources
        assert declared is not None and declared.subscribe and declared.list_changed
        async with client.listen(resource_subscriptions=[uri]) as stream:
            assert stream.honored.resource_subscriptions == [uri]
            await _updates_on(client.call_tool)
            with anyio.fail_after(30):
                event = await anext(aiter(stream))
    assert event == ResourceUpdated(uri=uri)
    async with (
        create_mcp_http_client(headers=keys["time"]) as http,
        Client(streamable_http_client(url, http_client=http)) as client,
    ):
        with pytest.raises(MCPError) as refused:
            async with client.listen(resource_subscriptions=[uri]):
                pass
    assert "everything" in refused.value.error.message
    assert refused.value.error.data["type"] == "tool_not_allowed"  # as resources/subscribe's
    assert refused.value.error.code == types.INVALID_REQUEST  # as a forbidden tools/call's


async def _updates_on(call_tool: Any) -> None:
    """Have server-everything send its subscribers updates (every 5 s): its tool toggles them
    for the toolhost's one session, which an earlier test may have turned on."""
    for _ in range(2):
        toggled = await call_tool("toggle-subscriber-updates", {})
        assert not toggled.is_error, toggled
        if "Started" in _text(toggled):
            return
    raise AssertionError(f"updates not started: {_text(toggled)}")


async def test_a_prompt_the_server_adds_is_announced_with_list_changed(
    e2e: E2EStack, keys: dict[str, dict[str, str]]
) -> None:
    told = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.PromptListChangedNotification):
            told.set()

    async with direct_init(e2e, keys["full"], "example", message_handler=on_message) as (
        session,
        initialized,
    ):
        prompts = initialized.capabilities.prompts
        assert prompts is not None and prompts.list_changed
        assert "extra" not in {p.name for p in (await session.list_prompts()).prompts}
        added = await session.call_tool("add_extra_prompt", {})
        assert not added.is_error, added
        with anyio.fail_after(30):
            await told.wait()
        assert "extra" in {p.name for p in (await session.list_prompts()).prompts}


async def test_a_tool_the_server_adds_is_announced_with_list_changed(
    e2e: E2EStack, keys: dict[str, dict[str, str]]
) -> None:
    """Last in this module: it leaves the example server with one more tool. Told: a client of
    the server's endpoint, one of /mcp in both mode, and a 2026-07-28 client of /mcp in both
    mode listening for tool list changes (no session to notify: its listen stream)."""
    direct_told, both_told = anyio.Event(), anyio.Event()

    def on(event: anyio.Event) -> Any:
        async def handler(message: Any) -> None:
            if isinstance(message, types.ToolListChangedNotification):
                event.set()

        return handler

    both = {**keys["full"], "X-AgentCards-Mode": "both"}
    async with (
        direct_init(e2e, keys["full"], "example", message_handler=on(direct_told)) as (
            session,
            initialized,
        ),
        create_mcp_http_client(headers=both) as http,
        streamable_http_client(f"{e2e.gateway_url}/mcp", http_client=http) as (read, write),
        ClientSession(read, write, message_handler=on(both_told)) as on_mcp_both,
        create_mcp_http_client(headers=both) as modern_http,
        Client(streamable_http_client(f"{e2e.gateway_url}/mcp", http_client=modern_http)) as modern,
        modern.listen(tools_list_changed=True) as stream,
    ):
        assert modern.protocol_version == "2026-07-28" and stream.honored.tools_list_changed
        mcp_initialized = await on_mcp_both.initialize()
        for announced in (initialized, mcp_initialized):
            assert announced.capabilities.tools and announced.capabilities.tools.list_changed
        assert "example.extra" not in {t.name for t in (await on_mcp_both.list_tools()).tools}
        assert "extra" not in {tool.name for tool in (await session.list_tools()).tools}
        added = await session.call_tool("add_extra_tool", {})
        assert not added.is_error, added
        with anyio.fail_after(30):
            await direct_told.wait()
            await both_told.wait()
            heard = await anext(aiter(stream))
        assert heard == ToolsListChanged()
        assert "extra" in {tool.name for tool in (await session.list_tools()).tools}
        assert "example.extra" in {t.name for t in (await on_mcp_both.list_tools()).tools}
