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

A person refused again and again (each listing, each call) gets the **same** link while it
is open and has ``LINK_REUSE_MIN_S`` left: the link now open for a tenant, user, server and
scopes is kept beside it (sealed: Redis never holds a link in plaintext), and one script
either hands it back or makes a new one, so two refusals at once cannot make two.
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
from shared.queues import (
    CONNECT_CURRENT_PREFIX,
    CONNECT_DONE_PREFIX,
    CONNECT_FLOW_PREFIX,
    CONNECT_LINK_PREFIX,
)

LINK_TTL_S = 600  # a link in an error message: long enough to open it, short enough to leak less
LINK_KEPT_S = 3600  # a used or expired link is still told from one never made, this long
DONE_POLL_S = 2.0  # a wait for a link's connection blocks this long per round trip
FLOW_TTL_S = 600  # the person's time at the authorization server (sign in, consent)
FLOW_LABEL = b"connect-flow"
LINK_REUSE_MIN_S = 60  # a link with less left than this is not handed out again: a new one
CURRENT_LABEL = b"connect-link-current"
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


# KEYS: the person's current link (its pointer), a new link's record. ARGV: the new pointer,
# the new record, now, the least time left worth handing out, the record's and the pointer's
# lifetimes. The current link's record is read by the key its pointer names (one Redis, not
# a cluster: the script reads a key it was not given).
_CURRENT_OR_NEW = """
local current = redis.call('GET', KEYS[1])
if current then
  local digest = cjson.decode(current)['digest']
  local raw = redis.call('GET', ARGV[7] .. digest)
  if raw then
    local record = cjson.decode(raw)
    local left = tonumber(record['expires_at'] or 0) - tonumber(ARGV[3])
    if not record['used'] and left >= tonumber(ARGV[4]) then
      return current
    end
  end
end
redis.call('SET', KEYS[2], ARGV[2], 'EX', ARGV[5])
redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[6])
return ARGV[1]
"""


@dataclass(frozen=True, slots=True)
class Handed:
    """A connect link handed to a person: the URL they open (or the bare id) and until when."""

    url: str
    expires_at: float

    @property
    def minutes_left(self) -> int:
        """Whole minutes it stays open, rounded up (what an error message tells)."""
        return max(1, -int(-(self.expires_at - time.time()) // 60))


async def current_link(client: aioredis.Redis, keys: PiiKeys, *, record: dict[str, Any]) -> Handed:
    """The person's open link for ``record`` (tenant_id, user_id, server, url, scopes) if it
    has ``LINK_REUSE_MIN_S`` left, else a new one (which becomes the current one)."""
    named = orjson.dumps([record[k] for k in ("tenant_id", "user_id", "server", "url", "scopes")])
    pointer_key = CONNECT_CURRENT_PREFIX + hashlib.sha256(named).hexdigest()
    aad = pointer_key.encode()
    for reuse_min in (LINK_REUSE_MIN_S, LINK_TTL_S + 1):  # again, new: a pointer that won't open
        link = new_secret()
        now = time.time()
        sealed = seal_bound(keys, label=CURRENT_LABEL, aad=aad, value=link)
        expires_at = now + LINK_TTL_S
        pointer = orjson.dumps({"digest": _digest(link), "sealed": sealed,
                                "expires_at": expires_at})  # fmt: skip
        kept = orjson.dumps({**record, "expires_at": expires_at})
        raw = await client.eval(  # type: ignore[misc]
            _CURRENT_OR_NEW, 2, pointer_key, CONNECT_LINK_PREFIX + _digest(link),
            pointer, kept, repr(now), reuse_min, LINK_KEPT_S, LINK_TTL_S, CONNECT_LINK_PREFIX,
        )  # fmt: skip
        held = dict(orjson.loads(raw))
        opened = open_bound(keys, label=CURRENT_LABEL, aad=aad, value=str(held["sealed"]))
        if opened is not None and _digest(opened) == held["digest"]:
            return Handed(opened, float(held["expires_at"]))
    raise RuntimeError("a connect link just made does not open")  # the key changed meanwhile


async def connect_url(
    client: aioredis.Redis,
    keys: PiiKeys,
    *,
    public_url: str,
    tenant_id: str,
    user_id: str,
    server: str,
    url: str,
    scopes: list[str],
) -> Handed:
    """The person's connect link for the server, as the URL they open: the one still open
    (``current_link``), or a new one."""
    record = {"tenant_id": tenant_id, "user_id": user_id, "server": server, "url": url,
              "scopes": scopes}  # fmt: skip
    link = await current_link(client, keys, record=record)
    return Handed(f"{public_url.rstrip('/')}{CONNECT_PATH}{link.url}", link.expires_at)


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
            # Said again for the next one waiting on the same link (one person's call and
            # read asked at once are handed one link: each goes ahead).
            await announce_connected(client, link_digest=_digest(link))
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
