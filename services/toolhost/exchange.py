"""Tokens for servers that act for the person calling, from the gateway's issuer.

RFC 8693 token exchange: the person's access token (the subject token the gateway checked
and sealed into the call's grant) is exchanged, with the gateway's client at the issuer, for
a token naming the server's ``audience`` and ``scopes``; that token goes upstream, the
person's own never does. Each person's token is kept (in this process only) until
``REFRESH_MARGIN_S`` before it expires. A server's tool list is read with the client's own
token (client credentials for the same audience): it names no person and is never sent on a
person's call. authlib does the OAuth work.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import httpx2
from authlib.integrations.httpx_client import AsyncOAuth2Client, OAuthError

from services.toolhost.peruser import person_of
from services.toolhost.registry import AuthorizationRequired, ServerUnavailable
from services.toolhost.servers import TokenExchangeAuth
from services.toolhost.upstream import Caller
from shared.auth.subject import open_subject
from shared.auth.tokens import IssuerMetadata, discover
from shared.privacy.keys import PiiKeys

log = logging.getLogger(__name__)

TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
ACCESS_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:access_token"
REFRESH_MARGIN_S = 60  # a token this close to its expiry is exchanged again before use
DEFAULT_TTL_S = 300  # when the issuer does not say (`expires_in` is recommended, not required)
MAX_CACHED = 10_000  # tokens held (people and servers); expired ones go first, then the oldest


class ExchangeRefused(Exception):
    """Raised when the issuer refuses to exchange the person's token (expired, revoked, not
    allowed for that audience): they must sign in again."""


class IssuerUnreachable(Exception):
    """Raised when the issuer cannot be reached or answers something that is not a token."""


@dataclass(frozen=True, slots=True)
class Held:
    token: str
    expires_at: float


class TokenExchange:
    """Exchanges and keeps people's tokens for the servers that act for them."""

    def __init__(
        self, *, issuer: str | None, client_id: str | None, client_secret: str | None
    ) -> None:
        self._issuer = issuer
        self._client_id = client_id
        self._client_secret = client_secret
        self._meta: IssuerMetadata | None = None
        self._held: dict[tuple[str, ...], Held] = {}
        self._locks: dict[tuple[str, ...], asyncio.Lock] = {}

    async def for_person(
        self, *, tenant_id: str, user: str, subject: str, audience: str, scopes: list[str]
    ) -> str:
        """The person's token for ``audience``: the one held, or a new exchange of ``subject``."""
        key = ("person", tenant_id, user, audience, " ".join(scopes))
        return await self._held_or(key, lambda: self._exchange(subject, audience, scopes))

    def held(self, *, tenant_id: str, user: str, audience: str, scopes: list[str]) -> str | None:
        """The person's token held for ``audience`` (None: none, or about to expire)."""
        found = self._held.get(("person", tenant_id, user, audience, " ".join(scopes)))
        if found is None or found.expires_at - REFRESH_MARGIN_S <= time.time():
            return None
        return found.token

    async def for_listing(self, *, audience: str, scopes: list[str]) -> str:
        """The client's own token for ``audience``: for reading a server's tool list only."""
        key = ("client", audience, " ".join(scopes))
        return await self._held_or(key, lambda: self._client_credentials(audience, scopes))

    def forget(self, *, tenant_id: str, user: str) -> None:
        """Drop every token held for the person (their session upstream was refused)."""
        for key in [k for k in self._held if k[:3] == ("person", tenant_id, user)]:
            del self._held[key]

    async def _held_or(
        self, key: tuple[str, ...], fetch: Callable[[], Awaitable[tuple[str, float]]]
    ) -> str:
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:  # one exchange per person and server at a time, the others wait for it
            found = self._held.get(key)
            if found is not None and found.expires_at - REFRESH_MARGIN_S > time.time():
                return found.token
            token, expires_in = await fetch()
            self._keep(key, Held(token, time.time() + expires_in))
            return token

    def _keep(self, key: tuple[str, ...], held: Held) -> None:
        if len(self._held) >= MAX_CACHED:
            now = time.time()
            for stale in [k for k, h in self._held.items() if h.expires_at <= now]:
                del self._held[stale]
                self._locks.pop(stale, None)
            while len(self._held) >= MAX_CACHED:
                oldest = next(iter(self._held))
                del self._held[oldest]
                self._locks.pop(oldest, None)
        self._held[key] = held

    async def _exchange(self, subject: str, audience: str, scopes: list[str]) -> tuple[str, float]:
        return await self._token(
            grant_type=TOKEN_EXCHANGE,
            subject_token=subject,
            subject_token_type=ACCESS_TOKEN_TYPE,
            requested_token_type=ACCESS_TOKEN_TYPE,
            audience=audience,
            **({"scope": " ".join(scopes)} if scopes else {}),
        )

    async def _client_credentials(self, audience: str, scopes: list[str]) -> tuple[str, float]:
        return await self._token(
            grant_type="client_credentials",
            resource=audience,
            **({"scope": " ".join(scopes)} if scopes else {}),
        )

    async def _token(self, **params: str) -> tuple[str, float]:
        """One token request at the issuer with the gateway's client: the access token and
        its lifetime in seconds."""
        if self._issuer is None:
            raise IssuerUnreachable(
                "no identity provider is configured (AGENTCARDS_OAUTH_ISSUER): a server that "
                "acts for the person calling needs one"
            )
        if self._meta is None:
            try:
                self._meta = await asyncio.to_thread(discover, self._issuer)
            except Exception as exc:
                raise IssuerUnreachable(f"cannot read the issuer's metadata: {exc}") from exc
        if self._meta.token_endpoint is None:
            raise IssuerUnreachable(f"the issuer {self._issuer} names no token endpoint")
        async with AsyncOAuth2Client(
            client_id=self._client_id, client_secret=self._client_secret, timeout=10
        ) as client:
            try:
                answer = await client.fetch_token(self._meta.token_endpoint, **params)
            except OAuthError as exc:
                raise ExchangeRefused(f"{exc.error}: {exc.description or 'refused'}") from exc
            except (httpx2.HTTPError, ValueError) as exc:  # authlib's client is httpx2's
                raise IssuerUnreachable(f"the issuer's token endpoint: {exc}") from exc
        token = answer.get("access_token")
        if not isinstance(token, str) or not token:
            raise IssuerUnreachable("the issuer answered without an access_token")
        expires_in = answer.get("expires_in")
        return token, float(expires_in) if isinstance(expires_in, int | float) else DEFAULT_TTL_S


