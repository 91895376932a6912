"""The dashboard: one page, its static files (own and vendored), and the two graphs it draws."""

from __future__ import annotations

from importlib import resources
from typing import Any

from fastapi import APIRouter, FastAPI, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles

from services.gateway.rest.deps import CurrentPrincipal, State
from services.gateway.signin import LOGIN
from shared.capabilities.store import graph_nodes
from shared.graph.hypergraph import HypergraphBuilder, tool_graph
from shared.graph.store import heaviest_edges
from shared.tools.store import list_tools

router = APIRouter(tags=["dashboard"])
PAGE = resources.files("services.gateway") / "static" / "dashboard.html"
STATIC_PREFIX = "/static/"  # open without a key (auth.OPEN_PREFIXES): code and styles, no data
MaxEdges = Query(2000, ge=1, le=20000, description="at most this many of the heaviest edges")


def mount_static(app: FastAPI) -> None:
    """Serve services/gateway/static (page script, styles, vendor/) from the installed package."""
    app.mount(
        STATIC_PREFIX.rstrip("/"),
        StaticFiles(packages=[("services.gateway", "static")]),
        name="static",
    )


@router.get("/dashboard", response_class=HTMLResponse, include_in_schema=False)
async def dashboard(request: Request) -> Response:
    """The page; with the issuer's sign-in configured, a visitor without a session signs in first."""
    sign_in = getattr(request.app.state, "signin", None)
    if sign_in is not None and await sign_in.session(request) is None:
        return RedirectResponse(LOGIN, status_code=303)
    return HTMLResponse(PAGE.read_text())


@router.get(
    "/api/graph/hypergraph", summary="Capabilities holding their tools, as Cytoscape elements"
)
def hypergraph(
    state: State, principal: CurrentPrincipal, max_edges: int = MaxEdges
) -> dict[str, Any]:
    """Each of the tenant's capabilities is a compound node with one child per tool it uses;
    edges: tool order inside a capability, capabilities sharing tools, capabilities calling others."""
    with state.pool.connection() as conn:
        tools = list_tools(conn, include_removed=True)  # history
        caps = graph_nodes(conn, tenant_id=principal.tenant_id)
        edges = heaviest_edges(conn, limit=max_edges, tenant_id=principal.tenant_id)
    return HypergraphBuilder(tools=tools, capabilities=caps, edges=edges).build()


@router.get(
    "/api/graph/tools", summary="Tools with PageRank and community, and the edges between them"
)
def tools_graph(
    state: State, principal: CurrentPrincipal, max_edges: int = MaxEdges
) -> dict[str, Any]:
    """Every known tool and the heaviest tool→tool edges (sequence, co_used), as Cytoscape elements."""
    with state.pool.connection() as conn:
        tools = list_tools(conn, include_removed=True)  # history
        edges = heaviest_edges(conn, limit=max_edges, tenant_id=principal.tenant_id)
    return tool_graph(tools=tools, edges=edges)
