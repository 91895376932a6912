"""MCP's ``-32021`` (2026-07-28): a call failed because its tool's server asked the client for
a capability (sampling, elicitation, roots) the client did not declare.

The toolhost refuses such a request and records a ``client_capability_missing`` event on the
run (services/toolhost/upstream.py). A call whose run then failed is answered with the error
the server's own endpoint would give, not with the failure the refusal caused: a direct call
(``/mcp/servers/<name>``, ``/mcp`` in direct or both mode) and a code-mode run
(``execute_code``, ``execute_capability``) alike. A run whose code caught the refusal and
succeeded is its own result; a 2025-11-25 client keeps the tool's failure (the code is new).
"""

from __future__ import annotations

import logging
from typing import Any

from mcp import types
from mcp.shared.exceptions import MCPError
from redis.exceptions import RedisError

from services.gateway.mcp import input_required
from services.gateway.state import GatewayState
from shared.executions.events import CLIENT_CAPABILITY_MISSING, EXTENSION_PREFIX, decode_event
from shared.executions.status import ExecutionStatus
from shared.queues import events_log_key

log = logging.getLogger(__name__)


async def refuse_missing_capabilities(
    state: GatewayState, *, protocol_version: str | None, execution_id: str, failure: str
) -> None:
    """Raise ``-32021`` naming each capability the toolhost found missing during the failed
    run ``execution_id`` (``failure``: its first tool failure, for the message); nothing when
    none was, or the client speaks an older revision."""
    if not input_required.applies(protocol_version):  # -32021 is new in 2026-07-28
        return
    try:
        raw = await state.aredis.lrange(events_log_key(execution_id), 0, -1)
    except RedisError as exc:  # the failure is still answered, as the tool's isError result
        log.warning("execution %s: events not read: %s", execution_id, exc)
        return
    events = [decode_event(item) for item in raw]
    missing = sorted(
        {str(e["capability"]) for e in events if e.get("type") == CLIENT_CAPABILITY_MISSING}
    )
    if not missing:
        return
    required: dict[str, Any] = {}
    for name in missing:  # an extension (MCP Tasks) goes under ``extensions`` by its id
        if name.startswith(EXTENSION_PREFIX):
            required.setdefault("extensions", {})[name.removeprefix(EXTENSION_PREFIX)] = {}
        else:
            required[name] = {}
    data = types.MissingRequiredClientCapabilityErrorData(
        required_capabilities=types.ClientCapabilities.model_validate(required)
    )
    raise MCPError(
        code=types.MISSING_REQUIRED_CLIENT_CAPABILITY,
        message=f"the tool needs the client capability {', '.join(missing)}: {failure}",
        data=data.model_dump(by_alias=True, mode="json", exclude_none=True),
    )


async def refuse_failed_run(state: GatewayState, ctx: Any, result: Any) -> Any:
    """``result`` (``execute_code``'s or ``execute_capability``'s) unless it is a failed run
    that a missing client capability caused: then ``-32021`` (``ctx``: the tool's context)."""
    if not isinstance(result, types.CallToolResult) or not result.is_error:
        return result
    view = result.structured_content or {}
    if not view.get("id") or view.get("status") == ExecutionStatus.SUCCEEDED:
        return result
    failures = view.get("tool_failures") or []
    first = failures[0].get("error") if failures and isinstance(failures[0], dict) else None
    await refuse_missing_capabilities(
        state,
        protocol_version=ctx.protocol_version,
        execution_id=str(view["id"]),
        failure=str(first or f"execution {view['id']} failed"),
    )
    return result
