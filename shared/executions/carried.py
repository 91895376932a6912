"""A finished execution's row, carried from its worker to the waiting gateway through Redis.

The worker's store returns the row it wrote; the announce leaves it under
``finished_row_key`` (a few seconds) and publishes it on the run's channel, both just before
``execution.finished``, so a waiting request wakes with the row in hand instead of a thread
hop and a SELECT: a request following the channel has it from the message (not even a GET),
one that heard the event only from the log reads the key. Postgres stays the source of
truth: a row too large to carry, a value this codec does not know, an expired or missing key
all mean the gateway reads the row as before.

Each column travels as a ``[tag, value]`` pair so that datetimes, UUIDs and Decimals come back
as the same Python values psycopg gives (the answers built from either are byte-identical:
``tests/integration/e2e/test_carried_row.py``).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from decimal import Decimal
from typing import Any
from uuid import UUID

import orjson
import redis
import redis.asyncio as aioredis

from shared.queues import events_channel, finished_row_key

Row = dict[str, Any]

# Larger rows (a big result, stdout or trace) are read from Postgres: not worth Redis memory.
MAX_CARRIED_BYTES = 64 * 1024
# The gateway reads it within milliseconds of the event; past this, it reads Postgres.
CARRIED_TTL_S = 30
# What starts the row's message on the run's channel: never an event (those are JSON objects).
ROW_MESSAGE = b"row:"


def encode_row(row: Row) -> bytes | None:
    """The row as carried, or None when it cannot be carried exactly (or is too large)."""
    tagged: dict[str, list[Any]] = {}
    for column, value in row.items():
        if isinstance(value, dt.datetime):
            tagged[column] = ["dt", value.isoformat()]
        elif isinstance(value, UUID):
            tagged[column] = ["uuid", str(value)]
        elif isinstance(value, Decimal):
            tagged[column] = ["dec", str(value)]
        elif value is None or isinstance(value, str | int | float | bool | dict | list):
            tagged[column] = ["v", value]
        else:  # a type the gateway would not get back as psycopg gives it
            return None
    try:
        raw = orjson.dumps(tagged)
    except orjson.JSONEncodeError:  # ints past 64 bits, lone surrogates: read from Postgres
        return None
    return raw if len(raw) <= MAX_CARRIED_BYTES else None


def _same(value: Any) -> Any:
    return value


_DECODERS: dict[str, Callable[[Any], Any]] = {
    "dt": dt.datetime.fromisoformat,
    "uuid": UUID,
    "dec": Decimal,
    "v": _same,
}


def decode_row(raw: bytes | str) -> Row:
    """The row ``encode_row`` carried, with its original Python types."""
    decoders = _DECODERS
    return {column: decoders[tag](value) for column, (tag, value) in orjson.loads(raw).items()}


def queue_row(pipe: redis.client.Pipeline, row: Row) -> None:
    """Leave the row for the waiting gateway and publish it on the run's channel, on the
    caller's pipeline (before the event: a follower has it when the event comes). The message
    is not logged: a follower that missed it reads the key."""
    raw = encode_row(row)
    if raw is not None:
        execution_id = str(row["id"])
        pipe.set(finished_row_key(execution_id), raw, ex=CARRIED_TTL_S)
        pipe.publish(events_channel(execution_id), ROW_MESSAGE + raw)


def row_in_message(data: bytes | str) -> bytes | None:
    """The carried row a message of a run's channel holds; None for an event."""
    raw = data.encode() if isinstance(data, str) else data
    return raw[len(ROW_MESSAGE) :] if raw.startswith(ROW_MESSAGE) else None


async def carried_row(client: aioredis.Redis, execution_id: str) -> Row | None:
    """The carried row of a finished execution, or None (read it from Postgres)."""
    try:
        raw = await client.get(finished_row_key(execution_id))
    except redis.RedisError:
        return None
    return decode_row(raw) if raw else None
