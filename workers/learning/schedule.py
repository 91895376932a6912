"""The whole beat schedule, one entry per periodic job with why it runs that often."""

from __future__ import annotations

from typing import Any

from celery.schedules import crontab

from shared.queues import Queue, TaskName

BEAT_SCHEDULE: dict[str, dict[str, Any]] = {
    # Executions whose sandbox worker died (heartbeat gone) or hung past its deadline,
    # and queued ones nobody came for, end with the reason. Every 5 s: a dead worker's
    # executions end within ~10 s (heartbeat TTL + confirmation + this period); the
    # pass is one indexed query when nothing is stale. Expires: a backlog never piles up.
    "reap-executions": {
        "task": TaskName.REAP_EXECUTIONS,
        "schedule": 5.0,
        "options": {"queue": Queue.MAINTENANCE, "expires": 5},
    },
    # Runs whose ingestion message was lost (Redis down when their worker finished) are
    # sent to learning again; every 30 s, so learning catches up within a minute of such
    # a loss. One indexed query when nothing waits.
    "resend-unlearned": {
        "task": TaskName.RESEND_UNLEARNED,
        "schedule": 30.0,
        "options": {"queue": Queue.MAINTENANCE, "expires": 25},
    },
    # PageRank + Louvain feed search and suggestions; every 5 minutes keeps them fresh
    # while a refresh (≤ 2 s at 10k tools / 100k edges) costs little, and it skips
    # itself when no edge changed. Expires so a backlog never runs stale refreshes.
    "refresh-graph-metrics": {
        "task": TaskName.REFRESH_GRAPH_METRICS,
        "schedule": 300.0,
        "options": {"queue": Queue.MAINTENANCE, "expires": 290},
    },
    # Consolidated learning: each tenant with new learned runs gets its tool
    # vectors refitted, shipped only if they score at least as well on its held-back runs.
    # Every 10 minutes, the backstop: ingestion queues a tenant's pass soon after its new
    # runs (``consolidate_tenant_soon``); a pass is one indexed query when nothing is new
    # and <= 60 s at 100k intents, in a child process of the worker.
    "consolidate-tool-vectors": {
        "task": TaskName.CONSOLIDATE_TOOL_VECTORS,
        "schedule": 600.0,
        "options": {"queue": Queue.MAINTENANCE, "expires": 590},
    },
    # Promotion (used ≥ 3 times, success rate > 0.7): a quality signal that
    # changes slowly, so hourly.
    "promote-patterns": {
        "task": TaskName.PROMOTE_PATTERNS,
        "schedule": crontab(minute=7),
        "options": {"queue": Queue.MAINTENANCE, "expires": 3000},
    },
    # Pruning of idle one-off capabilities: daily at a quiet hour; the task itself is
    # a no-op unless AGENTCARDS_PRUNING_ENABLED=true.
    "prune-capabilities": {
        "task": TaskName.PRUNE_CAPABILITIES,
        "schedule": crontab(minute=17, hour=3),
        "options": {"queue": Queue.MAINTENANCE, "expires": 3600},
    },
    # Expired result-cache rows: reads already skip them, so this only reclaims space and
    # logs the expiry; once a minute keeps the table near its live size.
    "expire-cache": {
        "task": TaskName.EXPIRE_CACHE,
        "schedule": 60.0,
        "options": {"queue": Queue.MAINTENANCE, "expires": 55},
    },
}
