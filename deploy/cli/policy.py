"""``agentcards policy check|reload``: the policy file validated as the processes load it, and
every process that decides told to read it again now (docs/policy.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import NoReturn

import redis
import typer
from rich.console import Console
from rich.markup import escape

from deploy.launcher.state import running_stack
from shared.config import Settings, get_settings
from shared.errors import AgentCardsError
from shared.policy.reload import ask_reload
from shared.policy.source import PolicyFile, read_policy_file

policy_app = typer.Typer(help="The policy file: check it, reload it.", no_args_is_help=True)
err = Console(stderr=True)


def _fail(message: str, code: int) -> NoReturn:
    err.print(f"[bold red]error:[/] {escape(message)}", soft_wrap=True)
    raise typer.Exit(code=code)


def _settings() -> Settings:
    try:
        settings = get_settings()
        if not settings.redis_url:
            _, settings = running_stack(settings)
    except AgentCardsError as exc:
        _fail(exc.message, 2)
    return settings


def _checked(path: Path | None) -> PolicyFile:
    """The file parsed and validated; exit 1 naming file, line and reason when it is bad."""
    if path is None:
        _fail("no policy file: set AGENTCARDS_POLICY_FILE (or pass --file)", 2)
    try:
        return read_policy_file(path)
    except AgentCardsError as exc:
        _fail(exc.message, 1)


def _summary(loaded: PolicyFile) -> dict[str, object]:
    return {"file": str(loaded.path), "policies": loaded.count, "sha256": loaded.digest}


@policy_app.command("check")
def check(
    file: Path | None = typer.Option(None, help="the file to check (default: the configured one)"),
) -> None:
    """Parse and validate a policy file against the shipped schema; exit 1 naming file, line
    and reason when it is bad. Prints JSON."""
    typer.echo(json.dumps(_summary(_checked(file or get_settings().policy_file))))


@policy_app.command("reload")
def reload() -> None:
    """Validate the configured file, then have every process that decides read it again now.
    A bad file: exit 1 naming file, line and reason; the processes keep their last good set."""
    settings = _settings()
    try:
        loaded = read_policy_file(settings.policy_file) if settings.policy_file else None
    except AgentCardsError as exc:
        _fail(f"{exc.message}; the running processes keep their last good policies", 1)
    if loaded is None:
        _fail("no policy file: set AGENTCARDS_POLICY_FILE", 2)
    try:
        told = ask_reload(redis.Redis.from_url(settings.redis_url or "", socket_timeout=5))
    except redis.RedisError as exc:
        _fail(f"cannot reach Redis to tell the processes: {exc}", 2)
    typer.echo(json.dumps({**_summary(loaded), "processes_told": told}))
