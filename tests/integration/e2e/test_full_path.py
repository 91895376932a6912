"""The whole path: HTTP gateway → Celery → sandbox → Redis RPC → toolhost → real MCP servers → learning."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import httpx

from shared.embeddings import get_embedder
from shared.search.hybrid import embed_texts_for_query, hybrid_tool_search
from tests.stack import E2EStack, wait_until

TWO_SERVERS = """
total = await mcp.example.add(a=args["a"], b=args["b"])
now = await mcp.time.get_current_time(timezone=args.get("tz", "UTC"))
print("sum", total)
return {"total": total, "tz": now["timezone"]}
"""


def _run(e2e: E2EStack, body: dict[str, Any]) -> dict[str, Any]:
    with e2e.client() as client:
        response = client.post("/v1/executions", params={"wait": "true"}, json=body)
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


def _capability(e2e: E2EStack, capability_id: str) -> dict[str, Any]:
    with e2e.db() as conn:
        row = conn.execute("SELECT * FROM capabilities WHERE id = %s", (capability_id,)).fetchone()
    assert row is not None
    return dict(row)


def _learned_sequence_edge(e2e: E2EStack, execution_id: str, src: str, dst: str) -> int:
    """Once the run is learned from: the count of its `src` -> `dst` sequence edge (0: none)."""
    with e2e.db() as conn:
        wait_until(
            lambda: conn.execute(
                "SELECT learned_at FROM executions WHERE id = %s", (execution_id,)
            ).fetchone()["learned_at"],  # type: ignore[index]
            what="ingestion",
        )
        edge = conn.execute(
            "SELECT count FROM tool_edges WHERE src = %s AND dst = %s AND kind = 'sequence'",
            (src, dst),
        ).fetchone()
    return int(edge["count"]) if edge else 0


def test_two_real_servers_then_a_capability_with_both_tools_and_a_schema(e2e: E2EStack) -> None:
    body = {
        "code": TWO_SERVERS,
        "intent": "add two numbers and tell the time",
        "args": {"a": 2, "b": 3},
    }
    first = _run(e2e, body)
    assert first["status"] == "succeeded", first
    assert first["result"] == {"total": 5, "tz": "UTC"}
    assert first["stdout"] == "sum 5.0\n"  # example:add takes and returns numbers
    assert [c["tool"] for c in first["tool_calls"]] == ["example:add", "time:get_current_time"]
    assert all(c["ok"] for c in first["tool_calls"])
    assert first["tool_failures"] == []
    capability = first["capability"]
    assert capability and capability["status"] == "created"

    row = _capability(e2e, capability["id"])
    assert row["tools_used"] == ["example:add", "time:get_current_time"]
    schema = row["parameters_schema"]
    assert schema["properties"]["a"]["type"] == "number"  # from example:add's input schema
    assert set(schema["required"]) == {"a", "b"}
    assert "tz" in schema["properties"] and "tz" not in schema["required"]
    assert row["usage_count"] == 1

    # Same code, reformatted and with other args: the same capability, used twice.
    again = _run(
        e2e,
        {
            **body,
            "code": "# again\n" + TWO_SERVERS.replace("=args", "= args"),
            "args": {"a": 1, "b": 1},
        },
    )
    assert again["result"]["total"] == 2
    assert again["capability"]["id"] == capability["id"]
    assert _capability(e2e, capability["id"])["usage_count"] == 2


def test_a_failing_tool_is_surfaced_not_saved_and_still_teaches_the_graph(e2e: E2EStack) -> None:
    code = """
notes = await mcp.example.list_notes()
try:
    await mcp.example.fail(message="boom")
except Exception as exc:
    caught = str(exc)
