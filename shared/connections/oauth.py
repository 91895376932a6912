"""The gateway as an OAuth client of a server's own authorization server, for one person.

As any MCP client does (MCP authorization; the SDK's discovery helpers, authlib for the
OAuth requests): the server's 401 names its protected resource metadata (RFC 9728), which
names its authorization server, whose metadata (RFC 8414 / OpenID discovery) names the
endpoints; the gateway registers a client there (RFC 7591 dynamic registration, once per
authorization server and process), sends the person to authorize with PKCE (S256) and the
server as ``resource`` (RFC 8707), exchanges the code at ``<public_url>/oauth/callback`` and
refreshes the access token with the refresh token when it expires.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import httpx
import httpx2
from authlib.integrations.httpx_client import AsyncOAuth2Client, OAuthError
from mcp.client.auth.exceptions import OAuthRegistrationError
from mcp.client.auth.utils import (
    build_oauth_authorization_server_metadata_discovery_urls,
    build_protected_resource_metadata_discovery_urls,
    create_client_registration_request,
    create_oauth_metadata_request,
    extract_resource_metadata_from_www_auth,
    handle_auth_metadata_response,
    handle_protected_resource_response,
    handle_registration_response,
)
from mcp.shared.auth import OAuthClientMetadata, OAuthMetadata

FETCH_TIMEOUT_S = 10.0
CLIENT_NAME = "AgentCards gateway"


class ConnectFailed(Exception):
    """Raised when a connection cannot be made or renewed: the server, its authorization
    server or the answer is wrong or unreachable (the message says which)."""


class TokenRefused(ConnectFailed):
    """Raised when the authorization server refuses a code or a refresh token (invalid_grant,
    a PKCE mismatch, a revoked grant): the person must connect again."""


@dataclass(frozen=True, slots=True)
class Discovered:
    """What a server's 401 led to: its resource id, its authorization server's metadata, and
    the scopes it asks for."""

    resource: str
    metadata: OAuthMetadata
    scopes: list[str]


@dataclass(frozen=True, slots=True)
class Client:
    client_id: str
    client_secret: str | None


_registered: dict[tuple[str, str], Client] = {}  # (issuer, redirect URI) -> the client there


async def discover(server_url: str) -> Discovered:
    """Follow the server's 401 to its authorization server's metadata."""
    async with httpx2.AsyncClient(timeout=FETCH_TIMEOUT_S, follow_redirects=False) as http:
        try:
            answer = await http.post(
                server_url,
                json={"jsonrpc": "2.0", "id": 0, "method": "ping"},
                headers={"Accept": "application/json, text/event-stream"},
            )
        except httpx2.HTTPError as exc:
            raise ConnectFailed(f"cannot reach the server {server_url}: {exc}") from exc
        if answer.status_code != 401:
            raise ConnectFailed(
                f"the server {server_url} answered {answer.status_code} without a token, not "
                "401: it does not ask for OAuth"
            )
        hint = extract_resource_metadata_from_www_auth(answer)
        resource = None
        for url in build_protected_resource_metadata_discovery_urls(hint, server_url):
            resource = await handle_protected_resource_response(
                await _get(http, url, "the server's protected resource metadata")
            )
            if resource is not None:
                break
        if resource is None:
            raise ConnectFailed(f"the server {server_url} publishes no protected resource metadata")
        issuer = str(resource.authorization_servers[0])
        metadata = None
        for url in build_oauth_authorization_server_metadata_discovery_urls(issuer, server_url):
            found, metadata = await handle_auth_metadata_response(
                await _get(http, url, f"the authorization server {issuer}")
            )
            if metadata is not None or not found:
                break
        if metadata is None:
            raise ConnectFailed(f"the authorization server {issuer} publishes no metadata")
    return Discovered(str(resource.resource), metadata, list(resource.scopes_supported or []))


async def _get(http: httpx2.AsyncClient, url: str, what: str) -> httpx2.Response:
    try:
        return await http.send(create_oauth_metadata_request(url))
    except httpx2.HTTPError as exc:
        raise ConnectFailed(f"cannot reach {what} ({url}): {exc}") from exc


async def client_at(found: Discovered, *, redirect_uri: str, scope: str) -> Client:
    """The gateway's client at the server's authorization server: registered (RFC 7591) on
    first use, then reused by this process."""
    issuer = str(found.metadata.issuer)
    known = _registered.get((issuer, redirect_uri))
    if known is not None:
        return known
    if found.metadata.registration_endpoint is None:
        raise ConnectFailed(
            f"the authorization server {issuer} takes no dynamic client registration"
        )
    wanted = OAuthClientMetadata(
        redirect_uris=[redirect_uri],  # type: ignore[list-item]  # pydantic parses the URL
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        token_endpoint_auth_method="none",
        client_name=CLIENT_NAME,
        scope=scope or None,
    )
    request = create_client_registration_request(found.metadata, wanted, issuer)
    async with httpx2.AsyncClient(timeout=FETCH_TIMEOUT_S) as http:
        try:
            info = await handle_registration_response(await http.send(request))
        except (httpx2.HTTPError, OAuthRegistrationError) as exc:
            raise ConnectFailed(f"registering at {issuer} failed: {exc}") from exc
    client = Client(info.client_id or "", info.client_secret)
    _registered[(issuer, redirect_uri)] = client
    return client


def requested_scope(found: Discovered, configured: list[str]) -> str:
    """The scopes asked for: the configured ones, else the server's; with ``offline_access``
    when the authorization server offers it (a refresh token)."""
    scopes = list(configured or found.scopes)
    if "offline_access" in (found.metadata.scopes_supported or []):
        scopes.append("offline_access")
    return " ".join(dict.fromkeys(scopes))


def _oauth(client: Client, redirect_uri: str | None = None) -> AsyncOAuth2Client:
    return AsyncOAuth2Client(
        client_id=client.client_id,
        client_secret=client.client_secret,
        token_endpoint_auth_method="client_secret_basic" if client.client_secret else "none",
        redirect_uri=redirect_uri,
        code_challenge_method="S256",
        timeout=FETCH_TIMEOUT_S,
        follow_redirects=False,
    )


async def authorization_url(
    found: Discovered, client: Client, *, redirect_uri: str, scope: str, state: str, verifier: str
) -> str:
    """Where to send the person: an authorization request with PKCE and the resource."""
    extra: dict[str, Any] = {"prompt": "consent"} if "offline_access" in scope.split() else {}
    async with _oauth(client, redirect_uri) as oauth:
        url, _ = oauth.create_authorization_url(
            str(found.metadata.authorization_endpoint),
            state=state,
            code_verifier=verifier,
            scope=scope,
            resource=found.resource,
            **extra,
        )
    return str(url)


async def redeem(
    *, token_endpoint: str, client: Client, redirect_uri: str, code: str, verifier: str,
    resource: str,
) -> dict[str, Any]:  # fmt: skip
    """The tokens for an authorization code (TokenRefused: a wrong verifier, a used code)."""
    return await _token(
        client,
        token_endpoint,
        redirect_uri,
        grant_type="authorization_code",
        code=code,
        code_verifier=verifier,
        resource=resource,
    )


async def refresh(
    *, token_endpoint: str, client: Client, refresh_token: str, resource: str
) -> dict[str, Any]:
    """New tokens for a refresh token (TokenRefused: expired or revoked)."""
    return await _token(
        client,
        token_endpoint,
        None,
        grant_type="refresh_token",
        refresh_token=refresh_token,
        resource=resource,
    )


async def _token(
    client: Client, token_endpoint: str, redirect_uri: str | None, **params: str
) -> dict[str, Any]:
    try:
        async with _oauth(client, redirect_uri) as oauth:
            answer = await oauth.fetch_token(token_endpoint, **params)
    except OAuthError as exc:
        raise TokenRefused(f"{exc.error}: {exc.description or 'refused'}") from exc
    except (httpx.HTTPError, ValueError) as exc:
        raise ConnectFailed(f"the authorization server's token endpoint: {exc}") from exc
    if not isinstance(answer.get("access_token"), str):
        raise ConnectFailed("the authorization server answered without an access_token")
    tokens = dict(answer)
    expires_in = tokens.get("expires_in")
    tokens["expires_at"] = (
        time.time() + float(expires_in) if isinstance(expires_in, int | float) else None
    )
    return tokens
