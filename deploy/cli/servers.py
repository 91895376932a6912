"""``agentcards servers add|search|list|remove``: MCP servers from the MCP Registry, in the config.

``add`` writes the server's ``mcpServers`` entry into the stack's config file
(``AGENTCARDS_MCP_CONFIG``); the running toolhost sees the file change and connects it,
without a restart. The whole new file is validated before it is written (atomically), so a
bad server.json or a refused entry leaves the file as it was.
"""

from __future__ import annotations

import json
import re
import stat
import sys
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.markup import escape

from deploy.connect.access import stack_settings
from deploy.connect.files import write_atomic
from deploy.registry.client import RegistryClient
from deploy.registry.server_json import Values, choose, parse_server_json, resolve
from services.toolhost.servers import parse_servers
from shared import tool_ids
from shared.config import Settings, get_settings
from shared.errors import AgentCardsError, ConfigError, ValidationFailed
from shared.privacy.keys import PiiKeys
from shared.privacy.sealed import seal

servers_app = typer.Typer(
    help="MCP servers from the MCP Registry: search, add, list, remove.", no_args_is_help=True
)
console = Console(soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)


def _fail(exc: BaseException | str) -> NoReturn:
    message = exc if isinstance(exc, str) else str(getattr(exc, "message", None) or exc)
    err.print(f"[bold red]error:[/] {escape(message)}")
    raise typer.Exit(code=1)


def _pairs(items: list[str] | None, option: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items or []:
        name, sep, value = item.partition("=")
        if not sep or not name:
            _fail(f"{option} takes NAME=VALUE, not {item!r}")
        out[name] = value
    return out


def _config(settings: Settings) -> tuple[Path, dict[str, Any]]:
    """The stack's mcpServers file and its contents (an empty config when it does not exist)."""
    path = settings.mcp_config
    if path is None:
        _fail("no MCP config: set AGENTCARDS_MCP_CONFIG to the mcpServers file the toolhost reads")
    try:
        text = path.read_text()
    except FileNotFoundError:
        return path, {"mcpServers": {}}
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        _fail(f"{path} is not valid JSON ({exc.msg} at line {exc.lineno}); nothing written")
    if not isinstance(data, dict) or not isinstance(data.get("mcpServers"), dict):
        _fail(f'{path} has no "mcpServers" object; nothing written')
    return path, data


def _write(path: Path, data: dict[str, Any]) -> None:
    """Validate the whole new config as the toolhost would, then write it atomically."""
    try:
        parse_servers(data, source=str(path))
    except ConfigError as exc:
        _fail(f"{exc.message}; nothing written")
    mode = stat.S_IMODE(path.stat().st_mode) if path.exists() else 0o600
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps(data, indent=2) + "\n", mode)


def config_name(registry_name: str) -> str:
    """A server name for the config from a registry name: ``io.github.acme/weather-mcp`` →
    ``weather-mcp`` (letters, digits, ``_`` and ``-``)."""
    tail = registry_name.rsplit("/", 1)[-1].lower()
    name = re.sub(r"[^a-z0-9_-]+", "-", tail).strip("-")[:64] or "server"
    return name


def _registry() -> RegistryClient:
    return RegistryClient(get_settings().registry_url)


def _ask(what: str, description: str, secret: bool) -> str:
    return str(typer.prompt(f"{what} ({description})", hide_input=secret))


@servers_app.command("search")
def search(words: Annotated[list[str], typer.Argument(help="words in the server's name")]) -> None:
    """Servers at the MCP Registry whose name matches, latest versions."""
    client = _registry()
    try:
        found = client.search(" ".join(words))
    except AgentCardsError as exc:
        _fail(exc)
    finally:
        client.close()
    console.print(f"MCP Registry {client.base_url}")
    for item in found:
        s = item.server
        ways = [p.registry_type for p in s.packages] + [f"remote {r.type}" for r in s.remotes]
        console.print(
            f"  {escape(s.name)} {escape(s.version)} ({escape(', '.join(ways))}): "
            f"{escape(s.description)}"
        )
    console.print(f"{len(found)} servers")


