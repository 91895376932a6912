"""Per-process cache of key lookups, so authenticating a request costs a dict lookup.

Entries live ``CACHE_TTL_S`` seconds: a revoked key (or a first key created, which
turns authentication on) takes effect on every process within that time.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

import psycopg

from shared.auth.keys import hash_key, looks_like_key
from shared.auth.principal import Principal
from shared.auth.store import active_keys_exist, principal_for_hash

CACHE_TTL_S = 5.0
# Distinct keys remembered (valid and unknown alike); an unknown well-formed key is
# remembered too, so a client retrying a bad key costs no query per request.
CACHE_SIZE = 4096

ConnectionFactory = Callable[[], AbstractContextManager[psycopg.Connection[Any]]]
MISSING = object()  # "not cached": distinct from a cached None (unknown key)


class PrincipalCache:
    """Bearer token → Principal (or None), and "does any key exist?", each kept for a TTL."""

    def __init__(self, *, ttl_s: float = CACHE_TTL_S, size: int = CACHE_SIZE) -> None:
        self.ttl_s = ttl_s
        self.size = size
        self._lock = threading.Lock()
        self._principals: OrderedDict[str, tuple[float, Principal | None]] = OrderedDict()
        self._keys_exist: tuple[float, bool] | None = None

    def cached(self, token: str) -> Principal | object | None:
        """The cached answer for ``token``, or ``MISSING`` when it must be looked up."""
        if not looks_like_key(token):
            return None  # no lookup for something that cannot be a key
        now = time.monotonic()
        with self._lock:
            entry = self._principals.get(hash_key(token))
            if entry is None or entry[0] <= now:
                return MISSING
            return entry[1]

    def lookup(self, token: str, *, connect: ConnectionFactory) -> Principal | None:
        """The principal of ``token`` (None: unknown, revoked or malformed), from cache or Postgres."""
        found = self.cached(token)
        if found is not MISSING:
            return found  # type: ignore[return-value]
        digest = hash_key(token)
        with connect() as conn:
            principal = principal_for_hash(conn, key_hash=digest)
        with self._lock:
            self._principals[digest] = (time.monotonic() + self.ttl_s, principal)
            self._principals.move_to_end(digest)
            while len(self._principals) > self.size:
                self._principals.popitem(last=False)
        return principal

    def cached_keys_exist(self) -> bool | None:
        """The cached "any active key?" answer, or None when it must be asked."""
        entry = self._keys_exist
        return entry[1] if entry is not None and entry[0] > time.monotonic() else None

    def keys_exist(self, *, connect: ConnectionFactory) -> bool:
        """Whether any key is active, from cache or Postgres."""
        cached = self.cached_keys_exist()
        if cached is not None:
            return cached
        with connect() as conn:
            exists = active_keys_exist(conn)
        self._keys_exist = (time.monotonic() + self.ttl_s, exists)
        return exists
