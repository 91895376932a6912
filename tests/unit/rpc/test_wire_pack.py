"""The RPC channel's packing of Redis commands: byte for byte what redis-py sends."""

from __future__ import annotations

import pytest
from redis.asyncio.connection import Connection
from redis.exceptions import DataError

from shared.rpc.wire import BIG_VALUE, pack

BATCHES = [
    [("SET", "agentcards:rpc:claim:c1", "agentcards:heartbeat:toolhost:vm:1", "EX", 89)],
    [("MULTI",), ("RPUSH", "k", b'{"ok":true}'), ("EXPIRE", "k", 60), ("EXEC",)],
    [("HINCRBYFLOAT", "h", "sum", 0.0034), ("BLPOP", "a", "b", 1.0), ("HINCRBY", "h", "b", -1)],
    [("SET", "k", "\u00e9t\u00e9 \U0001f600"), ("SET", b"k", bytearray(b"v"))],
    [("CLIENT SETINFO", "LIB-NAME", "x")],  # the name's words apart, as redis-py splits them
    [("SET", "big", b"x" * (BIG_VALUE + 1)), ("GET", "big")],
]


@pytest.mark.parametrize("batch", BATCHES)
def test_commands_are_packed_as_redis_py_packs_them(batch: list[tuple[object, ...]]) -> None:
    expected = b"".join(Connection().pack_commands(batch))
    assert pack(batch) == expected
    assert pack(batch[:1], batch[1:]) == expected  # a batch and what follows it: one write


@pytest.mark.parametrize("bad", [True, None, [1], {"a": 1}])
def test_a_value_redis_py_refuses_is_refused(bad: object) -> None:
    with pytest.raises(DataError):
        pack([("SET", "k", bad)])  # type: ignore[list-item]
