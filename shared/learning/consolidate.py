"""Consolidated learning: a tenant's tool vectors and query adapter, refitted after new runs.

One pass per tenant with intents newer than its last consolidation: read its learned runs
(``intent_tools`` rows with succeeded tools) and the catalogue's description embeddings,
hold back each tool's most recent run, fit tool vectors on the rest
(``shared.search.tool_vectors``), and score both the new fit and the version in use on the
held-back runs. The new version replaces the current one only if it scores at least as
well; every pass, shipped or not, is a row of ``tool_vector_versions`` (version, training
size, held-back size, score before and after). The vectors shipped are the ones scored.

Only tools that exist and are available get a vector, mixed with their current
description; a row is deleted with its tool and when its description changes (migration
0023), so a changed or removed tool never gets a stale one.

The same pass fits the tenant's query adapter (``shared.search.adapter``, migration 0025)
on the same training runs and scores it on the same held-back runs against the adapter in
use (the identity when none). It is shipped only when at least ``MIN_HELD_BACK`` runs were
held back and it scores at least as well; it is then refitted on every run (the held-back
ones are the tenant's most recent) and that matrix is stored with the newest run it read.
The search reads the newest shipped adapter, and its learned vote counts only the runs
newer than that (immediate learning until the next consolidation); the tool vectors are
consolidated but not read by the search (beside the adapter they add nothing, and reading
them costs ~4 ms of p95: docs/search.md).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

import numpy as np
import psycopg
from psycopg import sql
from threadpoolctl import threadpool_limits

from shared.search import adapter
from shared.search.adapter_store import load_adapter, matrix_bytes
from shared.search.learned import HALF_LIFE_DAYS
from shared.search.tool_vectors import FITTED_MIX, Mix, Run, held_back_top1, hold_out, tool_vectors

log = logging.getLogger(__name__)

# Fewer held-back runs than this and the hold-out check cannot tell a better adapter from
# noise (one run moves the score by a fifth or more): the adapter in use is kept.
MIN_HELD_BACK = 5
# Runs older than this no longer train (six half-lives of the vote's recency,
# ``learned.HALF_LIFE_DAYS``: it weighs them 1/64): a tool a tenant stopped using fades
# from its adapter as it fades from the vote. A run ageing out changes the tenant's run
# count, so the next pass refits without it.
FORGET_AFTER_DAYS = 6 * HALF_LIFE_DAYS


# A tenant with new runs is consolidated soon after them, not only at the next beat pass
# (every 10 minutes), so what its runs teach reaches the adapter within seconds: the vote
# alone carries only part of the consolidated lift. The pass waits SOON_FACTOR times the
# tenant's last pass (its passes then take at most a tenth of a core), at least SOON_MIN_S
# (the runs of a burst share one pass) and at most SOON_MAX_S (the beat's period).
SOON_MIN_S = 5.0
SOON_FACTOR = 10.0
SOON_MAX_S = 600.0
# A burst longer than SOON_MIN_S would otherwise be read in part by its first pass and the
# rest wait ten of those passes (73-207 s measured on 360-450-run bursts): the pass waits for
# the tenant's runs to pause for SOON_QUIET_S, but never longer than SOON_BURST_CAP_S after
# it was first due. It only ever waits longer than ``soon_delay``: never more passes.
SOON_QUIET_S = 2.0
SOON_BURST_CAP_S = 120.0


# The adapter at ingest. Before a tenant's pass its search has only the vote, which counts a
# past run only when it is nearly a repeat of the query (its gate): on sets of paraphrases it
# carried a third of the lift the pass brings (research/notes/search-history.md). So the
# ingestion that stores a tenant's runs also refits its query adapter (the pass's fit,
# hold-out check and refit, ``consolidate_adapter``) whenever its runs have grown by
# INGEST_GROWTH since the adapter's last fit: a search right after a burst has an adapter that
# read at least four fifths of it (the vote reads the rest), and the fits form a geometric
# series (at most five times the last one's work in all; growth 2 left a burst's last half to
# the vote, and on the stack an adapter fitted on half of more_servers' runs cost @5).
# Only while the fit is one cheap full batch (at most INGEST_MAX_RUNS runs over
# INGEST_MAX_TOOLS tools; 0.3-1.5 s on one core); a larger tenant waits for its soon pass,
# which still follows every burst.
INGEST_GROWTH = 1.25
INGEST_MAX_RUNS = adapter.MAX_PAIRS
INGEST_MAX_TOOLS = adapter.MAX_NEGATIVES

# The tables a pass records itself in: one row per pass, shipped or not.
FIT_TABLES = frozenset({"tool_vector_versions", "query_adapters"})


@dataclass(frozen=True)
class Fit:
    """What one fit of a tenant's pass did: the columns every pass records, whatever it fitted."""

    tenant_id: str
    version: int
    trained_on: int
    held_back: int
    score_before: float
    score_after: float
    shipped: bool
    seconds: float

    def rounded(self) -> Fit:
        """The same fit as reported: scores to 4 places, seconds to 3."""
        return replace(
            self,
            score_before=round(self.score_before, 4),
            score_after=round(self.score_after, 4),
            seconds=round(self.seconds, 3),
        )


