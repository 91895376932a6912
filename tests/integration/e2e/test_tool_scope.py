"""Tool scope and tool names on the real stack: allow-lists enforced at submission, in the bridge
and in the toolhost; Python spellings of `get-sum` names; unknown tools with suggestions."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
import redis
from fastapi.testclient import TestClient

from services.gateway.app import create_app
from services.gateway.rest.deps import current_principal
from shared.auth.principal import Principal
from shared.broker import make_celery
from shared.db import connect
from shared.executions.models import ExecutionRequest
from shared.executions.status import TERMINAL
from shared.executions.store import create_execution, get_execution
from shared.queues import RPC_REQUESTS, TaskName, grant_key, rpc_reply_key
from shared.rpc.protocol import decode_reply
from tests.integration.mcp_servers import (
    example_server,
    grant,
    install_everything_server,
    time_server,
    wait_for,
)
from tests.stack import E2EStack, stack_fixture, wait_until

e2e = stack_fixture(
    lambda tmp: {
        "example": example_server(tmp),
        "time": time_server(),
        "everything": {"command": str(install_everything_server())},
    }
)

TIME_ONLY = Principal(tenant_id="default", key_id=str(uuid.uuid4()), tool_patterns=("time:*",))

CATCH = """
out = {}
for server, tool, kwargs in args["calls"]:
    try:
        await mcp[server][tool](**kwargs)
        out[f"{server}:{tool}"] = "ok"
    except Exception as exc:  # ToolCallError: .type says why
        out[f"{server}:{tool}"] = [exc.type, exc.message]
return out
"""


@pytest.fixture
def as_key(e2e: E2EStack) -> Iterator[Any]:
    """``as_key(principal)``: a gateway client whose requests run as ``principal`` from then on
    (what the auth layer sets for an API key)."""
    current = {"principal": Principal(tenant_id="default")}
    app = create_app(e2e.settings)
    app.dependency_overrides[current_principal] = lambda: current["principal"]
    with TestClient(app) as client:

        def as_principal(principal: Principal) -> TestClient:
            current["principal"] = principal
            return client

        yield as_principal


def _run(client: Any, body: dict[str, Any]) -> dict[str, Any]:
    response = client.post("/v1/executions", params={"wait": "true"}, json=body)
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


def _wait_terminal(e2e: E2EStack, execution_id: str) -> dict[str, Any]:
    def finished() -> bool:
        with e2e.db() as conn:
            row = get_execution(conn, execution_id=execution_id)  # type: ignore[arg-type]
        return row is not None and row["status"] in TERMINAL

    wait_until(finished, what=f"execution {execution_id} finished")
    with e2e.db() as conn:
        row = get_execution(conn, execution_id=execution_id)  # type: ignore[arg-type]
    assert row is not None
    return dict(row)


def test_a_time_only_key_is_refused_example_add_at_submission(as_key: Any) -> None:
    client = as_key(TIME_ONLY)
    response = client.post(
        "/v1/executions", json={"code": "return 1", "tools": ["example:add", "example:multiply"]}
    )
    assert response.status_code == 403, response.text
    error = response.json()["error"]
    assert error["type"] == "tool_not_allowed"
    assert "example:add, example:multiply" in error["message"] and "time:*" in error["message"]
    assert error["details"]["tools"] == ["example:add", "example:multiply"]

    # Naming some allowed tools narrows the scope to them instead.
    mixed = _run(
        client,
        {
            "code": "return await mcp.time.get_current_time(timezone='UTC')",
            "tools": ["example:add", "time:get_current_time"],
        },
    )
    assert mixed["status"] == "succeeded", mixed
    assert mixed["result"]["timezone"] == "UTC"


def test_without_tools_the_allow_list_is_the_scope(e2e: E2EStack, as_key: Any) -> None:
    client = as_key(TIME_ONLY)
    calls = [["time", "get_current_time", {"timezone": "UTC"}], ["example", "list_notes", {}]]
    done = _run(client, {"code": CATCH, "args": {"calls": calls}})
    assert done["status"] == "succeeded", done
    assert done["result"]["time:get_current_time"] == "ok"
    assert done["result"]["example:list_notes"][0] == "tool_not_allowed"
    # The audit row of the run holds its status and each tool call with its outcome.
    with e2e.db() as conn:
        row = conn.execute(
            "SELECT key_id, action, status, tools FROM audit_log WHERE execution_id = %s",
            (done["id"],),
        ).fetchone()
    assert row is not None and str(row["key_id"]) == TIME_ONLY.key_id
    assert row["action"] == "execute" and row["status"] == "succeeded"
    outcomes = {t["tool"]: (t["ok"], t["error_type"]) for t in row["tools"]}
    assert outcomes == {
        "time:get_current_time": (True, None),
        "example:list_notes": (False, "tool_not_allowed"),
    }


def test_a_capability_runs_under_the_callers_allow_list(e2e: E2EStack, as_key: Any) -> None:
    author = as_key(Principal(tenant_id="default"))
    first = _run(
        author,
        {
            "code": "return await mcp.example.add(a=args['a'], b=2)",
            "intent": "add two to a number, for the scope test",
            "args": {"a": 1},
        },
    )
    assert first["status"] == "succeeded" and first["capability"], first
    capability_id = first["capability"]["id"]

    caller = as_key(TIME_ONLY)
    response = caller.post(
        f"/v1/capabilities/{capability_id}/execute",
        params={"wait": "true"},
        json={"args": {"a": 1}},
    )
    # Refused before anything starts, as execute_code refuses tools outside the allow-list.
    assert response.status_code == 403, response.text
    error = response.json()["error"]
    assert error["type"] == "tool_not_allowed" and "example:add" in error["message"]
    assert error["details"]["tools"] == ["example:add"]
    assert error["details"]["capability_id"] == capability_id
    with e2e.db() as conn:
        runs = conn.execute(
            "SELECT count(*) AS n FROM executions WHERE capability_id = %s", (capability_id,)
        ).fetchone()
    assert runs is not None and runs["n"] == 0


def test_the_bridge_refuses_what_the_grant_does_not_allow(e2e: E2EStack) -> None:
    # Skip the gateway: a row whose own scope names example:add, with a grant for time:* only.
    with connect(e2e.settings.database_url or "", autocommit=True) as conn:
        row, _ = create_execution(
            conn,
            request=ExecutionRequest(
                code=CATCH, args={"calls": [["example", "list_notes", {}], ["time", "nosuch", {}]]},
                tools=["example:list_notes", "time:get_current_time"],
            ),
            timeout_s=20,
        )  # fmt: skip
    execution_id = str(row["id"])
    grant(e2e.settings.redis_url or "", execution_id, patterns=("time:*",))
    celery = make_celery("scope-test", settings=e2e.settings)
    try:
        celery.send_task(TaskName.RUN_EXECUTION, args=[execution_id])
    finally:
        celery.close()
    done = _wait_terminal(e2e, execution_id)
    assert done["status"] == "succeeded", done["error"]
    assert done["result"]["example:list_notes"][0] == "tool_not_allowed"
    assert done["result"]["time:nosuch"][0] == "unknown_tool"
    # The run is over: its grant is gone, so nothing can use it any more.
    assert redis.Redis.from_url(e2e.settings.redis_url or "").get(grant_key(execution_id)) is None


def _forge(e2e: E2EStack, execution_id: str, tool: str, args: dict[str, Any]) -> Any:
    """Push an RPC request straight onto the toolhosts' list, as a compromised worker could."""
    return _push_and_wait(e2e, {"execution_id": execution_id, "tool": tool, "args": args})


