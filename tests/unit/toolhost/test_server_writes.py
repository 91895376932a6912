"""A server's row write that its caller's cancellation interrupts still lands before the stop's.

A stopping toolhost cancels its connections, then deletes its replica's rows. A connection
cancelled while its state write ran in a thread used to end at once while the thread wrote on:
the row came back after the delete, and the stopped replica still counted as serving the
server ("retrying") until another replica pruned it.
"""

from __future__ import annotations

import asyncio
import threading
from collections import defaultdict
from types import SimpleNamespace
from typing import Any

import pytest

from services.toolhost.app import Toolhost


async def test_a_cancelled_write_ends_its_caller_only_once_the_write_is_in() -> None:
    host: Any = SimpleNamespace(_db_locks=defaultdict(asyncio.Lock))
    started, release = threading.Event(), threading.Event()
    order: list[str] = []

    def slow_write() -> None:
        started.set()
        release.wait(5)
        order.append("state written")

    writing = asyncio.create_task(Toolhost._server_write(host, "example", slow_write))
    await asyncio.to_thread(started.wait, 5)
    writing.cancel()
    await asyncio.sleep(0.05)
    assert not writing.done()  # still waiting for its thread, and holding the server's lock
    assert host._db_locks["example"].locked()
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await writing
    order.append("rows forgotten")  # what the stop does once its connections are gathered
    assert order == ["state written", "rows forgotten"]
    assert not host._db_locks["example"].locked()


async def test_a_write_returns_its_result_and_raises_its_error() -> None:
    host: Any = SimpleNamespace(_db_locks=defaultdict(asyncio.Lock))
    assert await Toolhost._server_write(host, "example", lambda: 42) == 42

    def broken() -> None:
        raise RuntimeError("postgres went away")

    with pytest.raises(RuntimeError, match="postgres went away"):
        await Toolhost._server_write(host, "example", broken)
    assert not host._db_locks["example"].locked()
