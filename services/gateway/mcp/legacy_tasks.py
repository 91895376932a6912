"""MCP tasks at 2025-11-25 (the spec's experimental ``tasks`` utility, which most clients in
use speak): a ``tools/call`` with ``params.task`` answers ``CreateTaskResult`` at once, and
``tasks/get``, ``tasks/result``, ``tasks/list`` and ``tasks/cancel`` read and end it.

They are the same tasks as 2026-07-28's (mcp/tasks.py): a row of ``mcp_tasks`` over the
run's durable execution, bound to the tenant, the caller and the endpoint, so a task is read
from any replica and after a gateway restart. Only the wire differs, and the SDK has no
2025-11-25 task surface (its per-revision result check would refuse a ``CreateTaskResult``
and drop ``capabilities.tasks``): this middleware, inside the SDK's result check, adds
``capabilities.tasks`` to ``initialize``, ``execution.taskSupport`` to the tools that take
tasks, answers the task methods itself, and replaces a task-augmented call's placeholder
result by its task (the call's tool body makes the task: ``tasks.offer``,
``direct/tasks.py``).

``tasks/result`` blocks until the run ends; while it waits, the run's questions (its tools'
elicitation and sampling requests: the task is ``input_required``) are put to the client on
that request's stream with ``io.modelcontextprotocol/related-task``, and each answer goes to
its waiting tool, as the spec's input_required flow has it.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import logging
from collections.abc import Callable
from typing import Any, Literal, TypeVar

from mcp import types
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.shared.exceptions import MCPError
from pydantic import Field, ValidationError

from services.gateway.mcp import passthrough, task_input, task_watch, tasks
from services.gateway.ops.cancel import cancel_execution
from services.gateway.ops.db import in_pool
from shared.errors import Conflict
from shared.executions import tasks as store
from shared.executions.status import ExecutionStatus

log = logging.getLogger(__name__)

VERSION = "2025-11-25"  # the revision whose wire has these tasks
RELATED = "io.modelcontextprotocol/related-task"
CAPABILITY: dict[str, Any] = {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}
TERMINAL = task_watch.TERMINAL
PAGE = 50  # tasks per tasks/list page


class TaskId(types.RequestParams):
    """``tasks/get``, ``tasks/result`` and ``tasks/cancel``: the task's id."""

    task_id: str = Field(alias="taskId", max_length=200)


class TaskStatus(types.Notification[dict[str, Any], Literal["notifications/tasks/status"]]):
    """``notifications/tasks/status``: the task, whole."""

    method: Literal["notifications/tasks/status"] = "notifications/tasks/status"


# The status watchers running (held so that none is collected before it ends).
_watchers: set[asyncio.Task[None]] = set()


class Page(types.RequestParams):
    """``tasks/list``: the cursor of the page."""

    cursor: str | None = Field(default=None, max_length=400)


