"""Our reference server for the MCP conformance suite's server scenarios (a test fixture).

Written from the scenario definitions of ``@modelcontextprotocol/conformance@0.2.0-alpha.12``
(the tools, prompts, resources, completions and logging they call, under the names they
call): ``python -m tests.integration.conformance_server`` serves it over stdio (how the
gateway runs it downstream), ``--http PORT`` over streamable HTTP at ``/mcp`` (how the suite
runs it directly). Built on the SDK's low-level ``Server`` so that every wire field (raw JSON
Schemas, content blocks, ``InputRequiredResult``) is what the scenario asks for, not what a
framework derives. Both revisions: 2025-11-25 sessions ask the client mid-call (sampling,
elicitation); 2026-07-28 requests get an ``InputRequiredResult`` whose ``requestState`` is
HMAC-signed by this process.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import hmac
import json
import secrets
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import Any

import anyio
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.server.subscriptions import (
    InMemorySubscriptionBus,
    ListenHandler,
    PromptsListChanged,
    ToolsListChanged,
)
from mcp.shared.exceptions import MCPError
from mcp_types.version import is_version_at_least

from tests.integration import conformance_tasks

Context = ServerRequestContext[Any, Any]

# A 1x1 red PNG and a 1-sample silent 8 kHz WAV: the smallest valid payloads of each kind.
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
WAV = base64.b64encode(
    b"RIFF" + (38).to_bytes(4, "little") + b"WAVEfmt " + (16).to_bytes(4, "little")
    + (1).to_bytes(2, "little") + (1).to_bytes(2, "little") + (8000).to_bytes(4, "little")
    + (16000).to_bytes(4, "little") + (2).to_bytes(2, "little") + (16).to_bytes(2, "little")
    + b"data" + (2).to_bytes(4, "little") + b"\x00\x00"
).decode()  # fmt: skip

STATE_KEY = secrets.token_bytes(32)
# The tools/call being served: the tools that ask (sampling, elicitation) read the answers of
# a 2026-07-28 retry from its params, as the round-trip tools do.
_CALL: ContextVar[types.CallToolRequestParams] = ContextVar("call")
WATCHED = "test://watched-resource"
NO_ARGS: dict[str, Any] = {"type": "object", "properties": {}}
CUSTOM_HEADERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "region": {"type": "string", "description": "A region", "x-mcp-header": "Region"}
    },
    "required": ["region"],
}
JSON_SCHEMA_2020_12: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}


def _text(text: str) -> types.TextContent:
    return types.TextContent(type="text", text=text)


def _result(*content: types.ContentBlock, is_error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(content=list(content), is_error=is_error)


def _string_args(*names: str) -> dict[str, Any]:
    properties = {name: {"type": "string"} for name in names}
    return {"type": "object", "properties": properties, "required": list(names)}


def _ask_name(message: str, field: str = "name") -> dict[str, Any]:
    schema = {"type": "object", "properties": {field: {"type": "string"}}, "required": [field]}
    return {
        "method": "elicitation/create",
        "params": {"message": message, "requestedSchema": schema},
    }


def _ask_llm(text: str, max_tokens: int) -> dict[str, Any]:
    message = {"role": "user", "content": {"type": "text", "text": text}}
    return {
        "method": "sampling/createMessage",
        "params": {"messages": [message], "maxTokens": max_tokens},
    }


ASK_ROOTS: dict[str, Any] = {"method": "roots/list", "params": {}}


# --- requestState: opaque to the client, signed so a changed byte is refused -----------------


def _seal(state: dict[str, Any]) -> str:
    body = base64.urlsafe_b64encode(json.dumps(state, sort_keys=True).encode()).decode()
    mac = hmac.new(STATE_KEY, body.encode(), hashlib.sha256).hexdigest()
    return f"{body}.{mac}"


def _open(token: str | None) -> dict[str, Any] | None:
    if token is None:
        return None
    body, _, mac = token.rpartition(".")
    good = hmac.new(STATE_KEY, body.encode(), hashlib.sha256).hexdigest()
    if not body or not hmac.compare_digest(mac, good):
        raise MCPError(code=types.INVALID_PARAMS, message="requestState failed its integrity check")
    return dict(json.loads(base64.urlsafe_b64decode(body)))


def _input_required(
    requests: dict[str, Any], state: dict[str, Any] | None = None
) -> types.InputRequiredResult:
    return types.InputRequiredResult.model_validate(
        {
            "resultType": "input_required",
            "inputRequests": requests,
            **({"requestState": _seal(state)} if state is not None else {}),
        }
    )


def _responses(
    params: types.CallToolRequestParams
    | types.GetPromptRequestParams
    | types.ReadResourceRequestParams,
) -> dict[str, Any]:
    """The client's answers as plain JSON (keyed like our ``inputRequests``)."""
    answers = params.input_responses or {}
    return {key: _plain(value) for key, value in dict(answers).items()}


