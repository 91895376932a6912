"""The gateway as an OAuth client of a server's own authorization server, for one person.

As any MCP client does (MCP authorization; the SDK's discovery helpers, authlib for the
OAuth requests): the server's 401 names its protected resource metadata (RFC 9728), which
names its authorization server, whose metadata (RFC 8414 / OpenID discovery) names the
endpoints; the gateway's client there is its client ID metadata document's URL when the
authorization server takes those (``client_id_metadata_document_supported``; the document:
metadata_document.py), else one it registers (RFC 7591 dynamic registration, once per
authorization server and process); it sends the person to authorize with PKCE (S256) and the
server as ``resource`` (RFC 8707), exchanges the code at ``<public_url>/oauth/callback`` and
refreshes the access token with the refresh token when it expires.

A server that answers 403 ``insufficient_scope`` naming a scope the token lacks asks for a
step up: authorizing again for the union of the scopes held and those it names (SEP-2350;
``step_up_scope``). A server whose protected resource metadata names another authorization
server is discovered again: the gateway registers there, never presenting the first one's
registered client (SEP-2352; clients are kept per issuer; a metadata document's URL is no
secret of any one server and is shown to each).
"""

from __future__ import annotations

import logging
import secrets
import time
from dataclasses import dataclass
from typing import Any

import httpx2
from authlib.integrations.httpx_client import AsyncOAuth2Client, OAuthError
from mcp.client.auth.exceptions import OAuthFlowError, OAuthRegistrationError
from mcp.client.auth.utils import (
    build_oauth_authorization_server_metadata_discovery_urls,
    build_protected_resource_metadata_discovery_urls,
    create_client_registration_request,
    create_oauth_metadata_request,
    extract_field_from_www_auth,
    extract_resource_metadata_from_www_auth,
    extract_scope_from_www_auth,
    handle_auth_metadata_response,
    handle_protected_resource_response,
    handle_registration_response,
    should_use_client_metadata_url,
    union_scopes,
    validate_metadata_issuer,
)
from mcp.shared.auth import OAuthClientMetadata, OAuthMetadata
from mcp.shared.auth_utils import check_resource_allowed, resource_url_from_server_url

from shared.connections.metadata_document import CLIENT_NAME

log = logging.getLogger(__name__)
FETCH_TIMEOUT_S = 10.0
# OAuth errors of a token endpoint that say "try later", not "this grant is refused".
UNAVAILABLE_ERRORS = frozenset({"temporarily_unavailable", "server_error"})


class ConnectFailed(Exception):
    """Raised when a connection cannot be made or renewed: the server, its authorization
    server or the answer is wrong or unreachable (the message says which)."""


class TokenRefused(ConnectFailed):
    """Raised when the authorization server refuses a code or a refresh token (invalid_grant,
    a PKCE mismatch, a revoked grant): the person must connect again."""


@dataclass(frozen=True, slots=True)
class Discovered:
    """What a server's 401 led to: its resource id, its authorization server's metadata, and
    the scopes it asks for (its 401's ``scope``, else its metadata's ``scopes_supported``)."""

    resource: str
    metadata: OAuthMetadata
    scopes: list[str]


@dataclass(frozen=True, slots=True)
class Client:
    client_id: str
    client_secret: str | None
    # How the client authenticates at the token endpoint (RFC 7591 names).
    auth_method: str = "client_secret_basic"

    @classmethod
    def at(
        cls,
        metadata: OAuthMetadata,
        client_id: str,
        secret: str | None,
        registered: str | None = None,
    ) -> Client:
        """A client of ``metadata``'s server, authenticating the way it was registered
        (``registered``, the registration's ``token_endpoint_auth_method``, when it is one we
        speak); else a secret goes the way the server takes (basic unless it takes only
        ``client_secret_post``); without one, none."""
        if registered == "none" or (secret and registered in SECRET_METHODS):
            return cls(client_id, secret, registered)
        supported = metadata.token_endpoint_auth_methods_supported or ["client_secret_basic"]
        post_only = "client_secret_basic" not in supported and "client_secret_post" in supported
        method = (
            "none" if not secret else "client_secret_post" if post_only else "client_secret_basic"
        )
        return cls(client_id, secret, method)

    @classmethod
    def stored(cls, client_id: str, secret: str | None, method: str | None) -> Client:
        """A connection's client, as stored: its method, or (a row stored without one)
        basic with a secret, else none."""
        fallback = "client_secret_basic" if secret else "none"
        return cls(client_id, secret, method or fallback)


