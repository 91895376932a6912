"""Who is calling: each request's bearer key (or person's token) resolved to a principal.

Once any key is active, every route but the docs needs ``Authorization: Bearer <key>``
(`/healthz` and `/metrics` too, except from loopback clients or with
AGENTCARDS_PUBLIC_HEALTH). With no key, callers are the anonymous default tenant, which
is safe only because the gateway then refuses to listen beyond loopback (``bind_refusal``).
With an OAuth issuer configured (``services.gateway.oauth``) there is no anonymous caller,
loopback included: a request brings a key or a person's access token.
"""

from __future__ import annotations

import functools
import ipaddress
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

import psycopg
from anyio import to_thread
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from services.gateway.connect import CALLBACK as CONNECT_CALLBACK
from services.gateway.connect import CLIENT_METADATA, CONNECT_PREFIX
from services.gateway.errors import error_response
from services.gateway.oauth import ResourceServer, credential, is_key
from services.gateway.signin import FLOWER, LOGIN, SignIn, under
from services.gateway.signin import PATHS as SIGNIN_PATHS
from services.gateway.state import GatewayState
from shared.auth.cache import MISSING, PrincipalCache
from shared.auth.principal import ANONYMOUS, Principal
from shared.auth.store import active_keys_exist
from shared.config import Settings
from shared.db import connect
from shared.errors import AgentCardsError, DependencyError, Unauthorized, Unavailable
from shared.logs import bind
from shared.telemetry import tag_current

# Pages that hold no data: the API docs and the dashboard's HTML (its JSON needs a key).
OPEN_PATHS = frozenset(
    {
        "/docs",
        "/docs/oauth2-redirect",
        "/redoc",
        "/openapi.json",
        "/dashboard",
        *SIGNIN_PATHS,  # the dashboard's sign-in: they check the session cookie themselves
        CONNECT_CALLBACK,  # a person's connection to a server: its state is the credential
        CLIENT_METADATA,  # the gateway's public OAuth client metadata, fetched by servers
    }
)
# The page's own and vendored scripts and styles (the static mount serves nothing else).
# ... and the OAuth protected resource metadata (services.gateway.oauth), read before sign-in.
# ... and a connect link (services.gateway.connect): the link is the credential, once.
OPEN_PREFIXES = ("/static/", "/.well-known/", CONNECT_PREFIX)
HEALTH_PATHS = frozenset({"/healthz", "/metrics"})
# A request another replica received, authenticated and forwarded here over the signed
# internal hop (mcp/replicas/vouched.py): its caller as that replica found it. Only the inbox
# sets this scope key; nothing a client sends can.
VOUCHED = "agentcards.vouched_principal"
CREATE_KEY_HINT = "create one with `agentcards keys create --tenant <tenant>`"


@functools.lru_cache(maxsize=1024)  # asked on every request, of a few addresses
def is_loopback(host: str | None) -> bool:
    """Whether ``host`` (a bind address or a client address) is this machine only."""
    if not host:
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def bearer_token(headers: list[tuple[bytes, bytes]]) -> str | None:
    """The key in ``Authorization: Bearer <key>``; None without that header."""
    for name, value in headers:
        if name == b"authorization":
            scheme, _, token = value.decode("latin-1").strip().partition(" ")
            if scheme.lower() != "bearer" or not token.strip():
                raise Unauthorized("the Authorization header must be `Bearer <API key>`")
            return token.strip()
    return None


def anonymous_or_refuse(*, keys_exist: bool, loopback_only: bool) -> Principal:
    """A request without a key: the default tenant when no key exists and we serve loopback only."""
    if keys_exist:
        raise Unauthorized(
            "this gateway requires an API key: send `Authorization: Bearer <key>` "
            f"({CREATE_KEY_HINT})"
        )
    if not loopback_only:
        raise Unauthorized(
            f"no API key exists and this gateway listens beyond loopback: {CREATE_KEY_HINT}"
        )
    return ANONYMOUS


