"""What a direct task's end needs crosses the RPC channel whole: the toolhost ends the call
exactly as the gateway would have (its cache scope, its slot, its caller's privacy)."""

from __future__ import annotations

import orjson

from shared.auth.limits import Reservation
from shared.cache.policy import ToolPolicy
from shared.cache.runs import RunCache, Scope
from shared.direct.finish import CallEnd
from shared.executions.liveness import _liveness_key, lease_worker, sandbox_key
from shared.queues import direct_lease_key
from shared.rpc.protocol import RpcRequest, decode_request, encode


def _end() -> CallEnd:
    return CallEnd(
        execution_id="0b9f6f5e-0000-4000-8000-000000000001", tool_id="notes:add_note",
        pii_kinds=frozenset({"email", "phone"}), tenant_id="acme", key_id="k1", user=None,
        pii_off=False, code="# direct call\n", args={"title": "t"}, timeout_s=30.0,
        extras={"direct": {"session": "s", "after": None, "tool": "notes:add_note"}},
        created_at=1.5, trace_id=None,
        cache=RunCache(
            scope=Scope(policies={"notes:add_note": ToolPolicy(read_only=False, ttl_s=None)},
                        digest="d"),
            generations={"notes": 3}, capability_config=None,
        ),
        slot=Reservation(key_id="k1", member="m", counted_rate=True, counted_running=True),
        unresolved=["tok_1"],
    )  # fmt: skip


def test_a_task_s_end_survives_the_rpc_request_it_rides_on() -> None:
    end = _end()
    request = RpcRequest(call_id="c1", execution_id=end.execution_id, tool=end.tool_id,
                         deadline=2e9, end=end.to_wire())  # fmt: skip
    carried = decode_request(encode(request)).end
    assert carried is not None and CallEnd.of_wire(orjson.loads(orjson.dumps(carried))) == end


def test_a_direct_task_lives_while_its_lease_does() -> None:
    worker = lease_worker("e1")
    assert _liveness_key(worker) == direct_lease_key("e1")
    assert _liveness_key("host:12") == sandbox_key("host:12")
