"""The gateway passes MCP through: progress, roots, sampling, elicitation and resources, with real npm servers.

Upstream clients are the SDK's ClientSession over streamable HTTP against the real
gateway; downstream are `@modelcontextprotocol/server-everything` and `-filesystem`.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest
import redis
from mcp import ClientSession, types
from mcp.client.session import ClientRequestContext
from mcp.client.streamable_http import streamable_http_client

from services.gateway.mcp.passthrough import LEASE_S
from tests.integration.mcp_servers import everything_server, filesystem_server
from tests.stack import E2EStack, mcp_session, stack_fixture, wait_until


def _servers(tmp: Path) -> dict[str, Any]:
    for name in ("granted", "other", "own"):
        (tmp / name).mkdir(exist_ok=True)
    return {
        "everything": everything_server(roots=[str(tmp / "granted")]),
        # Started with two directories; the configured root narrows it to one.
        "files": filesystem_server(tmp / "granted", tmp / "other", roots=[str(tmp / "granted")]),
        # No roots configured: the server keeps the directory it was started with.
        "ownfiles": filesystem_server(tmp / "own"),
    }


stack = stack_fixture(_servers, learning=False)

SAMPLING_TOOL = "everything:trigger-sampling-request"
ELICITATION_TOOL = "everything:trigger-elicitation-request"


@pytest.fixture(scope="module")
def ready(stack: E2EStack) -> E2EStack:
    """The stack once server-everything's capability-dependent tools are synced too."""

    def synced() -> bool:
        with stack.client() as client:
            ids = {t["id"] for t in client.get("/v1/tools").json()["tools"] if t["available"]}
        return {SAMPLING_TOOL, ELICITATION_TOOL} <= ids

    wait_until(synced, what="server-everything's conditional tools synced")
    return stack


def _structured(result: types.CallToolResult) -> dict[str, Any]:
    assert not result.is_error, result.content
    if result.structured_content:
        data: dict[str, Any] = result.structured_content
        return data.get("result", data) if set(data) == {"result"} else data
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return dict(json.loads(block.text))


async def _execute(session: ClientSession, code: str, **extra: Any) -> dict[str, Any]:
    return _structured(await session.call_tool("execute_code", {"code": code}, **extra))


def _sse_events(stack: E2EStack, execution_id: str) -> list[tuple[str, dict[str, Any]]]:
    events: list[tuple[str, dict[str, Any]]] = []
    name = ""
    with (
        stack.client() as client,
        client.stream("GET", f"/v1/executions/{execution_id}/events") as response,
    ):
        for line in response.iter_lines():
            if line.startswith("event:"):
                name = line.split(":", 1)[1].strip()
            elif line.startswith("data:"):
                events.append((name, json.loads(line.split(":", 1)[1])))
                if name == "execution.finished":
                    break
    return events


async def test_downstream_progress_reaches_the_mcp_caller_parented_to_its_tool_call(
    ready: E2EStack,
) -> None:
    code = """
progress("before", done=0, total=1)
return await mcp.everything["trigger-long-running-operation"](duration=0.6, steps=3)
"""
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    async with mcp_session(ready) as session:
        ran = await _execute(session, code, progress_callback=on_progress)
    assert ran["status"] == "succeeded", ran
    assert "Steps: 3" in json.dumps(ran["result"])
    tool_reports = [(p, t, m) for p, t, m in seen if m and m.startswith("everything:")]
    assert tool_reports == [
        (float(i), 3.0, f"everything:trigger-long-running-operation call-1: {i}/3")
        for i in (1, 2, 3)
    ]
    assert seen[0][2] == "before"  # the code's own progress still arrives as before

    progress_events = [e for name, e in _sse_events(ready, ran["id"]) if name == "tool_progress"]
    assert [(e["call_id"], e["tool"], e["progress"], e["total"]) for e in progress_events] == [
        ("call-1", "everything:trigger-long-running-operation", i, 3) for i in (1, 2, 3)
    ]


