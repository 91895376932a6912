"""Where an execution's end-to-end time goes, from timestamps the stack already stores.

Client, gateway, workers and Postgres share one host clock here, so wall-clock stamps
compare directly (``now()`` in Postgres is the start of the writing transaction):

- ``gateway_enqueue``: client send → the gateway's INSERT (HTTP, auth, checks).
- ``broker_pickup``: INSERT → a worker's claim (commit, publish, Redis, Celery, claim).
- ``sandbox_start``: claim → the code's first tool call (a sandbox child from the pool).
- ``tool_rpc``: the tool call, as the bridge timed it (Redis RPC, toolhost, MCP server).
- ``result_store``: end of the tool call → the finishing UPDATE (result, trace).
- ``announce``: that UPDATE → the worker publishes `execution.finished` (commit, cache).
- ``wait_wakeup``: the event → the client has the answer (gateway wake-up, read, HTTP).

For the slowest 1 % the same phases are given, so the tail's cause shows beside the median.
A run without a tool call (``tool_call=False``) has no tool stamps: its ``sandbox_start``
covers claim → the finishing UPDATE (sandbox, code and store), ``tool_rpc`` and
``result_store`` are 0.
"""

from __future__ import annotations

import statistics
from typing import Any

import redis

from shared.db import connect
from shared.executions.events import FINISHED, decode_event
from shared.queues import events_log_key

PHASES = (
    "gateway_enqueue",
    "broker_pickup",
    "sandbox_start",
    "tool_rpc",
    "result_store",
    "announce",
    "wait_wakeup",
)


def phase_breakdown(
    database_url: str, redis_url: str, samples: list[dict[str, Any]], *, tool_call: bool = True
) -> dict[str, Any]:
    """p50/p99 of each phase over ``samples`` (sent, received, id), and the tail's medians."""
    ok = {s["id"]: s for s in samples if s["ok"] and s["id"]}
    if not ok:
        return {}
    with connect(database_url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT id::text AS id, extract(epoch FROM created_at) AS created, "
            "extract(epoch FROM started_at) AS started, "
            "extract(epoch FROM finished_at) AS finished, trace "
            "FROM executions WHERE id::text = ANY(%s)",
            (list(ok),),
        ).fetchall()
    announced = _announced(redis_url, list(ok))
    phases = [
        p
        for p in (
            _phases(ok[r["id"]], r, announced.get(r["id"]), tool_call=tool_call) for r in rows
        )
        if p
    ]
    if not phases:
        return {}
    out: dict[str, Any] = {
        name: _quantiles([p[name] for p in phases]) for name in (*PHASES, "total")
    }
    phases.sort(key=lambda p: p["total"])
    tail = phases[int(len(phases) * 0.99) :] or phases[-1:]
    out["slowest_1pct_median"] = {
        name: round(statistics.median(p[name] for p in tail), 1) for name in (*PHASES, "total")
    }
    return out


def _announced(redis_url: str, ids: list[str]) -> dict[str, float]:
    """When each execution's `execution.finished` was published, from its event log."""
    client = redis.Redis.from_url(redis_url)
    pipe = client.pipeline(transaction=False)
    for execution_id in ids:
        pipe.lrange(events_log_key(execution_id), 0, -1)
    out = {}
    for execution_id, log in zip(ids, pipe.execute(), strict=True):
        for event in map(decode_event, log):
            if event.get("type") == FINISHED and event.get("ts"):
                out[execution_id] = float(event["ts"])
    return out


def _phases(
    sample: dict[str, Any],
    row: dict[str, Any],
    announced: float | None,
    *,
    tool_call: bool = True,
) -> dict[str, float] | None:
    tool = [e for e in row["trace"] or [] if e.get("type") in {"tool_start", "tool_end"}]
    if (tool_call and len(tool) < 2) or row["started"] is None or row["finished"] is None:
        return None
    if not announced:
        return None
    created, started, finished = (
        float(row["created"]),
        float(row["started"]),
        float(row["finished"]),
    )
    if tool_call:
        tool_start, tool_end = float(tool[0]["ts"]), float(tool[1]["ts"])
    else:  # no tool stamps: the run up to its UPDATE counts as the sandbox's
        tool_start = tool_end = finished
    stamps = [sample["sent"], created, started, tool_start, tool_end, finished, announced]
    stamps.append(sample["received"])
    out = {name: (b - a) * 1000 for name, a, b in zip(PHASES, stamps[:-1], stamps[1:], strict=True)}
    out["total"] = (sample["received"] - sample["sent"]) * 1000
    return out


def _quantiles(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "p50": round(statistics.median(ordered), 1),
        "p99": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))], 1),
    }
