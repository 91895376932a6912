"""Per-process clients of a learning worker, created lazily after Celery forks its pool."""

from __future__ import annotations

from shared.clients import db_pool, redis_client
from shared.config import get_settings
from shared.embeddings import Embeds, embedder_for

__all__ = ["db_pool", "embedder", "redis_client"]


def embedder() -> Embeds:
    """The process-wide embedder: the gateways' or a model of its own (``embedder_for``)."""
    return embedder_for(get_settings())
