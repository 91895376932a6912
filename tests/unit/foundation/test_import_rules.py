"""The layering rules: services and workers import shared; shared neither; never each other; shared in layers."""

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
    assert "4 kept, 0 broken" in result.stdout
    assert "shared is layered KEPT" in result.stdout


def _lint_imports() -> str:
    beside_python = Path(sys.executable).parent / "lint-imports"
    return (
        str(beside_python)
        if beside_python.exists()
        else shutil.which("lint-imports") or "lint-imports"
    )
