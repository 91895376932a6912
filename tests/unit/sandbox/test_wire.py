"""Defensive JSON handling shared by child and bridge."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from shared.sandbox.child import wire


def test_roundtrip_frame() -> None:
    frame = wire.encode({"op": "x", "v": [1, "é"]})
    assert wire.decode(frame[wire.HEADER.size :]) == {"op": "x", "v": [1, "é"]}


@pytest.mark.parametrize("body", [b"nope", b"[1]", b"\xff", b"[" * 100_000 + b"]" * 100_000])
def test_decode_rejects_non_objects_and_garbage(body: bytes) -> None:
    with pytest.raises(wire.WireError):
        wire.decode(body)


def test_exponential_bomb_is_rejected_in_bounded_work() -> None:
    value: Any = ["x"]
    for _ in range(60):
        value = [value, value]
    with pytest.raises(wire.ValueTooLarge):
        wire.dumps_bounded(value, max_bytes=1 << 20)


def test_deep_nesting_and_huge_ints_are_rejected() -> None:
    deep: Any = []
    for _ in range(100_000):
        deep = [deep]
    with pytest.raises(wire.ValueTooDeep):
        wire.dumps_bounded(deep, max_bytes=1 << 30)
    with pytest.raises(wire.ValueTooLarge):
        wire.dumps_bounded(10**5000, max_bytes=1 << 20)
    with pytest.raises(wire.WireError):
        wire.dumps_bounded(float("nan"), max_bytes=100)
    with pytest.raises(wire.WireError):
        wire.dumps_bounded({1: 2}, max_bytes=100)


def test_loads_bounded_caps_size_and_depth() -> None:
    assert wire.loads_bounded('{"a": [1, 2]}', max_bytes=100) == {"a": [1, 2]}
    with pytest.raises(wire.ValueTooLarge):
        wire.loads_bounded("[" + "1," * 100 + "1]", max_bytes=50)
    with pytest.raises(wire.WireError):
        wire.loads_bounded("[" * 5000 + "]" * 5000, max_bytes=1 << 20)
    with pytest.raises(wire.WireError):
        wire.loads_bounded("1" * 5000, max_bytes=1 << 20)


def test_read_frame_enforces_cap_and_truncation() -> None:
    async def read(data: bytes, cap: int) -> Any:
        reader = asyncio.StreamReader()
        reader.feed_data(data)
        reader.feed_eof()
        return await wire.read_frame(reader, cap)

    assert asyncio.run(read(b"", 10)) is None
    assert asyncio.run(read(wire.encode({"a": 1}), 100)) == {"a": 1}
    with pytest.raises(wire.WireError):
        asyncio.run(read(wire.encode({"a": "x" * 200}), 100))
    with pytest.raises(wire.WireError):
        asyncio.run(read(wire.encode({"a": 1})[:-2], 100))


@pytest.mark.parametrize(
    ("msg", "raw"),
    [
        ({"op": "tool_result", "id": 3, "ok": True}, {"value": '{"a":[1,"é"]}'}),
        ({"op": "start", "code": 'print("é")\n', "limits": {}}, {"args": "{}"}),
        ({}, {"result": "null"}),
        ({"op": "x"}, {}),
        ({"op": "done"}, {"a": "1", "b": '"two"'}),
    ],
)
def test_encode_with_frames_raw_members_as_json(msg: dict[str, Any], raw: dict[str, str]) -> None:
    frame = wire.encode_with(msg, raw)
    (size,) = wire.HEADER.unpack(frame[: wire.HEADER.size])
    assert size == len(frame) - wire.HEADER.size
    decoded = wire.decode(frame[wire.HEADER.size :])
    assert decoded == {**msg, **{key: json.loads(text) for key, text in raw.items()}}
    assert list(decoded) == [*msg, *raw]  # encoded members first, in order


def test_encode_with_copies_a_large_payload_unchanged() -> None:
    payload = wire.dumps_bounded({"rows": ["x" * 1000] * 1000, "ü": 1}, max_bytes=4 << 20)
    frame = wire.encode_with({"op": "tool_result", "id": 1, "ok": True}, {"value": payload})
    assert frame.endswith(b',"value":' + payload.encode() + b"}")


def test_encode_with_refuses_a_member_given_twice() -> None:
    with pytest.raises(ValueError, match="value"):
        wire.encode_with({"value": 1}, {"value": "2"})


@pytest.mark.parametrize("text", ["", "ascii", "é", "日本語", "x" * 1000 + "€"])
def test_utf8_size_is_the_encoded_length(text: str) -> None:
    assert wire.utf8_size(text) == len(text.encode())
