"""The checks on a 2026-07-28 retry's requestState once the SDK unsealed it (pure logic)."""

from __future__ import annotations

import time

import pytest
from mcp import types
from mcp.shared.exceptions import MCPError

from services.gateway.mcp import input_required
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
