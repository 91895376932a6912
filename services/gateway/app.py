"""The gateway's FastAPI app: REST /v1, MCP /mcp, health, OpenAPI docs."""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
from fastapi import FastAPI
from fastapi.middleware.cors import CORSMiddleware

from services.gateway import errors
from services.gateway.auth import AuthGate, auth_off_warning, bind_refusal, keys_exist_now
from services.gateway.body_guard import BodyGuard
from services.gateway.connect import Connector
from services.gateway.flower import FLOWER_CSP, FlowerProxy
from services.gateway.mcp import skill_changes
from services.gateway.mcp.direct import DirectSurface, Listeners
from services.gateway.mcp.errors import http_error_response
from services.gateway.mcp.headers import TrimmedHeaderValues
from services.gateway.mcp.replicas.forwarding import serve_inbox
from services.gateway.mcp.replicas.registry import Registry
from services.gateway.mcp.replicas.router import SessionRouter
from services.gateway.mcp.replicas.vouched import forward_key
from services.gateway.mcp.server import build_mcp_server, mount_mcp
from services.gateway.oauth import ResourceServer
from services.gateway.ops.direct_records import start_drainer
from services.gateway.ops.tool_search import warm_up
from services.gateway.outage import OutageGuard
from services.gateway.rest import (
    approvals,
    audit,
    capabilities,
    capability_admin,
    connections,
    dashboard,
    downstream_resources,
    executions,
    health,
    metrics,
    metrics_summary,
    pii,
    result_cache,
    tenant_events,
    tools,
)
from services.gateway.rest.docs import docs_router
from services.gateway.scopes import ScopeGate
from services.gateway.security_headers import SecurityHeaders
from services.gateway.signin import FLOWER, SignIn
from services.gateway.state import GatewayState
from shared.auth.store import active_keys_exist
from shared.config import Settings, get_settings
from shared.embeddings import EmbeddingServer, get_embedder
from shared.errors import AgentCardsError, ConfigError
from shared.inputs import body_bytes_cap
from shared.logs import configure_logging
from shared.policy.engine import PolicyEngine
from shared.policy.reload import follow_reloads
from shared.runtime import name_async_library
from shared.telemetry import enabled as tracing_enabled
from shared.telemetry import instrument_celery
from shared.telemetry import setup as setup_tracing
from shared.version import VERSION


