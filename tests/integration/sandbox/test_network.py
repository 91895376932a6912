"""Network attacks against real listeners on this host: TCP, unix path and abstract sockets, DNS, HTTP."""

from __future__ import annotations

import socket
import tempfile
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from tests.integration.sandbox.conftest import Run


@pytest.fixture
def listeners() -> Iterator[dict[str, object]]:
    """A TCP listener, an HTTP server, a unix socket in host /tmp and an abstract socket."""
    tcp = socket.socket()
    tcp.bind(("127.0.0.1", 0))
    tcp.listen()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"REACHED")

        def log_message(self, *args: object) -> None:
            pass

    http = HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=http.serve_forever, daemon=True)
    thread.start()
    tmpdir = tempfile.mkdtemp(dir="/tmp")
    path = f"{tmpdir}/redis.sock"
    unix = socket.socket(socket.AF_UNIX)
    unix.bind(path)
    unix.listen()
    abstract = socket.socket(socket.AF_UNIX)
    abstract.bind("\0agentcards-sandbox-test")
    abstract.listen()
    yield {"tcp": tcp.getsockname()[1], "http": http.server_port, "unix": path}
    http.shutdown()
    for s in (tcp, unix, abstract):
        s.close()


async def test_network_is_unreachable(run: Run, host_intact, listeners: dict[str, object]) -> None:
    code = """
import socket, urllib.request
out = {}
def attempt(name, fn):
    try:
        out[name] = "CONNECTED:" + repr(fn())[:50]
    except BaseException as e:
        out[name] = type(e).__name__
def tcp():
    s = socket.create_connection(("127.0.0.1", args.tcp), timeout=1)
    return s.getpeername()
def unix():
    s = socket.socket(socket.AF_UNIX)
    s.connect(args.unix)
    return "unix"
def abstract():
    s = socket.socket(socket.AF_UNIX)
    s.connect("\\0agentcards-sandbox-test")
    return "abstract"
def udp_dns():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.sendto(b"\\x00" * 12, ("127.0.0.1", 53))
    return "sent"
attempt("tcp", tcp)
attempt("unix", unix)
attempt("abstract", abstract)
attempt("dns_udp", udp_dns)
attempt("getaddrinfo", lambda: socket.getaddrinfo("agentcards.invalid", 80))
attempt("http", lambda: urllib.request.urlopen(f"http://127.0.0.1:{args.http}/", timeout=1).read())
attempt("netlink", lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0))
attempt("packet", lambda: socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0))
attempt("socketpair_inet", lambda: socket.socketpair(socket.AF_INET))
out
"""
    outcome = await run(code, args=listeners)
    assert outcome.status == "succeeded", outcome.error
    assert not any(str(v).startswith("CONNECTED") for v in outcome.result.values()), outcome.result
    await host_intact()
