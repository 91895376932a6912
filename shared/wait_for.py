"""``asyncio.wait_for`` as Python 3.12 has it, on 3.11: it never swallows a cancellation.

On 3.11, ``wait_for`` runs its awaitable as a task of its own; when the caller is cancelled
after that task finished but before the caller resumed, it returns the result instead of
raising (CPython gh-86296; 3.12 rebuilt ``wait_for`` on ``asyncio.timeout``). redis-py's
async client sends every command through ``wait_for`` when it has a socket timeout (the
gateway's has), so a task cancelled just as one of its commands went out carried on as if it
had not been cancelled, and whoever cancelled it and waited for it to stop waited until it
ended on its own. The gateway ends the loser of a race that way: a 2026-07-28 ``tools/call``
waits for its run's end and for a question from its tools, and cancels the first when the
second comes. A question that came while the wait for the end was still sending its first
commands (subscribing to the run's events, reading its log) was held until the run ended;
the tool waited for an answer until its deadline and the client was never asked.

Entry points call ``patch_wait_for`` first thing (as they call ``go_offline``); on 3.12 and
later it does nothing.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable
from typing import Any, TypeVar

T = TypeVar("T")


async def wait_for(fut: Awaitable[T], timeout: float | None) -> T:
    """Python 3.12's ``asyncio.wait_for``: ``fut`` awaited in the caller's own task, bounded
    by ``asyncio.timeout`` (TimeoutError when it runs out; a cancellation always raised)."""
    if timeout is not None and timeout <= 0:  # no time at all: cancelled unless already done
        task = asyncio.ensure_future(fut)
        if task.done():
            return task.result()
        await _cancel_and_wait(task)
        try:
            return task.result()
        except asyncio.CancelledError as exc:
            raise TimeoutError from exc
    async with asyncio.timeout(timeout):
        return await fut


async def _cancel_and_wait(task: asyncio.Future[Any]) -> None:
    """Cancel ``task`` and wait until it ends (without awaiting it: this stays cancellable)."""
    ended: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def release(_: asyncio.Future[Any]) -> None:
        if not ended.done():
            ended.set_result(None)

    task.add_done_callback(release)
    try:
        task.cancel()
        await ended
    finally:
        task.remove_done_callback(release)


def patch_wait_for() -> None:
    """Make ``asyncio.wait_for`` this one in this process (before 3.12 only)."""
    if sys.version_info < (3, 12):
        asyncio.wait_for = asyncio.tasks.wait_for = wait_for  # type: ignore[assignment]
