"""Twins: code making the same tool calls as a capability (``call_signature``: the same tools,
in the same order, passed the same parameters from the same sources) does that capability's
job, so it is that capability's next version whatever its intent or name says.

Learning, manual creation and bundle import ask ``twin_head`` before they store new code;
``merge_twins`` folds twins stored apart (before the rule, or by a race) into one family.
Keyword-only functions over the caller's connection (and so its transaction).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg

from shared.capabilities import store
from shared.capabilities.schema import call_signature

Conn = psycopg.Connection[Any]
Row = dict[str, Any]


def twin_head(
    conn: Conn, *, tenant_id: str, code: str, language: str, tools_used: Sequence[str]
) -> Row | None:
    """The latest version (id, name, code, family, top) of the tenant's oldest capability
    whose code has this code's call signature; None when none does or the code calls no tool
    (such code is matched by its text alone)."""
    signature = call_signature(code, language)
    if not signature:
        return None
    heads = store.family_heads(conn, tenant_id=tenant_id, tools_used=tools_used, language=language)
    return next((h for h in heads if call_signature(h["code"], language) == signature), None)


# Learned heads (latest versions) sharing tenant, language and tools with another family:
# the only rows whose code needs parsing to find twins. A person's manual capabilities stay
# as they made them (one given its own name is kept apart on purpose).
_CANDIDATES_SQL = """
SELECT * FROM (
  SELECT h.*, count(*) OVER (PARTITION BY h.tenant_id, h.language, h.tools) AS peers
    FROM (SELECT c.tenant_id, c.id::text AS id, c.name, c.code, c.language, c.source,
                 c.tools_used::text AS tools, coalesce(c.family_id, c.id)::text AS family,
                 min(c.created_at) OVER family AS born,
                 row_number() OVER (family ORDER BY c.version DESC, c.created_at DESC) AS k
            FROM capabilities AS c
           WHERE %(t)s::text IS NULL OR c.tenant_id = %(t)s
          WINDOW family AS (PARTITION BY c.tenant_id, coalesce(c.family_id, c.id))) AS h
   WHERE h.k = 1 AND h.source = 'emergent') AS heads
 WHERE peers > 1
 ORDER BY born, family
"""

# Move a family's rows after another's latest version, in their own order, under its name.
_MOVE_SQL = """
UPDATE capabilities AS c
   SET family_id = %(into)s::uuid, name = %(name)s, version = m.top + m.k, updated_at = now()
  FROM (SELECT id, row_number() OVER (ORDER BY version, created_at) AS k,
               (SELECT max(version) FROM capabilities
                 WHERE tenant_id = %(t)s AND coalesce(family_id, id) = %(into)s::uuid) AS top
          FROM capabilities
         WHERE tenant_id = %(t)s AND coalesce(family_id, id) = %(moved)s::uuid) AS m
 WHERE c.id = m.id
"""

_HEAD_SQL = """
SELECT id::text AS id FROM capabilities
 WHERE tenant_id = %s AND coalesce(family_id, id) = %s::uuid
 ORDER BY version DESC LIMIT 1
"""


def merge_twins(conn: Conn, *, tenant_id: str | None = None) -> list[Row]:
    """Fold every family whose latest version is a twin of an older family's into that older
    family: its rows become the next versions, under the older family's name, and its new
    latest version inherits the phrasings of the one it replaces. Idempotent (a second pass
    finds nothing); one pass at a time (a transaction-scoped advisory lock). Learned
    capabilities only, of one tenant or (None) all. Returns ``{tenant_id, name, family,
    merged}`` per fold."""
    conn.execute("SELECT pg_advisory_xact_lock(hashtext('agentcards:capabilities:twins'))")
    # (tenant, language, tools, signature) -> (family, name) of the oldest family seen
    oldest: dict[tuple[str, str, str, Any], tuple[str, str]] = {}
    folds: list[Row] = []
    for head in conn.execute(_CANDIDATES_SQL, {"t": tenant_id}).fetchall():
        signature = call_signature(head["code"], head["language"])
        if not signature:
            continue
        key = (head["tenant_id"], head["language"], head["tools"], signature)
        if key not in oldest:
            oldest[key] = (head["family"], head["name"])
            continue
        into, name = oldest[key]
        tenant = head["tenant_id"]
        replaced = conn.execute(_HEAD_SQL, (tenant, into)).fetchone()
        conn.execute(_MOVE_SQL, {"t": tenant, "into": into, "moved": head["family"], "name": name})
        if replaced is not None:
            store.inherit_phrasings(conn, pairs=[(head["id"], replaced["id"])])
        folds.append({"tenant_id": tenant, "name": name, "family": into, "merged": head["family"]})
    return folds
