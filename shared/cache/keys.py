"""Cache keys: the L1 digest of (normalized code, args, tool schemas in scope), the params hash,
and the Redis key names (prefixes from ``shared.queues``)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

import orjson

from shared.capabilities.normalize import code_hash
from shared.queues import (
    CACHE_ENTRY_PREFIX,
    CACHE_GENERATION_PREFIX,
    CACHE_INDEX_PREFIX,
    CACHE_STATS_PREFIX,
)


def params_hash(args: Mapping[str, Any]) -> str:
    """sha256 of the canonical JSON of the arguments (sorted keys): the L2 key per capability."""
    try:
        canonical = orjson.dumps(dict(args), option=orjson.OPT_SORT_KEYS)
    except TypeError:  # what orjson cannot encode (an integer beyond 64 bits): the slow path
        canonical = json.dumps(
            dict(args), sort_keys=True, separators=(",", ":"), ensure_ascii=False
        ).encode()
    return hashlib.sha256(canonical).hexdigest()


def scope_digest(schema_hashes: Mapping[str, str]) -> str:
    """One hash of the tools in scope and their schema hashes: a changed tool is a new key."""
    canonical = "\n".join(f"{tool}={digest}" for tool, digest in sorted(schema_hashes.items()))
    return hashlib.sha256(canonical.encode()).hexdigest()


def execution_digest(
    *, code: str, args: Mapping[str, Any], scope: str, language: str = "python"
) -> str:
    """The L1 digest: formatting and comments of the code do not matter (AST-normalized);
    its language does (the code hash is per language)."""
    payload = f"{code_hash(code, language)}\n{params_hash(args)}\n{scope}"
    return hashlib.sha256(payload.encode()).hexdigest()


def entry_key(tenant_id: str, digest: str) -> str:
    """The L1 entry of one tenant: the tenant is part of the key, so tenants never share."""
    return f"{CACHE_ENTRY_PREFIX}{tenant_id}:{digest}"


def tenant_of(key: str) -> str:
    """The tenant of an L1 entry key."""
    return key[len(CACHE_ENTRY_PREFIX) :].rsplit(":", 1)[0]


def index_key(kind: str, name: str) -> str:
    """The set of L1 entry keys that used a tool, a server, or belong to a tenant."""
    return f"{CACHE_INDEX_PREFIX}{kind}:{name}"


def generation_key(server: str) -> str:
    """Bumped by every invalidation of a server, so a run that read before it stores nothing."""
    return f"{CACHE_GENERATION_PREFIX}{server}"


def stats_key(tenant_id: str) -> str:
    """Per-tenant hit and miss counters, by level."""
    return f"{CACHE_STATS_PREFIX}{tenant_id}"
