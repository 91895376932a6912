"""On a real stack (gateway, sandbox and learning workers, toolhost, the example MCP server):
what agents and operators control of learning. A run can ask not to be learned from, an empty
result is no evidence, and a capability can be disabled, enabled and deleted (REST and CLI)."""

from __future__ import annotations

import time
from typing import Any

import pytest
from typer.testing import CliRunner

from deploy.cli.capabilities import capabilities_app
from shared.capabilities.outcome import CREATED_STATUSES
from tests.integration.mcp_servers import example_server
from tests.stack import E2EStack, mcp_session, stack_fixture

stack = stack_fixture(lambda tmp: {"example": example_server(tmp)})

ADD = "return {'sum': await mcp.example.add(a=args['a'], b=args['b'])}"


def _run(stack: E2EStack, body: dict[str, Any]) -> dict[str, Any]:
    with stack.client() as client:
        response = client.post("/v1/executions", params={"wait": "true"}, json=body)
    assert response.status_code == 200, response.text
    done: dict[str, Any] = response.json()
    assert done["status"] == "succeeded", done
    return done


def _execute(stack: E2EStack, capability_id: str, **body: Any) -> dict[str, Any]:
    with stack.client() as client:
        response = client.post(
            f"/v1/capabilities/{capability_id}/execute",
            params={"wait": "true"},
            json={"no_cache": True, **body},
        )
    assert response.status_code == 200, response.text
    done: dict[str, Any] = response.json()
    return done


def _learned(stack: E2EStack, execution_id: str) -> dict[str, Any]:
    with stack.db() as conn:
        row = conn.execute(
            "SELECT learned_at IS NOT NULL AS learned, "
            "(SELECT count(*) FROM capabilities c WHERE c.code = e.code) AS capabilities "
            "FROM executions e WHERE id = %s",
            (execution_id,),
        ).fetchone()
    assert row is not None
    return dict(row)


def _stats(stack: E2EStack, capability_id: str) -> tuple[int, int]:
    with stack.client() as client:
        item = client.get(f"/v1/capabilities/{capability_id}").json()
    with stack.db() as conn:
        row = conn.execute(
            "SELECT success_count FROM capabilities WHERE id = %s", (capability_id,)
        ).fetchone()
    assert row is not None
    return int(item["usage_count"]), int(row["success_count"])


def _wait_learned(stack: E2EStack, execution_id: str) -> None:
    """A capability re-run's response does not wait for learning: poll its learned_at."""
    for _ in range(600):
        with stack.db() as conn:
            row = conn.execute(
                "SELECT learned_at FROM executions WHERE id = %s", (execution_id,)
            ).fetchone()
        if row is not None and row["learned_at"] is not None:
            return
        time.sleep(0.1)
    raise AssertionError(f"execution {execution_id} was never learned from")


def test_learn_false_leaves_no_capability_and_the_same_run_with_learning_makes_one(
    stack: E2EStack,
) -> None:
    body = {"code": ADD, "args": {"a": 1, "b": 2}, "intent": "add two numbers and wrap the sum"}
    skipped = _run(stack, {**body, "learn": False})
    assert skipped["result"] == {"sum": 3} and skipped["capability"] is None, skipped
    assert _learned(stack, skipped["id"]) == {"learned": True, "capabilities": 0}
    kept = _run(stack, body)
    assert kept["capability"] and kept["capability"]["status"] == "created", kept
    assert _learned(stack, kept["id"]) == {"learned": True, "capabilities": 1}


@pytest.mark.parametrize("empty", ["{}", "[]", "None", '""'])
def test_an_empty_result_creates_no_capability(stack: E2EStack, empty: str) -> None:
    code = f"await mcp.example.add(a=1, b=1)\nreturn {empty}"
    done = _run(stack, {"code": code, "intent": f"compute something and give back {empty}"})
    assert done["capability"] is None, done
    assert _learned(stack, done["id"]) == {"learned": True, "capabilities": 0}


def test_empty_or_unwanted_re_runs_do_not_count_for_the_capability(stack: E2EStack) -> None:
    # (b=10: code making the same calls as another test's capability on this shared stack,
    # literals included, would be that capability's next version)
    code = "s = await mcp.example.add(a=args['a'], b=10)\nreturn {'s': s} if args['a'] else {}"
    first = _run(stack, {"code": code, "args": {"a": 1}, "intent": "add ten unless zero"})
    capability = first["capability"]["id"]
    assert _stats(stack, capability) == (1, 1)
    empty = _execute(stack, capability, args={"a": 0})
    assert empty["status"] == "succeeded" and empty["result"] == {}
    _wait_learned(stack, empty["id"])
    unwanted = _execute(stack, capability, args={"a": 5}, learn=False)
    assert unwanted["status"] == "succeeded" and unwanted["result"] == {"s": 15}
    _wait_learned(stack, unwanted["id"])
    assert _stats(stack, capability) == (1, 1)
    counted = _execute(stack, capability, args={"a": 7})
    _wait_learned(stack, counted["id"])
    assert _stats(stack, capability) == (2, 2)