async def test_roots_are_answered_from_the_config_and_honoured(ready: E2EStack) -> None:
    code = """
return {
    "files": await mcp.files.list_allowed_directories(),
    "own": await mcp.ownfiles.list_allowed_directories(),
    "roots": await mcp.everything["get-roots-list"](),
}
"""
    with ready.client() as client:
        ran = client.post("/v1/executions", params={"wait": "true"}, json={"code": code}).json()
    assert ran["status"] == "succeeded", ran
    tmp = ready.tmp
    files, own = json.dumps(ran["result"]["files"]), json.dumps(ran["result"]["own"])
    # The filesystem server replaced its two start-up directories with the configured root.
    assert str(tmp / "granted") in files and str(tmp / "other") not in files
    # Without configured roots a server keeps its own directories (nothing is widened).
    assert str(tmp / "own") in own
    assert (tmp / "granted").as_uri() in json.dumps(ran["result"]["roots"])


def _sampling_answer(text: str, asked: list[types.CreateMessageRequestParams]) -> Any:
    """A client's sampling callback that records each request and answers ``text``."""

    async def sampling(
        context: ClientRequestContext, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult:
        asked.append(params)
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(type="text", text=text), model="test-model"
        )

    return sampling


async def test_sampling_reaches_the_client_and_its_answer_reaches_the_tool(
    ready: E2EStack,
) -> None:
    asked: list[types.CreateMessageRequestParams] = []
    sampling = _sampling_answer("forty-two, from the test client", asked)
    code = 'return await mcp.everything["trigger-sampling-request"](prompt="meaning of life", maxTokens=20)'
    async with mcp_session(ready, sampling_callback=sampling) as session:
        ran = await _execute(session, code)
    assert ran["status"] == "succeeded", ran
    assert "forty-two, from the test client" in json.dumps(ran["result"])
    assert len(asked) == 1
    prompt = asked[0].messages[0].content
    assert isinstance(prompt, types.TextContent) and "meaning of life" in prompt.text
    origin = (asked[0].meta or {}).get("agentcards/origin")
    assert origin == {
        "server": "everything",
        "tool": SAMPLING_TOOL,
        "call_id": "call-1",
        "execution_id": ran["id"],
    }


@pytest.mark.parametrize("tool", ["execute_code", "execute_capability"])
async def test_the_relay_is_advertised_before_the_run_is_enqueued(
    ready: E2EStack, tool: str
) -> None:
    # A tool that asks for sampling in its first instruction must find the client
    # listening: the advertisement reaches Redis before the task message does (read from
    # Redis' own MONITOR stream of commands, in the order it ran them).
    code = f"return {tool!r}"  # one capability per tool: the same code twice is a conflict
    with ready.client() as client:
        cap = client.post("/v1/capabilities", json={"code": code, "intent": f"one via {tool}"})
    assert cap.status_code == 201, cap.text
    commands: list[str] = []
    stop = threading.Event()
    monitor_ready = threading.Event()

    def watch() -> None:
        with redis.Redis.from_url(ready.settings.redis_url or "").monitor() as monitor:
            monitor_ready.set()
            for command in monitor.listen():
                commands.append(str(command["command"]))
                if stop.is_set():
                    return

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    monitor_ready.wait(10)
    arguments = (
        {"code": code, "no_cache": True}
        if tool == "execute_code"
        else {"capability_id": cap.json()["id"], "no_cache": True}
    )
    sampling = _sampling_answer("unused", [])
    async with mcp_session(ready, sampling_callback=sampling) as session:
        ran = _structured(await session.call_tool(tool, arguments))
    assert ran["status"] == "succeeded", ran
    stop.set()
    redis.Redis.from_url(ready.settings.redis_url or "").ping()  # one more command: wakes it
    watcher.join(10)
    advertised = next(
        i
        for i, c in enumerate(commands)
        if c.startswith("SET") and f"capabilities:{ran['id']}" in c
    )
    enqueued = next(
        i
        for i, c in enumerate(commands)
        if "PUSH" in c.split(" ", 1)[0] and ran["id"] in c and "task" in c
    )
    assert advertised < enqueued, (commands[advertised], commands[enqueued])


