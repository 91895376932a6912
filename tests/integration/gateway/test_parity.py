"""REST and MCP give the same answer: every operation offered on both surfaces, errors included.

One table of cases drives both surfaces: each case names the operation and its arguments
(in the MCP tool's names); an adapter per operation sends them as the REST request and as
the MCP call, and both answers are reduced to what the operation promises (volatile fields
such as ids and timings dropped) before they are compared. A real stack serves both:
gateway, toolhost (the example server and server-everything), sandbox worker.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession, types
from mcp.shared.exceptions import MCPError

from shared.executions.liveness import BEAT_TTL_S
from shared.executions.models import ExecutionRequest
from shared.executions.store import create_execution
from tests.integration.mcp_servers import everything_server, example_server
from tests.stack import E2EStack, mcp_session, stack_fixture, wait_until

Answer = dict[str, Any]

STATIC_DOC = "demo://resource/static/document/architecture.md"
ADD = "return await mcp.example.add(a=args['a'], b=args['b'])"
CAPABILITY_CODE = "return {'sum': await mcp.example.add(a=args['a'], b=args['b'])}"
DEAD_WORKER = "gone-worker@nowhere"


def _servers(tmp: Path) -> dict[str, Any]:
    return {"example": example_server(tmp), "everything": everything_server()}


stack = stack_fixture(_servers, learning=False)


@dataclass(frozen=True)
class Case:
    """One request, sent over REST and over MCP; ``{name}`` in a string argument is filled
    from the prepared stack's ``refs`` (a finished run's id, a capability's name…)."""

    name: str
    op: str
    args: dict[str, Any] = field(default_factory=dict)
    expect: str = "ok"  # or the error type both surfaces must give

    def __str__(self) -> str:
        return f"{self.op}-{self.name}"


CASES = [
    Case("succeeds", "execute_code", {"code": ADD, "args": {"a": 2, "b": 3}, "no_cache": True}),
    Case("prints", "execute_code", {"code": "print('hi')\nreturn [1, 'x']", "no_cache": True}),
    Case("raises", "execute_code", {"code": "raise ValueError('no')", "no_cache": True}),
    Case("syntax error", "execute_code", {"code": "return (", "no_cache": True}),
    Case("tool fails", "execute_code", {"code": "return await mcp.example.nope()"}),
    Case("unknown tool in scope", "execute_code", {"code": ADD, "tools": ["nope:x"]}, "validation_error"),
    Case("NUL in code", "execute_code", {"code": "return 1\x00"}, "validation_error"),
    Case("timeout over the max", "execute_code", {"code": "return 1", "timeout_s": 1e9}, "validation_error"),
    Case("finished run", "get_execution", {"execution_id": "{finished}"}),
    Case("failed run", "get_execution", {"execution_id": "{failed}"}),
    Case("stale run is reaped", "get_execution", {"execution_id": "{stale}"}),
    Case("unknown id", "get_execution", {"execution_id": "00000000-0000-4000-8000-000000000000"}, "not_found"),
    Case("malformed id", "get_execution", {"execution_id": "not-an-id"}, "not_found"),
    Case("words", "search_tools", {"query": "add two numbers", "limit": 5}),
    Case("with context", "search_tools", {"query": "echo a message", "context_tools": ["example:add"]}),
    Case("blank query", "search_tools", {"query": "   "}, "validation_error"),
    Case("limit out of range", "search_tools", {"query": "add", "limit": 0}, "validation_error"),
    Case("intent", "search_capabilities", {"intent": "add two numbers together"}),
    Case("with suggestions", "search_capabilities", {"intent": "add numbers", "include_suggestions": True}),
    Case("NUL in intent", "search_capabilities", {"intent": "add\x00"}, "validation_error"),
    Case("by name", "execute_capability", {"capability_id": "{capability}", "args": {"a": 4, "b": 5}, "no_cache": True}),
    Case("args do not fit", "execute_capability", {"capability_id": "{capability}", "args": {"zzz": 1}}, "validation_error"),
    Case("unknown capability", "execute_capability", {"capability_id": "no_such_capability"}, "not_found"),
    Case("all", "list_resources"),
    Case("static document", "read_resource", {"server": "everything", "uri": STATIC_DOC}),
    Case("unknown uri", "read_resource", {"server": "everything", "uri": "demo://nope"}, "not_found"),
    Case("unknown server", "read_resource", {"server": "nowhere", "uri": STATIC_DOC}, "not_found"),
    Case("right", "report_execution", {"execution_id": "{finished}", "ok": True, "reason": "fine"}),
    Case("unknown id", "report_execution", {"execution_id": "00000000-0000-4000-8000-000000000000", "ok": False}, "not_found"),
    Case("malformed id", "report_execution", {"execution_id": "not-an-id", "ok": True}, "not_found"),
    Case("reason too long", "report_execution", {"execution_id": "{finished}", "ok": False, "reason": "x" * 2001}, "validation_error"),
]  # fmt: skip


