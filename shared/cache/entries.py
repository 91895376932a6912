"""L1, the execution cache in Redis: one expiring entry per (tenant, digest), indexed by the
tools and servers it used so invalidation finds it.

Store-then-check: a run reads each server's generation before it starts; after storing its
entry it reads them again and deletes the entry if one moved. An invalidation bumps the
generation before deleting, so either it sees the new entry or the run sees the bump: a
result read before a write is never left behind after it.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import orjson
import redis

from shared.cache.keys import entry_key, generation_key, index_key, tenant_of

# Prefix of a server's "whole server" generation (server names hold no ':').
WRITE = "write:"
# Index sets outlive any entry (TTLs are capped at a week); stale members of expired
# entries are harmless (DEL of a missing key) and go with the set.
INDEX_TTL_S = 8 * 86400


@dataclass(frozen=True, slots=True)
class CachedResult:
    """What a hit returns: the stored result and where it came from."""

    result: Any
    stdout: str
    tools_used: list[str]
    cached_at: float  # epoch seconds
    source_execution_id: str
    capability_id: str | None = None
    # The generations of the servers the run read (see the module docstring).
    generations: dict[str, int] = field(default_factory=dict)


def get_entry(client: redis.Redis, *, tenant_id: str, digest: str) -> CachedResult | None:
    """The tenant's live entry for this digest (Redis drops expired ones)."""
    raw = client.get(entry_key(tenant_id, digest))
    if raw is None:
        return None
    return CachedResult(**orjson.loads(raw))


def get_entry_and_generations(
    client: redis.Redis, *, tenant_id: str, digest: str, servers: Sequence[str]
) -> tuple[CachedResult | None, dict[str, int]]:
    """``get_entry`` then ``read_generations`` of ``servers``, in one round trip (a pipeline:
    Redis runs them in order, so the generations are read after the entry, as ``current``
    would read them)."""
    pipe = client.pipeline(transaction=False)
    keys = queue_entry_and_generations(pipe, tenant_id=tenant_id, digest=digest, servers=servers)
    return entry_and_generations_replied(keys, pipe.execute())


def queue_entry_and_generations(
    pipe: Any, *, tenant_id: str, digest: str, servers: Sequence[str]
) -> list[str]:
    """Queue ``get_entry_and_generations``' reads on ``pipe`` (for a caller that sends it on
    the event loop); the generation keys, for ``entry_and_generations_replied``."""
    pipe.get(entry_key(tenant_id, digest))
    return queue_generations(pipe, servers)


def entry_and_generations_replied(
    keys: Sequence[str], replies: Sequence[Any]
) -> tuple[CachedResult | None, dict[str, int]]:
    """The entry and generations ``queue_entry_and_generations`` queued, from their replies."""
    raw, *values = replies
    entry = None if raw is None else CachedResult(**orjson.loads(raw))
    return entry, generations_replied(keys, values)


def queue_generations(pipe: Any, servers: Sequence[str]) -> list[str]:
    """Queue ``read_generations`` of ``servers`` on ``pipe`` (one MGET, none for no server),
    so it shares another read's round trip; the keys, for ``generations_replied``."""
    keys = _generation_keys(servers)
    if keys:
        pipe.mget([generation_key(k) for k in keys])
    return keys


def generations_replied(keys: Sequence[str], replies: Sequence[Any]) -> dict[str, int]:
    """The generations ``queue_generations`` queued last, from the pipeline's replies to it."""
    return _generations(keys, replies[0] if keys else [])


def read_generations(client: redis.Redis, servers: Sequence[str]) -> dict[str, int]:
    """Each server's two generations (0 when never bumped): ``server`` moves with every
    invalidation that touches it, ``write:server`` only with those of the whole server."""
    keys = _generation_keys(servers)
    if not keys:
        return {}
    return _generations(keys, client.mget([generation_key(k) for k in keys]))


def _generation_keys(servers: Sequence[str]) -> list[str]:
    return [k for s in servers for k in (s, WRITE + s)]


def _generations(keys: Sequence[str], values: Sequence[Any]) -> dict[str, int]:
    return {k: int(v or 0) for k, v in zip(keys, values, strict=True)}


def generations_of(generations: Mapping[str, int], servers: Iterable[str]) -> dict[str, int]:
    """The part of a run's generations an entry that used ``servers`` keeps."""
    return {k: int(generations.get(k, 0)) for s in servers for k in (s, WRITE + s)}


def unchanged(
    client: redis.Redis, *, servers: Sequence[str], generations: Mapping[str, Any]
) -> bool:
    """No invalidation touched these servers since ``generations`` were read (store-then-check)."""
    now = read_generations(client, servers)
    return all(v == int(generations.get(k, 0)) for k, v in now.items())


