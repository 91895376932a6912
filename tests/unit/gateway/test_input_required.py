"""The checks on a 2026-07-28 retry's requestState once the SDK unsealed it (pure logic)."""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any, cast

import pytest
from mcp import types
from mcp.server.context import ServerRequestContext
from mcp.server.request_state import RequestStateBoundary
from mcp.shared.exceptions import MCPError
from pydantic import SecretStr
from starlette.requests import Request

from services.gateway.mcp import input_required, passthrough
from services.gateway.mcp.input_required import Pending
from shared.auth.principal import Principal
from shared.rpc.upstream import ClientRequest

ALICE = Principal(tenant_id="alice")


def _request(request_id: str, deadline: float) -> ClientRequest:
    params = {"message": "Name?", "requestedSchema": {"type": "object", "properties": {}}}
    return ClientRequest(
        id=request_id,
        execution_id="run-1",
        method="elicitation/create",
        params=params,
        server="asker",
        deadline=deadline,
    )


def _question() -> types.ElicitRequest:
    schema = {"type": "object", "properties": {}}
    return types.ElicitRequest(
        params=types.ElicitRequestFormParams(message="Name?", requested_schema=schema)
    )


def test_a_first_call_has_no_pending_questions() -> None:
    assert input_required.pending_of(None, principal=ALICE) is None


def test_the_state_names_the_run_its_questions_and_the_earliest_deadline() -> None:
    now = time.time()
    requests = [_request("a1", now + 60), _request("b2", now + 30)]
    asked = input_required.ask({"a1": _question(), "b2": _question()}, requests, tenant_id="alice")
    assert asked.result_type == "input_required" and set(asked.input_requests or {}) == {"a1", "b2"}
    pending = input_required.pending_of(asked.request_state, principal=ALICE)
    assert pending == Pending(
        execution_id="run-1", tenant_id="alice", requests=["a1", "b2"], deadline=now + 30
    )


def test_a_servers_own_keys_are_asked_and_map_back_to_the_relay_ids() -> None:
    """A 2026-07-28 server's keys (``user_name``) are what the client sees; the sealed state
    remembers which relay request each answers."""
    now = time.time()
    requests = [
        _request("a1", now + 60).model_copy(update={"key": "user_name"}),
        _request("b2", now + 60).model_copy(update={"key": "b2"}),
    ]
    asked = input_required.ask(
        {"user_name": _question(), "b2": _question()}, requests, tenant_id="alice"
    )
    pending = input_required.pending_of(asked.request_state, principal=ALICE)
    assert pending is not None and pending.requests == ["user_name", "b2"]
    assert pending.ids == {"user_name": "a1"}


def test_a_round_waits_for_every_question_of_a_servers_result() -> None:
    now = time.time()
    one = _request("a1", now + 60).model_copy(update={"batch": "r1", "batch_size": 2})
    two = _request("b2", now + 60).model_copy(update={"batch": "r1", "batch_size": 2})
    bare = _request("c3", now + 60)
    assert passthrough._incomplete([one, bare])
    assert not passthrough._incomplete([one, two, bare])
    assert not passthrough._incomplete([bare])


@pytest.mark.parametrize(
    ("state", "principal", "says"),
    [
        ("not json", ALICE, "not issued for a waiting execution"),
        (
            Pending(execution_id="r", tenant_id="bob", requests=["a1"], deadline=9e9),
            ALICE,
            "another tenant",
        ),
        (
            Pending(execution_id="r", tenant_id="alice", requests=["a1"], deadline=1.0),
            ALICE,
            "stopped waiting",
        ),
    ],
)
def test_a_state_for_no_run_another_tenant_or_a_tool_that_gave_up_is_refused(
    state: str | Pending, principal: Principal, says: str
) -> None:
    raw = state if isinstance(state, str) else state.model_dump_json()
    with pytest.raises(MCPError) as refused:
        input_required.pending_of(raw, principal=principal)
    assert refused.value.error.code == types.INVALID_PARAMS
    assert says in refused.value.error.message
    assert (refused.value.error.data or {})["type"] == "invalid_request_state"


def _context(principal: Principal, arguments: dict[str, object], state: str | None = None) -> Any:
    params: dict[str, object] = {"name": "execute_code", "arguments": arguments}
    if state is not None:
        params["requestState"] = state
    request = Request({"type": "http", "state": {"principal": principal}})
    return ServerRequestContext(
        session=cast(Any, None),
        lifespan_context={},
        protocol_version="2026-07-28",
        method="tools/call",
        params=params,
        request=request,
    )


async def test_the_sealed_state_only_opens_for_the_same_key_tool_and_arguments() -> None:
    settings = SimpleNamespace(secret_key=SecretStr("s" * 40))
    security = input_required.state_security(lambda: cast(Any, SimpleNamespace(settings=settings)))
    boundary = RequestStateBoundary(security, default_audience="agentcards")
    key_a = Principal(tenant_id="alice", key_id="key-a")
    inner = Pending(execution_id="r", tenant_id="alice", requests=["a1"], deadline=9e9)
    asked = types.InputRequiredResult(request_state=inner.model_dump_json())

    async def ask(ctx: Any) -> Any:
        return asked

    sealed = await boundary(_context(key_a, {"code": "x"}), ask)
    token = sealed.request_state
    assert token != asked.request_state and "alice" not in token  # encrypted, not just signed
    seen: list[str] = []

    async def record(ctx: Any) -> Any:
        seen.append(ctx.params["requestState"])
        return types.CallToolResult(content=[])

    await boundary(_context(key_a, {"code": "x"}, token), record)
    assert seen == [inner.model_dump_json()]  # the handler sees what it minted
    key_b = Principal(tenant_id="alice", key_id="key-b")
    for ctx in (_context(key_b, {"code": "x"}, token), _context(key_a, {"code": "y"}, token)):
        with pytest.raises(MCPError, match="Invalid or expired requestState"):
            await boundary(ctx, record)
    assert len(seen) == 1
