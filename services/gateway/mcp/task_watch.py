"""Following a task as its run goes: its DetailedTask now, then again each time it changes
(its status, its status message, or the questions it waits on), until it ends.

Nothing polls the run's row on a timer while it is heard from: the row is read again when
the run's events say it ended or went back to the queue (``execution.finished``,
``execution.retried``, which every worker publishes), when it reports progress (the
task's status message), and when one of its tools asks its client something (a blocking
pop on the relay's queue; the question is kept as the task's, as ``tasks/get`` keeps it). A run silent for ``QUIET_S`` is read all the same: a worker that
died publishes nothing, and the read reaps it (``worker_lost``). ``tasks/result`` at
2025-11-25 and ``notifications/tasks`` on a 2026-07-28 listen stream both follow tasks so.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Any

from pydantic import ValidationError
from redis.exceptions import RedisError

from services.gateway.mcp import task_input
from services.gateway.mcp.tasks import SAID
from services.gateway.ops.execution_events import EventFollower
from services.gateway.ops.execution_reads import read_execution
from services.gateway.state import ASYNC_REDIS_SOCKET_TIMEOUT_S, GatewayState
from shared.executions.events import FINISHED, RETRIED
from shared.rpc import upstream

log = logging.getLogger(__name__)

TERMINAL = frozenset({"completed", "failed", "cancelled"})
# A run that published nothing for this long has its row read (a dead worker publishes
# nothing; the read reaps it).
QUIET_S = 2.0
# How long the question listener's BLPOP blocks: under the Redis client's socket timeout
# (a reply popped as the client gives up is lost).
_BLOCK_S = ASYNC_REDIS_SOCKET_TIMEOUT_S / 2

# The events after which the run is read again (progress: the task's status message).
_WAKING = frozenset({FINISHED, RETRIED, *SAID})
# TaskMethods.read (mcp/tasks.py): the DetailedTask of a task and its execution's row.
Read = Callable[[dict[str, Any], dict[str, Any]], Awaitable[dict[str, Any]]]


async def changes(
    state: GatewayState, read: Read, task: dict[str, Any], row: dict[str, Any]
) -> AsyncGenerator[tuple[dict[str, Any], dict[str, Any]]]:
    """The task's execution row and DetailedTask (``read(task, row)``) now, and each time its
    status or its open questions change, until a terminal one (the last yielded)."""
    execution_id = str(row["id"])
    tenant_id = str(task["tenant_id"])
    woken = asyncio.Event()
    async with EventFollower(state, execution_id=execution_id) as events:
        helpers = [
            asyncio.create_task(_on_events(events, woken)),
            asyncio.create_task(_on_questions(state, execution_id, woken)),
        ]
        try:
            last: tuple[str, str | None, tuple[str, ...]] | None = None
            while True:
                detailed = await read(task, row)
                seen = (
                    detailed["status"],
                    detailed.get("statusMessage"),
                    tuple(sorted(detailed.get("inputRequests") or {})),
                )
                if seen != last:
                    last = seen
                    yield row, detailed
                if detailed["status"] in TERMINAL:
                    return
                await woken.wait()
                woken.clear()
                row = await read_execution(state, execution_id=execution_id, tenant_id=tenant_id)
        finally:
            for helper in helpers:
                helper.cancel()
            for helper in helpers:
                with contextlib.suppress(asyncio.CancelledError):
                    await helper


async def _on_events(events: EventFollower, woken: asyncio.Event) -> None:
    """Wake the follower when the run ended, was re-queued or said how far it got (its
    status message), or after ``QUIET_S`` of silence."""
    while True:
        event = await events.next(timeout_s=QUIET_S)
        if event is None or event.get("type") in _WAKING:
            woken.set()


async def _on_questions(state: GatewayState, execution_id: str, woken: asyncio.Event) -> None:
    """Wake the follower when the run's tools ask its client something (kept as the task's
    open question, where ``tasks/get`` and ``tasks/update`` find it)."""
    while True:
        try:
            request = await upstream.next_request(
                state.aredis, execution_id=execution_id, timeout_s=_BLOCK_S
            )
            if request is not None:
                await task_input.park(state, [request])
                woken.set()
        except (RedisError, ValidationError) as exc:  # the quiet read still comes
            log.warning("task of execution %s: questions not heard: %s", execution_id, exc)
            await asyncio.sleep(1.0)