@dataclass(frozen=True)
class Consolidation(Fit):
    """What one tenant's pass did: its tool vectors' fit, and its query adapter's."""

    tools: int = 0
    adapter: Fit | None = None


def next_version(conn: psycopg.Connection[Any], table: str, *, tenant_id: str) -> int:
    """The tenant's next version number in ``table`` (one of ``FIT_TABLES``): max + 1."""
    if table not in FIT_TABLES:
        raise ValueError(f"not a fit table: {table}")
    row = conn.execute(
        sql.SQL("SELECT coalesce(max(version), 0) AS v FROM {} WHERE tenant_id = %s").format(
            sql.Identifier(table)
        ),
        (tenant_id,),
    ).fetchone()
    return (int(row["v"]) if row else 0) + 1


def record_fit(conn: psycopg.Connection[Any], table: str, fit: Fit, **extra: Any) -> None:
    """One pass's row in ``table`` (one of ``FIT_TABLES``): ``fit``'s columns plus ``extra``
    (the table's own: newest run read, the adapter's matrix...)."""
    if table not in FIT_TABLES:
        raise ValueError(f"not a fit table: {table}")
    values = {**{f.name: getattr(fit, f.name) for f in fields(Fit)}, **extra}
    conn.execute(
        sql.SQL("INSERT INTO {} ({}) VALUES ({})").format(
            sql.Identifier(table),
            sql.SQL(", ").join(sql.Identifier(c) for c in values),
            sql.SQL(", ").join(sql.Placeholder(c) for c in values),
        ),
        values,
    )


def _array(value: Any) -> np.ndarray:
    """A vector column as float32 (pgvector returns a ``Vector`` in binary results)."""
    return np.asarray(value.to_numpy() if hasattr(value, "to_numpy") else value, np.float32)


def tenants_to_consolidate(
    conn: psycopg.Connection[Any], *, tenant_ids: Sequence[str] | None = None
) -> list[str]:
    """Tenants (all, or those of ``tenant_ids``) with a learned run newer than their last
    consolidation, or another number of runs than it read (a run taken back by its agent,
    ``shared.learning.unteach``; a tool changed or removed, migration 0026; a run older
    than ``FORGET_AFTER_DAYS``)."""
    rows = conn.execute(
        """
        SELECT i.tenant_id
          FROM (SELECT tenant_id, max(id) AS newest, count(*) AS runs FROM intent_tools
                 WHERE cardinality(tools_ok) > 0
                   AND created_at > now() - %(days)s * interval '1 day'
                   AND (%(tenants)s::text[] IS NULL OR tenant_id = ANY(%(tenants)s::text[]))
                 GROUP BY tenant_id) i
          LEFT JOIN (SELECT DISTINCT ON (tenant_id) tenant_id, last_intent_id AS seen,
                            runs_seen
                       FROM tool_vector_versions ORDER BY tenant_id, version DESC) v
            USING (tenant_id)
         WHERE v.seen IS NULL OR i.newest > v.seen OR i.runs <> v.runs_seen
         ORDER BY i.tenant_id
        """,
        {
            "days": FORGET_AFTER_DAYS,
            "tenants": list(tenant_ids) if tenant_ids is not None else None,
        },
    ).fetchall()
    return [r["tenant_id"] for r in rows]


