"""The toolhost's heartbeat keeps beating while reconciling waits on a Postgres that is down.

A loop that awaited its reconcile (a prune through the Postgres pool) between beats would
stop beating while Postgres is down: with Postgres down for 15 s the heartbeat key expires
after HEARTBEAT_TTL_S, and a call in flight comes back ``tool_unavailable``.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from services.toolhost import app as toolhost_app


class _Stuck:
    """A toolhost whose reconcile never returns (a pool waiting for Postgres)."""

    def __init__(self) -> None:
        self.beats = 0
        self.reconciles_started = 0
        self.released = asyncio.Event()

    async def _beat(self) -> None:
        self.beats += 1

    async def _reconcile(self, *, prune: bool) -> None:
        self.reconciles_started += 1
        await self.released.wait()


async def test_beats_go_on_while_a_reconcile_is_stuck(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(toolhost_app, "HEARTBEAT_EVERY_S", 0.001)
    host: Any = _Stuck()
    host._reconcile_logged = toolhost_app.Toolhost._reconcile_logged.__get__(host)
    loop = asyncio.create_task(toolhost_app.Toolhost._heartbeat_loop(host))
    for _ in range(2000):  # bounded: the loop sleeps 1 ms a beat
        if host.beats >= 10:
            break
        await asyncio.sleep(0.001)
    assert host.beats >= 10  # awaiting the reconcile, it would stop at 1
    assert host.reconciles_started == 1  # one at a time: no pile of waiting prunes
    host.released.set()
    for _ in range(2000):
        if host.reconciles_started >= 2:
            break
        await asyncio.sleep(0.001)
    assert host.reconciles_started >= 2  # once it returns, the next beat reconciles again
    loop.cancel()
    with pytest.raises(asyncio.CancelledError):
        await loop
