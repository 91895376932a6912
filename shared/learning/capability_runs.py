"""A batch of ingested runs applied to their capabilities: eager upsert by code hash, re-run stats.

One batch takes one row lock per capability (``shared.capabilities.store``, in id
order), folds every run of that capability into its stats with
``shared.capabilities.stats.record_run`` and writes the result once; new
capabilities get their intent embeddings in one model call.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from shared.capabilities import store
from shared.capabilities.naming import capability_description, capability_name, unique_name
from shared.capabilities.normalize import code_hash
from shared.capabilities.schema import call_signature, infer_parameters_schema
from shared.capabilities.stats import CapabilityStats, record_run
from shared.capabilities.store import STATS_FIELDS as _STATS_FIELDS
from shared.capabilities.twins import twin_head
from shared.embeddings import Embeds, embed_cached
from shared.tools.store import get_tools

Conn = psycopg.Connection[dict[str, Any]]


@dataclass(frozen=True)
class LearnedRun:
    """A successful run with an intent whose every tool call succeeded (all or nothing)."""

    execution_id: str
    tenant_id: str
    code: str
    intent: str
    tools_used: list[str]
    duration_ms: float | None
    language: str = "python"


@dataclass(frozen=True)
class Rerun:
    """A run of a matched capability's stored code."""

    execution_id: str
    capability_id: str
    ok: bool
    duration_ms: float | None


@dataclass(frozen=True)
class CapabilityOutcome:
    """What one run did to its capability: the row as of that run, and how it got there."""

    capability: dict[str, Any]
    outcome: str  # learned | updated | rerun
    embedding: list[float] | None = None  # set when the run created the capability


@functools.lru_cache(maxsize=4096)
def cached_code_hash(code: str, language: str = "python") -> str:
    """``code_hash`` (an AST parse, ~0.1 ms) memoised by code text: known code repeats."""
    return code_hash(code, language)


