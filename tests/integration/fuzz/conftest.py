"""One real stack for the fuzz suites (gateway, toolhost with the example server, sandbox worker) and who calls."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, Phase, settings

from tests.integration.e2e.conftest import E2EStack, stack_fixture
from tests.integration.mcp_servers import example_server

# Short wall times: fuzzed executions (with ``wait``) end in seconds, not minutes. One
# stack for the REST and the MCP fuzz modules.
fuzz_stack = stack_fixture(
    lambda tmp: {"example": example_server(tmp)},
    scope="package",
    learning=False,
    sandbox_wall_time_s=2,
    sandbox_max_wall_time_s=3,
)

# Bounded generation only: no shrinking or replay, so a run's length is predictable.
FUZZ_SETTINGS = settings(
    deadline=None,
    database=None,
    phases=[Phase.generate],
    suppress_health_check=list(HealthCheck),
)

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
