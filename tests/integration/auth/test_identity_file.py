"""A mistake in the identity file stops the gateway at start with one line: file, place, reason."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.stack import REPO


def test_a_bad_identity_file_stops_the_gateway_naming_file_place_and_reason(tmp_path: Path) -> None:
    path = tmp_path / "identity.json"
    path.write_text(json.dumps({"groups": {"eng": {"scopes": ["agentcards:write"]}}}))
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTCARDS_")} | {
        "AGENTCARDS_OAUTH_ISSUER": "http://127.0.0.1:9",
        "AGENTCARDS_PUBLIC_URL": "http://127.0.0.1:8420",
        "AGENTCARDS_IDENTITY_CONFIG": str(path),
        "AGENTCARDS_AUTH": "off",  # no database needed to get this far
        "AGENTCARDS_HOME": str(tmp_path / "home"),
    }
    done = subprocess.run([sys.executable, "-m", "services.gateway"], env=env, cwd=REPO,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1] == (
        f"error: identity file {path}: at groups.eng.scopes: unknown scope 'agentcards:write': "
        "use agentcards:read, agentcards:execute, agentcards:admin"
    )
