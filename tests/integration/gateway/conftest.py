"""A gateway app bound to this test's real database and Redis."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pytest
import redis
from fastapi.testclient import TestClient

from services.gateway.app import create_app
from shared.config import Settings
from shared.executions.liveness import read_sandbox_beats
from shared.queues import Queue
from tests.harness import Proc


@pytest.fixture
def client(settings: Settings) -> Iterator[TestClient]:
    # A loopback client, as on the machine that runs the stack (/healthz is open to it).
    with TestClient(create_app(settings), client=("127.0.0.1", 50000)) as test_client:
        yield test_client


@pytest.fixture
def sandbox_worker(settings: Settings, celery_worker: Callable[..., Proc]) -> Proc:
    """A real sandbox worker with a live heartbeat: /healthz is 503 without one."""
    return start_sandbox_worker(settings, celery_worker)


def start_sandbox_worker(settings: Settings, celery_worker: Callable[..., Proc]) -> Proc:
    """Start a sandbox worker and wait for its heartbeat."""
    worker = celery_worker("workers.sandbox.celery_app", Queue.EXECUTIONS.value)
    client = redis.Redis.from_url(settings.redis_url or "")
    deadline = time.monotonic() + 90
    while not read_sandbox_beats(client):
        assert worker.proc.poll() is None, worker.log()[-3000:]
        assert time.monotonic() < deadline, "no sandbox worker heartbeat"
        time.sleep(0.1)
    return worker
