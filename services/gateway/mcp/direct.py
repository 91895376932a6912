"""Direct federation over MCP: each configured server at ``/mcp/servers/<name>``, all at ``/mcp/servers``.

One low-level ``mcp`` SDK ``Server`` (and streamable-HTTP session manager) per endpoint,
made on its first request: servers are read from ``mcp_servers`` (the toolhost syncs
them), so one configured after the gateway started is served too. Tools are listed from
the ``tools`` table with their own names, schemas and annotations, narrowed to the key's
allow-list; a call is an execution of that one tool (``ops/direct.py``), waited on here
with the tool's progress and its server's sampling/elicitation requests passed through,
like ``execute_code``. Resources are the server's own (its URIs unchanged on its endpoint;
``agentcards://<server>/<uri>`` on the aggregate one, as on ``/mcp``).
"""

from __future__ import annotations

import json
import logging
import weakref
from collections.abc import Callable, Collection, Sequence
from typing import Any

import anyio
import orjson
from anyio.abc import TaskGroup
from mcp import types
from mcp.server.connection import Connection
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.mcpserver import Context
from mcp.server.models import InitializationOptions
from mcp.server.request_state import RequestStateBoundary
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError
from redis.exceptions import RedisError
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from services.gateway.mcp import input_required, log_messages, passthrough
from services.gateway.mcp import listen as listening_streams
from services.gateway.mcp.caching import CACHE_HINTS
from services.gateway.mcp.caller import request_principal
from services.gateway.mcp.errors import protocol_error, protocol_errors
from services.gateway.mcp.log_messages import connection_of
from services.gateway.mcp.missing_capability import refuse_missing_capabilities
from services.gateway.ops import direct
from services.gateway.ops import downstream_resources as resources
from services.gateway.ops.cancel import cancel_execution
from services.gateway.ops.subscription import subscription
from services.gateway.state import GatewayState
from shared import tool_ids
from shared.auth.principal import Principal
from shared.errors import (
    AgentCardsError,
    Conflict,
    ErrorType,
    NotFound,
    Unavailable,
    ValidationFailed,
)
from shared.executions.models import ExecutionView, view_from_row
from shared.executions.status import ExecutionStatus
from shared.queues import SERVER_NOTICES_CHANNEL, TOOLS_LISTED_CHANNEL

log = logging.getLogger(__name__)

AGGREGATE = "agentcards-direct"  # serverInfo name of /mcp/servers
SESSION_HEADER = "mcp-session-id"
LISTEN_POLL_S = 2.0  # under the async Redis client's socket timeout
NAMES_HEADER = "x-agentcards-tool-names"
AGGREGATE_INSTRUCTIONS = (
    "Every tool of every MCP server this AgentCards gateway federates, called directly. "
    "A tool is named <server>.<tool> (server names hold no dot); with the request header "
    "X-AgentCards-Tool-Names: bare (or ?names=bare) by its own name unless two servers share "
    "it. For multi-step work, AgentCards' code mode at /mcp runs Python that calls these "
    "tools in one round trip."
)


# The client connections that hear of tool list changes, by endpoint (None: the aggregate,
# and /mcp in direct or both mode); a connection that ends drops out by itself.
_listeners: dict[str | None, weakref.WeakSet[Connection]] = {}


# Resource subscriptions: (server, the server's URI) -> each subscribed connection and the
# URIs it knows the resource by (its own on the server's endpoint, agentcards://… on the
# aggregate).
_subscribed: dict[tuple[str, str], weakref.WeakKeyDictionary[Connection, set[str]]] = {}


def requested(request: object, *, header: str, query: str, choices: Sequence[str]) -> str | None:
    """What the request asks with ``header`` (or ``?<query>=``), one of ``choices``; None when
    it does not say. Anything else is a ValidationFailed naming the choices."""
    asked = None
    if isinstance(request, Request):
        asked = request.headers.get(header) or request.query_params.get(query)
    if asked is not None and asked not in choices:
        raise ValidationFailed(
            f"{header} (or ?{query}=) must be one of {', '.join(choices)}, not {asked[:40]!r}",
            field=query,
        )
    return asked


