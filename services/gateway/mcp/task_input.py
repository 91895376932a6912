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
        await upstream.answer_once(state.aredis, ClientReply(id=request.id, result=response))
        await state.aredis.hdel(client_key("task-asks", execution_id), key)