def _plain(value: Any) -> Any:
    return (
        value.model_dump(mode="json", by_alias=True, exclude_none=True)
        if hasattr(value, "model_dump")
        else value
    )


def _accepted(answer: Any, field: str) -> str | None:
    """The ``field`` of an accepted elicitation answer, or None when it is not one."""
    if isinstance(answer, dict) and answer.get("action") == "accept":
        value = (answer.get("content") or {}).get(field)
        return value if isinstance(value, str) else None
    return None


# --- tools -------------------------------------------------------------------------------------


async def _simple_text(ctx: Context, args: dict[str, Any]) -> types.CallToolResult:
    return _result(_text("This is a simple text response for testing."))


async def _image(ctx: Context, args: dict[str, Any]) -> types.CallToolResult:
    return _result(types.ImageContent(type="image", data=PNG, mime_type="image/png"))


async def _audio(ctx: Context, args: dict[str, Any]) -> types.CallToolResult:
    return _result(types.AudioContent(type="audio", data=WAV, mime_type="audio/wav"))


def _embedded(uri: str, text: str, mime_type: str = "text/plain") -> types.EmbeddedResource:
    resource = types.TextResourceContents(uri=uri, mime_type=mime_type, text=text)
    return types.EmbeddedResource(type="resource", resource=resource)


async def _embedded_resource(ctx: Context, args: dict[str, Any]) -> types.CallToolResult:
    return _result(_embedded("test://embedded-resource", "This is an embedded resource content."))


async def _mixed(ctx: Context, args: dict[str, Any]) -> types.CallToolResult:
    data = json.dumps({"test": "data", "value": 123}, separators=(",", ":"))
    return _result(
        _text("Multiple content types test:"),
        types.ImageContent(type="image", data=PNG, mime_type="image/png"),
        _embedded("test://mixed-content-resource", data, "application/json"),
    )


async def _with_logging(ctx: Context, args: dict[str, Any]) -> types.CallToolResult:
    for message in ("Tool execution started", "Tool processing data", "Tool execution completed"):
        await ctx.session.send_log_message("info", message, "conformance", ctx.request_id)
        await anyio.sleep(0.05)
    return _result(_text("Tool with logging executed successfully"))


async def _error(ctx: Context, args: dict[str, Any]) -> types.CallToolResult:
    return _result(_text("This tool intentionally returns an error for testing"), is_error=True)


async def _with_progress(ctx: Context, args: dict[str, Any]) -> types.CallToolResult:
    for step in (0, 50, 100):
        await ctx.session.report_progress(step, 100)
        if step < 100:
            await anyio.sleep(0.05)
    return _result(_text("Tool with progress executed successfully"))


async def _sampling(ctx: Context, args: dict[str, Any]) -> Asked:
    params = _CALL.get()
    ask = {"llm": _ask_llm(str(args.get("prompt", "")), 100)}
    answers = await _ask(ctx, params, ask)
    if isinstance(answers, types.InputRequiredResult):
        return answers
    content = answers["llm"].get("content")
    said = content.get("text") if isinstance(content, dict) else None
    return _result(_text(f"LLM response: {said if said is not None else json.dumps(content)}"))


async def _elicit(ctx: Context, message: str, schema: dict[str, Any], prefix: str) -> Asked:
    ask = {
        "form": {
            "method": "elicitation/create",
            "params": {"message": message, "requestedSchema": schema},
        }
    }
    answers = await _ask(ctx, _CALL.get(), ask)
    if isinstance(answers, types.InputRequiredResult):
        return answers
    answer = answers["form"]
    return _result(
        _text(
            f"{prefix}action={answer.get('action')}, content={json.dumps(answer.get('content') or {})}"
        )
    )


