"""The ``upstream_connections`` table: a person's tokens for one server, sealed.

The access and refresh tokens (and a registered client's secret) are stored sealed with the
stack's PII key (AES-GCM, shared/privacy/sealed.py), each bound to its row's tenant, user,
server and column: a value copied to another row, or another column, does not open. A row
that does not open (the key changed without ``AGENTCARDS_PII_KEY_PREVIOUS``) reads as no
connection: the person connects again.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

import psycopg

from shared.privacy.keys import PiiKeys
from shared.privacy.sealed import open_bound, seal_bound

Conn = psycopg.Connection[Any]
LABEL = b"upstream-connection"


@dataclass(frozen=True, slots=True)
class Connection:
    """One person's connection to one server, in plaintext (in memory only)."""

    tenant_id: str
    user_id: str
    server: str
    access_token: str = field(repr=False)
    refresh_token: str | None = field(default=None, repr=False)
    expires_at: float | None = None  # Unix time; None: the server did not say
    scope: str | None = None
    token_endpoint: str = ""
    client_id: str = ""
    client_secret: str | None = field(default=None, repr=False)
    resource: str = ""
    # How the client authenticates at the token endpoint, as registered (RFC 7591 names);
    # None: stored before it was kept (shared.connections.oauth.Client.stored).
    auth_method: str | None = None


def _aad(tenant_id: str, user_id: str, server: str, column: str) -> bytes:
    return f"{tenant_id}\x00{user_id}\x00{server}\x00{column}".encode()


def _seal(keys: PiiKeys, c: Connection, column: str, value: str | None) -> str | None:
    if value is None:
        return None
    aad = _aad(c.tenant_id, c.user_id, c.server, column)
    return seal_bound(keys, label=LABEL, aad=aad, value=value)


def save(conn: Conn, keys: PiiKeys, connection: Connection) -> None:
    """Store (or replace) the person's connection to the server."""
    c = connection
    expires = None if c.expires_at is None else dt.datetime.fromtimestamp(c.expires_at, dt.UTC)
    conn.execute(
        """
        INSERT INTO upstream_connections (tenant_id, user_id, server, access_token,
            refresh_token, expires_at, scope, token_endpoint, client_id, client_secret, resource,
            auth_method)
        VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)
        ON CONFLICT (tenant_id, user_id, server) DO UPDATE SET
            access_token = EXCLUDED.access_token, refresh_token = EXCLUDED.refresh_token,
            expires_at = EXCLUDED.expires_at, scope = EXCLUDED.scope,
            token_endpoint = EXCLUDED.token_endpoint, client_id = EXCLUDED.client_id,
            client_secret = EXCLUDED.client_secret, resource = EXCLUDED.resource,
            auth_method = EXCLUDED.auth_method, refreshed_at = now()
        """,
        (c.tenant_id, c.user_id, c.server, _seal(keys, c, "access_token", c.access_token),
         _seal(keys, c, "refresh_token", c.refresh_token), expires, c.scope, c.token_endpoint,
         c.client_id, _seal(keys, c, "client_secret", c.client_secret), c.resource,
         c.auth_method),
    )  # fmt: skip


def load(
    conn: Conn, keys: PiiKeys, *, tenant_id: str, user_id: str, server: str
) -> Connection | None:
    """The person's connection to the server; None when there is none or it does not open."""
    row = conn.execute(
        "SELECT * FROM upstream_connections WHERE tenant_id = %s AND user_id = %s AND server = %s",
        (tenant_id, user_id, server),
    ).fetchone()
    if row is None:
        return None

    def opened(column: str) -> str | None:
        value = row[column]
        if value is None:
            return None
        aad = _aad(tenant_id, user_id, server, column)
        return open_bound(keys, label=LABEL, aad=aad, value=value)

    access = opened("access_token")
    if access is None:
        return None
    expires = row["expires_at"]
    return Connection(
        tenant_id=tenant_id,
        user_id=user_id,
        server=server,
        access_token=access,
        refresh_token=opened("refresh_token"),
        expires_at=None if expires is None else expires.timestamp(),
        scope=row["scope"],
        token_endpoint=row["token_endpoint"],
        client_id=row["client_id"],
        client_secret=opened("client_secret"),
        resource=row["resource"],
        auth_method=row.get("auth_method"),
    )


def delete(conn: Conn, *, tenant_id: str, user_id: str, server: str) -> bool:
    """Forget the person's connection to the server; True when there was one."""
    deleted = conn.execute(
        "DELETE FROM upstream_connections WHERE tenant_id = %s AND user_id = %s AND server = %s",
        (tenant_id, user_id, server),
    )
    return deleted.rowcount > 0


def someone(conn: Conn, *, server: str) -> tuple[str, str] | None:
    """The tenant and user of one person connected to ``server`` (the first to connect)."""
    row = conn.execute(
        "SELECT tenant_id, user_id FROM upstream_connections WHERE server = %s "
        "ORDER BY created_at LIMIT 1",
        (server,),
    ).fetchone()
    return None if row is None else (row["tenant_id"], row["user_id"])


def listed(conn: Conn, *, tenant_id: str, user_id: str) -> list[dict[str, Any]]:
    """The person's connections, without their tokens: server, scope, dates."""
    rows = conn.execute(
        """
        SELECT server, scope, expires_at, created_at AS connected_at, refreshed_at
        FROM upstream_connections WHERE tenant_id = %s AND user_id = %s ORDER BY server
        """,
        (tenant_id, user_id),
    ).fetchall()
    return [dict(r) for r in rows]
