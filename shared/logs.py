"""One logging setup for every process: text by default, JSON lines with AGENTCARDS_LOG_FORMAT=json.

Each line about an execution or a tool call carries its ``execution_id``, ``tool_call_id`` and
``tenant_id``: they live in context variables set where the work is handled (a request, a
task, an RPC call), so every log call below that point gets them without passing them on.
An ``extra={...}`` field of the same name wins over the context (batch code naming one run).
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any

import orjson

from shared.telemetry import current_ids

CONTEXT_FIELDS = ("execution_id", "tool_call_id", "tenant_id")
# The current span's ids (shared.telemetry), so log lines join their trace.
TRACE_FIELDS = ("trace_id", "span_id")
_CONTEXT: dict[str, ContextVar[str | None]] = {
    name: ContextVar(f"agentcards_{name}", default=None) for name in CONTEXT_FIELDS
}
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def bind(**fields: object) -> None:
    """Set context fields for the rest of the current context (a task, a thread's run)."""
    for name, value in fields.items():
        _CONTEXT[name].set(None if value is None else str(value))


@contextmanager
def log_context(**fields: object) -> Iterator[None]:
    """Set context fields inside the block; the previous values come back after it."""
    tokens = [
        (_CONTEXT[name], _CONTEXT[name].set(None if value is None else str(value)))
        for name, value in fields.items()
    ]
    try:
        yield
    finally:
        for var, token in reversed(tokens):
            var.reset(token)


def current_context() -> dict[str, str]:
    """The context fields set now (unset ones left out)."""
    return {name: value for name, var in _CONTEXT.items() if (value := var.get()) is not None}


class ContextFilter(logging.Filter):
    """Copies the context fields onto each record that does not carry them already."""

    def filter(self, record: logging.LogRecord) -> bool:
        for name, value in current_context().items():
            if getattr(record, name, None) is None:
                setattr(record, name, value)
        if getattr(record, "trace_id", None) is None and (ids := current_ids()) is not None:
            record.trace_id, record.span_id = ids
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ts, level, logger, message, the context fields, exc."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name in (*CONTEXT_FIELDS, *TRACE_FIELDS):
            if (value := getattr(record, name, None)) is not None:
                line[name] = str(value)
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        elif record.exc_text:
            line["exc"] = record.exc_text
        return orjson.dumps(line, default=str).decode()


def log_handler(log_format: str) -> logging.Handler:
    """A stderr handler in the chosen format that adds the context fields."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        JsonFormatter() if log_format == "json" else logging.Formatter(TEXT_FORMAT)
    )
    handler.addFilter(ContextFilter())
    return handler


def _no_progress_bars() -> None:
    """Model loading draws tqdm bars on stderr: text between the JSON lines. Hugging Face
    libraries read the switch at import, or later through their own call."""
    os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
    hub = sys.modules.get("huggingface_hub.utils")
    if hub is not None:
        hub.disable_progress_bars()


def configure_logging(*, level: str | int, log_format: str) -> None:
    """Route every logger (ours, uvicorn's, Celery's) through one root handler."""
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(log_handler(log_format))
    root.setLevel(level.upper() if isinstance(level, str) else level)
    logging.captureWarnings(True)  # warnings.warn(...) becomes a line like the others
    if log_format == "json":
        _no_progress_bars()
    # Libraries that configure their own handlers would print text beside our lines.
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access", "celery", "celery.task"):
        logger = logging.getLogger(name)
        logger.handlers.clear()
        logger.propagate = True
