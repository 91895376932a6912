"""A stdio server's stderr: copied to the toolhost's log line by line (one log record each), its tail kept for errors.

A server that crashes usually says why on stderr (a traceback, "missing API key"); the
MCP session only sees "Connection closed". The tail goes into the server's ``last_error``.
"""

from __future__ import annotations

import logging
import os
import threading
from collections import deque
from typing import TextIO

log = logging.getLogger(__name__)
TAIL_LINES = 8
TAIL_CHARS = 1500  # last_error is shown in tables and JSON: keep it a paragraph, not a log
JOIN_TIMEOUT_S = 1.0  # a grandchild may hold the pipe open; the tail read so far is enough


class StderrTail:
    """A pipe given to the server as its stderr, drained by a daemon thread."""

    def __init__(self, server: str) -> None:
        read_fd, write_fd = os.pipe()
        self.file: TextIO = os.fdopen(write_fd, "w")  # the child gets a copy of this end
        self._server = server
        self._lines: deque[str] = deque(maxlen=TAIL_LINES)
        self._lock = threading.Lock()  # tail() may read while the reader still appends
        self._thread = threading.Thread(
            target=self._drain, args=(read_fd,), name=f"stderr:{server}", daemon=True
        )
        self._thread.start()

    def _drain(self, read_fd: int) -> None:
        with os.fdopen(read_fd, "rb") as pipe:
            for raw in pipe:
                line = raw.decode(errors="replace").rstrip()
                if line:
                    with self._lock:
                        self._lines.append(line)
                    log.info("[%s] %s", self._server, line)

    def close(self) -> None:
        """Close our end of the pipe: the reader sees EOF once the server's end is closed too."""
        self.file.close()

    def tail(self) -> str:
        """The last lines the server wrote (after it exited), joined by `` | ``; blocks up to 1 s."""
        self._thread.join(JOIN_TIMEOUT_S)
        with self._lock:
            text = " | ".join(self._lines)
        return text if len(text) <= TAIL_CHARS else "…" + text[-TAIL_CHARS:]
