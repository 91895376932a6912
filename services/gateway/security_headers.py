"""ASGI middleware adding browser security headers: nosniff and no referrer everywhere, a strict CSP on HTML pages.

The dashboard's policy allows nothing inline and nothing from elsewhere. The API docs
(Swagger UI, vendored under /static/vendor) start with one inline script; their policy
allows exactly that script by hash (rest/docs.py), and still nothing from elsewhere.
"""

from __future__ import annotations

from collections.abc import Mapping

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

STRICT_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
EVERY_RESPONSE = {"x-content-type-options": "nosniff", "referrer-policy": "no-referrer"}
HTML_ONLY = {"x-frame-options": "DENY"}  # frame-ancestors for browsers without CSP level 2


class SecurityHeaders:
    """Set the headers on every HTTP response; ``page_policies`` maps a path to its own CSP
    (a key ending in ``/``: every path under it)."""

    def __init__(self, app: ASGIApp, *, page_policies: Mapping[str, str]) -> None:
        self.app = app
        self.page_policies = dict(page_policies)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        policy = self.policy(scope.get("path", ""))

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in EVERY_RESPONSE.items():
                    headers.setdefault(name, value)
                if headers.get("content-type", "").startswith("text/html"):
                    headers["content-security-policy"] = policy
                    for name, value in HTML_ONLY.items():
                        headers.setdefault(name, value)
            await send(message)

        await self.app(scope, receive, send_with_headers)

    def policy(self, path: str) -> str:
        """The CSP of the HTML page at ``path``."""
        return self.page_policies.get(path) or next(
            (p for prefix, p in self.page_policies.items()
             if prefix.endswith("/") and path.startswith(prefix)),
            STRICT_CSP,
        )  # fmt: skip
