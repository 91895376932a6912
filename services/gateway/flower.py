"""Flower (the Celery monitor) at ``/flower/``, behind the dashboard's sign-in.

Flower 2.2 signs nobody in at a generic OpenID provider, so when people sign in to the
dashboard the gateway serves Flower itself: a request to ``/flower/...`` passes the auth
gate like any other (a dashboard session, an access token or a key), needs
``agentcards:admin`` (an admin key for scripts), and is streamed to Flower, which listens
on loopback (or the pod network) only and was started with ``--url_prefix=flower`` so its
links and assets resolve under the prefix. Flower 2.2 opens no websocket: plain HTTP only.

What reaches Flower: the request without the gateway's credentials (the client's
``Authorization`` header and the session cookies are dropped; Flower's own basic auth,
AGENTCARDS_FLOWER_BASIC_AUTH, is sent instead when set). Cookie-borne writes are checked by
the sign-in (``SignIn.principal``): from the gateway's own origin only.
"""

from __future__ import annotations

import base64
import hashlib

import httpx
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Route

from services.gateway.auth import principal_of_request
from services.gateway.errors import error_response
from services.gateway.security_headers import STRICT_CSP
from services.gateway.signin import FLOWER
from shared.config import Settings
from shared.errors import DependencyError, Forbidden

METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]
# RFC 9110 §7.6.1: meaningful for one connection only, never forwarded. Besides them:
# `host` (httpx sets Flower's) and `content-length` (the body is streamed as it came).
HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
     "transfer-encoding", "upgrade"}
)  # fmt: skip
# Flower's pages run one inline script (workers.html: `var autorefresh = 0|1;`, Tornado's
# whitespace folding applied); the policy allows exactly those by hash, nothing else inline.
_INLINE_SCRIPTS = ("\nvar autorefresh = 0;\n", "\nvar autorefresh = 1;\n")
_HASHES = " ".join(
    f"'sha256-{base64.b64encode(hashlib.sha256(s.encode()).digest()).decode()}'"
    for s in _INLINE_SCRIPTS
)
FLOWER_CSP = (
    STRICT_CSP.replace("script-src 'self'", f"script-src 'self' {_HASHES}")
    .replace("style-src 'self'", "style-src 'self' 'unsafe-inline'")  # its style attributes
    .replace("form-action 'none'", "form-action 'self'")
)
# Flower answers a page within its inspect timeout (1 s) or so; a slow broker, a little more.
TIMEOUT = httpx.Timeout(60.0, connect=5.0)


class FlowerProxy:
    """The ``/flower`` routes: admins' requests streamed to Flower (see the module doc)."""

    def __init__(self, settings: Settings, *, gateway_cookies: frozenset[str]) -> None:
        self.upstream = settings.flower_upstream or f"http://127.0.0.1:{settings.flower_port}"
        self.upstream = self.upstream.rstrip("/")
        self.gateway_cookies = gateway_cookies  # the sign-in's: never sent on to Flower
        auth = settings.flower_basic_auth
        self.authorization = (
            "Basic " + base64.b64encode(auth.get_secret_value().encode()).decode() if auth else None
        )
        self._client: httpx.AsyncClient | None = None

    def routes(self) -> list[BaseRoute]:
        return [
            Route(FLOWER, self.to_index, methods=["GET", "HEAD"], include_in_schema=False),
            Route(FLOWER + "/{rest:path}", self.forward, methods=METHODS, include_in_schema=False),
        ]

    async def to_index(self, request: Request) -> Response:
        return RedirectResponse(FLOWER + "/", status_code=307)

    async def forward(self, request: Request) -> Response:
        """The request, sent on to Flower as it came; Flower's answer, streamed back."""
        principal = principal_of_request(request)
        if not principal.admin:
            return error_response(
                Forbidden(
                    "Flower is for operators: it needs the scope agentcards:admin (or an admin "
                    "key)",
                    required_scope="agentcards:admin",
                )
            )
        client = self._client or self._open()
        # The path as the browser sent it: percent-escapes (a task name's `%2F`) stay escaped.
        raw_path = request.scope.get("raw_path") or request.url.path.encode()
        url = self.upstream + raw_path.decode("latin-1")
        if request.url.query:
            url += "?" + request.url.query
        # Flower's writes are small forms (the body guard bounds them): sent whole, with
        # their length, rather than chunked.
        body = await request.body() if request.method not in {"GET", "HEAD"} else None
        outgoing = client.build_request(
            request.method, url, headers=self._request_headers(request), content=body
        )
        try:
            answer = await client.send(outgoing, stream=True)
        except httpx.HTTPError as exc:
            return error_response(
                DependencyError(
                    f"Flower does not answer at {self.upstream} ({type(exc).__name__}): is it "
                    "running, with --url_prefix=flower? (AGENTCARDS_FLOWER_UPSTREAM)",
                    dependency="flower",
                )
            )
        headers = [
            (name, value)
            for name, value in answer.headers.multi_items()
            # Flower's basic-auth challenge would make the browser ask for Flower's password.
            if name.lower() not in HOP_BY_HOP and name.lower() != "www-authenticate"
        ]
        response = StreamingResponse(
            answer.aiter_raw(),
            status_code=answer.status_code,
            background=BackgroundTask(answer.aclose),
        )
        response.raw_headers = [
            (n.lower().encode("latin-1"), v.encode("latin-1")) for n, v in headers
        ]
        return response

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    def _open(self) -> httpx.AsyncClient:
        self._client = httpx.AsyncClient(timeout=TIMEOUT, follow_redirects=False, trust_env=False)
        return self._client

    def _request_headers(self, request: Request) -> list[tuple[str, str]]:
        """The browser's headers for Flower: no gateway credential, the original host kept (so
        Flower's own same-origin check compares the browser's Origin with the right host)."""
        headers: list[tuple[str, str]] = []
        for name, value in request.headers.items():
            lower = name.lower()
            if lower in HOP_BY_HOP or lower in {"authorization", "content-length", "dpop"}:
                continue
            if lower == "cookie":
                value = self._cookies_for_flower(value)
                if not value:
                    continue
            headers.append((lower, value))
        if self.authorization:
            headers.append(("authorization", self.authorization))
        return headers

    def _cookies_for_flower(self, header: str) -> str:
        """The Cookie header without the gateway's session cookies (Flower's `_xsrf` stays)."""
        kept = (c.strip() for c in header.split(";"))
        return "; ".join(c for c in kept if c and c.partition("=")[0] not in self.gateway_cookies)
