"""``notifications/tasks`` (SEP-2663) on a 2026-07-28 ``subscriptions/listen`` stream: a
client that names tasks in its listen filter (``notifications.taskIds``) hears each one's
DetailedTask (as ``tasks/get`` would answer it) when the listen is acknowledged and again
whenever its status or its open questions change, until it ends (mcp/task_watch.py).

A server middleware of each endpoint with tasks, around whichever listen handler the
endpoint has (the SDK's, over its buses): naming tasks needs the extension declared
(``-32021`` otherwise, as SEP-2663 says); the acknowledgement names the tasks agreed to,
which are the caller's own on that endpoint (another's id, or an unknown one, is left out
of it, exactly alike); the task notifications go on the listen request's stream after the
acknowledgement, stamped with its subscription id, beside the events the handler sends.
The run's events come over Redis, so the replica serving the listen need not be the one
that made the task.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from typing import Any, Literal

import anyio
from mcp import types
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver.server import require_client_extension
from mcp.server.subscriptions import SUBSCRIPTION_ID_META_KEY
from mcp.shared.exceptions import MCPError

from services.gateway.mcp import task_watch, tasks

log = logging.getLogger(__name__)

METHOD = "notifications/tasks"
FILTER_KEY = "taskIds"
# Task ids one listen may name: each running one holds a Redis connection in a blocking pop
# (its questions) while the stream is open, out of the gateway's 1,000.
MAX_TASKS = 16


class TaskNotice(types.Notification[dict[str, Any], Literal["notifications/tasks"]]):
    """``notifications/tasks``: the DetailedTask, whole."""

    method: Literal["notifications/tasks"] = "notifications/tasks"


class TaskNotices:
    """The server middleware of one endpoint (``methods``: its task methods)."""

    def __init__(self, methods: tasks.TaskMethods) -> None:
        self._methods = methods

    async def __call__(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        asked = named_tasks(ctx)
        if asked is None:
            return await call_next(ctx)
        require_client_extension(ctx, tasks.EXTENSION_ID)
        found = []
        for task_id in dict.fromkeys(asked):  # each once, in the client's order
            try:
                found.append(await self._methods.find(ctx, task_id, extension=False))
            except MCPError as exc:  # unknown, or another's: not agreed to
                if exc.error.code != types.INVALID_PARAMS:
                    raise
        acked = anyio.Event()
        ids = [str(task["id"]) for task, _ in found]
        session = _Acknowledging(ctx.session, ids, acked)
        async with anyio.create_task_group() as group:
            for task, row in found:
                group.start_soon(self._follow, ctx, task, row, acked)
            result = await call_next(dataclasses.replace(ctx, session=session))  # type: ignore[arg-type]
            group.cancel_scope.cancel()  # the stream ended: no more notices
        return result

    async def _follow(
        self,
        ctx: ServerRequestContext[Any, Any],
        task: dict[str, Any],
        row: dict[str, Any],
        acked: anyio.Event,
    ) -> None:
        """The task's notices on the listen stream, from its acknowledgement to its end."""
        await acked.wait()
        meta = {SUBSCRIPTION_ID_META_KEY: ctx.request_id}
        state = self._methods.state()
        try:
            async with contextlib.aclosing(
                task_watch.changes(state, self._methods.read, task, row)
            ) as changes:
                async for _, detailed in changes:
                    notice = TaskNotice(params={**detailed, "_meta": meta})
                    # outside the SDK's notification union, as the extension's methods are
                    await ctx.session.send_notification(notice, related_request_id=ctx.request_id)  # type: ignore[arg-type]
        except Exception as exc:  # the stream or the store gone: the client polls, as it may
            log.info("task %s: notices on the listen stream ended: %r", task["id"], exc)


def named_tasks(ctx: ServerRequestContext[Any, Any]) -> list[str] | None:
    """The task ids a 2026-07-28 ``subscriptions/listen`` names (None: not such a listen);
    ``-32602`` for a ``taskIds`` that is not a short list of ids."""
    if ctx.method != "subscriptions/listen" or ctx.request_id is None:
        return None
    filters = (ctx.params or {}).get("notifications")
    named = filters.get(FILTER_KEY) if isinstance(filters, dict) else None
    if named is None:
        return None
    if (
        not isinstance(named, list)
        or len(named) > MAX_TASKS
        or not all(isinstance(i, str) and 0 < len(i) <= 200 for i in named)
    ):
        raise MCPError(
            code=types.INVALID_PARAMS,
            message=f"notifications.taskIds must be a list of at most {MAX_TASKS} task ids",
        )
    return list(named)


class _Acknowledging:
    """The listen request's session, whose acknowledgement also names the tasks agreed to
    (and lets their notices start, which must come after it)."""

    def __init__(self, session: Any, task_ids: list[str], acked: anyio.Event) -> None:
        self._session = session
        self._task_ids = task_ids
        self._acked = acked

    def __getattr__(self, name: str) -> Any:
        return getattr(self._session, name)

    async def send_notification(self, notification: Any, related_request_id: Any = None) -> None:
        if isinstance(notification, types.SubscriptionsAcknowledgedNotification):
            params = notification.params
            honored = params.notifications.model_dump(by_alias=True, exclude_none=True)
            agreed = types.SubscriptionFilter.model_validate(
                {**honored, FILTER_KEY: self._task_ids}
            )
            notification = types.SubscriptionsAcknowledgedNotification(
                params=params.model_copy(update={"notifications": agreed})
            )
            await self._session.send_notification(notification, related_request_id)
            self._acked.set()
            return
        await self._session.send_notification(notification, related_request_id)
