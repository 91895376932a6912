"""People sign in to the dashboard at the OAuth issuer: authorization code + PKCE, a session cookie.

``/dashboard/login`` sends the browser to the issuer (authlib builds the request: PKCE
S256, state, nonce, ``resource=<public_url>/mcp``); ``/dashboard/callback`` takes the code
back, exchanges it as the gateway's client (AGENTCARDS_OAUTH_CLIENT_ID, with its secret
when it has one), checks the access token as any bearer token is checked and the ID token's
signature, audience and nonce, and opens a session (``shared.auth.sessions``): the cookie
holds an opaque random id (HttpOnly, SameSite=Lax, Secure under https); Redis holds the
token's claims, never the token. The dashboard's requests then run as that person, with the
scopes their token and groups give them (admin actions need ``agentcards:admin``).

A write made with the cookie (POST, PUT, PATCH, DELETE) must carry the session's CSRF token
in ``X-CSRF-Token`` and, when the browser names its ``Origin``, come from the gateway's
own: a page elsewhere cannot make the dashboard's writes. The cookie is never taken on
``/mcp`` (MCP clients bring tokens) nor beside an ``Authorization`` header.
"""

from __future__ import annotations

import html
import secrets
import time
from typing import Any
from urllib.parse import urlencode, urlsplit

import redis
from anyio import to_thread
from authlib.integrations.httpx_client import AsyncOAuth2Client, OAuthError
from httpx import HTTPError
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route
from starlette.types import Scope

from services.gateway.errors import error_response, error_status
from services.gateway.oauth import ResourceServer
from shared.auth.identity import principal_for
from shared.auth.principal import SCOPE_ADMIN, SCOPES, Principal
from shared.auth.sessions import SESSION_MAX_S, SIGNIN_TTL_S, Session, SessionStore, new_secret
from shared.auth.tokens import FETCH_TIMEOUT_S, IssuerMetadata
from shared.config import Settings
from shared.connections.links import CONNECT_PATH
from shared.errors import AgentCardsError, DependencyError, Forbidden, Unauthorized

DASHBOARD = "/dashboard"
FLOWER = "/flower"  # Flower, served to signed-in admins (services.gateway.flower)
LOGIN, CALLBACK, LOGOUT = "/dashboard/login", "/dashboard/callback", "/dashboard/logout"
WHO, SIGNED_OUT = "/dashboard/session", "/dashboard/signed-out"
# Open to everyone (they check the cookie themselves, or hold no data).
PATHS = frozenset({LOGIN, CALLBACK, LOGOUT, WHO, SIGNED_OUT})
UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
CSRF_HEADER = "x-csrf-token"
# What the dashboard asks for: who the person is (OpenID) and every scope; the issuer and
# the identity file's groups decide what the person gets.
REQUESTED_SCOPE = " ".join(("openid", "profile", *SCOPES))


