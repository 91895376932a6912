"""Resources on a direct endpoint: the server's own (its URIs unchanged on its endpoint;
``agentcards://<server>/<uri>`` on the aggregate, as on ``/mcp``, and a ``ui://<path>`` UI
``ui://<server>/<path>`` to a client that declared MCP Apps), listed, read and subscribed to."""

from __future__ import annotations

from typing import Any

from mcp import types
from mcp.server.context import ServerRequestContext

from services.gateway.mcp import apps, connecting
from services.gateway.mcp.direct.endpoint import Endpoint
from services.gateway.mcp.direct.forwarding import forwarded_retry, input_asked
from services.gateway.mcp.direct.listeners import Listeners
from services.gateway.mcp.errors import protocol_errors
from services.gateway.ops import downstream_resources as downstream
from services.gateway.state import GatewayState
from shared.auth.principal import Principal
from shared.tools.apps import UI_SCHEME


async def list_resources(
    endpoint: Endpoint, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
) -> types.ListResourcesResult:
    """``resources/list``: the endpoint's resources the caller may read."""
    items = await _listing(endpoint, ctx, downstream.list_resources, "resources", "uri")
    return types.ListResourcesResult.model_validate({"resources": items})


async def list_templates(
    endpoint: Endpoint, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
) -> types.ListResourceTemplatesResult:
    """``resources/templates/list``: the endpoint's resource templates the caller may read."""
    items = await _listing(
        endpoint, ctx, downstream.list_resource_templates, "resourceTemplates", "uriTemplate"
    )
    return types.ListResourceTemplatesResult.model_validate({"resourceTemplates": items})


async def _listing(
    endpoint: Endpoint, ctx: ServerRequestContext[Any], fetch: Any, key: str, uri_key: str
) -> list[dict[str, Any]]:
    caller = await endpoint.principal(ctx)
    endpoint.listen(ctx)
    with protocol_errors():  # one server's endpoint: its failure (connect first) is the answer
        listed = await fetch(endpoint.get_state(), caller=caller, server=endpoint.name)
    items = []
    ui = apps.declared(ctx)
    for item in listed[key]:
        server = item.pop("server")
        if endpoint.name is None:  # the aggregate names them as /mcp does
            item[uri_key] = downstream.gateway_uri(server, item[uri_key], apps=ui)
            item["name"] = f"{server}.{item.get('name', '')}"
            items.append(item)
        elif server == endpoint.name:
            items.append(item)
    return items


async def read_resource(
    endpoint: Endpoint, ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams
) -> types.ReadResourceResult | types.InputRequiredResult:
    """``resources/read``, answered by the resource's server."""
    caller = await endpoint.principal(ctx)
    uri = str(params.uri)
    retry = forwarded_retry(params)
    retry.pop("uri", None)
    state = endpoint.get_state()
    with protocol_errors(uri=uri):  # a person who must connect first: asked to, if we can
        server, inner = endpoint.resource_of(uri)
        result = await connecting.answered(state, ctx, params, lambda: downstream.read_resource(
            state, server=server, uri=inner, caller=caller, retry=retry))  # fmt: skip
    if isinstance(result, types.InputRequiredResult):
        return result
    if (asked := input_asked(ctx, result, f"resources/read of {uri!r}")) is not None:
        return asked
    if endpoint.name is None:  # named back as it was asked for
        ui = uri.startswith(UI_SCHEME)
        for content in result.get("contents", []):
            content["uri"] = downstream.gateway_uri(server, content.get("uri") or inner, apps=ui)
    return types.ReadResourceResult.model_validate(result)


async def subscribe_downstream(
    endpoint: Endpoint, ctx: ServerRequestContext[Any], seen: str
) -> tuple[str, str]:
    """Ask the resource's server for its updates, if the caller may read it."""
    caller = await endpoint.principal(ctx)
    with protocol_errors():
        server, uri = endpoint.resource_of(seen)
        await downstream.subscribe_resource(
            endpoint.get_state(), server=server, uri=uri, caller=caller
        )
    return server, uri


async def subscribe(
    endpoint: Endpoint, ctx: ServerRequestContext[Any], params: types.SubscribeRequestParams
) -> types.EmptyResult:
    """``resources/subscribe``: the connection hears the resource's updates."""
    seen = str(params.uri)
    resource = await subscribe_downstream(endpoint, ctx, seen)
    endpoint.listeners.subscribe(ctx, resource, seen)
    return types.EmptyResult()


async def unsubscribe(
    endpoint: Endpoint, ctx: ServerRequestContext[Any], params: types.UnsubscribeRequestParams
) -> types.EmptyResult:
    """``resources/unsubscribe``: the connection no longer hears them."""
    seen = str(params.uri)
    with protocol_errors():
        resource = endpoint.resource_of(seen)
    endpoint.listeners.unsubscribe(ctx, resource, seen)
    return types.EmptyResult()


async def subscribe_named(
    state: GatewayState,
    ctx: ServerRequestContext[Any],
    *,
    listeners: Listeners,
    principal: Principal,
    seen: str,
) -> None:
    """``resources/subscribe`` of a downstream resource as ``/mcp`` names it
    (``agentcards://<server>/<uri>``, as the aggregate does), if the caller may read it."""
    with protocol_errors():
        server, uri = downstream.split_gateway_uri(seen)
        await downstream.subscribe_resource(state, server=server, uri=uri, caller=principal)
    listeners.subscribe(ctx, (server, uri), seen)


def unsubscribe_named(ctx: ServerRequestContext[Any], *, listeners: Listeners, seen: str) -> None:
    """``resources/unsubscribe`` of what ``subscribe_named`` subscribed."""
    with protocol_errors():
        resource = downstream.split_gateway_uri(seen)
    listeners.unsubscribe(ctx, resource, seen)