def known(principal: Principal | None) -> Principal:
    """The principal of a presented key, or 401 for an unknown or revoked one."""
    if principal is None:
        raise Unauthorized(f"the API key is unknown or revoked: check it, or {CREATE_KEY_HINT}")
    return principal


def resolve_sync(cache: PrincipalCache, *, token: str | None, state: GatewayState) -> Principal:
    """The principal for ``token`` (or for no key), querying Postgres on a cache miss."""
    pooled = _pooled(state)
    loopback_only = is_loopback(state.settings.gateway_host)
    try:
        if token is None:
            exists = cache.keys_exist(connect=pooled)
            return anonymous_or_refuse(keys_exist=exists, loopback_only=loopback_only)
        return known(cache.lookup(token, connect=pooled))
    except psycopg.OperationalError as exc:  # down or restarting (PoolTimeout included)
        raise Unavailable(
            f"cannot check the API key: PostgreSQL is unavailable ({exc}); retry after a "
            "pause — resubmitting an execution with the same idempotency_key never runs it twice",
            dependency="postgres",
        ) from exc
    except psycopg.Error as exc:
        raise DependencyError(
            f"cannot check the API key: PostgreSQL is unavailable ({exc})"
        ) from exc


async def resolve(state: GatewayState, *, token: str | None) -> Principal:
    """``resolve_sync`` without leaving the event loop when the answer is cached (the usual case)."""
    cache = state.auth
    loopback_only = is_loopback(state.settings.gateway_host)
    if token is None:
        exists = cache.cached_keys_exist()
        if exists is not None:
            return anonymous_or_refuse(keys_exist=exists, loopback_only=loopback_only)
    else:
        found = cache.cached(token)
        if found is not MISSING:
            return known(found)  # type: ignore[arg-type]
    return await to_thread.run_sync(lambda: resolve_sync(cache, token=token, state=state))


