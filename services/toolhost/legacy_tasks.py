"""A 2025-11-25 server's tool whose ``execution.taskSupport`` is ``"required"``: the server
refuses a plain ``tools/call``, so the toolhost calls it as a task (the spec's experimental
tasks: ``params.task``) and waits on it for its caller, whoever that is (sandbox code, a
direct call).

The task is read with ``tasks/get`` at the server's ``pollInterval`` (within bounds); each
new status and status message is passed on as the call's progress (``tool_progress``
events: the caller's progress, and its own MCP task's status message). Once the task ends
or waits for input, ``tasks/result`` fetches the tool's result: the server puts its
questions (elicitation, sampling) on that request's stream, where the session's callbacks
relay them like any mid-call question. A call cancelled meanwhile cancels the task.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from mcp import ClientSession, types
from mcp.shared.exceptions import MCPError

# The task's lifetime asked for (the server may keep it shorter); its polling bounds.
TTL_MS = 3_600_000
_POLL_MIN_S = 0.1
_POLL_MAX_S = 2.0
# Statuses after which tasks/result answers without waiting on the work (input_required:
# it carries the questions, then the result).
_READY = frozenset({"input_required", "completed", "failed", "cancelled"})

Progress = Callable[[float, float | None, str | None], Awaitable[None]]


def required(tool: types.Tool) -> bool:
    """Whether the server takes the tool only as a task."""
    return tool.execution is not None and tool.execution.task_support == "required"


async def call_as_task(
    session: ClientSession,
    tool: str,
    args: dict[str, Any],
    *,
    progress: Progress | None = None,
    on_task: Callable[[], Awaitable[None]] | None = None,
) -> types.CallToolResult:
    """``tools/call`` as a task, waited on to its result (MCPError: its JSON-RPC error)."""
    params = types.CallToolRequestParams(
        name=tool, arguments=args, task=types.TaskMetadata(ttl=TTL_MS)
    )
    # Sent raw: the SDK's client checks a 2025-11-25 tools/call answer against
    # CallToolResult only and would refuse the CreateTaskResult (pinned SDK: mcp 2.3.0).
    request = types.CallToolRequest(params=params).model_dump(
        by_alias=True, mode="json", exclude_none=True
    )
    opts: Any = {}
    session._stamp(request, opts)
    raw = await session._dispatcher.send_raw_request("tools/call", request.get("params"), opts)
    task = types.CreateTaskResult.model_validate(raw, by_name=False).task
    if on_task is not None:
        await on_task()
    told: tuple[str, str | None] | None = None
    steps = 0
    try:
        while True:
            if progress is not None and (task.status, task.status_message) != told:
                told = (task.status, task.status_message)
                steps += 1
                said = f"{task.status}: {task.status_message}" if task.status_message else None
                await progress(float(steps), None, said or task.status)
            if task.status in _READY:
                break
            interval = (task.poll_interval or 500) / 1000
            await anyio.sleep(min(max(interval, _POLL_MIN_S), _POLL_MAX_S))
            task = await session.send_request(
                types.GetTaskRequest(params=types.GetTaskRequestParams(task_id=task.task_id)),
                types.GetTaskResult,
            )
        if task.status == "cancelled":
            raise MCPError(code=types.INTERNAL_ERROR, message="the server cancelled its task")
        return await session.send_request(
            types.GetTaskPayloadRequest(
                params=types.GetTaskPayloadRequestParams(task_id=task.task_id)
            ),
            types.CallToolResult,
        )
    except BaseException:
        if task.status not in ("completed", "failed", "cancelled"):
            with (
                anyio.CancelScope(shield=True),
                anyio.move_on_after(5),
                contextlib.suppress(Exception),
            ):
                await session.send_request(
                    types.CancelTaskRequest(
                        params=types.CancelTaskRequestParams(task_id=task.task_id)
                    ),
                    types.CancelTaskResult,
                )
        raise