async def _elicitation(ctx: Context, args: dict[str, Any]) -> Asked:
    schema = {
        "type": "object",
        "properties": {
            "username": {"type": "string", "description": "User's response"},
            "email": {"type": "string", "description": "User's email address"},
        },
        "required": ["username", "email"],
    }
    return await _elicit(ctx, str(args.get("message", "")), schema, "User response: ")


async def _elicitation_defaults(ctx: Context, args: dict[str, Any]) -> Asked:
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "default": "John Doe"},
            "age": {"type": "integer", "default": 30},
            "score": {"type": "number", "default": 95.5},
            "status": {
                "type": "string",
                "enum": ["active", "inactive", "pending"],
                "default": "active",
            },
            "verified": {"type": "boolean", "default": True},
        },
    }
    return await _elicit(ctx, "Please review your details", schema, "Elicitation completed: ")


async def _elicitation_enums(ctx: Context, args: dict[str, Any]) -> Asked:
    options = ["option1", "option2", "option3"]
    titled = [{"const": value, "title": value.title()} for value in options]
    schema = {
        "type": "object",
        "properties": {
            "untitledSingle": {"type": "string", "enum": options},
            "titledSingle": {"type": "string", "oneOf": titled},
            "legacyEnum": {
                "type": "string",
                "enum": options,
                "enumNames": [o.title() for o in options],
            },
            "untitledMulti": {"type": "array", "items": {"type": "string", "enum": options}},
            "titledMulti": {"type": "array", "items": {"anyOf": titled}},
        },
    }
    return await _elicit(ctx, "Pick from each kind of list", schema, "Elicitation completed: ")


async def _reconnection(ctx: Context, args: dict[str, Any]) -> types.CallToolResult:
    await anyio.sleep(0.1)
    if ctx.close_sse_stream is not None:
        await ctx.close_sse_stream()
    await anyio.sleep(0.2)
    return _result(_text("Reconnection test completed"))


async def _json_schema(ctx: Context, args: dict[str, Any]) -> types.CallToolResult:
    return _result(_text(f"Received {sorted(args)}"))


async def _trigger_tool_change(ctx: Context, args: dict[str, Any]) -> types.CallToolResult:
    await BUS.publish(ToolsListChanged())
    return _result(_text("Published tools/list_changed"))


async def _trigger_prompt_change(ctx: Context, args: dict[str, Any]) -> types.CallToolResult:
    await BUS.publish(PromptsListChanged())
    return _result(_text("Published prompts/list_changed"))


async def _logging_tool(ctx: Context, args: dict[str, Any]) -> types.CallToolResult:
    """Logs once; at 2026-07-28 the SDK sends it only when the request asked for a log level."""
    await ctx.session.send_log_message(
        "info", "test_logging_tool ran", "conformance", ctx.request_id
    )
    return _result(_text("Logged once"))


async def _custom_headers(ctx: Context, args: dict[str, Any]) -> types.CallToolResult:
    return _result(_text(f"region={args.get('region')}"))


# --- tools that ask the client: both revisions ----------------------------------------------
# At 2026-07-28 a question is an entry of an InputRequiredResult and the answer comes back on
# the retried request (how the gateway's toolhost connects); at 2025-11-25 it is a request to
# the client in the middle of the call, as a server of that revision must ask.


def _modern(ctx: Context) -> bool:
    return is_version_at_least(ctx.protocol_version, "2026-07-28")


async def _ask(
    ctx: Context,
    params: types.CallToolRequestParams
    | types.GetPromptRequestParams
    | types.ReadResourceRequestParams,
    asks: dict[str, Any],
    state: dict[str, Any] | None = None,
) -> dict[str, Any] | types.InputRequiredResult:
    """The client's answer to every question in ``asks`` (JSON, keyed like ``asks``), or the
    InputRequiredResult to return for them (2026-07-28, while one is missing)."""
    if not _modern(ctx):
        return {key: _plain(await _ask_now(ctx, ask)) for key, ask in asks.items()}
    answers = _responses(params)
    if not all(isinstance(answers.get(key), dict) for key in asks):
        return _input_required(asks, state)
    return answers