class SignIn:
    """The dashboard's OAuth client and its sessions (see the module doc)."""

    def __init__(self, settings: Settings, resource: ResourceServer) -> None:
        assert settings.oauth_client_id and settings.public_url
        self.settings = settings
        self.resource = resource
        self.client_id = settings.oauth_client_id
        secret = settings.oauth_client_secret
        self.client_secret = secret.get_secret_value() if secret else None
        public = urlsplit(settings.public_url)
        self.origin = f"{public.scheme}://{public.netloc}"
        self.secure = public.scheme == "https"
        # `__Host-`: the browser keeps it to this host, path / and https (RFC 6265bis).
        prefix = "__Host-" if self.secure else ""
        self.session_cookie = f"{prefix}agentcards_session"
        self.signin_cookie = f"{prefix}agentcards_signin"
        self.cookies = frozenset({self.session_cookie, self.signin_cookie})
        self.redirect_uri = self.origin + CALLBACK

    # --- the session as a credential (AuthGate)

    async def principal(self, scope: Scope, client: Any) -> Principal | None:
        """The signed-in person of a dashboard request; None without a session cookie.

        Unauthorized for an ended session; Forbidden for a write without the CSRF token or
        from another origin.
        """
        request = Request(scope)
        cookie = request.cookies.get(self.session_cookie)
        path = scope["path"]
        if not cookie or path == "/mcp" or path.startswith("/mcp/"):
            return None
        session = await self._store(client, lambda store: store.get(cookie))
        if session is None:
            raise Unauthorized(
                "your dashboard session has ended (signed out or expired): sign in again at "
                f"{DASHBOARD}"
            )
        if scope["method"] in UNSAFE_METHODS and under(path, FLOWER):
            self.check_origin(request, required=True)  # Flower's page cannot send our token
        elif scope["method"] in UNSAFE_METHODS:
            self.check_write(request, session)
        return principal_for(self.resource.identity, session.token_claims())

    def check_origin(self, request: Request, *, required: bool = False) -> None:
        """A cookie-borne write comes from the gateway's own origin, when the browser names it
        (``Origin``, ``Sec-Fetch-Site``); ``required``: it must name it."""
        origin = request.headers.get("origin")
        site = request.headers.get("sec-fetch-site")
        if (origin is not None and origin != self.origin) or site not in {None, "same-origin"}:
            raise Forbidden(
                f"a write with the dashboard's session must come from {self.origin}, not "
                f"{origin or site}: refused as cross-site request forgery",
                origin=origin or site,
            )
        if required and origin is None and site is None:
            raise Forbidden(
                "a write with the dashboard's session to Flower must say where it comes from "
                "(Origin or Sec-Fetch-Site): refused as possible cross-site request forgery"
            )

    def check_write(self, request: Request, session: Session) -> None:
        """A cookie-borne write comes from the dashboard's page: its origin, its CSRF token."""
        self.check_origin(request)
        sent = request.headers.get(CSRF_HEADER) or ""
        if not secrets.compare_digest(sent.encode(), session.csrf.encode()):
            raise Forbidden(
                "a write with the dashboard's session needs its CSRF token in X-CSRF-Token "
                "(the dashboard sends it; reload the page)"
            )

    async def session(self, request: Request) -> Session | None:
        """The request's session, if its cookie finds one."""
        cookie = request.cookies.get(self.session_cookie)
        if not cookie:
            return None
        return await self._store(request.app.state.gateway.aredis, lambda s: s.get(cookie))

    # --- the routes

    def routes(self) -> list[BaseRoute]:
        return [
            Route(LOGIN, self.login, methods=["GET"], include_in_schema=False),
            Route(CALLBACK, self.callback, methods=["GET"], include_in_schema=False),
            Route(LOGOUT, self.logout, methods=["POST"], include_in_schema=False),
            Route(WHO, self.who, methods=["GET"], include_in_schema=False),
            Route(SIGNED_OUT, self.signed_out, methods=["GET"], include_in_schema=False),
        ]

    async def login(self, request: Request) -> Response:
        """Send the browser to the issuer, remembering the state, PKCE verifier and nonce."""
        try:
            meta = await self._metadata()
        except AgentCardsError as exc:
            return page(503, "Cannot sign in now", exc.message)
        pending = {"state": new_secret(), "verifier": new_secret() + new_secret(),
                   "nonce": new_secret(), "next": _local(request.query_params.get("next"))}  # fmt: skip
        async with self._client() as client:
            url, _ = client.create_authorization_url(
                meta.authorization_endpoint,
                state=pending["state"],
                code_verifier=pending["verifier"],
                nonce=pending["nonce"],
                resource=self.settings.resource_url,
            )
        cookie = await self._store(request.app.state.gateway.aredis,
                                   lambda s: s.start_signin(pending))  # fmt: skip
        response = RedirectResponse(url, status_code=303)
        self._set_cookie(response, self.signin_cookie, cookie, max_age=SIGNIN_TTL_S)
        return response

    async def callback(self, request: Request) -> Response:
        """The issuer's answer: exchange the code, check what came back, open the session."""
        params = request.query_params
        cookie = request.cookies.get(self.signin_cookie)
        aredis = request.app.state.gateway.aredis
        pending = await self._store(aredis, lambda s: s.finish_signin(cookie)) if cookie else None
        if pending is None or not secrets.compare_digest(
            (params.get("state") or "").encode(), pending["state"].encode()
        ):
            return page(400, "Sign-in not recognised",
                         "This sign-in was not started in this browser, was already used or "
                         "took too long. Start again.", retry=True)  # fmt: skip
        if params.get("error"):
            reason = params.get("error_description") or params["error"]
            return page(403, "The identity provider did not sign you in", reason, retry=True)
        if params.get("iss") not in {None, self.settings.oauth_issuer}:  # RFC 9207 mix-up
            return page(400, "Sign-in not recognised", "The answer came from another issuer.")
        try:
            session = await self._open(params.get("code") or "", pending)
        except AgentCardsError as exc:
            return page(error_status(exc)[0], "Cannot sign you in", exc.message, retry=True)
        ttl = min(SESSION_MAX_S, int(session.expires_at - time.time()))
        value = await self._store(aredis, lambda s: s.create(session, ttl_s=ttl))
        response = RedirectResponse(pending["next"], status_code=303)
        self._set_cookie(response, self.session_cookie, value, max_age=ttl)
        response.delete_cookie(self.signin_cookie, path="/", secure=self.secure, httponly=True)
        return response

    async def who(self, request: Request) -> Response:
        """Who is signed in (name, scopes, admin) and the CSRF token the page's writes send."""
        session = await self.session(request)
        if session is None:
            return JSONResponse({"signed_in": False, "login": LOGIN}, status_code=401)
        principal = principal_for(self.resource.identity, session.token_claims())
        return JSONResponse(
            {
                "signed_in": True,
                "user_id": session.subject,
                "name": session.name,
                "tenant_id": principal.tenant_id,
                "scopes": sorted(principal.scopes or ()),
                "admin": SCOPE_ADMIN in (principal.scopes or ()),
                "csrf_token": session.csrf,
                "expires_at": session.expires_at,
            },
            headers={"Cache-Control": "no-store"},
        )

    async def logout(self, request: Request) -> Response:
        """End the session here (every gateway process), then at the issuer when it can."""
        session = await self.session(request)
        if session is not None:
            try:
                self.check_write(request, session)
            except Forbidden as exc:
                return error_response(exc)
            cookie = request.cookies[self.session_cookie]
            await self._store(request.app.state.gateway.aredis, lambda s: s.end(cookie))
        after = self.origin + SIGNED_OUT
        try:
            end = (await self._metadata()).end_session_endpoint
        except AgentCardsError:
            end = None
        query = urlencode({"client_id": self.client_id, "post_logout_redirect_uri": after})
        response = JSONResponse({"signed_out": True, "next": f"{end}?{query}" if end else after})
        response.delete_cookie(self.session_cookie, path="/", secure=self.secure, httponly=True)
        return response

    async def signed_out(self, request: Request) -> Response:
        return page(200, "Signed out", "You are signed out of the AgentCards dashboard.",
                     retry=True)  # fmt: skip

    # --- helpers

    async def _open(self, code: str, pending: dict[str, str]) -> Session:
        """The session of a code: the token exchanged, checked, and its person's claims."""
        meta = await self._metadata()
        try:
            async with self._client() as client:
                token = await client.fetch_token(
                    meta.token_endpoint,
                    grant_type="authorization_code",
                    code=code,
                    code_verifier=pending["verifier"],
                    resource=self.settings.resource_url,
                )
        except (OAuthError, HTTPError, ValueError) as exc:
            raise Unauthorized(f"the issuer did not exchange the code ({exc})") from None
        verifier = self.resource.verifier
        checked = await to_thread.run_sync(verifier.check, str(token.get("access_token", "")))
        if checked.jkt is not None:
            raise Unauthorized("the issuer bound the token to a DPoP key; the dashboard needs a "
                               "bearer token")  # fmt: skip
        claims = checked.claims
        principal_for(self.resource.identity, claims)  # a person with no tenant stops here
        name = claims.claims.get("name")
        id_token = token.get("id_token")
        if id_token:
            person = await to_thread.run_sync(
                lambda: verifier.check_id_token(
                    id_token, client_id=self.client_id, nonce=pending["nonce"]
                )
            )
            if person["sub"] != claims.subject:
                raise Unauthorized("the ID token and the access token name different people")
            name = person.get("name") or person.get("preferred_username") or person.get("email")
        return Session(
            subject=claims.subject,
            name=str(name or claims.subject),
            scopes=sorted(claims.scopes),
            claims=dict(claims.claims),
            csrf=new_secret(),
            expires_at=checked.expires_at or time.time() + SESSION_MAX_S,
        )

    async def _metadata(self) -> IssuerMetadata:
        try:
            meta = await to_thread.run_sync(self.resource.verifier.metadata)
        except Unauthorized as exc:
            raise DependencyError(exc.message) from None
        if not (meta.authorization_endpoint and meta.token_endpoint):
            raise DependencyError("the issuer's metadata names no authorization or token endpoint")
        return meta

    def _client(self) -> AsyncOAuth2Client:
        return AsyncOAuth2Client(
            client_id=self.client_id,
            client_secret=self.client_secret,
            token_endpoint_auth_method="client_secret_basic" if self.client_secret else "none",
            scope=REQUESTED_SCOPE,
            redirect_uri=self.redirect_uri,
            code_challenge_method="S256",
            timeout=FETCH_TIMEOUT_S,
            follow_redirects=False,
        )

    async def _store(self, client: Any, action: Any) -> Any:
        try:
            return await action(SessionStore(client))
        except redis.RedisError as exc:  # fail closed: no session can be checked
            raise DependencyError(f"cannot check the dashboard session: Redis: {exc}") from exc

    def _set_cookie(self, response: Response, name: str, value: str, *, max_age: int) -> None:
        response.set_cookie(name, value, max_age=max_age, path="/", secure=self.secure,
                            httponly=True, samesite="lax")  # fmt: skip


