"""Connect links and connections under way, in Redis, each usable once.

A **connect link** (``<public_url>/oauth/connect/<id>``) is what a person who has not
connected a server gets in the ``authorization_required`` error: 256 random bits, kept
under their SHA-256 for ``LINK_TTL_S`` with the tenant, user and server it is for, taken
(GETDEL) by the first request that uses it. A **flow** is a connection under way, between
the authorization request and the callback: kept under the SHA-256 of its ``state`` for
``FLOW_TTL_S``, sealed (it holds the PKCE verifier and the client's secret), taken by the
first callback that names it, so a replayed or forged callback finds nothing.
"""

from __future__ import annotations

import hashlib
import secrets
from typing import Any

import orjson
import redis.asyncio as aioredis

from shared.privacy.keys import PiiKeys
from shared.privacy.sealed import open_bound, seal_bound
from shared.queues import CONNECT_FLOW_PREFIX, CONNECT_LINK_PREFIX

LINK_TTL_S = 600  # a link in an error message: long enough to open it, short enough to leak less
FLOW_TTL_S = 600  # the person's time at the authorization server (sign in, consent)
FLOW_LABEL = b"connect-flow"
CONNECT_PATH = "/oauth/connect/"  # + link id: the gateway's page (services/gateway/connect.py)


def _digest(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


def new_secret() -> str:
    """256 random bits, URL-safe."""
    return secrets.token_urlsafe(32)


async def new_link(client: aioredis.Redis, *, record: dict[str, Any]) -> str:
    """A new connect link's id for ``record`` (tenant_id, user_id, server, url, scopes)."""
    link = new_secret()
    await client.set(CONNECT_LINK_PREFIX + _digest(link), orjson.dumps(record), ex=LINK_TTL_S)
    return link


async def connect_url(
    client: aioredis.Redis,
    *,
    public_url: str,
    tenant_id: str,
    user_id: str,
    server: str,
    url: str,
    scopes: list[str],
) -> str:
    """A new connect link for the person and server, as the URL they open."""
    record = {"tenant_id": tenant_id, "user_id": user_id, "server": server, "url": url,
              "scopes": scopes}  # fmt: skip
    link = await new_link(client, record=record)
    return f"{public_url.rstrip('/')}{CONNECT_PATH}{link}"


async def peek_link(client: aioredis.Redis, link: str) -> dict[str, Any] | None:
    """What a link is for, without using it (None: unknown, used or expired)."""
    raw = await client.get(CONNECT_LINK_PREFIX + _digest(link))
    return None if raw is None else dict(orjson.loads(raw))


async def take_link(client: aioredis.Redis, link: str) -> dict[str, Any] | None:
    """Use a link: what it is for, once (None: unknown, used or expired)."""
    raw = await client.getdel(CONNECT_LINK_PREFIX + _digest(link))
    return None if raw is None else dict(orjson.loads(raw))


async def start_flow(
    client: aioredis.Redis, keys: PiiKeys, *, state: str, flow: dict[str, Any]
) -> None:
    """Remember a connection under way until its callback names ``state``."""
    key = _digest(state)
    sealed = seal_bound(keys, label=FLOW_LABEL, aad=key.encode(), value=orjson.dumps(flow).decode())
    await client.set(CONNECT_FLOW_PREFIX + key, sealed, ex=FLOW_TTL_S)


async def take_flow(client: aioredis.Redis, keys: PiiKeys, *, state: str) -> dict[str, Any] | None:
    """The connection under way that ``state`` names, once (None: unknown, used or expired)."""
    key = _digest(state)
    raw = await client.getdel(CONNECT_FLOW_PREFIX + key)
    if raw is None:
        return None
    text = raw.decode() if isinstance(raw, bytes) else str(raw)
    opened = open_bound(keys, label=FLOW_LABEL, aad=key.encode(), value=text)
    return None if opened is None else dict(orjson.loads(opened))
