"""Runs one execution inside the confined child: hello, start, agent code, multiplexed tool calls, done."""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import io
import json
import os
import signal
import socket
import sys
from typing import Any

from shared.errors import ErrorType, error_dict
from shared.sandbox.child import advice, api, deno_child, helpers, inline, result, usercode, wire

_START_FRAME_MAX = 64 << 20  # from the trusted bridge, which already capped code/args
_STDOUT_FRAME = 64 << 10


class CpuLimitExceeded(BaseException):
    """Raised from SIGXCPU (soft RLIMIT_CPU); a BaseException so ``except Exception`` cannot swallow it."""


class _Capture(io.TextIOBase):
    """``sys.stdout``/``sys.stderr`` for agent code: capped, streamed to the bridge in chunks."""

    def __init__(self, session: Session, cap: int) -> None:
        self._session = session
        self._left = cap
        self.truncated = False
        self._pending: list[str] = []
        self._pending_bytes = 0

    def writable(self) -> bool:
        return True

    def write(self, s: str) -> int:
        if not isinstance(s, str):
            raise TypeError(f"write() argument must be str, not {type(s).__name__}")
        if self._left <= 0:
            if s:
                self.truncated = True
            return len(s)
        chunk = s[: self._left]
        raw = chunk.encode("utf-8", "replace")
        if len(raw) > self._left:
            raw = raw[: self._left]
            chunk = raw.decode("utf-8", "ignore")
        if len(chunk) < len(s):
            self.truncated = True
        self._left -= len(raw)
        self._pending.append(chunk)
        self._pending_bytes += len(raw)
        if self._pending_bytes >= _STDOUT_FRAME:
            self.drain_pending()
        return len(s)

    def drain_pending(self) -> None:
        """Send buffered output as stdout frames (before tool calls, progress and done, to keep order)."""
        if not self._pending:
            return
        text = "".join(self._pending)
        self._pending.clear()
        self._pending_bytes = 0
        for i in range(0, len(text), _STDOUT_FRAME):
            self._session.send({"op": "stdout", "data": text[i : i + _STDOUT_FRAME]})


