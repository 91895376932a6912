"""``agentcards keys create|list|revoke`` and ``agentcards audit tail``: operator access control."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from enum import StrEnum
from typing import Annotated, Any, NoReturn

import psycopg
import typer
from rich.console import Console
from rich.markup import escape
from rich.measure import Measurement
from rich.table import Table

from deploy.launcher.state import running_stack
from shared.auth.audit import list_audit
from shared.auth.cache import CACHE_TTL_S
from shared.auth.keys import parse_per_minute
from shared.auth.openness import open_reason
from shared.auth.principal import PII_OFF, PII_TOKENIZE
from shared.auth.store import active_keys_exist, find_key, issue_key, list_keys, revoke_key
from shared.config import get_settings
from shared.db import connect
from shared.errors import AgentCardsError, LastActiveKey, ValidationFailed


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
    as_json: Annotated[
        bool, typer.Option("--json", help="one JSON array, every field, for scripts")
    ] = False,
) -> None:
    """Every key with its tenant, limits and state; never the key itself."""
    with _database() as conn:
        rows = list_keys(conn, tenant_id=tenant)
    if as_json:
        print(json.dumps([_json_row(r) for r in rows], indent=2))
        return
    columns = ("id", "tenant", "name", "key", "tools", "limits", "admin", "pii", "/mcp", "state")
    shown = [dict(zip(columns, _shown(r), strict=True)) for r in rows]
    table = Table(title="API keys")
    for col in columns:
        table.add_column(col, no_wrap=col == "id")
    for fields in shown:
        table.add_row(*(escape(v) for v in fields.values()))
    unbounded = console.options.update_width(100_000)  # the table's own width, not the screen's
    if Measurement.get(console, unbounded, table).maximum <= console.width:
        console.print(table)
        return
    # Too narrow for the table without cutting ids short (`keys revoke` takes them): one
    # record per key, a field a line.
    for fields in shown:
        for col, value in fields.items():
            console.print(f"{col:<7} {escape(value)}", soft_wrap=True)
        console.print()


def _shown(r: dict[str, Any]) -> tuple[str, ...]:
    """A key's row as `keys list` prints it, one string per column."""
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
    return (
        str(r["id"]),
        r["tenant_id"],
        r["name"],
        f"{r['key_prefix']}…",
        ", ".join(r["tool_patterns"]) if r["tool_patterns"] is not None else "all",
        limits or "-",
        "yes" if r["admin"] else "no",
        r["pii"],
        r.get("mcp_mode") or "code",
        state,
    )


def _json_row(row: dict[str, Any]) -> dict[str, Any]:
    """A key's row as `keys list --json` prints it: ids and times as strings."""
    out = {k: str(v) if k == "id" else v for k, v in row.items()}
    for field in ("created_at", "revoked_at"):
        out[field] = row[field].isoformat() if row[field] else None
    out["state"] = "revoked" if row["revoked_at"] else "active"
    return out


@keys_app.command("revoke")
def revoke(
    key: Annotated[str, typer.Argument(help="the key's id, a unique prefix of it, or its name")],
    yes: Annotated[
        bool,
        typer.Option(
            "--yes",
            "-y",
            help="revoke it even if it is the last active key (the gateway is then open)",
        ),
    ] = False,
) -> None:
    """Revoke a key; every gateway refuses it within a few seconds. Revoking the last active
    key opens the gateway to every local caller: asked first, refused without a terminal
    unless ``--yes``."""
    with _database() as conn:
        try:
            key_id = str(find_key(conn, ref=key)["id"])
            try:
                row = revoke_key(conn, key_id=key_id, keep_one=not yes)
            except LastActiveKey as exc:
                conn.rollback()  # no lock held while a person reads the question
                _confirm_last(exc)
                row = revoke_key(conn, key_id=key_id)
            open_now = open_reason(get_settings(), keys_exist=active_keys_exist(conn))
        except AgentCardsError as exc:
            _fail(exc)
        conn.commit()
    console.print(
        f"revoked {row['id']} ({escape(row['name'])}, tenant {escape(row['tenant_id'])}); "
        f"gateways refuse it within {CACHE_TTL_S:g} s"
    )
    if open_now:
        err.print(f"[bold yellow]warning:[/] the gateway is {escape(open_now)}", soft_wrap=True)


def _confirm_last(exc: LastActiveKey) -> None:
    """Go on only if a person at a terminal says so; without one, refuse (``--yes`` skips this)."""
    err.print(f"[bold yellow]warning:[/] {escape(exc.message)}", soft_wrap=True)
    if not sys.stdin.isatty():
        err.print(
            "[bold red]error:[/] refusing to revoke the last active key without a terminal "
            "to confirm: pass --yes to revoke it anyway",
            soft_wrap=True,
        )
        raise typer.Exit(code=1)
    if not typer.confirm("Revoke it anyway?", default=False, err=True):
        err.print("nothing revoked")
        raise typer.Exit(code=1)


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