async def _ask_now(ctx: Context, ask: dict[str, Any]) -> Any:
    params = ask["params"]
    if ask["method"] == "elicitation/create":
        return await ctx.session.elicit_form(
            params["message"], params["requestedSchema"], ctx.request_id
        )
    if ask["method"] == "sampling/createMessage":
        messages = [types.SamplingMessage.model_validate(m) for m in params["messages"]]
        return await ctx.session.create_message(
            messages, max_tokens=params["maxTokens"], related_request_id=ctx.request_id
        )
    return await ctx.session.list_roots()


Asked = types.CallToolResult | types.InputRequiredResult


async def _mrtr_elicitation(ctx: Context, params: types.CallToolRequestParams) -> Asked:
    answers = await _ask(ctx, params, {"user_name": _ask_name("What is your name?")})
    if isinstance(answers, types.InputRequiredResult):
        return answers
    name = _accepted(answers["user_name"], "name")
    if name is None and _modern(ctx):  # declined, cancelled or unusable: ask again
        return _input_required({"user_name": _ask_name("What is your name?")})
    if name is None:
        return _result(_text(f"No name given: {json.dumps(answers['user_name'])}"), is_error=True)
    return _result(_text(f"Hello, {name}!"))


async def _mrtr_sampling(ctx: Context, params: types.CallToolRequestParams) -> Asked:
    answers = await _ask(
        ctx, params, {"capital_question": _ask_llm("What is the capital of France?", 100)}
    )
    if isinstance(answers, types.InputRequiredResult):
        return answers
    content = answers["capital_question"].get("content")
    said = content.get("text") if isinstance(content, dict) else json.dumps(content)
    return _result(_text(f"The model answered: {said}"))


async def _mrtr_roots(ctx: Context, params: types.CallToolRequestParams) -> Asked:
    answers = await _ask(ctx, params, {"client_roots": ASK_ROOTS})
    if isinstance(answers, types.InputRequiredResult):
        return answers
    roots = answers["client_roots"].get("roots")
    uris = (
        [root.get("uri") for root in roots if isinstance(root, dict)]
        if isinstance(roots, list)
        else []
    )
    return _result(_text(f"The client has {len(uris)} roots: {', '.join(map(str, uris))}"))


async def _mrtr_request_state(ctx: Context, params: types.CallToolRequestParams) -> Asked:
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
    confirm = {
        "confirm": {
            "method": "elicitation/create",
            "params": {"message": "Please confirm", "requestedSchema": schema},
        }
    }
    if _modern(ctx) and _open(params.request_state) != {"step": "confirm"}:
        return _input_required(confirm, {"step": "confirm"})
    answers = await _ask(ctx, params, confirm, {"step": "confirm"})
    if isinstance(answers, types.InputRequiredResult):
        return answers
    return _result(_text(f"state-ok: the client answered {answers['confirm'].get('action')}"))


async def _mrtr_multiple(ctx: Context, params: types.CallToolRequestParams) -> Asked:
    asks = {
        "user_name": _ask_name("What is your name?"),
        "greeting": _ask_llm("Generate a greeting", 50),
        "client_roots": ASK_ROOTS,
    }
    _open(params.request_state)  # a changed state is refused
    answers = await _ask(ctx, params, asks, {"asked": sorted(asks)})
    if isinstance(answers, types.InputRequiredResult):
        return answers
    return _result(_text(f"Got all {len(asks)} answers: {', '.join(sorted(asks))}"))


async def _mrtr_multi_round(ctx: Context, params: types.CallToolRequestParams) -> Asked:
    step1 = {"step1": _ask_name("Step 1: What is your name?")}
    step2 = {"step2": _ask_name("Step 2: What is your favorite color?", "color")}
    state = _open(params.request_state) or {}
    if _modern(ctx) and state.get("round") != 2:
        answers = await _ask(ctx, params, step1, {"round": 1})
        if isinstance(answers, types.InputRequiredResult) or state.get("round") != 1:
            return _input_required(step1, {"round": 1})
        return _input_required(step2, {"round": 2, "name": _accepted(answers["step1"], "name")})
    if not _modern(ctx):
        answers = await _ask(ctx, params, step1)
        state = {"name": _accepted(answers["step1"], "name") if isinstance(answers, dict) else None}
    answers = await _ask(ctx, params, step2, state)
    if isinstance(answers, types.InputRequiredResult):
        return answers
    return _result(_text(f"{state['name']} likes {_accepted(answers['step2'], 'color')}"))


