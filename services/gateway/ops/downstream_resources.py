"""Downstream servers' resources through the gateway (REST and MCP share this): list, list templates, read;
and their prompts and completions (the direct MCP surface).

The toolhost holds the sessions, so each operation is one RPC round trip. On the
gateway's MCP server a resource is named ``agentcards://<server>/<its own URI>`` (and
``<server>:<its name>``): URIs of different servers may collide, and the prefix says
which session reads it; an MCP Apps UI (``ui://<path>``) is ``ui://<server>/<path>`` to a
client that declared Apps (docs/mcp-apps.md). REST and agent code name the server
separately and use the server's own URI, as tool results (resource links) carry it.
"""

from __future__ import annotations

import time
from typing import Any

from services.gateway.state import GatewayState
from shared import tool_ids
from shared.auth.patterns import cached_patterns
from shared.auth.principal import Principal
from shared.errors import (
    AgentCardsError,
    AuthorizationRequired,
    DependencyError,
    ErrorType,
    NotFound,
    ToolNotAllowed,
    ValidationFailed,
)
from shared.rpc.protocol import GATEWAY_CALLER, OnBehalf, ResourceOp, ResourceRequest
from shared.tools.apps import UI_SCHEME

GATEWAY_URI_PREFIX = "agentcards://"


def gateway_uri(server: str, uri: str, *, apps: bool = False) -> str:
    """The name the gateway's MCP server gives ``server``'s resource ``uri``; with ``apps``
    (the client declared MCP Apps, whose hosts take only ``ui://`` UIs), a ``ui://<path>``
    resource is ``ui://<server>/<path>``."""
    if apps and uri.startswith(UI_SCHEME):
        return f"{UI_SCHEME}{server}/{uri.removeprefix(UI_SCHEME)}"
    return f"{GATEWAY_URI_PREFIX}{server}/{uri}"


def split_gateway_uri(uri: str) -> tuple[str, str]:
    """``agentcards://<server>/<uri>`` -> (server, uri), ``ui://<server>/<path>`` ->
    (server, ``ui://<path>``); ValidationFailed naming the forms otherwise."""
    prefix = UI_SCHEME if uri.startswith(UI_SCHEME) else GATEWAY_URI_PREFIX
    server, _, inner = uri.removeprefix(prefix).partition("/")
    if not uri.startswith(prefix) or not tool_ids.is_server_name(server) or not inner:
        raise ValidationFailed(
            f"resource URI {uri[:200]!r} is not one of this gateway's: they look like "
            f"{GATEWAY_URI_PREFIX}<server>/<the server's own URI>, or {UI_SCHEME}<server>/<path> "
            f"for a server's {UI_SCHEME}<path> UI (see resources/list)",
            field="uri",
        )
    return server, (UI_SCHEME + inner if prefix == UI_SCHEME else inner)


async def list_resources(
    state: GatewayState, *, caller: Principal, server: str | None = None
) -> dict[str, Any]:
    """Every server's resources (``server``: that one's), each with its ``server``; ``errors``
    names servers that failed (one server asked for: its failure is raised).

    Only servers the caller's tool allow-list has a tool of are kept; a server that acts for
    the person calling lists the caller's own (docs/upstream-identity.md).
    """
    return await _listing(state, "list_resources", "resources", caller=caller, server=server)


async def list_resource_templates(
    state: GatewayState, *, caller: Principal, server: str | None = None
) -> dict[str, Any]:
    """Every server's resource templates, each with its ``server`` (as resources)."""
    return await _listing(state, "list_resource_templates", "resourceTemplates", caller=caller,
                          server=server)  # fmt: skip


