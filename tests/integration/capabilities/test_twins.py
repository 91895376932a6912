"""Twins on a real stack (mcp-server-time from PyPI): new code that calls the same tools in the
same order with the same parameters is the next version of the capability, whatever its
intent says: one capability with both phrasings, one box on the dashboard."""

from __future__ import annotations

import uuid
from typing import Any

from shared import tool_ids
from shared.capabilities.twins import merge_twins
from shared.embeddings import get_embedder
from shared.learning.capability_runs import LearnedRun, apply_capability_runs
from tests.integration.mcp_servers import example_server, time_server
from tests.stack import E2EStack, stack_fixture

# The servers (and so the stack) of test_typescript, test_key_scope and the dashboard tests.
shared_stack = stack_fixture(lambda tmp: {"example": example_server(tmp), "time": time_server()})

FIRST = 'now = await mcp.time.get_current_time(timezone=args["timezone"])\nreturn now["datetime"]'
PARAPHRASED = (
    'reply = await mcp.time.get_current_time(timezone=args["zone"])\n'
    "lines = str(reply).splitlines()\nreturn lines[0]"
)
OTHER_JOB = 'return await mcp.time.get_current_time(timezone="Asia/Tokyo")'  # a fixed zone
FIRST_INTENT = "get the current time in a timezone"
# Worded apart from the first (far under the 0.9 cut that merges near-identical intents).
PARAPHRASED_INTENT = "show the first line of what the clock server reports for a zone"


def _run(stack: E2EStack, code: str, intent: str, args: dict[str, Any]) -> dict[str, Any]:
    with stack.client() as client:
        body = {"code": code, "intent": intent, "args": args}
        reply = client.post("/v1/executions", params={"wait": "true"}, json=body)
    assert reply.status_code == 200, reply.text
    run: dict[str, Any] = reply.json()
    assert run["status"] == "succeeded" and run["capability"], run
    return run


def test_a_paraphrase_with_the_same_calls_is_a_new_version_not_a_twin(
    shared_stack: E2EStack,
) -> None:
    stack = shared_stack.as_new_tenant()
    first = _run(stack, FIRST, FIRST_INTENT, {"timezone": "UTC"})["capability"]
    second = _run(stack, PARAPHRASED, PARAPHRASED_INTENT, {"zone": "UTC"})["capability"]
    other = _run(stack, OTHER_JOB, "what time is it in Tokyo", {})["capability"]
    assert second["id"] != first["id"] and second["name"] == first["name"], (first, second)
    # The run's report says it made a new version, not a new capability.
    assert (first["status"], first["version"]) == ("created", 1), first
    assert (second["status"], second["version"]) == ("versioned", 2), second
    assert other["name"] != first["name"]  # a fixed zone is another job

    with stack.client() as client:
        versions = {
            c["id"]: c["version"]
            for c in (
                client.get(f"/v1/capabilities/{i}").json() for i in (first["id"], second["id"])
            )
        }
        found = {
            intent: client.post("/v1/capabilities/search", json={"intent": intent}).json()
            for intent in (FIRST_INTENT, PARAPHRASED_INTENT)
        }
        graph = client.get("/api/graph/hypergraph").json()
        listed = client.get("/api/capabilities").json()
        learned = client.get("/api/metrics/summary").json()["capabilities_learned"]
    assert versions == {first["id"]: 1, second["id"]: 2}
    # The dashboard's list and count: one row per capability, at its latest version.
    rows = {c["name"]: (c["id"], c["version"], c["versions"]) for c in listed["capabilities"]}
    assert rows == {first["name"]: (second["id"], 2, 2), other["name"]: (other["id"], 1, 1)}
    assert listed["total"] == 2 and learned == 2, (listed, learned)
    # Either phrasing finds the latest version; the first is no longer matched on its own.
    for intent, answer in found.items():
        ids = [c["id"] for c in answer["capabilities"]]
        assert ids and ids[0] == second["id"] and first["id"] not in ids, (intent, answer)
    boxes = [n["data"] for n in graph["nodes"] if n["data"].get("kind") == "capability"]
    assert sorted(b["label"] for b in boxes) == sorted([first["name"], other["name"]]), boxes
    assert second["id"] in [b["capability_id"] for b in boxes]


BY_HAND = 'r = await mcp.time.get_current_time(timezone=args["tz"])\nreturn r["datetime"]'
IMPORTED = 'out = await mcp.time.get_current_time(timezone=args["where"])\nreturn out'
KEPT_APART = 'got = await mcp.time.get_current_time(timezone=args["place"])\nreturn got'


