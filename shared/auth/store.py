"""Rows of the `api_keys` table: issue (key shown once), list, revoke, resolve a hash to a principal."""

from __future__ import annotations

from typing import Any
from uuid import UUID

import psycopg

from shared.auth.audit import AuditAction, record_audit
from shared.auth.keys import check_tenant, check_tool_patterns, hash_key, new_key, shown_prefix
from shared.auth.principal import MCP_MODES, PII_MODES, PII_OFF, PII_TOKENIZE, Principal
from shared.errors import Conflict, LastActiveKey, NotFound, ValidationFailed

Conn = psycopg.Connection[Any]
Row = dict[str, Any]

KEY_COLUMNS = (
    "id, tenant_id, name, key_prefix, tool_patterns, executions_per_min, tool_calls_per_min, "
    "max_concurrent, admin, pii, mcp_mode, created_at, revoked_at"
)


def issue_key(
    conn: Conn,
    *,
    tenant_id: str,
    name: str | None = None,
    tool_patterns: list[str] | None = None,
    executions_per_min: int | None = None,
    tool_calls_per_min: int | None = None,
    max_concurrent: int | None = None,
    admin: bool = False,
    pii: str = PII_TOKENIZE,
    mcp_mode: str | None = None,
) -> tuple[Row, str]:
    """Store a new key (hashed) and audit it; returns the row and the key, its only copy.

    ``pii="off"``: the key's runs are not tokenised (a trusted back-office key); its audit
    row says so. ``mcp_mode`` is what the key's ``/mcp`` serves unless a request says
    otherwise: ``code`` (None: the default), ``direct`` or ``both``."""
    if pii not in PII_MODES:
        raise ValidationFailed(f"pii must be one of {', '.join(PII_MODES)}, not {pii!r}")
    if mcp_mode is not None and mcp_mode not in MCP_MODES:
        raise ValidationFailed(f"mcp_mode must be one of {', '.join(MCP_MODES)}, not {mcp_mode!r}")
    try:
        check_tenant(tenant_id)
        patterns = check_tool_patterns(tool_patterns)
    except ValueError as exc:
        raise ValidationFailed(str(exc)) from exc
    for option, value in (
        ("executions_per_min", executions_per_min),
        ("tool_calls_per_min", tool_calls_per_min),
        ("max_concurrent", max_concurrent),
    ):
        if value is not None and value < 1:
            raise ValidationFailed(f"{option} must be at least 1 (omit it for no limit)")
    key = new_key()
    row = conn.execute(
        f"""
        INSERT INTO api_keys (tenant_id, name, key_hash, key_prefix, tool_patterns,
                              executions_per_min, tool_calls_per_min, max_concurrent, admin,
                              pii, mcp_mode)
        VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)
        RETURNING {KEY_COLUMNS}
        """,
        (
            tenant_id,
            name or f"{tenant_id} key",
            hash_key(key),
            shown_prefix(key),
            list(patterns) if patterns is not None else None,
            executions_per_min,
            tool_calls_per_min,
            max_concurrent,
            admin,
            pii,
            mcp_mode,
        ),
    ).fetchone()
    assert row is not None
    record_audit(
        conn,
        tenant_id=tenant_id,
        action=AuditAction.KEY_CREATE,
        key_id=str(row["id"]),
        details={
            "name": row["name"],
            "admin": admin,
            "tool_patterns": row["tool_patterns"],
            "pii": pii,
        },
    )
    return row, key


def list_keys(conn: Conn, *, tenant_id: str | None = None) -> list[Row]:
    """Every key (never its hash), oldest first; of one tenant when given."""
    if tenant_id is None:
        return conn.execute(f"SELECT {KEY_COLUMNS} FROM api_keys ORDER BY created_at").fetchall()
    return conn.execute(
        f"SELECT {KEY_COLUMNS} FROM api_keys WHERE tenant_id = %s ORDER BY created_at",
        (tenant_id,),
    ).fetchall()


# A shorter id prefix too easily names a key the operator did not mean.
MIN_ID_PREFIX = 4
LIST_HINT = "see `agentcards keys list`"


