"""Mirror each server's tools into Postgres (``tools``; states: ``shared.tools.servers``).

Runs at connect and on ``tools/list_changed``; idempotent, so replicas syncing the same
server at once are safe: a per-server advisory lock serializes them, and only the first
one to see a new schema hash reports the change.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson
import psycopg

from shared import tool_ids
from shared.config import Settings
from shared.tools import store as tools_store
from shared.tools.servers import server_lock

log = logging.getLogger(__name__)

Embed = Callable[[list[str]], list[list[float]] | None]


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool as a server lists it."""

    name: str
    description: str
    input_schema: dict[str, Any]
    annotations: dict[str, Any] = field(default_factory=dict)  # MCP hints (readOnlyHint...)
    output_schema: dict[str, Any] | None = None
    cache_override: dict[str, Any] = field(default_factory=dict)  # the operator's agentcards block
    pii_kinds: list[str] | None = None  # kinds tokenised in its data (None: all; []: none)
    unavailable_reason: str | None = None  # listed but never callable through AgentCards


@dataclass(slots=True)
class SyncResult:
    """What one sync changed; ``schema_changes`` are (tool id, old hash, new hash or None);
    ``policy_changes`` are tools whose annotations or cache override changed."""

    server: str
    added: list[str] = field(default_factory=list)
    schema_changes: list[tuple[str, str, str | None]] = field(default_factory=list)
    policy_changes: list[str] = field(default_factory=list)
    embedded: int = 0


def schema_hash(schema: dict[str, Any]) -> str:
    """sha256 of the canonical JSON (sorted keys, no whitespace) of an input schema."""
    return hashlib.sha256(orjson.dumps(schema, option=orjson.OPT_SORT_KEYS)).hexdigest()


def embedding_text(server: str, spec: ToolSpec) -> str:
    """The text a tool is searched by (``tools_store.search_text``)."""
    return tools_store.search_text(server=server, name=spec.name, description=spec.description)


def sync_server_tools(
    *, conn: psycopg.Connection[Any], server: str, tools: Sequence[ToolSpec], embed: Embed
) -> SyncResult:
    """Upsert the server's tools, delete vanished ones, embed new or edited ones."""
    result = SyncResult(server=server)
    ids = {tool_ids.make(server, t.name): t for t in tools}
    existing = tools_store.server_tools(conn, server=server)
    # Embed outside the transaction: the first call may load a model for seconds, and the
    # advisory lock below must not be held meanwhile.
    stale = [
        (tool_id, spec)
        for tool_id, spec in ids.items()
        if tool_id not in existing
        or existing[tool_id]["text"] != embedding_text(server, spec)
        or existing[tool_id]["missing_embedding"]
    ]
    vectors = embed([embedding_text(server, s) for _, s in stale]) if stale else []
    new_vectors = {tool_id: v for (tool_id, _), v in zip(stale, vectors or [], strict=False)}
    result.embedded = len(new_vectors)
    with conn.transaction():
        server_lock(conn, server)
        existing = tools_store.server_tools(
            conn, server=server
        )  # again, under the lock: another replica may have won
        for tool_id, spec in ids.items():
            digest = schema_hash(spec.input_schema)
            before = existing.get(tool_id)
            if before is None:
                result.added.append(tool_id)
            elif before["schema_hash"] != digest:
                result.schema_changes.append((tool_id, before["schema_hash"], digest))
            elif (before["annotations"], before["cache_override"]) != (
                spec.annotations,
                spec.cache_override,
            ):
                result.policy_changes.append(tool_id)
            tools_store.upsert_tool(
                conn,
                tool_id=tool_id,
                server=server,
                name=spec.name,
                description=spec.description,
                input_schema=spec.input_schema,
                schema_hash=digest,
                embedding=new_vectors.get(tool_id),
                annotations=spec.annotations,
                output_schema=spec.output_schema,
                cache_override=spec.cache_override,
                available=spec.unavailable_reason is None,
                pii_kinds=spec.pii_kinds,
            )
        vanished = [tool_id for tool_id in existing if tool_id not in ids]
        for tool_id in vanished:
            # Deleted, so the event fires once; traces keep the id as plain text, and a
            # tool that comes back is re-embedded from the embedding cache.
            result.schema_changes.append((tool_id, existing[tool_id]["schema_hash"], None))
        tools_store.delete_tools(conn, ids=vanished)
        conn.execute(
            "UPDATE mcp_servers SET tool_count = %s, updated_at = now() WHERE name = %s",
            (len(ids), server),
        )
    return result


class LazyEmbedder:
    """The process's embedder (``embedder_for``: the gateways', or a model of its own loaded
    on first use, ~5 s), made on first use from any thread."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._lock = threading.Lock()
        self._embedder: Any = None

    def embed(self, *, conn: psycopg.Connection[Any], texts: list[str]) -> list[list[float]] | None:
        """Vectors for ``texts`` (through the shared cache), or None when no embedder exists."""
        embedder = self._get()
        if embedder is None:
            return None
        from shared.embeddings import embed_cached

        return embed_cached(conn=conn, embedder=embedder, texts=texts)

    def _get(self) -> Any:
        with self._lock:
            if self._embedder is None:
                from shared.embeddings import embedder_for

                self._embedder = embedder_for(self._settings)
            return self._embedder
