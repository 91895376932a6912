"""Per-process clients of a learning worker, created lazily after Celery forks its pool."""

from __future__ import annotations

from shared.clients import db_pool, redis_client
from shared.config import get_settings
from shared.embeddings import Embedder, get_embedder

__all__ = ["db_pool", "embedder", "redis_client"]


def embedder() -> Embedder:
    """The process-wide embedder (the model loads on the first new capability)."""
    return get_embedder(get_settings())
