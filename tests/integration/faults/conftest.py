"""Fixtures of the fault tests: a Redis of their own, which a test may kill and restart."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from deploy.launcher.embedded import EmbeddedPostgres, EmbeddedRedis, free_port
from tests.conftest import server_dir
from tests.integration.mcp_servers import example_server
from tests.stack import E2EStack, running_stack


@pytest.fixture(scope="module")
def own_redis() -> Iterator[EmbeddedRedis]:
    """A Redis only this module uses (AOF on, as `agentcards up` runs it)."""
    folder = server_dir("fault-redis")
    server = EmbeddedRedis.start(folder, port=free_port(), persist=True)
    yield server
    server.stop()


@contextlib.contextmanager
def fault_stack(
    embedded_pg: EmbeddedPostgres, redis_server: EmbeddedRedis, tmp: Path, **settings: Any
) -> Iterator[E2EStack]:
    """A stack serving the example server, with limits short enough to see faults end.

    A run may take 30 s (60 at most); an unacked message comes back after 130 s, and a
    queued execution nobody takes ends after 120 s.
    """
    with running_stack(
        embedded_pg,
        redis_server,
        tmp,
        {"example": example_server(tmp)},
        **{
            "sandbox_wall_time_s": 30,
            "sandbox_max_wall_time_s": 60,
            "celery_visibility_timeout_s": 130,
            "execution_queue_max_s": 120,
            **settings,
        },
    ) as running:
        yield running


@pytest.fixture(scope="module")
def stack(
    embedded_pg: EmbeddedPostgres,
    own_redis: EmbeddedRedis,
    tmp_path_factory: pytest.TempPathFactory,
    request: pytest.FixtureRequest,
) -> Iterator[E2EStack]:
    """The module's fault stack on its own Redis; the module's ``STACK_SETTINGS`` add to it.

    Its own stack, not a shared one: the tests kill its workers, toolhost and Redis."""
    tmp = tmp_path_factory.mktemp(request.module.__name__.rsplit(".", 1)[-1])
    settings = getattr(request.module, "STACK_SETTINGS", {})
    with fault_stack(embedded_pg, own_redis, tmp, **settings) as running:
        running.redis_holder = own_redis  # type: ignore[attr-defined]  # a test may restart it
        yield running
    running.redis_holder.stop()  # the restarted one, if a test restarted it