return {"notes": len(notes), "caught": caught}
"""
    result = _run(e2e, {"code": code, "intent": "list notes and call a failing tool"})
    assert result["status"] == "succeeded"
    assert "boom" in result["result"]["caught"]
    assert [f["tool"] for f in result["tool_failures"]] == ["example:fail"]
    assert result["capability"] is None
    assert _learned_sequence_edge(e2e, result["id"], "example:list_notes", "example:fail") >= 1
    with e2e.db() as conn:
        saved = conn.execute(
            "SELECT count(*) AS n FROM capabilities WHERE intent = %s",
            ("list notes and call a failing tool",),
        ).fetchone()
    assert saved == {"n": 0}


def test_a_run_without_an_intent_still_teaches_the_graph(e2e: E2EStack) -> None:
    # Nobody waits to see it learned: its ingestion waits for the next second's runs.
    code = "await mcp.example.list_notes()\nreturn await mcp.example.add(a=2, b=3)"
    result = _run(e2e, {"code": code})
    assert result["status"] == "succeeded" and result["capability"] is None
    assert _learned_sequence_edge(e2e, result["id"], "example:list_notes", "example:add") >= 1


def test_npm_memory_server_through_the_sandbox(e2e: E2EStack) -> None:
    code = """
await mcp.memory.create_entities(entities=[
    {"name": args["name"], "entityType": "person", "observations": ["likes tea"]}])
graph = await mcp.memory.read_graph()
return [e["name"] for e in graph["entities"]]
"""
    result = _run(e2e, {"code": code, "args": {"name": "Ada"}})
    assert result["status"] == "succeeded", result
    assert "Ada" in result["result"]


def test_gather_runs_tool_calls_concurrently_through_the_channel(e2e: E2EStack) -> None:
    code = """
import asyncio
a, b = await asyncio.gather(mcp.example.slow(seconds=0.5), mcp.example.slow(seconds=0.5))
return [a, b]
"""
    result = _run(e2e, {"code": code})
    assert result["status"] == "succeeded", result
    with e2e.db() as conn:
        trace = conn.execute(
            "SELECT trace FROM executions WHERE id = %s", (result["id"],)
        ).fetchone()["trace"]  # type: ignore[index]
    starts = [e["ts"] for e in trace if e["type"] == "tool_start"]
    ends = [e["ts"] for e in trace if e["type"] == "tool_end"]
    assert len(starts) == 2 and len(ends) == 2
    assert max(starts) < min(ends), "the second call started only after the first ended"


def test_out_of_scope_tool_is_refused(e2e: E2EStack) -> None:
    code = "return await mcp.example.multiply(a=2, b=3)"
    result = _run(e2e, {"code": code, "tools": ["example:add"]})
    assert result["status"] == "failed"
    assert result["error"]["type"] == "tool_not_allowed"


def test_events_stream_progress_tools_and_finish(e2e: E2EStack) -> None:
    code = """
