"""MCP Tasks (the ``io.modelcontextprotocol/tasks`` extension, SEP-2663): a run that outlasts a
short grace answers its ``tools/call`` with a task the client polls (``tasks/get``) or
cancels (``tasks/cancel``) instead of holding the request open.

A task is an execution seen through MCP (``shared/executions/tasks.py``): its status is read
from the execution's row each time, so a task lives as long as its run, on any gateway
replica and across a gateway restart, and a run whose worker died is ``failed`` with
``worker_lost`` as soon as the reaper (or this read) ends it. Only a client that declared
the extension (at initialize, or in a request's ``_meta`` client capabilities) gets a task;
any other gets the run's result as before, and the task methods answer it ``-32021``.
The task methods take the id in ``Mcp-Name`` too (``-32020`` otherwise; the SDK checks that
header only for tools, prompts and resources). A task is found only by the tenant and the
caller (key or person) that created it, on the endpoint it was created on: any other
lookup reads exactly like an unknown id (``-32602``). The same tasks on 2025-11-25's wire
(the spec's experimental utility, ``params.task``): legacy_tasks.py.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Awaitable, Callable
from typing import Any

from mcp import types
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.extension import Extension, MethodBinding
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.server import require_client_extension
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import MCP_NAME_HEADER, decode_header_value
from mcp_types.jsonrpc import HEADER_MISMATCH
from mcp_types.version import is_version_at_least
from pydantic import Field
from redis.exceptions import RedisError
from starlette.requests import Request

from services.gateway.mcp import passthrough, task_input
from services.gateway.mcp.passthrough import StillRunning
from services.gateway.ops.admission import Admission
from services.gateway.ops.cancel import cancel_execution
from services.gateway.ops.db import in_pool
from services.gateway.ops.execution_reads import read_execution
from services.gateway.state import GatewayState
from shared.auth.principal import Principal
from shared.errors import Conflict, ErrorType
from shared.executions import tasks as store
from shared.executions.events import TOOL_PROGRESS, decode_event
from shared.executions.models import ExecutionView, view_from_row
from shared.executions.status import ExecutionStatus
from shared.executions.trace import EventType
from shared.queues import events_log_key
from shared.rpc.upstream import TASKS_EXTENSION

EXTENSION_ID = TASKS_EXTENSION
TASKS_SINCE = "2026-07-28"  # the first revision whose wire carries a task result
_DECLARED = types.ClientCapabilities(extensions={EXTENSION_ID: {}})

# How a run that did not succeed reads as a task: a failure of the run's own code or of a
# tool it called is the tool's answer (``completed`` with ``isError``); these mean the run
# never had a fair chance, a protocol-level failure (``failed`` with a JSON-RPC error).
PROTOCOL_FAILURES = frozenset(
    {
        ErrorType.WORKER_LOST,
        ErrorType.SANDBOX_UNAVAILABLE,
        ErrorType.QUEUE_TIMEOUT,
        ErrorType.STORE_FAILED,
        ErrorType.BROKER_UNAVAILABLE,
        ErrorType.PROTOCOL_ERROR,
        ErrorType.INTERNAL_ERROR,
    }
)
_WORKING = {ExecutionStatus.QUEUED, ExecutionStatus.RUNNING}
# A working task's status message is the run's last progress message (its code's or a
# tool's), looked for among its last SAID_TAIL events.
SAID = frozenset({EventType.PROGRESS.value, TOOL_PROGRESS})
SAID_TAIL = 50

# A run's finished execution as the tool's result, for the endpoint the task was made on.
Shape = Callable[[ExecutionView, dict[str, Any]], Awaitable[types.CallToolResult]]
# The JSON-RPC error a finished run stands for on the endpoint (None: the run's result).
Failure = Callable[[ExecutionView], dict[str, Any] | None]
Principals = Callable[[ServerRequestContext[Any]], Awaitable[Principal]]


class TaskParams(types.RequestParams):
    """``tasks/get`` and ``tasks/cancel``: the task's id."""

    task_id: str = Field(max_length=200)


class TaskUpdateParams(TaskParams):
    """``tasks/update``: answers to a task's input requests, keyed as ``tasks/get`` gave them."""

    input_responses: dict[str, Any] = Field(default_factory=dict)


def negotiated(ctx: ServerRequestContext[Any]) -> bool:
    """Whether the request's client declared the extension (this request or its session) at
    2026-07-28. A 2025-11-25 client that declares it in ``initialize`` is not offered tasks:
    the SDK's 2025-11-25 wire has no task result (it refuses one as an invalid result)."""
    version = ctx.protocol_version
    if version is None or not is_version_at_least(version, TASKS_SINCE):
        return False
    return bool(ctx.session.check_client_capability(_DECLARED))


