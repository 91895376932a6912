"""The toolhost's upstream OAuth client (shared/connections/oauth.py) as the MCP conformance
suite's client under test: ``conformance client --suite auth --command "python -m
tests.integration.oauth_conformance_client"`` appends the server URL.

It does what a person's connection does (services/gateway/connect.py), with the browser's
step scripted: discovery from the server's 401, registration (or the pre-registered client
the scenario gives in ``MCP_CONFORMANCE_CONTEXT``), an authorization request with PKCE, whose
redirect back to the gateway's callback is read instead of followed (the suite's
authorization server approves at once), the RFC 9207 ``iss`` check, the code redeemed; then
an MCP session (the SDK's client) with the token, listing and calling the tools.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from urllib.parse import parse_qs, urlsplit

import httpx2
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from shared.connections.oauth import Client, begin, discover, issuer_refusal, redeem

REDIRECT_URI = "http://127.0.0.1:9/oauth/callback"  # never opened: the redirect is read


async def main(server_url: str) -> None:
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    given = None
    if context.get("client_id"):  # pre-registered: the secret goes the way the server takes
        found = await discover(server_url)
        given = Client.at(found.metadata, str(context["client_id"]), context.get("client_secret"))
    started = await begin(server_url, scopes=[], redirect_uri=REDIRECT_URI, client=given)
    found, client, state, verifier = started.found, started.client, started.state, started.verifier
    async with httpx2.AsyncClient(timeout=10, follow_redirects=False) as browser:
        answer = await browser.get(started.url)
    back = answer.headers.get("location", "")
    params = {k: v[0] for k, v in parse_qs(urlsplit(back).query).items()}
    if params.get("state") != state or "code" not in params:
        raise SystemExit(f"the authorization server did not answer with a code: {back or answer}")
    required = bool(found.metadata.authorization_response_iss_parameter_supported)
    wrong = issuer_refusal(params.get("iss"), issuer=str(found.metadata.issuer), required=required)
    if wrong is not None:
        raise SystemExit(f"refused: {wrong}")
    tokens = await redeem(token_endpoint=str(found.metadata.token_endpoint), client=client,
                          redirect_uri=REDIRECT_URI, code=params["code"], verifier=verifier,
                          resource=found.resource)  # fmt: skip
    headers = {"Authorization": f"Bearer {tokens['access_token']}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30) as http,
        streamable_http_client(server_url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        listed = await session.list_tools()
        for tool in listed.tools[:1]:
            await session.call_tool(tool.name, {})


if __name__ == "__main__":
    asyncio.run(main(sys.argv[-1]))
