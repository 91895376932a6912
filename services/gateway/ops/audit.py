"""The audit log as the gateway keeps it: rows written outside an execution's own transaction
(searches), and the tenant's log read back for admin keys."""

from __future__ import annotations

from typing import Any

from services.gateway.ops.db import in_pool
from services.gateway.state import GatewayState
from shared.auth.audit import AuditAction, list_audit, record_audit
from shared.auth.principal import Principal
from shared.errors import Forbidden


async def audit(
    state: GatewayState,
    *,
    principal: Principal,
    action: AuditAction,
    args: Any,
    details: dict[str, Any] | None = None,
) -> None:
    """Append one audit row for the caller (one INSERT on a pooled connection)."""

    await in_pool(
        state,
        lambda conn: record_audit(
            conn,
            tenant_id=principal.tenant_id,
            key_id=principal.key_id,
            user_id=principal.user,
            action=action,
            args=args,
            details=details,
        ),
    )


async def audit_log(
    state: GatewayState, *, principal: Principal, limit: int
) -> list[dict[str, Any]]:
    """The caller's tenant's audit rows, newest first, as JSON; Forbidden without an admin key."""
    if not principal.admin:
        raise Forbidden(
            "the audit log needs an admin key of this tenant "
            "(`agentcards keys create --tenant <tenant> --admin`)"
        )
    rows = await in_pool(
        state, lambda conn: list_audit(conn, tenant_id=principal.tenant_id, limit=limit)
    )
    return [_jsonable(r) for r in rows]


def _jsonable(row: dict[str, Any]) -> dict[str, Any]:
    return {
        **row,
        "key_id": str(row["key_id"]) if row["key_id"] else None,
        "execution_id": str(row["execution_id"]) if row["execution_id"] else None,
        "created_at": row["created_at"].isoformat(),
        "finished_at": row["finished_at"].isoformat() if row["finished_at"] else None,
    }
