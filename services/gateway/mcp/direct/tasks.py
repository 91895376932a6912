"""MCP Tasks on a direct endpoint (``/mcp/servers[/<name>]``): the call of a client that
declared ``io.modelcontextprotocol/tasks`` runs without a sandbox like any direct call, but
as a task's: its running row is written before it starts and the toolhost records its end
(``services/toolhost/direct_tasks.py``), so, like a code-mode task, it is a durable run that
any replica reads, that outlives a gateway restart and that ends ``worker_lost`` when the
toolhost calling its server dies. Within the grace it answers as the tool; after it, with a
task (mcp/tasks.py)."""

from __future__ import annotations

import re
from typing import Any

from mcp import types
from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import Context

from services.gateway.mcp import input_required, passthrough, tasks
from services.gateway.mcp.direct.calls import session_id
from services.gateway.mcp.direct.endpoint import Endpoint
from services.gateway.mcp.direct.results import direct_result, refused
from services.gateway.mcp.errors import protocol_errors
from services.gateway.ops import direct as ops
from services.gateway.state import GatewayState
from shared.auth.principal import Principal
from shared.errors import ErrorType
from shared.executions.models import ExecutionView, view_from_row
from shared.executions.status import ExecutionStatus


def path_of(endpoint: Endpoint) -> str:
    """The endpoint's path, which its tasks belong to."""
    return "/mcp/servers" if endpoint.name is None else f"/mcp/servers/{endpoint.name}"


async def call_as_task(
    state: GatewayState,
    ctx: ServerRequestContext[Any],
    *,
    endpoint: Endpoint,
    params: types.CallToolRequestParams,
    naming: ops.ToolNaming,
    principal: Principal,
) -> types.CallToolResult | types.InputRequiredResult | dict[str, Any]:
    """The call run without a sandbox (``passthrough.call_direct_as_task``): its result within
    the grace, else its task."""
    mcp_ctx = Context(request_context=ctx, input_params=params)
    with protocol_errors():
        admitted = await ops.find_and_admit(
            state,
            principal=principal,
            server=endpoint.name,
            name=params.name,
            naming=naming,
            arguments=dict(params.arguments or {}),
            session_id=session_id(ctx),
        )
    if admitted.refusal is not None:
        return refused(admitted.refusal)
    tool, call = admitted.tool, admitted.call
    assert call is not None
    asked = tasks.requested.get()  # 2025-11-25: a task at once
    outcome = await passthrough.call_direct_as_task(
        state,
        mcp_ctx,
        call=call,
        principal=principal,
        grace_s=0.0 if asked else state.settings.mcp_task_grace_s,
        defer=not asked and await ops.speaks_tasks(state, server=tool.server),
    )
    if asked is not None:
        return await tasks.made(
            state,
            asked,
            execution_id=call.execution_id,
            principal=principal,
            endpoint=path_of(endpoint),
            tool=tool.id,
        )
    return await _answer(state, outcome, endpoint=endpoint, tool=tool, principal=principal)


async def resume_as_task(
    state: GatewayState,
    ctx: ServerRequestContext[Any],
    *,
    endpoint: Endpoint,
    tool: ops.DirectTool,
    pending: input_required.Pending,
    params: types.CallToolRequestParams,
    principal: Principal,
) -> types.CallToolResult | types.InputRequiredResult | dict[str, Any]:
    """A declaring client's retry of a task's call that asked (its
    answers delivered, the same run waited on again): its result, its next questions, or
    its task (when its server made one of the call after the answers, say)."""
    outcome = await passthrough.resume_passing_through(
        state,
        Context(request_context=ctx, input_params=params),
        pending=pending,
        principal=principal,
        log_events=False,
        grace_s=state.settings.mcp_task_grace_s,
        defer=await ops.speaks_tasks(state, server=tool.server),
    )
    return await _answer(state, outcome, endpoint=endpoint, tool=tool, principal=principal)


async def _answer(
    state: GatewayState,
    outcome: passthrough.Outcome,
    *,
    endpoint: Endpoint,
    tool: ops.DirectTool,
    principal: Principal,
) -> types.CallToolResult | types.InputRequiredResult | dict[str, Any]:
    if isinstance(outcome, passthrough.StillRunning):
        return await tasks.create(
            state,
            execution_id=outcome.execution_id,
            principal=principal,
            endpoint=path_of(endpoint),
            tool=tool.id,
        )
    if isinstance(outcome, types.InputRequiredResult):
        return outcome
    return direct_result(view_from_row(outcome), tool)


# How the toolhost words a tool call a server answered with a JSON-RPC error (not isError):
# "<message> (code <code>)" (services/toolhost/sessions.py).
_SERVER_ERROR = re.compile(r"^(?P<message>.*) \(code (?P<code>-?\d+)\)", re.DOTALL)


def server_error(view: ExecutionView) -> dict[str, Any] | None:
    """The JSON-RPC error the tool's server answered the call with (a direct call's task is
    then ``failed`` with it, as the server's own task would be); None for any other end."""
    if view.status == ExecutionStatus.SUCCEEDED or not view.tool_failures:
        return None
    failure = view.tool_failures[0]
    matched = _SERVER_ERROR.match(failure.error)
    if failure.type != ErrorType.TOOL_ERROR or matched is None:
        return None
    return {"code": int(matched["code"]), "message": matched["message"]}


def task_methods(endpoint: Endpoint) -> tasks.TaskMethods:
    """``tasks/*`` of the endpoint: a finished task reads as its tool's own result."""

    async def shape(view: ExecutionView, task: dict[str, Any]) -> types.CallToolResult:
        state = endpoint.get_state()
        server = str(task["tool"]).split(":", 1)[0]
        listed = await ops.direct_tools(state, patterns=None, server=server)
        tool = next((t for t in listed if t.id == task["tool"]), None)
        if tool is None:  # gone since: its value, without its output schema
            tool = ops.DirectTool(str(task["tool"]), server, "", "", {}, None, {})
        return direct_result(view, tool)

    return tasks.TaskMethods(
        endpoint.get_state,
        endpoint.principal,
        endpoint=path_of(endpoint),
        shape=shape,
        failure=server_error,
    )