@dataclass
class Prepared:
    """The stack with what the cases refer to; stale runs are made per surface (a read ends one)."""

    stack: E2EStack
    refs: dict[str, str]


@pytest.fixture(scope="module")
def prepared(stack: E2EStack) -> Prepared:
    """A finished and a failed run and a capability, made once over REST."""

    def everything_synced() -> bool:
        with stack.client() as client:
            return client.get("/v1/resources").json()["resources"] != []

    wait_until(everything_synced, what="server-everything's resources listed")
    with stack.client() as client:
        finished = client.post(
            "/v1/executions", params={"wait": "true"}, json={"code": "return 41 + 1"}
        ).json()
        failed = client.post(
            "/v1/executions", params={"wait": "true"}, json={"code": "1 / 0"}
        ).json()
        created = client.post(
            "/v1/capabilities", json={"code": CAPABILITY_CODE, "intent": "add two numbers"}
        )
        assert created.status_code == 201, created.text
    assert finished["status"] == "succeeded" and failed["status"] == "failed"
    refs = {
        "finished": finished["id"],
        "failed": failed["id"],
        "capability": created.json()["name"],
    }
    return Prepared(stack, refs)


def _filled(value: Any, refs: dict[str, str]) -> Any:
    if isinstance(value, str) and value.startswith("{") and value.endswith("}"):
        return refs.get(value[1:-1], value)
    return value


# -- the adapters: one per operation, REST and MCP --------------------------------------------


def _rest(stack: E2EStack, method: str, path: str, **kwargs: Any) -> Answer:
    """A REST answer: the body when 2xx, else the error envelope's inner object."""
    with stack.client() as client:
        response = client.request(method, path, **kwargs)
    body: Answer = response.json()
    if response.status_code >= 400:
        return {"error": body["error"]}
    return body


def _tool_answer(result: types.CallToolResult) -> Answer:
    """An MCP tool result: structured content (a failed run is still a view), or the error."""
    # A failed call carries REST's envelope {"error": {...}} as its structured content.
    assert result.structured_content is not None, result.content
    data: Answer = result.structured_content
    return data


async def _mcp_tool(session: ClientSession, tool: str, args: dict[str, Any]) -> Answer:
    return _tool_answer(await session.call_tool(tool, args))


def rest_call(stack: E2EStack, op: str, args: dict[str, Any]) -> Answer:
    """``op`` over REST, ``args`` in the MCP tool's names."""
    if op == "execute_code":
        return _rest(stack, "POST", "/v1/executions", params={"wait": "true"}, json=args)
    if op == "get_execution":
        return _rest(stack, "GET", f"/v1/executions/{args['execution_id']}")
    if op == "search_tools":
        return _rest(stack, "POST", "/v1/tools/search", json=args)
    if op == "search_capabilities":
        return _rest(stack, "POST", "/v1/capabilities/search", json=args)
    if op == "execute_capability":
        body = {k: v for k, v in args.items() if k != "capability_id"}
        path = f"/v1/capabilities/{args['capability_id']}/execute"
        return _rest(stack, "POST", path, params={"wait": "true"}, json=body)
    if op == "report_execution":
        body = {k: v for k, v in args.items() if k != "execution_id"}
        return _rest(stack, "POST", f"/v1/executions/{args['execution_id']}/feedback", json=body)
    if op == "list_resources":
        return _rest(stack, "GET", "/v1/resources")
    if op == "read_resource":
        return _rest(stack, "GET", "/v1/resources/read", params=args)
    raise AssertionError(op)


async def mcp_call(session: ClientSession, op: str, args: dict[str, Any]) -> Answer:
    """``op`` over MCP: a tool, or the resource methods (named ``agentcards://<server>/<uri>``)."""
    if op == "list_resources":
        listed = await session.list_resources()
        templates = await session.list_resource_templates()
        # The tenant's skills (skill://…/SKILL.md) are MCP's own: REST lists capabilities elsewhere.
        downstream = [r for r in listed.resources if not str(r.uri).startswith("skill://")]
        return {
            "resources": [
                _ungatewayed(r.model_dump(mode="json", by_alias=True)) for r in downstream
            ],
            "resource_templates": [
                _ungatewayed(t.model_dump(mode="json", by_alias=True), key="uriTemplate")
                for t in templates.resource_templates
            ],
        }
    if op == "read_resource":
        try:
            read = await session.read_resource(f"agentcards://{args['server']}/{args['uri']}")
        except MCPError as exc:
            return {"error": exc.error.data}
        contents = [
            c.model_dump(mode="json", by_alias=True, exclude_none=True) for c in read.contents
        ]
        for content in contents:
            content["uri"] = content["uri"].removeprefix(f"agentcards://{args['server']}/")
        return {"contents": contents}
    return await _mcp_tool(session, op, args)


