"""The policy set a process decides with: loaded at start, reloaded on change, asked per call.

Every process that decides (each toolhost for tool calls, each gateway for submissions)
holds one ``PolicyEngine``. It reads ``AGENTCARDS_POLICY_FILE`` at start (a bad file stops
start-up: PolicyInvalid with file, line and reason), then looks at the file's stat at most
once per ``CHECK_EVERY_S`` on the decision path and reloads it when it changed; a reload
that fails keeps the last good set and logs why (``last_error``). ``agentcards policy
reload`` validates the file with the same code and asks every process to reload now.

No file configured: nothing is decided (every call allowed, as before policies existed).
A file configured: a call no policy permits is denied (Cedar's default deny).
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cedarpy

from shared.errors import PolicyInvalid
from shared.policy.facts import Action, Caller, action_uid, cedar_record
from shared.policy.source import ApprovalRule, PolicyFile, read_policy_file

log = logging.getLogger(__name__)

# How stale a process's policies may be after the file changed (one stat per interval).
CHECK_EVERY_S = 1.0
NO_POLICY_PERMITS = "no policy permits"


@dataclass(frozen=True, slots=True)
class Decision:
    """One decision: allowed or not, the ids of the policies that decided (a permit's when
    allowed, the forbids' when denied; none when nothing permits), and why, in words;
    ``approval``: an allowed call waits for a person first (a deciding permit asks)."""

    allowed: bool
    policies: tuple[str, ...]
    reason: str
    approval: ApprovalRule | None = None

    @property
    def label(self) -> str:
        """The metric label: ``allow`` or ``deny``."""
        return "allow" if self.allowed else "deny"


class PolicyEngine:
    """The process's policy set (None: no file configured) and its reloads; thread-safe."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.last_error: str | None = None
        self._lock = threading.Lock()
        self._stat: tuple[int, int, int] | None = None
        self._checked = 0.0
        self._file: PolicyFile | None = None
        if path is not None:
            self._stat = _stat(path)
            self._file = read_policy_file(path)  # PolicyInvalid stops start-up
            self._checked = time.monotonic()
            log.info("policy file %s: %d policies loaded", path, self._file.count)

    @property
    def configured(self) -> bool:
        """Whether a policy file decides (else everything is allowed)."""
        return self.path is not None

    @property
    def loaded(self) -> PolicyFile | None:
        """The set in force (the last good one)."""
        return self._file

    def reload(self) -> PolicyFile | None:
        """Read the file again now; PolicyInvalid when it is bad (the last good set stays)."""
        if self.path is None:
            return None
        with self._lock:
            stat = _stat(self.path)
            try:
                loaded = read_policy_file(self.path)
            except PolicyInvalid as exc:
                self._stat, self._checked = stat, time.monotonic()
                self.last_error = exc.message
                log.error(
                    "policy reload failed, the last good set stays in force: %s", exc.message,
                    extra={"event": "policy_reload_failed"},
                )  # fmt: skip
                raise
            self._file, self._stat, self._checked = loaded, stat, time.monotonic()
            self.last_error = None
        log.info(
            "policy file %s reloaded: %d policies (sha256 %s)",
            self.path, loaded.count, loaded.digest[:12],
            extra={"event": "policy_reloaded"},
        )  # fmt: skip
        return loaded

    def current(self) -> PolicyFile | None:
        """The set to decide with, reloaded first when the file changed since the last look."""
        if self.path is None:
            return None
        now = time.monotonic()
        if now - self._checked >= CHECK_EVERY_S:
            self._checked = now
            if _stat(self.path) != self._stat:
                with contextlib.suppress(PolicyInvalid):  # logged; the last good set decides
                    self.reload()
        return self._file

    def decide(
        self,
        *,
        action: Action,
        caller: Caller,
        resource: dict[str, Any],
        context: Mapping[str, Any],
        args: Mapping[str, Any] | None = None,
    ) -> Decision | None:
        """The decision for ``caller`` doing ``action`` on ``resource`` (an entity from
        ``shared.policy.facts``); None when no policy file is configured."""
        policies = self.current()
        if policies is None:
            return None
        request = {
            "principal": caller.uid(),
            "action": action_uid(action),
            "resource": resource["uid"],
            "context": {**context, "args": cedar_record(args or {})},
        }
        # No schema here: `args` is an open record the schema cannot declare; policies were
        # validated against the schema when loaded, and the entities are built by us.
        subset = policies.index.subset(str(action), resource["uid"])
        result = cedarpy.is_authorized(request, subset, [*caller.entities(), resource])
        engine_ids = tuple(result.diagnostics.reasons)
        reasons = tuple(policies.name_of(r) for r in engine_ids)
        if result.diagnostics.errors:
            log.debug("policy evaluation errors (those policies did not apply): %s",
                      result.diagnostics.errors)  # fmt: skip
        if result.allowed:
            approval = policies.approval_of(engine_ids)
            return Decision(True, reasons, "permitted by " + ", ".join(reasons), approval)
        if reasons:
            return Decision(False, reasons, "forbidden by " + ", ".join(reasons))
        return Decision(False, (), NO_POLICY_PERMITS)


def _stat(path: Path) -> tuple[int, int, int] | None:
    """What tells a changed file: inode, size, modification time (None: it is gone)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)
