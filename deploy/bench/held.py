"""A stack of a checkout (this one, or a git ref's tree) held in a process of its own, with
that checkout's code: two versions measured side by side on one machine (``--compare``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]

# Run in the checkout's own interpreter path: starts its stack with the servers of the file
# argv[1] and the options argv[2] (JSON), prints where it serves, holds it until stdin closes.
_HOLD_STACK = """
import json, sys
from pathlib import Path
from deploy.launcher.harness import temporary_stack
options = json.loads(sys.argv[2])
with temporary_stack(mcp_config=Path(sys.argv[1]), sandbox_workers=1, **options) as h:
    s = h.settings
    print(json.dumps({"gateway_url": h.gateway_url, "database_url": s.database_url,
                      "redis_url": s.redis_url, "run_dir": str(s.run_dir)}), flush=True)
    sys.stdin.read()
"""


@dataclass
class HeldStack:
    """Where a held stack serves, and the process holding it."""

    gateway_url: str
    database_url: str
    redis_url: str
    run_dir: Path
    proc: subprocess.Popen[bytes]

    def stop(self) -> None:
        """Stop the stack (again: a no-op) and wait for its holder to exit."""
        _stop(self.proc)


def _stop(proc: subprocess.Popen[bytes], timeout_s: float = 120) -> None:
    assert proc.stdin is not None
    proc.stdin.close()  # the holder stops its stack
    try:
        proc.wait(timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@contextmanager
def held_stack(root: Path, config: Path, *, name: str, **options: Any) -> Iterator[HeldStack]:
    """A stack of the checkout at ``root`` with the servers of ``config`` and one sandbox
    worker (``options``: more of ``temporary_stack``'s), stopped when the block ends."""
    env = {**os.environ, "PYTHONPATH": str(root)}
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen(
            [sys.executable, "-c", _HOLD_STACK, str(config), json.dumps(options)],
            cwd=root, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
        )  # fmt: skip
        assert proc.stdout is not None
        try:
            line = proc.stdout.readline()
            if not line:
                proc.wait(30)
                log.seek(0)
                tail = log.read().decode(errors="replace")[-3000:]
                raise RuntimeError(f"the {name} stack ({root}) did not start:\n{tail}")
            info = json.loads(line)
            yield HeldStack(
                info["gateway_url"],
                info["database_url"],
                info["redis_url"],
                Path(info["run_dir"]),
                proc,
            )
        finally:
            _stop(proc)


@contextmanager
def checkout(ref: str) -> Iterator[Path]:
    """A directory holding ``ref``'s tree: the directory itself, or a `git archive` of it."""
    if Path(ref).is_dir():
        yield Path(ref).resolve()
        return
    with tempfile.TemporaryDirectory(prefix="agentcards-ref-") as tmp:
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", "--format=tar", ref],
            capture_output=True,
            check=False,
        )
        if archive.returncode != 0:
            raise RuntimeError(f"--compare {ref}: {archive.stderr.decode(errors='replace')}")
        subprocess.run(["tar", "-x", "-C", tmp], input=archive.stdout, check=True)
        yield Path(tmp)