def _search(stack: E2EStack, intent: str) -> list[str]:
    with stack.client() as client:
        found = client.post("/v1/capabilities/search", json={"intent": intent}).json()
    return [c["id"] for c in found["capabilities"] + found["candidates"]]


def test_a_disabled_capability_is_not_matched_and_refuses_runs_until_enabled(
    stack: E2EStack,
) -> None:
    intent = "multiply two numbers for the invoice total"
    code = "return {'total': await mcp.example.multiply(a=args['a'], b=args['b'])}"
    learned = _run(stack, {"code": code, "args": {"a": 2, "b": 3}, "intent": intent})
    capability = learned["capability"]["id"]
    assert capability in _search(stack, intent)
    with stack.client() as client:
        disabled = client.patch(f"/v1/capabilities/{capability}", json={"disabled": True})
        assert disabled.status_code == 200 and disabled.json()["disabled"] is True
        assert capability not in _search(stack, intent)
        refused = client.post(
            f"/v1/capabilities/{capability}/execute", json={"args": {"a": 1, "b": 1}}
        )
        assert refused.status_code == 409, refused.text
        error = refused.json()["error"]
        assert error["type"] == "capability_disabled" and "enable" in error["message"]
        assert error["details"]["capability_id"] == capability
        inline = client.post(
            "/v1/executions",
            params={"wait": "true"},
            json={"code": f"return await capabilities.{learned['capability']['name']}(a=1, b=1)"},
        ).json()
        assert inline["status"] == "failed" and "no capability named" in str(inline["error"])
        null = client.patch(f"/v1/capabilities/{capability}", json={"disabled": None})
        assert null.status_code == 422 and "disabled" in null.text
        enabled = client.patch(f"/v1/capabilities/{capability}", json={"disabled": False})
        assert enabled.status_code == 200 and enabled.json()["disabled"] is False
    assert capability in _search(stack, intent)
    again = _execute(stack, capability, args={"a": 4, "b": 5})
    assert again["status"] == "succeeded" and again["result"] == {"total": 20}


def test_the_cli_disables_enables_and_deletes(stack: E2EStack, cli: CliRunner) -> None:
    runner = cli
    with stack.client() as client:
        created = client.post(
            "/v1/capabilities",
            json={"code": 'return "pong"', "intent": "answer a ping", "name": "pong_cli"},
        ).json()
    disabled = runner.invoke(capabilities_app, ["disable", "pong_cli"])
    assert disabled.exit_code == 0 and "disabled pong_cli" in disabled.output
    shown = runner.invoke(capabilities_app, ["show", created["id"]])
    assert "disabled" in shown.output
    with stack.client() as client:
        assert client.get(f"/v1/capabilities/{created['id']}").json()["disabled"] is True
    enabled = runner.invoke(capabilities_app, ["enable", created["id"]])
    assert enabled.exit_code == 0 and "enabled pong_cli" in enabled.output
    refused = runner.invoke(capabilities_app, ["delete", created["id"]], input="n\n")
    assert refused.exit_code == 1
    deleted = runner.invoke(capabilities_app, ["delete", created["id"], "--yes"])
    assert deleted.exit_code == 0 and "deleted pong_cli" in deleted.output
    with stack.client() as client:
        assert client.get(f"/v1/capabilities/{created['id']}").status_code == 404
    missing = runner.invoke(capabilities_app, ["disable", created["id"]])
    assert missing.exit_code == 1 and "not_found" in missing.output