def naming_of(request: object) -> direct.ToolNaming:
    """How the request wants the aggregate's tools named (``X-AgentCards-Tool-Names`` or
    ``?names=``), else ``prefixed``. Request-only: a key has no setting for it."""
    asked = requested(request, header=NAMES_HEADER, query="names", choices=direct.TOOL_NAMINGS)
    return "bare" if asked == "bare" else "prefixed"


def listen(name: str | None, ctx: ServerRequestContext[Any]) -> None:
    """Remember the client connection of a request to endpoint ``name`` (None: every
    server's tools): it is told when the tool list changes."""
    _listeners.setdefault(name, weakref.WeakSet()).add(connection_of(ctx.session))


class DirectSurface:
    """The ASGI endpoints of the direct surface and the session managers behind them."""

    def __init__(self, get_state: Callable[[], GatewayState], *, host: str) -> None:
        self._get_state = get_state
        loopback = host in {"127.0.0.1", "localhost", "::1"}
        self._security = (
            TransportSecuritySettings(
                enable_dns_rebinding_protection=True,
                allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*"],
                allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"],
            )
            if loopback
            else TransportSecuritySettings(enable_dns_rebinding_protection=False)
        )
        self._managers: dict[str | None, StreamableHTTPSessionManager] = {}
        self._servers: dict[str, Server[Any]] = {}
        self._lock = anyio.Lock()
        self._group: TaskGroup | None = None

    def routes(self) -> list[Route]:
        """``/mcp/servers`` (every server) and ``/mcp/servers/<name>`` (one)."""
        # The surface itself: Starlette serves an object endpoint as an ASGI app (every
        # method), a function or bound method as a GET-only request handler.
        return [
            Route("/mcp/servers", endpoint=self, include_in_schema=False),
            Route("/mcp/servers/{name}", endpoint=self, include_in_schema=False),
        ]

    async def serve(self, group: TaskGroup) -> None:
        """Run the session managers made from now on in ``group`` (the app's lifespan), and
        tell clients when a server's tool list changed."""
        self._group = group
        group.start_soon(self._relay_list_changes)

    async def _relay_list_changes(self) -> None:
        """``notifications/tools/list_changed`` to the clients of a server's endpoint and of
        the aggregate, each time the toolhost synced a changed tool list for it; and
        ``notifications/resources/updated`` to the clients subscribed to a resource."""
        failures = 0
        while True:
            try:
                async with subscription(self._get_state().aredis, TOOLS_LISTED_CHANNEL) as pubsub:
                    await pubsub.subscribe(SERVER_NOTICES_CHANNEL)
                    failures = 0
                    while True:
                        message = await pubsub.get_message(
                            ignore_subscribe_messages=True, timeout=LISTEN_POLL_S
                        )
                        if message is None:
                            continue
                        if _text_of(message["channel"]) == SERVER_NOTICES_CHANNEL:
                            await self._notice(orjson.loads(message["data"]))
                        else:
                            await self._tell(_text_of(message["data"]))
            except Exception as exc:  # Redis restarting (or worse): listen again after a
                # pause; never let it end the task group the app's lifespan holds
                failures += 1
                level = logging.WARNING if isinstance(exc, RedisError) else logging.ERROR
                log.log(level, "direct surface: tool list changes not heard: %r", exc)
                await anyio.sleep(min(5.0, 0.2 * 2**failures))

    async def _tell(self, server: str, what: str = "tools") -> None:
        """``notifications/<what>/list_changed`` to the clients of ``server``'s endpoint and of
        the aggregate."""
        for name in (server, None):
            for connection in list(_listeners.get(name, ())):
                try:
                    if what == "resources":
                        await connection.send_resource_list_changed()
                    elif what == "prompts":
                        await connection.send_prompt_list_changed()
                    else:
                        await connection.send_tool_list_changed()
                except Exception as exc:  # a client gone meanwhile
                    log.debug("%s/list_changed not sent to a %s client: %s", what, name, exc)
            await listening_streams.publish(name, listening_streams.LIST_CHANGED[what])

    async def _notice(self, notice: dict[str, Any]) -> None:
        if notice.get("list") in ("resources", "prompts"):
            await self._tell(str(notice.get("server")), str(notice["list"]))
        elif notice.get("uri") is not None:
            await _updated(notice)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        name = scope.get("path_params", {}).get("name")
        try:
            manager = await self._manager(name)
        except AgentCardsError as exc:
            error = protocol_error(exc).error.model_dump(mode="json", exclude_none=True)
            status = 404 if isinstance(exc, NotFound) else 503
            response = JSONResponse({"jsonrpc": "2.0", "id": None, "error": error}, status)
            await response(scope, receive, send)
            return
        if name is not None and _opens_session(scope):
            await self._refresh(name)
        await manager.handle_request(scope, receive, send)

    async def _refresh(self, name: str) -> None:
        """Before a session opens, take the server's current instructions, version and title
        (the SDK reads them from the ``Server`` when it answers ``initialize``)."""
        server = self._servers[name]
        try:
            found = await direct.identity(self._get_state(), server=name)
        except Exception as exc:  # the session opens with what was known before
            log.warning("direct endpoint %s: server identity not refreshed: %s", name, exc)
            return
        server.instructions = found.instructions
        server.version = found.version
        server.title = found.title

    async def _manager(self, name: str | None) -> StreamableHTTPSessionManager:
        if name in self._managers:
            return self._managers[name]
        if name is not None:
            servers = await direct.served_servers(self._get_state())
            if not tool_ids.is_server_name(name) or name not in servers:
                raise NotFound(
                    f"no configured MCP server {name[:80]!r} (see GET /v1/servers)",
                    server=name[:80],
                )
        async with self._lock:
            if name not in self._managers:
                if self._group is None:
                    raise Unavailable("the direct MCP surface is not running yet")
                server = self._server(name)
                manager = StreamableHTTPSessionManager(app=server, security_settings=self._security)
                if name is not None:
                    self._servers[name] = server
                await self._group.start(_keep_running, manager)
                self._managers[name] = manager
        return self._managers[name]

    def _server(self, name: str | None) -> Server[Any]:
        """The low-level server of one endpoint (``name`` None: the aggregate)."""
        get_state = self._get_state
        listening = listen

        async def principal_of(ctx: ServerRequestContext[Any]) -> Principal:
            with protocol_errors():
                return await request_principal(ctx.request, state=get_state(), stdio_key=None)

        async def list_tools(
            ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
        ) -> types.ListToolsResult:
            patterns = (await principal_of(ctx)).tool_patterns
            listening(name, ctx)
            with protocol_errors():
                tools = await direct.direct_tools(get_state(), patterns=patterns, server=name)
                if name is None:
                    return types.ListToolsResult(
                        tools=aggregate_tools(tools, naming=naming_of(ctx.request))
                    )
            return types.ListToolsResult(tools=[listed_tool(tool, tool.name) for tool in tools])

        async def call_tool(
            ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
        ) -> types.CallToolResult | types.InputRequiredResult:
            principal = await principal_of(ctx)
            listening(name, ctx)
            with protocol_errors():
                naming = naming_of(ctx.request) if name is None else "prefixed"
            return await call_direct(
                get_state(), ctx, principal=principal, server=name, params=params, naming=naming
            )

        async def list_resources(
            ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
        ) -> types.ListResourcesResult:
            items = await _listing(ctx, resources.list_resources, "resources", "uri")
            return types.ListResourcesResult.model_validate({"resources": items})

        async def list_templates(
            ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
        ) -> types.ListResourceTemplatesResult:
            items = await _listing(
                ctx, resources.list_resource_templates, "resourceTemplates", "uriTemplate"
            )
            return types.ListResourceTemplatesResult.model_validate({"resourceTemplates": items})

        async def _listing(
            ctx: ServerRequestContext[Any], fetch: Any, key: str, uri_key: str
        ) -> list[dict[str, Any]]:
            patterns = (await principal_of(ctx)).tool_patterns
            listening(name, ctx)
            with protocol_errors():
                listed = await fetch(get_state(), patterns=patterns)
            items = []
            for item in listed[key]:
                server = item.pop("server")
                if name is None:  # the aggregate names them as /mcp does
                    item[uri_key] = resources.gateway_uri(server, item[uri_key])
                    item["name"] = f"{server}.{item.get('name', '')}"
                    items.append(item)
                elif server == name:
                    items.append(item)
            return items

        async def read_resource(
            ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams
        ) -> types.ReadResourceResult | types.InputRequiredResult:
            patterns = (await principal_of(ctx)).tool_patterns
            uri = str(params.uri)
            retry = _params(params)
            retry.pop("uri", None)
            with protocol_errors(uri=uri):
                server, inner = (
                    (name, uri) if name is not None else resources.split_gateway_uri(uri)
                )
                result = await resources.read_resource(
                    get_state(), server=server, uri=inner, patterns=patterns, retry=retry
                )
            if (asked := _asked(ctx, result, f"resources/read of {uri!r}")) is not None:
                return asked
            if name is None:
                for content in result.get("contents", []):
                    content["uri"] = resources.gateway_uri(server, content.get("uri") or inner)
            return types.ReadResourceResult.model_validate(result)

        def resource_of(uri: str) -> tuple[str, str]:
            return (name, uri) if name is not None else resources.split_gateway_uri(uri)

        async def subscribe_downstream(
            ctx: ServerRequestContext[Any], seen: str
        ) -> tuple[str, str]:
            """Ask the resource's server for its updates, if the caller may read it."""
            patterns = (await principal_of(ctx)).tool_patterns
            with protocol_errors():
                server, uri = resource_of(seen)
                await resources.subscribe_resource(
                    get_state(), server=server, uri=uri, patterns=patterns
                )
            return server, uri

        async def subscribe(
            ctx: ServerRequestContext[Any], params: types.SubscribeRequestParams
        ) -> types.EmptyResult:
            seen = str(params.uri)
            server, uri = await subscribe_downstream(ctx, seen)
            _remember(ctx, (server, uri), seen)
            return types.EmptyResult()

        async def unsubscribe(
            ctx: ServerRequestContext[Any], params: types.UnsubscribeRequestParams
        ) -> types.EmptyResult:
            seen = str(params.uri)
            with protocol_errors():
                key = resource_of(seen)
            _forget(ctx, key, seen)
            return types.EmptyResult()

        async def list_prompts(
            ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
        ) -> types.ListPromptsResult:
            patterns = (await principal_of(ctx)).tool_patterns
            listening(name, ctx)
            with protocol_errors():
                listed = await resources.list_prompts(get_state(), patterns=patterns)
            prompts = []
            for item in listed["prompts"]:
                server = item.pop("server")
                if name is None:
                    item["name"] = f"{server}{direct.AGGREGATE_SEPARATOR}{item['name']}"
                    prompts.append(item)
                elif server == name:
                    prompts.append(item)
            return types.ListPromptsResult.model_validate({"prompts": prompts})

        async def get_prompt(
            ctx: ServerRequestContext[Any], params: types.GetPromptRequestParams
        ) -> types.GetPromptResult | types.InputRequiredResult:
            patterns = (await principal_of(ctx)).tool_patterns
            body = _params(params)
            with protocol_errors():
                server, body["name"] = _split(name, params.name, what="prompt")
                result = await resources.server_request(
                    get_state(), op="get_prompt", server=server, params=body, patterns=patterns
                )
            if (asked := _asked(ctx, result, f"prompts/get of {params.name!r}")) is not None:
                return asked
            return types.GetPromptResult.model_validate(result)

        async def complete(
            ctx: ServerRequestContext[Any], params: types.CompleteRequestParams
        ) -> types.CompleteResult:
            patterns = (await principal_of(ctx)).tool_patterns
            body = _params(params)
            ref = params.ref
            with protocol_errors():
                if isinstance(ref, types.PromptReference):
                    server, body["ref"]["name"] = _split(name, ref.name, what="prompt")
                elif name is None:  # a template named as on /mcp: agentcards://<server>/<uri>
                    server, body["ref"]["uri"] = resources.split_gateway_uri(ref.uri)
                else:
                    server = name
                result = await resources.server_request(
                    get_state(), op="complete", server=server, params=body, patterns=patterns
                )
            return types.CompleteResult.model_validate(result)

        server = _DirectServer(
            AGGREGATE if name is None else name,
            version="agentcards-direct",
            title=None if name is None else f"{name} (through AgentCards)",
            instructions=AGGREGATE_INSTRUCTIONS if name is None else None,
            on_list_tools=list_tools,
            on_call_tool=call_tool,
            on_list_resources=list_resources,
            on_list_resource_templates=list_templates,
            on_read_resource=read_resource,
            on_subscribe_resource=subscribe,
            on_unsubscribe_resource=unsubscribe,
            on_subscriptions_listen=listening_streams.listen_handler(name, subscribe_downstream),
            on_list_prompts=list_prompts,
            on_get_prompt=get_prompt,
            on_completion=complete,
            cache_hints=CACHE_HINTS,
        )
        log_messages.register(server)  # the server's own log messages during a call
        # requestState sealed and checked as on /mcp; the audience keeps it to this endpoint.
        security = input_required.state_security(get_state)
        audience = f"agentcards-direct:{AGGREGATE if name is None else name}"
        server.middleware.append(RequestStateBoundary(security, default_audience=audience))
        return server


