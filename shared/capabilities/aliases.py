"""A capability's other phrasings: the distinct intents it was run or matched with.

Agents word the same job many ways; a capability that only knows the intent it was
learned with misses the rest. Matching scores a capability by the closest of its own
intent and its aliases (``shared.capabilities.store.nearest``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import psycopg

# Two phrasings this close say the same thing (MiniLM: rewordings of one sentence are
# ~0.9-0.98); keeping both would only make the alias list longer.
DUPLICATE_SIMILARITY = 0.95
MAX_ALIASES = 50  # per capability: beyond that the closest phrasing is already there

# Kept only when neither the capability's intent nor an alias is a near-duplicate.
_ADD_SQL = """
INSERT INTO capability_aliases (capability_id, tenant_id, intent, intent_embedding)
SELECT c.id, c.tenant_id, %(intent)s, %(v)s
  FROM capabilities AS c
 WHERE c.id = %(capability)s
   AND c.intent <> %(intent)s
   AND (c.intent_embedding IS NULL OR 1 - (c.intent_embedding <=> %(v)s) < %(dup)s)
   AND NOT EXISTS (SELECT 1 FROM capability_aliases AS a
                    WHERE a.capability_id = c.id AND 1 - (a.intent_embedding <=> %(v)s) >= %(dup)s)
   AND (SELECT count(*) FROM capability_aliases AS a WHERE a.capability_id = c.id) < %(cap)s
ON CONFLICT (capability_id, intent) DO NOTHING
"""


def add_aliases(
    conn: psycopg.Connection[Any], *, rows: Sequence[tuple[str, str, Sequence[float]]]
) -> None:
    """Add (capability id, intent, embedding) phrasings, skipping near-duplicates.

    In the caller's transaction; the statements run in order, so two near-identical
    phrasings in one batch keep only the first.
    """
    if not rows:
        return
    with conn.cursor() as cur:
        cur.executemany(
            _ADD_SQL,
            [
                {
                    "capability": capability_id,
                    "intent": intent,
                    "v": np.asarray(vector, dtype=np.float32),
                    "dup": DUPLICATE_SIMILARITY,
                    "cap": MAX_ALIASES,
                }
                for capability_id, intent, vector in rows
            ],
        )


def aliases_of(conn: psycopg.Connection[Any], *, capability_id: str) -> list[str]:
    """The capability's aliases, oldest first."""
    rows = conn.execute(
        "SELECT intent FROM capability_aliases WHERE capability_id = %s ORDER BY id",
        (capability_id,),
    ).fetchall()
    return [r["intent"] if isinstance(r, dict) else r[0] for r in rows]
