"""The dashboard's metrics strip as `GET /api/metrics/summary` returns it."""

from __future__ import annotations

from pydantic import BaseModel, Field


class MetricsSummary(BaseModel):
    """`GET /api/metrics/summary`: the caller's tenant at a glance."""

    executions_per_min: float = Field(description="executions submitted per minute (last 5 min)")
    success_rate: float | None = Field(
        description="succeeded / ended, of the last hour's executions; null when none ended"
    )
    cache_hit_rate: float | None = Field(
        description="submissions answered from the result cache / lookups; null before any"
    )
    capabilities_learned: int = Field(description="capabilities the tenant has now")
    flower_url: str | None = Field(description="Flower (Celery monitor); null when not set up")
