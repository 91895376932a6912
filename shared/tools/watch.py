"""The tools' version as this process last heard it from Postgres, so a hot path finds the tools
it holds without reading the version itself (a direct call: ``services/gateway/ops/direct.py``).

``tools_state.version`` (migration 0027) changes in the transaction of any change to what a run
reads of the tools; migration 0036 makes that transaction notify ``CHANNEL`` too (Postgres
sends the notification at the commit). The watch LISTENs on a connection of its own, reads the
version after its LISTEN, and again after every notification and every ``REREAD_EVERY_S``.

What it trades: a change is seen once its notification is read here (at the commit, plus a
loop turn), not at the next call's own read. Callers therefore treat what it says as a hint
for what they may use, never as a reason to refuse: a tool not found among the rows of the
heard version is looked for again with a read of the version (``tools_held`` vs the read).

The watch says nothing (``heard`` is None) unless it is sure it hears: its connection is up, it
read the version after its LISTEN, and a notification it sent itself came back on it (a
pooler in transaction mode, PgBouncer's, runs the LISTEN on a server connection this client
is not attached to afterwards, and its notifications never arrive: the probe tells). Silent,
every caller reads the version as before.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Any

import psycopg

from shared.db import database_key, psycopg_url
from shared.tools.store import TOOLS_VERSION_SQL

log = logging.getLogger(__name__)

CHANNEL = "agentcards_tools_state"
APPLICATION_NAME = "agentcards-tools-watch"  # its connection, as pg_stat_activity names it
# A probe that has not come back within this long: notifications do not reach this client.
PROBE_WAIT_S = 2.0
# The version is read again this often even without a notification (a lost one costs that).
REREAD_EVERY_S = 30.0
# A read of the version that takes longer than this: the connection is taken for dead.
READ_TIMEOUT_S = 5.0
# After a failure, and after a probe that did not come back, the watch tries again this late.
RETRY_S = 5.0
SILENT_RETRY_S = 300.0


class ToolsWatch:
    """One LISTEN connection and the version it heard last (``heard``)."""

    def __init__(self, database_url: str) -> None:
        self._url = psycopg_url(database_url)
        # (database key as ``shared.db.database_key`` gives it, version): what the rows this
        # process holds are kept under. None: not sure; read the version.
        self.heard: tuple[str, Any] | None = None

    async def run(self) -> None:
        """Listen until cancelled; a lost connection is silent until it listens again."""
        while True:
            wait = RETRY_S
            try:
                if not await self._listen():
                    wait = SILENT_RETRY_S
            except (psycopg.Error, OSError, TimeoutError) as exc:
                log.info("tools' version watch: %s; every call reads the version meanwhile", exc)
            finally:
                self.heard = None
            await asyncio.sleep(wait)

    async def _listen(self) -> bool:
        """Listen on one connection until it fails; False when its probe never came back."""
        conn = await psycopg.AsyncConnection.connect(
            self._url, autocommit=True, application_name=APPLICATION_NAME
        )
        async with conn:
            await conn.execute(f"LISTEN {CHANNEL}")
            probe = uuid.uuid4().hex
            await conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, probe))
            if not await _came_back(conn, probe):
                log.warning(
                    "tools' version watch: its own notification did not come back within %.0f s "
                    "(a pooler in transaction mode?): every direct call reads the version",
                    PROBE_WAIT_S,
                )
                return False
            key = database_key(conn)
            while True:
                version = await _version(conn)
                self.heard = None if version is None else (key, version)
                async for _ in conn.notifies(timeout=REREAD_EVERY_S, stop_after=1):
                    pass  # a change committed (or the time passed): read the version again


async def _came_back(conn: psycopg.AsyncConnection[Any], probe: str) -> bool:
    async for note in conn.notifies(timeout=PROBE_WAIT_S):
        if note.payload == probe:
            return True
    return False


async def _version(conn: psycopg.AsyncConnection[Any]) -> Any:
    async def read() -> Any:
        found = await (await conn.execute(TOOLS_VERSION_SQL)).fetchone()
        return None if found is None else found[0]

    return await asyncio.wait_for(read(), timeout=READ_TIMEOUT_S)
