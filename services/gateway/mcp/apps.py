"""MCP Apps on the gateway's MCP endpoints: whether a request's client declared the extension
(``io.modelcontextprotocol/ui`` with ``text/html;profile=mcp-app``), and a tool's UI as an
endpoint lists it (docs/mcp-apps.md).

A client that declared Apps is shown each tool's ``_meta.ui``; on the aggregate views
(``/mcp/servers``, ``/mcp`` in direct or both mode) its ``resourceUri`` names the UI as those
views list it, ``ui://<server>/<path>``. Any other client is shown what it was before Apps
passed through: no ``_meta.ui``, resources under ``agentcards://<server>/<uri>``.
"""

from __future__ import annotations

import copy
from typing import Any

from mcp.server.apps import client_supports_apps
from mcp.server.context import ServerRequestContext

from services.gateway.ops import direct as ops
from services.gateway.ops.downstream_resources import gateway_uri
from services.gateway.state import GatewayState
from shared.tools.apps import LEGACY_URI_KEY

ToolsUi = dict[str, dict[str, Any]]


def declared(ctx: ServerRequestContext[Any]) -> bool:
    """Whether the request's client declared MCP Apps (at 2026-07-28: on this request)."""
    return client_supports_apps(ctx)


async def tools_ui(state: GatewayState, ctx: ServerRequestContext[Any]) -> ToolsUi | None:
    """The tools' UIs (by tool id) for a client that declared Apps; None for any other."""
    return await ops.tools_ui(state) if declared(ctx) else None


def listed_meta(meta: dict[str, Any], server: str, *, aggregate: bool) -> dict[str, Any]:
    """A tool's Apps ``_meta`` as an endpoint lists it: as its server gave it on the server's
    own endpoint, its UI renamed ``ui://<server>/<path>`` on an aggregate view."""
    if not aggregate:
        return meta
    listed = copy.deepcopy(meta)
    ui = listed.get("ui")
    if isinstance(ui, dict) and isinstance(ui.get("resourceUri"), str):
        ui["resourceUri"] = gateway_uri(server, ui["resourceUri"], apps=True)
    if isinstance(listed.get(LEGACY_URI_KEY), str):
        listed[LEGACY_URI_KEY] = gateway_uri(server, listed[LEGACY_URI_KEY], apps=True)
    return listed
