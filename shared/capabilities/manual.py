"""Capabilities a person writes or corrects: create from code + intent, edit name/intent/aliases.

What is checked (code parses, names are callable, the code is new) and what is derived
(code hash, tools, inferred parameter schema, embeddings) before ``lifecycle`` stores it,
all in the caller's transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import psycopg

from shared.capabilities import lifecycle, store
from shared.capabilities.naming import capability_description, capability_name, unique_name
from shared.capabilities.normalize import code_hash
from shared.capabilities.schema import infer_parameters_schema, tools_called
from shared.capabilities.twins import twin_head
from shared.embeddings import Embeds, embed_cached
from shared.errors import Conflict, NotFound
from shared.tools.store import get_tools

Conn = psycopg.Connection[Any]
Row = dict[str, Any]


@dataclass(frozen=True)
class ManualCapability:
    """``POST /v1/capabilities``: code and intent; the rest is derived when left out."""

    code: str
    intent: str
    name: str | None = None
    description: str | None = None
    aliases: Sequence[str] = ()
    language: str = "python"


def create_manual(
    conn: Conn, *, tenant_id: str, spec: ManualCapability, embedder: Embeds
) -> tuple[Row, bool]:
    """Store a manual capability; (its item, True when it is a new version of an existing name).

    Conflict when the tenant already has this code (same hash): edit that one instead. Code
    making the same tool calls as a capability (``twins``) is that capability's next version,
    inheriting its phrasings, unless it comes with a name of its own.
    """
    lifecycle.check_code(spec.code, language=spec.language)
    if spec.name is not None:
        lifecycle.check_name(spec.name)
    digest = code_hash(spec.code, spec.language)
    existing = lifecycle.by_code_hash(conn, tenant_id=tenant_id, code_hash=digest)
    if existing is not None:
        raise Conflict(
            f"capability {existing['name']!r} ({existing['id']}) already has this code: "
            f"change it with PATCH /v1/capabilities/{existing['id']}",
            capability_id=existing["id"],
        )
    tools = tools_called(spec.code, spec.language)
    schemas = {t: row["input_schema"] for t, row in get_tools(conn, ids=tools).items()}
    name = spec.name or capability_name(intent=spec.intent, tools_used=tools)
    family, version = lifecycle.next_version(conn, tenant_id=tenant_id, name=name)
    twin = twin_head(
        conn, tenant_id=tenant_id, code=spec.code, language=spec.language, tools_used=tools
    )
    if twin is not None and spec.name in (None, twin["name"]):  # a name given keeps it apart
        name, family, version = twin["name"], twin["family"], int(twin["top"]) + 1
    elif spec.name is None and family is not None:  # a derived name never joins a family
        name, family, version = unique_name(name=name, code_hash=digest), None, 1
    vectors = embed_cached(conn=conn, embedder=embedder, texts=[spec.intent, *spec.aliases])
    capability_id = lifecycle.insert(
        conn,
        tenant_id=tenant_id,
        values={
            "code_hash": digest,
            "code": spec.code,
            "intent": spec.intent,
            "vec": vectors[0],
            "name": name,
            "description": spec.description
            or capability_description(intent=spec.intent, tools_used=tools),
            "parameters_schema": infer_parameters_schema(
                code=spec.code, tool_schemas=schemas, language=spec.language
            ),
            "language": spec.language,
            "tools_used": tools,
            "source": "manual",
            "version": version,
            "family": family,
        },
    )
    lifecycle.add_aliases(
        conn,
        tenant_id=tenant_id,
        capability_id=capability_id,
        aliases=list(zip(spec.aliases, vectors[1:], strict=True)),
    )
    if twin is not None and name == twin["name"]:
        store.inherit_phrasings(conn, pairs=[(capability_id, twin["id"])])
    return _item(conn, tenant_id=tenant_id, capability_id=capability_id), family is not None


def edit(
    conn: Conn,
    *,
    tenant_id: str,
    capability_id: str,
    changes: dict[str, Any],
    embedder: Embeds,
) -> Row:
    """Apply ``changes`` (any of name, description, intent, aliases: the list replaces them;
    disabled: true hides it from matching, search and suggestions and refuses runs)."""
    if changes.get("name") is not None:
        lifecycle.check_name(changes["name"])
    intent = changes.get("intent")
    aliases = changes.get("aliases")
    texts = ([intent] if intent is not None else []) + list(aliases or [])
    vectors = embed_cached(conn=conn, embedder=embedder, texts=texts) if texts else []
    found = lifecycle.update_fields(
        conn,
        tenant_id=tenant_id,
        capability_id=capability_id,
        name=changes.get("name"),
        description=changes.get("description"),
        intent=(intent, vectors[0]) if intent is not None else None,
        disabled=changes.get("disabled"),
    )
    if not found:
        raise not_found(capability_id)
    if aliases is not None:
        lifecycle.replace_aliases(
            conn,
            tenant_id=tenant_id,
            capability_id=capability_id,
            aliases=list(zip(aliases, vectors[len(texts) - len(aliases) :], strict=True)),
        )
    return _item(conn, tenant_id=tenant_id, capability_id=capability_id)


def _item(conn: Conn, *, tenant_id: str, capability_id: str) -> Row:
    found = lifecycle.get_item(conn, tenant_id=tenant_id, capability_id=capability_id)
    if found is None:
        raise not_found(capability_id)
    return found


def not_found(capability_id: str) -> NotFound:
    """The 404 for a capability id or name the tenant does not have."""
    return NotFound(
        f"no capability {capability_id!r}: list yours with GET /api/capabilities",
        id=capability_id,
    )


def get_or_404(conn: Conn, *, tenant_id: str, ref: str) -> Row:
    """One capability of the tenant by id or name (its latest version); NotFound otherwise."""
    found = lifecycle.find_item(conn, tenant_id=tenant_id, ref=ref)
    if found is None:
        raise not_found(ref)
    return found
