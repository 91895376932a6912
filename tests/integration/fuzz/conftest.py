"""One real stack for the fuzz suites (gateway, toolhost with the example server, sandbox worker) and who calls."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, Phase, settings

from shared.auth.store import issue_key
from tests.integration.mcp_servers import example_server
from tests.stack import E2EStack, stack_fixture

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

# Who calls: without a key (no key exists yet: the anonymous loopback default), then with a
# valid admin key. Package-scoped, so pytest runs every fuzz test as the first caller before
# creating the key that ends anonymous access.
CALLERS = ["anonymous", "valid_key"]


@pytest.fixture(params=CALLERS, scope="package")
def caller_headers(request: pytest.FixtureRequest, fuzz_stack: E2EStack) -> dict[str, str]:
    """Headers identifying the caller for one fuzz run."""
    if request.param == "anonymous":
        return {}
    with fuzz_stack.db() as conn:
        _, key = issue_key(conn, tenant_id="fuzz", name="fuzz", admin=True)
    return {"Authorization": f"Bearer {key}"}


def assert_gateway_survived(stack: E2EStack) -> None:
    """The gateway still answers and logged no unhandled error."""
    with stack.client() as client:
        assert client.get("/healthz").status_code == 200
    log = stack.procs["gateway"].log()
    assert "unhandled error" not in log and "Exception in ASGI application" not in log, log[-4000:]
