"""A person's connections to servers that act for them (docs/upstream-identity.md): listed
without their tokens, and revoked."""

from __future__ import annotations

from typing import Any

from services.gateway.ops.db import in_pool
from services.gateway.state import GatewayState
from shared.auth.principal import Principal
from shared.connections import links, store
from shared.errors import Forbidden, NotFound, ValidationFailed


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
    """Forget the person's tokens for ``server``: their next call asks them to connect again."""
    user = _person(principal)
    gone = await in_pool(
        state,
        lambda conn: store.delete(conn, tenant_id=principal.tenant_id, user_id=user, server=server),
    )
    if not gone:
        raise NotFound(f"you have no connection to {server!r} (GET /v1/connections lists them)")


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
    url = await links.connect_url(
        state.aredis, public_url=public_url, tenant_id=principal.tenant_id, user_id=user,
        server=server, url=str(config["url"]), scopes=list(auth.get("scopes") or []),
    )  # fmt: skip
    return {"server": server, "url": url, "expires_in": links.LINK_TTL_S}