def test_a_near_identical_intent_with_the_same_tools_is_the_next_version_not_a_twin(
    stack: E2EStack,
) -> None:

    def learn(code: str, x: int, intent: str) -> dict[str, Any]:
        capability: dict[str, Any] = _run(
            stack, {"code": code, "args": {"x": x}, "intent": intent}
        )["capability"]
        return capability

    first = learn("return {'n': await mcp.example.add(a=1, b=args['x'])}", 1, "add one to a number")
    fixed = learn(
        "n = await mcp.example.add(a=args['x'], b=1)\nreturn {'n': n, 'x': args['x']}",
        2,
        "add one to the number",
    )
    assert fixed["id"] != first["id"] and fixed["name"] == first["name"], (first, fixed)
    with stack.client() as client:
        versions = client.get(f"/v1/capabilities/{first['id']}/versions").json()["versions"]
    assert [(v["id"], v["version"]) for v in versions] == [(first["id"], 1), (fixed["id"], 2)]
    found = _search(stack, "add one to a number")
    assert fixed["id"] in found and first["id"] not in found, found
    # Other tools for the same words are another job: a capability of its own name.
    other = learn(
        "return {'n': await mcp.example.multiply(a=args['x'], b=1) + 1}", 3, "add one to a number"
    )
    assert other["name"].startswith(first["name"] + "_") and other["id"] != first["id"]


def _feedback(stack: E2EStack, execution_id: str, **body: Any) -> dict[str, Any]:
    with stack.client() as client:
        response = client.post(f"/v1/executions/{execution_id}/feedback", json=body)
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


def test_feedback_un_teaches_a_wrong_run(stack: E2EStack) -> None:
    code = "return {'q': await mcp.example.divide(a=args['a'], b=args['b'])}"
    intent = "divide the invoice amount into equal parts"
    wrong = _run(stack, {"code": code, "args": {"a": 1, "b": 3}, "intent": intent})
    capability = wrong["capability"]
    assert capability["status"] == "created" and capability["id"] in _search(stack, intent)
    answer = _feedback(stack, wrong["id"], ok=False, reason="rounded to nothing")
    assert answer == {
        "execution_id": wrong["id"], "ok": False, "reason": "rounded to nothing",
        "capability": {"id": capability["id"], "name": capability["name"], "action": "deleted"},
    }  # fmt: skip
    with stack.client() as client:
        assert client.get(f"/v1/capabilities/{capability['id']}").status_code == 404
    assert capability["id"] not in _search(stack, intent)
    assert _feedback(stack, wrong["id"], ok=False)["capability"] == answer["capability"]

    # A capability other runs proved keeps them: the wrong run becomes a failure.
    runs = [_run(stack, {"code": code, "args": {"a": a, "b": 2}, "intent": intent}) for a in (4, 6)]
    kept = runs[0]["capability"]["id"]
    assert runs[1]["capability"]["id"] == kept and _stats(stack, kept) == (2, 2)
    counted = _feedback(stack, runs[1]["id"], ok=False)
    assert counted["capability"]["action"] == "counted_as_failure"
    assert _stats(stack, kept) == (2, 1)


def test_feedback_on_a_run_still_running_is_refused_and_a_run_not_yet_learned_never_is(
    stack: E2EStack,
) -> None:
    with stack.client() as client:
        slow = client.post(
            "/v1/executions",
            json={"code": "await asyncio.sleep(30)\nreturn {'late': True}", "intent": "wait"},
        ).json()
        refused = client.post(f"/v1/executions/{slow['id']}/feedback", json={"ok": False})
        assert refused.status_code == 409 and "finished" in refused.json()["error"]["message"]
        client.post(f"/v1/executions/{slow['id']}/cancel")
        unknown = client.post(
            "/v1/executions/00000000-0000-0000-0000-000000000000/feedback", json={"ok": False}
        )
        assert unknown.status_code == 404, unknown.text


async def test_mcp_report_execution_and_learn_false(stack: E2EStack) -> None:
    code = "return {'p': await mcp.example.multiply(a=args['a'], b=args['a'])}"
    async with mcp_session(stack) as session:
        tools = {t.name: t for t in (await session.list_tools()).tools}
        assert "learn" in tools["execute_code"].input_schema["properties"]
        assert "learn" in tools["execute_capability"].input_schema["properties"]
        skipped = await session.call_tool(
            "execute_code",
            {"code": code, "args": {"a": 3}, "intent": "square a number", "learn": False},
        )
        ran = await session.call_tool(
            "execute_code", {"code": code, "args": {"a": 4}, "intent": "square a number"}
        )
        assert skipped.structured_content and ran.structured_content
        assert skipped.structured_content["capability"] is None
        taught = ran.structured_content["capability"]
        # A new capability, or (an earlier test of this tenant taught the same calls) the
        # next version of one: either way the run brought it into being.
        assert taught["status"] in CREATED_STATUSES, ran.structured_content
        report = await session.call_tool(
            "report_execution",
            {"execution_id": ran.structured_content["id"], "ok": False, "reason": "wrong"},
        )
    assert not report.is_error and report.structured_content, report
    assert report.structured_content["capability"] == {
        "id": taught["id"], "name": taught["name"], "action": "deleted",
    }  # fmt: skip
