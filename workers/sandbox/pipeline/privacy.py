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
import dataclasses
import logging
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from shared.auth.grants import Grant
from shared.config import Settings
from shared.privacy.detect import ALL_KINDS, Kind
from shared.privacy.keys import PiiKeys
from shared.privacy.tokens import Tokenizer, kinds_of, replace_tokens, tokens_in
from shared.privacy.vault import resolve_tokens, store_tokens
from shared.sandbox.tools import ToolBackend, ToolResult
from workers.sandbox import clients
from workers.sandbox.pipeline.context import RunContext
from workers.sandbox.retry import with_db_retry

log = logging.getLogger(__name__)


_keys_cache: dict[tuple[str, ...], PiiKeys] = {}


def _keys(settings: Settings) -> PiiKeys:
    """The stack's PII keys (read once per process and setting)."""
    secret = settings.pii_key.get_secret_value() if settings.pii_key else ""
    before = settings.pii_key_previous.get_secret_value() if settings.pii_key_previous else ""
    cache_key = (secret, before, str(settings.home), str(settings.pii_token_ttl_s))
    if cache_key not in _keys_cache:
        _keys_cache[cache_key] = PiiKeys.from_settings(settings)
    return _keys_cache[cache_key]


def enabled(ctx: RunContext) -> bool:
    """Whether this run's output is tokenised: ``AGENTCARDS_PII`` is not ``off`` and the key
    that submitted it did not opt out (``agentcards keys create --pii off``, carried by the
    run's grant; no grant, no opt-out)."""
    return tokenizes(ctx.settings.pii, ctx.grant)


def tokenizes(stack_pii: str, grant: Grant | None) -> bool:
    """The decision: the stack's setting, then the submitting key's (fail closed: only a
    grant that says ``off`` opts out)."""
    return stack_pii != "off" and not (grant is not None and grant.pii_off)


def tokenizer(ctx: RunContext) -> Tokenizer:
    """The run's tokenizer (one per run: events and outcome share its produced tokens)."""
    if ctx.pii is None:
        keys = _keys(ctx.settings)
        ctx.pii = Tokenizer(
            keys.token_key(str(ctx.row["tenant_id"])), region=ctx.settings.pii_phone_region
        )
    return ctx.pii


def tool_kinds(ctx: RunContext, tool_id: str) -> frozenset[Kind]:
    """The kinds tokenised in one tool's data (its server's ``"pii"`` setting)."""
    spec = ctx.tools.get(tool_id)
    if spec is None or spec.pii_kinds is None:
        return ALL_KINDS
    return kinds_of(spec.pii_kinds)


def run_kinds(ctx: RunContext, tool_ids: set[str]) -> frozenset[Kind]:
    """The kinds tokenised in output that mixes the data of ``tool_ids``: every kind one of
    them asks for (every kind when none was called: the code's own output)."""
    if not tool_ids:
        return ALL_KINDS
    kinds: set[Kind] = set()
    for tool_id in tool_ids:
        kinds |= tool_kinds(ctx, tool_id)
    return frozenset(kinds)


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
    outcome = ctx.outcome
    called = {e["tool"] for e in outcome.trace if isinstance(e.get("tool"), str)}
    kinds = run_kinds(ctx, called)
    trace = []
    for entry in outcome.trace:
        tool = entry.get("tool")
        trace.append(tok.value(entry, tool=tool if isinstance(tool, str) else None, kinds=kinds))
    ctx.outcome = dataclasses.replace(
        outcome,
        result=tok.value(outcome.result, kinds=kinds),
        error=tok.value(outcome.error, kinds=kinds),
        stdout=tok.text(outcome.stdout, kinds=kinds),
        trace=trace,
    )
    record = {
        "produced": [
            {"token": token, "kind": item.kind, "tool": item.tool}
            for token, item in tok.produced.items()
        ],
        "unresolved": sorted(ctx.pii_unresolved),
    }
    if not record["produced"] and not record["unresolved"]:
        return  # nothing to keep: no extra transaction on the hot path
    tenant_id, keys = str(ctx.row["tenant_id"]), _keys(ctx.settings)

    def write(conn: psycopg.Connection[dict[str, Any]]) -> None:
        store_tokens(conn, tenant_id=tenant_id, produced=tok.produced, keys=keys)
        conn.execute(
            "UPDATE executions SET pii = %s WHERE id = %s", (Jsonb(record), ctx.execution_id)
        )
        conn.commit()

    with_db_retry(write, what="store tokens")


_INLINE_CHARS = 16 * 1024


def _small(value: Any) -> bool:
    """Whether a result holds few enough characters to scan on the event loop (bounded walk)."""
    budget, stack = _INLINE_CHARS, [value]
    while stack:
        item = stack.pop()
        budget -= 1  # every item counts: a long list of numbers is not small either
        if isinstance(item, str):
            budget -= len(item)
        elif isinstance(item, dict):
            budget -= sum(len(k) for k in item if isinstance(k, str))
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        if budget < 0:
            return False
    return True


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
            if kinds and _small(result.value):
                tok.value(result.value, tool=tool_id, kinds=kinds)  # a thread hop costs more
            elif kinds:
                await asyncio.to_thread(tok.value, result.value, tool=tool_id, kinds=kinds)
        return result

    async def read_resource(self, server: str, uri: str, deadline: float) -> ToolResult:
        real_uri = await self._real(uri)
        result: ToolResult = await self.inner.read_resource(server, real_uri, deadline)
        return result

    async def _real(self, value: Any) -> Any:
        tokens = tokens_in(value)
        if not tokens:
            return value
        tenant_id, keys = str(self.ctx.row["tenant_id"]), _keys(self.ctx.settings)

        def lookup() -> dict[str, str]:
            with clients.db_pool().connection() as conn:
                return resolve_tokens(conn, tenant_id=tenant_id, tokens=tokens, keys=keys)

        real = await asyncio.to_thread(lookup)
        self.ctx.pii_unresolved.update(tokens - real.keys())
        return replace_tokens(value, real)
