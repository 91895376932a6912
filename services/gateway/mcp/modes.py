"""Code mode, direct or both on ``/mcp``: which tools one request's ``tools/list`` and
``tools/call`` serve.

- ``code`` (the default): AgentCards' own tools (``execute_code``, ``search_tools``, …).
- ``direct``: every server's tools called as themselves, named ``<server>.<tool>`` (what
  ``/mcp/servers`` serves).
- ``both``: the two lists together. They cannot collide: AgentCards' tool names hold no
  dot, every prefixed direct name does, and a bare one never takes a code-mode name.

The request says which with the ``X-AgentCards-Mode`` header (or ``?mode=``); without
it the key's ``mcp_mode`` (``agentcards keys create --mcp-mode``) decides, else ``code``.
``X-AgentCards-Tool-Names: bare`` (or ``?names=bare``) names the direct tools by their own
names where no other listed tool has them (``direct.listed_names``); the default is
``prefixed``. It is request-only (a key's setting would need a migration).
``/mcp/servers`` and ``/mcp/servers/<name>`` are always direct. In direct or both mode a
client is told when a server's tool list changes: a 2025-11-25 session that listed tools gets
``notifications/tools/list_changed``, a 2026-07-28 ``subscriptions/listen`` stream that asked
for ``toolsListChanged`` the event (beside its tenant's skill changes, as in code mode).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, cast

from mcp import types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import NotificationOptions
from mcp.server.mcpserver import MCPServer
from mcp.server.models import InitializationOptions
from mcp.server.subscriptions import ListenHandler, ServerEvent, ToolsListChanged
from mcp.shared.exceptions import MCPError

from services.gateway.mcp import apps, skill_changes
from services.gateway.mcp import listen as listening_streams
from services.gateway.mcp.direct import (
    Listeners,
    aggregate_tools,
    call_direct,
    naming_of,
    requested,
)
from services.gateway.mcp.errors import StructuredToolError, error_result, protocol_errors
from services.gateway.ops import direct
from services.gateway.ops.direct import ToolNaming
from services.gateway.state import GatewayState
from shared.auth.principal import MCP_MODES, McpMode, Principal

MODE_HEADER = "x-agentcards-mode"

# Per tenant: the listen streams of /mcp in direct or both mode (code mode's: skill_changes).
_direct_streams: dict[str, ListenHandler] = {}


def mode_of(request: object, principal: Principal) -> McpMode:
    """The request's mode (header, then query), else its key's, else ``code``."""
    asked = requested(request, header=MODE_HEADER, query="mode", choices=MCP_MODES)
    if asked is None:
        return principal.mcp_mode or "code"
    return cast(McpMode, asked)


def unresolved_caller(exc: StructuredToolError) -> MCPError:
    """The JSON-RPC error for a request whose caller could not be resolved: ``exc`` carries our
    ``{type, message, details?}`` body (``mcp_error``), which becomes the message and ``data``."""
    body = exc.body
    message = f"could not resolve the caller's key: {body.get('message', str(exc))}"
    return MCPError(code=types.INTERNAL_ERROR, message=message, data=body)


def register(
    server: MCPServer,
    get_state: Callable[[], GatewayState],
    principal_for: Callable[[object], Awaitable[Principal]],
    listeners: Listeners,
) -> None:
    """Wrap the server's ``tools/list`` and ``tools/call`` so a request's mode picks the tools
    (after every tool is registered: the wrapped handlers list and call those); ``listeners``
    hear of the direct tools' list changes."""
    lowlevel = server._lowlevel_server  # the SDK has no public hook for these either
    own_list = lowlevel.get_request_handler("tools/list")
    own_call = lowlevel.get_request_handler("tools/call")
    assert own_list is not None and own_call is not None

    async def caller(ctx: ServerRequestContext[Any]) -> tuple[Principal, McpMode, ToolNaming]:
        """The request's principal, mode and naming (a bad naming is refused in code mode too)."""
        principal = await principal_for(ctx.request)
        with protocol_errors():
            return principal, mode_of(ctx.request, principal), naming_of(ctx.request)

    async def own_names(ctx: ServerRequestContext[Any]) -> frozenset[str]:
        """Code mode's tool names (a bare direct name in both mode never takes one)."""
        own = cast(types.ListToolsResult, await own_list.handler(ctx, None))
        return frozenset(tool.name for tool in own.tools)

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        try:
            principal, mode, naming = await caller(ctx)
        except StructuredToolError as exc:
            # tools/list is no tool: an unresolvable caller (e.g. Postgres down while checking
            # the key) is a JSON-RPC error naming the outage, never the SDK's bare -32603.
            raise unresolved_caller(exc) from exc
        own = cast(types.ListToolsResult, await own_list.handler(ctx, params))
        if mode == "code":
            return own
        tools = list(own.tools) if mode == "both" else []
        listeners.listen(None, ctx)  # told when a server's tool list changes, as on /mcp/servers
        with protocol_errors():
            found = await direct.direct_tools(get_state(), patterns=principal.tool_patterns)
            ui = await apps.tools_ui(get_state(), ctx)
        reserved = {tool.name for tool in tools}
        tools += aggregate_tools(found, naming=naming, reserved=reserved, ui=ui)
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> Any:
        try:
            principal, mode, naming = await caller(ctx)
        except StructuredToolError as exc:
            # The caller could not be resolved (e.g. Postgres down while checking the key):
            # the tool's error result with our body, as any tool's failure, never a bare
            # internal error with the message lost.
            return error_result(exc.body)
        if mode == "code":
            return await own_call.handler(ctx, params)
        reserved = await own_names(ctx) if mode == "both" else frozenset()
        if params.name not in reserved and (
            naming == "bare" or direct.AGGREGATE_SEPARATOR in params.name
        ):
            return await call_direct(
                get_state(),
                ctx,
                principal=principal,
                server=None,
                params=params,
                naming=naming,
                reserved=reserved,
            )
        if mode == "direct":
            raise MCPError(
                code=types.INVALID_PARAMS,
                message=f"no tool {params.name[:200]!r} in direct mode: direct tools are named "
                "<server>.<tool> (see tools/list); code mode's tools need mode code or both",
            )
        return await own_call.handler(ctx, params)

    own_listen = lowlevel.get_request_handler("subscriptions/listen")
    assert own_listen is not None

    async def listen_changes(
        ctx: ServerRequestContext[Any], params: types.SubscriptionsListenRequestParams
    ) -> types.SubscriptionsListenResult:
        try:
            principal, mode, _ = await caller(ctx)
        except StructuredToolError as exc:
            raise unresolved_caller(exc) from exc
        if mode == "code":
            return cast(types.SubscriptionsListenResult, await own_listen.handler(ctx, params))
        return await direct_streams(principal.tenant_id)(ctx, params)

    lowlevel.add_request_handler("tools/list", types.PaginatedRequestParams, list_tools)
    lowlevel.add_request_handler("tools/call", types.CallToolRequestParams, call_tool)
    lowlevel.add_request_handler(
        "subscriptions/listen", types.SubscriptionsListenRequestParams, listen_changes
    )
    # Declare tools.listChanged: in direct or both mode the list follows the servers' (the
    # SDK's session manager builds the initialize answer without notification options).
    # prompts.listChanged too, so both revisions say the same: a 2026-07-28 answer declares
    # every listChanged wherever subscriptions/listen is served (the SDK derives it).
    own_options = lowlevel.create_initialization_options

    def with_list_changed(
        notification_options: NotificationOptions | None = None, *args: Any, **kwargs: Any
    ) -> InitializationOptions:
        options = notification_options or NotificationOptions(
            tools_changed=True, prompts_changed=True
        )
        return own_options(options, *args, **kwargs)

    setattr(lowlevel, "create_initialization_options", with_list_changed)  # noqa: B010


def direct_streams(tenant_id: str) -> ListenHandler:
    """The listen handler of ``/mcp`` in direct or both mode for one tenant: its skills'
    changes and every server's tool list changes (the aggregate's, ``/mcp/servers``)."""
    if tenant_id not in _direct_streams:
        joined = listening_streams.JoinedBus(
            [
                (skill_changes.bus_of(tenant_id), _every),
                (listening_streams.bus(None), _tools_changed),
            ]
        )
        _direct_streams[tenant_id] = ListenHandler(joined)
    return _direct_streams[tenant_id]


def _every(event: ServerEvent) -> bool:
    return True


def _tools_changed(event: ServerEvent) -> bool:
    return isinstance(event, ToolsListChanged)
