"""Tests that share a stack stay on one worker: pytest-xdist honours the groups tests/conftest.py
gives (with a pytest it does not understand, every group is split and shared stacks break)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

MODULE = """
import os
import pytest

@pytest.mark.parametrize("n", range(8))
@pytest.mark.xdist_group("one")
def test_{name}(n):
    with open({out!r}, "a") as f:
        f.write(os.environ["PYTEST_XDIST_WORKER"] + "\\n")
"""


def test_a_group_runs_on_one_worker_while_another_worker_is_free(tmp_path: Path) -> None:
    out = tmp_path / "workers.txt"
    for name in ("alpha", "beta"):  # two modules, one group: as modules sharing a stack
        (tmp_path / f"test_{name}.py").write_text(MODULE.format(name=name, out=str(out)))
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2",
         "--dist", "loadgroup", "--rootdir", str(tmp_path), str(tmp_path)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:]
    workers = out.read_text().split()
    assert len(workers) == 16
    assert len(set(workers)) == 1, f"the group was split across workers: {sorted(set(workers))}"
