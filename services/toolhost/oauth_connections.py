"""An OAuth server's credential: each person's own connection, stored sealed in Postgres.

``"auth": {"type": "oauth"}``: the person connected the server once through a connect link
(services/gateway/connect.py); their tokens are in ``upstream_connections``
(shared/connections/store.py). Each call reads the row (a revocation counts at once), the
access token is refreshed with the refresh token when it is about to expire, and a person
without a connection, or whose refresh is refused (expired, revoked), gets
``authorization_required`` with a connect link in ``url`` (their open one, if any).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import redis.asyncio as aioredis
from psycopg_pool import ConnectionPool

from services.toolhost.peruser import person_of
from services.toolhost.registry import AuthorizationRequired, ServerUnavailable
from services.toolhost.servers import HttpServer, OAuthAuth
from services.toolhost.upstream import Caller
from shared.connections import links, store
from shared.connections.oauth import Client, ConnectFailed, TokenRefused, refresh, wider_scope
from shared.connections.store import Connection
from shared.privacy.keys import PiiKeys

log = logging.getLogger(__name__)

REFRESH_MARGIN_S = 30  # an access token this close to its expiry is refreshed before use


class OAuthCredential:
    """People's own OAuth connections to one server (peruser.Credential)."""

    listing: Callable[[], Awaitable[str]] | None = None  # only people may list its tools

    def __init__(
        self,
        *,
        server: str,
        config: HttpServer,
        auth: OAuthAuth,
        keys: PiiKeys,
        pool: ConnectionPool[Any],
        redis: aioredis.Redis,
        public_url: str | None,
    ) -> None:
        self._server, self._url, self._scopes = server, config.url, list(auth.scopes)
        self._keys, self._pool, self._redis = keys, pool, redis
        self._public_url = public_url
        self._held: dict[tuple[str, str], Connection] = {}
        self._locks: dict[tuple[str, str], asyncio.Lock] = {}

    async def token(self, caller: Caller, *, fresh: bool) -> str:
        tenant_id, user = person_of(self._server, caller)
        key = (tenant_id, user)
        async with self._locks.setdefault(key, asyncio.Lock()):  # one refresh at a time
            connection = None if fresh else self._held.get(key)
            if connection is None:
                connection = await asyncio.to_thread(self._load, tenant_id, user)
            if connection is None:
                self._held.pop(key, None)
                link = await self._link(tenant_id, user)
                raise AuthorizationRequired(
                    f"MCP server {self._server!r} acts for you with your own account there, "
                    f"which you have not connected: open {link.url} to connect it (the link "
                    f"works once, within {link.minutes_left} minutes), then call again",
                    url=link.url,
                )
            expires = connection.expires_at
            if expires is not None and expires - REFRESH_MARGIN_S <= time.time():
                connection = await self._refreshed(connection)
            self._held[key] = connection
            return connection.access_token

    async def refused(self, caller: Caller) -> AuthorizationRequired:
        """The server answered 401 to the person's access token (the grant was revoked at
        its authorization server): their connection is deleted, a new link made."""
        tenant_id, user = person_of(self._server, caller)
        self._held.pop((tenant_id, user), None)
        await asyncio.to_thread(self._delete, tenant_id, user)
        url = (await self._link(tenant_id, user)).url
        log.info("server %s: it refused the connection of %s of %s: deleted", self._server,
                 user, tenant_id)  # fmt: skip
        return AuthorizationRequired(
            f"MCP server {self._server!r} refused your connection's access token (revoked or "
            f"expired at its end): open {url} to connect it again, then call again",
            url=url,
        )

    async def step_up(self, caller: Caller, challenged: str) -> AuthorizationRequired | None:
        """The server asks for more scope than the person's connection grants: a new link
        asking for the union of both (their connection keeps working meanwhile); None when
        it names nothing they have not granted."""
        tenant_id, user = person_of(self._server, caller)
        connection = await asyncio.to_thread(self._load, tenant_id, user)
        granted = connection.scope if connection is not None else " ".join(self._scopes)
        wider = wider_scope(granted, challenged)
        if wider is None:
            return None
        link = await self._link(tenant_id, user, scopes=wider.split())
        log.info("server %s: asks %s of %s for more scope (%s)", self._server, user,
                 tenant_id, challenged)  # fmt: skip
        return AuthorizationRequired(
            f"MCP server {self._server!r} needs more of your permission for this call (scope "
            f"{challenged}) than your connection grants ({granted or 'no scope'}): open "
            f"{link.url} to grant it (the link works once, within {link.minutes_left} minutes), "
            "then call again",
            url=link.url,
        )

    async def _refreshed(self, connection: Connection) -> Connection:
        c = connection
        try:
            if c.refresh_token is None:
                raise TokenRefused("the access token expired and there is no refresh token")
            tokens = await refresh(
                token_endpoint=c.token_endpoint,
                client=Client.stored(c.client_id, c.client_secret, c.auth_method),
                refresh_token=c.refresh_token,
                resource=c.resource,
            )
        except TokenRefused as exc:
            await asyncio.to_thread(self._delete, c.tenant_id, c.user_id)
            url = (await self._link(c.tenant_id, c.user_id)).url
            raise AuthorizationRequired(
                f"your connection to MCP server {self._server!r} has expired or was revoked "
                f"({exc}): open {url} to connect it again, then call again",
                url=url,
            ) from exc
        except ConnectFailed as exc:
            # Its authorization server is down or failing: nothing is stored or deleted. An
            # access token not yet expired (refreshed early, REFRESH_MARGIN_S) still serves.
            if c.expires_at is not None and c.expires_at > time.time():
                log.warning("server %s: the connection of %s of %s not renewed yet: %s",
                            self._server, c.user_id, c.tenant_id, exc)  # fmt: skip
                return c
            raise ServerUnavailable(
                f"MCP server {self._server!r}: your connection's access token has expired and "
                f"cannot be renewed now: {exc}. Your connection is kept: call again once the "
                "authorization server answers"
            ) from exc
        renewed = dataclasses.replace(
            c,
            access_token=tokens["access_token"],
            refresh_token=tokens.get("refresh_token") or c.refresh_token,
            expires_at=tokens["expires_at"],
            scope=tokens.get("scope") or c.scope,
        )
        await asyncio.to_thread(self._save, renewed)
        log.info("server %s: the connection of %s of %s renewed", self._server, c.user_id,
                 c.tenant_id)  # fmt: skip
        return renewed

    async def _link(
        self, tenant_id: str, user: str, *, scopes: list[str] | None = None
    ) -> links.Handed:
        if not self._public_url:
            raise ServerUnavailable(
                f"MCP server {self._server!r} needs each person to connect it, and the gateway "
                "has no public URL to send them to (AGENTCARDS_PUBLIC_URL)"
            )
        return await links.connect_url(
            self._redis, self._keys, public_url=self._public_url, tenant_id=tenant_id, user_id=user,
            server=self._server, url=self._url,
            scopes=self._scopes if scopes is None else scopes,
        )  # fmt: skip

    async def someone(self) -> Caller | None:
        """A person connected to the server (to list its tools with), if anyone is."""

        def read() -> tuple[str, str] | None:
            with self._pool.connection() as conn:
                return store.someone(conn, server=self._server)

        found = await asyncio.to_thread(read)
        return None if found is None else Caller(found[0], found[1])

    def _load(self, tenant_id: str, user: str) -> Connection | None:
        with self._pool.connection() as conn:
            return store.load(conn, self._keys, tenant_id=tenant_id, user_id=user,
                              server=self._server)  # fmt: skip

    def _save(self, connection: Connection) -> None:
        with self._pool.connection() as conn:
            store.save(conn, self._keys, connection)

    def _delete(self, tenant_id: str, user: str) -> None:
        with self._pool.connection() as conn:
            store.delete(conn, tenant_id=tenant_id, user_id=user, server=self._server)