def soon_delay(last_pass_seconds: float | None) -> float:
    """Seconds to wait before a tenant's pass after new runs (``SOON_FACTOR``)."""
    return min(SOON_MAX_S, max(SOON_MIN_S, SOON_FACTOR * (last_pass_seconds or 0.0)))


def soon_wait(*, now: float, due_at: float, last_taught: float | None) -> float:
    """Seconds a pass that was due at ``due_at`` waits yet (0: start it now): while the
    tenant's runs still arrive (the last taught ``now - last_taught`` ago), until they pause
    for ``SOON_QUIET_S``, at most ``SOON_BURST_CAP_S`` past ``due_at``."""
    if last_taught is None:
        return 0.0
    quiet_in = SOON_QUIET_S - (now - last_taught)
    cap_in = due_at + SOON_BURST_CAP_S - now
    return max(0.0, min(quiet_in, cap_in))


def last_pass_seconds(conn: psycopg.Connection[Any], *, tenant_id: str) -> float | None:
    """How long the tenant's last pass took (tool vectors and adapter), None before its first."""
    row = conn.execute(
        """
        SELECT (SELECT seconds FROM tool_vector_versions WHERE tenant_id = %(t)s
                 ORDER BY version DESC LIMIT 1)
             + coalesce((SELECT seconds FROM query_adapters WHERE tenant_id = %(t)s
                          ORDER BY version DESC LIMIT 1), 0) AS seconds
        """,
        {"t": tenant_id},
    ).fetchone()
    return None if row is None or row["seconds"] is None else float(row["seconds"])


def _descriptions(conn: psycopg.Connection[Any]) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """(tool → description embedding, tool → md5 of its description), available tools only."""
    rows = conn.execute(
        "SELECT id, embedding, md5(description) AS md5 FROM tools "
        "WHERE available AND embedding IS NOT NULL",
        binary=True,  # vectors as binary: parsing 10k-100k of them as text takes a minute
    ).fetchall()
    vectors = {r["id"]: _array(r["embedding"]) for r in rows}
    return vectors, {r["id"]: r["md5"] for r in rows}


def current_vectors(
    conn: psycopg.Connection[Any], *, tenant_id: str
) -> tuple[int, dict[str, np.ndarray]]:
    """(version in use or 0, its vectors still valid: the tool exists, is available and has
    the description it was mixed with)."""
    row = conn.execute(
        "SELECT coalesce(max(version), 0) AS v FROM tool_vector_versions "
        "WHERE tenant_id = %s AND shipped",
        (tenant_id,),
    ).fetchone()
    rows = conn.execute(
        """
        SELECT v.tool_id, v.vector FROM tool_vectors v JOIN tools t ON t.id = v.tool_id
         WHERE v.tenant_id = %s AND t.available AND md5(t.description) = v.description_md5
        """,
        (tenant_id,),
        binary=True,
    ).fetchall()
    return (int(row["v"]) if row else 0), {r["tool_id"]: _array(r["vector"]) for r in rows}


def learned_runs(
    conn: psycopg.Connection[Any], *, tenant_id: str, descriptions: dict[str, np.ndarray]
) -> tuple[list[Run], int, int]:
    """(the tenant's runs that name a tool of ``descriptions``, oldest first; the newest
    learned run's id, 0 with none; how many learned runs were read): what a pass trains on."""
    runs: list[Run] = []
    newest = 0
    rows = conn.execute(
        "SELECT id, intent_embedding, tools_ok FROM intent_tools "
        "WHERE tenant_id = %s AND cardinality(tools_ok) > 0 "
        "AND created_at > now() - %s * interval '1 day' ORDER BY id",
        (tenant_id, FORGET_AFTER_DAYS),
        binary=True,
    ).fetchall()
    for row in rows:
        newest = max(newest, int(row["id"]))
        tools = tuple(t for t in row["tools_ok"] if t in descriptions)
        if tools:
            runs.append(
                Run(order=int(row["id"]), vector=_array(row["intent_embedding"]), tools=tools)
            )
    return runs, newest, len(rows)


