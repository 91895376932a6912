"""JSON log lines: one object per line, with the context ids of the work being handled."""

from __future__ import annotations

import asyncio
import io
import logging

import orjson

from shared.logs import JsonFormatter, bind, log_context, log_handler


def _capture() -> tuple[logging.Logger, io.StringIO]:
    stream = io.StringIO()
    handler = log_handler("json")
    handler.setStream(stream)  # type: ignore[attr-defined]
    logger = logging.getLogger("agentcards.test.json")
    logger.handlers = [handler]
    logger.propagate = False
    logger.setLevel(logging.INFO)
    return logger, stream


def _lines(stream: io.StringIO) -> list[dict[str, object]]:
    return [orjson.loads(line) for line in stream.getvalue().splitlines()]


def test_lines_carry_the_context_only_inside_it() -> None:
    logger, stream = _capture()
    with log_context(execution_id="e1", tenant_id="acme"):
        logger.info("running %s", "x")
        with log_context(tool_call_id="c1"):
            logger.warning("call")
    logger.info("after")
    first, second, third = _lines(stream)
    assert first["message"] == "running x" and first["level"] == "INFO"
    assert first["logger"] == "agentcards.test.json" and str(first["ts"]).endswith("+00:00")
    assert (first["execution_id"], first["tenant_id"]) == ("e1", "acme")
    assert "tool_call_id" not in first
    assert second["tool_call_id"] == "c1"
    assert not {"execution_id", "tenant_id", "tool_call_id"} & set(third)


def test_an_explicit_extra_wins_over_the_context() -> None:
    logger, stream = _capture()
    with log_context(execution_id="batch"):
        logger.info("one run", extra={"execution_id": "e7"})
    assert _lines(stream)[0]["execution_id"] == "e7"


def test_concurrent_tasks_keep_their_own_ids() -> None:
    logger, stream = _capture()

    async def call(execution_id: str) -> None:
        bind(execution_id=execution_id)
        await asyncio.sleep(0)
        logger.info("done")

    async def main() -> None:
        await asyncio.gather(call("a"), call("b"))

    asyncio.run(main())
    assert sorted(str(line["execution_id"]) for line in _lines(stream)) == ["a", "b"]


def test_exceptions_stay_on_one_line() -> None:
    formatter = JsonFormatter()
    try:
        raise ValueError("bad\nvalue")
    except ValueError:
        import sys

        record = logging.LogRecord("x", logging.ERROR, __file__, 1, "failed", (), sys.exc_info())
    line = formatter.format(record)
    assert "\n" not in line
    assert "ValueError: bad" in str(orjson.loads(line)["exc"])


def test_lines_inside_a_span_carry_its_trace_and_span_ids() -> None:
    from opentelemetry import trace
    from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

    logger, stream = _capture()
    context = SpanContext(
        trace_id=0x4BF92F3577B34DA6A3CE929D0E0E4736,
        span_id=0x00F067AA0BA902B7,
        is_remote=False,
        trace_flags=TraceFlags(TraceFlags.SAMPLED),
    )
    with trace.use_span(NonRecordingSpan(context)):
        logger.info("traced")
    logger.info("outside")
    inside, outside = _lines(stream)
    assert inside["trace_id"] == "4bf92f3577b34da6a3ce929d0e0e4736"
    assert inside["span_id"] == "00f067aa0ba902b7"
    assert not {"trace_id", "span_id"} & set(outside)
