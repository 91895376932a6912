"""`capabilities` rows: eager upsert by normalized code hash, and stats for re-runs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import psycopg
from psycopg.types.json import Jsonb

from shared.capabilities.naming import capability_description, capability_name, unique_name
from shared.capabilities.normalize import code_hash
from shared.capabilities.schema import infer_parameters_schema
from shared.embeddings import Embedder, embed_cached

Conn = psycopg.Connection[dict[str, Any]]

# Returned to clients and stored in execution extras.
SUMMARY_COLUMNS = (
    "id, name, description, usage_count, success_count, failure_count, success_rate, "
    "avg_duration_ms, tools_used, parameters_schema, promoted_at"
)


def tool_schemas(conn: Conn, *, tools: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Input schemas of the given tool ids, for parameter inference."""
    if not tools:
        return {}
    rows = conn.execute(
        "SELECT id, input_schema FROM tools WHERE id = ANY(%s)", (list(tools),)
    ).fetchall()
    return {r["id"]: r["input_schema"] for r in rows}


def upsert_learned_capability(
    conn: Conn,
    *,
    tenant_id: str,
    code: str,
    intent: str,
    tools_used: Sequence[str],
    duration_ms: float | None,
    embedder: Embedder,
) -> tuple[dict[str, Any], bool]:
    """Insert a new capability or count one more success of a known one; (summary, created).

    Known code skips the embedding model entirely (the hot path); the schema is
    re-inferred only when the stored code text differs (a formatting-only change).
    """
    key = code_hash(code)
    existing = conn.execute(
        "SELECT id, code FROM capabilities WHERE tenant_id = %s AND code_hash = %s FOR UPDATE",
        (tenant_id, key),
    ).fetchone()
    duration = float(duration_ms or 0.0)
    if existing is not None:
        changes: dict[str, Any] = {"tools_used": Jsonb(list(tools_used))}
        if existing["code"] != code:
            changes["code"] = code
            changes["parameters_schema"] = Jsonb(
                infer_parameters_schema(
                    code=code, tool_schemas=tool_schemas(conn, tools=tools_used)
                )
            )
        row = record_capability_run(
            conn, capability_id=existing["id"], ok=True, duration_ms=duration, changes=changes
        )
        assert row is not None  # locked above
        return row, False

    (vector,) = embed_cached(conn=conn, embedder=embedder, texts=[intent])
    name = capability_name(intent=intent, tools_used=tools_used)
    taken = conn.execute(
        "SELECT 1 FROM capabilities WHERE tenant_id = %s AND name = %s", (tenant_id, name)
    ).fetchone()
    if taken:
        name = unique_name(name=name, code_hash=key)
    schema = infer_parameters_schema(code=code, tool_schemas=tool_schemas(conn, tools=tools_used))
    row = conn.execute(
        f"""
        INSERT INTO capabilities (tenant_id, code_hash, code, intent, intent_embedding, name,
                                  description, parameters_schema, tools_used, usage_count,
                                  success_count, failure_count, success_rate, avg_duration_ms,
                                  last_used)
        VALUES (%(tenant)s, %(hash)s, %(code)s, %(intent)s, %(vec)s, %(name)s, %(desc)s,
                %(schema)s, %(tools)s, 1, 1, 0, 1.0, %(dur)s, now())
        RETURNING {SUMMARY_COLUMNS}
        """,
        {
            "tenant": tenant_id,
            "hash": key,
            "code": code,
            "intent": intent,
            "vec": np.asarray(vector, dtype=np.float32),
            "name": name,
            "desc": capability_description(intent=intent, tools_used=tools_used),
            "schema": Jsonb(schema),
            "tools": Jsonb(list(tools_used)),
            "dur": duration,
        },
    ).fetchone()
    assert row is not None
    return row, True


def record_capability_run(
    conn: Conn,
    *,
    capability_id: str,
    ok: bool,
    duration_ms: float | None,
    changes: dict[str, Any] | None = None,
) -> dict[str, Any] | None:
    """One more run of a capability (shared.capabilities.stats in SQL), plus column `changes`."""
    # Column names come from our own callers, never from input: safe to format in.
    extra = "".join(f", {column} = %({column})s" for column in (changes or {}))
    return conn.execute(
        f"""
        UPDATE capabilities
           SET usage_count = usage_count + 1,
               success_count = success_count + %(s)s,
               failure_count = failure_count + %(f)s,
               success_rate = (success_count + %(s)s)::float8 / (usage_count + 1),
               avg_duration_ms = avg_duration_ms + (%(dur)s - avg_duration_ms) / (usage_count + 1),
               last_used = now(), updated_at = now(){extra}
         WHERE id = %(id)s
        RETURNING {SUMMARY_COLUMNS}
        """,
        {
            "id": capability_id,
            "s": int(ok),
            "f": int(not ok),
            "dur": float(duration_ms or 0.0),
            **(changes or {}),
        },
    ).fetchone()
