"""The state file `agentcards up` writes so `status` and `down` can find the running stack."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import psutil

from shared.config import Settings
from shared.errors import DependencyError

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
    settings: dict[str, Any] = field(default_factory=dict)  # see running_settings()

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


# What `status`, `mcp` and `demo` need to reach a stack another shell started, whatever
# their own environment says: where it listens, and which MCP servers it was given.
_RUNNING = (
    "gateway_host",
    "gateway_port",
    "flower_port",
    "embedded_redis_port",
    "mcp_config",
    "auth",  # so `agentcards mcp` checks keys exactly when the stack does
)


def running_settings(settings: Settings) -> dict[str, Any]:
    """The settings a running stack records in its state file (JSON-safe)."""
    values = {name: getattr(settings, name) for name in _RUNNING}
    return {k: str(v) if isinstance(v, Path) else v for k, v in values.items()}


def running_stack(settings: Settings) -> tuple[StackState, Settings]:
    """The stack `agentcards up` runs in this home, and ``settings`` as that stack runs them."""
    state = StackState.load(settings.run_dir)
    if state is None or not pid_alive(state.supervisor_pid):
        raise DependencyError(
            f"no stack is running in {settings.home} (start one with `agentcards up`, "
            "or set AGENTCARDS_HOME to the home of the one you started)"
        )
    update = {**state.settings, "database_url": state.database_url, "redis_url": state.redis_url}
    resolved = settings.model_validate(settings.model_dump() | update)
    return state, resolved
