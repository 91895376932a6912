"""The client side of MCP Tasks (``io.modelcontextprotocol/tasks``) for the tests: the SDK
client declaring the extension, the task result and methods as models (the SDK has none),
and polling."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any, Literal

import pytest
from mcp import Client, types
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError
from pydantic import Field

from tests.stack import E2EStack

EXTENSION = "io.modelcontextprotocol/tasks"
TERMINAL = {"completed", "failed", "cancelled"}


class CreateTaskResult(types.Result):
    """The ``tools/call`` answer that is a task (the SDK has no model for it)."""

    result_type: Literal["task"] = "task"
    task_id: str
    status: str
    created_at: str
    last_updated_at: str
    ttl_ms: int | None = None
    poll_interval_ms: int | None = None


class TaskParams(types.RequestParams):
    task_id: str


class GetTask(types.Request[TaskParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    name_param = "taskId"  # the SDK mirrors it into Mcp-Name


class UpdateParams(TaskParams):
    input_responses: dict[str, Any]


class UpdateTask(types.Request[UpdateParams, Literal["tasks/update"]]):
    method: Literal["tasks/update"] = "tasks/update"
    name_param = "taskId"


class CancelTask(types.Request[TaskParams, Literal["tasks/cancel"]]):
    method: Literal["tasks/cancel"] = "tasks/cancel"
    name_param = "taskId"


class TaskRead(types.Result):
    model_config = types.Result.model_config | {"extra": "allow"}
    task_id: str | None = Field(default=None)
    status: str | None = None


class Tasks(ClientExtension):
    """The client side: declares the extension and accepts a task as a tools/call answer."""

    identifier = EXTENSION

    def claims(self) -> list[ResultClaim[Any]]:
        async def unresolved(result: CreateTaskResult, ctx: ClaimContext) -> types.CallToolResult:
            raise AssertionError("the tests call with allow_claimed=True")

        return [ResultClaim(result_type="task", model=CreateTaskResult, resolve=unresolved)]


def task_client(
    stack: E2EStack, *, tasks: bool = True, url: str | None = None, elicitation: bool = False
) -> Any:
    """An httpx client and an SDK client on /mcp (or ``url``), declaring the extension unless
    not ``tasks`` (and elicitation with ``elicitation``, its questions never asked mid-call
    at 2026-07-28): enter both."""
    http = create_mcp_http_client(headers=stack.headers)
    where = url or f"{stack.gateway_url}/mcp"
    transport = streamable_http_client(where, http_client=http)

    async def never(context: Any, params: Any) -> Any:
        raise AssertionError("a 2026-07-28 server asks in results, not mid-call")

    return http, Client(
        transport,
        extensions=[Tasks()] if tasks else None,
        elicitation_callback=never if elicitation else None,
    )


async def call_code(client: Client, code: str, **arguments: Any) -> Any:
    """``execute_code`` of ``code`` (never from the cache): its result, or its task."""
    body = {"code": code, "no_cache": True, **arguments}
    return await client.session.call_tool("execute_code", body, allow_claimed=True)


async def get_task(client: Client, task_id: str) -> dict[str, Any]:
    read = await client.session.send_request(GetTask(params=TaskParams(task_id=task_id)), TaskRead)
    return read.model_dump(by_alias=True, mode="json", exclude_none=True)


async def until_status(
    client: Client, task_id: str, status: str, *, timeout_s: float = 60
) -> dict[str, Any]:
    """The task once it shows ``status`` (or ends)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        read = await get_task(client, task_id)
        if read["status"] == status or read["status"] in TERMINAL:
            return read
        await asyncio.sleep(0.2)
    raise AssertionError(f"task {task_id} still {read['status']} after {timeout_s}s")


async def until_done(client: Client, task_id: str, *, timeout_s: float = 60) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        read = await get_task(client, task_id)
        if read["status"] in TERMINAL:
            return read
        await asyncio.sleep(0.2)
    raise AssertionError(f"task {task_id} still {read['status']} after {timeout_s}s")


def bare(result: types.Result) -> dict[str, Any]:
    """A result's wire fields but its ``_meta`` (the server's identity stamp)."""
    return result.model_dump(by_alias=True, mode="json", exclude_none=True, exclude={"meta"})


async def refused(call: Any) -> int:
    with pytest.raises(MCPError) as caught:
        await call
    return caught.value.error.code


class LegacySession:
    """A 2025-11-25 session on ``path`` over plain HTTP, for the spec's experimental tasks
    (``params.task``, ``tasks/get`` ...): the steps a test needs around a process it kills,
    where the TypeScript SDK's client (legacy_tasks_client.mjs) cannot pause."""

    def __init__(self, stack: E2EStack, path: str = "/mcp") -> None:
        self._stack, self._path, self._headers = stack, path, {}
        params = {"protocolVersion": "2025-11-25", "capabilities": {},
                  "clientInfo": {"name": "legacy-tasks-test", "version": "1"}}  # fmt: skip
        response, init = self._post({"id": 1, "method": "initialize", "params": params})
        assert init["result"]["capabilities"]["tasks"]["requests"] == {"tools": {"call": {}}}
        self._headers = {"Mcp-Session-Id": response.headers["mcp-session-id"],
                         "MCP-Protocol-Version": "2025-11-25"}  # fmt: skip
        self._post({"method": "notifications/initialized"})

    def _post(self, body: dict[str, Any]) -> tuple[Any, Any]:
        headers = {"Accept": "application/json, text/event-stream", **self._headers}
        with self._stack.client() as client:
            response = client.post(self._path, json={"jsonrpc": "2.0", **body}, headers=headers)
        if response.content and response.headers["content-type"] == "application/json":
            return response, response.json()  # a call answered at once (no stream)
        lines = [line[5:] for line in response.text.splitlines() if line.startswith("data:")]
        return response, json.loads(lines[-1]) if lines and lines[-1].strip() else None

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """The JSON-RPC reply (``result`` or ``error``) to one request."""
        _, reply = self._post({"id": 2, "method": method, "params": params})
        return dict(reply)

    def until_done(self, task_id: str, *, timeout_s: float = 60) -> dict[str, Any]:
        """``tasks/get`` until the task ended: its last ``Task``."""
        deadline = time.monotonic() + timeout_s
        while True:
            task = self.request("tasks/get", {"taskId": task_id})["result"]
            if task["status"] in TERMINAL or time.monotonic() > deadline:
                return task
            time.sleep(0.5)