async def call_direct(
    state: GatewayState,
    ctx: ServerRequestContext[Any],
    *,
    principal: Principal,
    server: str | None,
    params: types.CallToolRequestParams,
    naming: direct.ToolNaming = "prefixed",
    reserved: Collection[str] = (),
) -> types.CallToolResult | types.InputRequiredResult:
    """One direct call: ``params.name`` is ``server``'s own tool name (None: the name an
    aggregate view lists it by, ``naming`` and ``reserved`` as in ``direct.listed_names``). An
    unknown or forbidden tool is a JSON-RPC error; a refusal before the run (rate limit,
    sizes) and a failed run are tool errors."""
    with protocol_errors():
        tool = await direct.find_tool(
            state,
            principal=principal,
            server=server,
            name=params.name,
            naming=naming,
            reserved=reserved,
        )
    mcp_ctx = Context(request_context=ctx, input_params=params)
    pending = input_required.pending_of(params.request_state, principal=principal)
    try:
        if pending is None:
            admission = await direct.admit_call(
                state,
                tool=tool,
                arguments=dict(params.arguments or {}),
                principal=principal,
                session_id=_session_id(ctx),
            )
    except (AgentCardsError, ValidationError) as exc:
        return _refused(exc)
    execution_id = str(admission.row["id"]) if pending is None else pending.execution_id
    try:
        if pending is None:
            outcome = await passthrough.run_passing_through(
                state, mcp_ctx, admission=admission, principal=principal, log_events=False
            )
        else:  # a 2026-07-28 client's answers: the same run goes on
            outcome = await passthrough.resume_passing_through(
                state, mcp_ctx, pending=pending, principal=principal, log_events=False
            )
    except anyio.get_cancelled_exc_class():  # the client cancelled the call: stop the run
        with anyio.CancelScope(shield=True), anyio.move_on_after(5):
            await _cancel(state, execution_id=execution_id, principal=principal)
        raise
    except (AgentCardsError, ValidationError) as exc:
        return _refused(exc)
    if isinstance(outcome, types.InputRequiredResult):
        return outcome
    view = view_from_row(outcome)
    if view.status != ExecutionStatus.SUCCEEDED:
        failure = (
            view.tool_failures[0].error if view.tool_failures else f"execution {view.id} failed"
        )
        await refuse_missing_capabilities(
            state, protocol_version=ctx.protocol_version, execution_id=view.id, failure=failure
        )
    return direct_result(view, tool)


