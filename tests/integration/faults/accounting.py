"""Bursts of note-writing executions and their accounting: the fault table's row for one fault.

Each execution writes one note titled with a unique token through the example server,
so a side effect that ran twice shows up as two notes with one title.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Callable
from typing import Any, Protocol

import httpx

from tests.integration.e2e.conftest import wait_until

TERMINAL = {"succeeded", "failed", "timeout", "cancelled", "worker_lost", "rejected"}
INTENT = "write a fault-test note"
CODE = """
import asyncio
await mcp.example.add_note(title=args["token"], body="fault test")
await asyncio.sleep(args["pause_s"])
return args["token"]
"""


class Gateway(Protocol):
    def client(self) -> httpx.Client: ...


def poll_until(predicate: Callable[[], object], *, what: str, timeout_s: float = 90) -> None:
    """Poll a zero-argument callable until it is truthy, or fail naming ``what``."""
    wait_until(predicate, what=what, timeout_s=timeout_s)


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
