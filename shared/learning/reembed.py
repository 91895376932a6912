"""Re-embed a database with another model: every stored text again, the columns resized.

A model change (``AGENTCARDS_EMBEDDING_MODEL``) makes every stored vector meaningless, and a
size change makes them unstorable. ``reembed`` embeds each stored text with the new model
(tools as the toolhost embeds them, the intents of capabilities, aliases and past runs),
then in one transaction resizes every vector column, writes the new vectors, rebuilds the
HNSW indexes and records the model (table ``embedding_model``). What was derived from the
old vectors goes: the embedding cache, the consolidated tool vectors and the query adapters
(the next consolidation fits new ones from the re-embedded intents). Run it with the
services stopped: a process still embedding with the old model would fail on the new size.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import psycopg
from psycopg.rows import tuple_row

from shared.config import canonical_model
from shared.tools.store import search_text

Embed = Callable[[Sequence[str]], list[list[float]]]

# Texts per call of ``embed`` (its own batches are smaller): bounds the memory of one call.
CHUNK = 512
# An advisory lock of its own, so two reembeds cannot interleave.
REEMBED_LOCK_ID = 0x5245454D42  # "REEMB"


@dataclass(frozen=True)
class Column:
    """A vector column and the query of its rows' keys and texts."""

    table: str
    column: str
    texts: str  # SELECT key, text


# Every vector column of the schema (tests/integration/foundation/test_database.py fails
# when a migration adds another).
COLUMNS = (
    Column("tools", "embedding", "SELECT id, server, name, description FROM tools"),
    Column("capabilities", "intent_embedding", "SELECT id, intent FROM capabilities"),
    Column("capability_aliases", "intent_embedding", "SELECT id, intent FROM capability_aliases"),
    Column("intent_tools", "intent_embedding", "SELECT id, intent FROM intent_tools"),
)
# Derived from the old vectors: emptied, rebuilt by use (cache) or consolidation.
DERIVED = (
    Column("embedding_cache", "embedding", ""),
    Column("tool_vectors", "vector", ""),
)
DROPPED = ("query_adapters",)  # d x d matrices of the old space


def reembed(conn: psycopg.Connection[Any], *, embed: Embed, model: str, dim: int) -> dict[str, int]:
    """Re-embed every stored text with ``embed`` (``model``, ``dim``-d); rows per table."""
    cur = conn.cursor(row_factory=tuple_row)
    vectors: dict[str, list[tuple[Any, np.ndarray]]] = {}
    for col in COLUMNS:
        rows = cur.execute(col.texts).fetchall()
        keys = [row[0] for row in rows]
        texts = [_text(col, row) for row in rows]
        embedded: list[list[float]] = []
        for start in range(0, len(texts), CHUNK):
            embedded.extend(embed(texts[start : start + CHUNK]))
        for vector in embedded[:1]:
            if len(vector) != dim:
                raise ValueError(f"the model gives {len(vector)}-d vectors, not {dim}")
        vectors[col.table] = [
            (key, np.asarray(v, np.float32)) for key, v in zip(keys, embedded, strict=True)
        ]
    counts: dict[str, int] = {}
    with conn.transaction():
        cur.execute("SELECT pg_advisory_xact_lock(%s)", (REEMBED_LOCK_ID,))
        for table in DROPPED:
            counts[table] = cur.execute(f"DELETE FROM {table}").rowcount
        for col in DERIVED:
            counts[col.table] = cur.execute(f"DELETE FROM {col.table}").rowcount
            _resize(cur, col, dim)
        for col in COLUMNS:
            _resize(cur, col, dim, rows=vectors[col.table])
            counts[col.table] = len(vectors[col.table])
        cur.execute(
            "INSERT INTO embedding_model (one, model, dim) VALUES (true, %s, %s) "
            "ON CONFLICT (one) DO UPDATE SET model = excluded.model, dim = excluded.dim, "
            "updated_at = now()",
            (canonical_model(model), dim),
        )
    return counts


def _text(col: Column, row: tuple[Any, ...]) -> str:
    if col.table == "tools":
        return search_text(server=row[1], name=row[2], description=row[3])
    return str(row[1])


def _resize(
    cur: psycopg.Cursor[Any],
    col: Column,
    dim: int,
    *,
    rows: Sequence[tuple[Any, np.ndarray]] = (),
) -> None:
    """Resize ``col`` to ``dim`` and write ``rows`` (key, vector); its indexes rebuilt after,
    and the triggers that name it (``UPDATE OF``) made again after (they would only copy the
    same new vectors: ``intent_tools`` is re-embedded from its own texts)."""
    triggers = cur.execute(
        "SELECT DISTINCT t.tgname, pg_get_triggerdef(t.oid) FROM pg_trigger t "
        "JOIN pg_depend d ON d.classid = 'pg_trigger'::regclass AND d.objid = t.oid "
        "JOIN pg_attribute a ON a.attrelid = d.refobjid AND a.attnum = d.refobjsubid "
        "WHERE d.refobjid = %s::regclass AND a.attname = %s AND NOT t.tgisinternal",
        (col.table, col.column),
    ).fetchall()
    for name, _ in triggers:
        cur.execute(f"DROP TRIGGER {name} ON {col.table}")
    indexes = cur.execute(
        "SELECT i.indexrelid::regclass::text, pg_get_indexdef(i.indexrelid) FROM pg_index i "
        "JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey) "
        "WHERE i.indrelid = %s::regclass AND a.attname = %s",
        (col.table, col.column),
    ).fetchall()
    for name, _ in indexes:
        cur.execute(f"DROP INDEX {name}")
    not_null = cur.execute(
        "SELECT attnotnull FROM pg_attribute WHERE attrelid = %s::regclass AND attname = %s",
        (col.table, col.column),
    ).fetchone()
    if not_null and not_null[0]:
        cur.execute(f"ALTER TABLE {col.table} ALTER COLUMN {col.column} DROP NOT NULL")
    cur.execute(f"ALTER TABLE {col.table} ALTER COLUMN {col.column} TYPE vector({dim}) USING NULL")
    if rows:
        key = "id"
        cur.executemany(
            f"UPDATE {col.table} SET {col.column} = %s WHERE {key} = %s",
            [(vector, k) for k, vector in rows],
        )
    if not_null and not_null[0]:
        cur.execute(f"ALTER TABLE {col.table} ALTER COLUMN {col.column} SET NOT NULL")
    for _, definition in [*indexes, *triggers]:
        cur.execute(definition)
