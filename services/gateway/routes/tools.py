"""REST for tools and servers: list, search, and the state of each downstream MCP server."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from services.gateway.deps import CurrentPrincipal, State
from services.gateway.search import ToolSearchRequest
from services.gateway.search import search_tools as run_search
from shared.tools import store as tools_store

router = APIRouter(prefix="/v1", tags=["tools"])


@router.get("/tools", summary="Every known tool with its server, availability and server state")
def list_tools(state: State) -> dict[str, Any]:
    """Unavailable tools are listed too (``server_state`` says why: down, removed…)."""
    with state.pool.connection() as conn:
        rows = tools_store.list_tools(conn)
    return {"tools": rows, "total": len(rows)}


@router.post("/tools/search", summary="Find tools for a task described in words")
async def search_tools(
    state: State, principal: CurrentPrincipal, body: ToolSearchRequest
) -> dict[str, Any]:
    """Hybrid search: semantic, words, graph and the tenant's past runs; each hit says why."""
    hits = await run_search(
        state,
        query=body.query,
        limit=body.limit,
        context_tools=body.context_tools,
        tenant_id=principal.tenant_id,
    )
    return {"query": body.query, "hits": hits}


@router.get(
    "/servers",
    summary="Downstream MCP servers and their state (`removed`: left the configuration)",
)
def list_servers(state: State) -> dict[str, Any]:
    with state.pool.connection() as conn:
        rows = conn.execute(
            "SELECT name, transport, state, last_error, tool_count, updated_at FROM mcp_servers "
            "ORDER BY name"
        ).fetchall()
    return {"servers": rows}
