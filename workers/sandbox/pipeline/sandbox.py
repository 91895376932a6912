"""The run itself: the code in a sandbox child, its tool calls over RPC, a cancel watch.

The one async stage: it runs on the worker process's persistent event loop (the async
clients stay bound to it). A cancelled run is an outcome (`cancelled`) like any other.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import queue
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from redis.exceptions import RedisError

from shared import tool_ids
from shared.approvals.wait import await_answer
from shared.config import Settings
from shared.errors import ErrorType, error_dict
from shared.executions.cancel import wait_for_cancel
from shared.executions.events import OrderedPublisher
from shared.executions.status import ExecutionStatus
from shared.queues import grant_key
from shared.rpc.client import RpcClient
from shared.rpc.protocol import ResourceRequest
from shared.sandbox.bridge import run_in_sandbox
from shared.sandbox.limits import SandboxLimits
from shared.sandbox.outcome import ExecutionOutcome
from shared.sandbox.tools import CURRENT_APPROVAL, CURRENT_CALL_ID, ToolResult
from workers.sandbox import clients, parking
from workers.sandbox.pipeline import privacy
from workers.sandbox.pipeline.context import RunContext

log = logging.getLogger(__name__)
_rpc: RpcClient | None = None


class RpcToolBackend:
    """Tool calls of one execution over the Redis RPC channel (toolhost re-checks the scope).

    ``awaiting``: servers whose tools are not known until a person connects them; a call to
    one of theirs is in the scope (the grant still decides), and the toolhost answers it.
    """

    def __init__(
        self,
        *,
        client: RpcClient,
        execution_id: str,
        allowed: list[str],
        awaiting: frozenset[str] = frozenset(),
    ) -> None:
        self.client = client
        self.execution_id = execution_id
        self.allowed = allowed
        self.awaiting = awaiting

    async def call(self, tool_id: str, args: dict[str, Any], deadline: float) -> ToolResult:
        allowed = self.allowed
        if self.awaiting and tool_ids.parse(tool_id).server in self.awaiting:
            allowed = [*allowed, tool_id]
        reply = await self.client.call(
            execution_id=self.execution_id,
            tool=tool_id,
            args=args,
            deadline=deadline,
            allowed=allowed,
            trace_call_id=CURRENT_CALL_ID.get(),
            approval=CURRENT_APPROVAL.get(),
        )
        return ToolResult.of_reply(reply)

    async def await_answer(self, call_id: str, until: float) -> dict[str, Any] | None:
        """A person's answer to this run's paused call ``call_id`` (None: none by ``until``);
        meanwhile the run's place in its worker is given back (``parking``)."""
        with parking.parked():
            return await await_answer(
                clients.async_redis_client(), execution_id=self.execution_id, call_id=call_id,
                until=until,
            )  # fmt: skip

    async def read_resource(self, server: str, uri: str, deadline: float) -> ToolResult:
        """``mcp.<server>.read_resource(uri)``; the toolhost re-checks the server is in scope."""
        request = ResourceRequest(
            op="read_resource",
            execution_id=self.execution_id,
            server=server,
            uri=uri,
            deadline=deadline,
            allowed_servers=sorted({tool_ids.parse(t).server for t in self.allowed}),
        )
        return ToolResult.of_reply(await self.client.resource(request))


def rpc_client(settings: Settings) -> RpcClient:
    """The process's RPC client, bound to the worker's persistent event loop."""
    global _rpc
    if _rpc is None:
        _rpc = RpcClient(settings.require_urls()[1])
    return _rpc


def run_sandboxed(ctx: RunContext) -> None:
    """Run the code to its outcome (or to a cancel request); then its tool grant ends.

    The child is dead (killed) when the run returns; waiting for its end, removing its cgroup
    and making the next child wait in ``ctx.teardown`` until the outcome is announced
    (``release``)."""
    ctx.outcome = clients.event_loop().run_until_complete(_run_or_cancel(ctx, ctx.teardown))
    try:
        ctx.redis.delete(grant_key(ctx.execution_id))  # runs never restart: the scope ends here
    except RedisError as exc:  # it expires by itself shortly after the run's deadline
        log.warning("could not drop the tool grant of %s: %s", ctx.execution_id, exc)


