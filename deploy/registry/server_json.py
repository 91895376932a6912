"""A ``server.json`` (the MCP Registry's server description) turned into an ``mcpServers`` entry.

The fields read are those of the registry's server.json schema (camelCase, 2025-10 on):
``packages`` (``registryType`` npm, pypi or oci; ``transport`` stdio; ``runtimeArguments``,
``packageArguments``, ``environmentVariables``) and ``remotes`` (``streamable-http`` with
``headers``). An npm package runs with ``npx -y <id>@<version>``, a PyPI one with
``uvx <id>==<version>``, an OCI image with ``docker run -i --rm``; a remote is reached at its
URL. Inputs come from ``--env``/``--header``/``--arg`` values, else their defaults, else are
asked for; a secret input is sealed with the stack's PII key (shared/privacy/sealed.py).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from shared.errors import ValidationFailed

NAME_PATTERN = r"^[a-zA-Z0-9.-]+/[a-zA-Z0-9._-]+$"
RUNNABLE = ("npm", "pypi", "oci")


class _Model(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)


class Input(_Model):
    """A value the server needs: an environment variable, a header, an argument."""

    name: str | None = None
    description: str | None = None
    is_required: bool = Field(default=False, alias="isRequired")
    is_secret: bool = Field(default=False, alias="isSecret")
    default: str | None = None
    value: str | None = None
    value_hint: str | None = Field(default=None, alias="valueHint")
    variables: dict[str, Input] = Field(default_factory=dict)


class Argument(Input):
    type: Literal["positional", "named"]


class Transport(_Model):
    type: str


class Package(_Model):
    registry_type: str = Field(alias="registryType")
    identifier: str = Field(min_length=1)
    version: str | None = None
    transport: Transport = Field(default_factory=lambda: Transport(type="stdio"))
    runtime_arguments: list[Argument] = Field(default_factory=list, alias="runtimeArguments")
    package_arguments: list[Argument] = Field(default_factory=list, alias="packageArguments")
    environment_variables: list[Input] = Field(default_factory=list, alias="environmentVariables")


class Remote(_Model):
    type: str
    url: str = Field(pattern=r"^https?://")
    headers: list[Input] = Field(default_factory=list)


class ServerJson(_Model):
    """The parts of a server.json this command reads."""

    name: str = Field(pattern=NAME_PATTERN, max_length=200)
    description: str = Field(default="", max_length=100)
    version: str = Field(min_length=1, max_length=255)
    title: str | None = None
    packages: list[Package] = Field(default_factory=list)
    remotes: list[Remote] = Field(default_factory=list)


def parse_server_json(data: Any, *, source: str) -> ServerJson:
    """Validate a server.json; a ValidationFailed names the field that is wrong."""
    try:
        return ServerJson.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(document)"
        raise ValidationFailed(
            f"{source} is not a valid server.json: {where}: {first['msg']}", field=where
        ) from exc


# Asks for a value the user did not give: (what, description, secret) -> the value.
Ask = Callable[[str, str, bool], str]


@dataclass
class Values:
    """What the user gave on the command line, and how to ask for the rest."""

    env: Mapping[str, str]
    headers: Mapping[str, str]
    args: Mapping[str, str]
    ask: Ask | None  # None: nothing can be asked (no terminal)


@dataclass
class Resolved:
    """An entry for the mcpServers file, and which of its values are secrets to seal."""

    entry: dict[str, Any]
    secret_env: list[str]
    secret_headers: list[str]
    kind: str  # npm | pypi | oci | remote


def choose(server: ServerJson, prefer: str | None) -> Package | Remote:
    """The way to run it: ``prefer`` (remote|npm|pypi|oci), else a streamable-HTTP remote,
    else the first package we can run."""
    remotes = [r for r in server.remotes if r.type == "streamable-http"]
    packages = [
        p for p in server.packages if p.registry_type in RUNNABLE and p.transport.type == "stdio"
    ]
    options: list[Package | Remote] = [*remotes, *packages]
    if prefer == "remote":
        options = list(remotes)
    elif prefer:
        options = [p for p in packages if p.registry_type == prefer]
    if options:
        return options[0]
    offered = [f"{p.registry_type} ({p.transport.type})" for p in server.packages] + [
        f"remote ({r.type})" for r in server.remotes
    ]
    raise ValidationFailed(
        f"{server.name} offers nothing this gateway can run"
        + (f" as {prefer}" if prefer else "")
        + f": {', '.join(offered) or 'no packages or remotes'} (runs npm, pypi and oci "
        "packages over stdio, and streamable-http remotes)"
    )


def resolve(server: ServerJson, way: Package | Remote, values: Values) -> Resolved:
    """The mcpServers entry for ``way``, every required input filled."""
    if isinstance(way, Remote):
        headers, secret = _inputs(way.headers, values.headers, values, what="header")
        return Resolved({"type": "http", "url": way.url, "headers": headers}, [], secret, "remote")
    env, secret = _inputs(
        way.environment_variables, values.env, values, what="environment variable"
    )
    runtime = _arguments(way.runtime_arguments, values)
    package = _arguments(way.package_arguments, values)
    version = way.version or server.version
    if way.registry_type == "npm":
        command, args = "npx", ["-y", *runtime, f"{way.identifier}@{version}", *package]
    elif way.registry_type == "pypi":
        command, args = "uvx", [*runtime, f"{way.identifier}=={version}", *package]
    else:  # oci: the variables reach the container through -e NAME (docker reads our env)
        image = (
            way.identifier
            if ":" in way.identifier.rsplit("/", 1)[-1]
            else f"{way.identifier}:{version}"
        )
        passed = [flag for name in env for flag in ("-e", name)]
        command, args = "docker", ["run", "-i", "--rm", *runtime, *passed, image, *package]
    entry: dict[str, Any] = {"command": command, "args": args}
    if env:
        entry["env"] = env
    return Resolved(entry, secret, [], way.registry_type)


def _inputs(
    inputs: list[Input], given: Mapping[str, str], values: Values, *, what: str
) -> tuple[dict[str, str], list[str]]:
    out: dict[str, str] = {}
    secret: list[str] = []
    for item in inputs:
        name = item.name or ""
        value = given.get(name, item.value or item.default)
        if value is None and item.is_required:
            value = _ask(values, f"{what} {name}", item.description or "", item.is_secret)
        if value is None:
            continue
        out[name] = _fill(value, item, values)
        if item.is_secret:
            secret.append(name)
    return out, secret


def _arguments(arguments: list[Argument], values: Values) -> list[str]:
    out: list[str] = []
    for arg in arguments:
        key = arg.name or arg.value_hint or ""
        value = values.args.get(key, arg.value or arg.default)
        if value is None and arg.is_required:
            value = _ask(values, f"argument {key}", arg.description or "", arg.is_secret)
        if arg.type == "named":
            if value is not None:
                out += [arg.name or key, _fill(value, arg, values)]
            elif arg.is_required:
                out.append(arg.name or key)
        elif value is not None:
            out.append(_fill(value, arg, values))
    return out


def _fill(value: str, item: Input, values: Values) -> str:
    """``{variable}`` placeholders of a value, from --arg, defaults, or asked."""

    def one(match: re.Match[str]) -> str:
        var = match.group(1)
        spec = item.variables.get(var)
        if spec is None:
            return match.group(0)
        got = values.args.get(var, spec.value or spec.default)
        if got is None:
            got = _ask(values, f"value {var}", spec.description or "", spec.is_secret)
        return got if got is not None else ""

    return re.sub(r"\{([A-Za-z0-9_]+)\}", one, value)


def _ask(values: Values, what: str, description: str, secret: bool) -> str:
    if values.ask is None:
        flag = (
            "--header"
            if what.startswith("header")
            else "--env"
            if what.startswith("environment")
            else "--arg"
        )
        name = what.split(" ")[-1]
        raise ValidationFailed(
            f"{what} is required ({description or 'no description'}): give it with "
            f"{flag} {name}=VALUE"
        )
    return values.ask(what, description, secret)
