"""Which scope a request needs, and the middleware that refuses a person's token without it.

``agentcards:read`` lists, searches and reads; ``agentcards:execute`` runs code or a
capability and calls tools directly; ``agentcards:admin`` changes capabilities and the
cache, reads the audit log and resolves PII tokens. On ``/mcp`` the JSON-RPC body decides
(a ``tools/call`` of a tool that runs something needs execute); on REST the method and path.
An API key is not scoped (its ``admin`` flag still guards admin routes, as before).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import orjson
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from services.gateway.buffered import buffered
from services.gateway.errors import error_response
from shared.auth.principal import SCOPE_ADMIN, SCOPE_EXECUTE, SCOPE_READ, SCOPES, Principal
from shared.errors import AgentCardsError, Forbidden

# Code mode's tools that only read; every other tool called over MCP runs something.
READ_TOOLS = frozenset({"search_tools", "search_capabilities", "get_execution"})
# REST writes that only an admin may make; other writes run something, but searches read.
_ADMIN_WRITES = re.compile(r"^/v1/(capabilities(/import|/[^/]+|/[^/]+/cache)?|cache|pii/resolve)$")
_SEARCHES = re.compile(r"^/v1/(tools|capabilities)/search$")
_EXECUTES = re.compile(r"^/v1/capabilities/[^/]+/execute$")


def rest_scope(method: str, path: str) -> str:
    """The scope a REST request needs."""
    if path == "/v1/audit":
        return SCOPE_ADMIN
    if method in {"GET", "HEAD", "OPTIONS"} or _SEARCHES.match(path):
        return SCOPE_READ
    if _EXECUTES.match(path) or path.startswith("/v1/executions"):
        return SCOPE_EXECUTE
    return SCOPE_ADMIN if _ADMIN_WRITES.match(path) else SCOPE_EXECUTE


def mcp_scope(body: bytes) -> str:
    """The scope a JSON-RPC message (or batch) to an MCP endpoint needs: the highest of its parts."""
    try:
        message = orjson.loads(body) if body else {}
    except orjson.JSONDecodeError:
        return SCOPE_READ  # the MCP server answers a parse error; nothing runs
    messages = message if isinstance(message, list) else [message]
    needed = [_message_scope(m) for m in messages if isinstance(m, dict)]
    return max(needed, key=SCOPES.index, default=SCOPE_READ)


def _message_scope(message: dict[str, Any]) -> str:
    if message.get("method") != "tools/call":
        return SCOPE_READ
    params = message.get("params")
    name = params.get("name") if isinstance(params, dict) else None
    return SCOPE_READ if name in READ_TOOLS else SCOPE_EXECUTE


class ScopeGate:
    """ASGI middleware inside the body guard: 403 ``insufficient_scope`` naming the scope a
    person's token lacks, with the challenge MCP clients step up from."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        challenge: Callable[..., str],
        mcp_refusal: Callable[[AgentCardsError], Response] = error_response,
    ) -> None:
        self.app = app
        self.challenge = challenge  # ResourceServer.challenge
        self.mcp_refusal = mcp_refusal  # /mcp's refusal, a JSON-RPC error body (app.py)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        principal: Principal | None = (scope.get("state") or {}).get("principal")
        if scope["type"] != "http" or principal is None or principal.scopes is None:
            await self.app(scope, receive, send)
            return
        path, method = scope["path"], scope["method"]
        on_mcp = path == "/mcp" or path.startswith("/mcp/")
        if on_mcp:
            body, receive = await buffered(receive) if method == "POST" else (b"", receive)
            needed = mcp_scope(body)
        elif path.startswith("/v1/"):
            needed = rest_scope(method, path)
        else:
            needed = SCOPE_READ
        if principal.allows_scope(needed):
            await self.app(scope, receive, send)
            return
        refusal = (self.mcp_refusal if on_mcp else error_response)(
            Forbidden(
                f"this needs the scope {needed}; the token (narrowed by your groups) has "
                f"{' '.join(sorted(principal.scopes)) or 'none'}",
                required_scope=needed,
            )
        )
        refusal.headers["WWW-Authenticate"] = self.challenge(
            path, error="insufficient_scope", scope=needed
        )
        await refusal(scope, receive, send)
