"""The OAuth client people's connections use (shared/connections/oauth.py) against the MCP
conformance suite's client auth scenarios (0.2.0-alpha.12), each with the suite's own server
and authorization server: tests/integration/oauth_conformance_client.py is the command. No
stack: the client alone is under test.

Not passed, knowingly: ``auth/scope-step-up`` (a 403 asking for more scope mid-session is not
followed by a second authorization) and ``auth/basic-cimd`` passes with its warning (client
ID metadata documents are not offered; dynamic registration is used).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from tests.integration.mcp_servers import run_client_conformance, verdict

NOT_YET = {"scope-step-up"}
OUT = Path(tempfile.gettempdir()) / "agentcards-upstream-identity"


def test_the_connection_client_passes_the_client_auth_scenarios(tmp_path: Path) -> None:
    command = f"{sys.executable} -m tests.integration.oauth_conformance_client"
    scenarios = run_client_conformance(command, "auth", tmp_path)
    OUT.mkdir(exist_ok=True)
    (OUT / "client-auth-conformance.txt").write_text(
        "\n".join(f"{name}: {verdict(failed)}" for name, failed in sorted(scenarios.items())) + "\n"
    )
    passed = {name for name, failed in scenarios.items() if not failed}
    assert len(scenarios) >= 14, sorted(scenarios)
    assert passed == set(scenarios) - NOT_YET, {n: scenarios[n] for n in set(scenarios) - passed}
