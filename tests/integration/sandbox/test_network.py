"""Network attacks against real listeners on this host: TCP, unix path and abstract sockets, DNS, HTTP."""

from __future__ import annotations

from tests.integration.sandbox.conftest import Run


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
