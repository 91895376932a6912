"""``agentcards connect <client>`` / ``disconnect <client>``: a client's config written for you."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.markup import escape

from deploy.connect.access import (
    Wanted,
    entry_key,
    key_name,
    key_still_fits,
    mcp_url,
    stack_settings,
    stdio_entry,
)
from deploy.connect.clients import CLIENTS, ENTRY_NAME, Client, Platform, client_named, config_path
from deploy.connect.files import ConfigFile, diff, read_config, redact, snippet, write_config
from shared.auth.keys import check_tenant, check_tool_patterns, hash_key
from shared.auth.principal import MCP_MODES
from shared.auth.store import Conn, active_keys_exist, issue_key, principal_for_hash, revoke_key
from shared.config import DEFAULT_TENANT, Settings, get_settings
from shared.db import connect as db_connect
from shared.errors import AgentCardsError

console = Console(soft_wrap=True)  # paths and keys stay on one line
err = Console(stderr=True, soft_wrap=True)
KNOWN = ", ".join(CLIENTS)
PLACEHOLDER = "ack_<a-new-key-made-on-write>"


def _fail(exc: BaseException | str) -> NoReturn:
    message = exc if isinstance(exc, str) else str(getattr(exc, "message", None) or exc)
    err.print(f"[bold red]error:[/] {escape(message)}", soft_wrap=True)
    raise typer.Exit(code=1)


def connect(
    client_name: Annotated[str, typer.Argument(metavar="CLIENT", help=f"one of: {KNOWN}")],
    check: Annotated[
        bool, typer.Option("--check", help="connect as the client would and list its tools")
    ] = False,
    print_only: Annotated[
        bool, typer.Option("--print", help="print the entry instead of writing the file")
    ] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="show the change as a diff; write nothing")
    ] = False,
    file: Annotated[
        Path | None, typer.Option(help="write this file instead of the client's own")
    ] = None,
    tenant: Annotated[str, typer.Option(help="tenant the new key acts for")] = DEFAULT_TENANT,
    tools: Annotated[
        list[str] | None,
        typer.Option(help="tool pattern the key may call (server:tool, server:*); repeatable"),
    ] = None,
    mode: Annotated[
        str | None, typer.Option(help="what the client's /mcp serves: code, direct or both")
    ] = None,
    yes: Annotated[
        bool, typer.Option("--yes", help="create the stack's first key without asking")
    ] = False,
) -> None:
    """Configure an MCP client to use this gateway: OAuth when people sign in, else a new key.

    Other servers in the client's file are kept, the old file is backed up beside it, and a
    file holding a key gets mode 0600. Running it again changes nothing.
    """
    try:
        client = client_named(client_name)
        settings, started_here = stack_settings(get_settings())
        if check:
            _check(client, settings, file)
            return
        if mode is not None and mode not in MCP_MODES:
            _fail(f"--mode must be one of {', '.join(MCP_MODES)}, not {mode!r}")
        wanted = Wanted(tenant=check_tenant(tenant), tools=check_tool_patterns(tools), mode=mode)
    except (AgentCardsError, ValueError) as exc:
        _fail(exc)
    config = None
    if not print_only:  # --print writes nothing and reads no file
        try:
            config = read_config(client, config_path(client, Platform.current(), file))
        except AgentCardsError as exc:
            _fail(exc)
    _connect(
        client,
        settings,
        config,
        wanted,
        started_here=started_here,
        print_only=print_only,
        dry_run=dry_run,
        yes=yes,
    )


def _connect(
    client: Client,
    settings: Settings,
    config: ConfigFile | None,
    wanted: Wanted,
    *,
    started_here: bool,
    print_only: bool,
    dry_run: bool,
    yes: bool,
) -> None:
    existing = config.entry() if config else None
    oauth = settings.oauth and client.oauth
    if oauth or not settings.auth:  # nothing secret to write
        entry = _entry(client, settings, started_here=started_here, key=None)
        _finish(client, config, entry, print_only=print_only, dry_run=dry_run, secret=False)
        if oauth:
            console.print(f"{client.title} signs in with OAuth at {settings.oauth_issuer}")
        return
    if not settings.database_url:
        _fail(
            f"no stack is running in {settings.home} to make {client.title}'s key on: start one "
            "with `agentcards up`, or set AGENTCARDS_HOME (or AGENTCARDS_DATABASE_URL) to yours"
        )
    try:
        conn = db_connect(settings.database_url)
    except AgentCardsError as exc:
        _fail(exc)
    with conn:
        old_key = entry_key(client, existing)
        if key_still_fits(conn, old_key, wanted):
            entry = _entry(client, settings, started_here=started_here, key=old_key)
            _finish(client, config, entry, print_only=print_only, dry_run=dry_run, secret=True)
            return
        if dry_run:
            entry = _entry(client, settings, started_here=started_here, key=PLACEHOLDER)
            _finish(client, config, entry, print_only=False, dry_run=True, secret=True)
            console.print(f"a new key for tenant {escape(wanted.tenant)} would be created")
            return
        _confirm_first_key(conn, yes=yes)
        row, key = issue_key(
            conn,
            tenant_id=wanted.tenant,
            name=key_name(client),
            tool_patterns=list(wanted.tools) if wanted.tools is not None else None,
            mcp_mode=wanted.mode,
        )
        entry = _entry(client, settings, started_here=started_here, key=key)
        _finish(client, config, entry, print_only=print_only, dry_run=False, secret=True)
        replaced = _revoke_own(conn, client, old_key)
        conn.commit()  # the key exists only once the file that holds it is written
    console.print(
        f"key {row['id']} ({escape(row['name'])}) for tenant {escape(row['tenant_id'])}, "
        f"tools {', '.join(row['tool_patterns']) if row['tool_patterns'] else 'all'}"
        + (f"; the key it replaces ({replaced}) is revoked" if replaced else "")
    )


def _entry(
    client: Client, settings: Settings, *, started_here: bool, key: str | None
) -> dict[str, Any]:
    if client.transport == "stdio":
        return stdio_entry(settings, started_here=started_here, key=key)
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return client.http_entry(mcp_url(settings), headers)


def _finish(
    client: Client,
    config: ConfigFile | None,
    entry: dict[str, Any],
    *,
    print_only: bool,
    dry_run: bool,
    secret: bool,
) -> None:
    """Print, diff or write the entry."""
    if print_only or config is None:
        print(snippet(client, entry))
        return
    if config.entry() == entry:
        console.print(f"{client.title}: {config.path} already has this entry; nothing changed")
        return
    new_text = config.rendered(entry)
    if dry_run:
        print(diff(config.text, new_text, config.path), end="")
        return
    if config.comments_dropped:
        err.print(f"note: the comments in {config.path} are not kept (the backup has them)")
    backup = write_config(config, new_text, secret=secret)
    console.print(
        f"{client.title}: wrote {config.path}"
        + (" (mode 0600)" if secret else "")
        + (f", backup {backup}" if backup else "")
        + f"; restart {client.title} to use it"
    )


def _confirm_first_key(conn: Conn, *, yes: bool) -> None:
    """The first key turns authentication on for every caller: say so, and ask."""
    if active_keys_exist(conn):
        return
    warning = (
        "this stack has no API key yet: creating one turns authentication on, and every other "
        "caller (scripts, clients, the dashboard) then needs a key of its own"
    )
    err.print(f"[yellow]{escape(warning)}[/]")
    if yes:
        return
    if not sys.stdin.isatty():
        _fail("not created: pass --yes to create the first key")
    if not typer.confirm("create it?", default=False):
        _fail("not created")


def _revoke_own(conn: Conn, client: Client, key: str | None) -> str | None:
    """Revoke ``key`` when it is one `connect` made for this client; its id."""
    if key is None:
        return None
    principal = principal_for_hash(conn, key_hash=hash_key(key))
    if principal is None or principal.key_id is None:
        return None
    row = conn.execute("SELECT name FROM api_keys WHERE id = %s", (principal.key_id,)).fetchone()
    if row is None or row["name"] != key_name(client):
        return None  # a key the user put there: theirs to revoke
    revoke_key(conn, key_id=principal.key_id)
    return principal.key_id


def disconnect(
    client_name: Annotated[str, typer.Argument(metavar="CLIENT", help=f"one of: {KNOWN}")],
    file: Annotated[
        Path | None, typer.Option(help="edit this file instead of the client's own")
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="show the change as a diff; write nothing")
    ] = False,
) -> None:
    """Remove this gateway from a client's file (backed up first) and revoke the key made for it."""
    try:
        client = client_named(client_name)
        path = config_path(client, Platform.current(), file)
        config = read_config(client, path)
    except AgentCardsError as exc:
        _fail(exc)
    entry = config.entry()
    if entry is None:
        console.print(f"{client.title}: {path} has no {ENTRY_NAME!r} entry; nothing changed")
        return
    new_text = config.rendered(None)
    if dry_run:
        print(diff(config.text, new_text, path), end="")
        return
    key = entry_key(client, entry)
    revoked = None
    if key is not None:
        settings, _ = stack_settings(get_settings())
        try:
            with db_connect(settings.database_url or "") as conn:
                revoked = _revoke_own(conn, client, key)
                write_config(config, new_text, secret=False)
                conn.commit()
        except AgentCardsError as exc:
            _fail(exc)
    else:
        write_config(config, new_text, secret=False)
    console.print(
        f"{client.title}: removed {ENTRY_NAME!r} from {path}"
        + (f"; key {revoked} revoked" if revoked else "")
    )


def _check(client: Client, settings: Settings, file: Path | None) -> None:
    """Read our entry back from the client's file and connect with it as the client would."""
    del settings  # the check uses only what the file says, as the client does
    path = config_path(client, Platform.current(), file)
    config = read_config(client, path)
    entry = config.entry()
    if entry is None:
        _fail(f"{path} has no {ENTRY_NAME!r} entry: run `agentcards connect {client.name}` first")
    from deploy.connect.check import check_entry  # the MCP client: ~1 CPU-s to import

    result = asyncio.run(check_entry(client, entry))
    status = "[green]ok[/]" if result.ok else "[red]failed[/]"
    console.print(f"{client.title} ({result.transport}) {status}: {escape(redact(result.detail))}")
    for name in result.tools:
        console.print(f"  {escape(name)}")
    if result.ok:
        console.print(f"{len(result.tools)} tools")
    else:
        raise typer.Exit(code=1)
