"""TypeScript on the real stack: gateway → Celery → sandbox (Deno) → toolhost → real MCP servers → learning."""

from __future__ import annotations

import ast
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import deno
import pytest

from tests.integration.mcp_servers import example_server, time_server
from tests.stack import E2EStack, mcp_session, stack_fixture

shared_stack = stack_fixture(lambda tmp: {"example": example_server(tmp), "time": time_server()})


@pytest.fixture(scope="module")
def stack(shared_stack: E2EStack) -> E2EStack:
    """The shared stack, as a tenant of its own: what it learns is its own to find."""
    return shared_stack.as_new_tenant()


ISSUE_EXAMPLE = """
const now = await mcp.time.get_current_time({ timezone: "UTC" });
const r: number = await mcp.example.add({ a: args.a, b: 2 });
console.log("adding", args.a);
progress("half way", 1, 2);
return { tz: now.timezone, r };
"""


def _post(stack: E2EStack, path: str, body: dict[str, Any]) -> dict[str, Any]:
    with stack.client() as client:
        response = client.post(path, params={"wait": "true"}, json=body)
    assert response.status_code == 200, response.text
    reply: dict[str, Any] = response.json()
    return reply


def test_a_typescript_run_calls_real_tools_and_becomes_a_typescript_capability(
    stack: E2EStack,
) -> None:
    body = {
        "code": ISSUE_EXAMPLE,
        "language": "typescript",
        "intent": "add two to a number and tell the UTC time",
        "args": {"a": 40},
    }
    run = _post(stack, "/v1/executions", body)
    assert run["status"] == "succeeded", run
    assert run["language"] == "typescript"
    assert run["result"] == {"tz": "UTC", "r": 42}
    assert run["stdout"] == "adding 40\n"
    assert [c["tool"] for c in run["tool_calls"]] == ["time:get_current_time", "example:add"]
    capability = run["capability"]
    assert capability and capability["status"] == "created"
    with stack.db() as conn:
        row = conn.execute("SELECT language FROM executions WHERE id = %s", (run["id"],)).fetchone()
        cap = conn.execute(
            "SELECT language, code FROM capabilities WHERE id = %s", (capability["id"],)
        ).fetchone()
    assert row == {"language": "typescript"}
    assert cap is not None and cap["language"] == "typescript" and cap["code"] == ISSUE_EXAMPLE

    # The capability runs in its own language, whoever calls it.
    again = _post(stack, f"/v1/capabilities/{capability['id']}/execute", {"args": {"a": 1}})
    assert again["status"] == "succeeded", again
    assert again["result"]["r"] == 3 and again["language"] == "typescript"

    # TypeScript code inlines it by name; Python code does not see a TypeScript capability.
    name = capability["name"]
    inlined = _post(
        stack,
        "/v1/executions",
        {"code": f"return (await capabilities.{name}({{ a: 5 }})).r;", "language": "typescript"},
    )
    assert inlined["status"] == "succeeded", inlined
    assert inlined["result"] == 7
    from_python = _post(stack, "/v1/executions", {"code": f"return await capabilities.{name}(a=5)"})
    assert from_python["status"] == "failed"
    assert name in from_python["error"]["message"]

    # JavaScript is TypeScript; a Python run of the same text is a different thing.
    js = _post(
        stack,
        "/v1/executions",
        {"code": "return await mcp.example.add({ a: 1, b: 1 });", "language": "javascript"},
    )
    assert js["status"] == "succeeded", js
    assert js["result"] == 2 and js["language"] == "typescript"


TIME_IN = """
const now = await mcp.time.get_current_time({ timezone: args.timezone });
return { timezone: now.timezone, weekday: now.day_of_week };
"""


