"""Audit rows written by the gateway outside an execution's own transaction (searches)."""

from __future__ import annotations

from typing import Any

from anyio import to_thread

from services.gateway.state import GatewayState
from shared.auth.audit import AuditAction, record_audit
from shared.auth.principal import Principal


async def audit(
    state: GatewayState,
    *,
    principal: Principal,
    action: AuditAction,
    args: Any,
    details: dict[str, Any] | None = None,
) -> None:
    """Append one audit row for the caller (one INSERT on a pooled connection)."""

    def write() -> None:
        with state.pool.connection() as conn:
            record_audit(
                conn,
                tenant_id=principal.tenant_id,
                key_id=principal.key_id,
                action=action,
                args=args,
                details=details,
            )

    await to_thread.run_sync(write)
