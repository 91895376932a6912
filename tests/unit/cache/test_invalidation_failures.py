"""A write's invalidation that fails: retried, then the servers are blocked; reported as a
failure only when even blocking failed (fault-injected stores, no I/O)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest
import redis

from shared.cache import runs
from shared.errors import CacheInvalidationFailed


class Store:
    """Records what reached it; fails ``fail`` times, or always."""

    def __init__(self, *, fail: int | None) -> None:
        self.fail, self.attempts, self.blocked = fail, 0, list[str]()

    @contextmanager
    def connect(self) -> Iterator[Any]:
        yield self

    def commit(self) -> None:
        pass


def _patch(monkeypatch: pytest.MonkeyPatch, store: Store, *, block_fails: bool = False) -> None:
    def invalidate_servers(conn: Store, client: Any, *, servers: list[str]) -> int:
        conn.attempts += 1
        if conn.fail is None or conn.attempts <= conn.fail:
            raise redis.ConnectionError("Redis is restarting")
        return 3

    def block_servers(conn: Store, *, servers: list[str], reason: str) -> None:
        if block_fails:
            raise psycopg.OperationalError("Postgres is down")
        conn.blocked += servers

    monkeypatch.setattr(runs, "invalidate_servers", invalidate_servers)
    monkeypatch.setattr(runs.store, "block_servers", block_servers)
    monkeypatch.setattr(runs.time, "sleep", lambda _s: None)


def test_a_failing_invalidation_is_retried_until_it_succeeds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    store = Store(fail=2)
    _patch(monkeypatch, store)
    count = runs.invalidate_servers_safely(store.connect, None, servers=["files"])  # type: ignore[arg-type]
    assert (count, store.attempts, store.blocked) == (3, 3, [])


def test_an_invalidation_that_keeps_failing_blocks_the_servers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    store = Store(fail=None)
    _patch(monkeypatch, store)
    runs.invalidate_servers_safely(store.connect, None, servers=["files", "files", "git"])  # type: ignore[arg-type]
    assert store.attempts == 1 + len(runs.RETRY_DELAYS_S) and store.blocked == ["files", "git"]


def test_when_even_blocking_fails_the_run_is_not_reported_as_fine(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    store = Store(fail=None)
    _patch(monkeypatch, store, block_fails=True)
    with pytest.raises(CacheInvalidationFailed, match="files") as caught:
        runs.invalidate_servers_safely(store.connect, None, servers=["files"])  # type: ignore[arg-type]
    assert caught.value.details == {"servers": ["files"]}
