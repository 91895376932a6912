"""Fixtures of the fault tests: a Redis of their own, which a test may kill and restart."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from deploy.launcher.embedded import EmbeddedRedis, free_port
from tests.conftest import server_dir


@pytest.fixture(scope="module")
def own_redis() -> Iterator[EmbeddedRedis]:
    """A Redis only this module uses (AOF on, as `agentcards up` runs it)."""
    folder = server_dir("fault-redis")
    server = EmbeddedRedis.start(folder, port=free_port(), persist=True)
    yield server
    server.stop()
