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
    # The same ingestion of runs nobody waits to see learned (no intent): batched a second.
    INGEST_EXECUTION_LATER = "agentcards.ingest_execution_later"
    REFRESH_GRAPH_METRICS = "agentcards.refresh_graph_metrics"
    PROMOTE_PATTERNS = "agentcards.promote_patterns"
    PRUNE_CAPABILITIES = "agentcards.prune_capabilities"
    CONSOLIDATE_TOOL_VECTORS = "agentcards.consolidate_tool_vectors"
    CONSOLIDATE_TENANT = "agentcards.consolidate_tenant"
    REAP_EXECUTIONS = "agentcards.reap_executions"
    EXPIRE_CACHE = "agentcards.expire_cache"
    RESEND_UNLEARNED = "agentcards.resend_unlearned"
    PING = "agentcards.ping"
    SANDBOX_PING = "agentcards.sandbox_ping"


TASK_ROUTES: dict[str, dict[str, str]] = {
    TaskName.RUN_EXECUTION: {"queue": Queue.EXECUTIONS},
    TaskName.INGEST_EXECUTION: {"queue": Queue.LEARNING},
    TaskName.INGEST_EXECUTION_LATER: {"queue": Queue.LEARNING},
    TaskName.REFRESH_GRAPH_METRICS: {"queue": Queue.MAINTENANCE},
    TaskName.PROMOTE_PATTERNS: {"queue": Queue.MAINTENANCE},
    TaskName.PRUNE_CAPABILITIES: {"queue": Queue.MAINTENANCE},
    TaskName.CONSOLIDATE_TOOL_VECTORS: {"queue": Queue.MAINTENANCE},
    TaskName.CONSOLIDATE_TENANT: {"queue": Queue.MAINTENANCE},
    TaskName.REAP_EXECUTIONS: {"queue": Queue.MAINTENANCE},
    TaskName.RESEND_UNLEARNED: {"queue": Queue.MAINTENANCE},
    TaskName.EXPIRE_CACHE: {"queue": Queue.MAINTENANCE},
}