def _boxes(stack: E2EStack) -> list[dict[str, Any]]:
    with stack.client() as client:
        graph = client.get("/api/graph/hypergraph").json()
    return [n["data"] for n in graph["nodes"] if n["data"].get("kind") == "capability"]


def test_twins_learned_together_stored_apart_added_or_imported_are_one_family(
    shared_stack: E2EStack,
) -> None:
    tenant = f"t-{uuid.uuid4().hex[:10]}"
    stack = shared_stack.as_new_tenant(tenant)
    tools = [tool_ids.make("time", "get_current_time")]
    runs = [
        LearnedRun(str(uuid.uuid4()), tenant, code, intent, tools, duration_ms=5.0)
        for code, intent in ((FIRST, FIRST_INTENT), (PARAPHRASED, PARAPHRASED_INTENT))
    ]
    # Two twins in one learning batch: the second is the first's next version.
    with stack.db() as conn, conn.transaction():
        learned = apply_capability_runs(
            conn, learned=runs, reruns=[], embedder=get_embedder(stack.settings)
        )
    first_id, second_id = (str(learned[r.execution_id].capability["id"]) for r in runs)
    with stack.client() as client:
        first, second = (client.get(f"/v1/capabilities/{i}").json() for i in (first_id, second_id))
    assert (second["name"], second["version"]) == (first["name"], 2), (first, second)
    assert [b["capability_id"] for b in _boxes(stack)] == [second_id]

    # Twins stored apart (as before the rule, learned a minute apart) are folded into one
    # family by the merge the gateway runs at start; a second merge finds nothing.
    with stack.db() as conn:
        conn.execute(
            "UPDATE capabilities SET family_id = NULL, version = 1, name = 'clock_first_line', "
            "created_at = created_at + interval '1 minute' WHERE id = %s",
            (second_id,),
        )
        conn.execute("DELETE FROM capability_aliases WHERE capability_id = %s", (second_id,))
    assert len(_boxes(stack)) == 2
    with stack.db() as conn, conn.transaction():
        folds = merge_twins(conn, tenant_id=tenant)
        again = merge_twins(conn, tenant_id=tenant)
    assert [(f["name"], f["merged"]) for f in folds] == [(first["name"], second_id)], folds
    assert again == []
    with stack.client() as client:
        merged = client.get(f"/v1/capabilities/{second_id}").json()
        found = client.post("/v1/capabilities/search", json={"intent": FIRST_INTENT}).json()[
            "capabilities"
        ]
    assert (merged["name"], merged["version"]) == (first["name"], 2), merged
    assert found[0]["id"] == second_id, found  # the older phrasing finds the merged head
    assert [b["capability_id"] for b in _boxes(stack)] == [second_id]

    # By hand without a name, and by bundle import: the family's next versions; a name of
    # its own keeps a twin added by hand apart.
    bundle_entry = {
        "id": "x1", "family": "x1", "name": "imported_clock", "description": "a clock",
        "code": IMPORTED, "intent": "the time somewhere", "tools_used": tools,
        "parameters_schema": {}, "source": "emergent", "version": 1,
        "stats": {"usage_count": 1, "success_count": 1, "failure_count": 0,
                  "success_rate": 1.0, "avg_duration_ms": 5.0,
                  "created_at": "2026-01-01T00:00:00+00:00"},
    }  # fmt: skip
    with stack.client() as client:
        by_hand = client.post(
            "/v1/capabilities", json={"code": BY_HAND, "intent": "read a zone's clock"}
        )
        imported = client.post(
            "/v1/capabilities/import",
            json={"format": "agentcards.capabilities", "format_version": 1,
                  "capabilities": [bundle_entry]},
        )  # fmt: skip
        apart = client.post(
            "/v1/capabilities",
            json={"code": KEPT_APART, "intent": "my own clock", "name": "my_clock"},
        )
    assert by_hand.status_code == 201, by_hand.text
    assert (by_hand.json()["name"], by_hand.json()["version"]) == (first["name"], 3)
    assert imported.status_code == 200, imported.text
    entry = imported.json()["capabilities"][0]
    assert (entry["status"], entry["name"], entry["version"]) == ("created", first["name"], 4)
    assert (apart.json()["name"], apart.json()["version"]) == ("my_clock", 1), apart.text
    boxes = {b["label"]: b["capability_id"] for b in _boxes(stack)}
    assert boxes == {first["name"]: entry["id"], "my_clock": apart.json()["id"]}, boxes
