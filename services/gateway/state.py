"""Gateway-specific wiring of the shared settings: the resources every request may use."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import psycopg
import redis
import redis.asyncio as aioredis
from celery import Celery
from psycopg_pool import AsyncConnectionPool, ConnectionPool
from redis.asyncio.retry import Retry as AsyncRetry
from redis.backoff import ExponentialBackoff

from services.gateway.outage import DependencyProbe, outage_aware_pool
from shared.auth.cache import PrincipalCache
from shared.broker import make_celery
from shared.capabilities.twins import merge_twins
from shared.clients import FAST_RETRIES, fast_retry
from shared.config import Settings
from shared.db import DictConnection, connect, migrate
from shared.policy.engine import PolicyEngine
from shared.pubsub_hub import PubSubHub
from shared.rpc.client import RpcClient
from shared.rpc.wire import Lines
from shared.tools.watch import ToolsWatch

# A request waits at most this long for a pooled Postgres connection (then 503); when the
# probe (services.gateway.outage) marks Postgres down, waiting requests stop at once.
POOL_TIMEOUT_S = 5.0


# Every tenant event stream holds one pub/sub connection for as long as it is open (a
# waiting request shares the event hub's one), on top of the few the other calls borrow
# for a moment. redis-py's default (100) turned a burst of slow waits into 503s; past this many, a request is refused with
# 503 `unavailable` saying the gateway is at capacity (Redis' own limit is 10,000 clients).
ASYNC_REDIS_CONNECTIONS = 1000
# How long a command on the async client may wait for its reply; blocking reads on it
# (the MCP relay's BLPOP) must block for less, so that Redis always answers first. Set
# here, not left to redis-py, whose default went from none to 5 s in 8.0.
ASYNC_REDIS_SOCKET_TIMEOUT_S = 5.0


@dataclass
class GatewayState:
    """Long-lived clients opened at start-up and closed at shutdown."""

    settings: Settings
    pool: ConnectionPool[DictConnection]
    redis: redis.Redis
    aredis: aioredis.Redis
    celery: Celery
    probe: DependencyProbe
    rpc: RpcClient  # direct tool calls and resources requests to the toolhosts
    # A direct call's batches on the event loop (its admission's, its end's, its answer's
    # stored event): sent raw, half the CPU of a pipeline's execute (shared/rpc/wire.py).
    lines: Lines
    # API key lookups of this process (HTTP and stdio alike), kept a few seconds.
    auth: PrincipalCache = field(default_factory=PrincipalCache)
    # The one pub/sub connection every waiting request follows its execution through.
    event_hub: PubSubHub = field(init=False)
    # The direct calls running in this process, by execution id (ops/direct_call.py).
    direct_flights: dict[str, asyncio.Task[dict[str, Any]]] = field(default_factory=dict)
    # Set when the process begins to stop: the calls it cancels then are its own ending (a
    # replica may take their sessions over), not their clients going away.
    stopping: bool = False
    # Decides scripts and capability runs at submission (the toolhosts decide each tool call).
    policy: PolicyEngine = field(default_factory=lambda: PolicyEngine(None))
    # A few async connections for a hot path's one short read on the event loop (a direct
    # call's tools version: ops/db.on_loop), opened at its first use.
    apool: AsyncConnectionPool[psycopg.AsyncConnection[Any]] | None = None
    # The tools' version as last heard (shared/tools/watch.py): a direct call then reads
    # none. Listening only where something runs it (the HTTP app's lifespan); else silent.
    tools_watch: ToolsWatch = field(init=False)

    def __post_init__(self) -> None:
        self.event_hub = PubSubHub(self.aredis)
        self.tools_watch = ToolsWatch(self.settings.require_urls()[0])

    @classmethod
    def open(cls, settings: Settings, *, policy: PolicyEngine | None = None) -> GatewayState:
        """Apply migrations and open every client (HTTP app and stdio MCP server alike);
        ``policy``: the policy file loaded already (else it is loaded here)."""
        database_url, redis_url = settings.require_urls()
        policy = policy or PolicyEngine(settings.policy_file)
        migrate(settings)
        with connect(database_url) as conn:  # twins stored apart become one family, once
            merge_twins(conn)
        celery = make_celery("agentcards-gateway", settings=settings)
        # No `task-sent` event after each message: a second broker round trip inside every
        # run's publish (~0.45 CPU-ms). Flower lists a run from its receipt by a worker; what
        # waits before that is the queue's length (`agentcards_queue_depth`, Flower's Broker
        # page). The workers keep theirs: Flower knows a batched ingestion only from it
        # (so it does not list the ingestion of direct calls, which the gateway sends).
        celery.conf.task_send_sent_event = False
        # One result backend for every thread: Celery makes one per thread otherwise, and
        # `send_task` touches it (its AsyncResult), so each new worker thread of the pool
        # scanned every installed package's entry points (~5 ms) on its first publish.
        celery.conf.result_backend_thread_safe = True
        # Publishing to a dead broker: fail in about a second (503), never retry for long.
        celery.conf.broker_connection_timeout = 1
        celery.conf.task_publish_retry_policy = {
            "max_retries": 2,
            "interval_start": 0,
            "interval_step": 0.2,
            "interval_max": 0.2,
        }
        probe = DependencyProbe(redis_url=redis_url, database_url=database_url).start()
        return cls(
            settings=settings,
            pool=outage_aware_pool(
                database_url, outage=probe.outage, min_size=1, max_size=10, timeout=POOL_TIMEOUT_S
            ),
            redis=redis.Redis.from_url(
                redis_url, socket_timeout=5, socket_connect_timeout=1, retry=fast_retry()
            ),
            aredis=aioredis.Redis.from_url(
                redis_url,
                max_connections=ASYNC_REDIS_CONNECTIONS,
                socket_timeout=ASYNC_REDIS_SOCKET_TIMEOUT_S,
                socket_connect_timeout=1,
                retry=AsyncRetry(ExponentialBackoff(cap=0.05, base=0.01), FAST_RETRIES),
            ),
            celery=celery,
            probe=probe,
            rpc=RpcClient(redis_url),
            lines=Lines(redis_url, timeout_s=ASYNC_REDIS_SOCKET_TIMEOUT_S),
            policy=policy,
        )

    async def close(self) -> None:
        self.probe.stop()
        self.pool.close()
        if self.apool is not None:
            await self.apool.close()
        self.redis.close()
        await self.event_hub.aclose()
        await self.aredis.aclose()
        await self.lines.aclose()
        await self.rpc.aclose()