class Session(api.Caller):
    """Child end of the channel: sends calls, routes replies by id so gather() runs calls concurrently."""

    def __init__(self, writer: asyncio.StreamWriter, start: dict[str, Any]) -> None:
        self._writer = writer
        limits = start.get("limits", {})
        self.tool_args_bytes: int = limits.get("tool_args_bytes", 1 << 20)
        self.max_tool_calls: int = limits.get("max_tool_calls", 1000)
        self.result_bytes: int = limits.get("result_bytes", 4 << 20)
        self.cpu_time_s: int | None = limits.get("cpu_time_s")
        self.capture = _Capture(self, limits.get("stdout_bytes", 1 << 20))
        self.sources: dict[str, list[str]] = {}
        self.inline = inline.InlineCapabilities(
            start.get("capabilities") or {}, self.send, self.sources
        )
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self._next_id = 0
        # Shared by the main body and every capability call (each gets its own dict copy).
        self.base_globals: dict[str, Any] = {
            **helpers.helper_globals(),
            "__name__": "__main__",
            "__builtins__": builtins,
            "mcp": api.Mcp(self),
            "capabilities": api.Capabilities(self),
            "progress": api.make_progress(self),
            # The description tells agents to catch it by name: `except ToolCallError as e`.
            "ToolCallError": api.ToolCallError,
        }

    def send(self, msg: dict[str, Any]) -> None:
        self._writer.write(wire.encode(msg))

    async def read_resource(self, server: str, uri: str) -> Any:
        label = f"{server}.read_resource"
        if self._next_id >= self.max_tool_calls:
            raise api.ToolCallError(
                "tool_call_limit", f"more than {self.max_tool_calls} tool calls", label
            )
        call_id = self._next_id + 1
        self._next_id = call_id
        return await self._request(
            call_id,
            wire.encode({"op": "resource_read", "id": call_id, "server": server, "uri": uri}),
        )

    async def call_tool(self, tool: str, kwargs: dict[str, Any]) -> Any:
        if self._next_id >= self.max_tool_calls:
            raise api.ToolCallError(
                "tool_call_limit", f"more than {self.max_tool_calls} tool calls", tool
            )
        try:
            args_json = json.dumps(
                kwargs, separators=(",", ":"), ensure_ascii=False, allow_nan=False
            )
        except (TypeError, ValueError, RecursionError) as exc:
            raise TypeError(f"arguments to {tool} must be JSON-serialisable: {exc}") from None
        if wire.utf8_size(args_json) > self.tool_args_bytes:
            raise api.ToolCallError(
                "tool_args_too_large", f"arguments exceed {self.tool_args_bytes} bytes", tool
            )
        call_id = self._next_id + 1
        head = {"op": "tool_call", "id": call_id, "tool": tool, "parent": self.inline.parent_id()}
        frame = wire.encode_with(head, {"args": args_json})
        self._next_id = call_id
        return await self._request(call_id, frame)

    async def _request(self, call_id: int, frame: bytes) -> Any:
        """Send a frame the bridge answers with ``tool_result`` ``call_id`` and wait for it."""
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[call_id] = future
        self.capture.drain_pending()
        self.inline.flush()
        self._writer.write(frame)
        try:
            return await future
        finally:
            self._pending.pop(call_id, None)

    def run_capability(self, name: str, kwargs: dict[str, Any]) -> Any:
        return self.inline.run(name, kwargs, self.base_globals)

    def capability_names(self) -> list[str]:
        return self.inline.names()

    def progress(self, message: str, done: float | None, total: float | None) -> None:
        self.capture.drain_pending()
        self.inline.flush()
        self.send({"op": "progress", "message": message, "done": done, "total": total})

    def namespace(self, args: Any) -> dict[str, Any]:
        """Fresh globals for the main body."""
        namespace = dict(self.base_globals)
        namespace["args"] = api.wrap_args(args if isinstance(args, dict) else {})
        return namespace

    async def read_replies(self, reader: asyncio.StreamReader) -> None:
        """Route tool_result frames to their waiting calls; the bridge going away ends us."""
        try:
            while True:
                frame = await wire.read_frame(reader, _START_FRAME_MAX)
                if frame is None:
                    os._exit(0)
                future = self._pending.get(frame.get("id"))  # type: ignore[arg-type]
                if frame.get("op") != "tool_result" or future is None or future.done():
                    continue
                if frame.get("ok"):
                    future.set_result(frame.get("value"))
                else:
                    err = frame.get("error") or {}
                    policies, url = err.get("policies"), err.get("url")
                    future.set_exception(
                        api.ToolCallError(
                            str(err.get("type", ErrorType.TOOL_ERROR)),
                            str(err.get("message", "tool call failed")),
                            str(frame.get("tool", "?")),
                            policies if isinstance(policies, list) else None,
                            url if isinstance(url, str) else None,
                        )
                    )
        except wire.WireError:
            os._exit(0)


def _on_sigxcpu(signum: int, frame: Any) -> None:
    raise CpuLimitExceeded("CPU time limit exceeded")


async def _run(chan_fd: int) -> None:
    # The loop and the channel's streams are made while the child waits as a spare, not
    # after its run is asked for.
    sock = socket.socket(fileno=chan_fd)
    reader, writer = await asyncio.open_unix_connection(sock=sock, limit=1 << 20)
    start = await wire.read_frame(reader, _START_FRAME_MAX)
    if start is None or not isinstance(start.get("code"), str):
        os._exit(0)
    session = Session(writer, start)
    replies = asyncio.create_task(session.read_replies(reader))
    session.sources[usercode.MAIN_FILENAME] = start["code"].splitlines()
    signal.signal(signal.SIGXCPU, _on_sigxcpu)
    sys.stdout = sys.stderr = session.capture
    done, result_json = await _execute(start, session)
    signal.signal(signal.SIGXCPU, signal.SIG_DFL)
    session.capture.drain_pending()
    session.inline.flush()
    done["stdout_truncated"] = session.capture.truncated
    writer.write(wire.encode_with(done, {"result": result_json}))
    # drain() is flow control: it returns once the buffer is under the low-water mark, not
    # empty, and serve() then _exits. A zero limit makes it wait until every byte is sent.
    writer.transport.set_write_buffer_limits(high=0)
    await writer.drain()
    replies.cancel()


