"""A request already waiting for a Postgres connection stops when the probe marks Postgres down."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
from psycopg_pool import PoolTimeout

from services.gateway.outage import Outage, OutageAwarePool
from services.gateway.outage import outage_aware_pool as make


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class _Probe:
    """Stands in for DependencyProbe's verdict (the probe's own checks are integration-tested)."""

    def __init__(self) -> None:
        self.down: Outage | None = None

    def outage(self) -> Outage | None:
        return self.down


@pytest.fixture
def pool_and_probe() -> Iterator[tuple[OutageAwarePool, _Probe]]:
    probe = _Probe()
    url = f"postgresql://nobody@127.0.0.1:{_closed_port()}/none"
    pool = make(url, outage=probe.outage, min_size=1, max_size=1, timeout=60.0)
    yield pool, probe
    pool.close()


def test_a_waiting_request_gives_up_once_postgres_is_marked_down(
    pool_and_probe: tuple[OutageAwarePool, _Probe],
) -> None:
    pool, probe = pool_and_probe
    probe.down = Outage("postgres", "OperationalError: connection refused")
    with pytest.raises(PoolTimeout, match="postgres is down: OperationalError: connection refused"):
        pool.getconn()  # 60 s of pool timeout, cut short by the probe's verdict


def test_a_redis_outage_does_not_cut_a_postgres_wait_short(
    pool_and_probe: tuple[OutageAwarePool, _Probe],
) -> None:
    pool, probe = pool_and_probe
    probe.down = Outage("redis", "ConnectionError")
    with pytest.raises(PoolTimeout, match=r"couldn't get a connection after 0\.60 sec"):
        pool.getconn(timeout=0.6)
