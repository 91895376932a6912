"""The one MCP error adapter: our failures as the tool error (or JSON-RPC error) a client reads.

Every tool, prompt and resource handler runs its body inside ``tool_errors()`` (or
``protocol_errors()`` for the resource methods, which are JSON-RPC requests, not tools),
so each failure has the same ``{type, message, details?}`` body as REST's envelope.
``GatewayMCPServer`` answers every failed tool call (our error, arguments the tool's
schema refuses, an unknown tool, a crash) with that body as REST's envelope
``{"error": {...}}`` in ``structuredContent`` and as JSON text, ``isError`` set: the same
place a failed run's view keeps its ``error``, so a client reads ``error.type`` on any tool.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from mcp import types
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError
from starlette.responses import JSONResponse

from services.gateway.errors import (
    OUTAGES,
    error_status,
    outage_of,
    problems_message,
    unavailable_error,
    validation_problems,
)
from shared.errors import (
    AgentCardsError,
    AuthorizationRequired,
    ErrorType,
    Forbidden,
    NotFound,
    PolicyDenied,
    ToolNotAllowed,
    Unauthorized,
    ValidationFailed,
    error_dict,
)

log = logging.getLogger(__name__)

# What an MCP tool turns into our envelope (``mcp_error``); anything else is a crash.
MCP_TOOL_ERRORS: tuple[type[Exception], ...] = (AgentCardsError, ValidationError, *OUTAGES)


@contextmanager
def tool_errors() -> Iterator[None]:
    """Turn one of ``MCP_TOOL_ERRORS`` raised in the block into the tool error clients read."""
    try:
        yield
    except MCP_TOOL_ERRORS as exc:
        raise mcp_error(exc) from exc


@contextmanager
def protocol_errors(*, uri: str | None = None) -> Iterator[None]:
    """Our errors raised in a resource handler as a JSON-RPC error carrying the same body;
    ``uri``: the resource a ``resources/read`` asked for, which an invalid-params answer's
    ``data.uri`` names (SEP-2164: a client tells "no such resource" by it)."""
    try:
        yield
    except AgentCardsError as exc:
        error = protocol_error(exc)
        if uri is not None and error.error.code == types.INVALID_PARAMS:
            error.error.data = {**(error.error.data or {}), "uri": uri}
        raise error from exc


class StructuredToolError(ToolError):
    """Raised when one of our tools fails: ``body`` is REST's ``{type, message, details?}``."""

    def __init__(self, body: dict[str, Any]) -> None:
        super().__init__(json.dumps(body, default=str))
        self.body = body


class GatewayMCPServer(MCPServer):
    """The SDK's ``MCPServer`` whose failed tool calls all carry our error body (the SDK's own
    answer is plain text: ``Error executing tool <name>: <text>``, pydantic's raw message with
    a link for arguments the schema refuses)."""

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> types.CallToolResult | types.InputRequiredResult:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            return error_result(self._error_body(name, exc))

    def _error_body(self, name: str, exc: ToolError) -> dict[str, Any]:
        # A crash (a result that fails its own output schema included): its text stays in
        # the log, and a ValidationError inside it is ours, not the caller's arguments.
        if isinstance(exc, UnexpectedToolError):
            log.error("unexpected error in the MCP tool %s", name, exc_info=exc)
            return error_dict(
                ErrorType.INTERNAL_ERROR, "internal error; the gateway log has details"
            )
        cause: BaseException | None = exc
        while cause is not None:  # the SDK wraps what the tool raised, once per layer
            if isinstance(cause, StructuredToolError):
                return cause.body
            if isinstance(cause, ValidationError):  # the arguments, against the input schema
                return validation_body(cause)
            cause = cause.__cause__
        if self._tool_manager.get_tool(name) is None:
            return error_dict(
                ErrorType.NOT_FOUND,
                f"no tool {name[:200]!r} here: tools/list names the tools",
                details={"tool": name[:200]},
            )
        return error_dict(ErrorType.BAD_REQUEST, str(exc))  # the SDK's own refusal


def error_result(body: dict[str, Any]) -> types.CallToolResult:
    """A failed tool call: REST's envelope ``{"error": body}`` as structured content and as
    JSON text (for clients that read text only), ``isError`` set."""
    envelope = {"error": body}
    text = json.dumps(envelope, default=str, ensure_ascii=False)
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)],
        structured_content=envelope,
        is_error=True,
    )


def validation_body(exc: ValidationError) -> dict[str, Any]:
    """Pydantic's refusal as REST's 422 body: ``validation_error`` naming each bad field."""
    problems = validation_problems(exc.errors())
    return error_dict(ErrorType.VALIDATION_ERROR, problems_message(problems), details=problems)


def mcp_error(exc: Exception) -> StructuredToolError:
    """The MCP tools' failure (one of ``MCP_TOOL_ERRORS``): the same ``{type, message,
    details?}`` as REST; an outage is ``unavailable``, as REST's 503."""
    if isinstance(exc, AgentCardsError):
        body = exc.to_dict()
    elif isinstance(exc, OUTAGES):
        name, error = outage_of(exc)
        log.warning("%s failed in an MCP tool call: %s", name, exc)
        body = unavailable_error(name, error)
    elif isinstance(exc, ValidationError):
        body = validation_body(exc)
    else:  # not one of MCP_TOOL_ERRORS: a crash, told as one
        log.error("unexpected error in an MCP tool call", exc_info=exc)
        body = error_dict(ErrorType.INTERNAL_ERROR, "internal error; the gateway log has details")
    return StructuredToolError(body)


def protocol_error(exc: AgentCardsError) -> MCPError:
    """A JSON-RPC error: invalid params for a bad or unknown name, invalid request for a
    caller refused (no key, an admin-only method, a tool or server outside its key's
    allow-list, a policy's denial, a server the caller has not connected), internal
    otherwise; ``data`` is our error body (its ``type`` says which)."""
    if isinstance(exc, ValidationFailed | NotFound):
        code = types.INVALID_PARAMS
    elif isinstance(
        exc, Unauthorized | Forbidden | ToolNotAllowed | PolicyDenied | AuthorizationRequired
    ):
        code = types.INVALID_REQUEST
    else:
        code = types.INTERNAL_ERROR
    return MCPError(code=code, message=exc.message, data=exc.to_dict())


def http_error_response(exc: AgentCardsError) -> JSONResponse:
    """A refusal of a /mcp request before MCP sees it (the auth gate's 401): REST's status and
    headers (401's ``WWW-Authenticate``, which OAuth-aware clients act on), with a JSON-RPC
    error as the body, whose message and ``data`` (our ``{type, message, details?}``) the
    SDK client raises; REST's envelope there reads to it as "Server returned an error response".
    ``id`` is null: the request was not read (the client answers its own request with it)."""
    status, headers = error_status(exc)
    error = protocol_error(exc).error.model_dump(mode="json", exclude_none=True)
    return JSONResponse({"jsonrpc": "2.0", "id": None, "error": error}, status, headers=headers)
