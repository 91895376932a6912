"""REST for tools and servers: list, search, and the state of each downstream MCP server."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query

from services.gateway.ops.models.tools import (
    DECLARATIONS_DESCRIPTION,
    Declarations,
    ToolSearchRequest,
    ToolSearchResponse,
)
from services.gateway.ops.tool_search import search_tools as search_tools_op
from services.gateway.rest.deps import CurrentPrincipal, State
from shared.cache.policy import tool_cache, tool_policy
from shared.server_states import ServerState
from shared.tools import servers as servers_store
from shared.tools import store as tools_store
from shared.tools.declarations import with_declarations

router = APIRouter(prefix="/v1", tags=["tools"])
DIRECT_PATH = "/mcp/servers"  # the direct surface (services/gateway/mcp/direct/)
REMOVED = ServerState.REMOVED.value


@router.get("/tools", summary="The configured servers' tools: server, availability, server state")
def list_tools(
    state: State,
    include_removed: bool = False,
    declarations: Annotated[
        Declarations | None, Query(description=DECLARATIONS_DESCRIPTION)
    ] = None,
) -> dict[str, Any]:
    """Unavailable tools are listed too (``server_state`` says why: down, retrying…). Tools of
    servers that left the configuration are history: only with ``include_removed=true``.
    ``cache`` says whether a tool's results are cached and for how long (``ttl_s``, ``why``).
    ``declarations=typescript`` adds each tool's input as a TypeScript type (``declaration``)."""
    with state.pool.connection() as conn:
        rows = tools_store.list_tools(conn, include_removed=include_removed)
    if declarations == "typescript":
        rows = with_declarations(rows)
    read_only_ttl_s = state.settings.cache_read_only_ttl_s
    for row in rows:
        policy = tool_policy(annotations=row["annotations"], override=row["cache_override"])
        row["cache"] = tool_cache(policy, read_only_ttl_s=read_only_ttl_s)
    return {"tools": rows, "total": len(rows)}


@router.post("/tools/search", summary="Find tools for a task described in words")
async def search_tools(
    state: State, principal: CurrentPrincipal, body: ToolSearchRequest
) -> ToolSearchResponse:
    """Hybrid search: semantic, words, graph and the tenant's past runs; each hit says why."""
    return await search_tools_op(state, body=body, principal=principal)


@router.get(
    "/servers",
    summary="Downstream MCP servers and their state (`removed`: left the configuration)",
)
def list_servers(state: State) -> dict[str, Any]:
    """``state`` is ready when any toolhost replica has the server ready (calls are routed
    there); ``replicas`` holds each replica's own state and last error. ``direct`` is the MCP
    endpoint serving the server's own tools directly (null once it is ``removed``), and
    ``protocol_version`` the MCP revision it negotiated with the toolhost (null before it
    ever connected); ``protocol_fallback`` (null for most) says when the toolhost also speaks
    2025-11-25 to a server whose tools answer 2026-07-28 calls from an older engine (its
    ``protocolVersion``, what goes there (``for``) and the ``reason``); ``apps`` whether it offers MCP Apps (views passed on to clients that declared the extension). The top-level ``direct`` serves every server's tools as ``<server>.<tool>``."""
    with state.pool.connection() as conn:
        rows = servers_store.list_servers(conn)
    for row in rows:
        row["direct"] = None if row["state"] == REMOVED else f"{DIRECT_PATH}/{row['name']}"
    return {"servers": rows, "direct": DIRECT_PATH}