progress("starting", done=0, total=2)
await mcp.example.add(a=1, b=2)
progress("halfway", done=1, total=2)
await mcp.example.slow(seconds=0.3)
return "ok"
"""
    with e2e.client() as client:
        created = client.post("/v1/executions", json={"code": code}).json()
        events: list[dict[str, Any]] = []
        with client.stream("GET", f"/v1/executions/{created['id']}/events") as stream:
            for line in stream.iter_lines():
                if line.startswith("data:"):
                    events.append(json.loads(line[5:]))
                    if events[-1].get("type") == "execution.finished":
                        break
    kinds = [e.get("type") for e in events]
    assert "progress" in kinds and "tool_start" in kinds and "tool_end" in kinds
    assert kinds[-1] == "execution.finished" and events[-1]["status"] == "succeeded"
    messages = [e["message"] for e in events if e.get("type") == "progress"]
    assert messages == ["starting", "halfway"]


def test_a_hanging_tool_times_out_and_other_executions_are_unaffected(e2e: E2EStack) -> None:
    hang = {"code": "return await mcp.example.slow(seconds=60)", "timeout_s": 2}
    quick = {"code": "return await mcp.example.add(a=1, b=1)"}
    with e2e.client() as client:
        slow_id = client.post("/v1/executions", json=hang).json()["id"]
        fast = client.post("/v1/executions", params={"wait": "true"}, json=quick).json()
        assert fast["status"] == "succeeded" and fast["result"] == 2
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            slow = client.get(f"/v1/executions/{slow_id}").json()
            if slow["status"] not in ("queued", "running"):
                break
            time.sleep(0.2)
    assert slow["status"] == "timeout", slow
    assert slow["error"]["type"] == "timeout"


def test_unknown_execution_and_bad_body_over_real_http(e2e: E2EStack) -> None:
    with httpx.Client(base_url=e2e.gateway_url) as client:
        assert client.get("/v1/executions/00000000-0000-0000-0000-000000000000").status_code == 404
        bad = client.post("/v1/executions", json={"code": ""})
        assert bad.status_code == 422 and bad.json()["error"]["type"] == "validation_error"


def _sse(
    client: httpx.Client, url: str, headers: dict[str, str] | None = None
) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    with client.stream("GET", url, headers=headers or {}) as stream:
        for line in stream.iter_lines():
            if line.startswith("data:"):
                events.append(json.loads(line[5:]))
                if events[-1].get("type") == "execution.finished":
                    break
    return events


def test_late_subscribers_replay_everything_and_can_resume(e2e: E2EStack) -> None:
    code = 'progress("one")\nprogress("two")\nreturn await mcp.example.add(a=1, b=2)'
    with e2e.client() as client:
        done = client.post("/v1/executions", params={"wait": "true"}, json={"code": code}).json()
        assert done["status"] == "succeeded"
        url = f"/v1/executions/{done['id']}/events"
        replay = _sse(client, url)
        kinds = [e["type"] for e in replay]
        assert kinds == ["progress", "progress", "tool_start", "tool_end", "execution.finished"]
        assert [e["seq"] for e in replay] == sorted(e["seq"] for e in replay)
        resumed = _sse(client, url, headers={"Last-Event-ID": str(replay[1]["seq"])})
    assert [e["type"] for e in resumed] == kinds[2:]


def test_remembering_a_fact_does_not_lift_the_tools_that_delete(e2e: E2EStack) -> None:
    # The request's frame ("remember this fact") is as near delete_observations as
    # add_observations for the embedding model; the memory server declares delete_* as
    # destructive in its tools/list, the toolhost stores that, and the search reads it:
    # a request that asks to remove nothing does not lift them. Searched as a tenant of its
    # own that learned nothing, by the function REST's search calls: a key issued here would
    # make this shared stack ask the keyless tests after this module for one.
    query = "remember that Alice works at Acme"
    vectors = get_embedder(e2e.settings).embed_query(embed_texts_for_query(query))
    with e2e.db() as conn:
        hits = hybrid_tool_search(
            conn,
            query=query,
            query_embedding=vectors[0],
            clause_embeddings=vectors[1:],
            limit=10,
            tenant_id=f"t-{uuid.uuid4().hex[:10]}",
        )
    assert hits[0]["id"] in {"memory:create_entities", "memory:add_observations"}, hits
    frame = "the request's action, without its payload, matches better"
    lifted = {h["id"] for h in hits if frame in h["why"]}
    assert lifted & {"memory:create_entities", "memory:add_observations"}, hits
    assert not {i for i in lifted if i.startswith("memory:delete_")}, hits


def test_a_runs_intent_teaches_the_next_search_through_the_learning_worker(
    e2e: E2EStack,
) -> None:
    # The whole path of immediate learning: a run through the gateway, its row ingested by
    # the real learning worker, and the tenant's next search for a paraphrase names the
    # tool the run used, "used for similar requests before".
    query = "remember that my neighbour Tomas keeps bees"

    def hit() -> dict[str, Any]:
        with e2e.client() as client:
            response = client.post("/v1/tools/search", json={"query": query, "limit": 10})
        assert response.status_code == 200, response.text
        found = {h["id"]: h for h in response.json()["hits"]}
        return found.get("memory:create_entities", {"scores": {"learned": 0.0}, "why": ""})

    before = hit()["scores"]["learned"]
    code = """
await mcp.memory.create_entities(entities=[
    {"name": "Tomas", "entityType": "person", "observations": ["keeps bees"]}])
"""
    result = _run(e2e, {"code": code, "intent": "remember that my neighbour Tomas keeps bees"})
    assert result["status"] == "succeeded", result
    wait_until(
        lambda: hit()["scores"]["learned"] > before,
        what="the run's intent voting in the next search",
        timeout_s=60,
    )
    assert "used for similar requests before" in hit()["why"]
