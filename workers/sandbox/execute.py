"""One claimed execution, end to end on the worker: tool scope, sandbox run, store, publish."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import replace
from typing import Any

import psycopg
from redis.exceptions import RedisError

from shared import metrics, tool_ids
from shared.auth.audit import finish_audit
from shared.auth.grants import GRANT_RUN_SLACK_S, Grant, read_grant
from shared.cache import runs as cache_runs
from shared.capabilities.references import referenced_capabilities
from shared.capabilities.store import capabilities_by_name
from shared.config import Settings
from shared.errors import ErrorType, error_dict
from shared.events import bus
from shared.executions.cancel import wait_for_cancel
from shared.executions.events import FINISHED, publish_event
from shared.executions.status import ExecutionStatus
from shared.executions.store import finish_execution
from shared.queues import grant_key
from shared.rpc.client import RpcClient
from shared.rpc.protocol import ResourceRequest, RpcReply
from shared.sandbox.bridge import CapabilitySource, run_in_sandbox
from shared.sandbox.limits import SandboxLimits
from shared.sandbox.outcome import ExecutionOutcome
from shared.sandbox.tools import CURRENT_CALL_ID, ToolResult, ToolSpec
from shared.tools.store import list_tools
from workers.sandbox import resources
from workers.sandbox.retry import with_db_retry

log = logging.getLogger(__name__)
_rpc: RpcClient | None = None


class RpcToolBackend:
    """Tool calls of one execution over the Redis RPC channel (toolhost re-checks the scope)."""

    def __init__(self, *, client: RpcClient, execution_id: str, allowed: list[str]) -> None:
        self.client = client
        self.execution_id = execution_id
        self.allowed = allowed

    async def call(self, tool_id: str, args: dict[str, Any], deadline: float) -> ToolResult:
        reply = await self.client.call(
            execution_id=self.execution_id,
            tool=tool_id,
            args=args,
            deadline=deadline,
            allowed=self.allowed,
            trace_call_id=CURRENT_CALL_ID.get(),
        )
        return _result(reply)

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
        return _result(await self.client.resource(request))


def _result(reply: RpcReply) -> ToolResult:
    if reply.ok:
        return ToolResult.success(reply.result)
    assert reply.error is not None
    return ToolResult.failure(reply.error.message, kind=str(reply.error.type))


def rpc_client(settings: Settings) -> RpcClient:
    """The process's RPC client, bound to the worker's persistent event loop."""
    global _rpc
    if _rpc is None:
        _rpc = RpcClient(settings.require_urls()[1])
    return _rpc


def tool_scope(row: dict[str, Any], grant: Grant | None) -> tuple[dict[str, ToolSpec], list[str]]:
    """The execution's granted tools and every known tool id.

    Granted: the row's listed tools (every known tool when none was listed) that its grant
    record allows; no grant record (never written, or expired in the queue) grants nothing.
    """
    rows = with_db_retry(list_tools, what="load tools")
    listed = None if row["tools"] is None else set(row["tools"])
    granted = {
        r["id"]: ToolSpec(id=r["id"], description=r["description"], input_schema=r["input_schema"])
        for r in rows
        if grant is not None and (listed is None or r["id"] in listed) and grant.allows(r["id"])
    }
    return granted, [r["id"] for r in rows]


# Capabilities reachable from one execution's code (through nested calls) that are
# injected into the child; beyond this the code is refused rather than slowed down.
MAX_INJECTED_CAPABILITIES = 64


def capability_sources(row: dict[str, Any]) -> dict[str, CapabilitySource]:
    """The capabilities the code calls, and those they call, by name, for inline injection."""

    def load(conn: psycopg.Connection[dict[str, Any]]) -> dict[str, CapabilitySource]:
        wanted = referenced_capabilities(row["code"])
        found: dict[str, CapabilitySource] = {}
        while wanted and len(found) < MAX_INJECTED_CAPABILITIES:
            rows = capabilities_by_name(conn, tenant_id=row["tenant_id"], names=sorted(wanted))
            wanted = set()
            for cap in rows:
                found[cap["name"]] = CapabilitySource(id=str(cap["id"]), code=cap["code"])
                wanted |= referenced_capabilities(cap["code"])
            wanted -= set(found)
        return found

    return with_db_retry(load, what="load capabilities")


async def run_claimed_execution(*, row: dict[str, Any], settings: Settings) -> str:
    """Run a row already moved to `running`; store and announce its terminal state."""
    execution_id = str(row["id"])
    redis = resources.redis_client()
    grant = read_grant(redis, execution_id=execution_id)
    if grant is None:
        log.warning("execution %s has no tool grant record: it may call no tools", execution_id)
    else:  # the grant now lives as long as this run, not as long as a queue wait
        redis.expire(grant_key(execution_id), int(row["timeout_s"]) + GRANT_RUN_SLACK_S)
    tools, known = tool_scope(row, grant)
    cache = with_db_retry(  # nothing ran yet: waiting out a Postgres restart is safe
        lambda conn: cache_runs.prepare(conn, redis, row=row), what="prepare the result cache"
    )
    limits = SandboxLimits.from_settings(settings, wall_time_s=row["timeout_s"])

    def on_event(event: dict[str, Any]) -> None:
        publish_event(redis, execution_id=execution_id, event=event)

    started = time.monotonic()
    run = asyncio.ensure_future(
        run_in_sandbox(
            code=row["code"],
            args=row["args"],
            tools=tools,
            known_tools=known,
            backend=RpcToolBackend(
                client=rpc_client(settings), execution_id=execution_id, allowed=sorted(tools)
            ),
            limits=limits,
            on_event=on_event,
            capability_sources=capability_sources(row),
        )
    )
    watch = asyncio.ensure_future(
        wait_for_cancel(resources.async_redis_client(), execution_id=execution_id)
    )
    await asyncio.wait({run, watch}, return_when=asyncio.FIRST_COMPLETED)
    if not run.done() and watch.exception() is not None:
        # The watch broke (not a request): the run goes on, uncancellable but not killed.
        log.error("cancel watch of %s failed: %r", execution_id, watch.exception())
        await asyncio.wait({run})
    if run.done():
        watch.cancel()
        outcome = run.result()
    else:
        # Cancelling the bridge kills the sandbox's whole process tree (its `finally`).
        run.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await run
        outcome = ExecutionOutcome(
            status=ExecutionStatus.CANCELLED,
            error=error_dict(
                ErrorType.CANCELLED, "cancelled on request; tool calls already made are not undone"
            ),
            duration_ms=(time.monotonic() - started) * 1000,
        )  # fmt: skip
    try:
        redis.delete(grant_key(execution_id))  # runs never restart: the scope ends with this one
    except RedisError as exc:  # it expires by itself shortly after the run's deadline
        log.warning("could not drop the tool grant of %s: %s", execution_id, exc)
    finished = cache_runs.Finished(
        status=outcome.status,
        result=outcome.result,
        stdout=outcome.stdout,
        stdout_truncated=outcome.stdout_truncated,
        trace=outcome.trace,
    )
    # Before the execution is reported finished: what it wrote must not be read back stale.
    # Retried, else its servers' entries are blocked; if even that fails the run is stored as
    # failed (run_execution), never as a success whose writes may be read back stale.
    cache_runs.invalidate_writes(resources.db_pool().connection, redis, run=finished, cache=cache)
    status = store_outcome(execution_id=execution_id, outcome=outcome)
    with contextlib.suppress(RedisError):  # a lost sample must not fail a stored run
        metrics.record_run(
            redis, status=status, error=outcome.error, seconds=outcome.duration_ms / 1000
        )
    log.info("execution %s %s in %.0f ms", execution_id, status, outcome.duration_ms)
    remember_result(row=row, run=replace(finished, status=status), cache=cache, settings=settings)
    try:
        # `ts` (epoch seconds) lets a client or benchmark see when the end was announced.
        event = {"type": FINISHED, "status": outcome.status, "ts": time.time()}
        publish_event(redis, execution_id=execution_id, event=event)
    except RedisError as exc:  # waiting clients also poll the row
        log.warning("could not announce the end of %s: %s", execution_id, exc)
    bus.publish(
        redis,
        tenant_id=row["tenant_id"],
        type=bus.EventType.EXECUTION_FINISHED,
        data=bus.execution_finished({**row, "duration_ms": outcome.duration_ms}, status=status),
    )
    return outcome.status


def remember_result(
    *, row: dict[str, Any], run: cache_runs.Finished, cache: cache_runs.RunCache, settings: Settings
) -> None:
    """Cache the stored outcome where the rules allow; a failed capability run may end its
    cached results (three in a row). Never fails the execution: it is stored already."""
    redis = resources.redis_client()
    try:  # the pool rolls back a connection handed back mid-transaction (or drops a lost one)
        with resources.db_pool().connection() as conn:
            cache_runs.remember(conn, redis, row=row, run=run, cache=cache, settings=settings)
            if run.status != ExecutionStatus.SUCCEEDED:
                cache_runs.after_failure(conn, redis, row=row)
    except Exception:
        log.exception("caching the result of execution %s failed", row["id"])


def store_outcome(*, execution_id: str, outcome: ExecutionOutcome) -> str:
    """Write the terminal state; a result Postgres cannot hold (NaN, say) becomes an error.
    Returns the status stored."""
    fields: dict[str, Any] = {
        "status": outcome.status,
        "result": outcome.result,
        "error": outcome.error,
        "stdout": outcome.stdout,
        "stdout_truncated": outcome.stdout_truncated,
        "trace": outcome.trace,
        "duration_ms": outcome.duration_ms,
    }

    def store(conn: psycopg.Connection[dict[str, Any]]) -> None:
        try:
            finish_execution(conn, execution_id=execution_id, **fields)
        except (psycopg.DataError, ValueError) as exc:  # NaN; ints past 4300 digits
            conn.rollback()
            fields.update(
                status=ExecutionStatus.FAILED,
                result=None,
                error=error_dict(ErrorType.OUTPUT_LIMIT, f"result cannot be stored as JSON: {exc}"),
            )
            finish_execution(conn, execution_id=execution_id, **fields)
        # The audit row learns the tools called, in the transaction that ends the execution.
        finish_audit(conn, execution_id=execution_id, status=fields["status"], trace=outcome.trace)
        conn.commit()

    # Postgres down or restarting: the outcome waits here rather than being lost.
    with_db_retry(store, what="store")
    return str(fields["status"])
