"""The toolhost process: MCP sessions + tool sync + the RPC channel + a heartbeat, until SIGTERM."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import sys
import time
import uuid
from collections import defaultdict
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import orjson
import psycopg_pool
import redis
import redis.asyncio as aioredis
import uvloop
from mcp import types

from services.toolhost.approvals import ApprovalDesk
from services.toolhost.direct_tasks import TaskEnds
from services.toolhost.exchange import ExchangeCredential, TokenExchange
from services.toolhost.oauth_connections import OAuthCredential
from services.toolhost.peruser import Credential, PerUserServer
from services.toolhost.privacy import ProgressPrivacy
from services.toolhost.registry import ToolRegistry
from services.toolhost.rpc_server import RpcServer
from services.toolhost.servers import (
    HttpServer,
    OAuthAuth,
    ServerConfig,
    StdioServer,
    UpstreamAuth,
    load_servers,
)
from services.toolhost.sessions import ServerConnection
from services.toolhost.sync import (
    LazyEmbedder,
    SyncResult,
    ToolSpec,
    sync_server_tools,
)
from services.toolhost.upstream import Upstream
from services.toolhost.watch import plan, watch_config
from shared import telemetry, tool_ids
from shared.auth.audit import AuditAction, record_audit
from shared.auth.grants import Grant
from shared.cache.invalidate import Trigger, invalidate
from shared.config import Settings, get_settings
from shared.db import make_pool, migrate
from shared.errors import AgentCardsError
from shared.logs import configure_logging
from shared.policy.engine import PolicyEngine
from shared.policy.reload import follow_reloads
from shared.privacy.keys import PiiKeys
from shared.privacy.sealed import is_sealed, unseal
from shared.queues import SERVER_NOTICES_CHANNEL, TOOLS_CHANGED_CHANNEL, TOOLS_LISTED_CHANNEL
from shared.rpc.events import ToolSchemaChanged
from shared.rpc.heartbeat import (
    HEARTBEAT_EVERY_S,
    HEARTBEAT_TTL_S,
    ToolhostBeat,
    read_toolhost_beats,
    replica_name,
    replicas_ready,
    toolhost_key,
)
from shared.rpc.protocol import RpcRequest
from shared.runtime import freeze_long_lived, name_async_library
from shared.server_states import ServerState
from shared.tools.apps import tool_apps_meta
from shared.tools.servers import (
    forget_replica,
    forget_server,
    mark_removed_servers,
    prune_dead_replicas,
    record_replica_state,
    record_server_info,
    record_tools_ui,
)

log = logging.getLogger("agentcards.toolhost")

DRAIN_TIMEOUT_S = 10.0
POLL_GRACE_S = 2.0  # one BLPOP poll (1 s) plus slack, so the pop loop exits on its own
# Rows of replicas whose heartbeat is gone are pruned this often (their TTL is 5 s).
PRUNE_EVERY_BEATS = HEARTBEAT_TTL_S


def heartbeat_key() -> str:
    """This replica's heartbeat key."""
    return toolhost_key(socket.gethostname(), os.getpid())


def replica_id() -> str:
    """This replica's identity in ``toolhost_servers``: ``<hostname>:<pid>``, as its heartbeat."""
    return replica_name(socket.gethostname(), os.getpid())


