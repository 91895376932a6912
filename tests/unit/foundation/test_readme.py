"""The README a newcomer reads first: its links resolve inside the repository, its settings exist."""

from __future__ import annotations

import re
from pathlib import Path

from shared.config import Settings

REPO = Path(__file__).resolve().parents[3]
README = (REPO / "README.md").read_text()


def test_relative_links_resolve_inside_the_repository() -> None:
    targets = re.findall(r"\]\(([^)#\s]+)\)", README)
    local = [t for t in targets if "://" not in t]
    assert "docs/architecture.md" in local
    for target in local:
        path = (REPO / target).resolve()
        assert path.is_relative_to(REPO), f"README links outside the repository: {target}"
        assert path.exists(), f"README links to a missing file: {target}"
    assert "../" not in README


def test_settings_up_uses_are_in_the_configuration_table() -> None:
    table = (REPO / "docs" / "configuration.md").read_text()
    rows = [line for line in table.splitlines() if line.startswith("| `AGENTCARDS_")]
    for field in ("flower_port", "embedded_redis_port", "mcp_config", "mcp_connect_timeout_s"):
        assert field in Settings.model_fields
        variable = f"AGENTCARDS_{field.upper()}"
        assert any(row.startswith(f"| `{variable}`") for row in rows), variable
