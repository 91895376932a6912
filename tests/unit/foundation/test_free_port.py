"""Ports handed to test stacks never collide with each other or with outgoing connections."""

from __future__ import annotations

import socket

import pytest

from deploy.launcher import embedded
from deploy.launcher.embedded import _ephemeral_low, free_port


def test_ports_are_distinct_bindable_and_below_the_outgoing_range() -> None:
    # bind(0) gives the same port twice in one of ~4,000 triples here, and then a gateway
    # can never bind the port its Redis was given.
    ports = [free_port() for _ in range(2000)]
    assert len(set(ports)) == len(ports)
    assert max(ports) < _ephemeral_low()
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", ports[-1]))


def test_a_port_someone_listens_on_is_never_handed_out(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(embedded, "_LOWEST_FREE_PORT", 21000)
    monkeypatch.setattr(embedded, "_ephemeral_low", lambda: 22000)  # a 1,000-port window
    listeners = []
    try:
        for port in range(21000, 22000, 2):  # every other port of the window is taken
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                sock.close()
                continue
            sock.listen()
            listeners.append(sock)
        held = {s.getsockname()[1] for s in listeners}
        assert not held & {free_port() for _ in range(200)}
    finally:
        for sock in listeners:
            sock.close()
