"""Invalidation: drop the affected entries of both levels, log them per tenant, count, announce.

Writes and schema changes are global (servers are shared by every tenant: a file one tenant
writes is the file another reads); manual clears are the caller's tenant's only.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from enum import StrEnum
from typing import Any

import orjson
import psycopg
import redis

from shared import metrics
from shared.cache import entries, store
from shared.cache.policy import servers_of
from shared.events import bus
from shared.queues import CACHE_INVALIDATIONS_CHANNEL

log = logging.getLogger(__name__)


class Trigger(StrEnum):
    """Why entries were invalidated (``cache_invalidation_log.trigger``)."""

    WRITE = "write"  # a non-read-only tool of the server was called successfully
    SCHEMA_CHANGE = "schema_change"  # a tool's input schema hash changed
    TOOL_REMOVED = "tool_removed"  # a tool disappeared from its server's list
    SERVER_REMOVED = "server_removed"  # its server left the MCP configuration
    POLICY_CHANGE = "policy_change"  # a tool's annotations or cache override changed
    FAILURES = "failures"  # a capability failed three times in a row
    TTL = "ttl"  # expired rows deleted by the beat job
    MANUAL = "manual"  # DELETE /v1/cache, DELETE /v1/capabilities/{id}/cache, the CLI


def invalidate(
    conn: psycopg.Connection[Any],
    client: redis.Redis,
    *,
    trigger: Trigger,
    scope: str,
    tenant_id: str | None = None,
    capability_id: str | None = None,
    tools: Iterable[str] = (),
    servers: Iterable[str] = (),
    expired: bool = False,
) -> int:
    """Invalidate and commit (the caller reports its execution finished only after this);
    the number of entries removed. A capability's invalidation touches L2 only (L1 is keyed
    by code, not by capability); expiry too (Redis expires L1 by itself)."""
    tools, servers = sorted(set(tools)), sorted(set(servers))
    touched = set(servers) | servers_of(tools)
    if touched:  # first, so a run that read before this stores nothing (entries.py)
        # Reads check the whole-server generation: bumped for the servers invalidated whole
        # (not for one tenant's manual clear, which must not hide other tenants' entries).
        entries.bump_generations(client, touched, whole=servers if tenant_id is None else ())
    counts = store.delete_entries(
        conn,
        tenant_id=tenant_id,
        capability_id=capability_id,
        tools=tools,
        servers=servers,
        expired=expired,
    )
    if capability_id is None and not expired:
        for tenant, n in entries.delete_entries(
            client, tools=tools, servers=servers, tenant_id=tenant_id
        ).items():
            counts[tenant] = counts.get(tenant, 0) + n
    if trigger is Trigger.MANUAL and tenant_id is not None:
        counts.setdefault(tenant_id, 0)  # a manual clear is logged even when it found nothing
    tool_id = tools[0] if len(tools) == 1 else None
    for tenant, n in sorted(counts.items()):
        store.log_invalidation(
            conn,
            tenant_id=tenant,
            trigger=trigger,
            scope=scope,
            count=n,
            capability_id=capability_id,
            tool_id=tool_id,
        )
    if servers and tenant_id is None and capability_id is None:
        store.unblock_servers(conn, servers=servers)  # every entry of theirs is gone now
    conn.commit()
    total = sum(counts.values())
    if counts:
        _announce(client, trigger=trigger, scope=scope, counts=counts, total=total)
    return total


def _announce(
    client: redis.Redis, *, trigger: Trigger, scope: str, counts: dict[str, int], total: int
) -> None:
    """Count it for Prometheus and publish it; a lost event or counter never undoes the work."""
    event = {"type": "cache.invalidated", "trigger": str(trigger), "scope": scope,
             "count": total, "tenants": counts, "ts": time.time()}  # fmt: skip
    try:
        if total:
            metrics.incr_labelled(client, "cache_invalidations_total", str(trigger), total)
        client.publish(CACHE_INVALIDATIONS_CHANNEL, orjson.dumps(event))
    except redis.RedisError:
        log.warning("could not publish the invalidation %s (%s)", trigger, scope, exc_info=True)
    bus.publish_many(
        client,
        events=[
            (tenant, bus.EventType.CACHE_INVALIDATED,
             {"trigger": str(trigger), "scope": scope, "count": n})
            for tenant, n in sorted(counts.items())
        ],
    )  # fmt: skip
