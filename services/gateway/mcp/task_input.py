"""A task's questions (MCP Tasks ``input_required``): what a run's tools ask while no client
waits on the call, kept until ``tasks/update`` answers them.

A run that became a task keeps its client's capabilities advertised (passthrough.py), so
its tools' sampling and elicitation requests still reach the relay's queue. Nobody pops
them there any more: each ``tasks/get`` moves them into a hash per execution, keyed as the
client sees them (the server's own key, else the relay request id), and answers
``input_required`` with every open one as ``inputRequests``. ``tasks/update`` hands each
answer to its waiting tool (once: a repeated update delivers nothing twice) and removes the
question; answers to keys that are not open are ignored, as SEP-2663 asks.
"""

from __future__ import annotations

import contextvars
import dataclasses
import logging
import time
from typing import Any

from pydantic import ValidationError
from redis.exceptions import RedisError

from services.gateway.state import GatewayState
from shared.queues import client_key
from shared.rpc import upstream
from shared.rpc.upstream import ClientReply, ClientRequest

log = logging.getLogger(__name__)


@dataclasses.dataclass
class Requested:
    """A 2025-11-25 task-augmented ``tools/call`` (``params.task``, legacy_tasks.py): the
    lifetime asked for, and the task the call made (answered as ``CreateTaskResult``). While
    it is set, the run's questions are not put to the call's stream: they wait for the task
    (its ``tasks/result``), as the spec's ``input_required`` has it."""

    ttl_ms: int | None
    task: dict[str, Any] | None = None


# Set around a 2025-11-25 task-augmented tools/call by legacy_tasks.py's middleware.
requested: contextvars.ContextVar[Requested | None] = contextvars.ContextVar(
    "agentcards_mcp_task_requested", default=None
)


def key_of(request: ClientRequest) -> str:
    """The key a client answers ``request`` under."""
    return request.key or request.id


async def park(state: GatewayState, requests: list[ClientRequest]) -> None:
    """Keep ``requests`` as open questions of their execution's task (until their deadline)."""
    if not requests:
        return
    key = client_key("task-asks", requests[0].execution_id)
    until = max(r.deadline for r in requests)
    async with state.aredis.pipeline(transaction=True) as pipe:
        pipe.hset(key, mapping={key_of(r): r.model_dump_json() for r in requests})
        pipe.expire(key, max(1, int(until - time.time()) + 1))
        await pipe.execute()


async def open_questions(state: GatewayState, execution_id: str) -> dict[str, ClientRequest]:
    """The task's open questions by key: those queued for its client since the last read
    parked first, those whose tool stopped waiting left out."""
    try:
        await park(state, await upstream.drain(state.aredis, execution_id=execution_id))
        raw = await state.aredis.hgetall(client_key("task-asks", execution_id))
    except (RedisError, ValidationError) as exc:  # read as working; the next get sees them
        log.warning("task questions of execution %s not read: %s", execution_id, exc)
        return {}
    now = time.time()
    questions = {}
    for field, value in raw.items():
        request = ClientRequest.model_validate_json(value)
        if request.deadline > now:
            questions[field.decode() if isinstance(field, bytes) else str(field)] = request
    return questions


async def answer(state: GatewayState, execution_id: str, responses: dict[str, Any]) -> None:
    """Each answer of ``responses`` to the open question it is keyed by (others ignored)."""
    if not responses:
        return
    questions = await open_questions(state, execution_id)
    for key, response in responses.items():
        request = questions.get(key)
        if request is None or not isinstance(response, dict):
            continue
        await deliver(state, execution_id, key, ClientReply(id=request.id, result=response))


async def deliver(state: GatewayState, execution_id: str, key: str, reply: ClientReply) -> None:
    """The client's reply to the open question ``key`` to its waiting tool (once)."""
    await upstream.answer_once(state.aredis, reply)
    await state.aredis.hdel(client_key("task-asks", execution_id), key)