def find_key(conn: Conn, *, ref: str) -> Row:
    """The key ``ref`` names: its full id, a prefix of it (at least 4 characters) or its name.
    NotFound when none matches; ValidationFailed naming the candidates when several do."""
    ref = ref.strip()
    if not ref:
        raise ValidationFailed(f"say which key: its id, an id prefix or its name ({LIST_HINT})")
    by_prefix = len(ref) >= MIN_ID_PREFIX and all(c in "0123456789abcdef-" for c in ref.lower())
    rows = conn.execute(
        f"SELECT {KEY_COLUMNS} FROM api_keys WHERE name = %s OR (%s AND id::text LIKE %s) "
        "ORDER BY created_at",
        (ref, by_prefix, ref.lower() + "%"),
    ).fetchall()
    if len(rows) > 1:  # an active key before revoked ones of the same name or prefix
        active = [r for r in rows if r["revoked_at"] is None]
        rows = active if len(active) == 1 else rows
    if not rows:
        raise NotFound(f"no API key with id, id prefix or name {ref!r}: {LIST_HINT}")
    if len(rows) > 1:
        found = ", ".join(f"{r['id']} ({r['name']}, tenant {r['tenant_id']})" for r in rows)
        raise ValidationFailed(
            f"{ref!r} names {len(rows)} keys: {found}; give more of the id", field="key"
        )
    return dict(rows[0])


def revoke_key(conn: Conn, *, key_id: str, keep_one: bool = False) -> Row:
    """Mark a key revoked (and audit it); NotFound for an unknown id, Conflict if already
    revoked; with ``keep_one``, LastActiveKey (nothing changed) when it is the last active key."""
    try:
        UUID(key_id)
    except ValueError:
        raise NotFound(f"no API key with id {key_id!r}: {LIST_HINT}") from None
    # Locking the active keys serializes revocations: two at once cannot both see the other.
    active = conn.execute(
        "SELECT id FROM api_keys WHERE revoked_at IS NULL ORDER BY id FOR UPDATE"
    ).fetchall()
    if keep_one and [str(r["id"]) for r in active] == [key_id]:
        raise LastActiveKey(
            f"API key {key_id} is the last active key: without one, the gateway serves every "
            "caller on its machine as tenant 'default' without a key"
        )
    row = conn.execute(
        f"UPDATE api_keys SET revoked_at = now() WHERE id = %s AND revoked_at IS NULL "
        f"RETURNING {KEY_COLUMNS}",
        (key_id,),
    ).fetchone()
    if row is None:
        exists = conn.execute("SELECT revoked_at FROM api_keys WHERE id = %s", (key_id,)).fetchone()
        if exists is None:
            raise NotFound(f"no API key with id {key_id!r}: {LIST_HINT}")
        raise Conflict(f"API key {key_id} was already revoked at {exists['revoked_at']}")
    record_audit(
        conn,
        tenant_id=row["tenant_id"],
        action=AuditAction.KEY_REVOKE,
        key_id=key_id,
        details={"name": row["name"]},
    )
    return row


def principal_for_hash(conn: Conn, *, key_hash: str) -> Principal | None:
    """The principal of the active key with this hash; None for unknown or revoked keys."""
    row = conn.execute(
        f"SELECT {KEY_COLUMNS} FROM api_keys WHERE key_hash = %s AND revoked_at IS NULL",
        (key_hash,),
    ).fetchone()
    return principal_from_row(row) if row is not None else None


def principal_from_row(row: Row) -> Principal:
    """The principal a key row grants."""
    patterns = row["tool_patterns"]
    return Principal(
        tenant_id=row["tenant_id"],
        key_id=str(row["id"]),
        tool_patterns=tuple(patterns) if patterns is not None else None,
        executions_per_min=row["executions_per_min"],
        tool_calls_per_min=row["tool_calls_per_min"],
        max_concurrent=row["max_concurrent"],
        admin=bool(row["admin"]),
        pii=PII_OFF if row.get("pii") == PII_OFF else PII_TOKENIZE,
        mcp_mode=row.get("mcp_mode"),
        key_name=row.get("name"),
    )


def active_keys_exist(conn: Conn) -> bool:
    """Whether any key is active: then every request needs one."""
    row = conn.execute(
        "SELECT EXISTS (SELECT 1 FROM api_keys WHERE revoked_at IS NULL) AS any"
    ).fetchone()
    return bool(row and (row["any"] if isinstance(row, dict) else row[0]))
