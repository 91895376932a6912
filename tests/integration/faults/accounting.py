"""Bursts of note-writing executions and their accounting: the fault table's row for one fault.

Each execution writes one note titled with a unique token through the example server,
so a side effect that ran twice shows up as two notes with one title. Bursts carry an
intent, so learning turns them into one capability whose counts must grow by exactly
the runs that succeeded (learning is exactly-once per execution).

A row: ``submitted``, ``terminal`` by status, ``non_terminal`` (0), ``dup`` (duplicate
side effects, 0), ``errors`` by type, the learning columns (``learned``, ``usage_delta``,
``success_delta``) and the gateway's answers to the test's own client during the fault
(``http_503``, ``http_5xx_not_503`` (0), ``hung`` (0), ``http_max_s``; see ``probe``).
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from collections.abc import Callable
from typing import Any, Protocol

import httpx

from shared.broker import make_celery
from shared.config import Settings
from shared.db import connect
from shared.queues import TaskName
from tests.integration.faults.probe import Prober
from tests.stack import wait_until

TERMINAL = {"succeeded", "failed", "timeout", "cancelled", "worker_lost", "rejected"}
INTENT = "write a fault-test note"
CODE = """
import asyncio
await mcp.example.add_note(title=args["token"], body="fault test")
await asyncio.sleep(args["pause_s"])
return args["token"]
"""


class Gateway(Protocol):
    @property
    def gateway_url(self) -> str: ...

    @property
    def settings(self) -> Settings: ...

    def client(self) -> httpx.Client: ...


def poll_until(predicate: Callable[[], object], *, what: str, timeout_s: float = 90) -> None:
    """Poll a zero-argument callable until it is truthy, or fail naming ``what``."""
    wait_until(predicate, what=what, timeout_s=timeout_s)


def healthy(gateway: Gateway) -> bool:
    """``/healthz`` answers 200 (every part that can stop work is up)."""
    try:
        return httpx.get(f"{gateway.gateway_url}/healthz", timeout=5).status_code == 200
    except httpx.HTTPError:
        return False


def run_waiting(gateway: Gateway, code: str) -> dict[str, Any]:
    """Submit ``code`` and wait for its outcome (``?wait=true``)."""
    with gateway.client() as client:
        response = client.post("/v1/executions", params={"wait": "true"}, json={"code": code})
    body: dict[str, Any] = response.json()
    return body


def submit_burst(
    gateway: Gateway, *, n: int, pause_s: float, intent: str | None = None
) -> dict[str, str]:
    """``n`` note-writing executions (idempotency key = token); returns token -> execution id."""
    run = uuid.uuid4().hex[:8]
    ids = {}
    with gateway.client() as client:
        for i in range(n):
            token = f"tok-{run}-{i}"
            body: dict[str, Any] = {
                "code": CODE,
                "args": {"token": token, "pause_s": pause_s},
                "timeout_s": 20,
                "idempotency_key": token,
            }
            if intent:
                body["intent"] = intent
            response = client.post("/v1/executions", json=body)
            assert response.status_code == 202, response.text
            ids[token] = response.json()["id"]
    return ids


def views(gateway: Gateway, ids: dict[str, str]) -> dict[str, dict[str, Any]]:
    """Each execution as GET returns it (a read also reaps a stale row)."""
    out = {}
    with gateway.client() as client:
        for token, execution_id in ids.items():
            response = client.get(f"/v1/executions/{execution_id}")
            if response.status_code == 200:
                out[token] = response.json()
    return out


def running(gateway: Gateway, ids: dict[str, str], n: int) -> None:
    poll_until(
        lambda: sum(v["status"] == "running" for v in views(gateway, ids).values()) >= n,
        what=f"{n} running",
    )


def all_terminal(
    gateway: Gateway, ids: dict[str, str], *, timeout_s: float = 240
) -> dict[str, dict[str, Any]]:
    """Poll until every execution is terminal; returns the views."""
    seen: dict[str, dict[str, Any]] = {}

    def done() -> bool:
        seen.update(views(gateway, ids))
        return len(seen) == len(ids) and all(v["status"] in TERMINAL for v in seen.values())

    try:
        poll_until(done, what="every execution terminal", timeout_s=timeout_s)
    except AssertionError:
        stuck = Counter(v["status"] for v in seen.values() if v["status"] not in TERMINAL)
        raise AssertionError(f"non-terminal after {timeout_s:.0f}s: {dict(stuck)}") from None
    return seen


def note_counts(gateway: Gateway) -> Counter[str]:
    """How many notes carry each title (one per side effect)."""
    body = run_waiting(gateway, "return await mcp.example.list_notes()")
    assert body["status"] == "succeeded", body
    return Counter(n["title"] for n in body["result"])


def check_accounted(
    gateway: Gateway,
    ids: dict[str, str],
    seen: dict[str, dict[str, Any]],
    fault: str,
    **extra: object,
) -> Counter[str]:
    """Nothing ran twice; a succeeded run wrote its note once; print the fault-table row."""
    notes = note_counts(gateway)
    statuses = Counter(v["status"] for v in seen.values())
    duplicates = sum(1 for t in ids if notes[t] > 1)
    row = {
        "submitted": len(ids),
        "terminal": dict(statuses),
        "non_terminal": sum(1 for v in seen.values() if v["status"] not in TERMINAL),
        "dup": duplicates,
        "errors": dict(
            Counter(
                (v.get("error") or {}).get("type")
                for v in seen.values()
                if v["status"] != "succeeded"
            )
        ),
        **extra,
    }
    print(f"\nFAULT {fault}: " + " ".join(f"{k}={v}" for k, v in row.items()))
    assert duplicates == 0
    for token, view in seen.items():
        if view["status"] == "succeeded":
            assert notes[token] == 1 and view["result"] == token
        for call in view.get("tool_calls") or []:
            if not call["ok"] and notes[token]:
                # The note exists, so the call ran: never recorded as refused or cancelled.
                assert call["error"]["type"] in {"lost", "tool_unavailable"}, view
    return statuses


def usage(gateway: Gateway, intent: str = INTENT) -> tuple[int, int]:
    """(usage, success) counts of the capability the runs with ``intent`` teach (one code)."""
    with connect(gateway.settings.database_url or "") as conn:
        row = conn.execute(
            "SELECT coalesce(sum(usage_count), 0) AS u, coalesce(sum(success_count), 0) AS s "
            "FROM capabilities WHERE intent = %s",
            (intent,),
        ).fetchone()
    return (int(row["u"]), int(row["s"])) if row else (0, 0)


def learned(gateway: Gateway, ids: list[str]) -> int:
    """How many of these executions learning has ingested (``learned_at`` stamped)."""
    with connect(gateway.settings.database_url or "") as conn:
        row = conn.execute(
            "SELECT count(*) AS n FROM executions WHERE id = ANY(%s) AND learned_at IS NOT NULL",
            (ids,),
        ).fetchone()
    return int(row["n"]) if row else 0


def resend_unlearned(settings: Settings) -> None:
    """What beat does every 30 s (these stacks run no beat): send the runs whose ingestion
    message was lost (Redis down as they finished) to learning again."""
    app = make_celery("fault-test-beat", settings=settings)
    try:
        app.send_task(TaskName.RESEND_UNLEARNED)
    finally:
        app.close()


def learning_columns(
    gateway: Gateway,
    ids: dict[str, str],
    seen: dict[str, dict[str, Any]],
    before: tuple[int, int],
    intent: str = INTENT,
) -> dict[str, object]:
    """Wait until every terminal run is learned; the row's learning columns.

    Exactly once: the capability's success count grew by the succeeded runs, and its
    usage count by at least those and by no more than the executions learned (a run of
    the capability that failed is a use without success; one failed by a tool is not a
    use, verdict ``tool_failures``).
    """
    succeeded = sum(v["status"] == "succeeded" for v in seen.values())

    def delta() -> tuple[int, int]:
        now = usage(gateway, intent)
        return now[0] - before[0], now[1] - before[1]

    swept = [0.0]

    def caught_up() -> bool:
        if time.monotonic() - swept[0] >= 10:
            swept[0] = time.monotonic()
            resend_unlearned(gateway.settings)
        return learned(gateway, list(ids.values())) == len(ids) and delta()[1] >= succeeded

    try:
        poll_until(caught_up, what="learning caught up", timeout_s=120)
    except AssertionError:
        raise AssertionError(
            f"learning did not catch up: {succeeded} succeeded, (usage, success) delta "
            f"{delta()}, {learned(gateway, list(ids.values()))} of {len(ids)} learned"
        ) from None
    usage_delta, success_delta = delta()
    return {
        "learned": len(ids),
        "usage_delta": usage_delta,
        "success_delta": success_delta,
        "usage_match": success_delta == succeeded and succeeded <= usage_delta <= len(ids),
    }


def account(
    gateway: Gateway,
    ids: dict[str, str],
    seen: dict[str, dict[str, Any]],
    fault: str,
    *,
    before: tuple[int, int],
    prober: Prober,
    outage: bool,
) -> Counter[str]:
    """The whole fault-table row (learning and the gateway's answers included); checks it all.

    ``outage``: the fault makes the gateway answer 503 for a while (Redis or Postgres down).
    """
    columns = learning_columns(gateway, ids, seen, before)
    statuses = check_accounted(gateway, ids, seen, fault, **columns, **prober.columns())
    assert columns["usage_match"], columns
    prober.check(outage=outage)
    return statuses
