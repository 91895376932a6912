"""The gateway's FastAPI app: REST /v1, health, OpenAPI docs; clients opened in the lifespan."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import redis
from fastapi import FastAPI

from services.gateway.config import GatewayState
from services.gateway.routes import health
from shared.broker import make_celery
from shared.config import Settings, get_settings
from shared.db import make_pool, migrate


def create_app(settings: Settings | None = None) -> FastAPI:
    """Build the app; resources are opened when it starts serving."""
    settings = settings or get_settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        database_url, redis_url = settings.require_urls()
        migrate(settings)
        pool = make_pool(database_url, min_size=1, max_size=10)
        client = redis.Redis.from_url(redis_url, socket_timeout=5, socket_connect_timeout=2)
        app.state.gateway = GatewayState(
            settings=settings,
            pool=pool,
            redis=client,
            celery=make_celery("agentcards-gateway", settings=settings),
        )
        try:
            yield
        finally:
            pool.close()
            client.close()

    app = FastAPI(
        title="AgentCards gateway",
        version="0.1.0",
        description="Run agent-written Python against MCP tools in isolated sandboxes; "
        "reuse what worked.",
        lifespan=lifespan,
    )
    app.include_router(health.router)
    return app


def main() -> None:
    """Serve the gateway with uvicorn on the configured host/port."""
    import uvicorn

    settings = get_settings()
    uvicorn.run(
        create_app(settings),
        host=settings.gateway_host,
        port=settings.gateway_port,
        log_level=settings.log_level.lower(),
    )


if __name__ == "__main__":
    main()
