"""Twins on a real stack (mcp-server-time from PyPI): new code that calls the same tools in the
same order with the same parameters is the next version of the capability, whatever its
intent says: one capability with both phrasings, one box on the dashboard."""

from __future__ import annotations

from typing import Any

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
    assert versions == {first["id"]: 1, second["id"]: 2}
    # Either phrasing finds the latest version; the first is no longer matched on its own.
    for intent, answer in found.items():
        ids = [c["id"] for c in answer["capabilities"]]
        assert ids and ids[0] == second["id"] and first["id"] not in ids, (intent, answer)
    boxes = [n["data"] for n in graph["nodes"] if n["data"].get("kind") == "capability"]
    assert sorted(b["label"] for b in boxes) == sorted([first["name"], other["name"]]), boxes
    assert second["id"] in [b["capability_id"] for b in boxes]
