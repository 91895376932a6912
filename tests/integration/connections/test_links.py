"""Connect links on a real Redis: a person refused again and again is handed the same link
while it is open, and a new one once it is used, expired or nearly so."""

from __future__ import annotations

import asyncio
import secrets
import time

import orjson
import redis
import redis.asyncio as aioredis

from shared.connections import links
from shared.privacy.keys import PiiKeys
from shared.queues import CONNECT_CURRENT_PREFIX, CONNECT_LINK_PREFIX

PUBLIC = "https://gateway.example"


async def _hand(client: aioredis.Redis, keys: PiiKeys, user: str = "alice",
                scopes: list[str] | None = None) -> links.Handed:  # fmt: skip
    return await links.connect_url(
        client, keys, public_url=PUBLIC, tenant_id="t1", user_id=user, server="tickets",
        url="https://tickets.example/mcp", scopes=scopes or ["read"],
    )  # fmt: skip


def _age(url: str, redis_url: str, *, left_s: float) -> None:
    """As if the link had only ``left_s`` seconds left."""
    plain = redis.Redis.from_url(redis_url)
    key = CONNECT_LINK_PREFIX + links.digest_of(links.link_of(url))
    record = orjson.loads(plain.get(key) or b"{}")
    plain.set(key, orjson.dumps({**record, "expires_at": time.time() + left_s}), keepttl=True)


async def test_a_person_refused_twice_gets_one_link_until_it_is_used(redis_url: str) -> None:
    keys = PiiKeys(current=secrets.token_bytes(32))
    client = aioredis.Redis.from_url(redis_url)
    try:
        first = await _hand(client, keys)
        again = await _hand(client, keys)
        assert again.url == first.url and again.expires_at == first.expires_at
        # Many refusals at once (a listing and calls in parallel): still the one link.
        together = await asyncio.gather(*(_hand(client, keys, "bob") for _ in range(20)))
        assert len({h.url for h in together}) == 1
        assert together[0].url != first.url  # bob's own
        # Another scope (a step up) is another link; alice's read link stays hers.
        wider = await _hand(client, keys, scopes=["read", "write"])
        assert wider.url != first.url and (await _hand(client, keys)).url == first.url
        # Used: never handed out again, a new one instead, handed out in its turn.
        taken = await links.take_link(client, links.link_of(first.url))
        assert taken.status == "open"
        fresh = await _hand(client, keys)
        assert fresh.url != first.url and (await _hand(client, keys)).url == fresh.url
        # Less than a minute left (or expired): a new one, with its full ten minutes.
        _age(fresh.url, redis_url, left_s=links.LINK_REUSE_MIN_S - 5)
        later = await _hand(client, keys)
        assert later.url != fresh.url and later.minutes_left == links.LINK_TTL_S // 60
        assert (await links.peek_link(client, links.link_of(later.url))).status == "open"
        _age(later.url, redis_url, left_s=-1)
        assert (await _hand(client, keys)).url != later.url
        # Two requests asked to connect with the one link both hear that it was used to connect.
        waiting = links.link_of(later.url)
        until = time.time() + 30
        both = asyncio.gather(*(links.wait_connected(client, link=waiting, until=until)
                                for _ in range(2)))  # fmt: skip
        await links.announce_connected(client, link_digest=links.digest_of(waiting))
        assert await both == [True, True]
        # Redis holds no link in plaintext: records by digest, the current one sealed.
        plain = redis.Redis.from_url(redis_url)
        held = b"".join(plain.get(k) or b"" for k in plain.scan_iter(CONNECT_CURRENT_PREFIX + "*"))
        assert held and links.link_of(later.url).encode() not in held
        # Another key (the vault key replaced): the pointer does not open, a new link.
        current = await _hand(client, keys)
        other = await _hand(client, PiiKeys(current=secrets.token_bytes(32)))
        assert other.url != current.url
    finally:
        await client.aclose()