async def test_sampling_asked_after_the_relay_lease_would_have_lapsed_still_reaches_the_client(
    ready: E2EStack,
) -> None:
    # The advertisement is a lease the waiting gateway renews: a tool that asks late in a
    # long run (or in a re-run) still finds the client listening. This test once lost the
    # request: the relay's 5 s BLPOP met redis-py 8's 5 s socket timeout, and a request
    # popped as the client gave up went to a dropped connection.
    asked: list[types.CreateMessageRequestParams] = []
    sampling = _sampling_answer("late answer", asked)
    code = f"""
import asyncio
await asyncio.sleep({LEASE_S * 2})
return await mcp.everything["trigger-sampling-request"](prompt="still there?", maxTokens=5)
"""
    async with mcp_session(ready, sampling_callback=sampling) as session:
        ran = await _execute(session, code)
    assert ran["status"] == "succeeded", ran
    assert "late answer" in json.dumps(ran["result"]) and len(asked) == 1


async def test_a_capability_run_over_mcp_passes_progress_and_sampling_through(
    ready: E2EStack,
) -> None:
    # A learned capability is code like any other: its tools' progress and sampling
    # requests reach the client that called execute_capability, as they do for execute_code.
    code = """
steps = await mcp.everything["trigger-long-running-operation"](duration=0.3, steps=2)
answer = await mcp.everything["trigger-sampling-request"](prompt=args["prompt"], maxTokens=5)
return {"steps": steps, "answer": answer}
"""
    with ready.client() as client:
        created = client.post(
            "/v1/capabilities",
            json={"code": code, "intent": "ask the client's model a question after a slow step"},
        )
    assert created.status_code == 201, created.text
    asked: list[types.CreateMessageRequestParams] = []
    seen: list[str | None] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(message)

    async with mcp_session(
        ready, sampling_callback=_sampling_answer("from the caller", asked)
    ) as session:
        ran = _structured(
            await session.call_tool(
                "execute_capability",
                {"capability_id": created.json()["id"], "args": {"prompt": "who asks?"}},
                progress_callback=on_progress,
            )
        )
    assert ran["status"] == "succeeded", ran
    assert "from the caller" in json.dumps(ran["result"]["answer"]) and len(asked) == 1
    assert (asked[0].meta or {})["agentcards/origin"]["execution_id"] == ran["id"]
    assert [m for m in seen if m and m.startswith("everything:")] == [
        f"everything:trigger-long-running-operation call-1: {i}/2" for i in (1, 2)
    ]