# The token endpoint authentication methods a client with a secret may be registered with.
SECRET_METHODS = frozenset({"client_secret_basic", "client_secret_post"})
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
        challenged = extract_scope_from_www_auth(answer)
        resource = None
        for url in build_protected_resource_metadata_discovery_urls(hint, server_url):
            resource = await handle_protected_resource_response(
                await _get(http, url, "the server's protected resource metadata")
            )
            if resource is not None:
                break
        if resource is None:
            raise ConnectFailed(f"the server {server_url} publishes no protected resource metadata")
        if not check_resource_allowed(
            resource_url_from_server_url(server_url), str(resource.resource)
        ):  # a server must not send its clients' tokens to another resource's issuer
            raise ConnectFailed(
                f"the server {server_url} names another resource ({resource.resource}) in "
                "its protected resource metadata"
            )
        issuer = str(resource.authorization_servers[0])
        metadata = None
        for url in build_oauth_authorization_server_metadata_discovery_urls(issuer, server_url):
            got = await _get(http, url, f"the authorization server {issuer}")
            found, metadata = await handle_auth_metadata_response(got)
            if not found:  # a server error: it is down, not without metadata
                raise ConnectFailed(
                    f"the authorization server {issuer} is not answering: {url} answered "
                    f"HTTP {got.status_code}"
                )
            if metadata is not None:
                break
        if metadata is None:
            raise ConnectFailed(f"the authorization server {issuer} publishes no metadata")
        try:  # RFC 8414 3.3: metadata naming another issuer is not that server's
            validate_metadata_issuer(metadata, issuer)
        except OAuthFlowError as exc:
            raise ConnectFailed(str(exc)) from exc
    scopes = challenged.split() if challenged else list(resource.scopes_supported or [])
    return Discovered(str(resource.resource), metadata, scopes)


async def _get(http: httpx2.AsyncClient, url: str, what: str) -> httpx2.Response:
    try:
        return await http.send(create_oauth_metadata_request(url))
    except httpx2.HTTPError as exc:
        raise ConnectFailed(f"cannot reach {what} ({url}): {exc}") from exc


async def client_at(
    found: Discovered, *, redirect_uri: str, metadata_url: str | None = None
) -> Client:
    """The gateway's client at the server's authorization server: ``metadata_url`` (its client
    ID metadata document, https) as the client_id when the authorization server takes those,
    with no secret and no registration; else registered (RFC 7591) on first use, then reused
    by this process. Registered without a ``scope``: one client serves every server and
    person of that authorization server, and a client limited to the scopes first asked for
    could never step up; each authorization request names its scopes."""
    if metadata_url is not None and should_use_client_metadata_url(found.metadata, metadata_url):
        return Client(metadata_url, None, "none")
    issuer = str(found.metadata.issuer)
    offers_documents = found.metadata.client_id_metadata_document_supported is True
    if offers_documents:
        log.info(
            "the authorization server %s takes client ID metadata documents, but this gateway "
            "offers none (its public URL is not https): registering instead",
            issuer,
        )
    known = _registered.get((issuer, redirect_uri))
    if known is not None:
        return known
    if found.metadata.registration_endpoint is None:
        why = f"the authorization server {issuer} takes no dynamic client registration"
        if offers_documents:
            why += (
                " (it takes client ID metadata documents, which the gateway offers only when "
                "its public URL, AGENTCARDS_PUBLIC_URL, is https)"
            )
        raise ConnectFailed(why)
    wanted = OAuthClientMetadata(
        redirect_uris=[redirect_uri],  # type: ignore[list-item]  # pydantic parses the URL
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        token_endpoint_auth_method="none",
        client_name=CLIENT_NAME,
        # A server with an https redirect URI (the SDK's default, native, is for apps on
        # the person's device: OpenID providers refuse it a non-loopback https URI).
        application_type="web",
    )
    request = create_client_registration_request(found.metadata, wanted, issuer)
    async with httpx2.AsyncClient(timeout=FETCH_TIMEOUT_S) as http:
        try:
            info = await handle_registration_response(await http.send(request))
        except (httpx2.HTTPError, OAuthRegistrationError) as exc:
            raise ConnectFailed(f"registering at {issuer} failed: {exc}") from exc
    client = Client.at(found.metadata, info.client_id or "", info.client_secret,
                       info.token_endpoint_auth_method)  # fmt: skip
    _registered[(issuer, redirect_uri)] = client
    return client


def insufficient_scope(response: httpx2.Response) -> str | None:
    """The scope a 403 ``insufficient_scope`` answer names ("" when it names none); None
    for any other answer."""
    if response.status_code != 403:
        return None
    if extract_field_from_www_auth(response, "error") != "insufficient_scope":
        return None
    return extract_scope_from_www_auth(response) or ""


def wider_scope(granted: str | None, challenged: str | None) -> str | None:
    """The scope to authorize again with for ``challenged``: the union with what is
    ``granted`` (SEP-2350, the SDK's ``union_scopes``); None when it adds nothing
    (authorizing again could not help: the server refuses whatever the person grants)."""
    if not challenged or set(challenged.split()) <= set((granted or "").split()):
        return None
    return union_scopes(granted, challenged)


def step_up_scope(response: httpx2.Response, *, granted: str | None) -> str | None:
    """The scope to authorize again with when ``response`` is a 403 ``insufficient_scope``
    naming scopes that ``granted`` lacks (``wider_scope``); None for any other answer."""
    return wider_scope(granted, insufficient_scope(response))


