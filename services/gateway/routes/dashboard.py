"""The dashboard: one static page over `/api/capabilities` and `/api/graph/hypergraph`."""

from __future__ import annotations

from importlib import resources
from typing import Any

from fastapi import APIRouter, Query
from fastapi.responses import HTMLResponse, Response

from services.gateway.deps import CurrentPrincipal, State
from shared.capabilities.store import graph_nodes
from shared.graph.edges import CAPABILITY_PREFIX
from shared.graph.store import heaviest_edges
from shared.tools.store import list_tools

router = APIRouter(tags=["dashboard"])


@router.get("/dashboard", response_class=HTMLResponse, include_in_schema=False)
def dashboard() -> HTMLResponse:
    return HTMLResponse(_static("dashboard.html"))


# The page's script and style are files, not inline: its CSP allows scripts from 'self' only.
@router.get("/static/dashboard.js", include_in_schema=False)
def dashboard_js() -> Response:
    return Response(_static("dashboard.js"), media_type="text/javascript")


@router.get("/static/dashboard.css", include_in_schema=False)
def dashboard_css() -> Response:
    return Response(_static("dashboard.css"), media_type="text/css")


def _static(name: str) -> str:
    return (resources.files("services.gateway") / "static" / name).read_text()


@router.get("/api/graph/hypergraph", summary="Tools and capabilities as one graph")
def hypergraph(
    state: State, principal: CurrentPrincipal, max_edges: int = Query(2000, ge=1, le=20000)
) -> dict[str, Any]:
    """Nodes (tools with availability, the tenant's capabilities) with PageRank and community;
    the heaviest edges among them (tool edges are shared, other tenants' capabilities left out)."""
    with state.pool.connection() as conn:
        tools = list_tools(conn)
        caps = graph_nodes(conn, tenant_id=principal.tenant_id)
        edges = heaviest_edges(conn, limit=max_edges, tenant_id=principal.tenant_id)
    nodes = [
        {
            "id": t["id"],
            "kind": "tool",
            "label": t["id"],
            "available": t["available"],
            **_metrics(t),
        }
        for t in tools
    ]
    nodes += [
        {
            "id": f"{CAPABILITY_PREFIX}{c['id']}",
            "kind": "capability",
            "label": c["name"],
            "usage_count": c["usage_count"],
            "success_rate": c["success_rate"],
            "tools": c["tools_used"],
            **_metrics(c),
        }
        for c in caps
    ]
    return {"nodes": nodes, "edges": edges}


def _metrics(row: dict[str, Any]) -> dict[str, Any]:
    return {"pagerank": row["pagerank"], "community": row["community"]}