def _push_and_wait(e2e: E2EStack, fields: dict[str, Any]) -> Any:
    """Push one request (``fields`` + version, call id, deadline) and wait for its reply."""
    client = redis.Redis.from_url(e2e.settings.redis_url or "")
    call_id = uuid.uuid4().hex
    request = {"v": 1, "call_id": call_id, "deadline": time.time() + 20, **fields}
    client.rpush(RPC_REQUESTS, orjson.dumps(request))
    popped = client.blpop([rpc_reply_key(call_id)], timeout=20)
    assert popped is not None, "no reply from the toolhost"
    return decode_reply(popped[1])


def test_the_toolhost_refuses_a_forged_request_outside_the_grant(e2e: E2EStack) -> None:
    execution_id = f"forged-{uuid.uuid4().hex[:8]}"
    grant(e2e.settings.redis_url or "", execution_id, patterns=("time:*",))
    marker = f"forged {uuid.uuid4().hex}"
    refused = _forge(e2e, execution_id, "example:add_note", {"title": marker, "body": ""})
    assert not refused.ok and refused.error.type == "tool_not_allowed"
    ungranted_id = f"nobody-{uuid.uuid4().hex[:8]}"
    ungranted = _forge(e2e, ungranted_id, "time:get_current_time", {})
    assert not ungranted.ok and ungranted.error.type == "tool_not_allowed"
    assert "has no tool grant" in ungranted.error.message
    allowed = _forge(e2e, execution_id, "time:get_current_time", {"timezone": "UTC"})
    assert allowed.ok, allowed.error

    log = e2e.procs["toolhost"].log()
    assert f"refused tool call {refused.call_id} to example:add_note" in log

    # Both refusals are in the audit log, the granted one under its tenant.
    def audited() -> list[dict[str, object]]:
        with e2e.db() as conn:
            return conn.execute(
                "SELECT tenant_id, details FROM audit_log WHERE action = 'tool_call_refused' "
                "AND details->>'execution' IN (%s, %s)",
                (execution_id, ungranted_id),
            ).fetchall()

    rows = wait_for(lambda: len(audited()) == 2 and audited(), what="two audit rows")
    by_tool = {r["details"]["tool"]: r for r in rows}  # type: ignore[index]
    assert by_tool["example:add_note"]["tenant_id"] == "default"
    assert by_tool["time:get_current_time"]["tenant_id"] == ""
    # The note was never written.
    with TestClient(create_app(e2e.settings)) as client:
        notes = _run(client, {"code": "return await mcp.example.list_notes()"})
    assert notes["status"] == "succeeded", notes
    assert all(n["title"] != marker for n in notes["result"])


