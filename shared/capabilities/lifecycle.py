"""Capabilities people write and shape: manual ones, versions, edits, deletion.

A manual capability is stored like a learned one (keyed by its code hash) with
``source = 'manual'``, which pruning never touches. New code under a name the tenant
already uses is the next version of that name's family (``family_id``, migration 0012);
earlier versions stay rows of their own, runnable by id. Keyword-only functions over the
caller's connection (and so its transaction).
"""

from __future__ import annotations

import ast
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import psycopg
from psycopg.types.json import Jsonb

from shared.capabilities.listing import ITEM_SELECT, item
from shared.capabilities.naming import NAME_RE
from shared.errors import ValidationFailed

Conn = psycopg.Connection[Any]
Row = dict[str, Any]

FAMILY = "coalesce(c.family_id, c.id)"
NAME_RULE = (
    "names are lowercase snake_case Python identifiers of 1-64 characters "
    "(agent code calls them as capabilities.<name>(...))"
)


def check_name(name: str, *, field: str = "name") -> None:
    """Refuse a name agent code could not call, naming the field."""
    if not NAME_RE.match(name) or name in {"None", "True", "False"}:
        raise ValidationFailed(f"{field}: {name!r} is not a valid name: {NAME_RULE}", field=field)


def check_code(code: str, *, field: str = "code", language: str = "python") -> None:
    """Refuse code that does not parse (it could never run), naming the field and line.

    Python only: TypeScript's parser is Deno's, inside the sandbox (its first run says)."""
    if language != "python":
        return
    try:
        ast.parse(code.lstrip("\ufeff"))
    except SyntaxError as exc:
        raise ValidationFailed(
            f"{field} does not parse: {exc.msg} (line {exc.lineno}); fix it and send it again",
            field=field,
            line=exc.lineno,
        ) from None


def get_item(conn: Conn, *, tenant_id: str, capability_id: str) -> Row | None:
    """One capability of the tenant as a list item, or None."""
    row = conn.execute(
        f"{ITEM_SELECT} WHERE c.tenant_id = %s AND c.id::text = %s", (tenant_id, capability_id)
    ).fetchone()
    return item(row) if row else None


def find_item(conn: Conn, *, tenant_id: str, ref: str) -> Row | None:
    """A capability by id, else the latest version of that name, as a list item; or None."""
    row = conn.execute(
        f"{ITEM_SELECT} WHERE c.tenant_id = %(t)s AND (c.id::text = %(ref)s OR c.name = %(ref)s) "
        "ORDER BY c.id::text = %(ref)s DESC, c.version DESC, c.success_rate DESC LIMIT 1",
        {"t": tenant_id, "ref": ref},
    ).fetchone()
    return item(row) if row else None


def by_code_hash(conn: Conn, *, tenant_id: str, code_hash: str) -> Row | None:
    """The tenant's capability with this code hash (id, name, family, version), or None."""
    row: Row | None = conn.execute(
        f"SELECT c.id::text AS id, c.name, {FAMILY}::text AS family, c.version "
        "FROM capabilities AS c WHERE c.tenant_id = %s AND c.code_hash = %s",
        (tenant_id, code_hash),
    ).fetchone()
    return row


def next_version(conn: Conn, *, tenant_id: str, name: str) -> tuple[str | None, int]:
    """(family, version) for new code under ``name``: the family of the latest version so
    named and one past its highest version; (None, 1) for a new name."""
    row = conn.execute(
        f"""
        SELECT f.family, (SELECT max(c.version) FROM capabilities AS c
                           WHERE c.tenant_id = %(t)s AND {FAMILY}::text = f.family) AS top
          FROM (SELECT {FAMILY}::text AS family FROM capabilities AS c
                 WHERE c.tenant_id = %(t)s AND c.name = %(name)s
                 ORDER BY c.version DESC, c.created_at DESC LIMIT 1) AS f
        """,
        {"t": tenant_id, "name": name},
    ).fetchone()
    if row is None:
        return None, 1
    return row["family"], int(row["top"]) + 1


def family_top(conn: Conn, *, tenant_id: str, family: str) -> int:
    """The highest version in a family (0 when it has none)."""
    row = conn.execute(
        f"SELECT coalesce(max(c.version), 0) AS top FROM capabilities AS c "
        f"WHERE c.tenant_id = %s AND {FAMILY}::text = %s",
        (tenant_id, family),
    ).fetchone()
    return int(row["top"]) if row else 0