def create_app(settings: Settings | None = None) -> FastAPI:
    """Build the app; resources are opened when it starts serving."""
    settings = settings or get_settings()
    holder: dict[str, GatewayState] = {}
    listeners = Listeners()  # the clients of /mcp/servers and /mcp told of server changes
    # This replica in the MCP session table every gateway replica shares (mcp/replicas/).
    registry = Registry(
        idle_s=settings.mcp_session_idle_s,
        replica_ttl_s=settings.mcp_replica_ttl_s,
        forward_key=forward_key(settings.secret_key.get_secret_value()),
    )
    mcp = build_mcp_server(lambda: holder["state"], listeners=listeners)
    direct = DirectSurface(lambda: holder["state"], listeners=listeners, registry=registry)
    policy = PolicyEngine(settings.policy_file)  # a bad policy file stops start-up here

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        state = GatewayState.open(settings, policy=policy)
        with state.pool.connection() as conn:
            refusal = bind_refusal(settings, keys_exist=active_keys_exist(conn))
        if refusal:
            await state.close()
            raise ConfigError(refusal)
        holder["state"] = state
        app.state.gateway = state
        threading.Thread(target=warm_up, args=(state,), name="search-warm-up", daemon=True).start()
        # The toolhost and learning workers embed with this process's model (docs/architecture.md).
        embedding_server = EmbeddingServer(
            redis_url=settings.require_urls()[1], embedder=get_embedder(settings)
        ).start()
        drainer = start_drainer(state)  # direct calls' records, to Postgres
        registry.open(state.aredis, lines=state.lines)
        try:
            async with sessions.run(), anyio.create_task_group() as group:
                await direct.serve(group)
                group.start_soon(skill_changes.relay, lambda: holder["state"])
                group.start_soon(follow_reloads, state.aredis, state.policy)
                group.start_soon(registry.heartbeat)
                group.start_soon(state.tools_watch.run)
                group.start_soon(serve_inbox, registry, app, group)
                yield
                state.stopping = True
                await registry.stop()  # before the sessions close: others take them over
                group.cancel_scope.cancel()
        finally:
            drainer.stop()
            embedding_server.stop()
            if flower is not None:
                await flower.aclose()
            await state.close()

    app = FastAPI(
        title="AgentCards gateway",
        version=VERSION,
        description="Run agent-written Python against MCP tools in isolated sandboxes; "
        "reuse what worked.",
        lifespan=lifespan,
        docs_url=None,  # served by rest/docs.py, with a CSP that fits each page
        redoc_url=None,
    )
    errors.install(app)
    docs, page_policies = docs_router(title=app.title, openapi_url=app.openapi_url or "")
    # A person's OAuth token (services/gateway/oauth.py); the identity file is checked here.
    resource = ResourceServer(settings) if settings.oauth else None
    # ... and the dashboard's sign-in there, when the gateway has a client id at the issuer.
    sign_in = SignIn(settings, resource) if resource and settings.oauth_client_id else None
    app.state.signin = sign_in
    # ... and Flower at /flower/, to the people who sign in there with agentcards:admin.
    flower = FlowerProxy(settings, gateway_cookies=sign_in.cookies) if sign_in is not None else None
    # Innermost: a request for another replica's MCP session goes there, past every guard.
    app.add_middleware(SessionRouter, registry=registry)
    if resource is not None:  # it reads /mcp bodies the guard has bounded
        app.add_middleware(ScopeGate, challenge=resource.challenge, mcp_refusal=http_error_response)
    # Outermost last: security headers on everything (refusals too), then CORS, then the guard.
    app.add_middleware(
        BodyGuard,
        max_body_bytes=body_bytes_cap(
            code_bytes=settings.sandbox_code_bytes, args_bytes=settings.sandbox_tool_args_bytes
        ),
    )
    app.add_middleware(OutageGuard)  # refuse before reading bodies while a dependency is down
    # Outside the body and outage guards: no body is read for a caller without a valid key.
    app.add_middleware(
        AuthGate,
        settings=settings,
        mcp_refusal=http_error_response,
        resource=resource,
        sign_in=sign_in,
    )
    if settings.cors_origin_list:  # off by default: no Access-Control-* header at all
        app.add_middleware(
            CORSMiddleware,
            allow_origins=settings.cors_origin_list,
            allow_methods=["GET", "POST", "PATCH", "DELETE"],
            allow_headers=[
                "content-type",
                "authorization",
                "x-api-key",
                "mcp-session-id",
                "dpop",
                "mcp-protocol-version",
            ],
            expose_headers=["mcp-session-id", "www-authenticate"],
        )
    if flower is not None:
        page_policies = {**page_policies, FLOWER + "/": FLOWER_CSP}
    app.add_middleware(SecurityHeaders, page_policies=page_policies)
    app.add_middleware(TrimmedHeaderValues)  # outermost: every layer sees values as HTTP defines
    app.include_router(docs)
    app.include_router(health.router)
    app.include_router(executions.router)
    app.include_router(approvals.router)
    app.include_router(tools.router)
    app.include_router(downstream_resources.router)
    app.include_router(capabilities.router)
    app.include_router(capability_admin.router)
    app.include_router(tenant_events.router)
    app.include_router(result_cache.router)
    app.include_router(metrics.router)
    app.include_router(metrics_summary.router)
    app.include_router(dashboard.router)
    dashboard.mount_static(app)
    app.include_router(audit.router)
    app.include_router(pii.router)
    app.include_router(connections.router)
    sessions = mount_mcp(app, mcp, registry=registry, settings=settings)
    # First, as /mcp (mount_mcp): matching every REST route before costs about 0.5 ms of the
    # event loop per request, more than a direct call's own work here; no REST path is theirs.
    app.router.routes[0:0] = direct.routes()
    if resource is not None:
        app.router.routes.extend(resource.routes())
    if sign_in is not None:
        app.router.routes.extend(sign_in.routes())
    if settings.public_url:  # people connect servers that act for them (connect.py)
        app.router.routes.extend(Connector(settings).routes())
    if flower is not None:
        app.router.routes.extend(flower.routes())
    if tracing_enabled():  # server spans; a caller's `traceparent` header is their parent
        from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor

        FastAPIInstrumentor.instrument_app(
            app, excluded_urls="healthz,readyz,metrics,static", exclude_spans=["receive", "send"]
        )
    return app


def main() -> None:
    """Serve the gateway with uvicorn on the configured host/port."""
    import uvicorn
    import uvicorn.config

    settings = get_settings()
    # Checked before listening, so a refusal is one line and no socket was ever open.
    try:
        refusal = bind_refusal(settings, keys_exist=settings.auth and keys_exist_now(settings))
    except AgentCardsError as exc:  # Postgres unreachable: say so in one line
        refusal = exc.message
    if refusal:
        print(f"error: {refusal}", file=sys.stderr)
        raise SystemExit(2)
    json_logs = settings.log_format == "json"
    if json_logs:  # else uvicorn's own text lines, as always
        configure_logging(level=settings.log_level, log_format="json")
    if setup_tracing("agentcards-gateway"):
        instrument_celery()  # the run message carries the request's trace to the worker
    if warning := auth_off_warning(settings):
        if json_logs:
            logging.getLogger(__name__).warning(warning)
        else:
            print(warning, file=sys.stderr, flush=True)
    try:
        app = create_app(settings)
    except ConfigError as exc:  # the identity or policy file: one line naming file, place, reason
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    name_async_library()  # uvicorn's loop and tasks inherit it
    uvicorn.run(
        app,
        host=settings.gateway_host,
        port=settings.gateway_port,
        log_level=settings.log_level.lower(),
        log_config=None if json_logs else uvicorn.config.LOGGING_CONFIG,
    )


if __name__ == "__main__":
    main()