def test_tool_calls_per_minute_per_key(as_key: Any) -> None:
    limited = Principal(tenant_id="default", key_id=str(uuid.uuid4()), tool_calls_per_min=2)
    code = """
out = []
for _ in range(5):
    try:
        await mcp.time.get_current_time(timezone="UTC")
        out.append("ok")
    except Exception as exc:
        out.append([exc.type, exc.message])
return out
"""
    done = _run(as_key(limited), {"code": code})
    assert done["status"] == "succeeded", done
    # Five calls span at most two clock minutes, so at least one window saw three.
    refused = [r for r in done["result"] if r != "ok"]
    assert refused and all(r[0] == "rate_limited" for r in refused)
    assert "2 tool calls a minute" in refused[0][1] and "retry in" in refused[0][1]
    assert done["result"].count("ok") <= 4


def test_dashed_names_by_attribute_and_by_subscript(e2e: E2EStack) -> None:
    code = """
a = await mcp.everything.get_sum(a=2, b=3)
b = await mcp["everything"]["get-sum"](a=4, b=5)
return [a, b]
"""
    with e2e.client() as client:
        done = _run(client, {"code": code})
    assert done["status"] == "succeeded", done
    assert "5" in str(done["result"][0]) and "9" in str(done["result"][1])
    assert [c["tool"] for c in done["tool_calls"]] == ["everything:get-sum"] * 2


def test_unknown_tools_name_the_nearest_and_existing_ones_are_out_of_scope(e2e: E2EStack) -> None:
    calls = [
        ["time", "nosuch", {}],
        ["nosuch", "tool", {}],
        ["time", "get_curent_time", {}],
        ["example", "add", {"a": 1, "b": 2}],
    ]
    with e2e.client() as client:
        done = _run(
            client,
            {"code": CATCH, "args": {"calls": calls}, "tools": ["time:get_current_time"]},
        )
    assert done["status"] == "succeeded", done
    result = done["result"]
    assert result["time:nosuch"][0] == "unknown_tool"
    assert "MCP server 'time' has no tool 'nosuch'" in result["time:nosuch"][1]
    assert "time:get_current_time" in result["time:nosuch"][1]
    assert result["nosuch:tool"][0] == "unknown_tool"
    assert "no MCP server named 'nosuch'" in result["nosuch:tool"][1]
    assert result["time:get_curent_time"][0] == "unknown_tool"
    assert "did you mean time:get_current_time" in result["time:get_curent_time"][1]
    assert result["example:add"][0] == "tool_not_allowed"


def test_a_key_sees_and_reads_resources_only_of_servers_it_has_tools_of(as_key: Any) -> None:
    document = "demo://resource/static/document/architecture.md"
    everyone = as_key(Principal(tenant_id="default")).get("/v1/resources").json()
    assert {"everything"} <= {r["server"] for r in everyone["resources"]}

    client = as_key(TIME_ONLY)
    listed = client.get("/v1/resources").json()
    assert all(r["server"] == "time" for r in listed["resources"] + listed["resource_templates"])
    refused = client.get("/v1/resources/read", params={"server": "everything", "uri": document})
    assert refused.status_code == 403, refused.text
    assert refused.json()["error"]["type"] == "tool_not_allowed"
    assert "everything" in refused.json()["error"]["message"]


def _forge_resource(e2e: E2EStack, execution_id: str, server: str | None, uri: str) -> Any:
    """Push a resources request straight onto the toolhosts' list (as ``_forge`` does)."""
    op = "read_resource" if server else "list_resources"
    fields = {"op": op, "execution_id": execution_id, "server": server}
    return _push_and_wait(e2e, {**fields, "uri": uri if server else None})


def test_the_toolhost_checks_resource_reads_against_the_grant(e2e: E2EStack) -> None:
    # The bridge's allowed_servers is the bridge's word; the grant is the gateway's.
    doc = "demo://resource/static/document/architecture.md"
    narrow = f"forged-{uuid.uuid4().hex[:8]}"
    grant(e2e.settings.redis_url or "", narrow, patterns=("time:*",))
    refused = _forge_resource(e2e, narrow, "everything", doc)
    assert not refused.ok and refused.error.type == "tool_not_allowed", refused
    assert "needs one of its tools" in refused.error.message
    nobody = _forge_resource(e2e, f"nobody-{uuid.uuid4().hex[:8]}", "everything", doc)
    assert not nobody.ok and "has no tool grant" in nobody.error.message
    listing = _forge_resource(e2e, narrow, None, doc)
    assert not listing.ok and listing.error.type == "tool_not_allowed"
    wide = f"granted-{uuid.uuid4().hex[:8]}"
    grant(e2e.settings.redis_url or "", wide, patterns=("everything:*",))
    read = _forge_resource(e2e, wide, "everything", doc)
    assert read.ok, read.error
    assert read.result["contents"][0]["uri"] == doc
