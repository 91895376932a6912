"""Header values on the MCP endpoints as HTTP defines them: without surrounding whitespace.

RFC 9110 §5.5: a field value excludes the optional whitespace around it, and a parser must
drop it before the value is evaluated. uvicorn's default parser (httptools) hands it on, so
``Mcp-Name:  get_time `` reached the SDK as ``" get_time "`` and was refused as not matching
the body (-32020), which the 2026-07-28 header-validation scenario calls a MUST to accept.
Only the whitespace is dropped; a value that differs otherwise is still refused.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

_OWS = b" \t"


class TrimmedHeaderValues:
    """Strip spaces and tabs around every request header value under /mcp."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope.get("path", "").startswith("/mcp"):
            headers = scope["headers"]
            if any(value != value.strip(_OWS) for _, value in headers):
                scope = {**scope, "headers": [(name, value.strip(_OWS)) for name, value in headers]}
        await self.app(scope, receive, send)
