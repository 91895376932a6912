"""A client's config file: read with the client's own rules, our entry set or removed, written back.

Everything else in the file is kept: other servers, other settings, and in Codex's TOML its
comments and layout (tomlkit). A JSON file is written back as JSON (two-space indent); a
JSON-with-comments file (VS Code, Gemini CLI) is read with a JSON5 parser, a superset of
JSONC, and its comments are not kept, which the command says, with the backup beside it.
The write is atomic (a temporary file renamed over the old), the old file is first copied
to ``<file>.agentcards-backup``, and a file that holds a key ends with mode 0600.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import json5
import tomlkit
from tomlkit.exceptions import TOMLKitError
from tomlkit.items import Table

from deploy.connect.clients import ENTRY_NAME, Client
from shared.errors import ConfigError

BACKUP_SUFFIX = ".agentcards-backup"
_KEY = re.compile(r"\b(ack_[A-Za-z0-9_-]{8})[A-Za-z0-9_-]{35}\b")
_URL_PASSWORD = re.compile(r"(://[^:/@\s\"']+:)[^@\s\"']+@")


@dataclass
class ConfigFile:
    """One client's file as read: its text (None when there is none yet) and its parsed data."""

    client: Client
    path: Path
    text: str | None
    data: dict[str, Any]
    comments_dropped: bool = False  # JSONC read with comments that a JSON write cannot keep

    def entry(self) -> dict[str, Any] | None:
        """Our entry in the file, as the client would read it."""
        servers = self.data.get(self.client.servers_key)
        entry = servers.get(ENTRY_NAME) if isinstance(servers, dict) else None
        return dict(entry) if isinstance(entry, dict) else None

    def rendered(self, entry: dict[str, Any] | None) -> str:
        """The file's text with our entry set to ``entry`` (removed for None), all else kept."""
        if self.client.fmt == "toml":
            return _toml_with(self.text or "", self.client.servers_key, entry)
        if entry is None and self.entry() is None:
            return self.text or ""
        data = json.loads(json.dumps(self.data))  # a deep copy, in the file's own key order
        servers = data.setdefault(self.client.servers_key, {})
        if entry is None:
            del servers[ENTRY_NAME]
        else:
            servers[ENTRY_NAME] = entry
        return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def read_config(client: Client, path: Path) -> ConfigFile:
    """The file parsed as ``client`` parses it; a ConfigError naming the file and the spot."""
    try:
        text: str | None = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        text = None
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror or exc}", file=str(path)) from exc
    if text is None or not text.strip():
        return ConfigFile(client, path, text, {})
    dropped = False
    if client.fmt == "toml":
        try:
            data: Any = tomlkit.parse(text).unwrap()
        except TOMLKitError as exc:
            raise ConfigError(
                f"{path} is not valid TOML ({client.title} would not read it either): {exc}; "
                "nothing written",
                file=str(path),
            ) from exc
    else:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            if client.fmt != "jsonc":
                raise ConfigError(
                    f"{path} is not valid JSON ({client.title} reads strict JSON): {exc.msg} at "
                    f"line {exc.lineno} column {exc.colno}; nothing written",
                    file=str(path), line=exc.lineno, column=exc.colno,
                ) from exc  # fmt: skip
            try:
                data = json5.loads(text)
            except ValueError as exc5:
                raise ConfigError(
                    f"{path} is not valid JSON with comments: {exc5}; nothing written",
                    file=str(path),
                ) from exc5
            dropped = True
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected an object at the top level; nothing written")
    servers = data.get(client.servers_key)
    if servers is not None and not isinstance(servers, dict):
        raise ConfigError(
            f"{path}: {client.servers_key!r} is not an object of servers; nothing written"
        )
    return ConfigFile(client, path, text, data, comments_dropped=dropped)


def _toml_with(text: str, key: str, entry: dict[str, Any] | None) -> str:
    """Codex's TOML with ``[<key>.agentcards]`` set or removed, comments and order kept."""
    doc = tomlkit.parse(text)
    servers = doc.get(key)
    if entry is None:
        if isinstance(servers, Table) and ENTRY_NAME in servers:
            del servers[ENTRY_NAME]
            if not servers:
                del doc[key]
        return tomlkit.dumps(doc)
    if not isinstance(servers, Table):
        servers = tomlkit.table(is_super_table=True)
        doc[key] = servers
    servers[ENTRY_NAME] = _toml_table(entry)
    return tomlkit.dumps(doc)


def _toml_table(entry: dict[str, Any]) -> Table:
    """An entry as a TOML table, its mappings (headers, env) inline as Codex writes them."""
    table = tomlkit.table()
    for name, value in entry.items():
        if isinstance(value, dict):
            inline = tomlkit.inline_table()
            inline.update(value)
            table[name] = inline
        else:
            table[name] = value
    return table


def snippet(client: Client, entry: dict[str, Any]) -> str:
    """The entry alone, under the client's servers table, in the client's format (--print)."""
    if client.fmt == "toml":
        return _toml_with("", client.servers_key, entry).rstrip("\n")
    return json.dumps({client.servers_key: {ENTRY_NAME: entry}}, indent=2)


def redact(text: str) -> str:
    """``text`` with API keys cut to the prefix `keys list` shows and URL passwords hidden."""
    return _URL_PASSWORD.sub(r"\1***@", _KEY.sub(r"\1…", text))


def diff(old: str | None, new: str, path: Path) -> str:
    """A unified diff of the change, secrets redacted (what ``--dry-run`` prints)."""
    lines = difflib.unified_diff(
        (old or "").splitlines(keepends=True),
        new.splitlines(keepends=True),
        fromfile=str(path) if old is not None else "/dev/null",
        tofile=str(path),
    )
    return redact("".join(lines))


def write_config(config: ConfigFile, new_text: str, *, secret: bool) -> Path | None:
    """Write ``new_text`` over the file (atomic), after a backup; the backup's path, if any.

    ``secret``: the text holds a key, so the file ends with mode 0600 whatever it had.
    """
    path = config.path
    path.parent.mkdir(parents=True, exist_ok=True)
    backup = None
    mode = 0o644
    if config.text is not None:
        mode = stat.S_IMODE(path.stat().st_mode)
        backup = path.with_name(path.name + BACKUP_SUFFIX)
        write_atomic(backup, config.text, 0o600)  # the old file may hold secrets too
    write_atomic(path, new_text, 0o600 if secret else mode)
    return backup


def write_atomic(path: Path, text: str, mode: int) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, mode)  # os.open's mode passes through the umask
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