class Toolhost:
    """Wires the registry, the server connections, the sync and the RPC server together."""

    def __init__(
        self,
        *,
        settings: Settings,
        servers: dict[str, ServerConfig],
        policy: PolicyEngine | None = None,
    ) -> None:
        database_url, redis_url = settings.require_urls()
        self._settings = settings
        self._policy = policy or PolicyEngine(None)
        self._redis = aioredis.Redis.from_url(redis_url, socket_timeout=10)
        self._sync_redis = redis.Redis.from_url(redis_url, socket_timeout=10)  # cache invalidation
        self._pool = make_pool(database_url, min_size=1, max_size=4)
        self._embedder = LazyEmbedder(settings)
        # Per-server lock: state and tool writes run in threads and must land in order.
        self._db_locks: dict[str, asyncio.Lock] = defaultdict(asyncio.Lock)
        self.upstream = Upstream(
            redis_url=redis_url,
            request_timeout_s=settings.mcp_client_request_timeout_s,
            private=None
            if settings.pii == "off"
            else ProgressPrivacy(settings, self._pool, self._sync_redis),
        )
        self.registry = ToolRegistry()
        self._exchange: TokenExchange | None = None  # made with the first per-person server
        self._configured = dict(servers)  # as the file says (sealed values sealed)
        self.connections = [self._connection(name, config) for name, config in servers.items()]
        for connection in self.connections:
            self.registry.add(connection)
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._applying = asyncio.Lock()
        self.rpc = RpcServer(
            redis_url=redis_url,
            registry=self.registry,
            reply_ttl_s=settings.rpc_reply_ttl_s,
            claim_as=heartbeat_key(),
            on_refusal=self._audit_refusal,
            serving_elsewhere=self._serving_elsewhere,
            policy=self._policy,
            task_ends=TaskEnds(settings, self._pool, self._sync_redis, self._redis),
            # Only a policy file asks for approvals; they keep the call's arguments sealed.
            approvals=ApprovalDesk(
                self._pool,
                timeout_s=settings.approval_timeout_s,
                keys=PiiKeys.from_settings(settings) if self._policy.configured else None,
                redis=self._redis,
            ),
        )
        self._ready = False
        self._started_at = time.time()

    def _connection(self, name: str, config: ServerConfig) -> ServerConnection:
        if isinstance(config, HttpServer) and config.auth is not None:
            return self._per_user(name, config, config.auth)
        return ServerConnection(
            name=name,
            config=self._opened(name, config),
            on_tools=self._on_tools,
            on_state=self._on_state,
            connect_timeout_s=self._settings.mcp_connect_timeout_s,
            upstream=self.upstream,
            on_notice=self._on_notice,
        )

    def _per_user(self, name: str, config: HttpServer, auth: UpstreamAuth) -> PerUserServer:
        """A server that acts for the person calling: a session per person (peruser.py)."""
        keys = PiiKeys.from_settings(self._settings)
        credential: Credential
        if isinstance(auth, OAuthAuth):
            credential = OAuthCredential(
                server=name, config=config, auth=auth, keys=keys, pool=self._pool,
                redis=self._redis, public_url=self._settings.public_url,
            )  # fmt: skip
        else:
            if self._exchange is None:
                secret = self._settings.oauth_client_secret
                self._exchange = TokenExchange(
                    issuer=self._settings.oauth_issuer,
                    client_id=self._settings.oauth_client_id,
                    client_secret=secret.get_secret_value() if secret else None,
                )
            credential = ExchangeCredential(
                server=name, auth=auth, exchange=self._exchange, keys=keys
            )
        opened = self._opened(name, config)
        assert isinstance(opened, HttpServer)
        return PerUserServer(
            name=name,
            config=opened,
            credential=credential,
            on_tools=self._on_tools,
            on_state=self._on_state,
            upstream=self.upstream,
            connect_timeout_s=self._settings.mcp_connect_timeout_s,
            max_sessions=self._settings.upstream_sessions_per_server,
            idle_s=self._settings.upstream_session_idle_s,
        )

    def _opened(self, name: str, config: ServerConfig) -> ServerConfig:
        """``config`` with its sealed secrets (shared/privacy/sealed.py) opened for the session."""
        field = "env" if isinstance(config, StdioServer) else "headers"
        values: dict[str, str] = getattr(config, field)
        if not any(is_sealed(v) for v in values.values()):
            return config
        try:
            keys = PiiKeys.from_settings(self._settings)
            opened = {k: unseal(keys, server=name, name=k, value=v) for k, v in values.items()}
        except AgentCardsError as exc:  # the server starts without it and says why it fails
            log.error("server %s: %s", name, exc.message)
            return config
        return config.model_copy(update={field: opened})

    async def apply_config(self, servers: dict[str, ServerConfig]) -> None:
        """Start the servers a changed config adds, stop those it drops; the rest stay connected."""
        async with self._applying:
            change = plan(self._configured, servers)
            if not change:
                return
            self._configured = dict(servers)
            for name in change.stop:
                connection = next(c for c in self.connections if c.name == name)
                self.registry.remove(name)
                self.connections.remove(connection)
                task = self._tasks.pop(name, None)
                if task is not None:
                    task.cancel()
                    await asyncio.gather(task, return_exceptions=True)
                await self._forget_server(name)
            for name in change.start:
                connection = self._connection(name, servers[name])
                self.connections.append(connection)
                self.registry.add(connection)
                self._tasks[name] = asyncio.create_task(connection.run(), name=f"mcp:{name}")
            await self._mark_removed()
            await self._beat()
            log.info("MCP config applied: started %s, stopped %s", change.start, change.stop)

    async def _forget_server(self, server: str) -> None:
        def write() -> None:
            live = [b.replica for b in read_toolhost_beats(self._sync_redis)]
            with self._pool.connection() as conn:
                forget_server(conn, replica=replica_id(), server=server, live=live)

        await self._server_write(server, write)

    async def _server_write(self, server: str, write: Callable[[], T]) -> T:
        """``write`` of ``server``'s rows in a thread, under the server's lock, which is held
        until the write is in even when the caller is cancelled.

        Cancelling an await of a thread does not stop the thread: a connection cancelled by a
        stop mid-write would otherwise let its write land after the stop's forget (a row of
        a replica that is gone, counted until some replica prunes it).
        """
        async with self._db_locks[server]:
            running = asyncio.ensure_future(asyncio.to_thread(write))
            try:
                return await asyncio.shield(running)
            except asyncio.CancelledError:
                await asyncio.wait({running})
                raise

    async def run(self, stop: asyncio.Event) -> None:
        """Serve until ``stop`` is set, then drain calls and close every session."""
        # Beat before the first state write: other replicas count our rows while we beat.
        await self._beat()
        await self._mark_removed()
        for c in self.connections:
            self._tasks[c.name] = asyncio.create_task(c.run(), name=f"mcp:{c.name}")
        serving = asyncio.create_task(self.rpc.serve(), name="rpc")
        beating = asyncio.create_task(self._heartbeat_loop(), name="heartbeat")
        reloads = asyncio.create_task(follow_reloads(self._redis, self._policy), name="policy")
        config = self._settings.mcp_config
        watching = asyncio.create_task(
            watch_config(config, self.apply_config) if config else asyncio.Event().wait(),
            name="watch-config",
        )
        try:
            # Ready once every server had its first connection attempt (success or not).
            connected = asyncio.create_task(self._first_attempts())
            stopped = asyncio.create_task(stop.wait())
            await asyncio.wait({connected, stopped}, return_when=asyncio.FIRST_COMPLETED)
            connected.cancel()
            stopped.cancel()
            self._ready = True
            await self._beat()
            states = {c.name: c.state for c in self.connections}
            log.info("toolhost ready (pid %d): servers %s", os.getpid(), states)
            await stop.wait()
        finally:
            self.rpc.stop()
            # No longer popping: other replicas must stop handing calls to this one.
            self._ready = False
            with contextlib.suppress(Exception):
                await self._beat()
            await asyncio.wait({serving}, timeout=POLL_GRACE_S)
            await self.rpc.drain(timeout_s=DRAIN_TIMEOUT_S)
            watching.cancel()
            tasks = list(self._tasks.values())
            for task in [*tasks, serving, beating, reloads]:
                task.cancel()
            await asyncio.gather(
                *tasks, serving, beating, watching, reloads, return_exceptions=True
            )
            await self._forget_replica()
            await self._redis.delete(heartbeat_key())
            await self.rpc.aclose()
            await self.upstream.aclose()
            await self._redis.aclose()
            self._sync_redis.close()
            self._pool.close()
            log.info("toolhost stopped after %d calls", self.rpc.handled)

    async def _mark_removed(self) -> None:
        """Before connecting: servers that left the config must not look ready (ghosts)."""
        configured = [c.name for c in self.connections]

        def write() -> list[str]:
            live = [b.replica for b in read_toolhost_beats(self._sync_redis)]
            with self._pool.connection() as conn:
                removed = mark_removed_servers(conn=conn, configured=configured, live=live)
                conn.commit()
                for server in removed:  # their cached results describe tools that are gone
                    invalidate(
                        conn, self._sync_redis, trigger=Trigger.SERVER_REMOVED,
                        scope=f"server:{server}", servers=[server],
                    )  # fmt: skip
                return removed

        try:
            removed = await asyncio.to_thread(write)
        except Exception:  # the servers still connect; the next start tries again
            log.exception("marking the servers that left the configuration failed")
            return
        if removed:
            log.info("servers no longer configured, their tools unavailable: %s", removed)

    async def _first_attempts(self) -> None:
        for connection in self.connections:
            await connection.first_attempt_done.wait()

    async def _forget_replica(self) -> None:
        """On a clean stop, this replica's rows go: its servers' states are the others'."""

        def write() -> list[str]:
            live = [b.replica for b in read_toolhost_beats(self._sync_redis)]
            with self._pool.connection() as conn:
                return forget_replica(conn, replica=replica_id(), live=live)

        try:
            changed = await asyncio.to_thread(write)
        except Exception:  # the others prune the rows once our heartbeat expires
            log.exception("removing this replica's server states failed")
            return
        if changed:
            log.info("servers no other replica has ready: %s", changed)

    async def _heartbeat_loop(self) -> None:
        beats = 0
        reconciling: asyncio.Task[None] | None = None
        try:
            while True:
                try:
                    await self._beat()
                except Exception as exc:  # a Redis blip must not kill the process
                    log.warning("heartbeat failed: %s", exc)
                # Reconciling reads Postgres (the prune) through a worker thread: with Postgres
                # down it waits for the pool's timeout. The beat must not wait with it, or the
                # replica looks dead after HEARTBEAT_TTL_S and its calls in flight end
                # tool_unavailable. One reconcile at a time; a beat that finds one still
                # running skips its own.
                if reconciling is None or reconciling.done():
                    reconciling = asyncio.create_task(
                        self._reconcile_logged(prune=beats % PRUNE_EVERY_BEATS == 0),
                        name="reconcile",
                    )
                beats += 1
                await asyncio.sleep(HEARTBEAT_EVERY_S)
        finally:
            if reconciling is not None:
                reconciling.cancel()

    async def _reconcile_logged(self, *, prune: bool) -> None:
        try:
            await self._reconcile(prune=prune)
        except Exception as exc:  # Redis or Postgres blips must not kill the process
            log.warning("reconciling replicas failed: %s", exc)

    async def _reconcile(self, *, prune: bool) -> None:
        """What other replicas' heartbeats imply: calls forwarded for a server no live replica
        has ready go back to be answered, and (``prune``) dead replicas' rows stop counting."""
        beats = await asyncio.to_thread(read_toolhost_beats, self._sync_redis)
        stranded = [c.name for c in self.connections if not replicas_ready(beats, c.name)]
        await self.rpc.requeue_stranded(stranded)
        if not prune:
            return

        def write() -> list[str]:
            with self._pool.connection() as conn:
                return prune_dead_replicas(conn, live=[b.replica for b in beats])

        changed = await asyncio.to_thread(write)
        if changed:
            log.info("pruned the states of replicas without a heartbeat; changed: %s", changed)

    async def _serving_elsewhere(self, server: str) -> bool:
        """Whether another live replica has ``server`` ready (by its heartbeat)."""
        beats = await asyncio.to_thread(read_toolhost_beats, self._sync_redis)
        return any(r != replica_id() for r in replicas_ready(beats, server))

    def _audit_refusal(
        self, request: RpcRequest, reason: str, grant: Grant | None, refusal: dict[str, Any]
    ) -> None:
        """A call refused as outside its grant or by policy goes to the audit log (in the
        background: the refusal is already on its way back; a lost row is logged, never fatal)."""

        def write() -> None:
            try:
                execution_id: str | None = str(uuid.UUID(request.execution_id))
            except ValueError:  # a forged message may name anything
                execution_id = None
            try:
                with self._pool.connection() as conn:
                    record_audit(
                        conn,
                        # No grant: nobody's tenant; the operator sees it in `audit tail`.
                        tenant_id=grant.tenant_id if grant else "",
                        key_id=grant.key_id if grant else None,
                        user_id=grant.user if grant else None,
                        action=AuditAction.TOOL_CALL_REFUSED,
                        execution_id=execution_id,
                        args=request.args,
                        details={
                            "tool": request.tool,
                            "reason": reason,
                            "execution": request.execution_id[:100],
                            **refusal,
                        },
                    )
                    conn.commit()
            except Exception:
                log.exception("could not audit the refused call %s", request.call_id)

        asyncio.get_running_loop().run_in_executor(None, write)

    async def _beat(self) -> None:
        beat = ToolhostBeat(
            pid=os.getpid(),
            host=socket.gethostname(),
            started_at=self._started_at,
            ready=self._ready,
            inflight=self.rpc.inflight,
            handled=self.rpc.handled,
            servers={b.name: b.state for b in self.registry.backends()},
            errors={c.name: c.last_error for c in self.connections if c.last_error},
        )
        await self._redis.set(heartbeat_key(), beat.encode(), ex=HEARTBEAT_TTL_S)

    async def _on_notice(self, server: str, notice: dict[str, str]) -> None:
        """A subscribed resource or a server's resources/prompts list changed: the gateways
        tell their direct clients."""
        payload = orjson.dumps({"server": server, **notice})
        try:
            await self._redis.publish(SERVER_NOTICES_CHANNEL, payload)
        except redis.RedisError as exc:  # best effort, as tool list changes
            log.warning("notice %s of %s not published: %s", notice, server, exc)

    async def _on_state(self, server: str, state: str, error: str | None) -> None:
        connection = next((c for c in self.connections if c.name == server), None)
        if connection is None:  # it left the config while this report was on its way
            return
        config = connection.config
        info = connection.server_info if state == ServerState.READY else None

        def write() -> None:
            live = [b.replica for b in read_toolhost_beats(self._sync_redis)]
            with self._pool.connection() as conn:
                record_replica_state(
                    conn,
                    replica=replica_id(),
                    server=server,
                    transport=config.transport,
                    config=config.public_config(),
                    state=state,
                    last_error=error,
                    live=live,
                )
                if info is not None:  # the revision and instructions /v1/servers and
                    record_server_info(conn, server=server, info=info)  # /mcp/servers show

        await self._server_write(server, write)
        # Beat now, not in up to 5 s: `agentcards up` shows each server's state as it changes.
        await self._beat()

    async def _on_tools(self, server: str, tools: list[types.Tool]) -> None:
        # A tool whose name breaks the MCP tool-name rule could never be called through the
        # gateway or the bridge, so it is not listed either.
        skipped = [t.name for t in tools if not tool_ids.is_tool_name(t.name)]
        if skipped:
            log.warning(
                "server %s: not listing tools %s: %s", server, skipped[:10], tool_ids.TOOL_NAME_RULE
            )
        valid = [t for t in tools if tool_ids.is_tool_name(t.name)]
        # Agent code writes `get-sum` as mcp.<server>.get_sum; two names that read the same
        # could not be told apart, so the first one the server lists keeps the name.
        clashes = tool_ids.python_name_clashes(t.name for t in valid)
        for kept, dropped in clashes.items():
            log.warning(
                "server %s: not listing tools %s: they read as mcp.%s.%s in agent code, "
                "like %r, which the server lists first (rename them on the server)",
                server, dropped, tool_ids.python_name(server), tool_ids.python_name(kept), kept,
            )  # fmt: skip
        hidden = {name for dropped in clashes.values() for name in dropped}
        connection = next((c for c in self.connections if c.name == server), None)
        if connection is None:  # it left the config while its tools were being listed
            return
        block = connection.config.agentcards
        # MCP Apps: each tool's UI, kept beside the server's handshake answer (its READY
        # report writes that whole; a later list change writes the UIs alone).
        tools_ui = {
            t.name: ui for t in valid if t.name not in hidden and (ui := tool_apps_meta(t.meta))
        }
        if connection.server_info is not None:
            connection.server_info["toolsUi"] = tools_ui
        specs = [
            ToolSpec(
                name=t.name,
                description=t.description or "",
                input_schema=t.input_schema,
                annotations=t.annotations.model_dump(by_alias=True, exclude_none=True)
                if t.annotations
                else {},
                output_schema=t.output_schema,
                cache_override=block.cache_override(t.name),
                pii_kinds=block.pii_kinds(t.name),
            )
            for t in valid
            if t.name not in hidden
        ]

        def write() -> SyncResult:
            with self._pool.connection() as conn:
                synced = sync_server_tools(
                    conn=conn,
                    server=server,
                    tools=specs,
                    embed=lambda texts: self._embedder.embed(conn=conn, texts=texts),
                )
                record_tools_ui(conn, server=server, tools_ui=tools_ui)
                return synced

        try:
            result = await _retrying_pool_timeouts(
                lambda: self._server_write(server, write), what=f"syncing {server}'s tools"
            )
        except Exception:
            # The session keeps serving calls; the next connect or list_changed syncs again.
            log.exception("syncing the tools of %s into Postgres failed", server)
            return
        await self._invalidate_changed(result)
        now = time.time()
        for tool_id, old, new in result.schema_changes:
            event = ToolSchemaChanged(
                tool_id=tool_id, server=server, old_hash=old, new_hash=new, at=now
            )
            await self._redis.publish(TOOLS_CHANGED_CHANNEL, event.encode())
        if result.added or result.schema_changes:  # direct MCP clients get tools/list_changed
            await self._redis.publish(TOOLS_LISTED_CHANNEL, server)
        log.info(
            "synced %s: %d tools (%d new, %d schema changes, %d embedded)",
            server, len(specs), len(result.added), len(result.schema_changes), result.embedded,
        )  # fmt: skip

    async def _invalidate_changed(self, result: SyncResult) -> None:
        """Cached results that used a changed or vanished tool are dropped, each logged."""
        changes = [
            (Trigger.SCHEMA_CHANGE if new else Trigger.TOOL_REMOVED, tool_id)
            for tool_id, _, new in result.schema_changes
        ] + [(Trigger.POLICY_CHANGE, tool_id) for tool_id in result.policy_changes]
        if not changes:
            return

        def run() -> None:
            with self._pool.connection() as conn:
                for trigger, tool_id in changes:
                    invalidate(
                        conn, self._sync_redis, trigger=trigger, scope=f"tool:{tool_id}",
                        tools=[tool_id],
                    )  # fmt: skip

        try:
            await asyncio.to_thread(run)
        except Exception:  # the sync itself stands; the entries still expire by TTL
            log.exception("invalidating the cache for %s's changed tools failed", result.server)


