"""Wire models of the RPC channel: what is accepted, what is refused, what round-trips."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from shared.errors import ErrorType
from shared.rpc.protocol import (
    ResourceRequest,
    RpcReply,
    RpcRequest,
    decode_message,
    decode_reply,
    decode_request,
    encode,
)

VALID: dict[str, Any] = {
    "v": 1,
    "call_id": "c1",
    "execution_id": "e1",
    "tool": "example:add",
    "args": {"a": 1, "b": None},
    "deadline": 1_900_000_000.5,
}


def test_request_round_trips_with_scope() -> None:
    request = RpcRequest.model_validate(VALID | {"allowed": ["example:add"]})
    again = decode_request(encode(request))
    assert again == request
    assert (again.server, again.tool_name) == ("example", "add")
    assert again.args == {"a": 1, "b": None}  # None arguments survive


@pytest.mark.parametrize(
    "change",
    [
        {"v": 2},  # a future protocol version is refused, not guessed at
        {"tool": "add"},  # no server part
        {"tool": "example:"},
        {"tool": "bad server:add"},
        {"call_id": ""},
        {"call_id": "has space"},
        {"deadline": 0},
        {"args": [1, 2]},
        {"extra": True},
    ],
)
def test_malformed_requests_are_refused(change: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        RpcRequest.model_validate(VALID | change)


@pytest.mark.parametrize("missing", ["call_id", "execution_id", "tool", "deadline"])
def test_required_request_fields(missing: str) -> None:
    data = {k: v for k, v in VALID.items() if k != missing}
    with pytest.raises(ValidationError):
        RpcRequest.model_validate(data)


def test_decode_rejects_non_json() -> None:
    with pytest.raises(ValueError):
        decode_request(b"not json")


def test_reply_round_trips() -> None:
    ok = RpcReply(call_id="c1", ok=True, result={"x": [1, 2]}, duration_ms=0.4)
    assert decode_reply(encode(ok)) == ok
    failed = RpcReply.failure(call_id="c1", type=ErrorType.TIMEOUT, message="late")
    decoded = decode_reply(encode(failed))
    assert decoded.error is not None and decoded.error.type is ErrorType.TIMEOUT


def test_reply_outcome_must_be_consistent() -> None:
    with pytest.raises(ValidationError):
        RpcReply(call_id="c", ok=False, duration_ms=1)  # failure without an error
    with pytest.raises(ValidationError):
        RpcReply.model_validate(
            {
                "call_id": "c",
                "ok": True,
                "error": {"type": "timeout", "message": "m"},
                "duration_ms": 1,
            }
        )
    with pytest.raises(ValidationError):
        decode_reply(
            b'{"v":1,"call_id":"c","ok":false,"error":{"type":"oops","message":"m"},"duration_ms":1}'
        )


def test_error_type_wire_names_are_stable() -> None:
    # ErrorType is the whole failure vocabulary (shared.errors); the RPC names stay in it.
    assert {e.value for e in ErrorType} >= {
        "tool_error",
        "timeout",
        "unknown_tool",
        "server_unavailable",
        "tool_not_allowed",
        "invalid_request",
        "internal_error",
    }


def test_tool_calls_and_resource_requests_share_the_channel() -> None:
    call = RpcRequest.model_validate(VALID | {"trace_call_id": "call-3"})
    assert decode_message(encode(call)) == call
    read = ResourceRequest(
        op="read_resource",
        call_id="c2",
        execution_id="e1",
        server="everything",
        uri="demo://resource/static/document/a.md",
        deadline=1_900_000_000.5,
        allowed_servers=["everything"],
    )
    assert decode_message(encode(read)) == read


@pytest.mark.parametrize(
    "change",
    [
        {"op": "read_resource", "uri": None},  # reading needs a uri
        {"op": "read_resource", "server": None},  # and a server
        {"op": "delete_resource"},
        {"server": "no:colons"},
    ],
)
def test_resource_request_refuses_what_cannot_be_served(change: dict[str, Any]) -> None:
    base = {
        "op": "read_resource",
        "call_id": "c2",
        "execution_id": "e1",
        "server": "everything",
        "uri": "demo://x",
        "deadline": 1_900_000_000.5,
    }
    with pytest.raises(ValidationError):
        ResourceRequest.model_validate(base | change)
