"""Execution events on Redis pub/sub: progress, tool_start/tool_end, and the final `finished`."""

from __future__ import annotations

import time
from typing import Any

import orjson
import redis

from shared.queues import EVENTS_ALL_CHANNEL, events_channel

FINISHED = "execution.finished"
LEARNED = "execution.learned"  # published by the learning worker after ingestion


def encode_event(execution_id: str, event: dict[str, Any]) -> bytes:
    """One event as JSON with the execution id and a timestamp."""
    return orjson.dumps({"execution_id": execution_id, "ts": time.time(), **event})


def publish_event(client: redis.Redis, *, execution_id: str, event: dict[str, Any]) -> None:
    """Publish to the execution's channel; finish events also go to the global channel."""
    payload = encode_event(execution_id, event)
    pipe = client.pipeline(transaction=False)
    pipe.publish(events_channel(execution_id), payload)
    if event.get("type") == FINISHED:
        pipe.publish(EVENTS_ALL_CHANNEL, payload)
    pipe.execute()
