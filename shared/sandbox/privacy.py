"""Privacy of one execution's output and input (docs/privacy.md), for any process that runs one.

The sandbox worker's ``privacy`` stage and a direct call (``services/gateway/ops/direct.py``)
both go through here: whether the output is tokenised (``tokenizes``), with which kinds
(``tool_kinds``, ``run_kinds``), the outcome with tokens in place of values
(``tokenized_outcome``), the vault rows and the row's token list (``token_record``,
``store_token_record``), and the real values of the tenant's tokens in a tool's arguments
(``real_values``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from shared.config import Settings
from shared.privacy.detect import ALL_KINDS, Kind, find
from shared.privacy.keys import PiiKeys
from shared.privacy.tokens import Tokenizer, kinds_of, replace_tokens, tokens_in
from shared.privacy.vault import resolve_tokens, store_tokens
from shared.sandbox.outcome import ExecutionOutcome
from shared.tools.apps import APP_MIME_TYPE

Conn = psycopg.Connection[dict[str, Any]]

_keys_cache: dict[tuple[str, ...], PiiKeys] = {}


def pii_keys(settings: Settings) -> PiiKeys:
    """The stack's PII keys (read once per process and setting)."""
    secret = settings.pii_key.get_secret_value() if settings.pii_key else ""
    before = settings.pii_key_previous.get_secret_value() if settings.pii_key_previous else ""
    cache_key = (secret, before, str(settings.home), str(settings.pii_token_ttl_s))
    if cache_key not in _keys_cache:
        _keys_cache[cache_key] = PiiKeys.from_settings(settings)
    return _keys_cache[cache_key]


def tokenizes(stack_pii: str, *, key_pii_off: bool) -> bool:
    """The decision: the stack's setting, then the submitting key's (fail closed: only a
    key that says ``off`` opts out)."""
    return stack_pii != "off" and not key_pii_off


def run_tokenizer(settings: Settings, tenant_id: str) -> Tokenizer:
    """A run's tokenizer (one per run: its events and outcome share its produced tokens)."""
    keys = pii_keys(settings)
    return Tokenizer(keys.token_key(tenant_id), region=settings.pii_phone_region)


def tool_kinds(kinds_by_tool: Mapping[str, frozenset[str] | None], tool_id: str) -> frozenset[Kind]:
    """The kinds tokenised in one tool's data (its server's ``"pii"`` setting; unknown or
    unset: every kind)."""
    kinds = kinds_by_tool.get(tool_id)
    return ALL_KINDS if kinds is None else kinds_of(kinds)


def run_kinds(
    kinds_by_tool: Mapping[str, frozenset[str] | None], tool_ids: set[str]
) -> frozenset[Kind]:
    """The kinds tokenised in output that mixes the data of ``tool_ids``: every kind one of
    them asks for (every kind when none was called: the code's own output)."""
    if not tool_ids:
        return ALL_KINDS
    kinds: set[Kind] = set()
    for tool_id in tool_ids:
        kinds |= tool_kinds(kinds_by_tool, tool_id)
    return frozenset(kinds)


def tokenized_outcome(
    tok: Tokenizer, outcome: ExecutionOutcome, kinds_by_tool: Mapping[str, frozenset[str] | None]
) -> ExecutionOutcome:
    """The outcome with tokens in place of detected values (result, error, stdout, trace)."""
    called = {e["tool"] for e in outcome.trace if isinstance(e.get("tool"), str)}
    kinds = run_kinds(kinds_by_tool, called)
    trace = []
    for entry in outcome.trace:
        tool = entry.get("tool")
        trace.append(tok.value(entry, tool=tool if isinstance(tool, str) else None, kinds=kinds))
    return dataclasses.replace(
        outcome,
        result=tok.value(outcome.result, kinds=kinds),
        error=tok.value(outcome.error, kinds=kinds),
        stdout=tok.text(outcome.stdout, kinds=kinds),
        trace=trace,
    )


def without_unsafe_app_pages(tok: Tokenizer, result: Any, kinds: frozenset[Kind]) -> Any:
    """A tool's result (its content blocks) with each embedded MCP Apps page
    (``text/html;profile=mcp-app``) that holds a value of ``kinds`` replaced by a text block
    saying it was withheld: a token inside a script or an attribute would break the page
    (``4111111111111111`` as a number literal, a ``mailto:``), and the value in clear would
    leak. A page with nothing to tokenise passes unchanged (docs/mcp-apps.md)."""
    if not isinstance(result, list) or not kinds:
        return result
    kept: list[Any] = []
    for block in result:
        resource = block.get("resource") if isinstance(block, dict) else None
        if not isinstance(resource, dict) or not _app_page(block, resource):
            kept.append(block)
            continue
        page = resource["text"]
        found = sorted({span.kind.value for span in find(page, kinds, region=tok.region)})
        if not found:
            kept.append(block)
            continue
        kept.append(
            {
                "type": "text",
                "text": f"the MCP Apps page {resource.get('uri')} was withheld: it holds "
                f"personal data ({', '.join(found)}) that cannot be tokenised inside HTML "
                "and script without breaking the page; hosts read the tool's view from its "
                "_meta.ui.resourceUri",
            }
        )
    return kept


def _app_page(block: dict[str, Any], resource: dict[str, Any]) -> bool:
    """Whether a content block embeds an MCP Apps page as text."""
    return (
        block.get("type") == "resource"
        and resource.get("mimeType") == APP_MIME_TYPE
        and isinstance(resource.get("text"), str)
    )


def token_record(tok: Tokenizer, unresolved: set[str]) -> dict[str, Any] | None:
    """The row's ``pii``: the tokens the run produced (kind, tool) and those it was given that
    did not resolve; None when there are none."""
    record = {
        "produced": [
            {"token": token, "kind": item.kind, "tool": item.tool}
            for token, item in tok.produced.items()
        ],
        "unresolved": sorted(unresolved),
    }
    return record if record["produced"] or record["unresolved"] else None


def store_token_record(
    conn: Conn,
    *,
    settings: Settings,
    tenant_id: str,
    tok: Tokenizer,
    execution_id: str | None = None,
    record: dict[str, Any] | None = None,
) -> None:
    """The vault rows of the tokens ``tok`` produced and (with ``execution_id``) the row's
    token list, committed: a token handed out always resolves."""
    store_tokens(conn, tenant_id=tenant_id, produced=tok.produced, keys=pii_keys(settings))
    if execution_id is not None:
        conn.execute("UPDATE executions SET pii = %s WHERE id = %s", (Jsonb(record), execution_id))
    conn.commit()


def real_values(
    connection: Callable[[], AbstractContextManager[Conn]],
    *,
    settings: Settings,
    tenant_id: str,
    value: Any,
) -> tuple[Any, set[str]]:
    """``value`` with each of the tenant's tokens replaced by its real value (blocking), and
    the tokens that did not resolve (another tenant's, expired, made up: left as they are)."""
    tokens = tokens_in(value)
    if not tokens:
        return value, set()
    with connection() as conn:
        real = resolve_tokens(conn, tenant_id=tenant_id, tokens=tokens, keys=pii_keys(settings))
    return replace_tokens(value, real), tokens - real.keys()


# A result up to this many characters is scanned on the caller's event loop: a thread hop
# costs more than the scan.
INLINE_CHARS = 16 * 1024


def small(value: Any) -> bool:
    """Whether a result holds few enough characters to scan on the event loop (bounded walk)."""
    budget, stack = INLINE_CHARS, [value]
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
