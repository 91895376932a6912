"""The relay for server-to-client requests: a downstream server asks for sampling or elicitation mid-call.

The toolhost holds the downstream session but not the client that started the
execution; the gateway process serving that client's ``execute_code`` does. The gateway
advertises what its client can answer under the execution's capabilities key, pops
requests from the execution's request list and pushes each answer on a per-request
reply key. Nobody advertising means nobody listens (REST callers, a client without the
capability, a finished call): the toolhost then refuses at once instead of waiting.
"""

from __future__ import annotations

import time
import uuid
from typing import Any, Literal

import orjson
import redis.asyncio as aioredis
from pydantic import BaseModel, ConfigDict, Field

from shared.queues import client_key
from shared.rpc.protocol import CALL_ID_PATTERN

# MCP Tasks (SEP-2663): advertised among a client's capabilities, ``tasks`` says its run may
# wait on a downstream server's task (the toolhost then declares the extension downstream).
TASKS = "tasks"
TASKS_EXTENSION = "io.modelcontextprotocol/tasks"

# Advertised beside ``elicitation`` when the client takes URL-mode elicitation (2025-11-25):
# the toolhost then asks a person to connect a server through it (services/toolhost/connect_ask.py).
URL_ELICITATION = "elicitation.url"

RelayedMethod = Literal["sampling/createMessage", "elicitation/create", "roots/list"]
# The client capability each relayed method needs (MCP's ClientCapabilities field). roots/list
# is relayed only from a 2026-07-28 server's InputRequiredResult (a 2025-11-25 server's bare
# roots/list is answered from the configured roots: services/toolhost/upstream.py).
CAPABILITY_OF: dict[str, str] = {
    "sampling/createMessage": "sampling",
    "elicitation/create": "elicitation",
    "roots/list": "roots",
}
# Redis rounds BLPOP timeouts to milliseconds and treats 0 as "forever": never send less.
_MIN_BLOCK_S = 0.01


class ClientRequest(BaseModel):
    """One request a downstream server sent during a tool call of ``execution_id``."""

    model_config = ConfigDict(extra="forbid")

    v: Literal[1] = 1
    id: str = Field(pattern=CALL_ID_PATTERN)
    execution_id: str = Field(min_length=1, max_length=64)
    method: RelayedMethod
    params: dict[str, Any]
    server: str
    tool: str | None = None  # the `server:tool` being called, when known
    trace_call_id: str | None = None
    # The server's own key for this question, when it asked in an InputRequiredResult
    # (2026-07-28): a 2026-07-28 client is asked under it rather than under ``id``.
    key: str | None = Field(default=None, min_length=1, max_length=200)
    # The questions one InputRequiredResult asked together share ``batch``; ``batch_size`` is
    # how many there are, so the gateway hands them to its client in one round.
    batch: str | None = Field(default=None, max_length=64)
    batch_size: int = Field(default=1, ge=1, le=64)
    # Asked by the server's own task (MCP Tasks), which the gateway's task then shows as
    # ``input_required`` instead of ending the client's call with the question.
    task: bool = False
    deadline: float = Field(gt=0, description="absolute Unix time after which nobody waits")


class ClientError(BaseModel):
    """A JSON-RPC error for the downstream server (its code and message)."""

    model_config = ConfigDict(extra="forbid")

    code: int
    message: str


class ClientReply(BaseModel):
    """The client's answer: ``result`` (the MCP result object) or ``error``."""

    model_config = ConfigDict(extra="forbid")

    id: str
    result: dict[str, Any] | None = None
    error: ClientError | None = None

    @classmethod
    def refusal(cls, request_id: str, code: int, message: str) -> ClientReply:
        """An error answer."""
        return cls(id=request_id, error=ClientError(code=code, message=message))


def new_request_id() -> str:
    """A fresh relay request id."""
    return uuid.uuid4().hex


async def advertise(
    redis: aioredis.Redis, *, execution_id: str, capabilities: list[str], ttl_s: float
) -> None:
    """Say which relayed capabilities the client of ``execution_id`` has (while it listens)."""
    await queue_advertise(redis, execution_id=execution_id, capabilities=capabilities, ttl_s=ttl_s)


