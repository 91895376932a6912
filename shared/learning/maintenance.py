"""Beat jobs: promotion of reliable capabilities and pruning of idle one-offs."""

from __future__ import annotations

from typing import Any

import psycopg

from shared.capabilities import store
from shared.capabilities.stats import PROMOTION_MIN_SUCCESS_RATE, PROMOTION_MIN_USAGE
from shared.graph.edges import CAPABILITY_PREFIX
from shared.graph.store import delete_nodes

Conn = psycopg.Connection[dict[str, Any]]

# Pruning: emergent capabilities used once and untouched this long are noise.
PRUNE_IDLE_DAYS = 30


def promote_capabilities(conn: Conn) -> int:
    """Set promoted_at on capabilities used ≥ 3 times with > 70 % success; returns how many."""
    return store.promote(
        conn, min_usage=PROMOTION_MIN_USAGE, min_success_rate=PROMOTION_MIN_SUCCESS_RATE
    )


def prune_idle_capabilities(conn: Conn, *, dry_run: bool) -> int:
    """Delete (or with dry_run count) emergent capabilities used once and idle 30 days."""
    if dry_run:
        return store.count_idle(conn, idle_days=PRUNE_IDLE_DAYS)
    ids = store.delete_idle(conn, idle_days=PRUNE_IDLE_DAYS)
    if ids:
        # Their graph nodes go too, so PageRank does not keep ranking deleted code.
        delete_nodes(conn, nodes=[f"{CAPABILITY_PREFIX}{i}" for i in ids])
    return len(ids)