# Redis keys and pub/sub channels (arq style: every prefix in one place).
KEY_PREFIX = "agentcards:"
RPC_REQUESTS = KEY_PREFIX + "rpc:requests"  # list; bridges RPUSH, toolhosts BLPOP (FIFO)
# + ":" + server; calls a replica with that server down handed to the replicas that have it
# ready (only those BLPOP it)
RPC_REPLY_PREFIX = KEY_PREFIX + "rpc:reply:"  # + call_id; list with expiry
# Embeddings the gateways compute for the toolhost and learning workers (shared.embeddings.service)
EMBED_REQUESTS = KEY_PREFIX + "embed:requests"  # list; askers RPUSH, gateways BLPOP
EMBED_REPLY_PREFIX = KEY_PREFIX + "embed:reply:"  # + request id; list with expiry
EVENTS_CHANNEL_PREFIX = KEY_PREFIX + "events:"  # + execution_id; pub/sub
EVENTS_ALL_CHANNEL = KEY_PREFIX + "events:all"  # every execution's finish event
TOOLS_CHANGED_CHANNEL = KEY_PREFIX + "tools:changed"  # tool schema change events
TOOLS_LISTED_CHANNEL = KEY_PREFIX + "tools:listed"  # a server name: its tool list changed
# + tenant id; set (NX, with expiry) while a pass of that tenant's consolidation is queued
# soon after its new runs, so a burst of runs queues one pass
CONSOLIDATION_QUEUED_PREFIX = KEY_PREFIX + "consolidation:queued:"
# When a tenant last taught something (epoch seconds): its queued pass waits for a pause.
CONSOLIDATION_TAUGHT_PREFIX = KEY_PREFIX + "consolidation:taught:"
# A server's notifications for the direct surface: {server, uri} (a subscribed resource
# changed) or {server, list: "resources" | "prompts"} (that list changed).
SERVER_NOTICES_CHANNEL = KEY_PREFIX + "servers:notices"
# `agentcards policy reload`: every process that decides reads its policy file again now.
POLICY_RELOAD_CHANNEL = KEY_PREFIX + "policy:reload"
BEAT_LEADER_KEY = KEY_PREFIX + "beat:leader"  # holder of the lease to send the schedule
HEARTBEAT_PREFIX = KEY_PREFIX + "heartbeat:"  # + process name; expiring key
# + host:pid; a gateway serving embeddings, its value the model's name
EMBED_SERVER_PREFIX = HEARTBEAT_PREFIX + "embedder:"
METRICS_PREFIX = KEY_PREFIX + "metrics:"  # + name; counters and histogram buckets (hashes)
GRAPH_FINGERPRINT_KEY = KEY_PREFIX + "graph:fingerprint"  # last refreshed edge-set fingerprint
REAP_SUSPECT_PREFIX = KEY_PREFIX + "reap:suspect:"  # + execution_id; when its worker went missing
RPC_CLAIM_PREFIX = KEY_PREFIX + "rpc:claim:"  # + call_id; the toolhost replica running the call
CACHE_PREFIX = KEY_PREFIX + "cache:"  # result cache (shared.cache)
CACHE_ENTRY_PREFIX = CACHE_PREFIX + "l1:"  # + tenant + ":" + digest; L1 entries (with TTL)
CACHE_INDEX_PREFIX = (
    CACHE_PREFIX + "idx:"
)  # + tool:<id> | server:<name> | tenant:<id>; sets of L1 keys
CACHE_GENERATION_PREFIX = CACHE_PREFIX + "gen:"  # + server; bumped by every write-invalidation
CACHE_STATS_PREFIX = CACHE_PREFIX + "stats:"  # + tenant; hash of hits/misses per level
CACHE_INVALIDATIONS_CHANNEL = CACHE_PREFIX + "invalidations"  # pub/sub, one event each
RATE_PREFIX = KEY_PREFIX + "rate:"  # + kind + ":" + API key id; per-key limit windows (zsets)
GRANT_PREFIX = KEY_PREFIX + "grant:"  # + execution_id; the tool scope the gateway granted
# A person's answer to a paused call (``approval_answer_key``): the waiting caller's wake-up
# call; the ``approvals`` row in Postgres is what decides.
APPROVAL_ANSWER_PREFIX = KEY_PREFIX + "approval:answer:"
TOOL_CALLS_PREFIX = KEY_PREFIX + "ratelimit:tool_calls:"  # + key + minute; per-key counters
# Requests a downstream server sends its client (sampling, elicitation) during a tool call,
# relayed toolhost -> the gateway process holding the MCP session that started the execution.
CLIENT_REQUESTS_PREFIX = KEY_PREFIX + "client:"
# The tool an MCP session of the direct surface (/mcp/servers/...) called last (with expiry).
DIRECT_SESSION_PREFIX = KEY_PREFIX + "direct:last:"  # + tenant + ":" + session id
DPOP_JTI_PREFIX = KEY_PREFIX + "dpop:jti:"  # + sha256(jkt:jti); a DPoP proof seen (expiring)
# The dashboard's sign-in (services/gateway/signin.py): a session, and a sign-in under way,
# each keyed by the sha256 of its random cookie value (the cookie alone can find it).
SESSION_PREFIX = KEY_PREFIX + "session:"  # + sha256(cookie); JSON of the user's claims
SIGNIN_PREFIX = KEY_PREFIX + "signin:"  # + sha256(cookie); state, PKCE verifier, nonce
# People's OAuth connections to servers behind the gateway (shared/connections/links.py):
# a connect link, and a connection under way, each keyed by the sha256 of its random value.
CONNECT_LINK_PREFIX = KEY_PREFIX + "connect:link:"  # + sha256(link id); tenant, user, server
# The link now handed out to a person for a server (sealed; links.current_link).
CONNECT_CURRENT_PREFIX = KEY_PREFIX + "connect:current:"  # + sha256(tenant, user, server...)
CONNECT_FLOW_PREFIX = KEY_PREFIX + "connect:flow:"  # + sha256(state); sealed PKCE verifier...
# ... and the word that a link's connection was stored (a list: a call waiting on it pops it).
CONNECT_DONE_PREFIX = KEY_PREFIX + "connect:done:"  # + sha256(link id)
# Stream of answered direct calls' records (executions row, audit row, learning), appended
# before each answer goes out and written to Postgres by the gateways' drainers
# (shared/direct/drain.py), which read it as one consumer group.
DIRECT_RECORDS_STREAM = KEY_PREFIX + "direct:records"
DIRECT_RECORDS_GROUP = "recorders"
# MCP sessions (2025-11-25) shared by the gateway replicas (services/gateway/mcp/replicas/):
# each session is served by the replica that owns it; the others forward its requests there.
MCP_PREFIX = KEY_PREFIX + "mcp:"
MCP_SESSION_PREFIX = MCP_PREFIX + "session:"  # + session id; hash: owner, path, init (expiring)
MCP_REPLICA_PREFIX = MCP_PREFIX + "replica:"  # + replica id; a live gateway replica (expiring)
MCP_INBOX_PREFIX = MCP_PREFIX + "inbox:"  # + replica id; list of requests forwarded to it
MCP_FORWARD_PREFIX = MCP_PREFIX + "fwd:"  # + forward id + ":out"/":in"; one forwarded exchange
MCP_EVENTS_PREFIX = MCP_PREFIX + "events:"  # + session id; stream of its SSE events (bounded)
MCP_SESSIONS_GAUGE = METRICS_PREFIX + "mcp_sessions"  # hash: replica id -> sessions it owns
# hash: replica id -> bytes Redis holds for the sessions it owns (record, events, settings)
MCP_SESSION_BYTES_GAUGE = METRICS_PREFIX + "mcp_session_bytes"
MCP_CALLS_PREFIX = MCP_PREFIX + "calls:"  # + session id; hash: request id -> the run it waits on
# + session id; hash: what the client set (its log level, each subscription) -> that request
MCP_SET_PREFIX = MCP_PREFIX + "set:"


