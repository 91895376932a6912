"""The state file `agentcards up` writes so `status` and `down` can find the running stack."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

import psutil

STATE_FILE = "stack.json"


@dataclass
class StackState:
    """Pids and URLs of a running stack; the file is 0600 because it holds server URLs."""

    supervisor_pid: int
    database_url: str
    redis_url: str
    embedded_postgres: str | None = None  # pgdata path when the stack started it
    embedded_redis_pid: int | None = None
    processes: dict[str, int] = field(default_factory=dict)
    urls: dict[str, str] = field(default_factory=dict)

    def save(self, run_dir: Path) -> None:
        run_dir.mkdir(parents=True, exist_ok=True)
        path = run_dir / STATE_FILE
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=2))
        tmp.chmod(0o600)
        os.replace(tmp, path)

    @classmethod
    def load(cls, run_dir: Path) -> StackState | None:
        path = run_dir / STATE_FILE
        try:
            return cls(**json.loads(path.read_text()))
        except (FileNotFoundError, json.JSONDecodeError, TypeError):
            return None

    @staticmethod
    def remove(run_dir: Path) -> None:
        (run_dir / STATE_FILE).unlink(missing_ok=True)


def pid_alive(pid: int | None) -> bool:
    """True when pid runs and is not a zombie."""
    if not pid:
        return False
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False
