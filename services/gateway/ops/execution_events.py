"""Follow one execution's events: subscribe, replay the log, then live, each sequence number once."""

from __future__ import annotations

import time
from contextlib import AsyncExitStack
from types import TracebackType
from typing import Any

from services.gateway.state import GatewayState
from shared.executions.carried import row_in_message
from shared.executions.events import decode_event
from shared.pubsub_hub import RESYNC, Follower
from shared.queues import events_channel, events_log_key


async def read_events(state: GatewayState, *, execution_id: str) -> list[dict[str, Any]]:
    """The execution's events so far, from its log, in order."""
    raw = await state.aredis.lrange(events_log_key(execution_id), 0, -1)
    return [decode_event(item) for item in raw]


class EventFollower:
    """Async context manager yielding events in order; late subscribers miss nothing."""

    def __init__(self, state: GatewayState, *, execution_id: str, after_seq: int = 0) -> None:
        self._state = state
        self._execution_id = execution_id
        self._stack = AsyncExitStack()
        self._follower: Follower | None = None
        self._backlog: list[dict[str, Any]] = []
        self.last_seq = after_seq
        # The finished row its worker published just before `execution.finished` (encoded:
        # shared/executions/carried.py), once heard; not an event, so never passed on.
        self.carried: bytes | None = None

    async def __aenter__(self) -> EventFollower:
        # Subscribe before reading the log: an event published in between is in both,
        # and the sequence number drops the duplicate. The gateway's one subscriber
        # (shared/pubsub_hub.py) hands this execution's events over.
        async with AsyncExitStack() as stack:  # a failure below ends the subscription
            self._follower = await stack.enter_async_context(
                self._state.event_hub.follow(events_channel(self._execution_id))
            )
            self._backlog = await self._read_log()
            self._stack = stack.pop_all()  # entered: __aexit__ closes it
        return self

    async def _read_log(self) -> list[dict[str, Any]]:
        return await read_events(self._state, execution_id=self._execution_id)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self._stack.aclose()

    async def catch_up(self) -> None:
        """Read the log again: events published before now but not heard yet come next."""
        self._backlog.extend(await self._read_log())

    @property
    def replayed_any(self) -> bool:
        """True when the log held events (False: expired or never any)."""
        return bool(self._backlog) or self.last_seq > 0

    async def next(self, *, timeout_s: float) -> dict[str, Any] | None:
        """The next unseen event, or None when none arrived within `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        while True:
            while self._backlog:
                event = self._backlog.pop(0)
                if self._fresh(event):
                    return event
            if (remaining := deadline - time.monotonic()) <= 0:
                return None
            assert self._follower is not None  # entered
            data = await self._follower.get(timeout_s=remaining)
            if data is RESYNC:  # the subscriber reconnected: what it missed is in the log
                self._backlog = await self._read_log()
            elif data is not None:
                if (row := row_in_message(data)) is not None:
                    self.carried = row
                else:
                    self._backlog.append(decode_event(data))

    def _fresh(self, event: dict[str, Any]) -> bool:
        seq = int(event.get("seq") or 0)
        if seq and seq <= self.last_seq:
            return False
        self.last_seq = max(self.last_seq, seq)
        return True