async def test_elicitation_reaches_the_client_and_its_answer_reaches_the_tool(
    ready: E2EStack,
) -> None:
    messages: list[str] = []

    async def elicitation(
        context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        messages.append(params.message)
        return types.ElicitResult(action="accept", content={"name": "Ada Lovelace", "check": True})

    code = 'return await mcp.everything["trigger-elicitation-request"]()'
    async with mcp_session(ready, elicitation_callback=elicitation) as session:
        ran = await _execute(session, code)
    assert ran["status"] == "succeeded", ran
    assert messages and "provide inputs" in messages[0]
    assert "Ada Lovelace" in json.dumps(ran["result"])


REFUSAL_CODE = """
try:
    await mcp.everything["trigger-sampling-request"](prompt="hello", maxTokens=5)
except Exception as exc:  # ToolCallError
    return {"type": exc.type, "message": exc.message}
"""


async def test_sampling_is_refused_for_a_client_without_the_capability(ready: E2EStack) -> None:
    async with mcp_session(ready) as session:
        ran = await _execute(session, REFUSAL_CODE)
    assert ran["status"] == "succeeded", ran["error"]
    assert ran["result"]["type"] == "tool_error"
    assert "did not declare the sampling capability" in ran["result"]["message"]
    # MCP's own refusal code for a missing client capability, as the server read it
    assert "-32021" in ran["result"]["message"]


async def test_sampling_is_refused_for_a_rest_caller(ready: E2EStack) -> None:
    with ready.client() as client:
        ran = client.post(
            "/v1/executions", params={"wait": "true"}, json={"code": REFUSAL_CODE}
        ).json()
    assert ran["status"] == "succeeded", ran
    assert "no MCP client is waiting on this execution" in ran["result"]["message"]


STATIC_DOC = "demo://resource/static/document/architecture.md"


async def test_resources_are_listed_and_read_through_the_gateways_mcp_server(
    ready: E2EStack,
) -> None:
    async with mcp_session(ready) as session:
        listed = (await session.list_resources()).resources
        templates = (await session.list_resource_templates()).resource_templates
        gateway_uri = f"agentcards://everything/{STATIC_DOC}"
        assert gateway_uri in [str(r.uri) for r in listed]
        downstream = [r for r in listed if not str(r.uri).startswith("skill://")]  # skills: ours
        assert all(r.name.startswith("everything:") for r in downstream)
        assert "agentcards://everything/demo://resource/dynamic/text/{resourceId}" in [
            t.uri_template for t in templates
        ]
        read = await session.read_resource(gateway_uri)
        content = read.contents[0]
        assert isinstance(content, types.TextResourceContents)
        assert str(content.uri) == gateway_uri and len(content.text) > 100
        with pytest.raises(Exception, match="agentcards://<server>/"):
            await session.read_resource(STATIC_DOC)


async def test_resources_are_listed_and_read_over_rest(ready: E2EStack) -> None:
    with ready.client() as client:
        listed = client.get("/v1/resources").json()
        assert {"server": "everything", "uri": STATIC_DOC} in [
            {"server": r["server"], "uri": r["uri"]} for r in listed["resources"]
        ]
        read = client.get("/v1/resources/read", params={"server": "everything", "uri": STATIC_DOC})
        assert read.status_code == 200 and read.json()["contents"][0]["uri"] == STATIC_DOC
        missing = client.get(
            "/v1/resources/read", params={"server": "everything", "uri": "demo://nope"}
        )
        assert missing.status_code == 404 and missing.json()["error"]["type"] == "not_found"
        unknown = client.get("/v1/resources/read", params={"server": "nowhere", "uri": STATIC_DOC})
        assert unknown.status_code == 404 and "nowhere" in unknown.json()["error"]["message"]


def test_code_reads_a_resource_and_needs_the_server_in_scope(ready: E2EStack) -> None:
    code = """
links = await mcp.everything["get-resource-links"](count=1)
doc = await mcp.everything.read_resource(args["uri"])
return {"text": doc["contents"][0]["text"][:40], "links": links}
"""
    scoped = """
try:
    await mcp.everything.read_resource(args["uri"])
except Exception as exc:  # ToolCallError
    return exc.type
"""
    with ready.client() as client:
        ran = client.post(
            "/v1/executions",
            params={"wait": "true"},
            json={"code": code, "args": {"uri": STATIC_DOC}},
        ).json()
        assert ran["status"] == "succeeded", ran
        assert ran["result"]["text"]
        refused = client.post(
            "/v1/executions",
            params={"wait": "true"},
            json={
                "code": scoped,
                "args": {"uri": STATIC_DOC},
                "tools": ["files:list_allowed_directories"],
            },
        ).json()
    assert refused["status"] == "succeeded", refused
    assert refused["result"] == "tool_not_allowed"


async def test_the_gateway_declares_resources_and_lists_every_servers(ready: E2EStack) -> None:
    async with (
        streamable_http_client(f"{ready.gateway_url}/mcp") as (read, write),
        ClientSession(read, write) as session,
    ):
        initialized = await session.initialize()
    assert initialized.capabilities.resources is not None
    with ready.client() as client:
        listed = client.get("/v1/resources").json()
    assert listed["errors"] == {}  # servers without resources (filesystem) list none
    assert {r["server"] for r in listed["resources"]} == {"everything"}
