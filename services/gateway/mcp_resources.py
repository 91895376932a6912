"""The gateway's MCP server lists and reads downstream resources, named ``agentcards://<server>/<uri>``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mcp import types
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError

from services.gateway import resources
from services.gateway.config import GatewayState
from shared.errors import AgentCardsError, NotFound, ValidationFailed


def register(server: MCPServer, get_state: Callable[[], GatewayState]) -> None:
    """Replace the SDK's own (empty) resource handlers with ones that ask the toolhosts."""
    lowlevel = server._lowlevel_server  # the SDK has no public hook for dynamic resources

    async def list_resources(
        ctx: Any, params: types.PaginatedRequestParams
    ) -> types.ListResourcesResult:
        listed = await _ask(resources.list_resources(get_state()))
        return types.ListResourcesResult(
            resources=[
                types.Resource.model_validate(_renamed(item, "uri")) for item in listed["resources"]
            ]
        )

    async def list_templates(
        ctx: Any, params: types.PaginatedRequestParams
    ) -> types.ListResourceTemplatesResult:
        listed = await _ask(resources.list_resource_templates(get_state()))
        return types.ListResourceTemplatesResult(
            resource_templates=[
                types.ResourceTemplate.model_validate(_renamed(item, "uriTemplate"))
                for item in listed["resourceTemplates"]
            ]
        )

    async def read_resource(
        ctx: Any, params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        asked = str(params.uri)
        try:
            name, uri = resources.split_gateway_uri(asked)
        except ValidationFailed as exc:
            raise _mcp_error(exc) from exc
        result = await _ask(resources.read_resource(get_state(), server=name, uri=uri))
        for content in result.get("contents", []):
            content["uri"] = resources.gateway_uri(name, content.get("uri") or uri)
        return types.ReadResourceResult.model_validate(result)

    lowlevel.add_request_handler("resources/list", types.PaginatedRequestParams, list_resources)
    lowlevel.add_request_handler(
        "resources/templates/list", types.PaginatedRequestParams, list_templates
    )
    lowlevel.add_request_handler("resources/read", types.ReadResourceRequestParams, read_resource)


def _renamed(item: dict[str, Any], key: str) -> dict[str, Any]:
    """A listed item under the gateway's names: URI (or template) and name prefixed by its server."""
    server = item.pop("server")
    item[key] = resources.gateway_uri(server, item[key])
    item["name"] = f"{server}:{item.get('name', '')}"
    return item


async def _ask(pending: Any) -> dict[str, Any]:
    try:
        result: dict[str, Any] = await pending
    except AgentCardsError as exc:
        raise _mcp_error(exc) from exc
    return result


def _mcp_error(exc: AgentCardsError) -> MCPError:
    code = (
        types.INVALID_PARAMS
        if isinstance(exc, ValidationFailed | NotFound)
        else types.INTERNAL_ERROR
    )
    return MCPError(code=code, message=exc.message, data=exc.to_dict())