def principal_key(principal: Principal) -> str:
    """Whose task it is: the API key, else the person, within the tenant."""
    if principal.key_id is not None:
        return f"key:{principal.key_id}"
    return f"user:{principal.user}" if principal.user is not None else "anonymous"


# A 2025-11-25 task-augmented call (legacy_tasks.py), kept with the task's questions.
Requested = task_input.Requested
requested = task_input.requested


async def made(
    state: GatewayState,
    asked: Requested,
    *,
    execution_id: str,
    principal: Principal,
    endpoint: str,
    tool: str,
) -> types.CallToolResult:
    """A 2025-11-25 task for the execution (running or, for a run that ended at once,
    finished: the client asked for a task and gets one); the tool answers with a
    placeholder the middleware replaces by the task."""
    asked.task = await create_row(
        state,
        execution_id=execution_id,
        principal=principal,
        endpoint=endpoint,
        tool=tool,
        ttl_ms=asked.ttl_ms,
    )
    return types.CallToolResult(content=[])


# The task a tool call created, handed from the tool's body to the interceptor that answers
# with it (the SDK's tool layer turns anything else a tool returns into a CallToolResult).
_created: contextvars.ContextVar[list[dict[str, Any]] | None] = contextvars.ContextVar(
    "agentcards_mcp_task", default=None
)


async def offer(
    state: GatewayState,
    ctx: ServerRequestContext[Any],
    *,
    running: Callable[[float | None], Awaitable[Any]],
    principal: Principal,
    endpoint: str,
    tool: str,
) -> Any:
    """A task-supporting call: ``running(grace_s)`` (the run's result, or ``StillRunning``)
    waited on for the configured grace when the client declared the extension, in full
    otherwise. A run still going then becomes a task, recorded before its id is answered;
    the tool answers with a placeholder the interceptor replaces by the task. A 2025-11-25
    call that asked for a task (``requested``) gets one at once, whatever the run does."""
    asked = requested.get()
    if asked is not None:
        outcome = await running(0.0)
        if isinstance(outcome, StillRunning):
            execution_id: str | None = outcome.execution_id
        else:  # ended at once (a cache hit, code that does not parse): its task is done
            view = getattr(outcome, "structured_content", None) or {}
            execution_id = view.get("id")
        if execution_id is None:  # refused before it ran: the refusal itself
            return outcome
        return await made(
            state,
            asked,
            execution_id=str(execution_id),
            principal=principal,
            endpoint=endpoint,
            tool=tool,
        )
    if not negotiated(ctx):
        return await running(None)
    outcome = await running(state.settings.mcp_task_grace_s)
    if not isinstance(outcome, StillRunning):
        return outcome
    created = await create(
        state,
        execution_id=outcome.execution_id,
        principal=principal,
        endpoint=endpoint,
        tool=tool,
    )
    slot = _created.get()
    if slot is None:  # a lowlevel endpoint answers with the task itself
        return created
    slot.append(created)
    return types.CallToolResult(content=[], is_error=True)  # replaced by the task


async def run_as_tool(
    state: GatewayState,
    ctx: Context,
    *,
    admission: Admission,
    principal: Principal,
    endpoint: str,
    tool: str,
) -> Any:
    """``execute_code``'s and ``execute_capability``'s run (``passthrough.run_as_tool``),
    offered as a task (``offer``)."""
    return await offer(
        state,
        ctx.request_context,
        running=lambda grace_s: passthrough.run_as_tool(
            state, ctx, admission=admission, principal=principal, grace_s=grace_s
        ),
        principal=principal,
        endpoint=endpoint,
        tool=tool,
    )


async def create(
    state: GatewayState, *, execution_id: str, principal: Principal, endpoint: str, tool: str
) -> dict[str, Any]:
    """Record a task for the running execution; its ``CreateTaskResult``."""
    row = await create_row(
        state, execution_id=execution_id, principal=principal, endpoint=endpoint, tool=tool
    )
    stamp = row["created_at"].isoformat()
    return {
        "resultType": "task",
        **_envelope(row, status="working", updated=stamp),
    }


async def create_row(
    state: GatewayState,
    *,
    execution_id: str,
    principal: Principal,
    endpoint: str,
    tool: str,
    ttl_ms: int | None = None,
) -> dict[str, Any]:
    """Record a task for the execution (``ttl_ms``: the client's wish, at most the
    configured lifetime); its row."""
    settings = state.settings
    longest = settings.mcp_task_ttl_s * 1000
    ttl = longest if ttl_ms is None else max(1000, min(int(ttl_ms), longest))
    return await in_pool(
        state,
        lambda conn: store.create_task(
            conn,
            task_id=store.new_task_id(),
            execution_id=execution_id,
            tenant_id=principal.tenant_id,
            principal=principal_key(principal),
            endpoint=endpoint,
            tool=tool,
            ttl_ms=ttl,
            poll_interval_ms=settings.mcp_task_poll_interval_ms,
        ),
    )


