"""Trusted side of one execution: spawns the confined child, serves its tool calls, enforces limits, records the trace.

Public entry point: :func:`run_in_sandbox`. Nothing the child prints is parsed as a
trace; every event is recorded here. Every frame is checked by its validator in
:mod:`shared.sandbox.messages`; a malformed one ends the execution with
``protocol_error``, and the calling process never raises because of what a child sent.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from shared import tool_ids
from shared.errors import TOOL_CALL_ERRORS, ErrorType, SandboxError, error_dict
from shared.executions.status import ExecutionStatus
from shared.executions.trace import (
    Approval,
    CapabilityStart,
    EventCallback,
    Progress,
    TraceRecorder,
    TraceTruncated,
)
from shared.sandbox import fsplan, messages
from shared.sandbox.child import advice, wire
from shared.sandbox.launcher import Launcher, SandboxProcess, get_launcher
from shared.sandbox.limits import Language, SandboxLimits
from shared.sandbox.messages import ProtocolViolation
from shared.sandbox.outcome import ExecutionOutcome
from shared.sandbox.spans import ended, tool_call_span
from shared.sandbox.tools import (
    CURRENT_APPROVAL,
    CURRENT_CALL_ID,
    ApprovalBackend,
    ResourceBackend,
    ToolBackend,
    ToolResult,
    ToolSpec,
)
from shared.tools.arguments import check_tool_arguments
from shared.tools.catalog import ToolCatalog

log = logging.getLogger(__name__)

# The backend must give up by the call's deadline (its own `timeout` reply says where the
# time went); this backstop fires only for a backend that overruns it.
_BACKEND_GRACE_S = 0.5
_MAX_PROGRESS_EVENTS = 10_000  # beyond this progress reports are dropped, not an error
# Capability calls are cheap in-child function calls, so a loop can make millions.
# The stored trace keeps the first 2,000 (the same order as the default 1,000 tool
# calls); later ones are still validated but only counted, marked once as truncated.
_MAX_TRACED_CAPABILITY_CALLS = 2_000
# Calls started but not ended (gather fan-out). Bounds the bridge's memory per child.
_MAX_OPEN_CAPABILITY_CALLS = 100_000
_MAX_PROGRESS_MESSAGE = 1_000


@dataclass(frozen=True, slots=True)
class CapabilitySource:
    """An inline capability: agent code calls ``capabilities.<name>(**kwargs)`` to run ``code``."""

    id: str
    code: str


@dataclass(slots=True)
class _PendingCall:
    """A tool call (or resource read: no ``call_id``, not traced) sent to the backend and not answered yet."""

    call_id: str | None
    task: asyncio.Task[None]
    label: str  # the tool id, or the resource read's label
    sent: float = field(default_factory=time.monotonic)


@dataclass(slots=True)
class _OpenCapability:
    """A capability call the child started and has not ended; ``start`` is None past the trace cap."""

    start: CapabilityStart | None


async def run_in_sandbox(
    *,
    code: str,
    args: Mapping[str, Any] | None = None,
    tools: Mapping[str, ToolSpec] | None = None,
    known_tools: Collection[str] | None = None,
    awaiting_servers: Collection[str] = (),
    backend: ToolBackend | None = None,
    limits: SandboxLimits,
    on_event: EventCallback | None = None,
    capability_sources: Mapping[str, CapabilitySource] | None = None,
    launcher: Launcher | None = None,
    language: Language = "python",
    teardown: list[Callable[[], None]] | None = None,
) -> ExecutionOutcome:
    """Run ``code`` in a fresh confined child and return how it ended; never raises for child behaviour.

    ``tools`` are the only tool ids (``server:tool``) the code may call; ``backend``
    serves them. ``known_tools`` are every id that exists: a call outside ``tools`` is
    ``tool_not_allowed`` for one of them and ``unknown_tool`` (with the nearest names) for any
    other; without it every call outside ``tools`` is ``tool_not_allowed``. A call to a tool of
    one of ``awaiting_servers`` (whose tools nobody connected yet has listed) goes to
    ``backend``, which answers ``authorization_required`` with a connect link. Python-name
    spellings (``mcp.my_server.get_sum`` for ``my-server:get-sum``) resolve to the real id. ``capability_sources`` (name -> id + code) run inline in the child as
    ``capabilities.<name>(**kwargs)``. ``on_event`` receives tool_start/tool_end,
    capability_start/capability_end and progress events as they are recorded (sync or
    async callable); capability events arrive in small batches from the child.
    ``language`` ``"typescript"`` runs ``code`` in Deno inside the same confinement;
    its ``capability_sources`` must be TypeScript too.
    The child is killed before this returns. Waiting for its end, removing its cgroup and
    making the next child happen here too, unless ``teardown`` is given: that rest (blocking,
    for any thread) is then appended to it, for the caller to run once the outcome is out (a
    sandbox worker stores and announces it first).
    """
    started = time.monotonic()
    if len(code.encode()) > limits.code_bytes:
        return _failed(
            ErrorType.VALIDATION_ERROR, f"code exceeds {limits.code_bytes} bytes", started
        )
    try:
        args_json = wire.dumps_bounded(dict(args or {}), max_bytes=limits.tool_args_bytes)
    except wire.WireError as exc:
        return _failed(ErrorType.VALIDATION_ERROR, f"args: {exc}", started)
    caps = {
        name: {"id": src.id, "code": src.code} for name, src in (capability_sources or {}).items()
    }
    launcher = launcher or get_launcher()
    if language == "typescript" and fsplan.find_deno() is None:
        message = "the TypeScript runtime (the deno package) is not installed"
        return _failed(ErrorType.SANDBOX_UNAVAILABLE, message, started, layer="deno")
    try:
        proc = await launcher.spawn(limits, language)
    except SandboxError as exc:
        log.error("sandbox unavailable: %s", exc.message)
        return _failed(
            ErrorType.SANDBOX_UNAVAILABLE, exc.message, started, layer=exc.details.get("layer")
        )
    try:
        if language == "typescript" and proc.cgroup is None:
            # V8 needs RLIMIT_AS far above the memory limit: only the cgroup caps it. Fail
            # closed whatever AGENTCARDS_SANDBOX_DEGRADED_OK says.
            reason = proc.errors.get("cgroup", "not active")
            outcome = _failed(
                ErrorType.SANDBOX_UNAVAILABLE,
                f"TypeScript runs need the cgroup memory cap ({reason})",
                started,
                layers=["cgroup"],
            )
            outcome.layers = proc.layers
            return outcome
        missing = proc.missing_layers
        if missing:
            detail = "; ".join(f"{name}: {proc.errors.get(name, 'not active')}" for name in missing)
            if not limits.degraded_ok:
                log.error("sandbox refused to run: isolation layers missing (%s)", detail)
                outcome = _failed(
                    ErrorType.SANDBOX_UNAVAILABLE,
                    f"isolation layers unavailable: {', '.join(missing)} ({detail}); "
                    "fix the host or set AGENTCARDS_SANDBOX_DEGRADED_OK=true to accept the risk",
                    started,
                    layers=missing,
                )
                outcome.layers = proc.layers
                return outcome
            log.warning(
                "SANDBOX DEGRADED: running untrusted code WITHOUT %s (%s) because "
                "AGENTCARDS_SANDBOX_DEGRADED_OK is set",
                ", ".join(missing),
                detail,
            )
        cap_ids = {name: src["id"] for name, src in caps.items()}
        catalog = ToolCatalog.build(tools or {}, known_tools, awaiting_servers)
        schemas = {tid: spec.input_schema for tid, spec in (tools or {}).items()}
        trace = TraceRecorder(on_event)
        session = _Session(
            proc, limits, catalog, backend, trace, cap_ids, schemas=schemas, language=language
        )
        start = {"op": "start", "code": code, "capabilities": caps, "limits": _child_limits(limits)}
        return await session.run(wire.encode_with(start, {"args": args_json}), started)
    finally:
        proc.kill()  # nothing of the child runs, nor is read, after this
        rest = _released(proc, launcher, limits, language, in_teardown=teardown is not None)
        if teardown is None:
            await asyncio.to_thread(rest)
        else:
            teardown.append(rest)


def _released(
    proc: SandboxProcess,
    launcher: Launcher,
    limits: SandboxLimits,
    language: Language,
    *,
    in_teardown: bool = False,
) -> Callable[[], None]:
    """What is left of a killed child's teardown: make the next one (``in_teardown``: right
    there, the caller's teardown thread being off the run's path already; else in a thread
    of its own, not awaited), then wait for the killed one's end and remove its cgroup."""

    def rest() -> None:
        launcher.prepare(limits, language, wait=in_teardown)
        proc.reap()

    return rest