def requested_scope(found: Discovered, configured: list[str]) -> str:
    """The scopes asked for: the configured ones, else the server's; with ``offline_access``
    when the authorization server offers it (a refresh token)."""
    scopes = list(configured or found.scopes)
    if "offline_access" in (found.metadata.scopes_supported or []):
        scopes.append("offline_access")
    return " ".join(dict.fromkeys(scopes))


@dataclass(frozen=True, slots=True)
class Started:
    """An authorization request made: where to send the person, and what its answer needs."""

    found: Discovered
    client: Client
    scope: str
    url: str
    state: str
    verifier: str


async def begin(
    server_url: str, *, scopes: list[str], redirect_uri: str, client: Client | None = None,
    metadata_url: str | None = None,
) -> Started:  # fmt: skip
    """Discover the server's authorization server, take a client there (``client``, given:
    pre-registered; else ``client_at``: the metadata document, else a registration) and make
    an authorization request with a fresh state and PKCE."""
    found = await discover(server_url)
    return await begin_at(found, scopes=scopes, redirect_uri=redirect_uri, client=client,
                          metadata_url=metadata_url)  # fmt: skip


async def begin_at(
    found: Discovered, *, scopes: list[str], redirect_uri: str, client: Client | None = None,
    metadata_url: str | None = None,
) -> Started:  # fmt: skip
    """``begin`` at an authorization server already discovered."""
    scope = requested_scope(found, scopes)
    if client is None:
        client = await client_at(found, redirect_uri=redirect_uri, metadata_url=metadata_url)
    state, verifier = secrets.token_urlsafe(32), secrets.token_urlsafe(64)
    url = await authorization_url(found, client, redirect_uri=redirect_uri, scope=scope,
                                  state=state, verifier=verifier)  # fmt: skip
    return Started(found, client, scope, url, state, verifier)


def issuer_refusal(iss: str | None, *, issuer: str, required: bool) -> str | None:
    """Why an authorization answer's ``iss`` (RFC 9207) is refused, or None: it must be the
    issuer when the authorization server says it sends one, and whenever it is sent."""
    if (required or iss is not None) and iss != issuer:
        return f"the answer names issuer {iss!r}, not {issuer!r} (RFC 9207)"
    return None


def _oauth(client: Client, redirect_uri: str | None = None) -> AsyncOAuth2Client:
    return AsyncOAuth2Client(
        client_id=client.client_id,
        client_secret=client.client_secret,
        token_endpoint_auth_method=client.auth_method if client.client_secret else "none",
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


async def revoke(*, server_url: str, client: Client, token: str, hint: str) -> str | None:
    """Revoke ``token`` (``hint``: ``refresh_token`` or ``access_token``) at the server's
    authorization server (RFC 7009; a refresh token's revocation ends its grant); None when
    done, else why not (no revocation endpoint, unreachable, refused)."""
    try:
        found = await discover(server_url)
    except ConnectFailed as exc:
        return str(exc)
    endpoint = found.metadata.revocation_endpoint
    if endpoint is None:
        return f"the authorization server {found.metadata.issuer} offers no token revocation"
    try:
        async with _oauth(client) as oauth:
            answer = await oauth.revoke_token(str(endpoint), token=token, token_type_hint=hint)
    except (httpx2.HTTPError, OAuthError) as exc:
        return f"revoking at {endpoint} failed: {exc}"
    if answer.status_code != 200:
        return f"revoking at {endpoint} was answered HTTP {answer.status_code}"
    return None


async def _token(
    client: Client, token_endpoint: str, redirect_uri: str | None, **params: str
) -> dict[str, Any]:
    try:
        async with _oauth(client, redirect_uri) as oauth:
            answer = await oauth.fetch_token(token_endpoint, **params)
    except OAuthError as exc:
        why = f"{exc.error}: {exc.description or 'refused'}"
        if exc.error in UNAVAILABLE_ERRORS:
            raise ConnectFailed(
                f"the authorization server's token endpoint {token_endpoint} answered {why}"
            ) from exc
        raise TokenRefused(why) from exc
    except (httpx2.HTTPError, ValueError) as exc:  # authlib's client is httpx2's
        cause = (
            f"HTTP {exc.response.status_code}"
            if isinstance(exc, httpx2.HTTPStatusError)
            else str(exc) or type(exc).__name__
        )
        raise ConnectFailed(
            f"the authorization server's token endpoint {token_endpoint} did not answer: {cause}"
        ) from exc
    if not isinstance(answer.get("access_token"), str):
        raise ConnectFailed(
            f"the authorization server's token endpoint {token_endpoint} answered without "
            "an access_token"
        )
    tokens = dict(answer)
    expires_in = tokens.get("expires_in")
    tokens["expires_at"] = (
        time.time() + float(expires_in) if isinstance(expires_in, int | float) else None
    )
    return tokens
