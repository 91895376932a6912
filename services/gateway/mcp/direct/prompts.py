"""Prompts on a direct endpoint and argument completions for them (and for resource
templates): the server's own, ``<server>.<prompt>`` on the aggregate."""

from __future__ import annotations

from typing import Any

from mcp import types
from mcp.server.context import ServerRequestContext

from services.gateway.mcp import connecting
from services.gateway.mcp.direct.endpoint import Endpoint
from services.gateway.mcp.direct.forwarding import forwarded_params, forwarded_retry, input_asked
from services.gateway.mcp.direct.naming import split_name
from services.gateway.mcp.errors import protocol_errors
from services.gateway.ops import direct as ops
from services.gateway.ops import downstream_resources as downstream
from services.gateway.ops.policy import refuse_prompt


async def list_prompts(
    endpoint: Endpoint, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
) -> types.ListPromptsResult:
    """``prompts/list``: the endpoint's prompts the caller may use."""
    caller = await endpoint.principal(ctx)
    endpoint.listen(ctx)
    with protocol_errors():  # one server's endpoint: its failure (connect first) is the answer
        listed = await downstream.list_prompts(
            endpoint.get_state(), caller=caller, server=endpoint.name
        )
    prompts = []
    for item in listed["prompts"]:
        server = item.pop("server")
        if endpoint.name is None:
            item["name"] = f"{server}{ops.AGGREGATE_SEPARATOR}{item['name']}"
            prompts.append(item)
        elif server == endpoint.name:
            prompts.append(item)
    return types.ListPromptsResult.model_validate({"prompts": prompts})


async def get_prompt(
    endpoint: Endpoint, ctx: ServerRequestContext[Any], params: types.GetPromptRequestParams
) -> types.GetPromptResult | types.InputRequiredResult:
    """``prompts/get``, answered by the prompt's server (decided by policy first)."""
    principal = await endpoint.principal(ctx)
    body = forwarded_retry(params)
    state = endpoint.get_state()
    with protocol_errors():  # a person who must connect first: asked to, if we can
        server, body["name"] = split_name(endpoint.name, params.name, what="prompt")
        await refuse_prompt(
            state, principal=principal, server=server, name=body["name"],
            arguments=params.arguments,
        )  # fmt: skip
        result = await connecting.answered(state, ctx, params, lambda: downstream.server_request(
            state, op="get_prompt", server=server, params=body, caller=principal))  # fmt: skip
    if isinstance(result, types.InputRequiredResult):
        return result
    if (asked := input_asked(ctx, result, f"prompts/get of {params.name!r}")) is not None:
        return asked
    return types.GetPromptResult.model_validate(result)


async def complete(
    endpoint: Endpoint, ctx: ServerRequestContext[Any], params: types.CompleteRequestParams
) -> types.CompleteResult:
    """``completion/complete`` of a prompt's or a resource template's argument, answered by
    its server."""
    caller = await endpoint.principal(ctx)
    body = forwarded_params(params)
    ref = params.ref
    with protocol_errors():
        if isinstance(ref, types.PromptReference):
            server, body["ref"]["name"] = split_name(endpoint.name, ref.name, what="prompt")
        elif endpoint.name is None:  # a template named as on /mcp: agentcards://<server>/<uri>
            server, body["ref"]["uri"] = downstream.split_gateway_uri(ref.uri)
        else:
            server = endpoint.name
        result = await downstream.server_request(
            endpoint.get_state(), op="complete", server=server, params=body, caller=caller
        )
    return types.CompleteResult.model_validate(result)
