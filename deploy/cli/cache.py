"""``agentcards cache clear|stats``: the result cache of a running gateway, over its REST API."""

from __future__ import annotations

import json

import typer

from deploy.cli.gateway_client import call

cache_app = typer.Typer(help="The result cache of a running stack.", no_args_is_help=True)


@cache_app.callback()
def _group() -> None:
    """The result cache of a running stack."""


@cache_app.command("clear")
def clear(
    capability: str | None = typer.Option(None, help="only this capability's entries (id or name)"),
    server: str | None = typer.Option(None, help="only entries that used a tool of this server"),
) -> None:
    """Drop cached results (the default tenant's, all of them unless narrowed); prints JSON."""
    if capability and server:
        typer.echo("error: give --capability or --server, not both", err=True)
        raise typer.Exit(code=2)
    if capability:
        body = call("DELETE", f"/v1/capabilities/{capability}/cache")
    else:
        body = call("DELETE", "/v1/cache", params={"server": server})
    typer.echo(json.dumps(body))


@cache_app.command("stats")
def stats() -> None:
    """Entries, hits, misses and hit rate per level, and invalidations by trigger (JSON)."""
    typer.echo(json.dumps(call("GET", "/v1/cache/stats"), indent=2))
