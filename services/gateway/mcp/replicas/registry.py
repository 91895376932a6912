"""Which replica owns each MCP session, and which replicas are alive (Redis)."""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import anyio
import redis.asyncio as aioredis
from redis.exceptions import RedisError

from shared.auth.principal import Principal
from shared.queues import (
    MCP_SESSION_BYTES_GAUGE,
    MCP_SESSIONS_GAUGE,
    mcp_events_key,
    mcp_replica_key,
    mcp_session_key,
    mcp_set_key,
)
from shared.rpc.wire import Lines

log = logging.getLogger(__name__)

# Moves a session to a new owner only if the old one still holds it: of two replicas that
# noticed the same death at once, one wins and the other forwards to it.
_TAKE_OVER = """
if redis.call('hget', KEYS[1], 'owner') == ARGV[1] then
  redis.call('hset', KEYS[1], 'owner', ARGV[2])
  return 1
end
return 0
"""
# Forgets a session only if this replica still owns it (one that took it over keeps it).
_FORGET = """
if redis.call('hget', KEYS[1], 'owner') == ARGV[1] then
  return redis.call('del', KEYS[1])
end
return 0
"""


def session_ttl_s(*, idle_s: float, replica_ttl_s: float) -> int:
    """How long a session's keys live past their last renewal: its idle time, and then some
    for a replica that took it over to renew them."""
    return int(idle_s + 2 * replica_ttl_s) + 1


def holder_of(principal: Principal) -> str:
    """Whose a session is: the key that opened it, else the person (tenant and subject), else
    the tenant (no key in use: the anonymous caller). Only that holder may use the session,
    on any replica: a session id is no credential (the MCP spec's session-hijacking advice)."""
    if principal.key_id is not None:
        return f"key:{principal.key_id}"
    if principal.user is not None:
        return f"user:{principal.tenant_id}:{principal.user}"
    return f"tenant:{principal.tenant_id}"


@dataclass(frozen=True)
class SessionRecord:
    """What Redis knows of a session: its owner, its endpoint, its opening request, and its
    holder (``holder_of``; empty for a record that names none: nobody may use it)."""

    owner: str
    path: str
    init: bytes
    holder: str


