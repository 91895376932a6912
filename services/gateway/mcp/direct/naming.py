"""How a request names things on the direct surface: the aggregate's tool naming it asks for
(``X-AgentCards-Tool-Names`` or ``?names=``), and a ``<server>.<name>`` split in two."""

from __future__ import annotations

from collections.abc import Sequence

from starlette.requests import Request

from services.gateway.ops import direct as ops
from shared import tool_ids
from shared.errors import ValidationFailed

NAMES_HEADER = "x-agentcards-tool-names"


def requested(request: object, *, header: str, query: str, choices: Sequence[str]) -> str | None:
    """What the request asks with ``header`` (or ``?<query>=``), one of ``choices``; None when
    it does not say. Anything else is a ValidationFailed naming the choices."""
    asked = None
    if isinstance(request, Request):
        asked = request.headers.get(header) or request.query_params.get(query)
    if asked is not None and asked not in choices:
        raise ValidationFailed(
            f"{header} (or ?{query}=) must be one of {', '.join(choices)}, not {asked[:40]!r}",
            field=query,
        )
    return asked


def naming_of(request: object) -> ops.ToolNaming:
    """How the request wants the aggregate's tools named (``X-AgentCards-Tool-Names`` or
    ``?names=``), else ``prefixed``. Request-only: a key has no setting for it."""
    asked = requested(request, header=NAMES_HEADER, query="names", choices=ops.TOOL_NAMINGS)
    return "bare" if asked == "bare" else "prefixed"


def split_name(endpoint: str | None, name: str, *, what: str) -> tuple[str, str]:
    """(server, its own name) of a prompt named on ``endpoint`` (None: the aggregate, where
    it is ``<server>.<prompt>``)."""
    if endpoint is not None:
        return endpoint, name
    server, dot, own = name.partition(ops.AGGREGATE_SEPARATOR)
    if not dot or not own or not tool_ids.is_server_name(server):
        raise ValidationFailed(
            f"{what} {name[:200]!r} is not named <server>.<{what}> (see prompts/list)",
            field="name",
        )
    return server, own
