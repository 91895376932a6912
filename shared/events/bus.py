"""Publish one tenant's live events (executions, capabilities, cache, threshold) on its channel.

The wire contract of ``GET /v1/events``: the event type names below and their fields. Live
only (pub/sub, no replay); a lost event never fails what it reports, so ``publish`` logs
and returns instead of raising.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import Any

import orjson
import redis

from shared.queues import capability_events_channel, tenant_events_channel

log = logging.getLogger(__name__)


class EventType(StrEnum):
    """What happened, with the fields its ``data`` carries."""

    # execution_id, status, duration_ms, cache_hit, capability_id
    EXECUTION_FINISHED = "execution.finished"
    CAPABILITY_LEARNED = "capability.learned"  # capability_id, name, version
    CAPABILITY_UPDATED = "capability.updated"  # capability_id, name, version
    CACHE_INVALIDATED = "cache.invalidated"  # trigger, scope, count
    THRESHOLD_CHANGED = "threshold.changed"  # old, new


# Events the skills relay hears (on ``capability_events_channel`` as well as the tenant's).
CAPABILITY_CHANGES = frozenset({EventType.CAPABILITY_LEARNED, EventType.CAPABILITY_UPDATED})


def publish(
    client: redis.Redis, *, tenant_id: str, type: EventType, data: Mapping[str, Any]
) -> None:
    """Send one event to the tenant's subscribers; never raises (the caller's work is done)."""
    publish_many(client, events=[(tenant_id, type, data)])


def publish_many(
    client: redis.Redis, *, events: Sequence[tuple[str, EventType, Mapping[str, Any]]]
) -> None:
    """``publish`` for many (tenant, type, data) in one round trip; never raises."""
    if not events:
        return
    try:
        pipe = client.pipeline(transaction=False)
        for tenant_id, type_, data in events:
            queue(pipe, tenant_id=tenant_id, type=type_, data=data)
        pipe.execute()
    except Exception:  # a broken event stream must not fail a finished execution
        log.warning("could not publish %d tenant event(s)", len(events), exc_info=True)


def queue(
    pipe: redis.client.Pipeline, *, tenant_id: str, type: EventType, data: Mapping[str, Any]
) -> None:
    """``publish`` on the caller's pipeline, sent with its other commands (the caller sends it
    and, like ``publish``, never lets a failure fail the work it reports). A capability's
    change goes on its own channel too (``CAPABILITY_CHANGES``), the one the gateways' skills
    relay hears."""
    payload = orjson.dumps({"type": str(type), "data": dict(data)}, default=str)
    pipe.publish(tenant_events_channel(tenant_id), payload)
    if type in CAPABILITY_CHANGES:
        pipe.publish(capability_events_channel(tenant_id), payload)


def execution_finished(row: Mapping[str, Any], *, status: str | None = None) -> dict[str, Any]:
    """The ``execution.finished`` data of a stored execution row (``status`` if newer)."""
    extras = row.get("extras") or {}
    capability_id = row.get("capability_id")
    duration = row.get("duration_ms")
    return {
        "execution_id": str(row["id"]),
        "status": str(status or row["status"]),
        "duration_ms": float(duration) if duration is not None else None,
        "cache_hit": bool(extras.get("cache_hit")),
        "capability_id": str(capability_id) if capability_id is not None else None,
        "mcp_task_id": row.get("mcp_task_id"),  # the MCP task a client polls it by, if any
    }


def capability_event(row: Mapping[str, Any]) -> dict[str, Any]:
    """The ``capability.learned`` / ``capability.updated`` data of a capability row."""
    return {
        "capability_id": str(row["id"]),
        "name": row["name"],
        "version": int(row.get("version") or 1),
    }


def decode(raw: bytes | str) -> tuple[str, dict[str, Any]]:
    """(type, data) of one published event."""
    event = orjson.loads(raw)
    return str(event["type"]), dict(event["data"])