def events_channel(execution_id: str) -> str:
    """Pub/sub channel for one execution's progress and completion events."""
    return f"{EVENTS_CHANNEL_PREFIX}{execution_id}"


def events_log_key(execution_id: str) -> str:
    """Capped list of one execution's events, replayed to late subscribers."""
    return f"{EVENTS_CHANNEL_PREFIX}log:{execution_id}"


def finished_row_key(execution_id: str) -> str:
    """One execution's stored terminal row, left briefly by its worker for the waiting gateway."""
    return f"{EVENTS_CHANNEL_PREFIX}row:{execution_id}"


def events_seq_key(execution_id: str) -> str:
    """Counter numbering one execution's events."""
    return f"{EVENTS_CHANNEL_PREFIX}seq:{execution_id}"


def cancel_key(execution_id: str) -> str:
    """Flag key and pub/sub channel asking workers to cancel one execution."""
    return f"{KEY_PREFIX}cancel:{execution_id}"


def direct_lease_key(execution_id: str) -> str:
    """The lease of a direct call made as an MCP task: set by its gateway at its start,
    refreshed by the toolhost calling its server; lapsed, the reaper ends it ``worker_lost``."""
    return f"{KEY_PREFIX}direct:lease:{execution_id}"


def rpc_server_requests_key(server: str) -> str:
    """Calls for one server, forwarded by a replica that has it down to those that have it ready."""
    return f"{RPC_REQUESTS}:{server}"


def rpc_reply_key(call_id: str) -> str:
    """Reply list for one tool call."""
    return f"{RPC_REPLY_PREFIX}{call_id}"


def reap_suspect_key(execution_id: str) -> str:
    """When the reaper first saw the worker of a running execution missing."""
    return f"{REAP_SUSPECT_PREFIX}{execution_id}"


def learning_resent_key(execution_id: str) -> str:
    """Set when an execution's lost ingestion message was sent again (expires: sent again later)."""
    return f"{KEY_PREFIX}learning:resent:{execution_id}"


def rpc_claim_key(call_id: str) -> str:
    """Which toolhost replica (its heartbeat key) popped one tool call."""
    return f"{RPC_CLAIM_PREFIX}{call_id}"