async def _needs_sampling(ctx: Context, params: types.CallToolRequestParams) -> Asked:
    """Samples the client's LLM, which a client that did not declare sampling cannot do."""
    declared = ctx.session.client_capabilities
    if declared is None or declared.sampling is None:
        raise MCPError(
            code=types.MISSING_REQUIRED_CLIENT_CAPABILITY,
            message="This tool needs the client's sampling capability",
            data={"requiredCapabilities": {"sampling": {}}},
        )
    answers = await _ask(ctx, params, {"hello": _ask_llm("Say hello", 20)})
    if isinstance(answers, types.InputRequiredResult):
        return answers
    return _result(_text(f"The model said: {json.dumps(answers['hello'].get('content'))}"))


async def _mrtr_capabilities(ctx: Context, params: types.CallToolRequestParams) -> Asked:
    declared = ctx.session.client_capabilities or types.ClientCapabilities()
    asks: dict[str, Any] = {}
    if declared.elicitation is not None:
        asks["user_name"] = _ask_name("What is your name?")
    if declared.sampling is not None:
        asks["greeting"] = _ask_llm("Generate a greeting", 50)
    if declared.roots is not None:
        asks["client_roots"] = ASK_ROOTS
    answers = await _ask(ctx, params, asks)
    if isinstance(answers, types.InputRequiredResult):
        return answers
    return _result(_text(f"Answered: {', '.join(sorted(asks)) or 'nothing to ask'}"))


ToolBody = Callable[
    [Context, dict[str, Any]], Awaitable[types.CallToolResult | types.InputRequiredResult]
]
RoundBody = Callable[
    [Context, types.CallToolRequestParams],
    Awaitable[types.CallToolResult | types.InputRequiredResult],
]


async def _greet(ctx: Context, args: dict[str, Any]) -> types.CallToolResult:
    return _result(_text(f"Hello, {args.get('name', 'world')}!"))


async def _slow_compute(ctx: Context, args: dict[str, Any]) -> types.CallToolResult:
    seconds = float(args.get("seconds", 1))
    await anyio.sleep(seconds)
    return _result(_text(f"computed {args.get('label', '')} after {seconds:g}s"))


async def _failing_job(ctx: Context, args: dict[str, Any]) -> types.CallToolResult:
    await anyio.sleep(1)
    return _result(_text("the job failed"), is_error=True)


async def _protocol_error_job(ctx: Context, args: dict[str, Any]) -> types.CallToolResult:
    await anyio.sleep(1)
    raise MCPError(code=types.INTERNAL_ERROR, message="the job crashed")


async def _confirm_delete(ctx: Context, params: types.CallToolRequestParams) -> Asked:
    filename = (params.arguments or {}).get("filename", "file")
    answers = await _ask(ctx, params, {"confirm": conformance_tasks.confirm(f"Delete {filename}?")})
    if isinstance(answers, types.InputRequiredResult):
        return answers
    accepted = answers["confirm"].get("action") == "accept"
    return _result(_text(f"deleted {filename}" if accepted else f"kept {filename}"))


async def _multi_input(ctx: Context, params: types.CallToolRequestParams) -> Asked:
    asks = {key: conformance_tasks.confirm(f"Confirm {key}?") for key in ("first", "second")}
    answers = await _ask(ctx, params, asks)
    if isinstance(answers, types.InputRequiredResult):
        return answers
    return _result(_text(f"answered {answers['first'].get('action')} and "
                         f"{answers['second'].get('action')}"))  # fmt: skip