def _child_limits(limits: SandboxLimits) -> dict[str, int]:
    return {
        "stdout_bytes": limits.stdout_bytes,
        "result_bytes": limits.result_bytes,
        "tool_args_bytes": limits.tool_args_bytes,
        "max_tool_calls": limits.max_tool_calls,
        "cpu_time_s": limits.cpu_time_s,
    }


def _failed(kind: ErrorType, message: str, started: float, **extra: Any) -> ExecutionOutcome:
    return ExecutionOutcome(
        status=ExecutionStatus.FAILED,
        error=error_dict(kind, message, **extra),
        duration_ms=round((time.monotonic() - started) * 1000, 3),
    )


class _Session:
    """One execution's message loop; state lives here so ``run_in_sandbox`` stays linear."""

    def __init__(
        self,
        proc: SandboxProcess,
        limits: SandboxLimits,
        catalog: ToolCatalog,
        backend: ToolBackend | None,
        trace: TraceRecorder,
        capability_ids: Mapping[str, str],
        *,
        schemas: Mapping[str, Mapping[str, Any]] | None = None,
        language: Language = "python",
    ) -> None:
        self.language = language  # for advice worded in the code's own language
        self.proc, self.limits, self.catalog, self.backend, self.trace = (
            proc,
            limits,
            catalog,
            backend,
            trace,
        )
        self.capability_ids = dict(capability_ids)  # name -> id, the injected set
        self.schemas = dict(schemas or {})  # tool id -> its input schema, checked per call
        self.granted_capability_ids = frozenset(capability_ids.values())
        self.stdout: list[str] = []
        self.stdout_left = limits.stdout_bytes
        self.stdout_truncated = False
        self.calls = 0
        self.resource_reads = 0
        # Servers whose resources the code may read (those of its granted tools), by the name
        # as written in code (real, or its Python name: `mcp.my_server`) -> the real name.
        self.servers: dict[str, str] = {}
        for tool in sorted(catalog.granted):
            if tool_ids.is_tool_id(tool):
                real = tool_ids.parse(tool).server
                self.servers.setdefault(real, real)
                self.servers.setdefault(tool_ids.python_name(real), real)
        self.progress_events = 0
        self.pending: dict[int, _PendingCall] = {}  # child's call id -> the call
        self.deadline_wall = 0.0
        self.started_wall = 0.0
        # The run's wall-clock timer, moved on by the time calls waited for approval (up to
        # ``limits.approval_wait_cap_s`` in all): a paused run does not spend its limit.
        self._wall: asyncio.Timeout | None = None
        self._wall_base = 0.0  # the timer's first deadline (loop time)
        self.approval_waited = 0.0
        self.capability_calls = 0
        self.capability_seq = 0
        self.capabilities_open: dict[int, _OpenCapability] = {}  # child's seq -> the call

    async def run(self, start_frame: bytes, started: float) -> ExecutionOutcome:
        """Send ``start`` and serve the child until done, death, timeout or a protocol violation."""
        outcome = ExecutionOutcome(status=ExecutionStatus.FAILED, layers=self.proc.layers)
        self.started_wall = time.time()
        self.deadline_wall = self.started_wall + self.limits.wall_time_s
        self.proc.writer.write(start_frame)
        try:
            async with asyncio.timeout(self.limits.wall_time_s) as wall:
                self._wall, self._wall_base = wall, wall.when() or 0.0
                done = await self._loop()
            if done is None:
                outcome.error = self._classify_death()
            else:
                self._apply_done(done, outcome)
        except TimeoutError:
            outcome.status = ExecutionStatus.TIMEOUT
            outcome.error = error_dict(
                ErrorType.TIMEOUT,
                advice.wall_time_exceeded(
                    self.limits.wall_time_s, self.limits.max_wall_time_s, language=self.language
                ),
                details=self._waiting_on(),
            )
        except (wire.WireError, ProtocolViolation) as exc:
            outcome.status = ExecutionStatus.FAILED
            outcome.error = error_dict(
                ErrorType.PROTOCOL_ERROR, f"malformed message from the sandbox: {exc}"
            )
        except (ConnectionError, OSError) as exc:
            outcome.error = (
                self._classify_death()
                if self._died()
                else error_dict(ErrorType.PROTOCOL_ERROR, f"channel to the sandbox failed: {exc}")
            )
        self._cancel_pending()
        self._close_capabilities(outcome.error)
        await self.trace.flush()
        outcome.stdout = "".join(self.stdout)
        outcome.stdout_truncated = outcome.stdout_truncated or self.stdout_truncated
        outcome.trace = self.trace.events
        outcome.tool_calls = self.calls
        outcome.resource_reads = self.resource_reads
        outcome.duration_ms = round((time.monotonic() - started) * 1000, 3)
        return outcome

    def _waiting_on(self) -> dict[str, Any] | None:
        """What the code was still waiting for when its time ran out (the calls not answered,
        oldest first, with how long each waited): where a timed-out run's time went."""
        if not self.pending:
            return None
        now = time.monotonic()
        calls = sorted(self.pending.values(), key=lambda p: p.sent)
        return {
            "waiting_on": [
                {"call_id": p.call_id, "tool": p.label, "waited_s": round(now - p.sent, 3)}
                for p in calls
            ]
        }

    async def _loop(self) -> messages.DoneMessage | None:
        while True:
            frame = await wire.read_frame(self.proc.reader, self.limits.frame_bytes)
            if frame is None:
                return None
            match messages.parse(frame):
                case messages.DoneMessage() as done:
                    return done
                case messages.ToolCallMessage() as call:
                    self._on_tool_call(call)
                case messages.ResourceReadMessage() as read:
                    self._on_resource_read(read)
                case messages.CapabilityEventsMessage() as events:
                    self._on_capability_events(events)
                case messages.StdoutMessage() as stdout:
                    self._on_stdout(stdout)
                case messages.ProgressMessage() as progress:
                    self._on_progress(progress)

    def _on_stdout(self, message: messages.StdoutMessage) -> None:
        data = message.data
        raw = data.encode("utf-8", "replace")
        if len(raw) > self.stdout_left:
            raw = raw[: self.stdout_left]
            data = raw.decode("utf-8", "ignore")
            self.stdout_truncated = True
        self.stdout_left -= len(raw)
        if data:
            self.stdout.append(data)

    def _on_progress(self, message: messages.ProgressMessage) -> None:
        self.progress_events += 1
        if self.progress_events <= _MAX_PROGRESS_EVENTS:
            text = message.message[:_MAX_PROGRESS_MESSAGE]
            self.trace.record(Progress(text, message.done, message.total, time.time()))

    def _on_tool_call(self, message: messages.ToolCallMessage) -> None:
        cid, tool, args, parent = message.id, message.tool, message.args, message.parent
        if cid in self.pending:
            raise ProtocolViolation("tool_call needs a fresh integer id")
        if parent is not None and parent not in self.granted_capability_ids:
            raise ProtocolViolation("tool_call parent must be null or a granted capability id")
        self.calls += 1
        call_id = f"call-{self.calls}"
        tool, refusal = self._refusal(tool, args)
        self.trace.tool_start(call_id, tool, parent)
        if refusal is not None:
            self.trace.tool_end(call_id, refusal)
            self._reply_error(cid, tool, refusal)
            return
        task = asyncio.create_task(self._invoke(cid, call_id, tool, args))
        self.pending[cid] = _PendingCall(call_id, task, tool)

    def _on_capability_events(self, message: messages.CapabilityEventsMessage) -> None:
        for event in message.events:
            if isinstance(event, messages.CapabilityStartMessage):
                self._on_capability_start(event)
            else:
                self._on_capability_end(event)

    def _on_capability_start(self, event: messages.CapabilityStartMessage) -> None:
        # The child can only mislabel its own trace; the ids it names must be granted ones.
        if event.seq <= self.capability_seq:
            raise ProtocolViolation("capability start needs a fresh increasing integer seq")
        if event.name not in self.capability_ids:
            raise ProtocolViolation("capability start names a capability not granted")
        if event.parent is not None and event.parent not in self.capability_ids:
            raise ProtocolViolation("capability parent must be null or a granted capability")
        if len(self.capabilities_open) >= _MAX_OPEN_CAPABILITY_CALLS:
            raise ProtocolViolation("too many capability calls open at once")
        self.capability_seq = event.seq
        self.capability_calls += 1
        start = None
        if self.capability_calls <= _MAX_TRACED_CAPABILITY_CALLS:
            start = CapabilityStart(
                call_id=f"cap-call-{self.capability_calls}",
                capability_id=self.capability_ids[event.name],
                name=event.name,
                parent=None if event.parent is None else self.capability_ids[event.parent],
                ts=self._clamp_ts(event.ts_us),
            )
            self.trace.record(start)
        elif self.capability_calls == _MAX_TRACED_CAPABILITY_CALLS + 1:
            limit = _MAX_TRACED_CAPABILITY_CALLS
            self.trace.record(TraceTruncated("capability_calls", limit, time.time()))
        self.capabilities_open[event.seq] = _OpenCapability(start)

    def _on_capability_end(self, event: messages.CapabilityEndMessage) -> None:
        opened = self.capabilities_open.pop(event.seq, None)
        if opened is None:
            raise ProtocolViolation("capability end for a call that is not open")
        start = opened.start
        if start is not None:
            duration_ms = max(event.duration_us, 0.0) / 1000
            end_ts, now = start.ts + duration_ms / 1000, time.time()
            if end_ts > now:  # a lying child: its call cannot have ended in the future
                end_ts, duration_ms = now, (now - start.ts) * 1000
            self.trace.end(start, ts=end_ts, duration_ms=duration_ms, error=event.error)

    def _clamp_ts(self, ts_us: float) -> float:
        """The child's epoch-µs timestamp as seconds, kept inside this execution's span."""
        return min(max(ts_us / 1e6, self.started_wall), time.time())

    def _close_capabilities(self, err: dict[str, Any] | None) -> None:
        """Calls the child never reported ending (killed, timed out, or left running) end with the run."""
        kind = err["type"] if err else ErrorType.RUNTIME_ERROR
        now = time.time()
        for opened in self.capabilities_open.values():
            if opened.start is not None:
                self.trace.end(
                    opened.start,
                    ts=now,
                    duration_ms=(now - opened.start.ts) * 1000,
                    error=error_dict(kind, "the execution ended before the capability returned"),
                )
        self.capabilities_open.clear()

    def _refusal(self, requested: str, args: dict[str, Any]) -> tuple[str, dict[str, Any] | None]:
        """The real tool id the child means, and why the call may not go ahead (None: it may)."""
        if self.calls > self.limits.max_tool_calls:
            return requested, error_dict(
                ErrorType.TOOL_CALL_LIMIT, f"more than {self.limits.max_tool_calls} tool calls"
            )
        tool, refusal = self.catalog.resolve(requested)
        if refusal is None and self.backend is None:
            refusal = error_dict(
                ErrorType.TOOL_NOT_ALLOWED, f"tool {tool!r} is not granted to this execution"
            )
        if refusal is not None:
            return tool, refusal
        return tool, argument_refusal(tool, self.schemas.get(tool), args, limits=self.limits)

    async def _invoke(self, cid: int, call_id: str, tool: str, args: dict[str, Any]) -> None:
        backend = self.backend
        assert backend is not None
        CURRENT_CALL_ID.set(call_id)  # this task's own context: the backend names the call
        with tool_call_span(tool, call_id, args) as span:
            err = await self._serve(
                cid, call_id, tool, lambda deadline: backend.call(tool, args, deadline)
            )
            ended(span, err)

    def _on_resource_read(self, message: messages.ResourceReadMessage) -> None:
        cid, written, uri = message.id, message.server, message.uri
        server = self.servers.get(written, written)
        if cid in self.pending:
            raise ProtocolViolation("resource_read needs a fresh integer id")
        self.resource_reads += 1
        label = f"{server[:64]}.read_resource"
        backend = self.backend
        refusal: dict[str, Any] | None = None
        if self.resource_reads > self.limits.max_tool_calls:
            refusal = error_dict(
                ErrorType.TOOL_CALL_LIMIT,
                f"more than {self.limits.max_tool_calls} resource reads",
            )
        elif server not in self.servers:
            refusal = error_dict(
                ErrorType.TOOL_NOT_ALLOWED,
                f"reading resources of server {server[:64]!r} needs one of its tools in this "
                "execution's tool scope",
            )
        elif not isinstance(backend, ResourceBackend):
            refusal = error_dict(
                ErrorType.TOOL_NOT_ALLOWED, "this sandbox's tool backend cannot read resources"
            )
        if refusal is not None:
            self._reply_error(cid, label, refusal)
            return
        assert isinstance(backend, ResourceBackend)
        task = asyncio.create_task(
            self._serve(cid, None, label, lambda d: backend.read_resource(server, uri, d))
        )
        self.pending[cid] = _PendingCall(None, task, label)

    async def _serve(
        self,
        cid: int,
        call_id: str | None,
        label: str,
        request: Callable[[float], Awaitable[ToolResult]],
    ) -> dict[str, Any] | None:
        """Run one backend request under the call deadline and answer the child (and the trace
        when ``call_id``); returns its error (None: it succeeded)."""
        result = await self._timed(label, request)
        asked = False  # the trace's one `pending` event, however often the wait is renewed
        while call_id is not None and _paused(result) and isinstance(self.backend, ApprovalBackend):
            result = await self._after_approval(call_id, label, result, request, asked=asked)
            asked = True
        self.pending.pop(cid, None)
        if not isinstance(result, ToolResult):
            result = ToolResult.failure("backend returned an invalid result")
        err, value_json = served(result, limits=self.limits)
        if call_id is not None:
            self.trace.tool_end(call_id, err)
        if err is not None:
            self._reply_error(cid, label, err)
            return err
        head = {"op": "tool_result", "id": cid, "ok": True}
        self.proc.writer.write(wire.encode_with(head, {"value": value_json}))
        return None

    async def _timed(
        self, label: str, request: Callable[[float], Awaitable[ToolResult]]
    ) -> ToolResult:
        """One backend request under the call deadline; a failure as a result, never raised."""
        deadline = min(self.deadline_wall, time.time() + self.limits.tool_call_timeout_s)
        try:
            async with asyncio.timeout(max(0.0, deadline - time.time()) + _BACKEND_GRACE_S):
                result = await request(deadline)
        except TimeoutError:
            result = ToolResult.failure(f"{label} timed out", ErrorType.TIMEOUT)
        except Exception as exc:  # a broken backend must not take the bridge down
            log.exception("tool backend failed for %s", label)
            return ToolResult.failure(f"backend failure: {type(exc).__name__}")
        timed_out = result.error is not None and result.error.get("type") == ErrorType.TIMEOUT
        at_wall = deadline >= self.deadline_wall and time.time() >= deadline - _BACKEND_GRACE_S
        if timed_out and at_wall:
            # Its time ran out with the run's, the same instant: the wall ends the run (a
            # `timeout` naming this call as what it waited on; this task is cancelled then).
            # Answering the child first would race it and leave the run's error without it.
            await asyncio.sleep(max(0.0, self.deadline_wall - time.time()) + _BACKEND_GRACE_S)
        return result

    async def _after_approval(
        self,
        call_id: str,
        label: str,
        paused: ToolResult,
        request: Callable[[float], Awaitable[ToolResult]],
        *,
        asked: bool,
    ) -> ToolResult:
        """Wait (holding no CPU) for the answer to a paused call, then send it again naming
        its approval: the toolhost runs it if approved (once) or says why not. ``asked``: the
        trace already has the call's ``pending`` event (this is a renewed wait)."""
        backend = self.backend
        assert isinstance(backend, ApprovalBackend) and paused.error is not None
        approval = paused.error["approval"]
        approval_id, until = str(approval["call_id"]), float(approval["expires_at"]) + 0.5
        if not asked:
            self.trace.record(Approval(call_id, label, "pending", None, None, time.time()))
        began = time.time()
        self._move_wall(until - began)
        try:
            answer = await backend.await_answer(approval_id, until)
        finally:
            self._settle_wall(time.time() - began)
        CURRENT_APPROVAL.set(approval_id)
        result = await self._timed(label, request)
        kind = (result.error or {}).get("type")
        status = {
            None: "approved",
            ErrorType.APPROVAL_DENIED: "denied",
            ErrorType.APPROVAL_TIMEOUT: "expired",
            ErrorType.APPROVAL_REQUIRED: "pending",
        }.get(kind, "approved")
        if status == "pending":  # answered on a clock ahead of the database's: look again soon
            await asyncio.sleep(1.0)
        else:
            answer = answer or (result.error or {}).get("approval") or {}
            by, reason = answer.get("by"), answer.get("reason")
            self.trace.record(Approval(call_id, label, status, by, reason, time.time()))
        return result

    def _move_wall(self, span: float) -> None:
        """Push the wall-clock timer past a wait of ``span`` seconds, within what is left of
        the cap (beyond it, the wait counts)."""
        extra = self.approval_waited + min(
            span, max(0.0, self.limits.approval_wait_cap_s - self.approval_waited)
        )
        if self._wall is not None:
            self._wall.reschedule(max(self._wall.when() or 0.0, self._wall_base + extra))
        self.deadline_wall = max(
            self.deadline_wall, self.started_wall + self.limits.wall_time_s + extra
        )

    def _settle_wall(self, waited: float) -> None:
        """The wall-clock timer as far past its first deadline as the time actually waited."""
        self.approval_waited = min(self.limits.approval_wait_cap_s, self.approval_waited + waited)
        if self._wall is not None:
            self._wall.reschedule(self._wall_base + self.approval_waited)
        self.deadline_wall = self.started_wall + self.limits.wall_time_s + self.approval_waited

    def _reply_error(self, cid: int, tool: str, err: dict[str, Any]) -> None:
        self.proc.writer.write(
            wire.encode({"op": "tool_result", "id": cid, "ok": False, "tool": tool, "error": err})
        )

    def _apply_done(self, done: messages.DoneMessage, outcome: ExecutionOutcome) -> None:
        outcome.stdout_truncated = done.stdout_truncated
        if done.ok:
            outcome.status = ExecutionStatus.SUCCEEDED
            outcome.result = done.result
        else:
            outcome.status = ExecutionStatus.FAILED
            outcome.error = done.error

    def _died(self) -> bool:
        return self.proc.reader.at_eof()

    def _classify_death(self) -> dict[str, Any]:
        """The child vanished without ``done``: say which limit killed it if we can tell."""
        cg = self.proc.cgroup
        if cg is not None and cg.memory_exceeded():
            return error_dict(ErrorType.MEMORY_LIMIT, advice.memory_exceeded(killed=True))
        cpu = cg.cpu_seconds() if cg is not None else None
        if cpu is not None and cpu >= self.limits.cpu_time_s * 0.9:
            return error_dict(ErrorType.CPU_LIMIT, advice.cpu_time_exceeded(self.limits.cpu_time_s))
        return error_dict(ErrorType.RUNTIME_ERROR, "the sandbox process exited without a result")

    def _cancel_pending(self) -> None:
        # The request already went out: the tool may well have run (its reply is what
        # is missing), so the trace must not claim it did not. Never replayed.
        for call in self.pending.values():
            call.task.cancel()
            if call.call_id is not None:
                unknown = error_dict(
                    ErrorType.LOST,
                    "the execution ended before this call's reply arrived; "
                    "the tool may have run (not undone, not retried)",
                )
                self.trace.tool_end(call.call_id, unknown)
        self.pending.clear()