class AuthGate:
    """ASGI middleware: sets ``scope["state"]["principal"]`` or answers 401 in our envelope
    (on /mcp, as a JSON-RPC error carrying it, which MCP clients read)."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        settings: Settings,
        mcp_refusal: Callable[[AgentCardsError], ASGIApp] = error_response,
        resource: ResourceServer | None = None,
        sign_in: SignIn | None = None,
    ) -> None:
        self.app = app
        self.settings = settings
        self.resource = resource  # set when an OAuth issuer is configured
        self.sign_in = sign_in  # ... and a client id: the dashboard's session cookie
        # /mcp's refusal (the MCP adapter's, passed in by app.py: REST imports this module).
        self.mcp_refusal = mcp_refusal

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not self.settings.auth or _open(scope["path"]):
            await self.app(scope, receive, send)
            return
        if scope["path"] in HEALTH_PATHS and (
            self.settings.public_health or is_loopback((scope.get("client") or ("",))[0])
        ):
            await self.app(scope, receive, send)
            return
        try:
            state: GatewayState = scope["app"].state.gateway
            vouched: Principal | None = scope.get(VOUCHED)
            if vouched is not None:  # checked once, where it arrived (a DPoP proof: once)
                principal = vouched
            elif self.resource is not None:
                principal = await self._with_issuer(state, scope)
            else:
                principal = await resolve(state, token=bearer_token(scope.get("headers") or []))
        except AgentCardsError as exc:
            if isinstance(exc, Unauthorized) and self._to_login(scope):
                target = urlencode({"next": scope["path"]})
                await RedirectResponse(f"{LOGIN}?{target}", status_code=303)(scope, receive, send)
                return
            # /mcp's clients read a JSON-RPC error body; REST's read our envelope.
            refuse = self.mcp_refusal if _mcp(scope["path"]) else error_response
            response = refuse(exc)
            if self.resource is not None and isinstance(exc, Unauthorized):
                assert isinstance(response, Response)
                response.headers["WWW-Authenticate"] = self.resource.challenge(
                    scope["path"], error="invalid_token" if _has_credential(scope) else None
                )
            await response(scope, receive, send)
            return
        scope.setdefault("state", {})["principal"] = principal
        bind(tenant_id=principal.tenant_id)  # this request's task: on every line it logs
        # The request's server span says who called (OpenTelemetry's `enduser.id`).
        tag_current(**{
            "enduser.id": principal.user,
            "agentcards.key_id": principal.key_id,
            "agentcards.tenant_id": principal.tenant_id,
        })  # fmt: skip
        await self.app(scope, receive, send)

    def _to_login(self, scope: Scope) -> bool:
        """A browser opening Flower without a session (or with an ended one) signs in first,
        as at /dashboard; scripts (an Authorization header) get the 401."""
        return (
            self.sign_in is not None
            and scope["method"] in {"GET", "HEAD"}
            and under(scope["path"], FLOWER)
            and not _has_credential(scope)
        )

    async def _with_issuer(self, state: GatewayState, scope: Scope) -> Principal:
        """A key's principal, or a person's from their access token; never anonymous."""
        assert self.resource is not None
        found = credential(scope.get("headers") or [])
        if found is None and self.sign_in is not None:  # a header, when sent, wins
            person = await self.sign_in.principal(scope, state.aredis)
            if person is not None:
                return person
        if found is None:
            raise Unauthorized(
                "sign in: this gateway takes access tokens from its identity provider "
                "(MCP clients discover it from the WWW-Authenticate header) or API keys"
            )
        scheme, token, proof = found
        if is_key(scheme, token, proof):
            return await resolve(state, token=token)
        return await self.resource.principal(
            scheme=scheme,
            token=token,
            proof=proof,
            method=scope["method"],
            path=scope["path"],
            redis_client=state.redis,
        )


def principal_of_request(request: Request) -> Principal:
    """The caller, set on the request by ``AuthGate``; anonymous when auth is not in use."""
    principal: Principal = getattr(request.state, "principal", ANONYMOUS)
    return principal


def bind_refusal(settings: Settings, *, keys_exist: bool) -> str | None:
    """Why the gateway must not start on this address (no key, beyond loopback), or None."""
    if not settings.auth or keys_exist or settings.oauth or is_loopback(settings.gateway_host):
        return None
    return (
        f"refusing to listen on {settings.gateway_host}: no API key exists, so anyone who "
        f"reaches it would run code; {CREATE_KEY_HINT}, or set AGENTCARDS_GATEWAY_HOST=127.0.0.1, "
        "or AGENTCARDS_AUTH=off to serve without keys"
    )


def keys_exist_now(settings: Settings) -> bool:
    """Whether any key is active, on a fresh connection (before the app and its pool exist)."""
    database_url, _ = settings.require_urls()
    with connect(database_url) as conn:
        try:
            return active_keys_exist(conn)
        except psycopg.errors.UndefinedTable:  # a database not migrated yet has no keys
            return False


def auth_off_warning(settings: Settings) -> str | None:
    """The line the gateway prints at start when nobody's key is checked (AUTH=off)."""
    if settings.auth:
        return None
    return (
        f"WARNING: AGENTCARDS_AUTH=off: API keys are NOT checked; every caller of "
        f"{settings.gateway_host}:{settings.gateway_port} runs as tenant 'default' without limits"
    )


def _has_credential(scope: Scope) -> bool:
    return any(name == b"authorization" for name, _ in scope.get("headers") or [])


def _mcp(path: str) -> bool:
    return path == "/mcp" or path.startswith("/mcp/")


def _open(path: str) -> bool:
    return path in OPEN_PATHS or path.startswith(OPEN_PREFIXES)


def _pooled(state: GatewayState) -> Callable[[], Any]:
    return lambda: state.pool.connection(timeout=5)
