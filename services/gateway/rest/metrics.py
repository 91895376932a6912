"""Prometheus `/metrics`: cluster-wide counters kept in Redis by every worker."""

from __future__ import annotations

from fastapi import APIRouter, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.registry import CollectorRegistry

from services.gateway.rest.deps import State
from shared.metrics import RedisMetricsCollector

router = APIRouter(tags=["metrics"])


@router.get("/metrics", summary="Prometheus metrics", response_class=Response)
def prometheus_metrics(state: State) -> Response:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(RedisMetricsCollector(state.redis))
    return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)
