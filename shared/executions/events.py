"""Execution events on Redis: progress, tool/capability start and end, `finished`, `learned`.

Each event gets a per-execution sequence number and is both published (live
subscribers) and appended to a capped, expiring log (late subscribers replay it, then
follow the live channel, skipping sequence numbers they have seen). One Lua call does
it all, so the log and the channel never disagree on order.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

import orjson
import redis
import redis.asyncio as aioredis

from shared.metrics import count_finished
from shared.queues import EVENTS_ALL_CHANNEL, events_channel, events_log_key, events_seq_key

FINISHED = "execution.finished"
LEARNED = "execution.learned"  # published by the learning worker after ingestion
# Its worker died and the run goes back to the queue (`"retry": "safe"`): `attempt` is the
# attempt about to start, `reason` why the last one was lost.
RETRIED = "execution.retried"
# Published by the toolhost: a downstream server's notifications/progress for one tool
# call, carrying the call's trace id (`call_id`), `tool`, `progress`, `total`, `message`.
TOOL_PROGRESS = "tool_progress"
# Published by the toolhost: a downstream server's notifications/message during a tool call
# (`call_id`, `tool`, `level`, `logger`, `message`: its data as text, capped and tokenised).
TOOL_LOG = "tool_log"
# Published by the toolhost: it refused a downstream server's request during a tool call
# (-32021) because the execution's MCP client did not declare ``capability`` (`sampling`,
# `elicitation`); a 2026-07-28 direct call answers with that error (services/gateway/mcp).
CLIENT_CAPABILITY_MISSING = "client_capability_missing"
# A downstream server answered a tool call with a task of its own (MCP Tasks): the run goes on
# while the toolhost waits on it, and the gateway answers its waiting client with a task.
DOWNSTREAM_TASK = "downstream_task"
# A capability named ``extension:<id>`` in a client_capability_missing event is an extension.
EXTENSION_PREFIX = "extension:"
# An execution makes at most ~1,000 tool calls (2 events each) plus progress reports.
LOG_MAX_EVENTS = 10_000
# Late subscribers may replay for this long after the last event.
LOG_TTL_S = 3600

_PUBLISH = """
local seq = redis.call('INCR', KEYS[1])
local payload = '{"seq":' .. seq .. ',' .. string.sub(ARGV[1], 2)
redis.call('RPUSH', KEYS[2], payload)
redis.call('LTRIM', KEYS[2], -tonumber(ARGV[2]), -1)
redis.call('EXPIRE', KEYS[1], ARGV[3])
redis.call('EXPIRE', KEYS[2], ARGV[3])
redis.call('PUBLISH', KEYS[3], payload)
if ARGV[4] == '1' then redis.call('PUBLISH', KEYS[4], payload) end
return seq
"""


def publish_event(client: redis.Redis, *, execution_id: str, event: dict[str, Any]) -> int:
    """Log and publish one event; returns its sequence number. Finish events also go global."""
    (seq,) = publish_events(client, events=[(execution_id, event)])
    return seq


def publish_events(
    client: redis.Redis, *, events: Sequence[tuple[str, dict[str, Any]]]
) -> list[int]:
    """``publish_event`` for many (execution id, event) pairs in one round trip."""
    pipe = client.pipeline(transaction=False)
    queue_events(pipe, events=events)
    return [int(seq) for seq in pipe.execute()[: len(events)]]


def queue_events(
    pipe: Any,
    *,
    events: Sequence[tuple[str, dict[str, Any]]],
) -> None:
    """``publish_events`` on the caller's pipeline, first on it (the results of its first
    ``len(events)`` commands are the sequence numbers), sent with its other commands."""
    for execution_id, event in events:
        _queue_publish(pipe, *_script_call(execution_id, event))
    finished = [e for _, e in events if e.get("type") == FINISHED]
    for event in finished:  # every path that ends an execution announces it, once
        count_finished(pipe, status=str(event.get("status")))


def _queue_publish(pipe: Any, keys: list[str], args: list[Any]) -> None:
    """The publish script queued on ``pipe`` (sync or async) by its text: EVAL costs no round
    trip of its own, where a registered script on a pipeline costs a SCRIPT EXISTS before
    every send (Redis keeps the compiled script by its hash either way)."""
    pipe.eval(_PUBLISH, len(keys), *keys, *args)


def _script_call(execution_id: str, event: dict[str, Any]) -> tuple[list[str], list[Any]]:
    """The publish script's keys and arguments for one event."""
    payload = orjson.dumps({"execution_id": execution_id, "ts": time.time(), **event})
    keys = [
        events_seq_key(execution_id),
        events_log_key(execution_id),
        events_channel(execution_id),
        EVENTS_ALL_CHANNEL,
    ]
    finished = "1" if event.get("type") == FINISHED else "0"
    return keys, [payload, LOG_MAX_EVENTS, LOG_TTL_S, finished]


class OrderedPublisher:
    """``publish_event`` for one execution's events from async code that must not wait on
    Redis (a sandbox's tool calls): each call queues its event and returns at once; one task
    sends them in the order given, whatever queued while a round trip was out going together
    on the next pipeline, so sequence numbers follow the order of the calls. The future a call
    returns ends when its event is published (``Trace.flush`` waits for them before the run
    ends, so `execution.finished` still comes last); a Redis error fails it (logged there).
    Not for `execution.finished` itself (``queue_events`` counts those).
    """

    def __init__(self, client: aioredis.Redis, execution_id: str) -> None:
        self._client = client
        self._execution_id = execution_id
        self._queued: list[tuple[tuple[list[str], list[Any]], asyncio.Future[None]]] = []
        self._sending = False
        self._sender: asyncio.Future[None] | None = None  # held: the loop keeps weak refs

    def __call__(self, event: dict[str, Any]) -> asyncio.Future[None]:
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queued.append((_script_call(self._execution_id, event), done))  # stamped now
        if not self._sending:
            self._sending = True
            self._sender = asyncio.ensure_future(self._send())
        return done

    async def flush(self, *, timeout_s: float = 1.0) -> None:
        """Wait (bounded) until every event queued so far is sent or failed."""
        if self._sender is not None and not self._sender.done():
            await asyncio.wait({self._sender}, timeout=timeout_s)

    async def _send(self) -> None:
        try:
            while self._queued:
                batch, self._queued = self._queued, []
                try:
                    pipe = self._client.pipeline(transaction=False)
                    for (keys, args), _ in batch:
                        _queue_publish(pipe, keys, args)
                    await pipe.execute()
                except Exception as exc:  # each waiting future reports it
                    for _, done in batch:
                        if not done.done():
                            done.set_exception(exc)
                    continue
                for _, done in batch:
                    if not done.done():
                        done.set_result(None)
        finally:
            self._sending = False


def decode_event(raw: bytes | str) -> dict[str, Any]:
    """One logged or published event."""
    event: dict[str, Any] = orjson.loads(raw)
    return event