async def _cancel(state: GatewayState, *, execution_id: str, principal: Principal) -> None:
    """Cancel a direct call's execution (queued: at once; running: its sandbox is killed)."""
    try:
        await cancel_execution(state, execution_id=execution_id, tenant_id=principal.tenant_id)
    except Conflict:  # it ended meanwhile
        return
    except Exception as exc:  # the caller is gone anyway; the run ends on its own
        log.warning("direct call %s: not cancelled: %s", execution_id, exc)


async def subscribe_named(
    state: GatewayState, ctx: ServerRequestContext[Any], *, principal: Principal, seen: str
) -> None:
    """``resources/subscribe`` of a downstream resource as ``/mcp`` names it
    (``agentcards://<server>/<uri>``, as the aggregate does), if the caller may read it."""
    with protocol_errors():
        server, uri = resources.split_gateway_uri(seen)
        await resources.subscribe_resource(
            state, server=server, uri=uri, patterns=principal.tool_patterns
        )
    _remember(ctx, (server, uri), seen)


def unsubscribe_named(ctx: ServerRequestContext[Any], seen: str) -> None:
    """``resources/unsubscribe`` of what ``subscribe_named`` subscribed."""
    with protocol_errors():
        key = resources.split_gateway_uri(seen)
    _forget(ctx, key, seen)


