"""Connect links and connections under way, in Redis, each usable once.

A **connect link** (``<public_url>/oauth/connect/<id>``) is what a person who has not
connected a server gets in the ``authorization_required`` error: 256 random bits, kept
under their SHA-256 with the tenant, user and server it is for. It opens for
``LINK_TTL_S``; the first use by its person marks it used (``SET … XX KEEPTTL GET``, one
round trip, so two uses cannot both take it). Its record stays ``LINK_KEPT_S`` so its page
can say "used" or "expired" rather than "unknown". A **flow** is a connection under way,
between the authorization request and the callback: kept for ``FLOW_TTL_S`` under the
SHA-256 of its ``state`` together with the browser's own secret (a cookie of the browser
that opened the link), sealed (it holds the PKCE verifier and the client's secret), taken
by the first callback that names both, so a replayed or forged callback, or one arriving
in another browser, finds nothing and uses nothing up.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from dataclasses import dataclass
from typing import Any, Literal

import orjson
import redis.asyncio as aioredis

from shared.privacy.keys import PiiKeys
from shared.privacy.sealed import open_bound, seal_bound
from shared.queues import CONNECT_DONE_PREFIX, CONNECT_FLOW_PREFIX, CONNECT_LINK_PREFIX

LINK_TTL_S = 600  # a link in an error message: long enough to open it, short enough to leak less
LINK_KEPT_S = 3600  # a used or expired link is still told from one never made, this long
DONE_POLL_S = 2.0  # a wait for a link's connection blocks this long per round trip
FLOW_TTL_S = 600  # the person's time at the authorization server (sign in, consent)
FLOW_LABEL = b"connect-flow"
CONNECT_PATH = "/oauth/connect/"  # + link id: the gateway's page (services/gateway/connect.py)


def _digest(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


def new_secret() -> str:
    """256 random bits, URL-safe."""
    return secrets.token_urlsafe(32)


LinkStatus = Literal["open", "used", "expired", "unknown"]


@dataclass(frozen=True, slots=True)
class Link:
    """What a link is for (``record``: tenant_id, user_id, server, url, scopes) and whether it
    can still be used; ``record`` is None once used, or for a link never made here."""

    status: LinkStatus
    record: dict[str, Any] | None = None


async def new_link(client: aioredis.Redis, *, record: dict[str, Any]) -> str:
    """A new connect link's id for ``record`` (tenant_id, user_id, server, url, scopes)."""
    link = new_secret()
    kept = {**record, "expires_at": time.time() + LINK_TTL_S}
    await client.set(CONNECT_LINK_PREFIX + _digest(link), orjson.dumps(kept), ex=LINK_KEPT_S)
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


def _status(raw: bytes | str | None) -> Link:
    if raw is None:
        return Link("unknown")
    record = dict(orjson.loads(raw))
    if record.get("used"):
        return Link("used")
    if float(record.get("expires_at") or 0) <= time.time():
        return Link("expired", record)
    return Link("open", record)


async def peek_link(client: aioredis.Redis, link: str) -> Link:
    """What a link is for and whether it can be used, without using it."""
    return _status(await client.get(CONNECT_LINK_PREFIX + _digest(link)))


async def take_link(client: aioredis.Redis, link: str) -> Link:
    """Use a link: what it is for, once (any status but ``open``: it was not taken now)."""
    key = CONNECT_LINK_PREFIX + _digest(link)
    used = orjson.dumps({"used": True, "at": time.time()})
    previous = await client.set(key, used, xx=True, keepttl=True, get=True)
    return _status(previous if isinstance(previous, (bytes, str)) else None)


def link_of(url: str) -> str:
    """The link id of a connect link's URL."""
    return url.rstrip("/").rsplit("/", 1)[-1]


async def announce_connected(client: aioredis.Redis, *, link_digest: str) -> None:
    """Say that the connection a link started is stored (a call waiting on it goes ahead)."""
    key = CONNECT_DONE_PREFIX + link_digest
    async with client.pipeline(transaction=True) as pipe:
        pipe.rpush(key, b"1")
        pipe.expire(key, FLOW_TTL_S)
        await pipe.execute()


async def wait_connected(client: aioredis.Redis, *, link: str, until: float) -> bool:
    """Whether the connection ``link`` started was stored before ``until`` (Unix time)."""
    key = CONNECT_DONE_PREFIX + _digest(link)
    while (remaining := until - time.time()) > 0:
        if await client.blpop([key], timeout=max(0.01, min(DONE_POLL_S, remaining))):
            return True
    return False


def digest_of(link: str) -> str:
    """The key a link is kept under (never the link itself)."""
    return _digest(link)


def _flow_key(state: str, browser: str) -> str:
    return _digest(f"{state}\n{browser}")


async def start_flow(
    client: aioredis.Redis, keys: PiiKeys, *, state: str, browser: str, flow: dict[str, Any]
) -> None:
    """Remember a connection under way until its callback names ``state`` in the browser
    whose secret is ``browser``."""
    key = _flow_key(state, browser)
    sealed = seal_bound(keys, label=FLOW_LABEL, aad=key.encode(), value=orjson.dumps(flow).decode())
    await client.set(CONNECT_FLOW_PREFIX + key, sealed, ex=FLOW_TTL_S)


async def take_flow(
    client: aioredis.Redis, keys: PiiKeys, *, state: str, browser: str
) -> dict[str, Any] | None:
    """The connection under way that ``state`` names in the browser ``browser``, once (None:
    unknown, used, expired, or another browser's)."""
    key = _flow_key(state, browser)
    raw = await client.getdel(CONNECT_FLOW_PREFIX + key)
    if raw is None:
        return None
    text = raw.decode() if isinstance(raw, bytes) else str(raw)
    opened = open_bound(keys, label=FLOW_LABEL, aad=key.encode(), value=text)
    return None if opened is None else dict(orjson.loads(opened))