# The tasks extension's fixtures (its scenarios call them by these names): a task for a
# request that declared the extension (conformance_tasks.py), the plain tool otherwise.
SLOW_ARGS: dict[str, Any] = {
    "type": "object",
    "properties": {"seconds": {"type": "number"}, "label": {"type": "string"}},
}
TOOLS: dict[str, tuple[str, dict[str, Any], ToolBody]] = {
    "greet": ("Says hello", {"type": "object", "properties": {"name": {"type": "string"}}}, _greet),
    "slow_compute": ("Sleeps `seconds`, then answers", SLOW_ARGS, _slow_compute),
    "failing_job": ("Fails after a second (isError)", NO_ARGS, _failing_job),
    "protocol_error_job": (
        "Crashes after a second (a JSON-RPC error)",
        NO_ARGS,
        _protocol_error_job,
    ),
    "test_simple_text": ("Returns a fixed text", NO_ARGS, _simple_text),
    "test_image_content": ("Returns a 1x1 PNG", NO_ARGS, _image),
    "test_audio_content": ("Returns a tiny WAV", NO_ARGS, _audio),
    "test_embedded_resource": ("Returns an embedded text resource", NO_ARGS, _embedded_resource),
    "test_multiple_content_types": ("Returns text, an image and a resource", NO_ARGS, _mixed),
    "test_tool_with_logging": ("Logs three info messages while it runs", NO_ARGS, _with_logging),
    "test_error_handling": ("Always fails (isError)", NO_ARGS, _error),
    "test_tool_with_progress": ("Reports progress 0, 50, 100 of 100", NO_ARGS, _with_progress),
    "test_sampling": ("Asks the client's LLM the prompt", _string_args("prompt"), _sampling),
    "test_elicitation": (
        "Asks the user for a username and email",
        _string_args("message"),
        _elicitation,
    ),
    "test_elicitation_sep1034_defaults": (
        "Elicits fields with defaults",
        NO_ARGS,
        _elicitation_defaults,
    ),
    "test_elicitation_sep1330_enums": ("Elicits the five enum shapes", NO_ARGS, _elicitation_enums),
    "test_reconnection": ("Closes its SSE stream mid-call", NO_ARGS, _reconnection),
    "json_schema_2020_12_tool": (
        "Tool with JSON Schema 2020-12 features",
        JSON_SCHEMA_2020_12,
        _json_schema,
    ),
    "test_trigger_tool_change": ("Announces a tools list change", NO_ARGS, _trigger_tool_change),
    "test_trigger_prompt_change": (
        "Announces a prompts list change",
        NO_ARGS,
        _trigger_prompt_change,
    ),
    "test_logging_tool": ("Logs one info message", NO_ARGS, _logging_tool),
    "test_custom_headers": (
        "Mirrors region into an Mcp-Param header",
        CUSTOM_HEADERS,
        _custom_headers,
    ),
}
ROUND_TOOLS: dict[str, tuple[str, RoundBody]] = {
    "test_input_required_result_elicitation": ("Asks the user's name", _mrtr_elicitation),
    "test_input_required_result_sampling": ("Asks the client's LLM", _mrtr_sampling),
    "test_input_required_result_list_roots": ("Asks the client's roots", _mrtr_roots),
    "test_input_required_result_request_state": (
        "Round-trips a signed requestState",
        _mrtr_request_state,
    ),
    "test_input_required_result_multiple_inputs": ("Asks three things at once", _mrtr_multiple),
    "test_input_required_result_multi_round": ("Asks in two rounds", _mrtr_multi_round),
    "test_input_required_result_tampered_state": (
        "Refuses a changed requestState",
        _mrtr_request_state,
    ),
    "test_input_required_result_capabilities": (
        "Asks only what the client declared",
        _mrtr_capabilities,
    ),
    "test_missing_capability": ("Needs the client's sampling capability", _needs_sampling),
    "test_streaming_elicitation": (
        "Asks the user's name (as an InputRequiredResult)",
        _mrtr_elicitation,
    ),
    "confirm_delete": ("Asks before it deletes `filename` (a task)", _confirm_delete),
    "multi_input": ("Asks two things at once (a task)", _multi_input),
    "test_tool_with_task": ("Asks a name, then runs as a task (tasks only)", _mrtr_elicitation),
}

ROUND_ARGS: dict[str, dict[str, Any]] = {"confirm_delete": _string_args("filename")}