def _remember(ctx: ServerRequestContext[Any], resource: tuple[str, str], seen: str) -> None:
    """The request's connection hears ``resource``'s updates, as ``seen`` (the URI it used)."""
    connections = _subscribed.setdefault(resource, weakref.WeakKeyDictionary())
    connections.setdefault(connection_of(ctx.session), set()).add(seen)


def _forget(ctx: ServerRequestContext[Any], resource: tuple[str, str], seen: str) -> None:
    uris = _subscribed.get(resource, weakref.WeakKeyDictionary()).get(connection_of(ctx.session))
    if uris is not None:
        uris.discard(seen)


async def _updated(event: dict[str, Any]) -> None:
    """Tell each connection subscribed to the resource, by the URI it subscribed with, and
    the listen streams of its server's endpoint and of the aggregate that asked for it."""
    server, uri = str(event.get("server")), str(event.get("uri"))
    await listening_streams.publish_updated(server, uri)
    await listening_streams.publish_updated(None, resources.gateway_uri(server, uri))
    subscribers = _subscribed.get((server, uri))
    for connection, uris in list((subscribers or {}).items()):
        for uri in list(uris):
            try:
                await connection.send_resource_updated(uri)
            except Exception as exc:  # a client gone meanwhile
                log.debug("resources/updated not sent for %s: %s", uri, exc)


