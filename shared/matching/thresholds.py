"""Adaptive match thresholds per (tenant, context), persisted in Postgres with a change log.

A false positive (a matched capability's re-run failed) means matching was too
eager: raise the threshold. A false negative (new code was written although an
existing reliable capability matched its intent below the threshold) means it was
too strict: lower it. The value moves by a step scaled by how lopsided the recent
sliding window of outcomes is, within fixed bounds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from shared.config import DEFAULT_TENANT


class Context(StrEnum):
    """Where a threshold applies."""

    CAPABILITY_MATCHING = "capability_matching"
    SUGGESTIONS = "suggestions"


class Outcome(StrEnum):
    """What one matching decision turned out to be."""

    FALSE_POSITIVE = "false_positive"
    FALSE_NEGATIVE = "false_negative"
    TRUE_POSITIVE = "true_positive"


# Where a fresh tenant starts, per context (a tenant's own outcomes move it from there).
# Capability matching: calibrated on `agentcards bench match`'s tuning set
# (deploy/bench/data/match_set.json, MiniLM, score = cosine * reliability). Its unrelated
# intents score at most 0.471 (a boosted 0.393 cosine) and 0.46 already lets 2 of 62 match;
# from 0.48 none does. 0.50 keeps a 0.03 margin over the highest unrelated score for top-1
# 0.917 (0.922 at 0.48; 0.641 at the former 0.70). Erring high is the cheaper mistake: a
# false match runs the wrong code, a miss only writes new code, and each miss on a reliable
# capability lowers the threshold (``detect_false_negatives``). docs/matching.md has the curve.
# Suggestions score graph evidence on another scale; 0.70 is a starting value no bench calibrates.
INITIAL: dict[str, float] = {"capability_matching": 0.50, "suggestions": 0.70}
MIN_THRESHOLD = 0.40  # below this, unrelated intents start matching (see bench match)
MAX_THRESHOLD = 0.90  # above this, even close paraphrases stop matching
WINDOW = 50  # outcomes remembered: recent behaviour, not the whole history
# One outcome moves the threshold by BASE_STEP; the step grows to BASE_STEP * 2 when
# the window is dominated by the same kind of error (a systematic bias, not noise).
BASE_STEP = 0.02


@dataclass(frozen=True)
class Update:
    """The result of applying one outcome: new value, new window, and why."""

    value: float
    samples: list[str]
    reason: str | None  # None when the value did not change


def apply_outcome(*, value: float, samples: Sequence[str], outcome: Outcome | str) -> Update:
    """Pure update rule: FP raises, FN lowers, TP only joins the window; bounded."""
    kind = Outcome(outcome)
    window = [*samples, kind.value][-WINDOW:]
    if kind is Outcome.TRUE_POSITIVE:
        return Update(value=value, samples=window, reason=None)
    same = sum(1 for s in window if s == kind.value)
    errors = sum(1 for s in window if s != Outcome.TRUE_POSITIVE.value)
    # Share of recent errors that are of this kind: 1.0 = every error says the same.
    bias = same / errors if errors else 1.0
    step = BASE_STEP * (1.0 + max(0.0, 2.0 * bias - 1.0))
    direction = 1.0 if kind is Outcome.FALSE_POSITIVE else -1.0
    new_value = round(min(MAX_THRESHOLD, max(MIN_THRESHOLD, value + direction * step)), 4)
    if new_value == value:
        return Update(value=value, samples=window, reason=None)
    verb = "raised" if direction > 0 else "lowered"
    reason = (
        f"{kind.value}: {verb} by {abs(new_value - value):.3f} "
        f"({same} of {errors} recent errors in the last {len(window)} outcomes are {kind.value})"
    )
    return Update(value=new_value, samples=window, reason=reason)


def initial_threshold(context: Context | str) -> float:
    """Where a fresh tenant's threshold starts in this context."""
    return INITIAL[Context(context).value]


def get_threshold(
    conn: psycopg.Connection[Any], *, context: Context | str, tenant_id: str = DEFAULT_TENANT
) -> float:
    """The current threshold (the context's initial value when nothing was ever recorded)."""
    row = conn.execute(
        "SELECT value FROM adaptive_thresholds WHERE tenant_id = %s AND context = %s",
        (tenant_id, Context(context).value),
    ).fetchone()
    return float(_first(row)) if row else initial_threshold(context)


