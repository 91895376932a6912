"""One direct call: the tool found and admitted as an execution, waited on with its progress
and its server's requests passed through, cancelled when the client cancels."""

from __future__ import annotations

import logging
from collections.abc import Collection
from typing import Any

import anyio
from mcp import types
from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import Context
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER
from pydantic import ValidationError
from starlette.requests import Request

from services.gateway.mcp import input_required, passthrough
from services.gateway.mcp.direct.results import direct_result, refused
from services.gateway.mcp.errors import protocol_errors
from services.gateway.mcp.missing_capability import refuse_missing_capabilities
from services.gateway.ops import direct as ops
from services.gateway.ops.cancel import cancel_execution
from services.gateway.state import GatewayState
from shared.auth.principal import Principal
from shared.errors import AgentCardsError, Conflict
from shared.executions.models import view_from_row
from shared.executions.status import ExecutionStatus

log = logging.getLogger(__name__)


async def call_direct(
    state: GatewayState,
    ctx: ServerRequestContext[Any],
    *,
    principal: Principal,
    server: str | None,
    params: types.CallToolRequestParams,
    naming: ops.ToolNaming = "prefixed",
    reserved: Collection[str] = (),
) -> types.CallToolResult | types.InputRequiredResult:
    """One direct call: ``params.name`` is ``server``'s own tool name (None: the name an
    aggregate view lists it by, ``naming`` and ``reserved`` as in ``direct.listed_names``). An
    unknown or forbidden tool is a JSON-RPC error; a refusal before the run (rate limit,
    sizes) and a failed run are tool errors."""
    with protocol_errors():
        tool = await ops.find_tool(
            state,
            principal=principal,
            server=server,
            name=params.name,
            naming=naming,
            reserved=reserved,
        )
    mcp_ctx = Context(request_context=ctx, input_params=params)
    pending = input_required.pending_of(params.request_state, principal=principal)
    try:
        if pending is None:
            admission = await ops.admit_call(
                state,
                tool=tool,
                arguments=dict(params.arguments or {}),
                principal=principal,
                session_id=_session_id(ctx),
            )
    except (AgentCardsError, ValidationError) as exc:
        return refused(exc)
    execution_id = str(admission.row["id"]) if pending is None else pending.execution_id
    try:
        if pending is None:
            outcome = await passthrough.run_passing_through(
                state, mcp_ctx, admission=admission, principal=principal, log_events=False
            )
        else:  # a 2026-07-28 client's answers: the same run goes on
            outcome = await passthrough.resume_passing_through(
                state, mcp_ctx, pending=pending, principal=principal, log_events=False
            )
    except anyio.get_cancelled_exc_class():  # the client cancelled the call: stop the run
        with anyio.CancelScope(shield=True), anyio.move_on_after(5):
            await _cancel(state, execution_id=execution_id, principal=principal)
        raise
    except (AgentCardsError, ValidationError) as exc:
        return refused(exc)
    if isinstance(outcome, types.InputRequiredResult):
        return outcome
    view = view_from_row(outcome)
    if view.status != ExecutionStatus.SUCCEEDED:
        failure = (
            view.tool_failures[0].error if view.tool_failures else f"execution {view.id} failed"
        )
        await refuse_missing_capabilities(
            state, protocol_version=ctx.protocol_version, execution_id=view.id, failure=failure
        )
    return direct_result(view, tool)


async def _cancel(state: GatewayState, *, execution_id: str, principal: Principal) -> None:
    """Cancel a direct call's execution (queued: at once; running: its sandbox is killed)."""
    try:
        await cancel_execution(state, execution_id=execution_id, tenant_id=principal.tenant_id)
    except Conflict:  # it ended meanwhile
        return
    except Exception as exc:  # the caller is gone anyway; the run ends on its own
        log.warning("direct call %s: not cancelled: %s", execution_id, exc)


def _session_id(ctx: ServerRequestContext[Any]) -> str | None:
    """The client's MCP session id (the learning side pairs calls of one session)."""
    request = ctx.request
    if isinstance(request, Request):
        return request.headers.get(MCP_SESSION_ID_HEADER)
    return None
