"""The layering rules: services and workers import shared; shared neither; never each other;
the gateway's REST and MCP front ends never import each other, and its operations neither;
shared in layers; deploy.bench without an import cycle."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_import_linter_contracts_hold() -> None:
    result = subprocess.run(
        [_lint_imports(), "--config", str(ROOT / "pyproject.toml")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert ", 0 broken" in result.stdout
    for contract in (
        "shared imports neither services nor workers",
        "services never import workers",
        "workers never import services",
        "the gateway's REST and MCP front ends never import each other",
        "gateway operations import neither front end",
        "shared is layered",
        "deploy.bench's modules import each other without a cycle",
    ):
        assert f"{contract} KEPT" in result.stdout, contract


def _lint_imports() -> str:
    beside_python = Path(sys.executable).parent / "lint-imports"
    return (
        str(beside_python)
        if beside_python.exists()
        else shutil.which("lint-imports") or "lint-imports"
    )
