"""The running gateway's REST API for CLI commands: where it is, and one call with our errors."""

from __future__ import annotations

import contextlib
from typing import Any

import httpx
import typer

from deploy.launcher.state import running_stack
from shared.config import get_settings
from shared.errors import AgentCardsError


def gateway_url() -> str:
    """The gateway of the stack `agentcards up` runs in this home, else the configured one."""
    settings = get_settings()
    # Not started by `up` here (compose, another host): use the settings as given.
    with contextlib.suppress(AgentCardsError):
        _, settings = running_stack(settings)
    return f"http://{settings.gateway_host}:{settings.gateway_port}"


def call(method: str, path: str, *, params: dict[str, Any] | None = None, body: Any = None) -> Any:
    """The JSON answer (None for 204); a refused or failed call prints why and exits 1.

    Sends AGENTCARDS_API_KEY as the bearer key when it is set, so the call runs as that
    key's tenant.
    """
    headers = get_settings().bearer_headers()
    query = {k: v for k, v in (params or {}).items() if v is not None}
    try:
        response = httpx.request(
            method, gateway_url() + path, params=query, json=body, headers=headers, timeout=120
        )
    except httpx.HTTPError as exc:
        typer.echo(f"error: the gateway is unreachable: {exc}", err=True)
        raise typer.Exit(code=1) from exc
    if response.status_code == 204:
        return None
    answer = response.json()
    if response.status_code >= 400:
        typer.echo(f"error: {answer.get('error', answer)}", err=True)
        raise typer.Exit(code=1)
    return answer
