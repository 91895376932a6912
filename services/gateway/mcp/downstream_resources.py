"""The gateway's MCP server lists and reads downstream resources, named ``agentcards://<server>/<uri>``
(an MCP Apps UI ``ui://<server>/<path>`` to a client that declared Apps)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from mcp import types
from mcp.server.mcpserver import MCPServer

from services.gateway.mcp import apps, connecting
from services.gateway.mcp.errors import protocol_errors
from services.gateway.ops import downstream_resources as resources
from services.gateway.state import GatewayState
from shared.auth.principal import Principal
from shared.tools.apps import UI_SCHEME


class Fetch(Protocol):
    """A listing of every server's items, filtered by the caller's allow-list."""

    def __call__(self, state: GatewayState, *, caller: Principal) -> Awaitable[dict[str, Any]]: ...


def register(
    server: MCPServer,
    get_state: Callable[[], GatewayState],
    principal_for: Callable[[object], Awaitable[Principal]],
) -> None:
    """Replace the SDK's own (empty) resource handlers with ones that ask the toolhosts;
    a caller sees and reads only servers its key's allow-list has a tool of."""
    lowlevel = server._lowlevel_server  # the SDK has no public hook for dynamic resources

    async def read_resource(
        ctx: Any, params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult | types.InputRequiredResult:
        with protocol_errors(uri=str(params.uri)):
            name, uri = resources.split_gateway_uri(str(params.uri))
        caller = await principal_for(ctx.request)
        state = get_state()
        with protocol_errors(uri=str(params.uri)):  # one who must connect first: asked to
            result = await connecting.answered(state, ctx, params, lambda: resources.read_resource(
                state, server=name, uri=uri, caller=caller))  # fmt: skip
        if isinstance(result, types.InputRequiredResult):
            return result
        ui = str(params.uri).startswith(UI_SCHEME)  # named back as it was asked for
        for content in result.get("contents", []):
            content["uri"] = resources.gateway_uri(name, content.get("uri") or uri, apps=ui)
        return types.ReadResourceResult.model_validate(result)

    listings: dict[str, tuple[Fetch, str, str, type[types.Result]]] = {
        "resources/list": (resources.list_resources, "resources", "uri", types.ListResourcesResult),
        "resources/templates/list": (
            resources.list_resource_templates,
            "resourceTemplates",
            "uriTemplate",
            types.ListResourceTemplatesResult,
        ),
    }
    for method, (fetch, key, uri_key, result_type) in listings.items():
        lowlevel.add_request_handler(
            method,
            types.PaginatedRequestParams,
            _lister(
                get_state, fetch, principal_for, key=key, uri_key=uri_key, result_type=result_type
            ),
        )
    lowlevel.add_request_handler("resources/read", types.ReadResourceRequestParams, read_resource)


def _lister(
    get_state: Callable[[], GatewayState],
    fetch: Fetch,
    principal_for: Callable[[object], Awaitable[Principal]],
    *,
    key: str,
    uri_key: str,
    result_type: type[types.Result],
) -> Callable[[Any, types.PaginatedRequestParams], Awaitable[types.Result]]:
    """A list handler: every server's items (all in one page), renamed into the gateway's names."""

    async def handler(ctx: Any, params: types.PaginatedRequestParams) -> types.Result:
        caller = await principal_for(ctx.request)
        with protocol_errors():
            listed = await fetch(get_state(), caller=caller)
        ui = apps.declared(ctx)
        renamed = [_renamed(item, uri_key, apps=ui) for item in listed[key]]
        return result_type.model_validate({key: renamed})

    return handler


def _renamed(item: dict[str, Any], key: str, *, apps: bool) -> dict[str, Any]:
    """A listed item under the gateway's names: URI (or template) and name prefixed by its
    server (a UI named ``ui://<server>/<path>`` for a client that declared MCP Apps)."""
    server = item.pop("server")
    item[key] = resources.gateway_uri(server, item[key], apps=apps)
    item["name"] = f"{server}:{item.get('name', '')}"
    return item
