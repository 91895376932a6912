"""Per-key execution limits in Redis: submissions per minute and executions in flight.

Both are sorted sets checked and updated by one Lua script, so gateways racing on one
key never admit more than the limit. Per minute is a sliding log (score: submit time),
exact at any instant, not a fixed window that admits twice the rate across a boundary.
In flight holds one member per execution, scored with the time its slot lapses (its
timeout plus slack), so a slot whose release was lost frees itself. Finished executions
are not announced here: when the set is full, the gateway asks Postgres which of its
members have ended and drops those before answering 429 (see ``reserve``).
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import redis

from shared.auth.principal import Principal
from shared.errors import RateLimited
from shared.queues import executions_window_key, running_executions_key

WINDOW_S = 60
# A full concurrency set frees when one execution ends; that is not predictable, so the
# client is told to retry after a second.
CONCURRENCY_RETRY_S = 1
# An in-flight slot outlives its execution's timeout by this much (queueing, start-up).
SLOT_SLACK_S = 120

# KEYS: window, running. ARGV: per_min (-1: none), max_running (-1: none), member, hold_s.
# Returns {0, ""} admitted; {1, seconds} over the rate; {2, "id,id,..."} at the concurrency limit.
_RESERVE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local per_min = tonumber(ARGV[1])
local max_running = tonumber(ARGV[2])
local hold = tonumber(ARGV[4])
if per_min >= 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - 60)
  if redis.call('ZCARD', KEYS[1]) >= per_min then
    local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
    return {1, tostring(tonumber(oldest[2]) + 60 - now)}
  end
end
if max_running >= 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
  if redis.call('ZCARD', KEYS[2]) >= max_running then
    return {2, table.concat(redis.call('ZRANGE', KEYS[2], 0, -1), ',')}
  end
end
if per_min >= 0 then
  redis.call('ZADD', KEYS[1], now, ARGV[3])
  redis.call('EXPIRE', KEYS[1], 61)
end
if max_running >= 0 then
  redis.call('ZADD', KEYS[2], now + hold, ARGV[3])
  if redis.call('TTL', KEYS[2]) < hold + 1 then
    redis.call('EXPIRE', KEYS[2], math.ceil(hold) + 1)
  end
end
return {0, ''}
"""

# KEYS: running. ARGV: reservation member, execution id: the slot now names the execution.
_BIND = """
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if score then
  redis.call('ZREM', KEYS[1], ARGV[1])
  redis.call('ZADD', KEYS[1], score, ARGV[2])
end
return 0
"""


@dataclass(frozen=True, slots=True)
class Reservation:
    """A slot taken for one submission; bind it to the execution, or release it."""

    key_id: str  # the principal's ``limit_id``: its key, or its user
    member: str
    counted_rate: bool
    counted_running: bool


def limited(principal: Principal) -> bool:
    """Whether the principal has an execution limit to check at all."""
    return principal.limit_id is not None and (
        principal.executions_per_min is not None or principal.max_concurrent is not None
    )


def reserve(
    client: redis.Redis,
    *,
    principal: Principal,
    timeout_s: float,
    finished: Callable[[Sequence[str]], Sequence[str]],
) -> Reservation | None:
    """Take a slot for one execution of ``principal``'s key, or raise RateLimited.

    ``finished`` gets the ids in the concurrency set and returns those that have ended
    (a Postgres query); they are dropped and the check runs once more. None: no limits.
    """
    if not limited(principal):
        return None
    running = running_executions_key(principal.limit_id or "")
    member = str(uuid.uuid4())
    for attempt in range(2):
        outcome = reserved(
            principal, member, client.eval(*reserve_command(principal, timeout_s, member)[1:])
        )
        if not isinstance(outcome, list):
            return outcome
        done = list(finished(outcome)) if attempt == 0 else []
        if not done:
            break
        client.zrem(running, *done)
    raise at_capacity(principal)


def reserve_command(principal: Principal, timeout_s: float, member: str) -> tuple[Any, ...]:
    """The script call that takes ``member``'s slot (``reserve``; a limited principal), as a
    command a caller may send on its own round trip (``reserved`` reads its reply)."""
    owner = principal.limit_id
    assert owner is not None
    per_min, max_running = principal.executions_per_min, principal.max_concurrent
    return (
        "EVAL", _RESERVE, 2, executions_window_key(owner), running_executions_key(owner),
        per_min if per_min is not None else -1, max_running if max_running is not None else -1,
        member, timeout_s + SLOT_SLACK_S,
    )  # fmt: skip


def reserved(principal: Principal, member: str, reply: Any) -> Reservation | list[str]:
    """``reserve_command``'s reply: the slot taken, or the members of a full concurrency set
    (some may have ended: ``reserve`` asks); RateLimited over the rate."""
    code, detail = reply
    code = int(code)
    detail = detail.decode() if isinstance(detail, bytes) else str(detail)
    if code == 0:
        assert principal.limit_id is not None
        return Reservation(
            key_id=principal.limit_id,
            member=member,
            counted_rate=principal.executions_per_min is not None,
            counted_running=principal.max_concurrent is not None,
        )
    if code == 1:
        wait = max(1, math.ceil(float(detail)))
        raise RateLimited(
            f"this {_holder(principal)} may start {principal.executions_per_min} executions per "
            f"minute; retry after {wait} s",
            retry_after_s=wait,
            limit="executions_per_min",
        )
    return [m for m in detail.split(",") if m]


def at_capacity(principal: Principal) -> RateLimited:
    """The refusal of a key whose executions in flight are all running."""
    return RateLimited(
        f"this {_holder(principal)} may run {principal.max_concurrent} executions at once and all "
        f"are in flight; retry when one finishes (after {CONCURRENCY_RETRY_S} s)",
        retry_after_s=CONCURRENCY_RETRY_S,
        limit="max_concurrent",
    )


def _holder(principal: Principal) -> str:
    return "API key" if principal.key_id is not None else "user"


def bind(client: redis.Redis, *, reservation: Reservation, execution_id: str) -> None:
    """Name the in-flight slot after the execution, so finished ones can be found and dropped."""
    if reservation.counted_running:
        client.eval(  # type: ignore[misc]
            _BIND,
            1,
            running_executions_key(reservation.key_id),
            reservation.member,
            execution_id,
        )


def release(client: redis.Redis, *, reservation: Reservation) -> None:
    """Give the slot back: nothing started (invalid, or an idempotent repeat)."""
    with client.pipeline(transaction=False) as pipe:
        queue_release(pipe, reservation=reservation)
        pipe.execute()


def queue_release(pipe: Any, *, reservation: Reservation) -> None:
    """``release`` queued on ``pipe`` (a caller on the event loop sends it)."""
    if reservation.counted_rate:
        pipe.zrem(executions_window_key(reservation.key_id), reservation.member)
    if reservation.counted_running:
        pipe.zrem(running_executions_key(reservation.key_id), reservation.member)


def end(client: Any, *, reservation: Reservation) -> None:
    """The execution ended: its in-flight slot is free at once (its start still counts in the
    minute's window). On a pipeline (sync or async), queued with its other commands."""
    if reservation.counted_running:
        client.zrem(running_executions_key(reservation.key_id), reservation.member)
