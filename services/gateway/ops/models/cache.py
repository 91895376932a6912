"""The result cache's responses (REST)."""

from __future__ import annotations

from pydantic import BaseModel, Field


class CapabilityCacheFacts(BaseModel):
    """`GET /v1/capabilities/{id}/cache`: what the cache does for one capability."""

    capability_id: str
    runs: int = Field(description="its finished runs through `POST /v1/capabilities/{id}/execute`")
    hits: int = Field(description="of those, how many a cached result answered")
    hit_rate: float | None = Field(description="hits / runs; null before its first run")
    cacheable: bool = Field(description="whether its next successful run's result is stored")
    reason: str = Field(description="why not, when it is not cacheable")
    ttl_s: int = Field(
        description="how long a stored result is served: the shortest of its tools' TTLs, the "
        "capability default and its own cache_config; 0 when not cacheable"
    )
    entries: int = Field(description="results stored now (one per distinct arguments)")
    entry_hits: int = Field(description="hits served by the entries stored now")
    next_expiry: str | None = Field(description="when the first stored entry expires (ISO 8601)")