def argument_refusal(
    tool: str, schema: Mapping[str, Any] | None, args: dict[str, Any], *, limits: SandboxLimits
) -> dict[str, Any] | None:
    """Why a call's arguments may not go to ``tool`` (too large, not fitting its schema), or
    None. Checked before the RPC: the caller gets the names (not the server's raw -32602)
    and a wrong call never costs a round trip to the toolhost."""
    try:
        wire.check_value(args, max_bytes=limits.tool_args_bytes)
    except wire.WireError as exc:
        return error_dict(ErrorType.TOOL_ARGS_TOO_LARGE, f"arguments to {tool}: {exc}")
    return check_tool_arguments(tool, schema, args)


def served(result: ToolResult, *, limits: SandboxLimits) -> tuple[dict[str, Any] | None, str]:
    """A backend's result as the caller gets it: its error (None: it succeeded), else its
    value as JSON within the result limit (over it, or not JSON: an error)."""
    if not result.ok:
        return clean_error(result.error), ""
    try:
        return None, wire.dumps_bounded(result.value, max_bytes=limits.tool_result_bytes)
    except wire.WireError as exc:
        return tool_result_refusal(exc), ""


def tool_result_refusal(exc: wire.WireError) -> dict[str, Any]:
    """Why a tool result cannot reach the code: over a sandbox limit (``output_limit``), or not JSON.

    Size and depth are the sandbox's limits, not the tool failing: ``output_limit``, with
    the setting to raise for size. A value that is not JSON at all is the tool's fault.
    """
    if isinstance(exc, wire.ValueOverBudget):
        return error_dict(ErrorType.OUTPUT_LIMIT, advice.tool_result_too_large(exc.max_bytes))
    if isinstance(exc, (wire.ValueTooLarge, wire.ValueTooDeep)):
        return error_dict(ErrorType.OUTPUT_LIMIT, f"its result is refused: {exc}")
    return error_dict(ErrorType.TOOL_ERROR, f"its result is not JSON: {exc}")