def executions_window_key(key_id: str) -> str:
    """Sorted set of one API key's execution submissions in the last minute (score: time)."""
    return f"{RATE_PREFIX}executions:{key_id}"


def running_executions_key(key_id: str) -> str:
    """Sorted set of one API key's in-flight executions (score: when the slot expires)."""
    return f"{RATE_PREFIX}running:{key_id}"


def grant_key(execution_id: str) -> str:
    """The grant record of one execution: its tool scope and rate limit, written at submission."""
    return f"{GRANT_PREFIX}{execution_id}"


def approval_answer_key(execution_id: str, call_id: str) -> str:
    """The answer to one paused call of one execution, for the caller waiting on it."""
    return f"{APPROVAL_ANSWER_PREFIX}{execution_id}:{call_id}"


def tool_calls_key(caller: str, minute: int) -> str:
    """Counter of one caller's tool calls in one clock minute (``int(time // 60)``)."""
    return f"{TOOL_CALLS_PREFIX}{caller}:{minute}"


def client_key(
    kind: Literal["requests", "reply", "capabilities", "answered", "task-asks"], ident: str
) -> str:
    """Relay keys: ``requests`` (list, per execution) of server-to-client requests waiting for
    its MCP client, ``reply`` (list, per request) for one answer, ``capabilities`` (per
    execution) saying what its client can answer (absent: nobody listens), ``answered`` (per
    request) once a 2026-07-28 client's retry delivered its answer, ``task-asks`` (hash, per
    execution) the open questions of a run that is an MCP task, by their key."""
    return f"{CLIENT_REQUESTS_PREFIX}{kind}:{ident}"


def direct_session_key(tenant_id: str, session_id: str) -> str:
    """The last tool one direct MCP session of a tenant called: the next call follows it."""
    return f"{DIRECT_SESSION_PREFIX}{tenant_id}:{session_id}"


TENANT_EVENTS_PREFIX = KEY_PREFIX + "tenant-events:"  # + tenant_id; pub/sub (shared.events.bus)


# + tenant_id; pub/sub: a tenant's capability.learned and capability.updated again, for the
# gateways' skills relay (services/gateway/mcp/skill_changes.py), which then hears none of
# the tenant's other events (an execution.finished for every call).
CAPABILITY_EVENTS_PREFIX = KEY_PREFIX + "capability-events:"


def capability_events_channel(tenant_id: str) -> str:
    """The pub/sub channel of one tenant's capability changes (``shared.events.bus``)."""
    return f"{CAPABILITY_EVENTS_PREFIX}{tenant_id}"


def tenant_events_channel(tenant_id: str) -> str:
    """Pub/sub channel of one tenant's dashboard events (`GET /v1/events`)."""
    return f"{TENANT_EVENTS_PREFIX}{tenant_id}"


def mcp_session_key(session_id: str) -> str:
    """Which replica owns an MCP session, and what re-opens it elsewhere."""
    return f"{MCP_SESSION_PREFIX}{session_id}"


def mcp_replica_key(replica_id: str) -> str:
    """A gateway replica's heartbeat: present while it is alive."""
    return f"{MCP_REPLICA_PREFIX}{replica_id}"


def mcp_inbox_key(replica_id: str) -> str:
    """The requests other replicas forward to this one (sessions it owns)."""
    return f"{MCP_INBOX_PREFIX}{replica_id}"


def mcp_forward_key(forward_id: str, direction: Literal["out", "in"]) -> str:
    """One forwarded request: its response parts (``out``), its client's hang-up (``in``)."""
    return f"{MCP_FORWARD_PREFIX}{forward_id}:{direction}"


def mcp_events_key(session_id: str) -> str:
    """An MCP session's SSE events, for a client resuming with ``Last-Event-ID``."""
    return f"{MCP_EVENTS_PREFIX}{session_id}"


def mcp_set_key(session_id: str) -> str:
    """What an MCP session's client set (log level, subscriptions), set again on take-over."""
    return f"{MCP_SET_PREFIX}{session_id}"


def mcp_calls_key(session_id: str) -> str:
    """An MCP session's calls waiting on executions, for a replica that takes it over."""
    return f"{MCP_CALLS_PREFIX}{session_id}"
