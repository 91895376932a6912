"""Async client of the RPC channel, used by the sandbox bridge: push a call, wait for its reply.

At-most-once: a request is pushed exactly once and never retried. If no reply arrives by
the deadline the caller gets a ``timeout`` error; the late reply, if any, expires on its
own key (settings.rpc_reply_ttl_s). While waiting, the caller checks every
``CHECK_EVERY_S`` that the replica which claimed the call still beats: a toolhost killed
mid-call ends the call at once as ``tool_unavailable`` (it may have run; not replayed).
A call that finds all ``max_connections`` busy until its deadline is not sent at all
(``timeout``, saying so).
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from redis.exceptions import RedisError

from shared.errors import ErrorType
from shared.queues import HEARTBEAT_PREFIX, RPC_REQUESTS, rpc_claim_key, rpc_reply_key
from shared.rpc.protocol import (
    ResourceRequest,
    RpcReply,
    RpcRequest,
    decode_reply,
    encode,
)
from shared.rpc.wire import Command, Lines, NoFreeLine, raise_refused
from shared.telemetry import inject

# Extra wait beyond the deadline so the toolhost's own `timeout` reply (which names where
# the time went) usually wins the race against the client's synthesized one.
REPLY_GRACE_S = 0.2
# Redis rounds BLPOP timeouts to milliseconds and treats 0 as "forever": never send less.
MIN_BLOCK_S = 0.01
# A reply not back after this long makes the caller look at the claiming replica's
# heartbeat, then wait this long again; most calls answer within the first wait.
CHECK_EVERY_S = 1.0


@dataclass
class Ahead:
    """Commands a caller sends on a call's own round trip, ahead of its push (a direct call's
    grant, which the toolhost reads when it takes the call): ``replies`` once that round trip
    answered (None: never answered), ``tried`` once it was written (perhaps run)."""

    commands: list[Command]
    replies: list[Any] | None = None
    tried: bool = field(default=False)

    def written(self) -> None:
        self.tried = True


class RpcClient:
    """Sends tool calls to the toolhosts over Redis; one instance per process, many calls at once."""

    def __init__(self, redis_url: str, *, max_connections: int = 64) -> None:
        # Each in-flight call holds one connection while it blocks on its reply key, so
        # ``max_connections`` bounds concurrent calls; extra callers wait for a free one.
        # No timeout (BLPOP carries its own) and no retries (at-most-once).
        self._lines = Lines(redis_url, timeout_s=None, max_connections=max_connections)

    async def __aenter__(self) -> RpcClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close every idle connection."""
        await self._lines.aclose()

    async def call(
        self,
        *,
        execution_id: str,
        tool: str,
        args: dict[str, Any],
        deadline: float,
        allowed: list[str] | None = None,
        call_id: str | None = None,
        trace_call_id: str | None = None,
        approval: str | None = None,
        end: dict[str, Any] | None = None,
        ahead: Ahead | None = None,
    ) -> RpcReply:
        """Run ``tool`` (``server:tool``) with ``args`` before ``deadline`` (Unix time); never
        raises. ``end``: a direct task's call, whose end the toolhost records (protocol.py);
        ``ahead``: commands sent before the push, on the same round trip."""
        call_id = call_id or uuid.uuid4().hex
        started = time.monotonic()
        if allowed is not None and tool not in allowed:
            return _fail(
                call_id,
                started,
                ErrorType.TOOL_NOT_ALLOWED,
                f"{tool} is not in this execution's tool scope",
            )
        try:
            payload = encode(
                RpcRequest(
                    call_id=call_id,
                    execution_id=execution_id,
                    tool=tool,
                    args=args,
                    deadline=deadline,
                    allowed=allowed,
                    trace_call_id=trace_call_id,
                    otel=inject(),
                    approval=approval,
                    end=end,
                )
            )
        except ValueError as exc:  # pydantic's ValidationError or an unserializable arg
            return _fail(
                call_id, started, ErrorType.INVALID_REQUEST, f"invalid call to {tool}: {exc}"
            )
        return await self._roundtrip(payload, call_id, deadline, started, tool, ahead)

    async def resource(self, request: ResourceRequest) -> RpcReply:
        """A resources operation (read one, list them, list templates) served by a toolhost; never raises."""
        label = f"{request.op} on {request.server or 'every server'}"
        return await self._roundtrip(
            encode(request), request.call_id, request.deadline, time.monotonic(), label
        )

    async def _roundtrip(
        self,
        payload: bytes,
        call_id: str,
        deadline: float,
        started: float,
        label: str,
        ahead: Ahead | None = None,
    ) -> RpcReply:
        """Push ``payload`` once (``ahead``'s commands first) and wait for its reply until
        ``deadline``."""
        remaining = deadline - time.time()
        if remaining <= 0:
            return _fail(
                call_id, started, ErrorType.TIMEOUT, f"deadline passed before {label} was sent"
            )

        # One round trip: a non-transactional pipeline sends RPUSH and BLPOP together; Redis
        # runs the push, then blocks this connection on the reply key (BLPOP outside MULTI).
        # The wait is sliced: between slices, a call whose toolhost replica died ends at once.
        key = rpc_reply_key(call_id)
        first = ahead.commands if ahead is not None else []
        try:
            replies = await self._lines.send(
                *first,
                ("RPUSH", RPC_REQUESTS, payload),  # toolhosts BLPOP: oldest call first
                ("BLPOP", key, _block_for(deadline)),
                wait_s=max(0.0, deadline - time.time()),
                on_write=None if ahead is None else ahead.written,
            )
            if ahead is not None:  # refused ones come back as errors: their caller judges
                ahead.replies = replies[: len(first)]
            pushed, popped = replies[len(first) :]
            raise_refused(pushed, popped)
            while popped is None and time.time() < deadline + REPLY_GRACE_S:
                lost = await self._claimant_gone(call_id)
                if lost:
                    return _fail(
                        call_id,
                        started,
                        ErrorType.TOOL_UNAVAILABLE,
                        f"the toolhost running {label} stopped ({lost}); the call may have run "
                        "and is not retried",
                    )
                (popped,) = await self._lines.send(("BLPOP", key, _block_for(deadline)))
                raise_refused(popped)
        except NoFreeLine:
            return _fail(
                call_id,
                started,
                ErrorType.TIMEOUT,
                f"every RPC connection stayed busy until the deadline; {label} was not sent",
            )
        except RedisError as exc:
            # The push may or may not have happened; retrying could run the tool twice.
            return _fail(
                call_id,
                started,
                ErrorType.TOOL_UNAVAILABLE,
                f"RPC channel unavailable (Redis: {exc}); {label} may or may not have run "
                "and is not retried",
            )
        if popped is None:
            return _fail(
                call_id,
                started,
                ErrorType.TIMEOUT,
                f"no reply from a toolhost for {label} before the deadline",
            )
        try:
            return decode_reply(popped[1])
        except ValueError as exc:
            return _fail(
                call_id, started, ErrorType.INTERNAL_ERROR, f"malformed reply for {label}: {exc}"
            )

    async def _claimant_gone(self, call_id: str) -> str | None:
        """Why the replica that popped this call is gone, or None (alive, or not popped yet)."""
        (claimant,) = await self._lines.send(("GET", rpc_claim_key(call_id)))
        raise_refused(claimant)
        if claimant is None or (await self._lines.send(("EXISTS", claimant)))[0] == 1:
            return None
        name = claimant.decode() if isinstance(claimant, bytes) else str(claimant)
        return f"no heartbeat from {name.removeprefix(HEARTBEAT_PREFIX)}"


def _block_for(deadline: float) -> float:
    """The next BLPOP wait: until the deadline (plus grace), at most ``CHECK_EVERY_S``."""
    remaining = deadline - time.time() + REPLY_GRACE_S
    return max(MIN_BLOCK_S, min(CHECK_EVERY_S, remaining))


def _fail(call_id: str, started: float, kind: ErrorType, message: str) -> RpcReply:
    elapsed = (time.monotonic() - started) * 1000
    return RpcReply.failure(call_id=call_id, type=kind, message=message, duration_ms=elapsed)