class _DirectServer(Server[Any]):
    """A low-level server that declares ``listChanged`` for tools, resources and prompts (the
    SDK's session manager builds the initialize answer without notification options)."""

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        return super().create_initialization_options(
            notification_options
            or NotificationOptions(
                tools_changed=True, resources_changed=True, prompts_changed=True
            ),
            experimental_capabilities,
            extensions,
        )


def _asked(
    ctx: ServerRequestContext[Any], result: dict[str, Any], what: str
) -> types.InputRequiredResult | None:
    """A 2026-07-28 server's ``InputRequiredResult`` for ``prompts/get`` or ``resources/read``,
    passed through as it asked (its keys; its ``requestState`` is sealed inside ours by the
    endpoint's boundary, bound to this caller and endpoint); None for any other result. A
    2025-11-25 session cannot be handed one: a clear error."""
    if result.get("resultType") != "input_required":
        return None
    if not input_required.applies(ctx.protocol_version):
        raise MCPError(
            code=types.INVALID_REQUEST,
            message=f"{what}: the server asks for input first, which only a 2026-07-28 "
            "client can be asked outside a tool call",
        )
    return types.InputRequiredResult.model_validate(result)


def _params(params: types.RequestParams) -> dict[str, Any]:
    """An MCP request's params as the downstream server gets them (without our ``_meta``)."""
    body = params.model_dump(by_alias=True, mode="json", exclude_none=True)
    body.pop("_meta", None)
    return body


def _split(endpoint: str | None, name: str, *, what: str) -> tuple[str, str]:
    """(server, its own name) of a prompt named on ``endpoint`` (None: the aggregate, where
    it is ``<server>.<prompt>``)."""
    if endpoint is not None:
        return endpoint, name
    server, dot, own = name.partition(direct.AGGREGATE_SEPARATOR)
    if not dot or not own or not tool_ids.is_server_name(server):
        raise ValidationFailed(
            f"{what} {name[:200]!r} is not named <server>.<{what}> (see prompts/list)",
            field="name",
        )
    return server, own


def _text_of(data: bytes | str) -> str:
    return data.decode() if isinstance(data, bytes) else str(data)


async def _keep_running(
    manager: StreamableHTTPSessionManager, *, task_status: anyio.abc.TaskStatus[None]
) -> None:
    async with manager.run():
        task_status.started()
        await anyio.sleep_forever()


def _opens_session(scope: Scope) -> bool:
    """A POST without a session id: an ``initialize`` (or a request the SDK refuses)."""
    headers = scope.get("headers") or []
    return scope.get("method") == "POST" and not any(
        key == SESSION_HEADER.encode() for key, _ in headers
    )


def _session_id(ctx: ServerRequestContext[Any]) -> str | None:
    request = ctx.request
    if isinstance(request, Request):
        return request.headers.get(SESSION_HEADER)
    return None


