"""``agentcards capabilities list|show|export|import|disable|enable|delete``: what a running
gateway learned, over REST.

Runs as the tenant of AGENTCARDS_API_KEY when it is set (the default tenant otherwise).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.syntax import Syntax
from rich.table import Table

from deploy.cli.gateway_client import call
from shared.capabilities.skills import published, skills_of

capabilities_app = typer.Typer(
    help="List, show, export, import, disable, enable and delete capabilities.",
    no_args_is_help=True,
)
console = Console()


@capabilities_app.callback()
def _group() -> None:
    """List, show, export, import, disable, enable and delete the capabilities of a running stack."""


@capabilities_app.command("list")
def list_(
    q: str | None = typer.Option(None, help="text in name, description, intent or an alias"),
    min_success_rate: float | None = typer.Option(None, help="0..1"),
    min_usage: int | None = typer.Option(None, help="used at least this many times"),
    server: str | None = typer.Option(None, help="uses a tool of this MCP server"),
    tool: str | None = typer.Option(None, help="uses this tool (server:tool or its name)"),
    community: int | None = typer.Option(None, help="in this tool-graph community"),
    sort: str = typer.Option("usage", help="usage | success_rate | last_used | created_at"),
    limit: int = typer.Option(50, help="at most this many (1-500)"),
    offset: int = typer.Option(0, help="skip this many"),
    as_json: bool = typer.Option(False, "--json", help="print the API's JSON"),
) -> None:
    """A table of capabilities, filtered and sorted like the dashboard's explorer."""
    body = call(
        "GET",
        "/api/capabilities",
        params={
            "q": q, "min_success_rate": min_success_rate, "min_usage": min_usage,
            "server": server, "tool": tool, "community_id": community, "sort": sort,
            "limit": limit, "offset": offset,
        },
    )  # fmt: skip
    if as_json:
        typer.echo(json.dumps(body, indent=2))
        return
    table = Table(title=f"{body['total']} capabilities", title_justify="left")
    for column in ("name", "v", "success", "uses", "last used", "tools", "id"):
        table.add_column(column, overflow="fold")
    for c in body["capabilities"]:
        table.add_row(
            escape(c["name"]),
            str(c["version"]),
            f"{c['success_rate']:.0%}",
            str(c["usage_count"]),
            (c["last_used"] or "never")[:19],
            escape(", ".join(c["tools_used"])),
            c["id"],
        )
    console.print(table)


@capabilities_app.command("show")
def show(
    ref: str = typer.Argument(help="id, or name (its latest version)"),
    as_json: bool = typer.Option(False, "--json", help="print the API's JSON"),
) -> None:
    """One capability: what it does, how it fared, its parameters and its code."""
    c: dict[str, Any] = call("GET", f"/v1/capabilities/{ref}")
    if as_json:
        typer.echo(json.dumps(c, indent=2))
        return
    facts = "\n".join(
        [
            f"[bold]{escape(c['name'])}[/] v{c['version']} ({c['source']})  {c['id']}"
            + ("  [bold red]disabled[/]" if c["disabled"] else ""),
            escape(c["description"]),
            f"intent: {escape(c['intent'])}",
            f"aliases: {escape(', '.join(c['aliases']) or '-')}",
            f"success {c['success_rate']:.0%} over {c['usage_count']} uses; "
            f"last used {c['last_used'] or 'never'}",
            f"tools: {escape(', '.join(c['tools_used']) or '-')}",
            f"parameters: {escape(json.dumps(c['parameters_schema'].get('properties', {})))}",
        ]
    )
    console.print(Panel(facts, expand=False))
    console.print(Syntax(c["code"], "python", line_numbers=True))


