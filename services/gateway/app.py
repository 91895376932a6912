"""The gateway's FastAPI app: REST /v1, MCP /mcp, health, OpenAPI docs."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from services.gateway import errors
from services.gateway.body_guard import BodyGuard
from services.gateway.config import GatewayState
from services.gateway.mcp_server import build_mcp_server, mount_mcp
from services.gateway.routes import (
    capabilities,
    dashboard,
    executions,
    health,
    metrics,
    resources,
    tools,
)
from services.gateway.search import warm_up
from shared.config import Settings, get_settings
from shared.inputs import body_bytes_cap


def create_app(settings: Settings | None = None) -> FastAPI:
    """Build the app; resources are opened when it starts serving."""
    settings = settings or get_settings()
    holder: dict[str, GatewayState] = {}
    mcp = build_mcp_server(lambda: holder["state"])

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        state = GatewayState.open(settings)
        holder["state"] = state
        app.state.gateway = state
        threading.Thread(target=warm_up, args=(state,), name="search-warm-up", daemon=True).start()
        try:
            async with mcp.session_manager.run():
                yield
        finally:
            await state.close()

    app = FastAPI(
        title="AgentCards gateway",
        version="0.1.0",
        description="Run agent-written Python against MCP tools in isolated sandboxes; "
        "reuse what worked.",
        lifespan=lifespan,
    )
    errors.install(app)
    app.add_middleware(
        BodyGuard,
        max_body_bytes=body_bytes_cap(
            code_bytes=settings.sandbox_code_bytes, args_bytes=settings.sandbox_tool_args_bytes
        ),
    )
    app.include_router(health.router)
    app.include_router(executions.router)
    app.include_router(tools.router)
    app.include_router(resources.router)
    app.include_router(capabilities.router)
    app.include_router(metrics.router)
    app.include_router(dashboard.router)
    mount_mcp(app, mcp, host=settings.gateway_host)
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
