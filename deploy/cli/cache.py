"""``agentcards cache clear|stats``: the result cache of a running gateway, over its REST API."""

from __future__ import annotations

import contextlib
import json
from typing import Any

import httpx
import typer

from deploy.launcher.state import running_stack
from shared.config import get_settings
from shared.errors import AgentCardsError

cache_app = typer.Typer(help="The result cache of a running stack.", no_args_is_help=True)


@cache_app.callback()
def _group() -> None:
    """The result cache of a running stack."""


def _gateway_url() -> str:
    """The gateway of the stack `agentcards up` runs in this home, else the configured one."""
    settings = get_settings()
    # Not started by `up` here (compose, another host): use the settings as given.
    with contextlib.suppress(AgentCardsError):
        _, settings = running_stack(settings)
    return f"http://{settings.gateway_host}:{settings.gateway_port}"


def _call(method: str, path: str, **params: Any) -> dict[str, Any]:
    query = {k: v for k, v in params.items() if v is not None}
    try:
        response = httpx.request(method, _gateway_url() + path, params=query, timeout=30)
    except httpx.HTTPError as exc:
        typer.echo(f"error: the gateway is unreachable: {exc}", err=True)
        raise typer.Exit(code=1) from exc
    body: dict[str, Any] = response.json()
    if response.status_code >= 400:
        typer.echo(f"error: {body.get('error', body)}", err=True)
        raise typer.Exit(code=1)
    return body


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
        body = _call("DELETE", f"/v1/capabilities/{capability}/cache")
    else:
        body = _call("DELETE", "/v1/cache", server=server)
    typer.echo(json.dumps(body))


@cache_app.command("stats")
def stats() -> None:
    """Entries, hits, misses and hit rate per level, and invalidations by trigger (JSON)."""
    typer.echo(json.dumps(_call("GET", "/v1/cache/stats"), indent=2))