def consolidate_tenant(
    conn: psycopg.Connection[Any], *, tenant_id: str, mix: Mix = FITTED_MIX
) -> Consolidation:
    """One tenant's pass (in the caller's transaction; commit to keep it). Passes of one
    tenant run one at a time (the beat's and one queued soon after new runs may meet, on
    one learning worker or several): each numbers its versions after the last."""
    _lock(conn, tenant_id=tenant_id)
    started = time.perf_counter()
    descriptions, md5s = _descriptions(conn)
    runs, newest, read = learned_runs(conn, tenant_id=tenant_id, descriptions=descriptions)
    train, held = hold_out(runs)
    _, current = current_vectors(conn, tenant_id=tenant_id)
    fitted = tool_vectors(descriptions, train, k=mix.k)
    candidate = {tool: vector for tool, (vector, _) in fitted.items()}
    before = held_back_top1(held, descriptions=descriptions, vectors=current, weight=mix.weight)
    after = held_back_top1(held, descriptions=descriptions, vectors=candidate, weight=mix.weight)
    shipped = after >= before
    version = next_version(conn, "tool_vector_versions", tenant_id=tenant_id)
    if shipped:
        conn.execute("DELETE FROM tool_vectors WHERE tenant_id = %s", (tenant_id,))
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO tool_vectors (tenant_id, tool_id, version, vector, intents, "
                "description_md5) VALUES (%s, %s, %s, %s, %s, %s)",
                [
                    (tenant_id, tool, version, vector, n, md5s[tool])
                    for tool, (vector, n) in fitted.items()
                ],
            )
    seconds = time.perf_counter() - started
    fitted_adapter = consolidate_adapter(
        conn,
        tenant_id=tenant_id,
        descriptions=descriptions,
        runs=runs,
        train=train,
        held=held,
        newest=newest,
    )
    fit = Fit(tenant_id, version, len(train), len(held), before, after, shipped, seconds)
    record_fit(conn, "tool_vector_versions", fit, last_intent_id=newest, runs_seen=read)
    return Consolidation(**vars(fit.rounded()), tools=len(fitted), adapter=fitted_adapter)


def consolidate_adapter(
    conn: psycopg.Connection[Any],
    *,
    tenant_id: str,
    descriptions: dict[str, np.ndarray],
    runs: list[Run],
    train: list[Run],
    held: list[Run],
    newest: int,
) -> Fit:
    """Fit the tenant's query adapter on ``train``, score it and the one in use on ``held``,
    and ship a refit on every run when it scores at least as well (``MIN_HELD_BACK``)."""
    started = time.perf_counter()
    current = load_adapter(conn, tenant_id=tenant_id)
    candidate = adapter.train_adapter(descriptions, train)
    before = adapter.held_back_top1(held, descriptions=descriptions, matrix=current.matrix)
    after = adapter.held_back_top1(held, descriptions=descriptions, matrix=candidate)
    shipped = len(held) >= MIN_HELD_BACK and after >= before
    matrix = adapter.train_adapter(descriptions, runs) if shipped else None
    version = next_version(conn, "query_adapters", tenant_id=tenant_id)
    if shipped:  # only the version in use keeps its matrix
        conn.execute(
            "UPDATE query_adapters SET matrix = NULL WHERE tenant_id = %s AND matrix IS NOT NULL",
            (tenant_id,),
        )
    seconds = time.perf_counter() - started
    fit = Fit(tenant_id, version, len(train), len(held), before, after, shipped, seconds)
    record_fit(
        conn,
        "query_adapters",
        fit,
        matrix=matrix_bytes(matrix) if matrix is not None else None,
        dim=len(candidate),
        last_intent_id=newest,
    )
    return fit.rounded()


def consolidate(
    conn: psycopg.Connection[Any],
    *,
    tenant_ids: Sequence[str] | None = None,
    mix: Mix = FITTED_MIX,
) -> list[Consolidation]:
    """Every tenant (or every one of ``tenant_ids``) with new learned runs, each committed
    on its own."""
    done = []
    for tenant in tenants_to_consolidate(conn, tenant_ids=tenant_ids):
        # A pass of the tenant that held the lock meanwhile (another learning worker's)
        # may have read every run: then there is nothing left to do.
        _lock(conn, tenant_id=tenant)
        if tenants_to_consolidate(conn, tenant_ids=[tenant]):
            done.append(consolidate_tenant(conn, tenant_id=tenant, mix=mix))
        conn.commit()
    return done