def under(path: str, prefix: str) -> bool:
    """Whether ``path`` is ``prefix`` or below it."""
    return path == prefix or path.startswith(prefix + "/")


def _local(target: str | None) -> str:
    """Where to go after signing in: the dashboard's or Flower's path here, or a connect link
    (no open redirect)."""
    path = (target or "").split("?")[0]
    if target and (under(path, DASHBOARD) or under(path, FLOWER) or _connect_link(path)):
        return target
    return DASHBOARD


def _connect_link(path: str) -> bool:
    """Whether ``path`` is a connect link's page (services/gateway/connect.py)."""
    link = path.removeprefix(CONNECT_PATH)
    return link != path and link.replace("-", "").replace("_", "").isalnum()


def page(status: int, title: str, text: str, *, retry: bool = False) -> HTMLResponse:
    """A small page for the browser (the strict CSP allows it: no script, our stylesheet)."""
    again = f'<p><a href="{DASHBOARD}">Sign in</a></p>' if retry else ""
    return HTMLResponse(
        f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}'
        f'</title><link rel="stylesheet" href="/static/dashboard.css"></head><body class="page">'
        f'<h1>{html.escape(title)}</h1><p id="message">{html.escape(text)}</p>{again}</body></html>',
        status_code=status,
        headers={"Cache-Control": "no-store"},
    )
