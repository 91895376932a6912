"""How a client gets in: OAuth when people sign in, else an API key made for that client.

The key is least-privilege: never admin, PII tokenised, limited to ``--tools`` and
``--tenant``, named ``agentcards connect <client>`` so `keys list` shows what it is for and
`disconnect` (or a later `connect` that replaces it) revokes it. A client that reads stdio
servers only gets `agentcards mcp` by absolute path with the environment that finds this
stack, since a desktop app gives its servers little more than HOME and PATH.
"""

from __future__ import annotations

import contextlib
import importlib.util
import site
import sys
import sysconfig
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deploy.connect.clients import Client
from deploy.launcher.state import running_stack
from shared.auth.keys import hash_key, looks_like_key
from shared.auth.store import Conn, principal_for_hash
from shared.config import Settings, settings_to_env
from shared.errors import AgentCardsError

KEY_ENV = "AGENTCARDS_API_KEY"
_SHARED_WITH_STDIO = ("env", "pii", "pii_key", "pii_key_previous", "secret_key", "auth")
BEARER = "Bearer "


def stack_settings(settings: Settings) -> tuple[Settings, bool]:
    """The settings of the stack to connect to, and whether `agentcards up` runs it here."""
    with contextlib.suppress(AgentCardsError):
        _, resolved = running_stack(settings)
        return resolved, True
    return settings, False  # compose, another host: the settings as given


def mcp_url(settings: Settings) -> str:
    """The gateway's MCP endpoint as a client reaches it: the public URL, else host and port."""
    if settings.public_url:
        return settings.resource_url
    host = settings.gateway_host
    if host in {"0.0.0.0", "::", ""}:  # bound to every address: loopback reaches it here
        host = "127.0.0.1"
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{settings.gateway_port}/mcp"


def key_name(client: Client) -> str:
    """The name of the keys `connect` makes for ``client`` (how `disconnect` knows its own)."""
    return f"agentcards connect {client.name}"


@dataclass(frozen=True)
class Wanted:
    """The key a client should hold: its tenant, tool patterns and /mcp mode."""

    tenant: str
    tools: tuple[str, ...] | None
    mode: str | None


def entry_key(client: Client, entry: Mapping[str, Any] | None) -> str | None:
    """The API key an entry of ours carries (header or stdio environment), if any."""
    if not entry:
        return None
    if client.transport == "stdio":
        env = entry.get("env")
        value = env.get(KEY_ENV) if isinstance(env, Mapping) else None
    else:
        auth = client.entry_headers(entry).get("Authorization", "")
        value = auth[len(BEARER) :] if auth.startswith(BEARER) else None
    return value if isinstance(value, str) and looks_like_key(value) else None


def key_still_fits(conn: Conn, key: str | None, wanted: Wanted) -> bool:
    """Whether ``key`` is active and grants exactly what is wanted (then it is kept)."""
    if key is None:
        return False
    principal = principal_for_hash(conn, key_hash=hash_key(key))
    return (
        principal is not None
        and not principal.admin
        and principal.tenant_id == wanted.tenant
        and principal.tool_patterns == wanted.tools
        and (principal.mcp_mode or None) == (wanted.mode or None)
    )


def stdio_command() -> tuple[str, list[str], dict[str, str]]:
    """`agentcards mcp` by absolute path: this install's script, or for a source checkout this
    interpreter on this checkout's code (PYTHONPATH), since the desktop app's PATH has neither.
    """
    spec = importlib.util.find_spec("deploy")
    package = Path(spec.origin or "").resolve().parent if spec else None
    installed = package is not None and any(
        package.is_relative_to(Path(p).resolve())
        for p in [*site.getsitepackages(), site.getusersitepackages()]
    )
    script = Path(sysconfig.get_path("scripts")) / "agentcards"
    if installed and script.exists():
        return str(script), ["mcp"], {}
    env = {"PYTHONPATH": str(package.parent)} if package else {}
    return str(Path(sys.executable).resolve()), ["-m", "deploy.cli.main", "mcp"], env


def stdio_entry(settings: Settings, *, started_here: bool, key: str | None) -> dict[str, Any]:
    """Claude Desktop's entry: the command, and the environment that finds this stack."""
    command, args, env = stdio_command()
    env["AGENTCARDS_HOME"] = str(settings.home)
    given = settings_to_env(settings)
    # The stack's own choices the stdio server must share (its PII vault key and mode, the
    # key that seals replies): written only where they differ from the defaults.
    for name in _SHARED_WITH_STDIO:
        default = type(settings).model_fields[name].get_default(call_default_factory=True)
        variable = f"AGENTCARDS_{name.upper()}"
        if getattr(settings, name) != default and variable in given:
            env[variable] = given[variable]
    if not started_here:  # no state file to read: name the stack's services themselves
        env["AGENTCARDS_DATABASE_URL"] = settings.database_url or ""
        env["AGENTCARDS_REDIS_URL"] = settings.redis_url or ""
    if key:
        env[KEY_ENV] = key
    return {"command": command, "args": args, "env": env}
