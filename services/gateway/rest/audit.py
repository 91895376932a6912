"""`GET /v1/audit`: the caller's tenant's audit log, for admin keys."""

from __future__ import annotations

from typing import Any

from anyio import to_thread
from fastapi import APIRouter, Query

from services.gateway.rest.deps import CurrentPrincipal, State
from shared.auth.audit import list_audit
from shared.errors import Forbidden

router = APIRouter(prefix="/v1", tags=["audit"])


@router.get("/audit", summary="The tenant's audit log, newest first (admin keys only)")
async def read_audit(
    state: State, principal: CurrentPrincipal, limit: int = Query(100, ge=1, le=1000)
) -> dict[str, Any]:
    """Executions (with the tools they called), searches and key changes of the caller's tenant."""
    if not principal.admin:
        raise Forbidden(
            "the audit log needs an admin key of this tenant "
            "(`agentcards keys create --tenant <tenant> --admin`)"
        )

    def load() -> list[dict[str, Any]]:
        with state.pool.connection() as conn:
            return list_audit(conn, tenant_id=principal.tenant_id, limit=limit)

    rows = await to_thread.run_sync(load)
    return {"entries": [_jsonable(r) for r in rows]}


def _jsonable(row: dict[str, Any]) -> dict[str, Any]:
    return {
        **row,
        "key_id": str(row["key_id"]) if row["key_id"] else None,
        "execution_id": str(row["execution_id"]) if row["execution_id"] else None,
        "created_at": row["created_at"].isoformat(),
        "finished_at": row["finished_at"].isoformat() if row["finished_at"] else None,
    }