def adapter_due(conn: psycopg.Connection[Any], *, tenant_id: str) -> bool:
    """Whether the tenant's adapter is refitted at ingest (``INGEST_GROWTH``): its runs grew
    enough since its last fit, and the fit is cheap; a first fit also needs ``MIN_HELD_BACK``
    tools run twice (fewer held-back runs and no adapter could ship)."""
    row = conn.execute(
        """
        SELECT (SELECT count(*) FROM (SELECT 1 FROM intent_tools WHERE tenant_id = %(t)s
                   AND cardinality(tools_ok) > 0
                   AND created_at > now() - %(days)s * interval '1 day'
                   LIMIT %(most)s + 1) AS r) AS runs,  -- bounded: a large tenant costs no more
               (SELECT trained_on + held_back FROM query_adapters WHERE tenant_id = %(t)s
                 ORDER BY version DESC LIMIT 1) AS last_read
        """,
        {"t": tenant_id, "days": FORGET_AFTER_DAYS, "most": INGEST_MAX_RUNS},
    ).fetchone()
    if row is None or not 0 < row["runs"] <= INGEST_MAX_RUNS:
        return False
    if row["last_read"] is not None and row["runs"] < INGEST_GROWTH * max(1, row["last_read"]):
        return False
    extra = conn.execute(
        """
        SELECT (SELECT count(*) FROM tools WHERE available AND embedding IS NOT NULL) AS tools,
               (SELECT count(*) FROM (SELECT 1 FROM intent_tools, unnest(tools_ok) AS tool
                  WHERE tenant_id = %(t)s AND created_at > now() - %(days)s * interval '1 day'
                  GROUP BY tool HAVING count(*) >= 2) AS twice) AS held
        """,
        {"t": tenant_id, "days": FORGET_AFTER_DAYS},
    ).fetchone()
    if extra is None or extra["tools"] > INGEST_MAX_TOOLS:
        return False
    return row["last_read"] is not None or extra["held"] >= MIN_HELD_BACK


def adapt_at_ingest(conn: psycopg.Connection[Any], *, tenant_ids: Iterable[str]) -> list[Fit]:
    """Refit the query adapter of each of ``tenant_ids`` that is due (``adapter_due``), in the
    caller's transaction, each under a savepoint: a fit that fails is logged and left to the
    tenant's soon pass, the ingestion kept. A tenant whose pass is running is skipped: that
    pass, or the one queued after these runs, reads them."""
    done = []
    for tenant in sorted(set(tenant_ids)):
        if not adapter_due(conn, tenant_id=tenant):
            continue
        try:
            # One thread, as the pass's child runs: the worker's other batches keep the cores.
            with conn.transaction(), threadpool_limits(limits=1, user_api="blas"):
                if not _try_lock(conn, tenant_id=tenant):
                    continue
                descriptions, _ = _descriptions(conn)
                runs, newest, _ = learned_runs(conn, tenant_id=tenant, descriptions=descriptions)
                train, held = hold_out(runs)
                fit = consolidate_adapter(
                    conn,
                    tenant_id=tenant,
                    descriptions=descriptions,
                    runs=runs,
                    train=train,
                    held=held,
                    newest=newest,
                )
                done.append(fit)
        except psycopg.Error:
            log.warning("refitting the adapter of %s at ingest failed", tenant, exc_info=True)
    return done


def _try_lock(conn: psycopg.Connection[Any], *, tenant_id: str) -> bool:
    """The tenant's consolidation lock if no pass holds it (``_lock``), without waiting."""
    row = conn.execute(
        "SELECT pg_try_advisory_xact_lock(hashtext('agentcards:consolidate:' || %s)) AS got",
        (tenant_id,),
    ).fetchone()
    return bool(row and row["got"])


def _lock(conn: psycopg.Connection[Any], *, tenant_id: str) -> None:
    """The tenant's consolidation lock, held to the end of the transaction (re-entrant)."""
    conn.execute(
        "SELECT pg_advisory_xact_lock(hashtext('agentcards:consolidate:' || %s))", (tenant_id,)
    )
