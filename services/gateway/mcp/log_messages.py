"""MCP `logging`: `logging/setLevel` per session, and an execution's events as log notifications.

While `execute_code` (or `execute_capability`) waits, each event of the run becomes a
`notifications/message` at or above the level the client set: tool and capability calls
(debug; error when one failed), progress (info), a truncated trace (warning), and at the
end the outcome (info, or error with its type and message) and the captured stdout (info;
the sandbox hands stdout over when the run ends, so it comes last, not line by line).
A downstream server's own log messages during a call (``tool_log`` events, relayed by the
toolhost) come at the server's level under its logger, on a direct call too.
"""

from __future__ import annotations

import warnings
import weakref
from typing import Any, get_args

from mcp.server.connection import Connection
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.session import ServerSession
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp.shared.jsonrpc_dispatcher import progress_token_from_params
from mcp.types import (
    EmptyResult,
    LoggingLevel,
    LoggingMessageNotification,
    LoggingMessageNotificationParams,
    ProgressNotification,
    ProgressNotificationParams,
    SetLevelRequestParams,
)
from mcp.types.version import MODERN_PROTOCOL_VERSIONS

from services.gateway.mcp.fit import clip_text
from services.gateway.mcp.replicas import calls
from shared.executions.events import FINISHED, RETRIED, TOOL_LOG
from shared.executions.models import ExecutionView
from shared.executions.status import ExecutionStatus
from shared.executions.trace import EventType

LEVELS: tuple[LoggingLevel, ...] = get_args(LoggingLevel)  # severity-ascending (RFC 5424)
# Before a client sets a level it gets what needs its attention: failed calls and runs.
DEFAULT_LEVEL: LoggingLevel = "warning"
LOGGER = "agentcards.execution"
STDOUT_LOGGER = "agentcards.stdout"
# A log line carries at most this much of stdout or an error text: a notification is one
# server-sent event, and MCP clients refuse one over 1 MiB (see fit.py); even escaped 6-fold
# (control characters) this stays under it.
LOG_TEXT_BYTES = 64 << 10

# The level each client connection asked for; a connection that ends drops out by itself.
_levels: weakref.WeakKeyDictionary[Connection, LoggingLevel] = weakref.WeakKeyDictionary()

LogLine = tuple[LoggingLevel, dict[str, Any]]


async def set_level(ctx: ServerRequestContext[Any], params: SetLevelRequestParams) -> EmptyResult:
    """`logging/setLevel`: the level this client connection gets messages from."""
    _levels[connection_of(ctx.session)] = params.level
    return EmptyResult()


def register(server: MCPServer | Server[Any]) -> None:
    """Serve `logging/setLevel` (and so declare the `logging` capability)."""
    # MCPServer has no public hook for this method; its low-level server does.
    lowlevel = server._lowlevel_server if isinstance(server, MCPServer) else server
    lowlevel.add_request_handler("logging/setLevel", SetLevelRequestParams, set_level)


def connection_of(session: ServerSession) -> Connection:
    """The client connection behind a request's session.

    A ``ServerSession`` is built per request; the level set by one request must hold for
    the connection's later ones, and only the session holds the connection (privately).
    """
    connection: Connection = session._connection
    return connection


def wanted(session: ServerSession, *, protocol_version: str, level: LoggingLevel) -> bool:
    """Whether ``session`` gets a message at ``level``.

    On 2026-07-28 there is no setLevel: each request opts in through its `_meta` and the
    SDK filters, so everything is offered; earlier, the level the client set (or the default).
    """
    if protocol_version in MODERN_PROTOCOL_VERSIONS:
        return True
    floor = _levels.get(connection_of(session), DEFAULT_LEVEL)
    return LEVELS.index(level) >= LEVELS.index(floor)


async def send(ctx: Context, line: LogLine, *, logger: str = LOGGER) -> None:
    """One log notification on the request's stream, if the client wants that level."""
    level, data = line
    request = ctx.request_context
    if not wanted(request.session, protocol_version=request.protocol_version, level=level):
        return
    if (meta := calls.event_meta(ctx)) is not None:  # a session's: the run event it carries
        params = LoggingMessageNotificationParams(level=level, data=data, logger=logger, _meta=meta)
        notification = LoggingMessageNotification(params=params)
        await request.session.send_notification(notification, related_request_id=request.request_id)
        return
    with warnings.catch_warnings():  # deprecated in 2026-07-28 only; we serve earlier versions too
        warnings.simplefilter("ignore", MCPDeprecationWarning)
        pending = request.session.send_log_message(
            level=level, data=data, logger=logger, related_request_id=request.request_id
        )
    await pending


