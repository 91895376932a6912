"""The dashboard's metrics strip: one tenant's executions/min, success and cache hit rates,
capabilities learned, and where Flower (the Celery monitor) is."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from services.gateway.ops.db import in_pool
from services.gateway.ops.models.metrics_summary import MetricsSummary, SearchLearning
from services.gateway.state import GatewayState
from shared.cache.stats import Level, tenant_stats
from shared.config import Settings
from shared.db import DictConnection
from shared.executions.activity import tenant_activity
from shared.search.adapter_store import adapter_passes

# Executions/min is averaged over 5 minutes: live enough for a dashboard, not one burst.
RATE_WINDOW_S = 300.0
# Success rate: executions submitted in the last hour that have ended.
OUTCOME_WINDOW_S = 3600.0
# AGENTCARDS_FLOWER_URL=off: no Flower link (a gateway deployed without Flower).
FLOWER_OFF = {"off", "none", "false", "0"}


def flower_url(settings: Settings, *, host: str | None) -> str | None:
    """AGENTCARDS_FLOWER_URL when set (`off`: none); else, when people sign in, the gateway's
    own `/flower/` (services.gateway.flower); else Flower's port on the host the caller
    reached the gateway by (where `agentcards up` and compose serve it)."""
    explicit = (settings.flower_url or "").strip()
    if explicit:
        return None if explicit.lower() in FLOWER_OFF else explicit
    if settings.gateway_flower_url:
        return settings.gateway_flower_url
    hostname = urlsplit(f"//{host}").hostname if host else None
    hostname = hostname or settings.gateway_host
    if hostname in {"0.0.0.0", "::"}:  # a bind-all address is not a place to browse to
        hostname = "127.0.0.1"
    if ":" in hostname:  # IPv6 literal
        hostname = f"[{hostname}]"
    return f"http://{hostname}:{settings.flower_port}"


def cache_hit_rate(levels: Mapping[str, Mapping[str, Any]]) -> float | None:
    """Hits at any level / lookup chains: each chain starts with one L1 or L2 lookup (an L3
    lookup only follows an L1 miss), so a submission counts once however deep it looked."""
    hits = sum(int(levels[level]["hits"]) for level in Level)
    first = (Level.EXECUTION, Level.CAPABILITY)
    chains = sum(int(levels[level]["hits"]) + int(levels[level]["misses"]) for level in first)
    return round(hits / chains, 4) if chains else None


async def metrics_summary(
    state: GatewayState, *, tenant_id: str, host: str | None
) -> MetricsSummary:
    """Indexed reads of the tenant's executions, capabilities and adapter passes; one Redis
    read."""
    return await in_pool(state, lambda conn: _summary(state, conn, tenant_id=tenant_id, host=host))


def _summary(
    state: GatewayState, conn: DictConnection, *, tenant_id: str, host: str | None
) -> MetricsSummary:
    activity = tenant_activity(
        conn,
        tenant_id=tenant_id,
        rate_window_s=RATE_WINDOW_S,
        outcome_window_s=OUTCOME_WINDOW_S,
    )
    return MetricsSummary(
        executions_per_min=round(activity.submitted / (RATE_WINDOW_S / 60), 3),
        success_rate=(round(activity.succeeded / activity.ended, 4) if activity.ended else None),
        cache_hit_rate=cache_hit_rate(tenant_stats(state.redis, tenant_id=tenant_id)),
        capabilities_learned=activity.capabilities,
        flower_url=flower_url(state.settings, host=host),
        search_learning=SearchLearning.model_validate(adapter_passes(conn, tenant_id=tenant_id)),
    )
