"""The sandbox from inside a virtualenv (how most people install): all layers, stdlib from the base."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


def test_sandbox_runs_with_every_layer_from_a_virtualenv(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    # --system-site-packages: the venv sees this installation of agentcards, while
    # sysconfig's platstdlib points into the venv (the mounts must use the base's).
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(venv)],
        check=True,
    )
    code = tmp_path / "job.py"
    code.write_text("import json, sys\nreturn {'ok': True, 'paths': len(sys.path)}\n")
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "deploy.cli.main", "sandbox", "run", str(code)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["status"] == "succeeded", result["error"]
    assert result["result"]["ok"] is True
    assert all(result["layers"][name] for name in ("filesystem_view", "seccomp", "namespaces"))