@capabilities_app.command("export")
def export(
    ids: str | None = typer.Option(None, help="comma-separated ids (default: all)"),
    output: Path | None = typer.Option(None, "--output", "-o", help="file (default: stdout)"),
    skills: Path | None = typer.Option(
        None,
        "--skills",
        help="write Agent Skills folders into this directory instead of a bundle: one "
        "folder per capability (SKILL.md, code, parameters), as /mcp serves them",
    ),
) -> None:
    """A JSON bundle of capabilities with schemas and stats, for `agentcards capabilities import`
    (or, with --skills DIR, the capabilities as Agent Skills folders)."""
    if skills is not None:
        if ids is not None or output is not None:
            typer.echo(
                "error: --skills writes every capability's folder: leave out --ids and -o", err=True
            )
            raise typer.Exit(code=1)
        _export_skills(skills)
        return
    bundle = call("GET", "/v1/capabilities/export", params={"ids": ids})
    text = json.dumps(bundle, indent=2, ensure_ascii=False)
    if output is None:
        typer.echo(text)
        return
    output.write_text(text + "\n", encoding="utf-8")
    typer.echo(f"exported {len(bundle['capabilities'])} capabilities to {output}", err=True)


def _export_skills(directory: Path) -> None:
    """Each published capability (``shared/capabilities/skills.py``) as ``DIR/<skill name>/``."""
    if directory.exists() and not directory.is_dir():
        typer.echo(
            f"error: --skills {directory} is a file: give a directory (made if missing)", err=True
        )
        raise typer.Exit(code=1)
    items: list[dict[str, Any]] = []
    while True:  # every page: skills are named over the tenant's whole set
        page = call("GET", "/api/capabilities", params={"limit": 500, "offset": len(items)})
        items += page["capabilities"]
        if not page["capabilities"] or len(items) >= page["total"]:
            break
    written = skills_of(published(items))
    try:
        for skill in written:
            for file in skill.files:
                path = directory / skill.name / file.path
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(file.content)
    except OSError as exc:
        typer.echo(f"error: cannot write the skills into {directory}: {exc}", err=True)
        raise typer.Exit(code=1) from exc
    typer.echo(f"exported {len(written)} capabilities as skills to {directory}", err=True)


@capabilities_app.command("import")
def import_(
    path: Path = typer.Argument(help="a bundle from `agentcards capabilities export`"),
) -> None:
    """Add a bundle's capabilities; code already here is merged, never doubled."""
    try:
        bundle = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        typer.echo(f"error: cannot read {path}: {exc}", err=True)
        raise typer.Exit(code=1) from exc
    done = call("POST", "/v1/capabilities/import", body=bundle)
    typer.echo(json.dumps({"created": done["created"], "merged": done["merged"]}))


@capabilities_app.command("disable")
def disable(ref: str = typer.Argument(help="id, or name (its latest version)")) -> None:
    """Stop matching, suggesting and searching it, and refuse runs of it (kept; `enable` undoes)."""
    _set_disabled(ref, disabled=True)


@capabilities_app.command("enable")
def enable(ref: str = typer.Argument(help="id, or name (its latest version)")) -> None:
    """Make a disabled capability matched, suggested, searched and runnable again."""
    _set_disabled(ref, disabled=False)


@capabilities_app.command("delete")
def delete(
    ref: str = typer.Argument(help="id, or name (its latest version)"),
    yes: bool = typer.Option(False, "--yes", "-y", help="do not ask for confirmation"),
) -> None:
    """Delete a capability with its aliases and cached results (other versions stay)."""
    c: dict[str, Any] = call("GET", f"/v1/capabilities/{ref}")
    label = f"{c['name']} v{c['version']} ({c['id']})"
    if not yes and not typer.confirm(f"delete {label}?"):
        raise typer.Exit(code=1)
    call("DELETE", f"/v1/capabilities/{c['id']}")
    typer.echo(f"deleted {label}")


def _set_disabled(ref: str, *, disabled: bool) -> None:
    c: dict[str, Any] = call("GET", f"/v1/capabilities/{ref}")
    done = call("PATCH", f"/v1/capabilities/{c['id']}", body={"disabled": disabled})
    state = "disabled" if done["disabled"] else "enabled"
    typer.echo(f"{state} {done['name']} v{done['version']} ({done['id']})")
