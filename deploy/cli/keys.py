"""``agentcards keys create|list|revoke`` and ``agentcards audit tail``: operator access control."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from enum import StrEnum
from typing import Annotated, Any, NoReturn

import psycopg
import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from deploy.launcher.state import running_stack
from shared.auth.audit import list_audit
from shared.auth.cache import CACHE_TTL_S
from shared.auth.keys import parse_per_minute
from shared.auth.principal import PII_OFF, PII_TOKENIZE
from shared.auth.store import issue_key, list_keys, revoke_key
from shared.config import get_settings
from shared.db import connect
from shared.errors import AgentCardsError, ValidationFailed


class PiiMode(StrEnum):
    """``--pii``: the stack's tokenisation, or none for this key's runs."""

    tokenize = PII_TOKENIZE
    off = PII_OFF


keys_app = typer.Typer(help="Create, list and revoke API keys.", no_args_is_help=True)
audit_app = typer.Typer(help="Read the audit log.", no_args_is_help=True)
console = Console()
err = Console(stderr=True)


@keys_app.callback()
def _keys() -> None:
    """Create, list and revoke API keys (once one exists, every request needs one)."""


@audit_app.callback()
def _audit() -> None:
    """Read the audit log: executions, searches, key changes."""


@contextmanager
def _database() -> Iterator[psycopg.Connection[dict[str, Any]]]:
    """A connection to AGENTCARDS_DATABASE_URL, else to the stack `agentcards up` runs here."""
    try:
        settings = get_settings()
        if not settings.database_url:
            _, settings = running_stack(settings)
        conn = connect(settings.database_url or "")
    except AgentCardsError as exc:
        _fail(exc)
    with conn:
        yield conn


def _fail(exc: BaseException) -> NoReturn:
    message = str(getattr(exc, "message", None) or exc)
    err.print(f"[bold red]error:[/] {escape(message)}", soft_wrap=True)
    raise typer.Exit(code=1)


@keys_app.command("create")
def create(
    tenant: Annotated[str, typer.Option(help="tenant the key acts for")],
    tools: Annotated[
        list[str] | None,
        typer.Option(help="tool pattern the key may call (server:tool, server:*); repeatable"),
    ] = None,
    rate: Annotated[str | None, typer.Option(help="executions per minute, e.g. 60/min")] = None,
    tool_rate: Annotated[
        str | None, typer.Option(help="tool calls per minute, e.g. 600/min")
    ] = None,
    concurrency: Annotated[int | None, typer.Option(help="executions in flight at once")] = None,
    name: Annotated[str | None, typer.Option(help="a label for `keys list`")] = None,
    admin: Annotated[bool, typer.Option(help="may read the tenant's audit log")] = False,
    pii: Annotated[
        PiiMode,
        typer.Option(
            help="off: the key's runs return personal data and secrets in clear (a trusted "
            "back-office key; audited)",
        ),
    ] = PiiMode.tokenize,
    mcp_mode: Annotated[
        str | None,
        typer.Option(
            help="what the key's /mcp serves unless a request says (X-AgentCards-Mode): "
            "code (default), direct (every server's tools as <server>.<tool>) or both"
        ),
    ] = None,
) -> None:
    """Create a key and print it once: only its sha256 is stored."""
    try:
        executions_per_min = parse_per_minute(rate, option="--rate")
        tool_calls_per_min = parse_per_minute(tool_rate, option="--tool-rate")
    except ValueError as exc:
        _fail(exc)
    with _database() as conn:
        try:
            row, key = issue_key(
                conn,
                tenant_id=tenant,
                name=name,
                tool_patterns=[p for t in tools for p in t.split(",") if p] if tools else None,
                executions_per_min=executions_per_min,
                tool_calls_per_min=tool_calls_per_min,
                max_concurrent=concurrency,
                admin=admin,
                pii=pii.value,
                mcp_mode=mcp_mode,
            )
        except ValidationFailed as exc:
            _fail(exc)
        conn.commit()
    console.print(f"key id  {row['id']}  tenant {escape(row['tenant_id'])}")
    if row["pii"] == PII_OFF:
        console.print("PII tokenisation off for this key's runs (audited)", style="yellow")
    console.print("API key (shown once, store it now):", style="bold")
    print(key)


@keys_app.command("list")
def list_command(
    tenant: Annotated[str | None, typer.Option(help="only this tenant's keys")] = None,
) -> None:
    """Every key with its tenant, limits and state; never the key itself."""
    with _database() as conn:
        rows = list_keys(conn, tenant_id=tenant)
    table = Table(title="API keys")
    for col in ("id", "tenant", "name", "key", "tools", "limits", "admin", "pii", "/mcp", "state"):
        table.add_column(col)
    for r in rows:
        limits = ", ".join(
            f"{label} {r[field]}"
            for field, label in (
                ("executions_per_min", "exec/min"),
                ("tool_calls_per_min", "calls/min"),
                ("max_concurrent", "concurrent"),
            )
            if r[field] is not None
        )
        state = f"revoked {r['revoked_at']:%Y-%m-%d %H:%M}" if r["revoked_at"] else "active"
        table.add_row(
            str(r["id"]),
            escape(r["tenant_id"]),
            escape(r["name"]),
            escape(f"{r['key_prefix']}…"),
            escape(", ".join(r["tool_patterns"])) if r["tool_patterns"] is not None else "all",
            limits or "-",
            "yes" if r["admin"] else "no",
            r["pii"],
            r.get("mcp_mode") or "code",
            state,
        )
    console.print(table)


@keys_app.command("revoke")
def revoke(key_id: Annotated[str, typer.Argument(help="the id `keys list` shows")]) -> None:
    """Revoke a key; every gateway refuses it within a few seconds."""
    with _database() as conn:
        try:
            row = revoke_key(conn, key_id=key_id)
        except AgentCardsError as exc:
            _fail(exc)
        conn.commit()
    console.print(
        f"revoked {row['id']} ({escape(row['name'])}, tenant {escape(row['tenant_id'])}); "
        f"gateways refuse it within {CACHE_TTL_S:g} s"
    )


@audit_app.command("tail")
def tail(
    n: Annotated[int, typer.Option("-n", min=1, max=10_000, help="how many entries")] = 20,
    tenant: Annotated[str | None, typer.Option(help="only this tenant")] = None,
) -> None:
    """The newest audit entries, oldest of them first, one JSON object a line."""
    with _database() as conn:
        rows = list_audit(conn, tenant_id=tenant, limit=n)
    for r in reversed(rows):
        print(json.dumps(r, default=str, sort_keys=True))