def _ungatewayed(item: dict[str, Any], *, key: str = "uri") -> dict[str, Any]:
    """An MCP-listed item under the server's own names, as REST lists it (with ``server``)."""
    server, _, uri = str(item[key]).removeprefix("agentcards://").partition("/")
    return {"server": server, key: uri, "name": str(item["name"]).removeprefix(f"{server}:")}


# -- what each operation promises (volatile fields dropped) -----------------------------------


# What differs between two rows made alike (the stale-run case makes one per surface).
PER_ROW = frozenset({"id", "created_at", "finished_at", "duration_ms", "queued_ms"})
CONTENT = ("uri", "mimeType", "text", "blob")


def _execution(view: Answer) -> Answer:
    error = view.get("error")
    return {
        "status": view["status"],
        "result": view.get("result"),
        "stdout": view.get("stdout"),
        "error": None if error is None else {"type": error["type"], "message": error["message"]},
        "tools": [call["tool"] for call in view.get("tool_calls") or []],
        "tool_failures": [f.get("type") for f in view.get("tool_failures") or []],
        "cache_hit": view.get("cache_hit"),
    }


def _resources(listing: Answer) -> Answer:
    def names(items: list[dict[str, Any]], key: str) -> list[tuple[str, str, str]]:
        return sorted((i["server"], i[key], i.get("name", "")) for i in items)

    return {
        "resources": names(listing["resources"], "uri"),
        "resource_templates": names(listing["resource_templates"], "uriTemplate"),
    }


def _error(answer: Answer) -> Answer:
    error = answer["error"]
    return {"type": error["type"], "message": error["message"], "details": error.get("details")}


def normalised(op: str, answer: Answer) -> Answer:
    """The part of an answer both surfaces must agree on."""
    if "error" in answer and set(answer) == {"error"}:
        return {"error": _error(answer)}
    if op in {"execute_code", "execute_capability"}:
        return _execution(answer)
    if op == "get_execution":  # one row read twice, or two stale rows reaped alike
        return {k: v for k, v in answer.items() if k not in PER_ROW}
    if op == "read_resource":
        return {"contents": [{k: c.get(k) for k in CONTENT} for c in answer["contents"]]}
    if op == "list_resources":
        return _resources(answer)
    return answer


# -- the test ---------------------------------------------------------------------------------


def _stale_run(stack: E2EStack) -> str:
    """A run its worker left: running, claimed by a worker whose heartbeat never existed."""
    request = ExecutionRequest(code="return 'never'")
    with stack.db() as conn:
        row, _ = create_execution(conn, request=request, timeout_s=60)
        conn.execute(
            "UPDATE executions SET status = 'running', worker = %s, attempts = 1,"
            " started_at = now() - interval '10 seconds' WHERE id = %s",
            (DEAD_WORKER, row["id"]),
        )
    return str(row["id"])


async def _answers(prepared: Prepared, case: Case) -> tuple[Answer, Answer]:
    """The case over REST and over MCP (each stale-run case gets a run of its own per surface)."""
    stack = prepared.stack
    refs = dict(prepared.refs)
    rest_refs = {**refs, "stale": _stale_run(stack)} if case.name.startswith("stale") else refs
    mcp_refs = {**refs, "stale": _stale_run(stack)} if case.name.startswith("stale") else refs
    rest_args = {k: _filled(v, rest_refs) for k, v in case.args.items()}
    mcp_args = {k: _filled(v, mcp_refs) for k, v in case.args.items()}
    async with mcp_session(stack) as session:
        if case.name.startswith("stale"):
            # The first read marks the worker suspect; one a heartbeat TTL later confirms it.
            first = (
                await asyncio.to_thread(rest_call, stack, case.op, rest_args),
                await mcp_call(session, case.op, mcp_args),
            )
            assert [a["status"] for a in first] == ["running", "running"], first
            await asyncio.sleep(BEAT_TTL_S + 0.5)
        rest = await asyncio.to_thread(rest_call, stack, case.op, rest_args)
        mcp = await mcp_call(session, case.op, mcp_args)
    return rest, mcp


@pytest.mark.parametrize("case", CASES, ids=str)
async def test_rest_and_mcp_give_the_same_answer(prepared: Prepared, case: Case) -> None:
    rest, mcp = await _answers(prepared, case)
    if case.expect == "ok":
        assert "error" not in rest or set(rest) != {"error"}, rest
    else:
        assert rest.get("error", {}).get("type") == case.expect, rest
    assert normalised(case.op, rest) == normalised(case.op, mcp)
    if case.name.startswith("stale"):
        assert rest["status"] == "worker_lost", rest


def test_the_table_covers_every_operation_both_surfaces_offer() -> None:
    """A new operation on both surfaces needs its cases here."""
    both = {
        "execute_code",
        "get_execution",
        "search_tools",
        "search_capabilities",
        "execute_capability",
        "list_resources",
        "read_resource",
        "report_execution",
    }
    assert {case.op for case in CASES} == both
    for op in both - {"list_resources"}:  # listing takes no input to get wrong
        assert any(c.op == op and c.expect != "ok" for c in CASES), f"{op}: no error case"
