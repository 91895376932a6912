"""The finished row the worker carries to the waiting gateway (shared/executions/carried.py):
the same row Postgres holds, type for type, so a `wait=true` answer built from it is the GET
answer byte for byte; a row too large to carry is read from Postgres, with the same answer."""

from __future__ import annotations

from typing import Any

import redis

from shared.executions.carried import MAX_CARRIED_BYTES, decode_row
from shared.queues import finished_row_key
from tests.integration.mcp_servers import example_server
from tests.stack import E2EStack, stack_fixture

# Learning off: nothing touches the row after its worker stored it.
carried = stack_fixture(lambda tmp: {"example": example_server(tmp)}, learning=False)

TOOL_CODE = """
total = await mcp.example.add(a=args["a"], b=0.1)
print("héllo", total)
return {"total": total, "big": 2**62, "nested": [1.5, None, True, "ü"], "n": args["a"]}
"""


def _waited_then_got(stack: E2EStack, body: dict[str, Any]) -> tuple[bytes, bytes, str]:
    with stack.client() as client:
        waited = client.post("/v1/executions", params={"wait": "true"}, json=body)
        assert waited.status_code == 200, waited.text
        execution_id = waited.json()["id"]
        got = client.get(f"/v1/executions/{execution_id}")
        assert got.status_code == 200, got.text
    return waited.content, got.content, execution_id


def _carried(stack: E2EStack, execution_id: str) -> bytes | str | None:
    client = redis.Redis.from_url(stack.settings.redis_url or "")
    return client.get(finished_row_key(execution_id))


def test_the_carried_row_is_the_stored_row_and_the_answer_is_the_get_answer(
    carried: E2EStack,
) -> None:
    waited, got, execution_id = _waited_then_got(carried, {"code": TOOL_CODE, "args": {"a": 2}})
    assert waited == got  # the wait answer (from the carried row) is the GET's, byte for byte
    raw = _carried(carried, execution_id)
    assert raw is not None, "the worker carried no row"
    with carried.db() as conn:
        stored = conn.execute("SELECT * FROM executions WHERE id = %s", (execution_id,)).fetchone()
    assert stored is not None and stored["status"] == "succeeded"
    row = decode_row(raw)
    assert row == stored  # every column, datetimes and UUIDs too
    assert {k: type(v) for k, v in row.items()} == {k: type(v) for k, v in stored.items()}


def test_a_failed_run_answers_the_same_either_way(carried: E2EStack) -> None:
    body = {"code": "print('x')\nraise ValueError('no')", "args": {"a": 3}}
    waited, got, execution_id = _waited_then_got(carried, body)
    assert waited == got
    assert b'"status":"failed"' in waited
    assert _carried(carried, execution_id) is not None


def test_a_row_too_large_to_carry_is_read_from_postgres_with_the_same_answer(
    carried: E2EStack,
) -> None:
    body = {"code": "return 'x' * args['n']", "args": {"n": MAX_CARRIED_BYTES + 1}}
    waited, got, execution_id = _waited_then_got(carried, body)
    assert waited == got
    assert len(waited) > MAX_CARRIED_BYTES
    assert _carried(carried, execution_id) is None