async def list_tools(
    ctx: Context, params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    tools = [types.Tool(name=n, description=d, input_schema=s) for n, (d, s, _) in TOOLS.items()]
    tools += [
        types.Tool(name=n, description=d, input_schema=ROUND_ARGS.get(n, NO_ARGS))
        for n, (d, _) in ROUND_TOOLS.items()
    ]
    return types.ListToolsResult(tools=tools)


async def call_tool(
    ctx: Context, params: types.CallToolRequestParams
) -> types.CallToolResult | types.InputRequiredResult:
    tasked = conformance_tasks.task_call(ctx, params)
    if tasked is not None:
        return tasked  # type: ignore[return-value]  # a CreateTaskResult, as a mapping
    if params.name in ROUND_TOOLS:
        return await ROUND_TOOLS[params.name][1](ctx, params)
    if params.name not in TOOLS:
        raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown tool: {params.name}")
    token = _CALL.set(params)  # for the tools that ask (their answers come in params)
    try:
        return await TOOLS[params.name][2](ctx, params.arguments or {})
    finally:
        _CALL.reset(token)


# --- prompts -----------------------------------------------------------------------------------


def _user(content: types.ContentBlock) -> types.PromptMessage:
    return types.PromptMessage(role="user", content=content)


PROMPTS: dict[str, tuple[str, list[str]]] = {
    "test_simple_prompt": ("A prompt without arguments", []),
    "test_prompt_with_arguments": ("A prompt with two arguments", ["arg1", "arg2"]),
    "test_prompt_with_embedded_resource": ("A prompt embedding a resource", ["resourceUri"]),
    "test_prompt_with_image": ("A prompt with an image", []),
    "test_input_required_result_prompt": ("A prompt that asks the user for context first", []),
}


async def list_prompts(
    ctx: Context, params: types.PaginatedRequestParams | None
) -> types.ListPromptsResult:
    prompts = [
        types.Prompt(
            name=name,
            description=description,
            arguments=[
                types.PromptArgument(name=a, description=f"The {a}", required=True) for a in args
            ],
        )
        for name, (description, args) in PROMPTS.items()
    ]
    return types.ListPromptsResult(prompts=prompts)


async def get_prompt(
    ctx: Context, params: types.GetPromptRequestParams
) -> types.GetPromptResult | types.InputRequiredResult:
    args = params.arguments or {}
    if params.name not in PROMPTS:
        raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown prompt: {params.name}")
    missing = [a for a in PROMPTS[params.name][1] if a not in args]
    if missing:
        raise MCPError(
            code=types.INVALID_PARAMS, message=f"Missing prompt arguments: {', '.join(missing)}"
        )
    match params.name:
        case "test_simple_prompt":
            messages = [_user(_text("This is a simple prompt for testing."))]
        case "test_prompt_with_arguments":
            messages = [
                _user(_text(f"Prompt with arguments: arg1='{args['arg1']}', arg2='{args['arg2']}'"))
            ]
        case "test_prompt_with_embedded_resource":
            resource = _embedded(args["resourceUri"], "Embedded resource content for testing.")
            messages = [
                _user(resource),
                _user(_text("Please process the embedded resource above.")),
            ]
        case "test_prompt_with_image":
            image = types.ImageContent(type="image", data=PNG, mime_type="image/png")
            messages = [_user(image), _user(_text("Please analyze the image above."))]
        case _:
            ask = {"user_context": _ask_name("What context should the prompt use?", "context")}
            answers = await _ask(ctx, params, ask)
            if isinstance(answers, types.InputRequiredResult):
                return answers
            context = _accepted(answers["user_context"], "context")
            messages = [_user(_text(f"Use this context: {context}"))]
    return types.GetPromptResult(description=PROMPTS[params.name][0], messages=messages)


async def complete(ctx: Context, params: types.CompleteRequestParams) -> types.CompleteResult:
    """Completes the prompt arguments and the template's ``id`` from small fixed lists."""
    words = {"arg1": ["paris", "park", "party"], "arg2": ["hello", "help"], "id": ["123", "456"]}
    values = [w for w in words.get(params.argument.name, []) if w.startswith(params.argument.value)]
    return types.CompleteResult(
        completion=types.Completion(values=values, total=len(values), has_more=False)
    )


# --- resources ---------------------------------------------------------------------------------

RESOURCES: dict[str, tuple[str, str, str]] = {
    "test://static-text": ("static-text", "A static text resource", "text/plain"),
    "test://static-binary": ("static-binary", "A static PNG resource", "image/png"),
    WATCHED: ("watched-resource", "A resource clients can subscribe to", "text/plain"),
}
TEMPLATE = "test://template/{id}/data"
ASKS_FIRST = "test://asks-first"  # readable, not listed: asks which section first
SUBSCRIBED: set[str] = set()


async def list_resources(
    ctx: Context, params: types.PaginatedRequestParams | None
) -> types.ListResourcesResult:
    resources = [
        types.Resource(uri=uri, name=name, description=description, mime_type=mime)
        for uri, (name, description, mime) in RESOURCES.items()
    ]
    return types.ListResourcesResult(resources=resources)


async def list_templates(
    ctx: Context, params: types.PaginatedRequestParams | None
) -> types.ListResourceTemplatesResult:
    template = types.ResourceTemplate(
        uri_template=TEMPLATE,
        name="template-data",
        description="Data for an id",
        mime_type="application/json",
    )
    return types.ListResourceTemplatesResult(resource_templates=[template])


async def read_resource(
    ctx: Context, params: types.ReadResourceRequestParams
) -> types.ReadResourceResult | types.InputRequiredResult:
    uri = str(params.uri)
    contents: types.TextResourceContents | types.BlobResourceContents
    if uri == ASKS_FIRST:  # not a suite scenario: the gateway's own tests read it
        answers = await _ask(ctx, params, {"section": _ask_name("Which section?", "section")})
        if isinstance(answers, types.InputRequiredResult):
            return answers
        section = _accepted(answers["section"], "section")
        contents = types.TextResourceContents(uri=uri, mime_type="text/plain", text=f"{section}")
    elif uri == "test://static-text":
        contents = types.TextResourceContents(
            uri=uri, mime_type="text/plain", text="This is the content of the static text resource."
        )
    elif uri == "test://static-binary":
        contents = types.BlobResourceContents(uri=uri, mime_type="image/png", blob=PNG)
    elif uri == WATCHED:
        contents = types.TextResourceContents(
            uri=uri, mime_type="text/plain", text="Watched resource content."
        )
    elif uri.startswith("test://template/") and uri.endswith("/data") and uri.count("/") == 4:
        item = uri.split("/")[3]
        data = {"id": item, "templateTest": True, "data": f"Data for ID: {item}"}
        contents = types.TextResourceContents(
            uri=uri, mime_type="application/json", text=json.dumps(data)
        )
    else:
        raise MCPError(code=types.INVALID_PARAMS, message="Resource not found", data={"uri": uri})
    return types.ReadResourceResult(contents=[contents])


async def subscribe(ctx: Context, params: types.SubscribeRequestParams) -> types.EmptyResult:
    SUBSCRIBED.add(str(params.uri))
    return types.EmptyResult()


async def unsubscribe(ctx: Context, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
    SUBSCRIBED.discard(str(params.uri))
    return types.EmptyResult()


async def set_level(ctx: Context, params: types.SetLevelRequestParams) -> types.EmptyResult:
    return types.EmptyResult()


BUS = InMemorySubscriptionBus()


def build() -> Server[Any]:
    server = Server(
        "agentcards-conformance",
        version="1.0.0",
        instructions="AgentCards' reference server for the MCP conformance suite (test fixture).",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_prompts=list_prompts,
        on_get_prompt=get_prompt,
        on_completion=complete,
        on_list_resources=list_resources,
        on_list_resource_templates=list_templates,
        on_read_resource=read_resource,
        on_subscribe_resource=subscribe,
        on_unsubscribe_resource=unsubscribe,
        on_subscriptions_listen=ListenHandler(BUS),
        on_set_logging_level=set_level,
    )
    conformance_tasks.install(server)
    return server


async def _serve_stdio(server: Server[Any]) -> None:
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--http", type=int, metavar="PORT", help="serve streamable HTTP at /mcp on PORT"
    )
    options = parser.parse_args()
    server = build()
    if options.http is None:
        anyio.run(_serve_stdio, server)
        return
    import uvicorn

    app = server.streamable_http_app(host="127.0.0.1")
    uvicorn.run(app, host="127.0.0.1", port=options.http, log_level="warning", http="h11")


if __name__ == "__main__":
    main()
