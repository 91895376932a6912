"""A whole stack in a temporary home on free ports, for benchmarks and the demo."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deploy.launcher.embedded import free_port
from deploy.launcher.health import wait_healthy
from deploy.launcher.supervisor import Stack
from shared.config import Settings


@dataclass
class StackHandle:
    """What a caller needs from a running temporary stack."""

    stack: Stack
    settings: Settings  # with the resolved database and Redis URLs

    @property
    def gateway_url(self) -> str:
        return f"http://{self.settings.gateway_host}:{self.settings.gateway_port}"


@contextmanager
def temporary_stack(
    *,
    mcp_config: Path | None = None,
    sandbox_workers: int = 1,
    extra_env: dict[str, str] | None = None,
    timeout_s: float = 120.0,
    **overrides: Any,
) -> Iterator[StackHandle]:
    """Start everything `agentcards up` starts, in a throwaway home; stop and delete it after."""
    home = Path(tempfile.mkdtemp(prefix="agentcards-"))
    settings = Settings(
        home=home,
        gateway_port=free_port(),
        flower_port=free_port(),
        embedded_redis_port=free_port(),
        sandbox_workers=sandbox_workers,
        mcp_config=mcp_config,
        **overrides,
    )
    stack = Stack(settings, extra_env=extra_env)
    try:
        stack.preflight()
        stack.start_dependencies()
        stack.start_processes()
        wait_healthy(stack, timeout_s=timeout_s)
        yield StackHandle(stack=stack, settings=stack.resolved_settings())
    finally:
        stack.stop()
        shutil.rmtree(home, ignore_errors=True)