@dataclass
class Registry:
    """This replica's identity and heartbeat, and the session table all replicas share.

    A session's key lives ``idle_s`` past its owner's last heartbeat renewal of it, so the
    keys of a replica that died unnoticed go too.
    """

    idle_s: float
    replica_ttl_s: float
    # Signs the requests forwarded between replicas (``vouched.forward_key``).
    forward_key: bytes = field(default=b"", repr=False)
    # Host and pid first, as the toolhost's heartbeat names a replica: an operator (or a
    # test) can tell which process owns a session.
    replica_id: str = field(
        default_factory=lambda: f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
    )
    # The sessions this replica runs, each with what ends it here.
    local: dict[str, Callable[[], Awaitable[None]]] = field(default_factory=dict)
    # ... and each one's holder (``holder_of``).
    holders: dict[str, str] = field(default_factory=dict)
    # Set when this replica shuts down: its sessions stay registered, for another to take over.
    stopping: bool = False
    _redis: aioredis.Redis | None = None
    # Sends the sessions' stored events (one batch per event: ``events.RedisEventStore``).
    lines: Lines | None = None

    @property
    def redis(self) -> aioredis.Redis:
        if self._redis is None:
            raise RuntimeError("the replica registry is not running")
        return self._redis

    def open(self, redis: aioredis.Redis, *, lines: Lines | None = None) -> None:
        self._redis = redis
        self.lines = lines

    async def heartbeat(self) -> None:
        """Say this replica is alive and keep its sessions' keys, every third of the TTL."""
        redis = self.redis
        ttl_ms = int(self.replica_ttl_s * 1000)
        while True:
            try:
                async with redis.pipeline(transaction=False) as pipe:
                    pipe.set(mcp_replica_key(self.replica_id), b"1", px=ttl_ms)
                    pipe.hset(MCP_SESSIONS_GAUGE, self.replica_id, len(self.local))
                    for session_id in list(self.local):
                        pipe.expire(mcp_session_key(session_id), self.session_ttl_s)
                        pipe.expire(mcp_events_key(session_id), self.session_ttl_s)
                        pipe.expire(mcp_set_key(session_id), self.session_ttl_s)
                    await pipe.execute()
                await self._prune_gauges()
                await self._survey()
            except RedisError as exc:  # the outage guard answers requests meanwhile
                log.warning("replica heartbeat not written: %s", exc)
            await anyio.sleep(self.replica_ttl_s / 3)

    async def _survey(self) -> None:
        """Report the bytes Redis holds for this replica's sessions, and end here the sessions
        another replica took over (this one stalled past its TTL and was taken for dead): one
        session, one owner."""
        sessions = list(self.local)
        async with self.redis.pipeline(transaction=False) as pipe:
            for session_id in sessions:
                pipe.hget(mcp_session_key(session_id), "owner")
                for key in (mcp_session_key, mcp_events_key, mcp_set_key):
                    pipe.memory_usage(key(session_id))
            found = await pipe.execute()
        held = sum(size for size in found if isinstance(size, int))
        await self.redis.hset(MCP_SESSION_BYTES_GAUGE, self.replica_id, held)
        for session_id, owner in zip(sessions, found[::4], strict=True):
            if owner is not None and owner.decode() != self.replica_id:
                log.warning("MCP session %s was taken over by %s", session_id[:8], owner.decode())
                self.holders.pop(session_id, None)
                if (end := self.local.pop(session_id, None)) is not None:
                    await end()

    async def _prune_gauges(self) -> None:
        """Drop the session counts and bytes of replicas that died without a word."""
        keys: list[bytes] = await self.redis.hkeys(MCP_SESSIONS_GAUGE)  # type: ignore[assignment]
        counted = [r.decode() for r in keys]
        if not counted:
            return
        async with self.redis.pipeline(transaction=False) as pipe:
            for replica in counted:
                pipe.exists(mcp_replica_key(replica))
            alive = await pipe.execute()
        if dead := [r for r, live in zip(counted, alive, strict=True) if not live]:
            await self.redis.hdel(MCP_SESSIONS_GAUGE, *dead)
            await self.redis.hdel(MCP_SESSION_BYTES_GAUGE, *dead)

    async def stop(self) -> None:
        """A replica that stops says so: its sessions are taken over at once."""
        self.stopping = True
        if self._redis is not None:
            with anyio.CancelScope(shield=True):
                with contextlib.suppress(RedisError):
                    await self._redis.delete(mcp_replica_key(self.replica_id))
                    await self._redis.hdel(MCP_SESSIONS_GAUGE, self.replica_id)
                    await self._redis.hdel(MCP_SESSION_BYTES_GAUGE, self.replica_id)

    @property
    def session_ttl_s(self) -> int:
        return session_ttl_s(idle_s=self.idle_s, replica_ttl_s=self.replica_ttl_s)

    async def register(
        self,
        session_id: str,
        *,
        path: str,
        init: bytes,
        holder: str,
        end: Callable[[], Awaitable[None]],
    ) -> None:
        """This replica opened ``session_id`` (at ``path``) for ``holder`` with the request
        ``init``; ``end`` ends it here."""
        self.local[session_id] = end
        self.holders[session_id] = holder
        key = mcp_session_key(session_id)
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.hset(
                key,
                mapping={"owner": self.replica_id, "path": path, "init": init, "holder": holder},
            )
            pipe.expire(key, self.session_ttl_s)
            await pipe.execute()

    async def forget(self, session_id: str) -> None:
        """The session ended here: it ends everywhere (unless another replica took it over,
        or this one is shutting down: then another takes it over)."""
        self.local.pop(session_id, None)
        self.holders.pop(session_id, None)
        if self.stopping:
            return
        await self.redis.eval(_FORGET, 1, mcp_session_key(session_id), self.replica_id)  # type: ignore[misc]

    async def record(self, session_id: str) -> SessionRecord | None:
        found: dict[bytes, bytes] = await self.redis.hgetall(mcp_session_key(session_id))  # type: ignore[assignment]
        if not found or b"owner" not in found:
            return None
        return SessionRecord(
            owner=found[b"owner"].decode(),
            path=found.get(b"path", b"").decode(),
            init=found.get(b"init", b""),
            holder=found.get(b"holder", b"").decode(),
        )

    async def alive(self, replica_id: str) -> bool:
        return replica_id == self.replica_id or bool(
            await self.redis.exists(mcp_replica_key(replica_id))
        )

    async def take_over(self, session_id: str, *, dead_owner: str) -> bool:
        """Claim a dead replica's session; False when another replica claimed it first."""
        key = mcp_session_key(session_id)
        taken = await self.redis.eval(_TAKE_OVER, 1, key, dead_owner, self.replica_id)  # type: ignore[misc]
        return bool(taken)