class LegacyTasks:
    """The server middleware of one endpoint (``methods``: its task methods;
    ``supports``: whether a tool, by its listed name, takes tasks)."""

    def __init__(self, methods: tasks.TaskMethods, supports: Callable[[str], bool]) -> None:
        self._methods = methods
        self._supports = supports

    async def __call__(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        method = ctx.method
        if method == "initialize":
            result = await call_next(ctx)
            if isinstance(result, dict) and result.get("protocolVersion") == VERSION:
                result["capabilities"] = {**result.get("capabilities", {}), "tasks": CAPABILITY}
            return result
        if ctx.protocol_version != VERSION or ctx.request_id is None:
            return await call_next(ctx)
        if method == "tools/list":
            result = await call_next(ctx)
            for tool in (result.get("tools") or []) if isinstance(result, dict) else []:
                if self._supports(str(tool.get("name"))):
                    tool["execution"] = {"taskSupport": "optional"}
            return result
        if method == "tools/call":
            return await self._call(ctx, call_next)
        handler = {
            "tasks/get": self._get,
            "tasks/result": self._result,
            "tasks/list": self._list,
            "tasks/cancel": self._cancel,
        }.get(method)
        if handler is None:
            return await call_next(ctx)
        return await handler(ctx)

    async def _call(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> Any:
        params = ctx.params or {}
        asked = params.get("task")
        if not isinstance(asked, dict):
            return await call_next(ctx)
        if not self._supports(str(params.get("name"))):  # the spec's answer for such a tool
            raise MCPError(
                code=types.METHOD_NOT_FOUND,
                message=f"tool {str(params.get('name'))[:200]!r} does not run as a task",
            )
        ttl = asked.get("ttl")
        requested = tasks.Requested(ttl_ms=int(ttl) if isinstance(ttl, int | float) else None)
        token = tasks.requested.set(requested)
        try:
            result = await call_next(ctx)
        finally:
            tasks.requested.reset(token)
        if requested.task is None:  # refused before any run: the refusal itself
            return result
        watcher = asyncio.create_task(self._notify_changes(ctx, requested.task))
        _watchers.add(watcher)
        watcher.add_done_callback(_watchers.discard)
        stamp = requested.task["created_at"].isoformat()
        return {"task": _wire(requested.task, status="working", updated=stamp)}

    async def _notify_changes(
        self, ctx: ServerRequestContext[Any, Any], task: dict[str, Any]
    ) -> None:
        """``notifications/tasks/status`` on the session's stream (its GET stream, where the
        client keeps one open) each time the task's status changes (working → input_required
        → working → completed), with the task whole, until it ends. Best effort, as the spec
        makes it: the replica that holds the session watches, and a client polls all the
        same."""
        state = self._methods.state()
        sent = "working"  # as the call's CreateTaskResult said
        try:
            async with asyncio.timeout(state.settings.mcp_task_ttl_s):
                task, row = await self._methods.find(ctx, str(task["id"]), extension=False)
                async with contextlib.aclosing(
                    task_watch.changes(state, self._methods.read, task, row)
                ) as changes:
                    async for _, detailed in changes:
                        status = legacy_task(task, detailed)
                        if status["status"] == sent:  # a new status message only
                            continue
                        sent = status["status"]
                        # 2025-11-25 tasks are outside the SDK's notification union
                        await ctx.session.send_notification(TaskStatus(params=status))  # type: ignore[arg-type]
        except Exception as exc:  # the session or the task gone: nobody to tell
            log.info("task %s: no status notification: %r", task["id"], exc)

    async def _find(
        self, ctx: ServerRequestContext[Any, Any]
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        task_id = _params(TaskId, ctx).task_id
        return await self._methods.find(ctx, task_id, extension=False)

    async def _get(self, ctx: ServerRequestContext[Any, Any]) -> dict[str, Any]:
        task, row = await self._find(ctx)
        return legacy_task(task, await self._methods.read(task, row))

    async def _result(self, ctx: ServerRequestContext[Any, Any]) -> dict[str, Any]:
        """The run's result once it ended (its JSON-RPC error for a protocol failure),
        putting its tools' questions to the client meanwhile."""
        task, row = await self._find(ctx)
        state = self._methods.state()
        async with contextlib.aclosing(
            task_watch.changes(state, self._methods.read, task, row)
        ) as changes:
            async for row, detailed in changes:
                if detailed["status"] == "input_required":
                    await self._ask(ctx, str(row["id"]), str(task["id"]))
        status = detailed["status"]
        if status == "failed":
            error = detailed["error"]
            raise MCPError(code=error["code"], message=error["message"], data=error.get("data"))
        result = detailed.get("result")
        if result is None:  # cancelled: what the tool answers for a cancelled run
            shaped = await self._methods.result_of(task, row)
            result = shaped.model_dump(by_alias=True, mode="json", exclude_none=True)
        result = {k: v for k, v in result.items() if k != "resultType"}  # 2026-07-28's
        return {**result, "_meta": {**(result.get("_meta") or {}), RELATED: {"taskId": task["id"]}}}

    async def _ask(
        self, ctx: ServerRequestContext[Any, Any], execution_id: str, task_id: str
    ) -> None:
        """Put each open question of the run to the client, its answer to the waiting tool."""
        state = self._methods.state()
        questions = await task_input.open_questions(state, execution_id)
        for key, request in questions.items():
            reply = await passthrough.ask_client(
                ctx.session,
                request,
                request_id=ctx.request_id,
                meta={RELATED: {"taskId": task_id}},
            )
            await task_input.deliver(state, execution_id, key, reply)

    async def _list(self, ctx: ServerRequestContext[Any, Any]) -> dict[str, Any]:
        cursor = _params(Page, ctx).cursor
        after = None
        if cursor is not None:
            try:
                after = base64.urlsafe_b64decode(cursor.encode()).decode()
            except (binascii.Error, UnicodeDecodeError, ValueError):
                raise MCPError(code=types.INVALID_PARAMS, message="invalid cursor") from None
        principal = await self._methods.principal(ctx)
        rows = await in_pool(
            self._methods.state(),
            lambda conn: store.list_tasks(
                conn,
                tenant_id=principal.tenant_id,
                principal=tasks.principal_key(principal),
                endpoint=self._methods.endpoint,
                after=after,
                limit=PAGE + 1,
            ),
        )
        if rows is None:
            raise MCPError(code=types.INVALID_PARAMS, message="invalid cursor")
        listed = []
        for task in rows[:PAGE]:
            row = {
                "id": task["execution_id"],
                "status": task["e_status"],
                "error": task["e_error"],
                "started_at": task["e_started_at"],
                "finished_at": task["e_finished_at"],
            }
            status, error = tasks.task_status(row)
            if status == "completed" and row["status"] != ExecutionStatus.SUCCEEDED:
                status = "failed"  # a tool call that ended in isError (2025-11-25: failed)
            stamp = row["finished_at"] or row["started_at"] or task["created_at"]
            wire = _wire(task, status=status, updated=max(stamp, task["created_at"]).isoformat())
            if error is not None:
                wire["statusMessage"] = error["message"]
            listed.append(wire)
        page: dict[str, Any] = {"tasks": listed}
        if len(rows) > PAGE:
            page["nextCursor"] = base64.urlsafe_b64encode(
                str(rows[PAGE - 1]["id"]).encode()
            ).decode()
        return page

    async def _cancel(self, ctx: ServerRequestContext[Any, Any]) -> dict[str, Any]:
        """Cancel a running task (``-32602`` for one that ended, as the spec asks)."""
        task, row = await self._find(ctx)
        status, _ = tasks.task_status(row)
        if status in TERMINAL:
            raise MCPError(
                code=types.INVALID_PARAMS,
                message=f"cannot cancel task {task['id']!r}: it already ended ({status})",
            )
        state = self._methods.state()
        try:
            row = await cancel_execution(
                state, execution_id=str(row["id"]), tenant_id=str(task["tenant_id"]), wait=True
            )
        except Conflict:  # it ended just then
            _, row = await self._methods.find(ctx, str(task["id"]), extension=False)
        return legacy_task(task, await self._methods.read(task, row))


_P = TypeVar("_P", bound=types.RequestParams)


def _params(model: type[_P], ctx: ServerRequestContext[Any, Any]) -> _P:
    try:
        return model.model_validate(ctx.params or {}, by_name=False)
    except ValidationError as exc:
        raise MCPError(code=types.INVALID_PARAMS, message=f"invalid params: {exc}") from None


def _wire(task: dict[str, Any], *, status: str, updated: str) -> dict[str, Any]:
    """The 2025-11-25 ``Task`` of a task row."""
    return {
        "taskId": task["id"],
        "status": status,
        "createdAt": task["created_at"].isoformat(),
        "lastUpdatedAt": updated,
        "ttl": int(task["ttl_ms"]),
        "pollInterval": int(task["poll_interval_ms"]),
    }


def legacy_task(task: dict[str, Any], detailed: dict[str, Any]) -> dict[str, Any]:
    """The 2025-11-25 ``Task`` of a DetailedTask (a tool result with ``isError``: failed)."""
    status = detailed["status"]
    message = detailed.get("statusMessage")
    if status == "completed" and (detailed.get("result") or {}).get("isError"):
        status, message = "failed", "the tool call ended in an error: tasks/result has it"
    elif status == "failed":
        message = detailed["error"]["message"]
    wire = _wire(task, status=status, updated=detailed["lastUpdatedAt"])
    if message:
        wire["statusMessage"] = message
    return wire
