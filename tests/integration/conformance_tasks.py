"""The Tasks extension (``io.modelcontextprotocol/tasks``, SEP-2663) on the reference
conformance server (a test fixture): the suite's tasks fixtures as a task-supporting server
implements them, tasks held in this process's memory.

A client that declared the extension on its request gets a task from ``slow_compute``,
``failing_job``, ``protocol_error_job``, ``confirm_delete``, ``multi_input`` and (on its
final round) ``test_tool_with_task``; ``greet`` always answers at once. ``failing_job`` and
``test_tool_with_task`` require the extension (``-32021`` without it); the others run
synchronously for a client that did not declare it. A task that asks the client something
is ``input_required`` with its questions in ``inputRequests`` until ``tasks/update``
answers every one of them.
"""

from __future__ import annotations

import asyncio
import datetime
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.server.mcpserver.server import require_client_extension
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import MCP_NAME_HEADER, decode_header_value
from mcp_types.jsonrpc import HEADER_MISMATCH
from pydantic import Field
from starlette.requests import Request

EXTENSION = "io.modelcontextprotocol/tasks"
TTL_MS = 600_000
POLL_MS = 200
_DECLARED = types.ClientCapabilities(extensions={EXTENSION: {}})

Context = ServerRequestContext[Any, Any]


class TaskParams(types.RequestParams):
    task_id: str


class UpdateParams(TaskParams):
    input_responses: dict[str, Any] = Field(default_factory=dict)


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat()


@dataclass
class Task:
    """One task: its status, its open questions and (once ended) its result or error."""

    id: str
    created: str
    updated: str
    status: str = "working"
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    asked: dict[str, dict[str, Any]] = field(default_factory=dict)
    answers: dict[str, Any] = field(default_factory=dict)
    answered: asyncio.Event = field(default_factory=asyncio.Event)
    runner: asyncio.Task[None] | None = None

    def envelope(self) -> dict[str, Any]:
        return {
            "taskId": self.id,
            "status": self.status,
            "createdAt": self.created,
            "lastUpdatedAt": self.updated,
            "ttlMs": TTL_MS,
            "pollIntervalMs": POLL_MS,
        }

    def detailed(self) -> dict[str, Any]:
        body = self.envelope()
        if self.status == "input_required":
            body["inputRequests"] = dict(self.asked)
        elif self.status == "completed":
            body["result"] = self.result
        elif self.status == "failed":
            body["error"] = self.error
        return body

    def move(self, status: str) -> None:
        self.status, self.updated = status, _now()

    async def ask(self, questions: dict[str, dict[str, Any]]) -> dict[str, Any]:
        """Park the task on ``questions`` until every one is answered; the answers."""
        keys = {f"{key}-{secrets.token_hex(4)}": key for key in questions}
        self.asked.update({new: questions[old] for new, old in keys.items()})
        self.move("input_required")
        while any(new not in self.answers for new in keys):
            self.answered.clear()
            await self.answered.wait()
        if not self.asked:  # (two questions asked at once: the other may still be open)
            self.move("working")
        return {old: self.answers[new] for new, old in keys.items()}


TASKS: dict[str, Task] = {}
_RUNNING: set[asyncio.Task[None]] = set()
Work = Callable[[Task], Awaitable[types.CallToolResult]]


def declared(ctx: Context) -> bool:
    """Whether this request declared the extension."""
    return bool(ctx.session.check_client_capability(_DECLARED))


def start(work: Work) -> dict[str, Any]:
    """A task running ``work``; its CreateTaskResult."""
    stamp = _now()
    task = Task(id=secrets.token_urlsafe(18), created=stamp, updated=stamp)
    TASKS[task.id] = task

    async def run() -> None:
        try:
            result = await work(task)
        except MCPError as exc:
            task.error = exc.error.model_dump(by_alias=True, mode="json", exclude_none=True)
            task.move("failed")
            return
        task.result = result.model_dump(by_alias=True, mode="json", exclude_none=True)
        task.move("completed")

    task.runner = asyncio.get_running_loop().create_task(run())
    _RUNNING.add(task.runner)
    task.runner.add_done_callback(_RUNNING.discard)
    return {"resultType": "task", **task.envelope()}


def _text(text: str, *, is_error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)], is_error=is_error
    )


def confirm(message: str) -> dict[str, Any]:
    schema = {"type": "object", "properties": {"confirm": {"type": "boolean"}}}
    return {
        "method": "elicitation/create",
        "params": {"mode": "form", "message": message, "requestedSchema": schema},
    }


async def _slow(task: Task, seconds: float, label: str) -> types.CallToolResult:
    await asyncio.sleep(seconds)
    return _text(f"computed {label} after {seconds:g}s")


async def _failing(task: Task) -> types.CallToolResult:
    await asyncio.sleep(1)
    return _text("the job failed", is_error=True)


async def _crashing(task: Task) -> types.CallToolResult:
    await asyncio.sleep(1)
    raise MCPError(code=types.INTERNAL_ERROR, message="the job crashed")


