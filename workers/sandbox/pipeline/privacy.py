"""Privacy (docs/privacy.md): what leaves a run toward its caller holds tokens, not values.

Inside the sandbox the code sees real values. On the way out, before anything is stored,
cached or announced, the ``privacy`` stage replaces detected personal data and secrets in
the outcome (result, error, stdout, trace) with the tenant's tokens, keeps the values in
the encrypted vault and records on the row which tokens the run produced (kind, tool) and
which tokens it was given that did not resolve. Events published during the run go
through ``event_out``. On the way in, ``Detokenizing`` gives a tool the real value of each
of the tenant's tokens in its arguments, right before the RPC call.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from shared.auth.grants import Grant
from shared.privacy.detect import Kind
from shared.privacy.tokens import Tokenizer, tokens_in
from shared.sandbox import privacy as private
from shared.sandbox.tools import ToolBackend, ToolResult
from workers.sandbox import clients
from workers.sandbox.pipeline.context import RunContext
from workers.sandbox.retry import with_db_retry

log = logging.getLogger(__name__)


def enabled(ctx: RunContext) -> bool:
    """Whether this run's output is tokenised: ``AGENTCARDS_PII`` is not ``off`` and the key
    that submitted it did not opt out (``agentcards keys create --pii off``, carried by the
    run's grant; no grant, no opt-out)."""
    return tokenizes(ctx.settings.pii, ctx.grant)


def tokenizes(stack_pii: str, grant: Grant | None) -> bool:
    """The decision (``shared.sandbox.privacy.tokenizes``) for a run's grant: only a grant
    that says ``off`` opts out."""
    return private.tokenizes(stack_pii, key_pii_off=grant is not None and grant.pii_off)


def tokenizer(ctx: RunContext) -> Tokenizer:
    """The run's tokenizer (one per run: events and outcome share its produced tokens)."""
    if ctx.pii is None:
        ctx.pii = private.run_tokenizer(ctx.settings, str(ctx.row["tenant_id"]))
    return ctx.pii


def _kinds_by_tool(ctx: RunContext) -> dict[str, frozenset[str] | None]:
    return {tool_id: spec.pii_kinds for tool_id, spec in ctx.tools.items()}


def tool_kinds(ctx: RunContext, tool_id: str) -> frozenset[Kind]:
    """The kinds tokenised in one tool's data (its server's ``"pii"`` setting)."""
    return private.tool_kinds(_kinds_by_tool(ctx), tool_id)


def run_kinds(ctx: RunContext, tool_ids: set[str]) -> frozenset[Kind]:
    """The kinds tokenised in output that mixes the data of ``tool_ids``."""
    return private.run_kinds(_kinds_by_tool(ctx), tool_ids)


def event_out(ctx: RunContext, event: dict[str, Any]) -> dict[str, Any]:
    """An event of the run as its subscribers may see it (while it runs, any granted tool's
    data may be in it)."""
    if not enabled(ctx):
        return event
    tool = event.get("tool")
    return tokenizer(ctx).value(
        event, tool=tool if isinstance(tool, str) else None, kinds=run_kinds(ctx, set(ctx.tools))
    )


def tokenize_outcome(ctx: RunContext) -> None:
    """The stage: tokenise the outcome, then store the vault rows and the run's token list.
    If it raises, the run ends broken (stored `failed`, no value leaves)."""
    assert ctx.outcome is not None
    if not enabled(ctx):
        return
    tok = tokenizer(ctx)
    ctx.outcome = private.tokenized_outcome(tok, ctx.outcome, _kinds_by_tool(ctx))
    record = private.token_record(tok, ctx.pii_unresolved)
    if record is None:
        return  # nothing to keep: no extra transaction on the hot path
    tenant_id = str(ctx.row["tenant_id"])
    with_db_retry(
        lambda conn: private.store_token_record(
            conn,
            settings=ctx.settings,
            tenant_id=tenant_id,
            tok=tok,
            execution_id=ctx.execution_id,
            record=record,
        ),
        what="store tokens",
    )


class Detokenizing:
    """A tool backend that gives the tool the real value of the tenant's tokens in its
    arguments; a token that does not resolve (another tenant's, expired, made up) goes to
    the tool as it is, and the run records it."""

    def __init__(self, inner: Any, ctx: RunContext) -> None:
        self.inner = inner
        self.ctx = ctx

    async def call(self, tool_id: str, args: dict[str, Any], deadline: float) -> ToolResult:
        backend: ToolBackend = self.inner
        result = await backend.call(tool_id, await self._real(args), deadline)
        if enabled(self.ctx) and result.ok:
            # The code gets the real values; the scan notes which tool they came from (the
            # outcome's scan then finds these strings done). In a thread: a large result
            # must not hold up the run's event loop.
            tok, kinds = tokenizer(self.ctx), tool_kinds(self.ctx, tool_id)
            if kinds and private.small(result.value):
                tok.value(result.value, tool=tool_id, kinds=kinds)  # a thread hop costs more
            elif kinds:
                await asyncio.to_thread(tok.value, result.value, tool=tool_id, kinds=kinds)
        return result

    async def await_answer(self, call_id: str, until: float) -> dict[str, Any] | None:
        """The inner backend's wait for a person's answer to a paused call."""
        answer: dict[str, Any] | None = await self.inner.await_answer(call_id, until)
        return answer

    async def read_resource(self, server: str, uri: str, deadline: float) -> ToolResult:
        real_uri = await self._real(uri)
        result: ToolResult = await self.inner.read_resource(server, real_uri, deadline)
        return result

    async def _real(self, value: Any) -> Any:
        if not tokens_in(value):
            return value
        real, unresolved = await asyncio.to_thread(
            private.real_values,
            clients.db_pool().connection,
            settings=self.ctx.settings,
            tenant_id=str(self.ctx.row["tenant_id"]),
            value=value,
        )
        self.ctx.pii_unresolved.update(unresolved)
        return real