def queue_advertise(redis: Any, *, execution_id: str, capabilities: list[str], ttl_s: float) -> Any:
    """``advertise``'s command, on a client (awaitable) or queued on a pipeline."""
    return redis.set(
        advertised_key(execution_id),
        orjson.dumps(sorted(capabilities)),
        ex=int(ttl_s) + 1,
    )


async def withdraw(redis: aioredis.Redis, *, execution_id: str) -> None:
    """Nobody listens for ``execution_id`` any more: later requests are refused at once."""
    await queue_withdraw(redis, execution_id=execution_id)


def queue_withdraw(redis: Any, *, execution_id: str) -> Any:
    """``withdraw``'s command, on a client (awaitable) or queued on a pipeline."""
    return redis.delete(advertised_key(execution_id))


async def advertised(redis: aioredis.Redis, *, execution_id: str) -> list[str] | None:
    """The capabilities advertised for ``execution_id``; None when nobody listens."""
    return advertised_of(await redis.get(advertised_key(execution_id)))


def advertised_key(execution_id: str) -> str:
    """Where the capabilities advertised for ``execution_id`` are (``advertise``)."""
    return client_key("capabilities", execution_id)


def advertised_of(raw: bytes | str | None) -> list[str] | None:
    """``advertised`` of the value read at ``advertised_key`` (None: nobody listens)."""
    if raw is None:
        return None
    value = orjson.loads(raw)
    return [str(v) for v in value] if isinstance(value, list) else None


async def ask(redis: aioredis.Redis, request: ClientRequest) -> ClientReply | None:
    """Push ``request`` for the listening gateway and wait for its reply; None at the deadline."""
    remaining = request.deadline - time.time()
    if remaining <= 0:
        return None
    async with redis.pipeline(transaction=True) as pipe:
        pipe.rpush(client_key("requests", request.execution_id), request.model_dump_json())
        pipe.expire(client_key("requests", request.execution_id), int(remaining) + 1)
        await pipe.execute()
    popped = await redis.blpop(
        [client_key("reply", request.id)], timeout=max(_MIN_BLOCK_S, remaining)
    )
    if popped is None:
        return None
    return ClientReply.model_validate_json(popped[1])


async def next_request(
    redis: aioredis.Redis, *, execution_id: str, timeout_s: float
) -> ClientRequest | None:
    """The next request for ``execution_id``'s client, or None when none came within ``timeout_s``."""
    popped = await redis.blpop(
        [client_key("requests", execution_id)], timeout=max(_MIN_BLOCK_S, timeout_s)
    )
    if popped is None:
        return None
    return ClientRequest.model_validate_json(popped[1])


async def answer(redis: aioredis.Redis, reply: ClientReply, *, ttl_s: int = 60) -> None:
    """Deliver ``reply``; it expires unread if the toolhost gave up waiting."""
    key = client_key("reply", reply.id)
    async with redis.pipeline(transaction=True) as pipe:
        pipe.rpush(key, reply.model_dump_json())
        pipe.expire(key, ttl_s)
        await pipe.execute()


async def answer_once(redis: aioredis.Redis, reply: ClientReply, *, ttl_s: int = 600) -> bool:
    """Deliver ``reply`` unless this request was answered already (a client's repeated
    retry); True when delivered."""
    if not await redis.set(client_key("answered", reply.id), 1, nx=True, ex=ttl_s):
        return False
    await answer(redis, reply)
    return True


async def drain(
    redis: aioredis.Redis, *, execution_id: str, limit: int = 16
) -> list[ClientRequest]:
    """The requests for ``execution_id``'s client already waiting (up to ``limit``), without blocking."""
    popped: list[bytes] | None = await redis.lpop(client_key("requests", execution_id), limit)  # type: ignore[assignment]  # a list when given a count
    return [ClientRequest.model_validate_json(raw) for raw in popped or []]
