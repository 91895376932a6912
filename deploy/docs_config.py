"""docs/configuration.md, generated from the settings' own descriptions.

Run ``python -m deploy.docs_config > docs/configuration.md`` after changing a setting;
tests/unit/foundation/test_configuration_doc.py fails while the file differs.
"""

from __future__ import annotations

import types
import typing
from pathlib import Path
from typing import Any

import annotated_types
from pydantic import SecretStr
from pydantic.fields import FieldInfo

from shared.config import Settings

COMMAND = "python -m deploy.docs_config > docs/configuration.md"
PREFIX = str(Settings.model_config.get("env_prefix", ""))

HEADER = f"""\
# Configuration

<!-- Generated from shared/config.py by `{COMMAND}`: edit the descriptions there. -->

Every process reads one settings object (`shared/config.py`) from the environment, or from a
`.env` file in its working directory, and refuses to start when a value is invalid, naming the
variable. Each setting is the variable `{PREFIX}<NAME>` (any case); booleans take `true`/`false`
(also `on`/`off`, `1`/`0`). `agentcards up` hands its own settings to every process it starts.

Not here: the MCP servers themselves (the `mcpServers` file named by
`{PREFIX}MCP_CONFIG`, [usage.md](usage.md#mcp-servers)), OpenTelemetry's standard `OTEL_*`
variables ([tracing.md](tracing.md)) and compose's passwords ([deployment.md](deployment.md)).

| variable | type | default | description |
| --- | --- | --- | --- |
"""


BOUNDS = {
    annotated_types.Ge: "≥",
    annotated_types.Gt: ">",
    annotated_types.Le: "≤",
    annotated_types.Lt: "<",
}


def _type(annotation: Any) -> str:
    """A field's type as a reader writes it: `int`, `path`, `secret`, `a \\| b`; optional left implicit."""
    if typing.get_origin(annotation) is typing.Literal:
        return " \\| ".join(str(v) for v in typing.get_args(annotation))
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return " \\| ".join(_type(a) for a in typing.get_args(annotation) if a is not type(None))
    return {Path: "path", SecretStr: "secret"}.get(annotation, getattr(annotation, "__name__", ""))


def _bounds(field: FieldInfo, *, sized: bool) -> str:
    """The field's constraints, e.g. ``≥ 1, ≤ 256``."""
    parts = []
    for meta in field.metadata:
        for kind, sign in BOUNDS.items():
            if isinstance(meta, kind):
                bound = getattr(meta, kind.__name__.lower())
                parts.append(f"{sign} {bound}{_size(bound, sized)}")
        if getattr(meta, "pattern", None):
            parts.append(f"`{meta.pattern}`")
    return ", ".join(parts)


def _size(value: Any, sized: bool) -> str:
    """A byte count's size in KiB or MiB when it is a round one, else nothing."""
    if sized and isinstance(value, int) and value >= 1024:
        for unit, size in (("MiB", 1 << 20), ("KiB", 1 << 10)):
            if value % size == 0:
                return f" ({value // size} {unit})"
    return ""


def _default(field: FieldInfo, *, sized: bool) -> str:
    value = field.get_default(call_default_factory=True)
    if value is None or value == "":
        return "unset"
    if isinstance(value, SecretStr):
        value = value.get_secret_value()
    elif isinstance(value, bool):
        value = "true" if value else "false"
    elif isinstance(value, Path):
        value = str(value).replace(str(Path.home()), "~", 1)
    return f"`{value}`{_size(value, sized)}"


def render() -> str:
    """The whole of docs/configuration.md."""
    rows = []
    for name, field in Settings.model_fields.items():
        sized = name.endswith("_bytes")
        kind = ", ".join(filter(None, (_type(field.annotation), _bounds(field, sized=sized))))
        rows.append(
            f"| `{PREFIX}{name.upper()}` | {kind} | {_default(field, sized=sized)} "
            f"| {field.description} |"
        )
    return HEADER + "\n".join(rows) + "\n"


def undescribed() -> list[str]:
    """Settings without a description: each needs ``Field(description=...)``."""
    return [name for name, field in Settings.model_fields.items() if not field.description]


if __name__ == "__main__":
    print(render(), end="")