def _envelope(task: dict[str, Any], *, status: str, updated: str) -> dict[str, Any]:
    return {
        "taskId": task["id"],
        "status": status,
        "createdAt": task["created_at"].isoformat(),
        "lastUpdatedAt": updated,
        "ttlMs": int(task["ttl_ms"]),
        "pollIntervalMs": int(task["poll_interval_ms"]),
    }


def detailed(
    task: dict[str, Any],
    row: dict[str, Any],
    result: types.CallToolResult | dict[str, Any] | None,
    asked: dict[str, Any] | None = None,
    said: str | None = None,
) -> dict[str, Any]:
    """The ``tasks/get`` answer (DetailedTask) for the task and its execution's row;
    ``result``: the finished run as the tool's result (unused while it runs or when it was
    cancelled), or the JSON-RPC error it ended in (then ``failed``); ``asked``: the run's
    open questions (``input_required`` while it runs); ``said``: the run's last progress
    message (the status message while it works)."""
    status, error = task_status(row)
    if status == "completed" and isinstance(result, dict):
        status, error = "failed", result
    if status == "working" and asked:
        status = "input_required"
    stamp = row.get("finished_at") or row.get("started_at") or task["created_at"]
    body = _envelope(task, status=status, updated=max(stamp, task["created_at"]).isoformat())
    if status == "completed" and isinstance(result, types.CallToolResult):
        body["result"] = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    elif status == "failed":
        body["error"] = error
    elif status == "input_required":
        body["inputRequests"] = asked
    elif status == "working":
        body["statusMessage"] = said or f"execution {row['id']} is {row['status']}"
    return body


def task_status(row: dict[str, Any]) -> tuple[str, dict[str, Any] | None]:
    """The task status of an execution row, and (``failed``) its JSON-RPC error object."""
    status = row["status"]
    if status in _WORKING:
        return "working", None
    if status == ExecutionStatus.CANCELLED:
        return "cancelled", None
    error = row.get("error") or {}
    kind = error.get("type")
    if status in (ExecutionStatus.WORKER_LOST, ExecutionStatus.REJECTED) or (
        status != ExecutionStatus.SUCCEEDED and kind in PROTOCOL_FAILURES
    ):
        return "failed", {
            "code": types.INTERNAL_ERROR,
            "message": str(error.get("message") or f"execution ended {status}"),
            "data": {"type": kind or str(status), "execution_id": str(row["id"])},
        }
    return "completed", None


