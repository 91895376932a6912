"""uvicorn's httptools protocol, the writes of one event-loop turn sent as one.

uvicorn writes a response's status line and headers as soon as the app starts it, then each
body chunk: a JSON answer is two sends on the socket, two segments for the client to wait on.
Here the writes a connection makes in one turn of the loop are joined and sent at its end (a
streamed body still leaves chunk by chunk, each in its own turn; nothing waits longer than
that turn). ``close`` sends what is pending first; the rest is the socket's transport's.
"""

from __future__ import annotations

import asyncio
from typing import Any, cast

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol


class CoalescingHttpTools(HttpToolsProtocol):
    """``HttpToolsProtocol`` over a ``Coalescing`` transport."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses: no isinstance check.
        super().connection_made(Coalescing(cast(asyncio.Transport, transport), self.loop))  # type: ignore[arg-type]


class Coalescing(asyncio.Transport):
    """A transport whose writes of one loop turn leave as one write of ``transport``."""

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__()
        self._transport = transport
        self._loop = loop
        self._pending: list[bytes | bytearray | memoryview] = []

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not self._pending:
            self._loop.call_soon(self._flush)
        self._pending.append(data)

    def writelines(self, list_of_data: Any) -> None:
        for data in list_of_data:
            self.write(data)

    def _flush(self) -> None:
        pending, self._pending = self._pending, []
        if not pending or self._transport.is_closing():
            return
        self._transport.write(pending[0] if len(pending) == 1 else b"".join(pending))

    def close(self) -> None:
        self._flush()
        self._transport.close()

    def abort(self) -> None:
        self._pending = []
        self._transport.abort()

    def is_closing(self) -> bool:
        return self._transport.is_closing()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self._transport.get_extra_info(name, default)

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        self._transport.set_protocol(protocol)

    def get_protocol(self) -> asyncio.BaseProtocol:
        return self._transport.get_protocol()

    def is_reading(self) -> bool:
        return self._transport.is_reading()

    def pause_reading(self) -> None:
        self._transport.pause_reading()

    def resume_reading(self) -> None:
        self._transport.resume_reading()

    def get_write_buffer_size(self) -> int:
        return self._transport.get_write_buffer_size() + sum(len(d) for d in self._pending)

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        self._transport.set_write_buffer_limits(high, low)

    def get_write_buffer_limits(self) -> tuple[int, int]:
        return self._transport.get_write_buffer_limits()

    def can_write_eof(self) -> bool:
        return self._transport.can_write_eof()

    def write_eof(self) -> None:
        self._flush()
        self._transport.write_eof()
