"""The dashboard's metrics strip as `GET /api/metrics/summary` returns it."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field


class AdapterPass(BaseModel):
    """One consolidation pass of the tenant's query adapter (learned search)."""

    version: int = Field(description="the pass's version number (every pass gets one)")
    trained_on: int = Field(description="learned runs it was fitted on")
    held_back: int = Field(description="the tenant's most recent runs held back to score it")
    score_before: float | None = Field(description="held-back top-1 of the adapter in use")
    score_after: float | None = Field(description="held-back top-1 of this fit")
    shipped: bool = Field(description="true: it replaced the adapter in use")
    created_at: datetime


class SearchLearning(BaseModel):
    """The tenant's query adapter: the version searches use, and the newest pass."""

    in_use: AdapterPass | None = Field(
        default=None, description="null: searches use the query as embedded"
    )
    last: AdapterPass | None = Field(default=None, description="null: never consolidated")


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
    search_learning: SearchLearning = Field(
        description="the tenant's query adapter (docs/search.md): version in use, last pass"
    )
