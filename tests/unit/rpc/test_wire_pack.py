"""The RPC channel's packing of Redis commands: byte for byte what redis-py sends."""

from __future__ import annotations

import asyncio
from unittest.mock import AsyncMock, patch

import pytest
from redis.asyncio.connection import Connection
from redis.exceptions import DataError

from shared.rpc.wire import BIG_VALUE, Command, Lines, pack

BATCHES: list[list[Command]] = [
    [("SET", "agentcards:rpc:claim:c1", "agentcards:heartbeat:toolhost:vm:1", "EX", 89)],
    [("MULTI",), ("RPUSH", "k", b'{"ok":true}'), ("EXPIRE", "k", 60), ("EXEC",)],
    [("HINCRBYFLOAT", "h", "sum", 0.0034), ("BLPOP", "a", "b", 1.0), ("HINCRBY", "h", "b", -1)],
    [("SET", "k", "\u00e9t\u00e9 \U0001f600"), ("SET", b"k", bytearray(b"v"))],  # type: ignore[list-item]
    [("CLIENT SETINFO", "LIB-NAME", "x")],  # the name's words apart, as redis-py splits them
    [("SET", "big", b"x" * (BIG_VALUE + 1)), ("GET", "big")],
]


@pytest.mark.parametrize("batch", BATCHES)
def test_commands_are_packed_as_redis_py_packs_them(batch: list[Command]) -> None:
    expected = b"".join(Connection().pack_commands(batch))
    assert pack(batch) == expected
    assert pack(batch[:1], batch[1:]) == expected  # a batch and what follows it: one write


@pytest.mark.parametrize("bad", [True, None, [1], {"a": 1}])
def test_a_value_redis_py_refuses_is_refused(bad: object) -> None:
    with pytest.raises(DataError):
        pack([("SET", "k", bad)])  # type: ignore[list-item]


def test_commands_after_a_batch_that_cannot_be_packed_never_cost_the_batch() -> None:
    """A latency sample rides on a reply's write: a bad sample leaves the reply as it is."""

    class Conn:
        is_connected = True
        written: list[bytes] = []

        async def send_packed_command(self, data: bytes, check_health: bool) -> None:
            self.written.append(data)

        async def read_response(self) -> bytes:
            return b"OK"

    conn = Conn()
    lines = Lines("redis://127.0.0.1:1", timeout_s=1)
    lines._idle.append(conn)  # type: ignore[arg-type]

    async def send() -> list[object]:
        with patch("shared.rpc.wire._ready", new=AsyncMock()):
            return await lines.send(("SET", "k", "v"), then=[("SADD", "s", None)])  # type: ignore[list-item]

    replies = asyncio.run(send())
    assert replies[0] == b"OK" and isinstance(replies[1], DataError)
    assert conn.written == [pack([("SET", "k", "v")])]