class TaskMethods:
    """``tasks/get``, ``tasks/update`` and ``tasks/cancel`` of one endpoint."""

    def __init__(
        self,
        get_state: Callable[[], GatewayState],
        principal_of: Principals,
        *,
        endpoint: str,
        shape: Shape,
        failure: Failure | None = None,
    ) -> None:
        self._get_state = get_state
        self._principal_of = principal_of
        self._endpoint = endpoint
        self._shape = shape
        self._failure = failure

    async def get(self, ctx: ServerRequestContext[Any], params: TaskParams) -> dict[str, Any]:
        task, row = await self.find(ctx, params.task_id)
        return await self.read(task, row)

    async def read(self, task: dict[str, Any], row: dict[str, Any]) -> dict[str, Any]:
        """The DetailedTask of the task and its execution's row."""
        status, _ = task_status(row)
        result: types.CallToolResult | dict[str, Any] | None = None
        asked: dict[str, Any] = {}
        if status == "completed":
            view = view_from_row(row)
            error = self._failure(view) if self._failure is not None else None
            result = error if error is not None else await self._shape(view, task)
        elif status == "working":
            asked = await self._asked(str(row["id"]))
            if not asked:
                return detailed(task, row, None, said=await self._said(str(row["id"])))
        return detailed(task, row, result, asked)

    async def result_of(self, task: dict[str, Any], row: dict[str, Any]) -> types.CallToolResult:
        """The finished run as the tool's result (a cancelled run's too)."""
        return await self._shape(view_from_row(row), task)

    @property
    def endpoint(self) -> str:
        """The path the methods' tasks belong to."""
        return self._endpoint

    async def principal(self, ctx: ServerRequestContext[Any]) -> Principal:
        """The request's caller."""
        return await self._principal_of(ctx)

    def state(self) -> GatewayState:
        """The gateway's state."""
        return self._get_state()

    async def _asked(self, execution_id: str) -> dict[str, Any]:
        """The run's open questions as ``inputRequests`` (a question that is not a valid
        MCP request was refused to its server when it came)."""
        state = self._get_state()
        asked = {}
        for key, request in (await task_input.open_questions(state, execution_id)).items():
            outgoing = passthrough.client_request(request)
            if isinstance(outgoing, tuple):
                asked[key] = outgoing[0].model_dump(by_alias=True, mode="json", exclude_none=True)
        return asked

    async def _said(self, execution_id: str) -> str | None:
        """The run's last progress message, its own or a tool's (a downstream server's
        progress, or its task's status: toolhost/legacy_tasks.py), among its last events."""
        try:
            raw = await self._get_state().aredis.lrange(
                events_log_key(execution_id), -SAID_TAIL, -1
            )
        except RedisError:  # the status message only: the task reads all the same
            return None
        for item in reversed(raw):
            event = decode_event(item)
            message = event.get("message")
            if event.get("type") in SAID and message:
                tool = event.get("tool")
                return f"{tool}: {message}" if tool else str(message)
        return None

    async def cancel(self, ctx: ServerRequestContext[Any], params: TaskParams) -> dict[str, Any]:
        task, row = await self.find(ctx, params.task_id)
        state = self._get_state()
        with contextlib.suppress(Conflict):  # a run that ended: the same acknowledgement
            await cancel_execution(
                state, execution_id=str(row["id"]), tenant_id=str(task["tenant_id"])
            )
        return {}

    async def update(
        self, ctx: ServerRequestContext[Any], params: TaskUpdateParams
    ) -> dict[str, Any]:
        try:
            _, row = await self.find(ctx, params.task_id)
        except MCPError as exc:  # an unknown task is acknowledged too (SEP-2663)
            if exc.error.code != types.INVALID_PARAMS:
                raise
            return {}
        if row["status"] in _WORKING:  # each answer to its waiting tool; others ignored
            await task_input.answer(self._get_state(), str(row["id"]), params.input_responses)
        return {}

    async def find(
        self, ctx: ServerRequestContext[Any], task_id: str, *, extension: bool = True
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """The caller's live task and its execution's row (``-32602`` for any other id);
        ``extension``: the SEP-2663 methods' checks (not 2025-11-25's)."""
        if extension:
            require_client_extension(ctx, EXTENSION_ID)
            _check_name(ctx, task_id)
        principal = await self._principal_of(ctx)
        state = self._get_state()
        task = await in_pool(
            state,
            lambda conn: store.find_task(
                conn,
                task_id=task_id,
                tenant_id=principal.tenant_id,
                principal=principal_key(principal),
                endpoint=self._endpoint,
            ),
        )
        if task is None:
            raise MCPError(code=types.INVALID_PARAMS, message=f"unknown task {task_id[:200]!r}")
        execution_id = str(task["execution_id"])
        tenant_id = str(task["tenant_id"])
        row = await read_execution(state, execution_id=execution_id, tenant_id=tenant_id)
        return task, row

    def bindings(self) -> list[MethodBinding]:
        """The methods as the SDK binds an extension's."""
        return [
            MethodBinding("tasks/get", TaskParams, self.get),  # type: ignore[arg-type]
            MethodBinding("tasks/cancel", TaskParams, self.cancel),  # type: ignore[arg-type]
            MethodBinding("tasks/update", TaskUpdateParams, self.update),  # type: ignore[arg-type]
        ]


def _check_name(ctx: ServerRequestContext[Any], task_id: str) -> None:
    """Over HTTP at 2026-07-28, ``Mcp-Name`` must carry the task id (SEP-2663 routing)."""
    request = ctx.request
    if not isinstance(request, Request) or ctx.protocol_version not in _HEADER_VERSIONS:
        return
    named = decode_header_value(request.headers.get(MCP_NAME_HEADER))
    if named != task_id:
        got = "no Mcp-Name header" if named is None else f"Mcp-Name {named[:200]!r}"
        raise MCPError(
            code=HEADER_MISMATCH,
            message=f"the Mcp-Name header must carry the task id {task_id[:200]!r} ({got})",
        )


_HEADER_VERSIONS = frozenset({"2026-07-28"})


class TasksExtension(Extension):
    """The extension on an ``MCPServer`` (``/mcp``): advertised under
    ``capabilities.extensions``, its methods bound, and each ``tools/call`` answered with
    the task its tool created, if it created one (``offer``)."""

    identifier = EXTENSION_ID

    def __init__(self, methods: TaskMethods) -> None:
        self._methods = methods

    def methods(self) -> list[MethodBinding]:
        return self._methods.bindings()

    async def intercept_tool_call(
        self,
        params: types.CallToolRequestParams,
        ctx: ServerRequestContext[Any, Any],
        call_next: CallNext,
    ) -> HandlerResult:
        slot: list[dict[str, Any]] = []
        token = _created.set(slot)
        try:
            result = await call_next(ctx)
        finally:
            _created.reset(token)
        return slot[0] if slot else result