def current(client: redis.Redis, *, servers: Sequence[str], generations: Mapping[str, Any]) -> bool:
    """Whether no server an entry used was written or invalidated whole since its run read it:
    a hit is served only then, so an invalidation that bumped the generations but could not
    delete the entries (Postgres or Redis failing halfway) leaves nothing stale readable.
    (Tool-level invalidations delete exactly their entries and leave the others readable.)"""
    if not servers:
        return True
    now = client.mget([generation_key(WRITE + s) for s in servers])
    return all(
        int(v or 0) == int(generations.get(WRITE + s, 0)) for s, v in zip(servers, now, strict=True)
    )


def current_as_read(
    read: Mapping[str, int], *, servers: Sequence[str], generations: Mapping[str, Any]
) -> bool:
    """``current`` against generations read with the entry (``get_entry_and_generations``)."""
    return all(int(read[WRITE + s]) == int(generations.get(WRITE + s, 0)) for s in servers)


def put_entry(
    client: redis.Redis,
    *,
    tenant_id: str,
    digest: str,
    entry: CachedResult,
    ttl_s: int,
    servers: Sequence[str],
    generations: Mapping[str, int],
) -> bool:
    """Store an entry unless a server it used was invalidated since the run began; True if kept."""
    key = entry_key(tenant_id, digest)
    pipe = client.pipeline(transaction=False)
    pipe.set(key, orjson.dumps(asdict(entry)), ex=ttl_s)
    for index in _indexes(tenant_id, entry.tools_used, servers):
        pipe.sadd(index, key)
        pipe.expire(index, INDEX_TTL_S)
    pipe.execute()
    if not unchanged(client, servers=servers, generations=generations):
        client.delete(key)
        return False
    return True


def bump_generations(
    client: redis.Redis, servers: Iterable[str], *, whole: Iterable[str] = ()
) -> None:
    """Mark the servers invalidated: runs that began before now store nothing they read; for
    ``whole`` servers (a write, a removal) no entry stored before now is served either."""
    pipe = client.pipeline(transaction=False)
    for server in servers:
        pipe.incr(generation_key(server))
    for server in whole:
        pipe.incr(generation_key(WRITE + server))
    pipe.execute()


def delete_entries(
    client: redis.Redis,
    *,
    tools: Iterable[str] = (),
    servers: Iterable[str] = (),
    tenant_id: str | None = None,
) -> dict[str, int]:
    """Delete the entries that used any of ``tools`` or ``servers`` (of one tenant, or all), or
    every entry of ``tenant_id`` when neither is given; the count deleted per tenant."""
    indexes = [index_key("tool", t) for t in tools] + [index_key("server", s) for s in servers]
    if not indexes and tenant_id is not None:
        indexes = [index_key("tenant", tenant_id)]
    if not indexes:
        return {}
    keys: set[str] = set()
    for members in _smembers(client, indexes):
        keys |= {m.decode() if isinstance(m, bytes) else str(m) for m in members}
    if tenant_id is not None:
        keys = {k for k in keys if tenant_of(k) == tenant_id}
    ordered = sorted(keys)
    pipe = client.pipeline(transaction=False)
    for key in ordered:
        pipe.delete(key)
    counts: dict[str, int] = {}
    for key, deleted in zip(ordered, pipe.execute(), strict=True):
        if deleted:
            counts[tenant_of(key)] = counts.get(tenant_of(key), 0) + 1
    return counts


def delete_from_source(client: redis.Redis, *, tenant_id: str, execution_id: str) -> int:
    """Delete the tenant's entries stored from one execution's result; how many (a scan of
    the tenant's entries: for the rare run an agent reports wrong)."""
    keys = sorted(m.decode() if isinstance(m, bytes) else str(m)
                  for m in client.smembers(index_key("tenant", tenant_id)))  # fmt: skip
    if not keys:
        return 0
    doomed = [
        key
        for key, raw in zip(keys, client.mget(keys), strict=True)
        if raw is not None and orjson.loads(raw).get("source_execution_id") == execution_id
    ]
    return int(client.delete(*doomed)) if doomed else 0


def count_entries(client: redis.Redis, *, tenant_id: str) -> int:
    """Live entries of a tenant (its index may still name expired ones)."""
    members = client.smembers(index_key("tenant", tenant_id))
    if not members:
        return 0
    pipe = client.pipeline(transaction=False)
    for member in members:
        pipe.exists(member)
    return sum(int(x) for x in pipe.execute())


def now() -> float:
    """Epoch seconds, as entries record them."""
    return time.time()


def _indexes(tenant_id: str, tools: Iterable[str], servers: Iterable[str]) -> list[str]:
    return [
        index_key("tenant", tenant_id),
        *(index_key("tool", t) for t in tools),
        *(index_key("server", s) for s in servers),
    ]


def _smembers(client: redis.Redis, indexes: Sequence[str]) -> list[Any]:
    pipe = client.pipeline(transaction=False)
    for index in indexes:
        pipe.smembers(index)
    return list(pipe.execute())