async def read_resource(
    state: GatewayState,
    *,
    server: str,
    uri: str,
    caller: Principal,
    retry: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """``server``'s ``resources/read`` result for ``uri`` (``contents``: text or base64 blob),
    or a 2026-07-28 server's ``InputRequiredResult``; ``retry``: the client's
    ``inputResponses`` and ``requestState`` answering one.

    A caller whose allow-list has no tool of ``server`` may not read its resources.
    """
    if not tool_ids.is_server_name(server):
        raise ValidationFailed(
            f"server {server[:80]!r}: {tool_ids.SERVER_NAME_RULE}", field="server"
        )
    if not uri:
        raise ValidationFailed("uri must not be empty", field="uri")
    _allowed(caller, server, "read its resources")
    return await _call(state, op="read_resource", server=server, uri=uri, params=retry or None,
                       caller=caller)  # fmt: skip


async def list_prompts(
    state: GatewayState, *, caller: Principal, server: str | None = None
) -> dict[str, Any]:
    """Every server's prompts (``server``: that one's), each with its ``server`` (as
    resources; the direct MCP surface serves them)."""
    return await _listing(state, "list_prompts", "prompts", caller=caller, server=server)


async def server_request(
    state: GatewayState,
    *,
    op: ResourceOp,
    server: str,
    params: dict[str, Any],
    caller: Principal,
) -> dict[str, Any]:
    """``get_prompt`` or ``complete`` on ``server`` with the MCP request's ``params``, for a
    caller whose allow-list has a tool of it."""
    _allowed(caller, server, "use its prompts")
    return await _call(state, op=op, server=server, params=params, caller=caller)


async def subscribe_resource(
    state: GatewayState, *, server: str, uri: str, caller: Principal
) -> None:
    """Ask ``server`` for updates of ``uri`` (the gateway then tells its subscribed clients),
    for a caller whose allow-list has a tool of it."""
    _allowed(caller, server, "read its resources")
    await _call(state, op="subscribe_resource", server=server, uri=uri, caller=caller)


def _allowed(caller: Principal, server: str, what: str) -> None:
    """ToolNotAllowed unless the caller's allow-list has a tool of ``server``."""
    patterns = caller.tool_patterns
    if patterns is not None and not cached_patterns(patterns).allows_server(server):
        raise ToolNotAllowed(
            f"this API key has no tool of server {server!r}, so it may not {what}",
            server=server,
        )


async def _listing(
    state: GatewayState, op: ResourceOp, key: str, *, caller: Principal, server: str | None
) -> dict[str, Any]:
    """One listing, kept to the caller's servers. One server's: its failure is in ``errors``
    (as in every server's), but a person who must connect it first is told so, with the link."""
    patterns = caller.tool_patterns
    if server and patterns is not None and not cached_patterns(patterns).allows_server(server):
        return {key: [], "errors": {}}
    try:
        listed = await _call(state, op=op, server=server, caller=caller)
    except AuthorizationRequired:
        raise
    except AgentCardsError as exc:
        if server is None:
            raise
        listed = {key: [], "errors": {server: exc.message}}
    return _visible(listed, key, caller.tool_patterns)


def _visible(listed: dict[str, Any], key: str, patterns: tuple[str, ...] | None) -> dict[str, Any]:
    if patterns is None:
        return listed
    allowed = cached_patterns(patterns).allows_server
    items = [item for item in listed.get(key, []) if allowed(str(item.get("server", "")))]
    errors = {s: e for s, e in listed.get("errors", {}).items() if allowed(s)}
    return {**listed, key: items, "errors": errors}


async def _call(
    state: GatewayState,
    *,
    op: ResourceOp,
    server: str | None = None,
    uri: str | None = None,
    params: dict[str, Any] | None = None,
    caller: Principal,
) -> dict[str, Any]:
    deadline = time.time() + state.settings.tool_call_timeout_s
    on_behalf = OnBehalf(tenant_id=caller.tenant_id, user=caller.user,
                         subject_token=caller.subject_token)  # fmt: skip
    request = ResourceRequest(
        op=op,
        execution_id=GATEWAY_CALLER,
        server=server,
        uri=uri,
        deadline=deadline,
        params=params,
        caller=on_behalf,
    )
    reply = await state.rpc.resource(request)
    if reply.ok:
        result: dict[str, Any] = reply.result
        return result
    assert reply.error is not None
    if reply.error.type == ErrorType.AUTHORIZATION_REQUIRED:  # the person must connect it
        url = {"url": reply.error.url} if reply.error.url else {}
        raise AuthorizationRequired(reply.error.message, server=server, **url)
    raise _error(reply.error.type, reply.error.message, op=op, server=server, uri=uri)


READS = frozenset(
    {"read_resource", "list_resources", "list_resource_templates", "subscribe_resource"}
)


def _error(kind: ErrorType, message: str, *, op: str, **details: Any) -> AgentCardsError:
    if kind == ErrorType.UNKNOWN_TOOL:
        return NotFound(message, **details)
    if kind == ErrorType.TOOL_ERROR:  # the server refused: most often an unknown URI
        refused = "could not read it" if op in READS else f"refused {op}"
        return NotFound(f"the server {refused}: {message}", **details)
    if kind in {ErrorType.INVALID_REQUEST, ErrorType.TOOL_NOT_ALLOWED}:
        return ValidationFailed(message, **details)
    return DependencyError(f"{message} (try again when the server is ready)", **details)
