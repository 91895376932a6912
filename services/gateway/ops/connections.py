"""A person's connections to servers that act for them (docs/upstream-identity.md): listed
without their tokens, and revoked."""

from __future__ import annotations

import logging
import time
from typing import Any

from services.gateway.ops.db import in_pool
from services.gateway.state import GatewayState
from shared.auth.principal import Principal
from shared.connections import links, oauth, store
from shared.connections.oauth import Client
from shared.errors import Forbidden, NotFound, ValidationFailed
from shared.privacy.keys import PiiKeys

log = logging.getLogger(__name__)


def _person(principal: Principal) -> str:
    if principal.user is None:
        raise Forbidden(
            "connections are a person's: call with your access token from the identity "
            "provider (an API key names no person)"
        )
    return principal.user


async def list_connections(state: GatewayState, *, principal: Principal) -> dict[str, Any]:
    """``{"connections": [{server, scope, expires_at, connected_at, refreshed_at}]}``."""
    user = _person(principal)
    rows = await in_pool(
        state, lambda conn: store.listed(conn, tenant_id=principal.tenant_id, user_id=user)
    )
    return {"connections": rows}


async def revoke_connection(state: GatewayState, *, principal: Principal, server: str) -> None:
    """Forget the person's tokens for ``server`` (their next call asks them to connect
    again) and revoke them at its authorization server (RFC 7009), best effort: a failure to
    revoke there is logged, the connection is deleted all the same."""
    user = _person(principal)
    keys = PiiKeys.from_settings(state.settings)

    def take(conn: Any) -> tuple[bool, store.Connection | None, str | None]:
        found = store.load(conn, keys, tenant_id=principal.tenant_id, user_id=user,
                           server=server)  # fmt: skip
        gone = store.delete(conn, tenant_id=principal.tenant_id, user_id=user, server=server)
        return gone, found, _configured_url(conn, server)

    gone, connection, url = await in_pool(state, take)
    if not gone:
        raise NotFound(f"you have no connection to {server!r} (GET /v1/connections lists them)")
    if connection is None or url is None:  # its tokens do not open, or the server is gone
        return
    token, hint = connection.refresh_token, "refresh_token"
    if token is None:
        token, hint = connection.access_token, "access_token"
    client = Client.stored(connection.client_id, connection.client_secret, connection.auth_method)
    why = await oauth.revoke(server_url=url, client=client, token=token, hint=hint)
    if why is not None:
        log.warning("the connection of %s of %s to %s deleted, not revoked at its "
                    "authorization server: %s", user, principal.tenant_id, server, why)  # fmt: skip


def _configured_url(conn: Any, server: str) -> str | None:
    row = conn.execute(
        "SELECT config FROM mcp_servers WHERE name = %s AND state <> 'removed'", (server,)
    ).fetchone()
    url = dict(row["config"] or {}).get("url") if row is not None else None
    return str(url) if url else None


async def new_connect_link(
    state: GatewayState, *, principal: Principal, server: str
) -> dict[str, Any]:
    """A connect link for the person and an OAuth server (``{"server", "url", "expires_in"}``):
    what a call answers in ``authorization_required``, asked for before calling."""
    user = _person(principal)
    public_url = state.settings.public_url
    if not public_url:
        raise ValidationFailed("people connect servers through the gateway's public URL, "
                               "which is not set (AGENTCARDS_PUBLIC_URL)")  # fmt: skip

    def configured(conn: Any) -> dict[str, Any] | None:
        row = conn.execute(
            "SELECT config FROM mcp_servers WHERE name = %s AND state <> 'removed'", (server,)
        ).fetchone()
        return None if row is None else dict(row["config"] or {})

    config = await in_pool(state, configured)
    auth = (config or {}).get("auth") or {}
    if config is None or auth.get("type") != "oauth":
        raise NotFound(f"no configured server {server!r} that people connect with OAuth")
    link = await links.connect_url(
        state.aredis, PiiKeys.from_settings(state.settings), public_url=public_url, tenant_id=principal.tenant_id, user_id=user,
        server=server, url=str(config["url"]), scopes=list(auth.get("scopes") or []),
    )  # fmt: skip
    # The person's link still open, if any (the same one a refused call names): what is left.
    return {"server": server, "url": link.url, "expires_in": int(link.expires_at - time.time())}
