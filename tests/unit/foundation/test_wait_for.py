"""``asyncio.wait_for`` as Python 3.12 has it (shared/wait_for.py): a task cancelled just after
the awaited finished is cancelled, not handed the result; redis-py sends through it."""

from __future__ import annotations

import asyncio

import pytest
from redis.asyncio.connection import Connection

from shared.wait_for import patch_wait_for, wait_for


async def test_a_cancellation_that_comes_after_the_awaited_finished_is_raised() -> None:
    """The race: the awaited finishes, and the waiter is cancelled before it resumes (Python
    3.11's own ``wait_for`` returns the result then, and the cancelled task goes on)."""
    awaited: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    waiting = asyncio.create_task(wait_for(awaited, 5))
    await asyncio.sleep(0)  # it waits
    awaited.set_result("done")
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting


async def test_the_result_comes_back_and_a_timeout_cancels_the_awaited() -> None:
    assert await wait_for(asyncio.sleep(0, "done"), 5) == "done"
    slow = asyncio.ensure_future(asyncio.sleep(60))
    with pytest.raises(TimeoutError):
        await wait_for(slow, 0.01)
    assert slow.cancelled()


async def test_no_time_at_all_cancels_what_has_not_finished() -> None:
    done: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    done.set_result("done")
    assert await wait_for(done, 0) == "done"
    slow = asyncio.ensure_future(asyncio.sleep(60))
    with pytest.raises(TimeoutError):
        await wait_for(slow, 0)
    assert slow.cancelled()


class _Writer:
    """A stream writer that takes every write at once (nothing leaves the process)."""

    def __init__(self) -> None:
        self.sent: list[bytes] = []

    def writelines(self, data: list[bytes]) -> None:
        self.sent.extend(data)

    async def drain(self) -> None:
        return None


async def test_a_task_cancelled_as_its_redis_command_goes_out_stops(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The gateway's case: a task whose Redis client has a socket timeout (redis-py then sends
    through ``asyncio.wait_for``) is cancelled once its command is written, before it reads
    the reply. It must stop there, not read on as if it had not been cancelled."""
    monkeypatch.setattr(asyncio, "wait_for", asyncio.wait_for)  # restored after the test
    monkeypatch.setattr(asyncio.tasks, "wait_for", asyncio.tasks.wait_for)
    patch_wait_for()
    connection = Connection(socket_timeout=5.0)
    writer = _Writer()
    connection._reader, connection._writer = asyncio.StreamReader(), writer  # type: ignore[assignment]
    reply = asyncio.Event()  # never set: the reply it would read next

    async def command() -> None:
        await connection.send_packed_command(b"GET k", check_health=False)
        await reply.wait()

    running = asyncio.create_task(command())
    try:
        while not writer.sent:
            await asyncio.sleep(0)
        running.cancel()
        await asyncio.wait({running}, timeout=5)  # swallowed, it would wait for the reply
        assert running.cancelled()
        assert writer.sent == [b"GET k"]
    finally:
        running.cancel()
        connection._reader = connection._writer = None  # nothing to close: no socket
