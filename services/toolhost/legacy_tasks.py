"""A 2025-11-25 server's tool whose ``execution.taskSupport`` is ``"required"``: the server
refuses a plain ``tools/call``, so the toolhost calls it as a task (the spec's experimental
tasks: ``params.task``) and waits on it for its caller, whoever that is (sandbox code, a
direct call).

The task is read with ``tasks/get`` at the server's ``pollInterval`` (within bounds); each
new status and status message is passed on as the call's progress (``tool_progress``
events: the caller's progress, and its own MCP task's status message). Once the task ends
or waits for input, ``tasks/result`` fetches the tool's result: the server puts its
questions (elicitation, sampling) on that request's stream, where the session's callbacks
relay them like any mid-call question. A call cancelled meanwhile cancels the task, and
the server's answer (the task's status, ``cancelled``) is the call's last progress.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager
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
TERMINAL = frozenset({"completed", "failed", "cancelled"})
_READY = TERMINAL | {"input_required"}

# Where a server's request names the task it belongs to (``_meta``).
RELATED_TASK = "io.modelcontextprotocol/related-task"

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
    claim: Callable[[str], AbstractContextManager[None]] | None = None,
) -> types.CallToolResult:
    """``tools/call`` as a task, waited on to its result (MCPError: its JSON-RPC error);
    ``claim(task_id)``: the block during which the server's requests naming the task are
    this call's (the server asks them on ``tasks/result``, related to the task)."""
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
    with claim(task.task_id) if claim is not None else contextlib.nullcontext():
        return await _wait(session, task, progress=progress, on_task=on_task)


async def _wait(
    session: ClientSession,
    task: types.Task,
    *,
    progress: Progress | None,
    on_task: Callable[[], Awaitable[None]] | None,
) -> types.CallToolResult:
    """The server's task followed to its result (``call_as_task``)."""
    if on_task is not None:
        await on_task()
    tell = _Teller(progress)
    try:
        await tell(task)
        while task.status not in _READY:
            task = await _next_read(session, task)
            await tell(task)
        if task.status == "cancelled":
            raise MCPError(code=types.INTERNAL_ERROR, message="the server cancelled its task")
        if task.status != "input_required":
            return await _result(session, task)
        # Its questions come on tasks/result, which waits for the end; its statuses are
        # still read meanwhile, to be told.
        async with anyio.create_task_group() as group:
            group.start_soon(_keep_telling, session, task, tell)
            result = await _result(session, task)
            group.cancel_scope.cancel()
        return result
    except BaseException:
        if task.status not in TERMINAL:
            with (
                anyio.CancelScope(shield=True),
                anyio.move_on_after(5),
                contextlib.suppress(Exception),
            ):
                ended = await session.send_request(
                    types.CancelTaskRequest(
                        params=types.CancelTaskRequestParams(task_id=task.task_id)
                    ),
                    types.CancelTaskResult,
                )
                await tell(ended)  # the server's word on its task: the call's last progress
        raise


class _Teller:
    """Each new status (and status message) of the task as the call's next progress."""

    def __init__(self, progress: Progress | None) -> None:
        self._progress = progress
        self._told: tuple[str, str | None] | None = None
        self._steps = 0

    async def __call__(self, task: types.Task) -> None:
        if self._progress is None or (task.status, task.status_message) == self._told:
            return
        self._told = (task.status, task.status_message)
        self._steps += 1
        said = f"{task.status}: {task.status_message}" if task.status_message else task.status
        await self._progress(float(self._steps), None, said)


async def _next_read(session: ClientSession, task: types.Task) -> types.Task:
    """``tasks/get`` after the server's poll interval (within bounds)."""
    interval = (task.poll_interval or 500) / 1000
    await anyio.sleep(min(max(interval, _POLL_MIN_S), _POLL_MAX_S))
    return await session.send_request(
        types.GetTaskRequest(params=types.GetTaskRequestParams(task_id=task.task_id)),
        types.GetTaskResult,
    )


async def _keep_telling(session: ClientSession, task: types.Task, tell: _Teller) -> None:
    """Read the task on and tell its statuses until it ends (while ``tasks/result`` waits;
    best effort: a read that fails stops the telling, not the call)."""
    with contextlib.suppress(MCPError):
        while task.status not in TERMINAL:
            task = await _next_read(session, task)
            await tell(task)


async def _result(session: ClientSession, task: types.Task) -> types.CallToolResult:
    """``tasks/result``: the tool's result (MCPError: the task's JSON-RPC error)."""
    return await session.send_request(
        types.GetTaskPayloadRequest(params=types.GetTaskPayloadRequestParams(task_id=task.task_id)),
        types.CallToolResult,
    )
