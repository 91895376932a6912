"""`GET /v1/audit`: the caller's tenant's audit log, for admin keys."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query

from services.gateway.ops.audit import audit_log
from services.gateway.rest.deps import CurrentPrincipal, State

router = APIRouter(prefix="/v1", tags=["audit"])


@router.get("/audit", summary="The tenant's audit log, newest first (admin keys only)")
async def read_audit(
    state: State, principal: CurrentPrincipal, limit: int = Query(100, ge=1, le=1000)
) -> dict[str, Any]:
    """Executions (with the tools they called), searches and key changes of the caller's tenant."""
    return {"entries": await audit_log(state, principal=principal, limit=limit)}
