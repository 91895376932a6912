"""Cancelling an execution: at once while queued; while running, by flagging its worker,
which kills the sandbox.

Callers: REST's ``POST /v1/executions/{id}/cancel``, and a direct MCP call
(``/mcp/servers``) whose client cancels it (``notifications/cancelled``). The MCP server has
no cancel tool (a run started with ``execute_code`` can be cancelled over REST by the same
tenant).
"""

from __future__ import annotations

from typing import Any

from anyio import to_thread

from services.gateway.ops.db import in_pool
from services.gateway.ops.execution_reads import load_execution
from services.gateway.ops.wait import wait_for_finish
from services.gateway.state import GatewayState
from shared.auth.audit import finish_audit
from shared.db import DictConnection
from shared.errors import Conflict, ErrorType, error_dict
from shared.executions.cancel import request_cancel
from shared.executions.events import FINISHED, publish_event
from shared.executions.status import TERMINAL, ExecutionStatus
from shared.executions.store import finish_execution

Row = dict[str, Any]

# How long ``wait`` gives a running execution's worker to kill the sandbox and store the end.
CANCEL_WAIT_S = 10.0


async def cancel_execution(
    state: GatewayState, *, execution_id: str, tenant_id: str, wait: bool = False
) -> Row:
    """The execution after asking it to stop: cancelled when it was queued; when running, as
    it is now (or, with ``wait``, once its worker ended it). Conflict when it already ended,
    NotFound for an unknown id or another tenant's. Not reaped on the way: a run whose worker
    died is flagged like a running one, and the reaper ends it."""
    row = await load_execution(state, execution_id=execution_id, tenant_id=tenant_id)
    if row["status"] in TERMINAL:
        raise Conflict(
            f"execution {execution_id} already ended as {row['status']}", status=row["status"]
        )
    finished = await in_pool(state, lambda conn: _cancel_queued(conn, execution_id))
    if finished is not None:
        await to_thread.run_sync(
            lambda: publish_event(
                state.redis,
                execution_id=execution_id,
                event={"type": FINISHED, "status": ExecutionStatus.CANCELLED},
            )
        )
        return finished
    # Running (or just claimed): the worker watching this flag kills the sandbox.
    await to_thread.run_sync(lambda: request_cancel(state.redis, execution_id=execution_id))
    if wait:
        return await wait_for_finish(state, execution_id=execution_id, timeout_s=CANCEL_WAIT_S)
    return await load_execution(state, execution_id=execution_id, tenant_id=tenant_id)


def _cancel_queued(conn: DictConnection, execution_id: str) -> Row | None:
    """Cancel a still-queued execution and close its audit row; None when it was not queued."""
    done = finish_execution(
        conn,
        execution_id=execution_id,
        status=ExecutionStatus.CANCELLED,
        error=error_dict(ErrorType.CANCELLED, "cancelled before it started"),
        from_statuses=(ExecutionStatus.QUEUED,),
    )
    if done is not None:
        finish_audit(conn, execution_id=execution_id, status=ExecutionStatus.CANCELLED, trace=[])
    return done