@servers_app.command("add")
def add(
    name: Annotated[
        str | None, typer.Argument(help="registry name, e.g. io.github.owner/server")
    ] = None,
    from_file: Annotated[
        Path | None, typer.Option("--from", help="a local server.json instead of the registry")
    ] = None,
    as_name: Annotated[
        str | None, typer.Option("--name", help="the server's name in the config")
    ] = None,
    env: Annotated[list[str] | None, typer.Option("--env", help="NAME=VALUE; repeatable")] = None,
    header: Annotated[
        list[str] | None, typer.Option("--header", help="NAME=VALUE; repeatable")
    ] = None,
    arg: Annotated[
        list[str] | None, typer.Option("--arg", help="argument NAME=VALUE; repeatable")
    ] = None,
    prefer: Annotated[
        str | None,
        typer.Option(help="remote, npm, pypi or oci (default: a remote, else a package)"),
    ] = None,
) -> None:
    """Add a server to the stack's MCP config from its server.json; the toolhost connects it."""
    if (name is None) == (from_file is None):
        _fail("give a registry name or --from FILE (one of them)")
    settings, _ = stack_settings(get_settings())
    path, data = _config(settings)
    registry: str | None = None
    try:
        if from_file is not None:
            try:
                document = json.loads(from_file.read_text())
            except (OSError, ValueError) as exc:
                raise ValidationFailed(f"cannot read {from_file} as JSON: {exc}") from exc
            server = parse_server_json(document, source=str(from_file))
        else:
            client = _registry()
            try:
                server = client.latest(name or "").server
            finally:
                client.close()
            registry = client.base_url
        way = choose(server, prefer)
        values = Values(
            env=_pairs(env, "--env"),
            headers=_pairs(header, "--header"),
            args=_pairs(arg, "--arg"),
            ask=_ask if sys.stdin.isatty() else None,
        )
        resolved = resolve(server, way, values)
    except AgentCardsError as exc:
        _fail(exc)
    target = as_name or config_name(server.name)
    if not tool_ids.is_server_name(target):
        _fail(f"{target!r}: {tool_ids.SERVER_NAME_RULE}; choose one with --name")
    existing = data["mcpServers"].get(target)
    origin = ((existing or {}).get("agentcards") or {}).get("registry") or {}
    if existing is not None and origin.get("name") != server.name:
        _fail(f"{path} already has a server {target!r} (not {server.name}); choose --name")
    entry = resolved.entry
    secrets = [("env", n) for n in resolved.secret_env] + [
        ("headers", n) for n in resolved.secret_headers
    ]
    if secrets:
        keys = PiiKeys.from_settings(settings)
        for field, var in secrets:
            entry[field][var] = seal(keys, server=target, name=var, value=entry[field][var])
    entry["agentcards"] = {
        "registry": {"name": server.name, "version": server.version, "registry": registry}
    }
    data["mcpServers"][target] = entry
    _write(path, data)
    what = (
        "remote " + str(entry.get("url"))
        if resolved.kind == "remote"
        else f"{resolved.kind} {' '.join([entry['command'], *entry['args']])}"
    )
    console.print(
        f"{'updated' if existing else 'added'} {target} ({server.name} {server.version}, {what}) "
        f"in {path}" + (f"; sealed: {', '.join(v for _, v in secrets)}" if secrets else "")
    )
    console.print("the running toolhost connects it within seconds (no restart)")


@servers_app.command("list")
def list_command() -> None:
    """The configured servers, with the registry version each came from and whether a newer exists."""
    settings, _ = stack_settings(get_settings())
    path, data = _config(settings)
    console.print(str(path))
    clients: dict[str, RegistryClient] = {}
    try:
        for name, entry in data["mcpServers"].items():
            origin = ((entry.get("agentcards") or {}).get("registry")) or {}
            runs = entry.get("url") or " ".join([entry.get("command", ""), *entry.get("args", [])])
            latest = "-"
            if origin.get("registry"):
                client = clients.setdefault(origin["registry"], RegistryClient(origin["registry"]))
                try:
                    newest = client.latest(origin["name"]).server.version
                    latest = "up to date" if newest == origin["version"] else f"{newest} available"
                except AgentCardsError as exc:
                    latest = f"? ({exc.message[:60]})"
            source = f"{origin['name']} {origin['version']}, {latest}" if origin else "by hand"
            console.print(f"  {escape(name)}: {escape(str(runs))} ({escape(source)})")
    finally:
        for client in clients.values():
            client.close()


@servers_app.command("remove")
def remove(
    name: Annotated[str, typer.Argument(help="the config name or the registry name")],
) -> None:
    """Remove a server from the stack's MCP config; the toolhost disconnects it."""
    settings, _ = stack_settings(get_settings())
    path, data = _config(settings)
    servers = data["mcpServers"]
    matches = [
        n
        for n, e in servers.items()
        if n == name or ((e.get("agentcards") or {}).get("registry") or {}).get("name") == name
    ]
    if not matches:
        _fail(f"no server {name!r} in {path} (by config or registry name)")
    for match in matches:
        del servers[match]
    _write(path, data)
    console.print(f"removed {', '.join(matches)} from {path}")