def release(ctx: RunContext) -> None:
    """The run's teardown handed to the worker process's teardown thread, once its outcome is
    stored and announced: on two cores, the next child's fork raced the store, the announce
    and the gateway's answer, as it had raced the run when it was made during one."""
    steps, ctx.teardown = ctx.teardown, []
    if steps:
        _releaser.hand(steps)


class _Releaser:
    """The worker process's one teardown thread: each run's teardown is handed over with a
    queue put, done in order. A thread started per run cost the run itself its start:
    ``Thread.start`` waits until the new thread has run, on a loaded machine milliseconds
    between a run's end and its store (a third of a no-tool run's time in the worker)."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[list[Callable[[], None]]] = queue.SimpleQueue()
        self._pid: int | None = None

    def hand(self, steps: list[Callable[[], None]]) -> None:
        if self._pid != os.getpid():  # first use in this (forked pool) process
            self._queue, self._pid = queue.SimpleQueue(), os.getpid()
            thread = threading.Thread(
                target=self._loop, args=(self._queue,), name="sandbox-release", daemon=True
            )
            thread.start()
        self._queue.put(steps)

    @staticmethod
    def _loop(handed: queue.SimpleQueue[list[Callable[[], None]]]) -> None:
        while True:
            _run_all(handed.get())


_releaser = _Releaser()


def _run_all(steps: list[Callable[[], None]]) -> None:
    for step in steps:
        try:
            step()
        except Exception:  # the next spawn makes its child on demand; sweep_stale the cgroup
            log.exception("sandbox teardown failed")


async def _run_or_cancel(ctx: RunContext, teardown: list[Callable[[], None]]) -> ExecutionOutcome:
    execution_id = ctx.execution_id

    # Published in order without holding the run: a tool call's start and end events no
    # longer wait on Redis before its RPC goes out and before its reply reaches the child.
    publish = OrderedPublisher(clients.async_redis_client(), execution_id)

    def on_event(event: dict[str, Any]) -> Awaitable[None]:
        return publish(privacy.event_out(ctx, event))

    run = run_in_sandbox(
        code=ctx.row["code"],
        args=ctx.row["args"],
        tools=ctx.tools,
        known_tools=ctx.known_tools,
        awaiting_servers=ctx.awaiting_servers,
        backend=privacy.Detokenizing(
            RpcToolBackend(
                client=rpc_client(ctx.settings),
                execution_id=execution_id,
                allowed=sorted(ctx.tools),
                awaiting=ctx.awaiting_servers,
            ),
            ctx,
        ),
        limits=SandboxLimits.from_settings(ctx.settings, wall_time_s=ctx.row["timeout_s"]),
        on_event=on_event,
        capability_sources=ctx.capabilities,
        language="typescript" if ctx.row.get("language") == "typescript" else "python",
        teardown=teardown,  # the killed child's reaping and the next child: not awaited here
    )
    watch = wait_for_cancel(
        clients.async_redis_client(), clients.cancel_hub(), execution_id=execution_id
    )
    outcome = await unless_cancelled(run, watch, execution_id=execution_id)
    await publish.flush()  # a cancelled run's last events too, before its end is announced
    return outcome


async def unless_cancelled(
    run_code: Coroutine[Any, Any, ExecutionOutcome],
    cancel_watch: Coroutine[Any, Any, object],
    *,
    execution_id: str,
) -> ExecutionOutcome:
    """The run's outcome, or `cancelled` (the run killed) if the watch returns first.

    A watch that raises is no cancel request: the run goes on, uncancellable but not killed.
    """
    started = time.monotonic()
    run = asyncio.ensure_future(run_code)
    watch = asyncio.ensure_future(cancel_watch)
    await asyncio.wait({run, watch}, return_when=asyncio.FIRST_COMPLETED)
    if not run.done() and watch.exception() is not None:
        log.error("cancel watch of %s failed: %r", execution_id, watch.exception())
        await asyncio.wait({run})
    if run.done():
        watch.cancel()
        return run.result()
    # Cancelling the bridge kills the sandbox's whole process tree (its `finally`).
    run.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await run
    return ExecutionOutcome(
        status=ExecutionStatus.CANCELLED,
        error=error_dict(
            ErrorType.CANCELLED, "cancelled on request; tool calls already made are not undone"
        ),
        duration_ms=(time.monotonic() - started) * 1000,
    )  # fmt: skip
