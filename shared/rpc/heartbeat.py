"""Toolhost heartbeats: each replica writes one expiring Redis key; health checks read them all.

The body says whether the replica is ready (every configured MCP server had its first
connection attempt, success or not) and each server's state and last error, so the
gateway's /healthz, `agentcards up` and `agentcards status` report the same truth.
Calls are routed to a replica that has their server ready (services/toolhost/rpc_server.py),
so a server is as healthy as its best replica; the replicas where it is down are named.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass, field
from typing import Any

import orjson
import psutil
import redis

from shared.queues import HEARTBEAT_PREFIX
from shared.server_states import RANK, ServerState

TOOLHOST_PATTERN = f"{HEARTBEAT_PREFIX}toolhost:*"
# A beat every second: health checks and callers waiting on a
# reply notice a dead replica within ~5 s (one SET per second per replica; five missed
# beats, so a replica whose loop stalls briefly is not declared dead).
HEARTBEAT_EVERY_S = 1.0
HEARTBEAT_TTL_S = 5


def replica_name(host: str, pid: int) -> str:
    """A toolhost replica's identity, ``<hostname>:<pid>`` (heartbeat key, Postgres rows)."""
    return f"{host}:{pid}"


def toolhost_key(host: str, pid: int) -> str:
    """One replica's key: ``…heartbeat:toolhost:<hostname>:<pid>``."""
    return f"{HEARTBEAT_PREFIX}toolhost:{replica_name(host, pid)}"


@dataclass(frozen=True, slots=True)
class ServerHealth:
    """One MCP server in its best state across replicas (``shared/server_states.py``), and why
    not ready."""

    name: str
    state: str
    error: str | None = None
    # Replicas (``host:pid``) where the server is not ready, with their last error.
    down_on: dict[str, str | None] = field(default_factory=dict)

    @property
    def failed(self) -> bool:
        """An attempt failed and the toolhost is reconnecting with backoff."""
        return self.state == ServerState.RETRYING

    @property
    def degraded(self) -> bool:
        """Served, but not by every replica."""
        return self.state == ServerState.READY and bool(self.down_on)


@dataclass(frozen=True, slots=True)
class ToolhostBeat:
    """The body of one replica's heartbeat."""

    pid: int
    host: str
    started_at: float
    ready: bool
    inflight: int = 0
    handled: int = 0
    servers: dict[str, str] = field(default_factory=dict)  # name -> state
    errors: dict[str, str | None] = field(default_factory=dict)  # name -> last error

    @property
    def replica(self) -> str:
        """The replica's identity, ``<hostname>:<pid>`` (its per-replica rows in Postgres)."""
        return replica_name(self.host, self.pid)

    def encode(self) -> bytes:
        return orjson.dumps(
            {
                "pid": self.pid,
                "host": self.host,
                "started_at": self.started_at,
                "ready": self.ready,
                "inflight": self.inflight,
                "handled": self.handled,
                "servers": self.servers,
                "errors": self.errors,
            }
        )

    @classmethod
    def decode(cls, raw: bytes | str) -> ToolhostBeat:
        body: dict[str, Any] = orjson.loads(raw)
        return cls(
            pid=int(body["pid"]),
            host=str(body["host"]),
            started_at=float(body["started_at"]),
            ready=bool(body["ready"]),
            inflight=int(body.get("inflight", 0)),
            handled=int(body.get("handled", 0)),
            servers=dict(body.get("servers") or {}),
            errors=dict(body.get("errors") or {}),
        )


def read_toolhost_beats(client: redis.Redis, *, host: str | None = None) -> list[ToolhostBeat]:
    """Every live replica's heartbeat (those of ``host`` only when given).

    A replica on this host whose process is gone is dropped at once: its key outlives a
    SIGKILL by up to HEARTBEAT_TTL_S, and a health check must not count a dead pid.
    """
    pattern = f"{HEARTBEAT_PREFIX}toolhost:{host}:*" if host else TOOLHOST_PATTERN
    beats = [ToolhostBeat.decode(raw) for raw in read_heartbeats(client, pattern)]
    here = socket.gethostname()
    return [b for b in beats if b.host != here or _pid_alive(b.pid)]


def _pid_alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def read_heartbeats(client: redis.Redis, pattern: str) -> list[bytes | str]:
    """The bodies of every live heartbeat key matching ``pattern``."""
    bodies: list[bytes | str] = []
    for key in client.scan_iter(match=pattern, count=100):
        raw = client.get(key)
        if raw:  # expired between SCAN and GET
            bodies.append(raw)
    return bodies


def server_health(beats: list[ToolhostBeat]) -> dict[str, ServerHealth]:
    """Each configured server in its best state across replicas (with that replica's error
    when none has it ready) and the replicas where it is not ready, sorted by name."""
    seen: dict[str, list[tuple[ToolhostBeat, str]]] = {}
    for beat in beats:
        for name, state in beat.servers.items():
            seen.setdefault(name, []).append((beat, state))
    merged: dict[str, ServerHealth] = {}
    for name, views in sorted(seen.items()):
        beat, state = min(views, key=lambda v: RANK.get(v[1], len(RANK)))
        down_on = {b.replica: b.errors.get(name) for b, s in views if s != ServerState.READY}
        error = None if state == ServerState.READY else beat.errors.get(name)
        merged[name] = ServerHealth(name, state, error, down_on)
    return merged


def replicas_ready(beats: list[ToolhostBeat], server: str) -> list[str]:
    """The ready replicas (serving calls: not starting or stopping) that have ``server`` ready."""
    return [b.replica for b in beats if b.ready and b.servers.get(server) == ServerState.READY]


@dataclass(frozen=True, slots=True)
class ToolhostHealth:
    """What a health check reports about the toolhosts and their MCP servers."""

    ok: bool
    detail: str
    servers: dict[str, ServerHealth]


def toolhost_health(client: redis.Redis) -> ToolhostHealth:
    """Healthy when a replica is ready: every configured server is ready or has failed once."""
    beats = read_toolhost_beats(client)
    ready = [b for b in beats if b.ready]
    if not beats:
        return ToolhostHealth(False, "no toolhost heartbeat (not started, or crash-looping)", {})
    servers = server_health(ready or beats)
    if not ready:
        waiting = [s.name for s in servers.values() if s.state == ServerState.CONNECTING]
        detail = "connecting to " + ", ".join(waiting) if waiting else "starting"
        return ToolhostHealth(False, detail, servers)
    serving = (ServerState.READY, ServerState.NEEDS_USER_AUTHORIZATION)  # the latter: per person
    failed = [s.name for s in servers.values() if s.state not in serving]
    detail = (
        f"{len(ready)} replica(s) ready; {len(servers) - len(failed)}/{len(servers)} servers ready"
    )
    if failed:
        detail += f" (not ready: {', '.join(failed)})"
    if partial := [s for s in servers.values() if s.degraded]:
        detail += "; down on some replicas: " + "; ".join(
            f"{s.name} on {', '.join(s.down_on)}" for s in partial
        )
    return ToolhostHealth(True, detail, servers)
