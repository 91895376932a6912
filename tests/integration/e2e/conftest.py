"""The e2e suites' common stack: the example, time and memory servers, sandbox and learning workers."""

from __future__ import annotations

from tests.integration.mcp_servers import e2e_servers
from tests.stack import stack_fixture

e2e = stack_fixture(e2e_servers)
