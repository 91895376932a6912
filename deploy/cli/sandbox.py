"""``agentcards sandbox run FILE``: one Python or TypeScript file in the real sandbox, JSON on stdout (operators' machine check)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Annotated, Any

import typer

from shared.config import get_settings
from shared.executions.status import ExecutionStatus
from shared.sandbox.limits import Language, SandboxLimits

# Files run as TypeScript (Deno strips the types; JavaScript is TypeScript without them).
TYPESCRIPT_SUFFIXES = (".ts", ".mts", ".js", ".mjs")


def language_of(path: Path) -> Language:
    """``typescript`` for a .ts/.mts/.js/.mjs file, else ``python``."""
    return "typescript" if path.suffix.lower() in TYPESCRIPT_SUFFIXES else "python"


sandbox_app = typer.Typer(help="Run code in the isolated sandbox.", no_args_is_help=True)


@sandbox_app.callback()
def _group() -> None:
    """Run code in the isolated sandbox."""


def run_file(
    path: Path, args_json: str | None = None, timeout: float | None = None
) -> dict[str, Any]:
    """Run ``path`` with the worker's settings and no tools; the finished-execution dict."""
    from shared.sandbox.bridge import run_in_sandbox  # imported here: keeps CLI start light

    args = json.loads(args_json) if args_json else {}
    if not isinstance(args, dict):
        raise typer.BadParameter("--args must be a JSON object")
    limits = SandboxLimits.from_settings(get_settings(), wall_time_s=timeout)
    run = run_in_sandbox(
        code=path.read_text(), args=args, limits=limits, language=language_of(path)
    )
    outcome = asyncio.run(run)
    out = outcome.to_dict()
    out.pop("trace")
    out.pop("tool_calls")
    return out


@sandbox_app.command("run")
def run(
    file: Annotated[Path, typer.Argument(exists=True, dir_okay=False, readable=True)],
    args: Annotated[str | None, typer.Option("--args", help="JSON object passed as `args`")] = None,
    timeout: Annotated[
        float | None, typer.Option("--timeout", help="wall time limit, seconds")
    ] = None,
) -> None:
    """Run FILE in the sandbox and print one JSON document; exit 1 unless it succeeded.

    A .ts, .mts, .js or .mjs file runs as TypeScript (in Deno, same isolation)."""
    result = run_file(file, args, timeout)
    typer.echo(json.dumps(result, default=str))
    raise typer.Exit(0 if result["status"] == ExecutionStatus.SUCCEEDED else 1)
