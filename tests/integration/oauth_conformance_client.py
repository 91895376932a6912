"""The toolhost's upstream OAuth client (shared/connections/oauth.py) as the MCP conformance
suite's client under test: ``conformance client --suite auth --command "python -m
tests.integration.oauth_conformance_client"`` appends the server URL.

It does what a person's connection does (services/gateway/connect.py), with the browser's
step scripted: discovery from the server's 401, the client (the pre-registered one the
scenario gives in ``MCP_CONFORMANCE_CONTEXT``; else the client ID metadata document's URL
where the authorization server takes those; else a registration), an authorization request with PKCE, whose
redirect back to the gateway's callback is read instead of followed (the suite's
authorization server approves at once), the RFC 9207 ``iss`` check, the code redeemed; then
an MCP session (the SDK's client, negotiated as the toolhost does) with the token, listing
and calling the tools.

Where the toolhost answers a person ``authorization_required`` with a new link, this client
authorizes again at once, once per request: on a 401 (discovered afresh, so an authorization
server named anew is registered with: SEP-2352) and on a 403 ``insufficient_scope`` naming
a scope not held (the union of both: ``step_up_scope``, SEP-2350).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncGenerator, Generator
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx2
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from services.toolhost.rounds import negotiate
from shared.connections.oauth import (
    Client,
    begin_at,
    discover,
    issuer_refusal,
    redeem,
    step_up_scope,
)

REDIRECT_URI = "http://127.0.0.1:9/oauth/callback"  # never opened: the redirect is read
# The suite's stand-in for the gateway's `<public_url>/oauth/client-metadata.json`: the URL its
# `auth/basic-cimd` scenario expects as the client_id (its authorization server fetches none).
METADATA_URL = "https://conformance-test.local/client-metadata.json"


class Authorized(httpx2.Auth):
    """Sends the token held, and authorizes (again) when the server's answer asks for it."""

    def __init__(self, server_url: str, context: dict[str, Any]) -> None:
        self.server_url, self.context = server_url, context
        self.token: str | None = None
        self.granted: str | None = None  # the scopes asked for and granted so far
        self.given_at: str | None = None  # the issuer a pre-registered client belongs to
        self._lock = asyncio.Lock()

    async def async_auth_flow(
        self, request: httpx2.Request
    ) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        sent = self.token
        if sent:
            request.headers["Authorization"] = f"Bearer {sent}"
        response = yield request
        wider = step_up_scope(response, granted=self.granted)
        if response.status_code != 401 and wider is None:
            return
        async with self._lock:  # one authorization at a time; a newer token is simply used
            if self.token == sent:
                await self.authorize(wider)
        request.headers["Authorization"] = f"Bearer {self.token}"
        yield request

    def sync_auth_flow(self, request: httpx2.Request) -> Generator[httpx2.Request, Any, None]:
        raise RuntimeError("asynchronous only")

    async def authorize(self, scope: str | None) -> None:
        found = await discover(self.server_url)
        issuer = str(found.metadata.issuer)
        given = None
        if self.context.get("client_id") and self.given_at in (None, issuer):
            # Pre-registered at the first authorization server only: never shown to another.
            self.given_at = issuer
            given = Client.at(found.metadata, str(self.context["client_id"]),
                              self.context.get("client_secret"))  # fmt: skip
        started = await begin_at(found, scopes=(scope or "").split(), redirect_uri=REDIRECT_URI,
                                 client=given, metadata_url=METADATA_URL)  # fmt: skip
        async with httpx2.AsyncClient(timeout=10, follow_redirects=False) as browser:
            answer = await browser.get(started.url)
        back = answer.headers.get("location", "")
        params = {k: v[0] for k, v in parse_qs(urlsplit(back).query).items()}
        if params.get("state") != started.state or "code" not in params:
            raise SystemExit(
                f"the authorization server did not answer with a code: {back or answer}"
            )
        required = bool(found.metadata.authorization_response_iss_parameter_supported)
        wrong = issuer_refusal(params.get("iss"), issuer=issuer, required=required)
        if wrong is not None:
            raise SystemExit(f"refused: {wrong}")
        tokens = await redeem(token_endpoint=str(found.metadata.token_endpoint),
                              client=started.client, redirect_uri=REDIRECT_URI,
                              code=params["code"], verifier=started.verifier,
                              resource=found.resource)  # fmt: skip
        self.token = str(tokens["access_token"])
        self.granted = " ".join(dict.fromkeys(
            f"{started.scope} {tokens.get('scope') or ''}".split()))  # fmt: skip


async def main(server_url: str) -> None:
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    auth = Authorized(server_url, context)
    await auth.authorize(None)  # as a person connects before their first call
    async with (
        httpx2.AsyncClient(auth=auth, timeout=30) as http,
        streamable_http_client(server_url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await negotiate(session)  # as the toolhost: server/discover, else initialize
        listed = await session.list_tools()
        for tool in listed.tools[:1]:
            await session.call_tool(tool.name, {})


if __name__ == "__main__":
    asyncio.run(main(sys.argv[-1]))
