"""One claimed execution, end to end on the worker: tool scope, sandbox run, store, publish."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any

import psycopg

from shared import tool_ids
from shared.capabilities.references import referenced_capabilities
from shared.capabilities.store import capabilities_by_name
from shared.config import Settings
from shared.errors import ErrorType, error_dict
from shared.executions.cancel import wait_for_cancel
from shared.executions.events import FINISHED, publish_event
from shared.executions.status import ExecutionStatus
from shared.executions.store import finish_execution
from shared.rpc.client import RpcClient
from shared.rpc.protocol import ResourceRequest, RpcReply
from shared.sandbox.bridge import CapabilitySource, run_in_sandbox
from shared.sandbox.limits import SandboxLimits
from shared.sandbox.outcome import ExecutionOutcome
from shared.sandbox.tools import CURRENT_CALL_ID, ToolResult, ToolSpec
from shared.tools.store import get_tools, list_tools
from workers.sandbox import resources

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


def granted_tools(row: dict[str, Any]) -> dict[str, ToolSpec]:
    """The execution's tool scope: the listed tools, or every known tool when none was listed."""
    with resources.db_pool().connection() as conn:
        if row["tools"] is None:
            rows = list_tools(conn)
        else:
            rows = list(get_tools(conn, ids=row["tools"]).values())
    return {
        r["id"]: ToolSpec(id=r["id"], description=r["description"], input_schema=r["input_schema"])
        for r in rows
    }


# Capabilities reachable from one execution's code (through nested calls) that are
# injected into the child; beyond this the code is refused rather than slowed down.
MAX_INJECTED_CAPABILITIES = 64


def capability_sources(row: dict[str, Any]) -> dict[str, CapabilitySource]:
    """The capabilities the code calls, and those they call, by name, for inline injection."""
    wanted = referenced_capabilities(row["code"])
    found: dict[str, CapabilitySource] = {}
    with resources.db_pool().connection() as conn:
        while wanted and len(found) < MAX_INJECTED_CAPABILITIES:
            rows = capabilities_by_name(conn, tenant_id=row["tenant_id"], names=sorted(wanted))
            wanted = set()
            for cap in rows:
                found[cap["name"]] = CapabilitySource(id=str(cap["id"]), code=cap["code"])
                wanted |= referenced_capabilities(cap["code"])
            wanted -= set(found)
    return found


async def run_claimed_execution(*, row: dict[str, Any], settings: Settings) -> str:
    """Run a row already moved to `running`; store and announce its terminal state."""
    execution_id = str(row["id"])
    redis = resources.redis_client()
    tools = granted_tools(row)
    limits = SandboxLimits.from_settings(settings, wall_time_s=row["timeout_s"])

    def on_event(event: dict[str, Any]) -> None:
        publish_event(redis, execution_id=execution_id, event=event)

    started = time.monotonic()
    run = asyncio.ensure_future(
        run_in_sandbox(
            code=row["code"],
            args=row["args"],
            tools=tools,
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
    store_outcome(execution_id=execution_id, outcome=outcome)
    publish_event(
        redis, execution_id=execution_id, event={"type": FINISHED, "status": outcome.status}
    )
    return outcome.status


def store_outcome(*, execution_id: str, outcome: ExecutionOutcome) -> None:
    """Write the terminal state; a result Postgres cannot hold (NaN, say) becomes an error."""
    fields: dict[str, Any] = {
        "status": outcome.status,
        "result": outcome.result,
        "error": outcome.error,
        "stdout": outcome.stdout,
        "stdout_truncated": outcome.stdout_truncated,
        "trace": outcome.trace,
        "duration_ms": outcome.duration_ms,
    }
    with resources.db_pool().connection() as conn:
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
        conn.commit()
