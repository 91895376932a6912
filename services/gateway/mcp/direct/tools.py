"""Tools on a direct endpoint: ``tools/list`` (each tool as its server lists it, narrowed to
the key's allow-list) and ``tools/call``."""

from __future__ import annotations

import logging
from collections.abc import Collection, Sequence
from typing import Any

from mcp import types
from mcp.server.context import ServerRequestContext
from pydantic import ValidationError

from services.gateway.mcp import apps, input_required, tasks
from services.gateway.mcp.direct import tasks as direct_tasks
from services.gateway.mcp.direct.calls import call_direct
from services.gateway.mcp.direct.endpoint import Endpoint
from services.gateway.mcp.direct.naming import naming_of
from services.gateway.mcp.direct.results import refused
from services.gateway.mcp.errors import protocol_errors
from services.gateway.ops import direct as ops
from shared.errors import AgentCardsError

log = logging.getLogger(__name__)


async def list_tools(
    endpoint: Endpoint, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    """The endpoint's tools the caller may call (the aggregate: every server's, named as the
    request asks)."""
    patterns = (await endpoint.principal(ctx)).tool_patterns
    endpoint.listen(ctx)
    with protocol_errors():
        tools = await ops.direct_tools(
            endpoint.get_state(), patterns=patterns, server=endpoint.name
        )
        ui = await apps.tools_ui(endpoint.get_state(), ctx)
        if endpoint.name is None:
            return types.ListToolsResult(
                tools=aggregate_tools(tools, naming=naming_of(ctx.request), ui=ui)
            )
    return types.ListToolsResult(
        tools=[listed_tool(tool, tool.name, ui=(ui or {}).get(tool.id)) for tool in tools]
    )


async def call_tool(
    endpoint: Endpoint, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
) -> types.CallToolResult | types.InputRequiredResult | dict[str, Any]:
    """A call of one of the endpoint's tools, by the name it was listed under (for a client
    that declared MCP Tasks, a task's call that may answer with a task)."""
    principal = await endpoint.principal(ctx)
    endpoint.listen(ctx)
    with protocol_errors():
        naming = naming_of(ctx.request) if endpoint.name is None else "prefixed"
    state = endpoint.get_state()
    # A 2025-11-25 call that asked for a task (legacy_tasks.py) runs as one like a declaring one.
    negotiated = tasks.negotiated(ctx) or tasks.requested.get() is not None
    pending = input_required.pending_of(params.request_state, principal=principal)
    # A declaring client's call is a task's call, and its retry after a question waits on it.
    if negotiated:
        try:
            if pending is not None:  # a retry of a task's call that asked
                with protocol_errors():
                    tool = await ops.find_tool(
                        state, principal=principal, server=endpoint.name, name=params.name,
                        naming=naming,
                    )  # fmt: skip
                return await direct_tasks.resume_as_task(
                    state,
                    ctx,
                    endpoint=endpoint,
                    tool=tool,
                    pending=pending,
                    params=params,
                    principal=principal,
                )
            return await direct_tasks.call_as_task(
                state, ctx, endpoint=endpoint, params=params, naming=naming,
                principal=principal,
            )  # fmt: skip
        except (AgentCardsError, ValidationError) as exc:
            return refused(exc)
    return await call_direct(
        endpoint.get_state(),
        ctx,
        principal=principal,
        server=endpoint.name,
        params=params,
        naming=naming,
    )


def aggregate_tools(
    tools: Sequence[ops.DirectTool],
    *,
    naming: ops.ToolNaming,
    reserved: Collection[str] = (),
    ui: apps.ToolsUi | None = None,
) -> list[types.Tool]:
    """``tools`` as an aggregate view lists them (``/mcp/servers``, ``/mcp`` in direct or both
    mode), named by ``direct.listed_names``, in the order given; ``ui``: the tools' MCP Apps
    UIs, for a client that declared Apps."""
    names = ops.listed_names(tools, naming=naming, reserved=reserved)
    return [
        listed_tool(tool, names[tool.id], aggregate=True, ui=(ui or {}).get(tool.id))
        for tool in tools
    ]


def listed_tool(
    tool: ops.DirectTool,
    name: str,
    *,
    aggregate: bool = False,
    ui: dict[str, Any] | None = None,
) -> types.Tool:
    """A tool as its server lists it, under ``name`` (on an aggregate view, with its id), with
    its MCP Apps ``ui`` when given (renamed as the aggregate names UIs)."""
    data: dict[str, Any] = {
        "name": name,
        "description": tool.description,
        "inputSchema": tool.input_schema,
    }
    if tool.output_schema is not None:
        data["outputSchema"] = tool.output_schema
    if tool.annotations:
        data["annotations"] = tool.annotations
    meta = apps.listed_meta(ui, tool.server, aggregate=aggregate) if ui else {}
    if aggregate:
        meta["agentcards/tool"] = tool.id
    if meta:
        data["_meta"] = meta
    try:
        return types.Tool.model_validate(data)
    except ValidationError:  # a schema the SDK will not carry: list the tool without extras
        log.warning("tool %s listed without its output schema or annotations", tool.id)
        return types.Tool.model_validate(
            {k: data[k] for k in ("name", "description", "inputSchema")}
        )