# The refusals that name the policies behind them (agent code's ``e.policies``).
_WITH_POLICIES = {ErrorType.POLICY_DENIED, ErrorType.APPROVAL_DENIED, ErrorType.APPROVAL_TIMEOUT}


def _paused(result: ToolResult) -> bool:
    """Whether the call waits for approval (the toolhost sent the approval's id and expiry)."""
    err = result.error or {}
    return err.get("type") == ErrorType.APPROVAL_REQUIRED and isinstance(err.get("approval"), dict)


def clean_error(err: dict[str, Any] | None) -> dict[str, Any]:
    """The backend's error as the child and the trace get it: its type kept when it is a tool-call type."""
    if not isinstance(err, dict):
        return error_dict(ErrorType.TOOL_ERROR, "tool call failed")
    kind = err.get("type")
    kind = kind if isinstance(kind, str) and kind in TOOL_CALL_ERRORS else ErrorType.TOOL_ERROR
    cleaned = error_dict(kind, str(err.get("message", "tool call failed"))[:2000])
    policies = err.get("policies")
    if kind in _WITH_POLICIES and isinstance(policies, list):
        cleaned["policies"] = [str(p)[:200] for p in policies[:20]]
    url = err.get("url")
    if kind == ErrorType.AUTHORIZATION_REQUIRED and isinstance(url, str):
        cleaned["url"] = url[:2000]
    return cleaned
