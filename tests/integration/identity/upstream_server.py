"""A real MCP server behind the gateway that acts for people (streamable HTTP, the mcp SDK):
it takes only access tokens from the identity provider for its own audience, and its tool
``whoami``, its resources ``whoami://me`` and ``whoami://tickets/{owner}`` and its prompt
``greeting`` say whose token they saw.

Every token presented is appended to ``LOG`` (one JSON line: its subject, audience, client,
whether it was taken, and the token itself, so a test can look for it where it must not be):
tokens of a subject listed in ``LOG.revoked`` (one a line) are refused, as a grant revoked at
the provider makes its server refuse them;
a test reads exactly what reached the server, refused tokens included (the gateway's own
token passed through would show up as refused, audience the gateway's).

Its tool ``write_ticket`` needs the scope ``upstream:write`` besides ``upstream:read``: a call
of it with a token without that scope is answered 403 ``insufficient_scope`` naming it (as the
MCP authorization spec has a server ask for a step up), before the MCP server sees it.

``python -m tests.integration.identity.upstream_server PORT ISSUER AUDIENCE LOG``
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from joserfc import jwt
from joserfc.errors import JoseError
from joserfc.jwk import KeySet
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer

SCOPE = "upstream:read"
WRITE_SCOPE = "upstream:write"  # write_ticket's, asked for by a step up


class IssuerTokens:
    """Checks a JWT access token of the issuer for ``audience`` (joserfc), logging each one."""

    def __init__(self, issuer: str, audience: str, log: Path) -> None:
        self.issuer, self.audience, self.log = issuer, audience, log
        self._keys: KeySet | None = None

    async def verify_token(self, token: str) -> AccessToken | None:
        claims: dict[str, Any] = {}
        taken = False
        try:
            if self._keys is None:
                async with httpx.AsyncClient(timeout=10) as client:
                    found = await client.get(f"{self.issuer}/jwks")
                self._keys = KeySet.import_key_set(found.json())
            claims = dict(jwt.decode(token, self._keys).claims)
            jwt.JWTClaimsRegistry(
                iss={"essential": True, "value": self.issuer},
                aud={"essential": True, "value": self.audience},
                exp={"essential": True},
                sub={"essential": True},
            ).validate(claims)
            taken = True
        except (JoseError, ValueError):
            pass
        listed = self.log.with_name(self.log.name + ".revoked")
        revoked = taken and listed.exists() and claims["sub"] in listed.read_text().split()
        taken = taken and not revoked
        with self.log.open("a", encoding="utf-8") as out:
            out.write(json.dumps({"sub": claims.get("sub"), "aud": claims.get("aud"),
                                  "client_id": claims.get("client_id"), "taken": taken,
                                  "revoked": revoked, "token": token}) + "\n")  # fmt: skip
        if not taken:
            return None
        return AccessToken(
            token=token,
            client_id=str(claims.get("client_id") or ""),
            scopes=str(claims.get("scope") or "").split(),
            expires_at=int(claims["exp"]),
            resource=self.audience,
            subject=str(claims["sub"]),
            claims=claims,
        )


class NeedsWriteScope:
    """ASGI middleware: a ``tools/call`` of ``write_ticket`` whose token lacks
    ``upstream:write`` is answered 403 ``insufficient_scope`` (the body is read, then replayed)."""

    def __init__(self, app: Any, tokens: IssuerTokens, metadata_url: str) -> None:
        self.app, self.tokens, self.metadata_url = app, tokens, metadata_url

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        body, more = b"", True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        try:
            rpc = json.loads(body)
        except ValueError:
            rpc = None
        params = rpc.get("params") if isinstance(rpc, dict) else None
        if isinstance(params, dict) and params.get("name") == "write_ticket":
            headers = dict(scope["headers"])
            bearer = headers.get(b"authorization", b"").decode().removeprefix("Bearer ")
            seen = await self.tokens.verify_token(bearer) if bearer else None
            if seen is not None and WRITE_SCOPE not in seen.scopes:
                challenge = (f'Bearer error="insufficient_scope", scope="{WRITE_SCOPE}", '
                             f'resource_metadata="{self.metadata_url}"')  # fmt: skip
                await send({"type": "http.response.start", "status": 403,
                            "headers": [(b"content-type", b"application/json"),
                                        (b"www-authenticate", challenge.encode())]})  # fmt: skip
                await send({"type": "http.response.body",
                            "body": b'{"error": "insufficient_scope"}'})  # fmt: skip
                return
        replayed = False

        async def replay() -> dict[str, Any]:
            nonlocal replayed
            if replayed:
                return dict(await receive())
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)


def _seen() -> dict[str, Any]:
    """The subject, audience, client and actor of the token the request came with."""
    seen = get_access_token()
    claims = (seen.claims or {}) if seen is not None else {}
    return {"sub": claims.get("sub"), "aud": claims.get("aud"),
            "client_id": claims.get("client_id"), "act": claims.get("act")}  # fmt: skip


def build(port: int, issuer: str, audience: str, log: Path) -> MCPServer:
    server = MCPServer(
        "upstream",
        token_verifier=IssuerTokens(issuer, audience, log),
        auth=AuthSettings(
            issuer_url=issuer,  # type: ignore[arg-type]  # pydantic parses the URL
            resource_server_url=audience,  # type: ignore[arg-type]
            validate_token_resource=True,
            required_scopes=[SCOPE],
        ),
    )

    @server.tool()
    def whoami() -> dict[str, Any]:
        """Whose token this call came with: its subject, audience and the client that got it."""
        return _seen()

    # A resource, a resource template and a prompt that say whose token read them, as the
    # tool does: a person's view of the server, never another's.
    @server.resource("whoami://me", mime_type="application/json")
    def me() -> str:
        """Whose token read this resource."""
        return json.dumps(_seen())

    @server.resource("whoami://tickets/{owner}", mime_type="application/json")
    def tickets_of(owner: str) -> str:
        """One person's tickets, read with whose token."""
        return json.dumps({"owner": owner, **_seen()})

    @server.prompt()
    def greeting() -> str:
        """A greeting naming whose token asked for it."""
        return f"Hello {_seen()['sub']}"

    @server.tool()
    def write_ticket(title: str) -> dict[str, Any]:
        """Files a ticket as the person whose token came with the call (scope upstream:write)."""
        seen = get_access_token()
        claims = (seen.claims or {}) if seen is not None else {}
        return {"filed": title, "by": claims.get("sub"), "scope": claims.get("scope")}

    return server


if __name__ == "__main__":
    port, issuer, audience, log = int(sys.argv[1]), sys.argv[2], sys.argv[3], Path(sys.argv[4])
    mcp_server = build(port, issuer, audience, log)
    app = NeedsWriteScope(
        mcp_server.streamable_http_app(host="127.0.0.1"),
        IssuerTokens(issuer, audience, log),
        audience.replace("/mcp", "/.well-known/oauth-protected-resource/mcp"),
    )
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")