def test_a_learned_typescript_capability_matches_a_paraphrase_and_its_clock_is_never_cached(
    stack: E2EStack,
) -> None:
    body = {
        "code": TIME_IN,
        "language": "typescript",
        "intent": "tell the current day of the week in a given timezone",
        "args": {"timezone": "Asia/Tokyo"},
    }
    first = _post(stack, "/v1/executions", body)
    assert first["status"] == "succeeded", first
    assert first["cache_hit"] is None and first["result"]["timezone"] == "Asia/Tokyo"
    capability = first["capability"]
    assert capability and capability["status"] == "created", first

    # Another phrasing of the same need finds it, and says it is TypeScript.
    paraphrase = "which weekday is it right now in a time zone"
    with stack.client() as client:
        found = client.post("/v1/capabilities/search", json={"intent": paraphrase})
        only_ts = client.post(
            "/v1/capabilities/search", json={"intent": paraphrase, "language": "typescript"}
        ).json()["capabilities"]
        only_py = client.post(
            "/v1/capabilities/search", json={"intent": paraphrase, "language": "python"}
        ).json()["capabilities"]
    assert found.status_code == 200, found.text
    matches = found.json()["capabilities"]
    assert matches and matches[0]["id"] == capability["id"], found.json()
    assert matches[0]["language"] == "typescript" and matches[0]["code"] == TIME_IN
    # The caller can keep one language.
    assert only_ts and only_ts[0]["id"] == capability["id"]
    assert all(m["language"] == "typescript" for m in only_ts)
    assert capability["id"] not in [m["id"] for m in only_py]
    assert all(m["language"] == "python" for m in only_py)

    # The same run again runs again: the clock has no TTL configured, so it is never cached.
    again = _post(stack, "/v1/executions", body)
    assert again["status"] == "succeeded", again
    assert again["cache_hit"] is None and again["source_execution_id"] is None
    assert again["result"] == first["result"] and again["language"] == "typescript"
    # The same text as Python is another program, which fails.
    python = _post(stack, "/v1/executions", {**body, "language": "python", "intent": None})
    assert python["status"] == "failed"


def test_typescript_errors_come_back_typed(stack: E2EStack) -> None:
    syntax = _post(stack, "/v1/executions", {"code": "const x = ;", "language": "typescript"})
    assert syntax["status"] == "failed"
    assert syntax["error"]["type"] == "syntax_error"
    assert syntax["error"]["details"]["line"] == 1
    failed = _post(
        stack,
        "/v1/executions",
        {"code": "await mcp.example.nope({});", "language": "typescript"},
    )
    assert failed["status"] == "failed"
    assert failed["error"]["type"] == "unknown_tool", failed["error"]


async def test_mcp_execute_code_takes_the_language(stack: E2EStack) -> None:
    progress: list[str | None] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append(message)

    async with mcp_session(stack) as session:
        await session.initialize()
        result = await session.call_tool(
            "execute_code",
            dict[str, Any](code=ISSUE_EXAMPLE, language="typescript", args={"a": 1}),
            progress_callback=on_progress,
        )  # fmt: skip
        bad = await session.call_tool("execute_code", {"code": "1", "language": "cobol"})
    assert not result.is_error, result.content
    ran: dict[str, Any] = result.structured_content or json.loads(_text(result.content[0]))
    ran = ran.get("result", ran) if set(ran) == {"result"} else ran
    assert ran["status"] == "succeeded" and ran["result"] == {"tz": "UTC", "r": 3}
    assert ran["language"] == "typescript"
    assert progress == ["half way"]
    assert bad.is_error and "language" in _text(bad.content[0])


ADD_DECLARATION = """/**
 * Add two numbers.
 *
 * Call: const result: ExampleAddResult = await mcp.example.add(args)
 */
type ExampleAddArgs = {
  a: number;
  b: number;
};
/** What the call returns (the tool's structured content). */
type ExampleAddResult = number;"""


def _declarations(hits: list[dict[str, Any]]) -> dict[str, str]:
    return {hit["id"]: hit["declaration"] for hit in hits if "declaration" in hit}


