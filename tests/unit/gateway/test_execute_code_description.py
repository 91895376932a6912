"""execute_code's description names every helper the sandbox predefines (agents read it)."""

from __future__ import annotations

from services.gateway.mcp.server import EXECUTE_CODE_DESCRIPTION
from shared.sandbox.child.helpers import HELPER_MODULES


def test_the_description_names_each_predefined_helper_module() -> None:
    for name in HELPER_MODULES:
        assert f"`{name}`" in EXECUTE_CODE_DESCRIPTION, name
    assert "asyncio.gather" in EXECUTE_CODE_DESCRIPTION
    assert "<helpers>" not in EXECUTE_CODE_DESCRIPTION
