"""Serve resources requests from the RPC channel: read one server's resource, list every server's.

Reading needs the server in the execution's scope (``allowed_servers``); listing is for
the gateway (its own scope check is the caller's). Results are the MCP objects as JSON,
each listed item tagged with its ``server``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from mcp import types
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from services.toolhost.registry import ServerUnavailable, ToolRegistry
from services.toolhost.sessions import ServerConnection
from shared.errors import ErrorType
from shared.rpc.protocol import PARAMS_OPS, ResourceRequest, RpcReply

log = logging.getLogger(__name__)


async def serve_resource(
    registry: ToolRegistry, request: ResourceRequest, started: float
) -> RpcReply:
    """The reply to one resources request; never raises."""

    def fail(kind: ErrorType, message: str) -> RpcReply:
        elapsed = (time.monotonic() - started) * 1000
        return RpcReply.failure(
            call_id=request.call_id, type=kind, message=message, duration_ms=elapsed
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
            result = await _run(request, servers)
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


async def _run(request: ResourceRequest, servers: list[ServerConnection]) -> dict[str, Any]:
    if request.op == "read_resource":
        assert request.uri is not None
        retry = types.ReadResourceRequestParams.model_validate(
            {**(request.params or {}), "uri": request.uri}
        )
        return _dump(await servers[0].read_resource(retry))
    if request.op in PARAMS_OPS:
        return await _run_with_params(request, servers[0], request.params or {})
    if request.op == "subscribe_resource":
        assert request.uri is not None
        await servers[0].subscribe_resource(request.uri)
        return {}
    listed: list[dict[str, Any]] = []
    errors: dict[str, str] = {}
    for connection in servers:
        try:
            items: list[Any]
            if request.op == "list_prompts":
                items = await connection.list_prompts()
            else:
                templates = request.op == "list_resource_templates"
                items = await connection.list_resources(templates=templates)
        except (ServerUnavailable, MCPError) as exc:
            if request.server is not None:  # one server asked for: its failure is the answer
                raise
            errors[connection.name] = (
                str(exc) if isinstance(exc, ServerUnavailable) else (exc.error.message)
            )
            continue
        listed.extend({"server": connection.name, **_dump(item)} for item in items)
    key = {"list_resources": "resources", "list_prompts": "prompts"}.get(
        request.op, "resourceTemplates"
    )
    return {key: listed, "errors": errors}


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