def insert(conn: Conn, *, tenant_id: str, values: Mapping[str, Any]) -> str:
    """Insert one capability; its id. ``values`` holds code_hash, code, intent, vec, name,
    description, parameters_schema, tools_used, source, version, family (None: its own),
    and optionally stats and timestamps (usage_count, ... created_at, last_used, promoted_at)."""
    stats = {
        "usage_count": 0, "success_count": 0, "failure_count": 0, "success_rate": 0.0,
        "avg_duration_ms": 0.0, "last_used": None, "promoted_at": None, "created_at": None,
    } | {k: v for k, v in values.items() if k in _STAT_COLUMNS}  # fmt: skip
    row = conn.execute(
        """
        INSERT INTO capabilities (tenant_id, code_hash, code, intent, intent_embedding, name,
                                  description, parameters_schema, tools_used, source, version,
                                  family_id, usage_count, success_count, failure_count,
                                  success_rate, avg_duration_ms, last_used, promoted_at,
                                  created_at, language)
        VALUES (%(tenant)s, %(code_hash)s, %(code)s, %(intent)s, %(vec)s, %(name)s,
                %(description)s, %(schema)s, %(tools)s, %(source)s, %(version)s,
                %(family)s, %(usage_count)s, %(success_count)s, %(failure_count)s,
                %(success_rate)s, %(avg_duration_ms)s, %(last_used)s, %(promoted_at)s,
                coalesce(%(created_at)s, now()), %(language)s)
        RETURNING id::text AS id
        """,
        {
            **stats,
            "tenant": tenant_id,
            "code_hash": values["code_hash"],
            "code": values["code"],
            "language": values.get("language") or "python",
            "intent": values["intent"],
            "vec": np.asarray(values["vec"], dtype=np.float32),
            "name": values["name"],
            "description": values["description"],
            "schema": Jsonb(values["parameters_schema"]),
            "tools": Jsonb(list(values["tools_used"])),
            "source": values["source"],
            "version": values["version"],
            "family": values.get("family"),
        },
    ).fetchone()
    assert row is not None  # INSERT ... RETURNING without ON CONFLICT returns its row
    return str(row["id"])


_STAT_COLUMNS = frozenset(
    {"usage_count", "success_count", "failure_count", "success_rate", "avg_duration_ms",
     "last_used", "promoted_at", "created_at"}
)  # fmt: skip


def update_fields(
    conn: Conn,
    *,
    tenant_id: str,
    capability_id: str,
    name: str | None = None,
    description: str | None = None,
    intent: tuple[str, Sequence[float]] | None = None,
    disabled: bool | None = None,
) -> bool:
    """Change the given fields (an intent with its embedding; ``disabled`` sets or clears
    ``disabled_at``, keeping the first time); False when no such capability."""
    row = conn.execute(
        """
        UPDATE capabilities
           SET name = coalesce(%(name)s, name),
               description = coalesce(%(description)s, description),
               intent = coalesce(%(intent)s, intent),
               intent_embedding = CASE WHEN %(intent)s::text IS NULL THEN intent_embedding
                                       ELSE %(vec)s END,
               disabled_at = CASE WHEN %(disabled)s::boolean IS NULL THEN disabled_at
                                  WHEN %(disabled)s THEN coalesce(disabled_at, now())
                                  ELSE NULL END,
               updated_at = now()
         WHERE tenant_id = %(tenant)s AND id::text = %(id)s
        RETURNING id
        """,
        {
            "name": name,
            "description": description,
            "intent": intent[0] if intent else None,
            "vec": np.asarray(intent[1], dtype=np.float32) if intent else None,
            "disabled": disabled,
            "tenant": tenant_id,
            "id": capability_id,
        },
    ).fetchone()
    return row is not None


def add_aliases(
    conn: Conn,
    *,
    tenant_id: str,
    capability_id: str,
    aliases: Sequence[tuple[str, Sequence[float]]],
) -> None:
    """Add (phrasing, embedding) aliases as given (no near-duplicate filter: a person chose them)."""
    with conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO capability_aliases (capability_id, tenant_id, intent, intent_embedding) "
            "VALUES (%s, %s, %s, %s) ON CONFLICT (capability_id, intent) DO NOTHING",
            [
                (capability_id, tenant_id, text, np.asarray(vec, dtype=np.float32))
                for text, vec in aliases
            ],
        )


def replace_aliases(
    conn: Conn,
    *,
    tenant_id: str,
    capability_id: str,
    aliases: Sequence[tuple[str, Sequence[float]]],
) -> None:
    """Make these the capability's aliases, in this order."""
    conn.execute(
        "DELETE FROM capability_aliases WHERE tenant_id = %s AND capability_id::text = %s",
        (tenant_id, capability_id),
    )
    add_aliases(conn, tenant_id=tenant_id, capability_id=capability_id, aliases=aliases)


def delete(conn: Conn, *, tenant_id: str, capability_id: str) -> Row | None:
    """Delete one capability (its aliases and cached results go with it); its id and name."""
    row: Row | None = conn.execute(
        "DELETE FROM capabilities WHERE tenant_id = %s AND id::text = %s "
        "RETURNING id::text AS id, name, version",
        (tenant_id, capability_id),
    ).fetchone()
    return row


def versions(conn: Conn, *, tenant_id: str, capability_id: str) -> list[Row]:
    """Every version in the capability's family, oldest first; [] when it does not exist."""
    rows = conn.execute(
        f"""
        {ITEM_SELECT}
         WHERE c.tenant_id = %(t)s
           AND {FAMILY} = (SELECT coalesce(family_id, id) FROM capabilities
                            WHERE tenant_id = %(t)s AND id::text = %(id)s)
         ORDER BY c.version, c.created_at
        """,
        {"t": tenant_id, "id": capability_id},
    ).fetchall()
    return [item(r) for r in rows]