class ExchangeCredential:
    """A token-exchange server's credential (peruser.Credential): the person's token, exchanged
    from the one sealed in the call's grant."""

    def __init__(
        self, *, server: str, auth: TokenExchangeAuth, exchange: TokenExchange, keys: PiiKeys
    ) -> None:
        self._server, self._auth, self._exchange, self._keys = server, auth, exchange, keys

        async def listing() -> str:
            return await exchange.for_listing(audience=auth.audience, scopes=auth.scopes)

        self.listing: Callable[[], Awaitable[str]] | None = listing

    async def someone(self) -> Caller | None:
        """Nobody: the tool list is read with the client's own token."""
        return None

    async def refused(self, caller: Caller) -> AuthorizationRequired:
        """The server answered 401 to the token exchanged for the person: forgotten, so the
        next call exchanges again."""
        tenant_id, user = person_of(self._server, caller)
        self._exchange.forget(tenant_id=tenant_id, user=user)
        return AuthorizationRequired(
            f"MCP server {self._server!r} refused the token exchanged for you: call again, "
            "or sign in again if it keeps refusing"
        )

    async def step_up(self, caller: Caller, challenged: str) -> AuthorizationRequired | None:
        """None: the scopes exchanged for are the server entry's ``auth.scopes``; asking the
        person cannot widen them (the call fails naming the scope)."""
        return None

    async def token(self, caller: Caller, *, fresh: bool) -> str:
        tenant_id, user = person_of(self._server, caller)
        name = self._server
        if caller.subject_token is None:
            raise AuthorizationRequired(
                f"MCP server {name!r} acts for the person calling and this call carries no "
                "access token of theirs (a dashboard session holds none): call it with your "
                "access token"
            )
        subject = open_subject(
            self._keys, tenant_id=tenant_id, user=user, sealed=caller.subject_token
        )
        if subject is None:
            raise AuthorizationRequired(
                f"MCP server {name!r}: the call's access token does not open for its person "
                "(sealed under another PII key, or for someone else): sign in again"
            )
        try:
            return await self._exchange.for_person(
                tenant_id=tenant_id,
                user=user,
                subject=subject,
                audience=self._auth.audience,
                scopes=self._auth.scopes,
            )
        except ExchangeRefused as exc:
            raise AuthorizationRequired(
                f"MCP server {name!r}: the identity provider refused to exchange your access "
                f"token for this server's ({exc}): sign in again"
            ) from exc
        except IssuerUnreachable as exc:
            raise ServerUnavailable(
                f"MCP server {name!r}: cannot get a token for it from the identity provider ({exc})"
            ) from exc
