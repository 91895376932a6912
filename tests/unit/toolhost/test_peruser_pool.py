"""People's sessions to a server that acts for them are a bounded pool: the least recently
used idle one makes room, busy ones are never closed, idle ones close after ``idle_s``."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from services.toolhost.peruser import BearerFrom, PerUserServer, _Session
from services.toolhost.registry import ServerUnavailable
from services.toolhost.servers import HttpServer
from services.toolhost.upstream import Caller


class _Nobody:
    """A credential that is never asked here (the pool's policy alone is under test)."""

    listing = None

    async def token(self, caller: Caller, *, fresh: bool) -> str:
        raise AssertionError("not asked")


async def _ignored(*args: Any) -> None:
    return None


def _pool(max_sessions: int, idle_s: float = 300.0) -> PerUserServer:
    return PerUserServer(
        name="tickets",
        config=HttpServer(url="http://tickets.test/mcp"),
        credential=_Nobody(),  # type: ignore[arg-type]
        on_tools=_ignored,
        on_state=_ignored,
        upstream=None,
        connect_timeout_s=1.0,
        max_sessions=max_sessions,
        idle_s=idle_s,
    )


def _open(pool: PerUserServer, user: str, *, used_at: float = 0.0, calls: int = 0) -> _Session:
    """A session of ``user`` in the pool (its task runs until closed)."""

    async def token() -> str:
        return "t"

    task = asyncio.create_task(asyncio.sleep(3600))
    session = _Session(object(), task, Caller("acme", user), BearerFrom(token),  # type: ignore[arg-type]
                       used_at=used_at, calls=calls)  # fmt: skip
    pool._sessions[("acme", user)] = session
    return session


async def test_the_least_recently_used_idle_session_makes_room() -> None:
    pool = _pool(max_sessions=3)
    alice, bob, carol = _open(pool, "alice", calls=1), _open(pool, "bob"), _open(pool, "carol")
    await pool._make_room()  # alice is the oldest but busy: bob goes
    await asyncio.sleep(0)
    assert list(pool._sessions) == [("acme", "alice"), ("acme", "carol")]
    assert bob.task.cancelled() and not alice.task.done() and not carol.task.done()
    await pool._make_room()  # room left: nobody goes
    assert pool.sessions == 2


async def test_a_pool_of_busy_sessions_refuses_a_new_person() -> None:
    pool = _pool(max_sessions=2)
    _open(pool, "alice", calls=1)
    _open(pool, "bob", calls=2)
    with pytest.raises(ServerUnavailable, match="2 people's sessions are busy"):
        await pool._make_room()
    assert pool.sessions == 2


async def test_idle_sessions_close_and_busy_ones_stay() -> None:
    pool = _pool(max_sessions=8, idle_s=300.0)
    stale = _open(pool, "alice", used_at=100.0)
    busy = _open(pool, "bob", used_at=100.0, calls=1)
    fresh = _open(pool, "carol", used_at=350.0)
    await pool.reap_idle(now=500.0)  # alice and bob idle since 100, carol since 350
    assert list(pool._sessions) == [("acme", "bob"), ("acme", "carol")]
    assert stale.task.cancelled() and not busy.task.done() and not fresh.task.done()
    for session in (busy, fresh):
        session.task.cancel()
