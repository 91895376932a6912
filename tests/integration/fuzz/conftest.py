"""One real stack for the fuzz suites: gateway, toolhost (the example server), sandbox worker."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from deploy.launcher.embedded import EmbeddedPostgres, EmbeddedRedis
from tests.integration.e2e.conftest import E2EStack, running_stack
from tests.integration.mcp_servers import example_server


@pytest.fixture(scope="package")  # one stack for the REST and the MCP fuzz modules
def fuzz_stack(
    embedded_pg: EmbeddedPostgres,
    redis_server: EmbeddedRedis,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[E2EStack]:
    """Short wall times: fuzzed executions (with ``wait``) end in seconds, not minutes."""
    tmp = tmp_path_factory.mktemp("fuzz")
    servers = {"example": example_server(tmp)}
    with running_stack(
        embedded_pg,
        redis_server,
        tmp,
        servers,
        learning=False,
        sandbox_wall_time_s=2,
        sandbox_max_wall_time_s=3,
    ) as stack:
        yield stack


# Who calls: today only without a key. The API-key work adds "valid_key" here (a fixture
# param that creates a key and returns its header); every fuzz test then runs as both.
CALLERS = ["anonymous"]


@pytest.fixture(params=CALLERS)
def caller_headers(request: pytest.FixtureRequest, fuzz_stack: E2EStack) -> dict[str, str]:
    """Headers identifying the caller for one fuzz run."""
    assert request.param == "anonymous"
    return {}


def assert_gateway_survived(stack: E2EStack) -> None:
    """The gateway still answers and logged no unhandled error."""
    with stack.client() as client:
        assert client.get("/healthz").status_code == 200
    log = stack.procs["gateway"].log()
    assert "unhandled error" not in log and "Exception in ASGI application" not in log, log[-4000:]