def tool_schemas(conn: Conn, *, tools: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Input schemas of the given tool ids, for parameter inference."""
    return {t: row["input_schema"] for t, row in get_tools(conn, ids=tools).items()}


def apply_capability_runs(
    conn: Conn,
    *,
    learned: Sequence[LearnedRun],
    reruns: Sequence[Rerun],
    embedder: Embeds,
) -> dict[str, CapabilityOutcome]:
    """Apply every run to its capability inside the caller's transaction; by execution id.

    Known code only counts one more success (no model call); its code text and
    parameter schema follow the latest formatting. A re-run of a capability that
    no longer exists is left out of the result.
    """
    by_key: dict[tuple[str, str], list[LearnedRun]] = {}
    for run in learned:
        by_key.setdefault((run.tenant_id, cached_code_hash(run.code, run.language)), []).append(run)
    locked = _lock(conn, ids=[r.capability_id for r in reruns], keys=list(by_key))
    out = _insert_new(
        conn,
        groups={k: runs for k, runs in by_key.items() if k not in locked.by_key},
        embedder=embedder,
    )
    # Keys a concurrent batch inserted first are known capabilities now.
    raced = [k for k in by_key if k not in locked.by_key and by_key[k][0].execution_id not in out]
    if raced:
        locked.add(_lock(conn, ids=[], keys=raced))
    updates: dict[str, _Update] = {}
    for key, runs in by_key.items():
        if key in locked.by_key:
            row = locked.by_key[key]
            update = updates.setdefault(str(row["id"]), _Update(row))
            for run in runs:
                update.add(run.execution_id, ok=True, duration_ms=run.duration_ms, learned=run)
    for rerun in reruns:
        if rerun.capability_id in locked.by_id:
            row = locked.by_id[rerun.capability_id]
            update = updates.setdefault(str(row["id"]), _Update(row))
            update.add(rerun.execution_id, ok=rerun.ok, duration_ms=rerun.duration_ms)
    for update in updates.values():
        update.plan_changes(conn)
    rows = _write_updates(conn, list(updates.values()))
    for update in updates.values():
        out.update(update.outcomes(rows[update.id]))
    return out


@dataclass
class _Locked:
    by_id: dict[str, dict[str, Any]]
    by_key: dict[tuple[str, str], dict[str, Any]]

    def add(self, other: _Locked) -> None:
        self.by_id.update(other.by_id)
        self.by_key.update(other.by_key)


def _lock(conn: Conn, *, ids: Sequence[str], keys: Sequence[tuple[str, str]]) -> _Locked:
    """Lock the capabilities with these ids or (tenant, code hash) keys, indexed both ways."""
    rows = store.lock_capabilities(conn, ids=ids, keys=keys)
    return _Locked(
        by_id={str(r["id"]): r for r in rows},
        by_key={(r["tenant_id"], r["code_hash"]): r for r in rows},
    )


class _Update:
    """Runs of one existing capability folded into its stats, and the column changes."""

    def __init__(self, row: dict[str, Any]) -> None:
        self.id = str(row["id"])
        self.row = row
        self.stats = CapabilityStats(**{f: row[f] for f in _STATS_FIELDS})
        # (execution id, outcome, stats right after that run), in batch order.
        self.steps: list[tuple[str, str, CapabilityStats]] = []
        self.last_learned: LearnedRun | None = None
        self.changes: dict[str, Any] = {}

    def add(
        self,
        execution_id: str,
        *,
        ok: bool,
        duration_ms: float | None,
        learned: LearnedRun | None = None,
    ) -> None:
        self.stats = record_run(self.stats, ok=ok, duration_ms=duration_ms)
        self.steps.append((execution_id, "updated" if learned else "rerun", self.stats))
        if learned is not None:
            self.last_learned = learned

    def plan_changes(self, conn: Conn) -> None:
        run = self.last_learned
        if run is None:
            return
        self.changes["tools_used"] = Jsonb(list(run.tools_used))
        if run.code != self.row["code"]:  # a formatting-only variant: keep the latest text
            self.changes["code"] = run.code
            self.changes["parameters_schema"] = Jsonb(
                infer_parameters_schema(
                    code=run.code,
                    tool_schemas=tool_schemas(conn, tools=run.tools_used),
                    language=run.language,
                )
            )

    def outcomes(self, final: dict[str, Any]) -> dict[str, CapabilityOutcome]:
        return {
            execution_id: CapabilityOutcome(capability=_with_stats(final, stats), outcome=outcome)
            for execution_id, outcome, stats in self.steps
        }


def _write_updates(conn: Conn, updates: Sequence[_Update]) -> dict[str, dict[str, Any]]:
    """Store each update's final stats and changes (rows stay locked); summaries by id."""
    return store.update_capabilities(
        conn,
        updates=[
            (u.id, {f: getattr(u.stats, f) for f in _STATS_FIELDS}, u.changes) for u in updates
        ],
    )


def _insert_new(
    conn: Conn, *, groups: dict[tuple[str, str], list[LearnedRun]], embedder: Embeds
) -> dict[str, CapabilityOutcome]:
    """Insert one capability per new code hash, its stats folded over the batch's runs of it.

    The first run's intent names and embeds it; the code text (and the schema inferred
    from it) is the last run's, as if the runs had come one at a time. A key another batch inserted
    meanwhile is skipped (``ON CONFLICT DO NOTHING``) and left out of the result.
    """
    if not groups:
        return {}
    firsts = [runs[0] for runs in groups.values()]
    vectors = embed_cached(conn=conn, embedder=embedder, texts=[r.intent for r in firsts])
    names = _names(conn, groups=groups, vectors=vectors)
    schemas = _schemas(conn, runs=[runs[-1] for runs in groups.values()])
    params: dict[tuple[str, str], dict[str, Any]] = {}
    stats_of: dict[tuple[str, str], list[tuple[str, str, CapabilityStats]]] = {}
    for (key, runs), vector, naming, schema in zip(
        groups.items(), vectors, names, schemas, strict=True
    ):
        first = runs[0]
        stats = CapabilityStats()
        steps = stats_of.setdefault(key, [])
        for i, run in enumerate(runs):
            stats = record_run(stats, ok=True, duration_ms=run.duration_ms)
            steps.append((run.execution_id, "learned" if i == 0 else "updated", stats))
        params[key] = {
            "tenant": key[0],
            "hash": key[1],
            "code": runs[-1].code,
            "language": first.language,
            "intent": first.intent,
            "vec": vector,
            "name": naming.name,
            "desc": capability_description(intent=first.intent, tools_used=first.tools_used),
            "schema": Jsonb(schema),
            "tools": Jsonb(list(runs[-1].tools_used)),
            "version": naming.version,
            "family": naming.family,
            **{f: getattr(stats, f) for f in _STATS_FIELDS},
        }
    inserted = _insert_in_order(conn, params=params, names=dict(zip(groups, names, strict=True)))
    vector_of = dict(zip(groups, vectors, strict=True))
    out: dict[str, CapabilityOutcome] = {}
    for row in inserted:
        key = (row["tenant_id"], row["code_hash"])
        for execution_id, outcome, stats in stats_of[key]:
            out[execution_id] = CapabilityOutcome(
                capability=_with_stats(row, stats),
                outcome=outcome,
                embedding=vector_of[key] if outcome == "learned" else None,
            )
    return out


@dataclass(frozen=True)
class _Naming:
    """Where a new capability goes: its name, version and family (None: a family of its own),
    and the version it replaces: ``previous`` (an id) when stored, else ``after`` (the key of
    a twin earlier in the batch, whose family, ``root``'s, is known once that is inserted)."""

    name: str
    version: int = 1
    family: str | None = None
    previous: str | None = None
    root: tuple[str, str] | None = None
    after: tuple[str, str] | None = None


def _insert_in_order(
    conn: Conn,
    *,
    params: dict[tuple[str, str], dict[str, Any]],
    names: dict[tuple[str, str], _Naming],
) -> list[dict[str, Any]]:
    """Insert the batch: first the capabilities that start or continue a stored family, then
    the later twins in the batch (their family is the first twin's); each new version
    inherits the phrasings of the one it replaces."""
    leaders = [k for k, n in names.items() if n.root is None]
    inserted = store.insert_capabilities(conn, rows=[params[k] for k in leaders])
    id_of = {(r["tenant_id"], r["code_hash"]): str(r["id"]) for r in inserted}
    followers = [k for k, n in names.items() if n.root is not None]
    for key in followers:
        root = names[key].root
        assert root is not None
        root_id = id_of.get(root) or _stored_id(conn, root)
        params[key]["family"] = names[root].family or root_id
    later = store.insert_capabilities(conn, rows=[params[k] for k in followers])
    id_of |= {(r["tenant_id"], r["code_hash"]): str(r["id"]) for r in later}
    pairs = []
    for key, naming in names.items():
        previous = naming.previous
        if naming.after is not None:
            previous = id_of.get(naming.after) or _stored_id(conn, naming.after)
        if key in id_of and previous is not None:
            pairs.append((id_of[key], previous))
    store.inherit_phrasings(conn, pairs=pairs)
    return inserted + later


def _stored_id(conn: Conn, key: tuple[str, str]) -> str | None:
    """The id of the capability with this (tenant, code hash) another batch inserted."""
    row = conn.execute(
        "SELECT id::text AS id FROM capabilities WHERE tenant_id = %s AND code_hash = %s", key
    ).fetchone()
    return row["id"] if row else None


def _names(
    conn: Conn,
    *,
    groups: dict[tuple[str, str], list[LearnedRun]],
    vectors: Sequence[Sequence[float]],
) -> list[_Naming]:
    """Where each new capability goes (``_Naming``).

    New code is the next version of a capability, never a twin beside it, when it does the
    same job: it calls the same tools in the same order passing each the same parameters
    (``call_signature``), whatever its intent says, be that capability stored or earlier in
    this batch; or, under a name already taken, it calls the same tools for a near-identical
    intent. Other taken names (or one taken in this batch) get the code hash appended."""
    wanted = [
        (key, runs[0], capability_name(intent=runs[0].intent, tools_used=runs[0].tools_used))
        for key, runs in groups.items()
    ]
    taken = store.taken_names(conn, wanted=[(key[0], name) for key, _, name in wanted])
    batch: set[tuple[str, str]] = set()
    # (tenant, language, tools, call signature) -> the batch's latest twin so far
    twins_here: dict[tuple[Any, ...], tuple[tuple[str, str], _Naming]] = {}
    names: list[_Naming] = []
    for (key, run, name), vector in zip(wanted, vectors, strict=True):
        tenant, key_hash = key
        signature = call_signature(run.code, run.language)
        job = (tenant, run.language, tuple(run.tools_used), signature)
        naming = _Naming(name)
        if signature and job in twins_here:
            last_key, last = twins_here[job]
            naming = _Naming(
                last.name, last.version + 1, root=last.root or last_key, after=last_key
            )
        elif (twin := _twin_of(conn, tenant=tenant, run=run)) is not None and (
            tenant,
            twin["name"],
        ) not in batch:
            naming = _Naming(twin["name"], int(twin["top"]) + 1, twin["family"], twin["id"])
        elif (tenant, name) in taken and (tenant, name) not in batch:
            latest = store.latest_named(conn, tenant_id=tenant, name=name, intent_embedding=vector)
            if latest is not None and _same_job(latest, run):
                naming = _Naming(name, int(latest["top"]) + 1, latest["family"], latest["id"])
            else:
                naming = _Naming(unique_name(name=name, code_hash=key_hash))
        elif (tenant, name) in batch:
            naming = _Naming(unique_name(name=name, code_hash=key_hash))
        if signature:
            twins_here[job] = (key, naming)
        batch.add((tenant, naming.name))
        names.append(naming)
    return names


def _twin_of(conn: Conn, *, tenant: str, run: LearnedRun) -> dict[str, Any] | None:
    """The latest version of the tenant's stored capability whose code makes the same tool
    calls as the run's; None when none does."""
    return twin_head(
        conn, tenant_id=tenant, code=run.code, language=run.language, tools_used=run.tools_used
    )


# Intents this close under one name say the same thing (rewordings score ~0.9-0.98).
SAME_INTENT = 0.9


def _same_job(latest: dict[str, Any], run: LearnedRun) -> bool:
    """New code for the same job: the same set of tools and a near-identical intent."""
    same_tools = set(latest["tools_used"] or []) == set(run.tools_used)
    return same_tools and float(latest["similarity"]) >= SAME_INTENT


def _schemas(conn: Conn, *, runs: Sequence[LearnedRun]) -> list[dict[str, Any]]:
    schemas = tool_schemas(conn, tools=sorted({t for r in runs for t in r.tools_used}))
    return [
        infer_parameters_schema(
            code=r.code,
            tool_schemas={t: schemas[t] for t in r.tools_used if t in schemas},
            language=r.language,
        )
        for r in runs
    ]


def _with_stats(row: dict[str, Any], stats: CapabilityStats) -> dict[str, Any]:
    return row | {f: getattr(stats, f) for f in _STATS_FIELDS}
