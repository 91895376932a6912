"""Serve resources requests from the RPC channel: read one server's resource, list every server's.

Reading needs the server in the execution's scope (``allowed_servers``); listing is for
the gateway (its own scope check is the caller's). Results are the MCP objects as JSON,
each listed item tagged with its ``server``. A server that acts for the person calling
(peruser.py) answers on the caller's own session: their view, never anyone else's.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from mcp import types
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from services.toolhost.peruser import PerUserServer
from services.toolhost.registry import AuthorizationRequired, ServerUnavailable, ToolRegistry
from services.toolhost.sessions import ServerConnection
from services.toolhost.upstream import Caller
from shared.errors import ErrorType
from shared.rpc.protocol import PARAMS_OPS, ResourceRequest, RpcReply

log = logging.getLogger(__name__)
T = TypeVar("T")


async def serve_resource(
    registry: ToolRegistry, request: ResourceRequest, started: float, caller: Caller | None
) -> RpcReply:
    """The reply to one resources request for ``caller`` (None: nobody known); never raises."""

    def fail(kind: ErrorType, message: str, url: str | None = None) -> RpcReply:
        elapsed = (time.monotonic() - started) * 1000
        return RpcReply.failure(
            call_id=request.call_id, type=kind, message=message, duration_ms=elapsed, url=url
        )

    remaining = request.deadline - time.time()
    if remaining <= 0:
        return fail(ErrorType.TIMEOUT, f"{request.op}: deadline passed while queued; not run")
    allowed = request.allowed_servers
    if request.server is not None and allowed is not None and request.server not in allowed:
        return fail(
            ErrorType.TOOL_NOT_ALLOWED,
            f"reading resources of server {request.server!r} needs one of its tools in "
            "this execution's tool scope",
        )
    servers = _servers(registry, request.server)
    if isinstance(servers, str):
        return fail(ErrorType.UNKNOWN_TOOL, servers)
    try:
        async with asyncio.timeout(remaining):
            result = await _run(request, servers, caller)
    except AuthorizationRequired as exc:
        return fail(ErrorType.AUTHORIZATION_REQUIRED, str(exc), exc.url)
    except ServerUnavailable as exc:
        return fail(ErrorType.SERVER_UNAVAILABLE, str(exc))
    except MCPError as exc:
        return fail(ErrorType.TOOL_ERROR, f"{exc.error.message} (code {exc.error.code})")
    except ValidationError as exc:  # get_prompt / complete params that are not MCP's
        return fail(ErrorType.INVALID_REQUEST, f"{request.op}: {exc}")
    except TimeoutError:
        return fail(ErrorType.TIMEOUT, f"{request.op} did not finish within {remaining:.3g}s")
    except Exception as exc:
        log.exception("%s on %s failed unexpectedly", request.op, request.server)
        return fail(ErrorType.INTERNAL_ERROR, f"{request.op}: {type(exc).__name__}: {exc}")
    elapsed = (time.monotonic() - started) * 1000
    return RpcReply(call_id=request.call_id, ok=True, result=result, duration_ms=elapsed)


def _servers(registry: ToolRegistry, name: str | None) -> list[ServerConnection] | str:
    """The MCP server connections a request covers, or why there are none."""
    if name is None:
        return [b for b in registry.backends() if isinstance(b, ServerConnection)]
    backend = registry.get(name)
    if not isinstance(backend, ServerConnection):
        return f"no configured MCP server named {name!r}"
    return [backend]


async def _on(
    connection: ServerConnection,
    caller: Caller | None,
    use: Callable[[ServerConnection], Awaitable[T]],
) -> T:
    """``use`` on the connection, or on the caller's own session of a server that acts for
    the person calling."""
    if isinstance(connection, PerUserServer):
        return await connection.as_person(caller, use)
    return await use(connection)


async def _run(
    request: ResourceRequest, servers: list[ServerConnection], caller: Caller | None
) -> dict[str, Any]:
    if request.op == "read_resource":
        assert request.uri is not None
        retry = types.ReadResourceRequestParams.model_validate(
            {**(request.params or {}), "uri": request.uri}
        )
        return _dump(await _on(servers[0], caller, lambda c: c.read_resource(retry)))
    if request.op in PARAMS_OPS:
        params = request.params or {}
        return await _on(servers[0], caller, lambda c: _run_with_params(request, c, params))
    if request.op == "subscribe_resource":
        assert request.uri is not None
        await servers[0].subscribe_resource(request.uri)
        return {}
    listed: list[dict[str, Any]] = []
    errors: dict[str, str] = {}
    for connection in servers:
        try:
            items: list[Any] = await _on(connection, caller, lambda c: _list(request.op, c))
        except (ServerUnavailable, MCPError, AuthorizationRequired) as exc:
            if request.server is not None:  # one server asked for: its failure is the answer
                raise
            errors[connection.name] = (
                str(exc) if not isinstance(exc, MCPError) else exc.error.message
            )
            continue
        listed.extend({"server": connection.name, **_dump(item)} for item in items)
    key = {"list_resources": "resources", "list_prompts": "prompts"}.get(
        request.op, "resourceTemplates"
    )
    return {key: listed, "errors": errors}


async def _list(op: str, connection: ServerConnection) -> list[Any]:
    if op == "list_prompts":
        return await connection.list_prompts()
    return await connection.list_resources(templates=op == "list_resource_templates")


async def _run_with_params(
    request: ResourceRequest, connection: ServerConnection, params: dict[str, Any]
) -> dict[str, Any]:
    """``get_prompt`` and ``complete`` on one server, from the MCP request's own params."""
    if request.op == "get_prompt":
        parsed = types.GetPromptRequestParams.model_validate(params)
        return _dump(await connection.get_prompt(parsed))
    complete = types.CompleteRequestParams.model_validate(params)
    context = complete.context.arguments if complete.context is not None else None
    argument = {"name": complete.argument.name, "value": complete.argument.value}
    return _dump(await connection.complete(complete.ref, argument, context))


def _dump(model: Any) -> dict[str, Any]:
    dumped: dict[str, Any] = model.model_dump(by_alias=True, mode="json", exclude_none=True)
    return dumped
