"""The OAuth client people's connections use (shared/connections/oauth.py) against the MCP
conformance suite's client auth scenarios (0.2.0-alpha.12), each with the suite's own server
and authorization server: tests/integration/oauth_conformance_client.py is the command. No
stack: the client alone is under test.

The suite runs at 2026-07-28 (its scenarios are those of 2025-11-25, judged more strictly: a
step-up must ask for the union of the scopes); ``auth/authorization-server-migration``, a
2026-07-28 scenario outside the suite, runs beside it. In ``auth/basic-cimd`` the client
presents its client ID metadata document's URL as its client_id, registering nothing: the
scenario's check says so (a success, not its warning).
"""

from __future__ import annotations

import json
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tests.integration.mcp_servers import run_client_conformance, verdict

SPEC = "2026-07-28"
MIGRATION = "auth/authorization-server-migration"
OUT = Path(tempfile.gettempdir()) / "agentcards-upstream-identity"


def test_the_connection_client_passes_the_client_auth_scenarios(tmp_path: Path) -> None:
    command = f"{sys.executable} -m tests.integration.oauth_conformance_client"
    with ThreadPoolExecutor(2) as pool:  # two CLI runs at once: each mostly waits
        suite = pool.submit(run_client_conformance, command, "auth", tmp_path / "suite",
                            spec_version=SPEC)  # fmt: skip
        migration = pool.submit(run_client_conformance, command, MIGRATION,
                                tmp_path / "migration", spec_version=SPEC)  # fmt: skip
        scenarios = suite.result() | migration.result()
    OUT.mkdir(exist_ok=True)
    (OUT / "client-auth-conformance.txt").write_text(
        "\n".join(f"{name}: {verdict(failed)}" for name, failed in sorted(scenarios.items())) + "\n"
    )
    assert len(scenarios) >= 15, sorted(scenarios)
    assert {"scope-step-up", "authorization-server-migration"} <= set(scenarios), sorted(scenarios)
    failed = {name: checks for name, checks in scenarios.items() if checks}
    assert not failed, failed
    cimd = _checks(tmp_path / "suite", "basic-cimd")
    assert cimd["cimd-client-id-used"]["status"] == "SUCCESS", cimd["cimd-client-id-used"]
    assert "client-registration" not in cimd, cimd["client-registration"]  # no registration


def _checks(out: Path, scenario: str) -> dict[str, dict[str, object]]:
    """The checks of one scenario the suite ran into ``out``, by id (warnings included)."""
    (found,) = [path for path in out.rglob("checks.json") if scenario in path.parent.name]
    return {check["id"]: check for check in json.loads(found.read_text())}
