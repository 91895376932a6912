"""Gateway-specific wiring of the shared settings: the resources every request may use."""

from __future__ import annotations

from dataclasses import dataclass

import redis
import redis.asyncio as aioredis
from celery import Celery
from psycopg_pool import ConnectionPool

from shared.broker import make_celery
from shared.config import Settings
from shared.db import DictConnection, make_pool, migrate
from shared.rpc.client import RpcClient


@dataclass
class GatewayState:
    """Long-lived clients opened at start-up and closed at shutdown."""

    settings: Settings
    pool: ConnectionPool[DictConnection]
    redis: redis.Redis
    aredis: aioredis.Redis
    celery: Celery
    rpc: RpcClient  # resources requests to the toolhosts

    @classmethod
    def open(cls, settings: Settings) -> GatewayState:
        """Apply migrations and open every client (HTTP app and stdio MCP server alike)."""
        database_url, redis_url = settings.require_urls()
        migrate(settings)
        return cls(
            settings=settings,
            pool=make_pool(database_url, min_size=1, max_size=10),
            redis=redis.Redis.from_url(redis_url, socket_timeout=5, socket_connect_timeout=2),
            aredis=aioredis.Redis.from_url(redis_url, socket_connect_timeout=2),
            celery=make_celery("agentcards-gateway", settings=settings),
            rpc=RpcClient(redis_url, max_connections=16),
        )

    async def close(self) -> None:
        self.pool.close()
        self.redis.close()
        await self.aredis.aclose()
        await self.rpc.aclose()