def aggregate_tools(
    tools: Sequence[direct.DirectTool],
    *,
    naming: direct.ToolNaming,
    reserved: Collection[str] = (),
) -> list[types.Tool]:
    """``tools`` as an aggregate view lists them (``/mcp/servers``, ``/mcp`` in direct or both
    mode), named by ``direct.listed_names``, in the order given."""
    names = direct.listed_names(tools, naming=naming, reserved=reserved)
    return [listed_tool(tool, names[tool.id], aggregate=True) for tool in tools]


def listed_tool(tool: direct.DirectTool, name: str, *, aggregate: bool = False) -> types.Tool:
    """A tool as its server lists it, under ``name`` (on an aggregate view, with its id)."""
    data: dict[str, Any] = {
        "name": name,
        "description": tool.description,
        "inputSchema": tool.input_schema,
    }
    if tool.output_schema is not None:
        data["outputSchema"] = tool.output_schema
    if tool.annotations:
        data["annotations"] = tool.annotations
    if aggregate:
        data["_meta"] = {"agentcards/tool": tool.id}
    try:
        return types.Tool.model_validate(data)
    except ValidationError:  # a schema the SDK will not carry: list the tool without extras
        log.warning("tool %s listed without its output schema or annotations", tool.id)
        return types.Tool.model_validate(
            {k: data[k] for k in ("name", "description", "inputSchema")}
        )


def direct_result(view: ExecutionView, tool: direct.DirectTool) -> types.CallToolResult:
    """A direct call's execution as the tool's own result: its value as content (and as
    structured content when the tool declares an output schema); ``isError`` with the
    server's message (or our ``{type, message}``) when it failed."""
    if view.status != ExecutionStatus.SUCCEEDED:
        failure = view.tool_failures[0] if view.tool_failures else None
        if failure is not None and failure.type == ErrorType.TOOL_ERROR:
            text = failure.error
        elif failure is not None:
            text = json.dumps({"type": failure.type, "message": failure.error}, ensure_ascii=False)
        elif view.error is not None:
            text = json.dumps(
                {"type": view.error.type, "message": view.error.message}, ensure_ascii=False
            )
        else:  # the wait ran out: still running
            text = json.dumps(
                {"type": "timeout", "message": f"execution {view.id} is {view.status}"}
            )
        result = types.CallToolResult(
            content=[types.TextContent(type="text", text=text)], is_error=True
        )
    else:
        result = types.CallToolResult(
            content=_content(view.result),
            structured_content=_structured(view.result, tool.output_schema),
        )
    # Which execution recorded it (GET /v1/executions/<id>), and whether the cache answered.
    meta = {"agentcards/execution_id": view.id}
    if view.cache_hit:
        meta["agentcards/cache_hit"] = view.cache_hit
    result.meta = meta
    return result


def _content(value: Any) -> list[types.ContentBlock]:
    if isinstance(value, str):
        return [types.TextContent(type="text", text=value)]
    if (
        isinstance(value, list)
        and value
        and all(isinstance(v, dict) and "type" in v for v in value)
    ):
        try:  # the server's own blocks (images, resources), as the toolhost passed them on
            return [
                types.TextContent.model_validate(v) if v["type"] == "text" else _block(v)
                for v in value
            ]
        except ValidationError:
            pass
    return [types.TextContent(type="text", text=json.dumps(value, ensure_ascii=False))]


def _block(value: dict[str, Any]) -> types.ContentBlock:
    block: types.ContentBlock = types.CallToolResult.model_validate({"content": [value]}).content[0]
    return block


def _structured(value: Any, schema: dict[str, Any] | None) -> dict[str, Any] | None:
    """Structured content when the tool declares an output schema: the value, re-wrapped as
    ``{"result": value}`` for SDK servers whose schema wraps a non-object (the toolhost unwrapped it)."""
    if schema is None:
        return None
    properties = schema.get("properties")
    wrapped = isinstance(value, dict) and set(value) == {"result"}
    if isinstance(properties, dict) and set(properties) == {"result"} and not wrapped:
        return {"result": value}
    return value if isinstance(value, dict) else None


def _refused(exc: Exception) -> types.CallToolResult:
    """A call refused before it ran (rate limit, sizes, an outage) as a tool error with our body."""
    if isinstance(exc, AgentCardsError):
        body = exc.to_dict()
    else:
        body = {"type": "validation_error", "message": str(exc)}
    return types.CallToolResult(
        content=[
            types.TextContent(type="text", text=json.dumps(body, default=str, ensure_ascii=False))
        ],
        is_error=True,
    )
