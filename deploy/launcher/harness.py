"""A whole stack in a temporary home on free ports, for benchmarks and the demo."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import threading
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deploy.launcher.embedded import free_port
from deploy.launcher.health import wait_healthy, watch
from deploy.launcher.supervisor import Stack
from shared.config import Settings

SUPERVISE_CHECK_EVERY_S = 5.0  # as `agentcards up` once healthy (each check pings Celery)


class Supervision:
    """A thread that, while enabled, restarts whatever of a stack dies, as `agentcards up` does.

    One thread for the stack's whole life: children get SIGTERM when the *thread* that
    spawned them ends (PR_SET_PDEATHSIG follows the thread), so it must outlive them.
    """

    def __init__(self, stack: Stack) -> None:
        self.enabled = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=watch,
            args=(stack,),
            kwargs={"check_every_s": SUPERVISE_CHECK_EVERY_S, "stopped": self._stop.is_set},
            name="stack-supervisor",
            daemon=True,
        )
        self._stack = stack
        stack.paused = lambda: not self.enabled.is_set()
        self._thread.start()

    @contextmanager
    def active(self) -> Iterator[None]:
        """Restart what dies while inside."""
        self.enabled.set()
        try:
            yield
        finally:
            self.enabled.clear()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


@dataclass
class StackHandle:
    """What a caller needs from a running temporary stack."""

    stack: Stack
    settings: Settings  # with the resolved database and Redis URLs
    supervision: Supervision

    def supervised(self) -> contextlib.AbstractContextManager[None]:
        """Inside, whatever dies is restarted (the stack's supervisor thread is enabled)."""
        return self.supervision.active()

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
    supervise: bool = False,
    without: Collection[str] = (),
    **overrides: Any,
) -> Iterator[StackHandle]:
    """Start everything `agentcards up` starts (less the processes named in ``without``), in
    a throwaway home; stop and delete it after.

    With ``supervise``, a thread does what `agentcards up` does once healthy: restart
    whatever dies (children, embedded Redis and Postgres) until the stack stops.
    """
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
    stack = Stack(settings, extra_env=extra_env, without=without)
    supervision: Supervision | None = None
    try:
        stack.preflight()
        stack.start_dependencies()
        stack.start_processes()
        wait_healthy(stack, timeout_s=timeout_s)
        supervision = Supervision(stack)
        handle = StackHandle(stack, stack.resolved_settings(), supervision)
        with handle.supervised() if supervise else contextlib.nullcontext():
            yield handle
    finally:
        if supervision:
            supervision.stop()
        stack.stop()
        _keep_logs(home)
        shutil.rmtree(home, ignore_errors=True)


def _keep_logs(home: Path) -> None:
    """Copy the stack's logs to ``AGENTCARDS_TEST_KEEP_LOGS`` (a directory), when it is set:
    a failed run's worker and toolhost logs outlive the throwaway home."""
    target = os.environ.get("AGENTCARDS_TEST_KEEP_LOGS")
    if not target:
        return
    destination = Path(target) / home.name
    shutil.copytree(
        home / "run",
        destination,
        ignore=shutil.ignore_patterns("*.sock", "*.pid"),
        dirs_exist_ok=True,
    )
