"""Direct calls made as MCP tasks: the toolhost holds each one's lease while its server works,
watches for its cancellation, and records and announces its end itself.

A direct call a client made as a task (docs/mcp.md, "Long runs as tasks") has a running
executions row from its start and a lease (``shared.queues.direct_lease_key``) its gateway
set. The RPC request carries what its end needs (``RpcRequest.end``). Here, the lease is
taken over (``SET XX``: a lease that lapsed meanwhile means the reaper ended the task, and
the server is not called), refreshed every ``RENEW_EVERY_S`` with the cancel flag read on
the same round trip (``tasks/cancel`` sets it: the call is cancelled, which cancels its
server's request and a server's own task), and the end goes through the direct call's one
end (``shared.direct.finish``: privacy, cache invalidation, the executions and audit rows
written to Postgres, the end announced) before the reply goes back. The gateway that started
the call may be gone by then: its task still ends, read from any replica. If this toolhost
dies, the lease lapses within ``LEASE_TTL_S`` and the reaper ends the task ``worker_lost``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import redis
import redis.asyncio as aioredis
from redis.exceptions import RedisError

from shared.config import Settings
from shared.direct import finish
from shared.errors import ErrorType, error_dict
from shared.executions.trace import TraceRecorder
from shared.queues import cancel_key, direct_lease_key
from shared.rpc.protocol import RpcReply, RpcRequest
from shared.sandbox.bridge import served
from shared.sandbox.limits import SandboxLimits
from shared.sandbox.tools import ToolResult

log = logging.getLogger(__name__)

# The lease outlives three missed renewals; the reaper confirms a lapse over its own beat,
# so a task whose toolhost died reads worker_lost within ~10 s.
LEASE_TTL_S = 3
RENEW_EVERY_S = 1.0
# The call's id in its trace (one line of code, one call: as ``ops/direct_call.py`` names it).
CALL_ID = "call-1"


@dataclass(frozen=True)
class TaskEnds:
    """The stores a task's end is written to (``finish.Backends``)."""

    settings: Settings
    pool: Any  # psycopg pool
    redis: redis.Redis
    aredis: aioredis.Redis

    async def run(
        self, request: RpcRequest, execute: Callable[[], Awaitable[RpcReply]]
    ) -> RpcReply:
        """Run the task's call (``execute``) under its lease, then record its end."""
        assert request.end is not None
        try:
            end = finish.CallEnd.of_wire(request.end)
        except (KeyError, TypeError, ValueError) as exc:
            return RpcReply.failure(
                call_id=request.call_id,
                type=ErrorType.INVALID_REQUEST,
                message=f"invalid task end: {exc}",
            )
        lease = direct_lease_key(end.execution_id)
        pipe = self.aredis.pipeline(transaction=False)
        pipe.set(lease, "toolhost", xx=True, ex=LEASE_TTL_S)
        pipe.exists(cancel_key(end.execution_id))
        taken, flagged = await pipe.execute()
        if not taken:
            return RpcReply.failure(  # its task ended already (the reaper)
                call_id=request.call_id,
                type=ErrorType.WORKER_LOST,
                message=f"{request.tool}: its task ended before the call started; not called",
            )
        recorder = TraceRecorder(None)
        recorder.tool_start(CALL_ID, request.tool, None)
        started = time.monotonic()
        call: asyncio.Future[RpcReply]
        if flagged:  # cancelled while it waited (for approval, say): never called
            call = asyncio.get_running_loop().create_future()
            call.cancel()
        else:
            call = asyncio.ensure_future(execute())
        keeper = asyncio.ensure_future(self._keep(lease, end.execution_id, call))
        try:
            try:
                await asyncio.shield(call)
            except asyncio.CancelledError:
                if not call.cancelled():  # this toolhost stopping: the lease lapses, the
                    call.cancel()  # reaper ends the task worker_lost
                    raise
            paused = None if call.cancelled() else _paused_until(call.result())
            if paused is not None:  # the gateway waits for the answer, then sends it again
                with contextlib.suppress(RedisError):
                    await self.aredis.set(lease, "approval", ex=max(1, int(paused - time.time())))
                return call.result()
        finally:
            keeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await keeper
        duration_ms = (time.monotonic() - started) * 1000
        if call.cancelled():  # tasks/cancel, or this toolhost stopping
            reply = RpcReply.failure(
                call_id=request.call_id, type=ErrorType.CANCELLED, message="cancelled on request"
            )
            recorder.tool_end(CALL_ID, error_dict(ErrorType.CANCELLED, "cancelled on request"))
            outcome = finish.cancelled_outcome(recorder.events, duration_ms)
            value: Any = None
        else:
            reply = call.result()
            limits_ = SandboxLimits.from_settings(self.settings, wall_time_s=end.timeout_s)
            err, _ = served(ToolResult.of_reply(reply), limits=limits_)
            value = reply.result if err is None else None
            recorder.tool_end(CALL_ID, err)
            outcome = finish.outcome_of(end, err, value, recorder.events, duration_ms)
        tok = finish.tokenizer(self.settings, end)
        try:
            await finish.finish(self, end, outcome, tok, set(end.unresolved), value, durable=True)
        except Exception:  # the lease lapses: the reaper ends the task worker_lost
            log.exception("direct task %s: its end was not recorded", end.execution_id)
        else:
            with contextlib.suppress(RedisError):
                await self.aredis.delete(lease)
        return reply

    async def _keep(self, lease: str, execution_id: str, call: asyncio.Future[Any]) -> None:
        """Renew the lease while the call runs; cancel the call when its task is cancelled."""
        while not call.done():
            await asyncio.sleep(RENEW_EVERY_S)
            try:
                pipe = self.aredis.pipeline(transaction=False)
                pipe.set(lease, "toolhost", ex=LEASE_TTL_S)
                pipe.exists(cancel_key(execution_id))
                _, flagged = await pipe.execute()
            except RedisError as exc:  # renewed at the next beat, before the lease lapses
                log.warning("direct task %s: lease not renewed: %s", execution_id, exc)
                continue
            if flagged and not call.done():
                log.info("direct task %s: cancelled by its client", execution_id)
                call.cancel()


def _paused_until(reply: RpcReply) -> float | None:
    """When a call paused for a person's approval stops waiting (None: not paused)."""
    error = reply.error
    if error is None or error.type != ErrorType.APPROVAL_REQUIRED or error.approval is None:
        return None
    return float(error.approval.get("expires_at") or time.time()) + 5.0