def set_threshold(
    conn: psycopg.Connection[Any],
    *,
    context: Context | str,
    value: float,
    reason: str,
    tenant_id: str = DEFAULT_TENANT,
) -> float:
    """Set the threshold by hand (clamped to the bounds), logged like any change.

    Runs in the caller's transaction (a savepoint inside one); the caller commits.
    """
    ctx = Context(context).value
    clamped = min(MAX_THRESHOLD, max(MIN_THRESHOLD, value))
    with conn.transaction():
        old = _lock_row(conn, tenant_id=tenant_id, context=ctx)[0]
        conn.execute(
            "UPDATE adaptive_thresholds SET value = %s, updated_at = now() "
            "WHERE tenant_id = %s AND context = %s",
            (clamped, tenant_id, ctx),
        )
        _log(conn, tenant_id=tenant_id, context=ctx, old=old, new=clamped, reason=reason)
    return clamped


def record_outcome(
    conn: psycopg.Connection[Any],
    *,
    context: Context | str,
    kind: Outcome | str,
    tenant_id: str = DEFAULT_TENANT,
    detail: str = "",
) -> float:
    """Feed one outcome into the window, move the threshold if needed, log why.

    Runs in the caller's transaction (a savepoint inside one), so a learning worker
    applies it atomically with the rest of an ingestion; the caller commits.

    The row is locked for the read-modify-write, so concurrent learning workers
    each apply their outcome instead of overwriting each other's.
    """
    return record_outcomes(conn, context=context, outcomes=[(kind, detail)], tenant_id=tenant_id)


def record_outcomes(
    conn: psycopg.Connection[Any],
    *,
    context: Context | str,
    outcomes: Sequence[tuple[Outcome | str, str]],
    tenant_id: str = DEFAULT_TENANT,
) -> float:
    """``record_outcome`` for (kind, detail) pairs in order, with one lock and one write.

    The same rule, applied outcome after outcome; each change is logged with its reason.
    """
    ctx = Context(context).value
    with conn.transaction():
        value, samples = _lock_row(conn, tenant_id=tenant_id, context=ctx)
        changes = []
        for kind, detail in outcomes:
            update = apply_outcome(value=value, samples=samples, outcome=kind)
            if update.reason is not None:
                reason = f"{update.reason}; {detail}" if detail else update.reason
                changes.append((tenant_id, ctx, value, update.value, reason))
            value, samples = update.value, update.samples
        conn.execute(
            "UPDATE adaptive_thresholds SET value = %s, samples = %s, updated_at = now() "
            "WHERE tenant_id = %s AND context = %s",
            (value, Jsonb(samples), tenant_id, ctx),
        )
        if changes:
            with conn.cursor() as cur:
                cur.executemany(
                    "INSERT INTO adaptive_threshold_changes "
                    "(tenant_id, context, old_value, new_value, reason) VALUES (%s, %s, %s, %s, %s)",
                    changes,
                )
    return value


def threshold_changes(
    conn: psycopg.Connection[Any],
    *,
    context: Context | str,
    tenant_id: str = DEFAULT_TENANT,
    limit: int = 50,
) -> list[dict[str, Any]]:
    """Most recent changes first: old value, new value, reason, when."""
    cur = conn.execute(
        "SELECT old_value, new_value, reason, created_at FROM adaptive_threshold_changes "
        "WHERE tenant_id = %s AND context = %s ORDER BY id DESC LIMIT %s",
        (tenant_id, Context(context).value, limit),
    )
    names = [c.name for c in cur.description or []]
    return [r if isinstance(r, dict) else dict(zip(names, r, strict=True)) for r in cur.fetchall()]


def _lock_row(
    conn: psycopg.Connection[Any], *, tenant_id: str, context: str
) -> tuple[float, list[str]]:
    conn.execute(
        "INSERT INTO adaptive_thresholds (tenant_id, context, value) VALUES (%s, %s, %s) "
        "ON CONFLICT (tenant_id, context) DO NOTHING",
        (tenant_id, context, initial_threshold(context)),
    )
    row = conn.execute(
        "SELECT value, samples FROM adaptive_thresholds "
        "WHERE tenant_id = %s AND context = %s FOR UPDATE",
        (tenant_id, context),
    ).fetchone()
    assert row is not None  # inserted just above
    if isinstance(row, dict):
        return float(row["value"]), list(row["samples"] or [])
    return float(row[0]), list(row[1] or [])


def _log(
    conn: psycopg.Connection[Any],
    *,
    tenant_id: str,
    context: str,
    old: float,
    new: float,
    reason: str,
) -> None:
    conn.execute(
        "INSERT INTO adaptive_threshold_changes (tenant_id, context, old_value, new_value, reason) "
        "VALUES (%s, %s, %s, %s, %s)",
        (tenant_id, context, old, new, reason),
    )


def _first(row: Any) -> Any:
    return row["value"] if isinstance(row, dict) else row[0]