def test_tool_declarations_come_from_the_real_servers_schemas_when_asked(
    stack: E2EStack, tmp_path: Path
) -> None:
    with stack.client() as client:
        listed = client.get("/v1/tools", params={"declarations": "typescript"}).json()["tools"]
        plain = client.get("/v1/tools").json()["tools"]
        found = client.post(
            "/v1/tools/search", json={"query": "add two numbers", "declarations": "typescript"}
        ).json()["hits"]
        unasked = client.post("/v1/tools/search", json={"query": "add two numbers"}).json()["hits"]
        refused = client.get("/v1/tools", params={"declarations": "python"})
    declared = _declarations(listed)
    assert declared["example:add"] == ADD_DECLARATION
    assert _declarations(found)["example:add"] == ADD_DECLARATION
    # mcp-server-time's own schema: its field descriptions become JSDoc.
    now = declared["time:get_current_time"]
    assert "type TimeGetCurrentTimeArgs = {" in now and "  timezone: string;" in now
    assert "/** IANA timezone name" in now
    assert not _declarations(plain) and not _declarations(unasked)
    assert refused.status_code == 422 and "declarations" in refused.text
    # What a call returns, in every hit: the output schema where the server declares one
    # (the SDK's wrapped {"result": number}), and the convention code sees, with an example
    # (a tool without one returns its text: tests/unit/tools/test_returns.py).
    add = next(hit for hit in unasked if hit["id"] == "example:add")
    assert add["output_schema"]["properties"]["result"]["type"] == "number"
    assert add["returns"] == "returns its structured result unwrapped, e.g. 0"
    with stack.client() as client:
        clock = client.post("/v1/tools/search", json={"query": "current time in a timezone"})
    now_hit = next(h for h in clock.json()["hits"] if h["id"] == "time:get_current_time")
    # mcp-server-time (PyPI) declares its TimeResult: the example is built from it.
    assert set(now_hit["output_schema"]["properties"]) >= {"timezone", "datetime", "is_dst"}
    said, example = now_hit["returns"].split(", e.g. ")
    assert said == "returns its structured content (see output_schema)"
    assert ast.literal_eval(example) == {
        "timezone": "…", "datetime": "…", "day_of_week": "…", "is_dst": False,
    }  # fmt: skip

    # The declarations are TypeScript the compiler takes, and they catch a wrong call.
    source = "\n".join(declared.values()) + "\n"
    good = tmp_path / "good.ts"
    good.write_text(
        source + "const ok: ExampleAddArgs = { a: 1, b: 2 };\nconst sum: ExampleAddResult = 3;\n"
    )
    bad = tmp_path / "bad.ts"
    bad.write_text(source + 'const wrong: ExampleAddArgs = { a: "1" };\n')
    checked = _deno_check(good, tmp_path)
    assert checked.returncode == 0, checked.stderr
    wrong = _deno_check(bad, tmp_path)
    assert wrong.returncode != 0 and "TS2322" in wrong.stderr  # a string is not a number


async def test_mcp_search_tools_offers_declarations_when_asked(stack: E2EStack) -> None:
    async with mcp_session(stack) as session:
        asked = await session.call_tool(
            "search_tools", {"query": "add two numbers", "declarations": "typescript"}
        )
        unasked = await session.call_tool("search_tools", {"query": "add two numbers"})
        wrong = await session.call_tool(
            "search_tools", {"query": "add two numbers", "declarations": "python"}
        )
    assert not asked.is_error and not unasked.is_error
    assert asked.structured_content is not None and unasked.structured_content is not None
    assert _declarations(asked.structured_content["hits"])["example:add"] == ADD_DECLARATION
    assert not _declarations(unasked.structured_content["hits"])
    add = next(h for h in unasked.structured_content["hits"] if h["id"] == "example:add")
    assert add["returns"] == "returns its structured result unwrapped, e.g. 0"
    assert add["output_schema"]["properties"]["result"]["type"] == "number"
    assert wrong.is_error and "declarations" in _text(wrong.content[0])


def _deno_check(path: Path, tmp: Path) -> subprocess.CompletedProcess[str]:
    argv = [deno.find_deno_bin(), "check", "--no-config", "--no-lock", "--no-remote", str(path)]
    env = {"PATH": os.environ.get("PATH", ""), "DENO_DIR": str(tmp / "deno"), "NO_COLOR": "1"}
    return subprocess.run(
        argv,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        stdin=subprocess.DEVNULL,
    )


def _text(block: Any) -> str:
    text: str = block.text
    return text
