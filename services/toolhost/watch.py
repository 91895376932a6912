"""The ``mcpServers`` file, watched: a changed file is applied to the running toolhost.

Polled (one ``stat`` a second, no extra dependency, works on every filesystem including
bind mounts where inotify events do not arrive). A file that does not parse leaves the
running servers as they are and is logged with the line and column; the next good save
applies. Which servers to start and stop is :func:`plan`: a server whose entry did not
change keeps its session, so calls in flight to it are not disturbed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from services.toolhost.servers import ServerConfig, load_servers
from shared.errors import AgentCardsError

log = logging.getLogger("agentcards.toolhost.watch")

POLL_EVERY_S = 1.0


@dataclass(frozen=True)
class Plan:
    """What a new configuration asks of the running servers."""

    start: list[str]  # new, or changed (stopped first)
    stop: list[str]  # gone, or changed

    def __bool__(self) -> bool:
        return bool(self.start or self.stop)


def plan(running: Mapping[str, ServerConfig], wanted: Mapping[str, ServerConfig]) -> Plan:
    """Servers to stop (gone or changed) and to start (new or changed); the rest stay."""
    changed = [n for n in running if n in wanted and running[n] != wanted[n]]
    return Plan(
        start=sorted([n for n in wanted if n not in running] + changed),
        stop=sorted([n for n in running if n not in wanted] + changed),
    )


def _signature(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


async def watch_config(
    path: Path,
    apply: Callable[[dict[str, ServerConfig]], Awaitable[None]],
    *,
    every_s: float = POLL_EVERY_S,
) -> None:
    """Call ``apply`` with the file's servers each time it changes; cancel to stop."""
    seen = _signature(path)
    while True:
        await asyncio.sleep(every_s)
        now = _signature(path)
        if now == seen or now is None:  # a file being replaced is briefly absent
            continue
        seen = now
        try:
            servers = await asyncio.to_thread(load_servers, path)
        except AgentCardsError as exc:
            log.warning(
                "MCP config changed but not applied (running servers kept): %s", exc.message
            )
            continue
        try:
            await apply(servers)
        except Exception:  # the watcher must outlive one failed apply
            log.exception("applying the changed MCP config failed")