async def _confirm_delete(task: Task, filename: str) -> types.CallToolResult:
    answers = await task.ask({"confirm": confirm(f"Delete {filename}?")})
    reply = answers["confirm"]
    accepted = isinstance(reply, dict) and reply.get("action") == "accept"
    return _text(f"deleted {filename}" if accepted else f"kept {filename}")


async def _multi_input(task: Task) -> types.CallToolResult:
    async def one(key: str) -> Any:
        return (await task.ask({key: confirm(f"Confirm {key}?")}))[key]

    first, second = await asyncio.gather(one("first"), one("second"))
    return _text(f"answered {first.get('action')} and {second.get('action')}")


def required(ctx: Context, tool: str) -> None:
    """A tool that runs only as a task refuses a request that did not declare the extension."""
    if not declared(ctx):
        data = types.MissingRequiredClientCapabilityErrorData(required_capabilities=_DECLARED)
        raise MCPError(
            code=types.MISSING_REQUIRED_CLIENT_CAPABILITY,
            message=f"{tool} runs only as a task: declare {EXTENSION}",
            data=data.model_dump(by_alias=True, mode="json", exclude_none=True),
        )


def task_call(
    ctx: Context, params: types.CallToolRequestParams
) -> dict[str, Any] | types.InputRequiredResult | None:
    """The tasks fixtures' answer to ``params`` when it is a task (or a refusal, or the MRTR
    round before one); None when the call runs as the plain tool."""
    args = params.arguments or {}
    name = params.name
    if name in ("failing_job", "test_tool_with_task"):
        required(ctx, name)
    if not declared(ctx):
        return None
    if name == "slow_compute":
        seconds, label = float(args.get("seconds", 1)), str(args.get("label", ""))
        return start(lambda task: _slow(task, seconds, label))
    if name == "failing_job":
        return start(_failing)
    if name == "protocol_error_job":
        return start(_crashing)
    if name == "confirm_delete":
        filename = str(args.get("filename", "file"))
        return start(lambda task: _confirm_delete(task, filename))
    if name == "multi_input":
        return start(_multi_input)
    if name == "test_tool_with_task":
        answer = (params.input_responses or {}).get("user_name")
        if hasattr(answer, "model_dump"):
            answer = answer.model_dump(mode="json", by_alias=True, exclude_none=True)
        content = answer.get("content") if isinstance(answer, dict) else None
        user = content.get("name") if isinstance(content, dict) else None
        if not user:
            ask = {
                "method": "elicitation/create",
                "params": {
                    "mode": "form",
                    "message": "What is your name?",
                    "requestedSchema": {
                        "type": "object",
                        "properties": {"name": {"type": "string"}},
                        "required": ["name"],
                    },
                },
            }
            return types.InputRequiredResult.model_validate({"inputRequests": {"user_name": ask}})

        async def greet(task: Task) -> types.CallToolResult:
            await asyncio.sleep(0.5)
            return _text(f"Hello, {user}!")

        return start(greet)
    return None


def _find(ctx: Context, task_id: str) -> Task:
    require_client_extension(ctx, EXTENSION)
    _check_name(ctx, task_id)
    task = TASKS.get(task_id)
    if task is None:
        raise MCPError(code=types.INVALID_PARAMS, message=f"unknown task {task_id!r}")
    return task


def _check_name(ctx: Context, task_id: str) -> None:
    """Over HTTP, ``Mcp-Name`` carries the task id (SEP-2663's routing header)."""
    request = ctx.request
    named = request.headers.get(MCP_NAME_HEADER) if isinstance(request, Request) else None
    if named is not None and decode_header_value(named) != task_id:
        raise MCPError(code=HEADER_MISMATCH, message=f"Mcp-Name {named!r} is not the task id")


async def get(ctx: Context, params: TaskParams) -> dict[str, Any]:
    return _find(ctx, params.task_id).detailed()


async def update(ctx: Context, params: UpdateParams) -> dict[str, Any]:
    require_client_extension(ctx, EXTENSION)
    _check_name(ctx, params.task_id)
    task = TASKS.get(params.task_id)
    if task is None or task.status != "input_required":
        return {}
    for key, answer in params.input_responses.items():
        if task.asked.pop(key, None) is not None:  # answers to unknown keys are ignored
            task.answers[key] = answer
    task.answered.set()
    return {}


async def cancel(ctx: Context, params: TaskParams) -> dict[str, Any]:
    task = _find(ctx, params.task_id)
    if task.status in ("working", "input_required") and task.runner is not None:
        task.runner.cancel()
        task.asked.clear()
        task.move("cancelled")
    return {}


def install(server: Server[Any]) -> None:
    """Advertise the extension on ``server`` and bind its methods."""
    server.add_request_handler("tasks/get", TaskParams, get)
    server.add_request_handler("tasks/update", UpdateParams, update)
    server.add_request_handler("tasks/cancel", TaskParams, cancel)
    server.extensions[EXTENSION] = {}