def check() -> int:
    """`--check` (container healthcheck): 0 when a replica on this host has a ready heartbeat."""
    import redis

    settings = get_settings()
    client = redis.Redis.from_url(settings.require_urls()[1], socket_timeout=3)
    if any(beat.ready for beat in read_toolhost_beats(client, host=socket.gethostname())):
        return 0
    print(f"toolhost: no ready heartbeat for {socket.gethostname()}", file=sys.stderr)
    return 1


T = TypeVar("T")

# Every server's first sync embeds its tools on a pooled connection, and the first embedding
# loads the model, which on a loaded machine outlasts the pool's 30 s wait: a sync that got no
# connection is tried again rather than left undone until the server reconnects.
SYNC_ATTEMPTS = 3


async def _retrying_pool_timeouts(write: Callable[[], Awaitable[T]], *, what: str) -> T:
    """``await write()``, again after a pool timeout (up to SYNC_ATTEMPTS times)."""
    for attempt in range(1, SYNC_ATTEMPTS + 1):
        try:
            return await write()
        except psycopg_pool.PoolTimeout:
            if attempt == SYNC_ATTEMPTS:
                raise
            log.warning("%s found no free database connection; trying again", what)
    raise AssertionError("unreachable")


def main() -> None:
    """Entry point of ``python -m services.toolhost``; exit code 2 on a configuration error."""
    if sys.argv[1:] == ["--check"]:
        sys.exit(check())
    try:
        settings = get_settings()
    except AgentCardsError as exc:
        print(f"toolhost: {exc.message}", file=sys.stderr)
        sys.exit(2)
    configure_logging(level=settings.log_level, log_format=settings.log_format)
    telemetry.setup("agentcards-toolhost")
    try:
        settings.require_urls()
        servers = load_servers(settings.mcp_config)
        # A bad policy file stops start-up (PolicyInvalid: file, line, reason).
        policy = PolicyEngine(settings.policy_file)
        migrate(settings)
    except AgentCardsError as exc:
        print(f"toolhost: {exc.type}: {exc.message}", file=sys.stderr)
        sys.exit(2)
    # uvloop (uvicorn's, as the gateway runs on): a tenth less CPU per call than asyncio's own
    # loop, in the Redis round trips and the stdio pipes of every call.
    name_async_library()
    freeze_long_lived("toolhost")  # its imports stay: no full collection walks them again
    with (
        contextlib.suppress(KeyboardInterrupt),
        asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner,
    ):
        runner.run(_run(settings=settings, servers=servers, policy=policy))


async def _run(
    *, settings: Settings, servers: dict[str, ServerConfig], policy: PolicyEngine
) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await Toolhost(settings=settings, servers=servers, policy=policy).run(stop)
