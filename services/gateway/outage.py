"""Is Redis up, is Postgres up: a background probe, so requests fail in milliseconds when not.

Without it a request during an outage waits on client timeouts and retries (measured:
5-27 s) before failing. The probe runs every ``PROBE_EVERY_S`` on its own connections;
requests that need a dependency marked down get 503 + Retry-After at once, and the
gateway recovers by itself on the first probe that succeeds.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import psycopg
import redis
from psycopg_pool import ConnectionPool, PoolTimeout
from starlette.types import ASGIApp, Receive, Scope, Send

from services.gateway.errors import unavailable_response
from shared.db import DictConnection, make_pool, psycopg_url

log = logging.getLogger(__name__)

PROBE_EVERY_S = 0.5
PROBE_TIMEOUT_S = 1.0
# A dependency is marked down after this many failed probes in a row: one slow answer on a
# loaded host is not an outage, and two probes still mark a real one within ~1.5 s.
FAILURES_TO_MARK_DOWN = 2
# A request waiting for a pooled Postgres connection looks at the probe this often.
POOL_WAIT_SLICE_S = 0.25


@dataclass(frozen=True, slots=True)
class Outage:
    """A dependency that is down and why."""

    name: str  # "redis" or "postgres"
    error: str


class DependencyProbe:
    """A daemon thread pinging Redis and Postgres; ``outage()`` says what is down right now."""

    def __init__(self, *, redis_url: str, database_url: str) -> None:
        self._redis = redis.Redis.from_url(
            redis_url,
            socket_timeout=PROBE_TIMEOUT_S,
            socket_connect_timeout=PROBE_TIMEOUT_S,
            retry=None,
        )
        self._database_url = psycopg_url(database_url)
        self._pg: psycopg.Connection[object] | None = None
        self._down: dict[str, str] = {}
        self._failures: dict[str, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="dependency-probe", daemon=True)

    def start(self) -> DependencyProbe:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        self._redis.close()
        if self._pg is not None:
            self._pg.close()

    def outage(self) -> Outage | None:
        """The first dependency down at the last probe, or None."""
        down = dict(self._down)  # swapped whole by the probe thread: no torn reads
        for name, error in down.items():
            return Outage(name, error)
        return None

    def _run(self) -> None:
        while not self._stop.is_set():
            down: dict[str, str] = {}
            try:
                self._redis.ping()
            except redis.RedisError as exc:
                down["redis"] = _short(exc)
            try:
                self._ping_postgres()
            except psycopg.Error as exc:
                down["postgres"] = _short(exc)
                if self._pg is not None:
                    with contextlib.suppress(psycopg.Error):
                        self._pg.close()
                self._pg = None
            for name in ("redis", "postgres"):
                self._failures[name] = self._failures.get(name, 0) + 1 if name in down else 0
            down = {n: e for n, e in down.items() if self._failures[n] >= FAILURES_TO_MARK_DOWN}
            if down.keys() != self._down.keys():
                log.warning("dependencies down: %s", down or "none (recovered)")
            self._down = down
            self._stop.wait(PROBE_EVERY_S)

    def _ping_postgres(self) -> None:
        if self._pg is None or self._pg.closed:
            self._pg = psycopg.connect(
                self._database_url,
                autocommit=True,
                connect_timeout=2,
                options="-c statement_timeout=1000",
            )
        self._pg.execute("SELECT 1")


class OutageAwarePool(ConnectionPool[DictConnection]):
    """A pool whose waiting requests give up once the probe marks Postgres down.

    The guard below refuses requests that start during an outage; this covers those that
    were already waiting for a connection when Postgres went away (they waited out the
    whole pool timeout before: 5 s, measured by the fault suite). The wait is cut into
    slices with a look at the probe between them.
    """

    watching: Callable[[], Outage | None] | None = None  # the probe's ``outage``

    def getconn(self, timeout: float | None = None) -> DictConnection:
        wait = self.timeout if timeout is None else timeout
        deadline = time.monotonic() + wait
        while True:
            left = deadline - time.monotonic()
            try:
                return super().getconn(timeout=max(0.001, min(POOL_WAIT_SLICE_S, left)))
            except PoolTimeout:
                outage = self.watching() if self.watching else None
                if outage is not None and outage.name == "postgres":
                    raise PoolTimeout(f"postgres is down: {outage.error}") from None
                if left <= POOL_WAIT_SLICE_S:
                    raise PoolTimeout(f"couldn't get a connection after {wait:.2f} sec") from None


def outage_aware_pool(
    url: str, *, outage: Callable[[], Outage | None], **kwargs: Any
) -> OutageAwarePool:
    """``make_pool(url, **kwargs)`` whose waiting requests watch ``outage`` (the probe's)."""
    pool = make_pool(url, pool_class=OutageAwarePool, **kwargs)
    assert isinstance(pool, OutageAwarePool)
    pool.watching = outage
    return pool


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".strip(": ")


class OutageGuard:
    """ASGI middleware: API requests get 503 + Retry-After at once while a dependency is down.

    /healthz, /metrics and the docs still answer (they report the outage themselves).
    """

    PREFIXES = ("/v1/", "/mcp")

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and str(scope.get("path", "")).startswith(self.PREFIXES):
            state = getattr(getattr(scope.get("app"), "state", None), "gateway", None)
            outage = state.probe.outage() if state is not None else None
            if outage is not None:
                await unavailable_response(outage.name, outage.error)(scope, receive, send)
                return
        await self.app(scope, receive, send)