async def report_progress(
    ctx: Context, progress: float, total: float | None, message: str | None
) -> None:
    """Progress on the caller's token (nothing when it gave none); in a session, naming the
    run event it passes on (replicas/calls.py)."""
    request = ctx.request_context
    token = progress_token_from_params(request.params)
    if (meta := calls.event_meta(ctx)) is None or token is None:
        await ctx.report_progress(progress, total, message)
        return
    params = ProgressNotificationParams(
        progress_token=token, progress=progress, total=total, message=message, _meta=meta
    )
    notification = ProgressNotification(params=params)
    await request.session.send_notification(notification, related_request_id=request.request_id)


def event_line(event: dict[str, Any]) -> LogLine | None:
    """The log line for one execution event, None for events that are not worth one."""
    kind = event.get("type")
    if kind == EventType.PROGRESS:
        return "info", _drop_none(
            {
                "message": event.get("message") or "progress",
                "done": event.get("done"),
                "total": event.get("total"),
            }
        )
    if kind in (EventType.TOOL_START, EventType.CAPABILITY_START):
        what = event.get("tool") or event.get("name")
        return "debug", {"message": f"calling {what}", "call_id": event.get("call_id")}
    if kind in (EventType.TOOL_END, EventType.CAPABILITY_END):
        what = event.get("tool") or event.get("name")
        error = event.get("error")
        if error:
            return "error", {
                "message": f"{what} failed: {error.get('message', '')}",
                "tool": what,
                "error": error,
            }
        return "debug", {"message": f"{what} returned", "duration_ms": event.get("duration_ms")}
    if kind == EventType.APPROVAL:  # a call paused for a person's answer, and the answer
        status = event.get("status")
        said = "waits for approval" if status == "pending" else f"{status} (approval)"
        return "info", _drop_none(
            {
                "message": f"{event.get('tool')} {said}",
                "call_id": event.get("call_id"),
                "by": event.get("by"),
                "reason": event.get("reason"),
            }
        )
    if kind == EventType.TRACE_TRUNCATED:
        return "warning", {
            "message": f"more than {event.get('limit')} {event.get('what')} calls: "
            "the trace stops recording them"
        }
    if kind == RETRIED:
        return "warning", {
            "message": f"{event.get('reason')}; re-running it (attempt {event.get('attempt')}, "
            "retry: safe)"
        }
    return None  # FINISHED and LEARNED: the outcome is logged from the stored row


def outcome_lines(view: ExecutionView) -> list[tuple[LogLine, str]]:
    """The end of a run as (line, logger): its outcome, then its stdout if any."""
    lines: list[tuple[LogLine, str]] = []
    if view.status == ExecutionStatus.SUCCEEDED:
        message = f"execution {view.id} succeeded"
        lines.append((("info", {"message": message, "duration_ms": view.duration_ms}), LOGGER))
    elif view.error is not None:
        error = view.error.model_dump()
        for key in ("message", "traceback"):
            if isinstance(error.get(key), str):
                error[key] = clip_text(
                    error[key], max_bytes=LOG_TEXT_BYTES, rest="see get_execution"
                )
        data = {"message": f"execution {view.id} {view.status}: {error['message']}"}
        lines.append((("error", {**data, "error": error}), LOGGER))
    if view.stdout:
        rest = f"get_execution(execution_id={view.id!r}, part='stdout') has all of it"
        stdout = clip_text(view.stdout, max_bytes=LOG_TEXT_BYTES, rest=rest)
        lines.append((("info", {"message": stdout}), STDOUT_LOGGER))
    return lines


async def forward_event(ctx: Context, event: dict[str, Any]) -> None:
    """``wait_for_finish``'s ``on_event`` for MCP: progress notifications and log lines."""
    if event.get("type") == EventType.PROGRESS:
        await report_progress(
            ctx,
            float(event.get("done") or 0),
            float(event["total"]) if event.get("total") is not None else None,
            str(event.get("message") or ""),
        )
    if event.get("type") != FINISHED and (line := event_line(event)) is not None:
        await send(ctx, line)
    await forward_tool_log(ctx, event)


async def forward_tool_log(ctx: Context, event: dict[str, Any]) -> None:
    """A downstream server's log message during a tool call (a ``tool_log`` event), at the
    server's level, its logger (else the tool's id) naming it."""
    if event.get("type") != TOOL_LOG:
        return
    level = event.get("level")
    if level not in LEVELS:
        return
    data = {"message": event.get("message") or "", "tool": event.get("tool")}
    await send(ctx, (level, data), logger=str(event.get("logger") or event.get("tool") or LOGGER))


async def send_outcome(ctx: Context, view: ExecutionView) -> None:
    """Log how the run ended and what it printed."""
    for line, logger in outcome_lines(view):
        await send(ctx, line, logger=logger)


def _drop_none(data: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in data.items() if v is not None}
