"""Queue names, task names, Redis key prefixes and channels: defined here and nowhere else."""

from __future__ import annotations

from enum import StrEnum
from typing import Literal


class Queue(StrEnum):
    """Celery queues, one line each on who consumes them."""

    # Sandbox workers: one message per execution; long tasks, prefetch 1.
    EXECUTIONS = "executions"
    # Learning workers: trace ingestion (graph edges, capability upserts).
    LEARNING = "learning"
    # Learning workers too: beat jobs (graph refresh, promotion, pruning).
    MAINTENANCE = "maintenance"


class TaskName(StrEnum):
    """Celery task names, so the gateway can enqueue without importing a worker."""

    RUN_EXECUTION = "agentcards.run_execution"
    INGEST_EXECUTION = "agentcards.ingest_execution"
    REFRESH_GRAPH_METRICS = "agentcards.refresh_graph_metrics"
    PROMOTE_PATTERNS = "agentcards.promote_patterns"
    PRUNE_CAPABILITIES = "agentcards.prune_capabilities"
    PING = "agentcards.ping"
    SANDBOX_PING = "agentcards.sandbox_ping"


TASK_ROUTES: dict[str, dict[str, str]] = {
    TaskName.RUN_EXECUTION: {"queue": Queue.EXECUTIONS},
    TaskName.INGEST_EXECUTION: {"queue": Queue.LEARNING},
    TaskName.REFRESH_GRAPH_METRICS: {"queue": Queue.MAINTENANCE},
    TaskName.PROMOTE_PATTERNS: {"queue": Queue.MAINTENANCE},
    TaskName.PRUNE_CAPABILITIES: {"queue": Queue.MAINTENANCE},
}

# Redis keys and pub/sub channels (arq style: every prefix in one place).
KEY_PREFIX = "agentcards:"
RPC_REQUESTS = KEY_PREFIX + "rpc:requests"  # list; toolhosts BLPOP, bridges LPUSH
RPC_REPLY_PREFIX = KEY_PREFIX + "rpc:reply:"  # + call_id; list with expiry
EVENTS_CHANNEL_PREFIX = KEY_PREFIX + "events:"  # + execution_id; pub/sub
EVENTS_ALL_CHANNEL = KEY_PREFIX + "events:all"  # every execution's finish event
TOOLS_CHANGED_CHANNEL = KEY_PREFIX + "tools:changed"  # tool schema change events
HEARTBEAT_PREFIX = KEY_PREFIX + "heartbeat:"  # + process name; expiring key
METRICS_PREFIX = KEY_PREFIX + "metrics:"  # + name; counters and histogram buckets (hashes)
GRAPH_FINGERPRINT_KEY = KEY_PREFIX + "graph:fingerprint"  # last refreshed edge-set fingerprint
# Requests a downstream server sends its client (sampling, elicitation) during a tool call,
# relayed toolhost -> the gateway process holding the MCP session that started the execution.
CLIENT_REQUESTS_PREFIX = KEY_PREFIX + "client:"


def events_channel(execution_id: str) -> str:
    """Pub/sub channel for one execution's progress and completion events."""
    return f"{EVENTS_CHANNEL_PREFIX}{execution_id}"


def events_log_key(execution_id: str) -> str:
    """Capped list of one execution's events, replayed to late subscribers."""
    return f"{EVENTS_CHANNEL_PREFIX}log:{execution_id}"


def events_seq_key(execution_id: str) -> str:
    """Counter numbering one execution's events."""
    return f"{EVENTS_CHANNEL_PREFIX}seq:{execution_id}"


def cancel_key(execution_id: str) -> str:
    """Flag key and pub/sub channel asking workers to cancel one execution."""
    return f"{KEY_PREFIX}cancel:{execution_id}"


def rpc_reply_key(call_id: str) -> str:
    """Reply list for one tool call."""
    return f"{RPC_REPLY_PREFIX}{call_id}"


def client_key(kind: Literal["requests", "reply", "capabilities"], ident: str) -> str:
    """Relay keys: ``requests`` (list, per execution) of server-to-client requests waiting for
    its MCP client, ``reply`` (list, per request) for one answer, ``capabilities`` (per
    execution) saying what its client can answer (absent: nobody listens)."""
    return f"{CLIENT_REQUESTS_PREFIX}{kind}:{ident}"