async def _execute(start: dict[str, Any], session: Session) -> tuple[dict[str, Any], str]:
    """Compile and run the body; the ``done`` frame and the result's JSON text ("null" on failure)."""
    try:
        try:
            func = usercode.compile_body(start["code"], session.namespace(start.get("args")))
        except SyntaxError as exc:  # IndentationError too; a SyntaxError the code raises is not
            return {"op": "done", "ok": False, "error": usercode.syntax_error(exc)}, "null"
        value = await func()
        # Strict: a set or an object is refused by name, never stringified (result.py).
        result_json = result.encode_result(value, max_bytes=session.result_bytes)
        return {"op": "done", "ok": True}, result_json
    except result.ResultNotJson as exc:
        details = {"path": exc.path, "python_type": exc.python_type}
        return _error(ErrorType.RESULT_NOT_JSON, str(exc)[:4000], details=details), "null"
    except result.ResultTooLarge as exc:
        return _error(ErrorType.OUTPUT_LIMIT, str(exc)[:4000]), "null"
    except api.ToolCallError as exc:
        # The call's own type (timeout, unknown_tool, ...); the bridge checks it is one a child may claim.
        return _error(exc.type, f"{exc.tool}: {exc.message}"[:4000], exc, session), "null"
    except api.CapabilityError as exc:
        return _error(exc.type, str(exc)[:4000], exc, session), "null"
    except MemoryError as exc:
        return _error(ErrorType.MEMORY_LIMIT, advice.memory_exceeded(), exc, session), "null"
    except CpuLimitExceeded as exc:
        message = advice.cpu_time_exceeded(session.cpu_time_s)
        return _error(ErrorType.CPU_LIMIT, message, exc, session), "null"
    except BaseException as exc:  # agent code may raise anything, SystemExit included
        message = usercode.exception_message(exc)
        hint = advice.network_hint(exc)  # a refused socket or DNS lookup: say what to use instead
        if hint is not None:
            message = f"{message}. {hint}"
        return _error(ErrorType.RUNTIME_ERROR, message, exc, session), "null"


def _error(
    kind: str,
    message: str,
    exc: BaseException | None = None,
    session: Session | None = None,
    details: dict[str, Any] | None = None,
) -> dict[str, Any]:
    tb = None
    if exc is not None and session is not None:
        with contextlib.suppress(Exception):
            tb = usercode.format_user_traceback(exc, session.sources)
    error = error_dict(kind, message, traceback=tb, details=details)
    return {"op": "done", "ok": False, "error": error}


def serve(
    chan_fd: int, layers: dict[str, Any], errors: dict[str, str], cfg: dict[str, Any]
) -> None:
    """Say hello (the bridge reads our host pid from the socket credentials), wait for start, run, exit.

    A TypeScript child (``cfg`` comes from the trusted launcher, not the start frame)
    starts Deno right after hello, which then reads ``start`` and runs the code.
    """
    hello = {"op": "hello", "layers": layers, "errors": errors}
    wire.write_all(chan_fd, wire.encode(hello))
    # The launcher says when we are in our cgroup: nothing more is made before that.
    placed = wire.read_frame_blocking(chan_fd, 1 << 10)
    if placed is None or placed.get("op") != "placed":
        os._exit(0)
    if cfg.get("language") == "typescript":
        if placed.get("cgroup") is not True:  # Deno must be forked inside one
            os._exit(0)
        deno_child.serve(chan_fd, cfg)  # Deno starts now and reads start itself: a warm spare
        os._exit(0)
    asyncio.run(_run(chan_fd))
    os._exit(0)
