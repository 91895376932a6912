"""`GET /api/metrics/summary`: the dashboard's metrics strip (the caller's tenant)."""

from __future__ import annotations

from fastapi import APIRouter, Request

from services.gateway.ops.metrics_summary import metrics_summary
from services.gateway.ops.models.metrics_summary import MetricsSummary
from services.gateway.rest.deps import CurrentPrincipal, State

router = APIRouter(tags=["metrics"])


@router.get(
    "/api/metrics/summary",
    summary="Executions/min, success and cache hit rates, capabilities learned, Flower link",
    response_model=MetricsSummary,
)
async def summary(request: Request, state: State, principal: CurrentPrincipal) -> MetricsSummary:
    """The caller's tenant over the last minutes; `flower_url` is null when Flower is not set up."""
    host = request.headers.get("host")
    return await metrics_summary(state, tenant_id=principal.tenant_id, host=host)
