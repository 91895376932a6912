"""One direct call: the tool found, then called without a sandbox (``ops/direct_call.py``) with
its progress and its server's requests passed through, cancelled when the client cancels."""

from __future__ import annotations

import logging
from collections.abc import Collection
from typing import Any

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
from services.gateway.state import GatewayState
from shared.auth.principal import Principal
from shared.errors import AgentCardsError
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
    mcp_ctx = Context(request_context=ctx, input_params=params)
    resumed = await passthrough.resume_interrupted_direct(state, mcp_ctx, principal=principal)
    if isinstance(resumed, types.CallToolResult):
        return resumed
    # A call that waited for approval on a gateway that died: admitted again, as the same
    # execution; its approval's row lets it reach the server once (docs/policy.md).
    again = None
    if isinstance(resumed, passthrough.PausedDirect):
        again, resumed = resumed.execution_id, None
    pending = input_required.pending_of(params.request_state, principal=principal)
    with protocol_errors():
        if pending is not None or resumed is not None:  # a retry, or a call re-sent on a
            # session's takeover: its call runs (or ran) already, admitted once
            tool = await ops.find_tool(state, principal=principal, server=server,
                                       name=params.name, naming=naming, reserved=reserved)  # fmt: skip
            call = None
        else:
            admitted = await ops.find_and_admit(
                state,
                principal=principal,
                server=server,
                name=params.name,
                naming=naming,
                reserved=reserved,
                arguments=dict(params.arguments or {}),
                session_id=session_id(ctx),
                relay=passthrough.relay_of(mcp_ctx),
                on_record=passthrough.on_record(state, mcp_ctx),
                execution_id=again,
            )
            if admitted.refusal is not None:
                return refused(admitted.refusal)
            tool, call = admitted.tool, admitted.call
    try:  # cancelled by the client: the call ends, recorded `cancelled`
        outcome = resumed or await passthrough.call_direct_passing_through(
            state, mcp_ctx, call=call, principal=principal, pending=pending
        )
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


def session_id(ctx: ServerRequestContext[Any]) -> str | None:
    """The client's MCP session id (the learning side pairs calls of one session)."""
    request = ctx.request
    if isinstance(request, Request):
        return request.headers.get(MCP_SESSION_ID_HEADER)
    return None
