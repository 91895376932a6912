"""The child runner delivers its whole output and ``done`` frame before it exits, however slow the reader."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from typing import Any

from shared.sandbox.child import wire

_CHILD = "import sys; from shared.sandbox.child import runner; runner.serve(int(sys.argv[1]), {}, {}, {})"


def _read_exact_slowly(sock: socket.socket, n: int) -> bytes | None:
    data = bytearray()
    while len(data) < n:
        chunk = sock.recv(min(4096, n - len(data)))
        if not chunk:
            return None
        data += chunk
        time.sleep(0.0005)  # a bridge busy with other work
    return bytes(data)


def _frames_until_eof(sock: socket.socket) -> list[dict[str, Any]]:
    frames = []
    while (header := _read_exact_slowly(sock, wire.HEADER.size)) is not None:
        (size,) = wire.HEADER.unpack(header)
        body = _read_exact_slowly(sock, size)
        assert body is not None, f"child exited inside a {size}-byte frame"
        frames.append(wire.decode(body))
    return frames


def test_done_frame_survives_a_slow_reader_and_a_small_socket_buffer() -> None:
    bridge, child = socket.socketpair()
    # A small send buffer leaves output queued in the child's transport when its code ends.
    child.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    proc = subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(child.fileno())], pass_fds=[child.fileno()]
    )
    child.close()
    try:
        (size,) = wire.HEADER.unpack(bridge.recv(wire.HEADER.size, socket.MSG_WAITALL))
        assert wire.decode(bridge.recv(size, socket.MSG_WAITALL))["op"] == "hello"
        bridge.sendall(wire.encode({"op": "placed", "cgroup": False}))  # as the launcher does
        code = 'for _ in range(8):\n    print("x" * 65536)\n"done"'
        bridge.sendall(wire.encode({"op": "start", "code": code, "limits": {}}))
        frames = _frames_until_eof(bridge)
    finally:
        bridge.close()
        proc.wait(timeout=30)
    assert frames[-1]["op"] == "done" and frames[-1]["ok"] is True
    assert frames[-1]["result"] == "done"
    printed = "".join(f["data"] for f in frames if f["op"] == "stdout")
    assert len(printed) == 8 * 65537
