"""shared.rpc.wire.Lines against a real Redis: refused commands, dropped connections, cancelled waits."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import redis
import redis.asyncio
from redis.exceptions import ResponseError

from deploy.launcher.embedded import EmbeddedRedis, free_port
from shared.rpc.wire import Lines

pytestmark = pytest.mark.integration


async def test_a_refused_command_comes_back_in_its_place_and_the_line_stays_in_step(
    redis_url: str,
) -> None:
    redis.Redis.from_url(redis_url).set("wire:s", "v")
    lines = Lines(redis_url, timeout_s=5)
    try:
        pushed, got = await lines.send(("RPUSH", "wire:s", "x"), ("GET", "wire:s"))
        again = await lines.send(("GET", "wire:s"), then=[("STRLEN", "wire:s")])
    finally:
        await lines.aclose()
    assert isinstance(pushed, ResponseError) and "WRONGTYPE" in str(pushed)
    assert got == b"v"
    assert again == [b"v", 1]  # the next batch reads its own replies, not stale ones


async def test_a_pipeline_s_queued_commands_go_out_as_one_batch_with_refusals_in_place(
    redis_url: str,
) -> None:
    client = redis.asyncio.Redis.from_url(redis_url)
    redis.Redis.from_url(redis_url).set("wire:q", "old")
    lines = Lines(redis_url, timeout_s=5)
    try:
        pipe = client.pipeline(transaction=False)
        pipe.set("wire:q", "new", ex=60, get=True)
        pipe.rpush("wire:q", "x")  # a string, not a list: refused
        pipe.hincrby("wire:h", "n", 2)
        replies = await lines.send_queued(pipe)
        scripted = client.pipeline(transaction=False)
        scripted.scripts.add(client.register_script("return 1"))
        with pytest.raises(ValueError):
            await lines.send_queued(scripted)
    finally:
        await lines.aclose()
        await client.aclose()
    assert replies[0] == b"old" and replies[2] == 2
    assert isinstance(replies[1], ResponseError) and "WRONGTYPE" in str(replies[1])
    assert redis.Redis.from_url(redis_url).get("wire:q") == b"new"


async def test_a_connection_redis_dropped_is_replaced_before_the_next_batch(
    redis_url: str,
) -> None:
    lines = Lines(redis_url, timeout_s=5)
    try:
        (first_id,) = await lines.send(("CLIENT", "ID"))
        redis.Redis.from_url(redis_url).client_kill_filter(_id=first_id)  # as a restart would
        await asyncio.sleep(0.1)  # the event loop sees the connection close
        (second_id,) = await lines.send(("CLIENT", "ID"))
    finally:
        await lines.aclose()
    assert second_id != first_id


async def test_a_cancelled_wait_never_takes_a_later_item(redis_url: str) -> None:
    lines = Lines(redis_url, timeout_s=None)
    try:
        waiting = asyncio.create_task(lines.send(("BLPOP", "wire:replies", 5)))
        await asyncio.sleep(0.1)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        client = redis.Redis.from_url(redis_url)
        client.rpush("wire:replies", "late reply")
        await asyncio.sleep(0.1)
        # The abandoned BLPOP's connection was closed, so the item is still there.
        assert client.lrange("wire:replies", 0, -1) == [b"late reply"]
    finally:
        await lines.aclose()


async def test_a_redis_restart_while_the_loop_was_idle_costs_no_batch(tmp_path: Path) -> None:
    # A sandbox pool process runs its event loop only during a run: a Redis that restarted in
    # between closed its idle connections, and the loop has not seen it. The next batch (a
    # tool call's push, never retried) must go out on a fresh connection, not fail.
    server = EmbeddedRedis.start(tmp_path / "redis", port=free_port(), persist=False)
    lines = Lines(server.url, timeout_s=5)
    try:
        await asyncio.gather(lines.send(("PING",)), lines.send(("PING",)))  # two idle lines
        server.process.kill()
        server.process.wait()
        server = server.restart()  # no await in between: the loop never ran
        assert await lines.send(("PING",)) == [b"PONG"]
        assert await lines.send(("PING",)) == [b"PONG"]
    finally:
        await lines.aclose()
        server.process.kill()
        server.process.wait()


async def test_an_idle_connection_the_event_loop_closed_is_replaced(redis_url: str) -> None:
    # asyncio closes a transport itself when its socket fails (a reset read while idle, a
    # failed write), and redis-py still counts the connection as connected: its socket's
    # descriptor is -1 then, which the staleness check must take as stale, not hand to poll
    # (ValueError: file descriptor cannot be a negative integer).
    lines = Lines(redis_url, timeout_s=5)
    try:
        (first_id,) = await lines.send(("CLIENT", "ID"))
        idle = lines._idle[0]
        writer = idle._writer  # type: ignore[attr-defined]
        writer.transport.abort()  # what the loop does on a socket error: close, no goodbye
        await asyncio.sleep(0)  # the loop runs connection_lost: the socket is closed
        assert writer.get_extra_info("socket").fileno() == -1
        (second_id,) = await lines.send(("CLIENT", "ID"))
    finally:
        await lines.aclose()
    assert second_id != first_id
