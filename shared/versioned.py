"""Per-process, per-database caches of data a version in the database vouches for (search's
indexes, the tools' rows a run reads)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar

import psycopg

from shared.db import database_key

T = TypeVar("T")


class VersionedCache(Generic[T]):
    """``load(conn)`` per database, kept while the version the caller read stays the same.

    The caller reads the version (with its other statements) before ``get``; the load
    runs after it, so a write committing in between makes the next call load once
    more and never keeps data older than its version.
    """

    def __init__(self, load: Callable[[psycopg.Connection[Any]], T]) -> None:
        self._load = load
        self._lock = threading.Lock()
        self._by_db: dict[str, tuple[Any, T]] = {}

    def get(self, conn: psycopg.Connection[Any], *, version: Any) -> T:
        """The data of ``conn``'s database as of ``version``."""
        key = database_key(conn)
        with self._lock:
            cached = self._by_db.get(key)
        if cached is not None and cached[0] == version:
            return cached[1]
        value = self._load(conn)
        with self._lock:
            self._by_db[key] = (version, value)
        return value

    def held(self, conn: psycopg.AsyncConnection[Any], *, version: Any) -> T | None:
        """The data of ``conn``'s database as of ``version`` when it is held already (None:
        ``get`` would load it): for a caller on the event loop, which cannot load."""
        return self.held_at(database_key(conn), version=version)

    def held_at(self, key: str, *, version: Any) -> T | None:
        """``held`` for the database ``key`` names (``shared.db.database_key``)."""
        with self._lock:
            cached = self._by_db.get(key)
        return cached[1] if cached is not None and cached[0] == version else None

    def current(self, conn: psycopg.Connection[Any], *, version: Any) -> bool:
        """True when ``get`` with this version would not load."""
        with self._lock:
            cached = self._by_db.get(database_key(conn))
        return cached is not None and cached[0] == version

    def clear(self) -> None:
        with self._lock:
            self._by_db.clear()
